"""Single-thread FIFO executors: the delivery threads of a channel.

Regular messages are handed over here by the ordering protocols (NAKACK, UNICAST) in per-sender order,
and everything above them, the application's ``receive`` included, runs on this thread; receive threads
never wait for the application. A second executor delivers OOB messages.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable

log = logging.getLogger("jgpy.executor")


class SerialExecutor:
    def __init__(self, name: str):
        self.name = name
        self._q: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._running = True
        self._busy = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._cond:
            if not self._running:
                return
            self._q.append((fn, args))
            if len(self._q) == 1:
                self._cond.notify()

    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        q = self._q
        while True:
            with self._cond:
                while not q and self._running:
                    self._busy = False
                    self._cond.notify_all()
                    self._cond.wait()
                if not q:
                    self._busy = False
                    self._cond.notify_all()
                    return
                fn, args = q.popleft()
                self._busy = True
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a failing callback must not stop delivery
                log.exception("%s: task %r failed", self.name, getattr(fn, "__name__", fn))

    @property
    def pending(self) -> int:
        return len(self._q)

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far has run (not from the executor's own thread)."""
        if self.in_thread():
            return False
        with self._cond:
            return self._cond.wait_for(lambda: not self._q and not self._busy, timeout)

    def stop(self, timeout: float = 2.0, drain: bool = False) -> None:
        with self._cond:
            if not drain:
                self._q.clear()
            self._running = False
            self._cond.notify_all()
        if not self.in_thread():
            self._thread.join(timeout)
