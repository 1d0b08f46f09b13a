"""Rate-limited logging for the receive path: a flood of bad datagrams must not flood the log."""

from __future__ import annotations

import logging
import threading
import time


class RateLimitedLog:
    """At most one line per ``interval`` seconds per key; the next line says how many were suppressed."""

    def __init__(self, logger: logging.Logger, interval: float = 5.0):
        self.logger = logger
        self.interval = interval
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def log(self, level: int, key: str, msg: str, *args) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return
            self._last[key] = now
            n = self._suppressed.pop(key, 0)
        if n:
            msg += f" (and {n} more like this in the last {self.interval:g}s)"
        self.logger.log(level, msg, *args)

    def warning(self, key: str, msg: str, *args) -> None:
        self.log(logging.WARNING, key, msg, *args)

    def error(self, key: str, msg: str, *args) -> None:
        self.log(logging.ERROR, key, msg, *args)
