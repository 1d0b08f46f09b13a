"""Rate-limited logging for the receive path: a flood of bad datagrams must not flood the log.

Anything a peer can trigger is logged through a :class:`RateLimitedLog`: at most one line per key and
interval, and the table of keys is bounded (least recently logged keys go first), so keys that name a
made-up sender cannot grow it without limit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

#: keys a RateLimitedLog remembers at most; past that the least recently logged key is forgotten
MAX_KEYS = 512


class RateLimitedLog:
    """At most one line per ``interval`` seconds per key; the next line says how many were suppressed.

    ``max_keys`` bounds the per-key table: when a new key would exceed it, the least recently logged key is
    forgotten, but only once it is quiet for ``interval``: a flood of distinct keys gives at most ``max_keys``
    lines per interval in all.
    """

    def __init__(self, logger: logging.Logger, interval: float = 5.0, max_keys: int = MAX_KEYS):
        self.logger = logger
        self.interval = interval
        self.max_keys = max_keys
        self._last: OrderedDict[str, list] = OrderedDict()    # key -> [last time logged, suppressed since]
        self._lock = threading.Lock()
        #: lines suppressed in all (a counter for tests and stats)
        self.suppressed = 0

    def log(self, level: int, key: str, msg: str, *args, exc_info=None) -> bool:
        """Log ``msg % args`` unless ``key`` logged less than ``interval`` ago; True when it was logged."""
        if not self.logger.isEnabledFor(level):
            return False
        now = time.monotonic()
        with self._lock:
            entry = self._last.get(key)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                self.suppressed += 1
                return False
            if entry is None:
                if len(self._last) >= self.max_keys:
                    oldest_key, oldest = next(iter(self._last.items()))
                    if now - oldest[0] < self.interval:      # every key is busy: drop this line
                        self.suppressed += 1
                        return False
                    del self._last[oldest_key]
                n = 0
                self._last[key] = [now, 0]
            else:
                n = entry[1]
                entry[0], entry[1] = now, 0
                self._last.move_to_end(key)
        if n:
            msg += f" (and {n} more like this in the last {self.interval:g}s)"
        self.logger.log(level, msg, *args, exc_info=exc_info)
        return True

    def debug(self, key: str, msg: str, *args) -> bool:
        return self.log(logging.DEBUG, key, msg, *args)

    def warning(self, key: str, msg: str, *args) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def error(self, key: str, msg: str, *args) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def exception(self, key: str, msg: str, *args, exc_info=True) -> bool:
        """``logger.exception`` (a traceback) rate-limited like the others: one traceback per key and interval."""
        return self.log(logging.ERROR, key, msg, *args, exc_info=exc_info)

    def __len__(self) -> int:
        return len(self._last)
