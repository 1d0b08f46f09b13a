"""Single-thread FIFO executors: the delivery threads of a channel.

Regular messages are handed over here by the ordering protocols (NAKACK, UNICAST) in per-sender order,
and everything above them, the application's ``receive`` included, runs on this thread; receive threads
never wait for the application. A second executor delivers OOB messages.

The hand-over is on every message's path, so it is kept to C calls: ``submit`` appends to a deque and, only
when the thread sleeps, releases a lock the thread is blocked on (a lock used as a binary semaphore; a
``threading.Condition`` costs a few microseconds of Python per hand-over on each side).
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
        self._wake = threading.Lock()
        self._wake.acquire()             # taken = nothing to report; release() wakes the thread
        self._sleeping = False           # the thread is (about to be) blocked on _wake
        self._running = True
        self._busy = False
        self._idle = threading.Condition()   # for drain() only
        self._drainers = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._running:
            return
        self._q.append((fn, args))
        if self._sleeping:               # read after the append: see _run for why no wake-up is lost
            self._signal()

    def _signal(self) -> None:
        try:
            self._wake.release()
        except RuntimeError:             # already released, not yet taken by the thread
            pass

    def in_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _run(self) -> None:
        q = self._q
        while True:
            while q:
                self._busy = True            # before the pop: drain() never sees an empty queue and no task
                fn, args = q.popleft()
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - a failing callback must not stop delivery
                    log.exception("%s: task %r failed", self.name, getattr(fn, "__name__", fn))
            self._busy = False
            if self._drainers:
                with self._idle:
                    self._idle.notify_all()
            if not self._running:
                return
            # Announce the sleep, then look again: a submit() that appended before this store is seen by the
            # check below; one that appends after it sees _sleeping and releases _wake (the GIL orders both).
            self._sleeping = True
            if not q and self._running:
                self._wake.acquire()
            self._sleeping = False

    @property
    def pending(self) -> int:
        return len(self._q)

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until everything submitted so far has run (not from the executor's own thread)."""
        if self.in_thread():
            return False
        with self._idle:
            self._drainers += 1
            try:
                return self._idle.wait_for(lambda: not self._q and not self._busy, timeout)
            finally:
                self._drainers -= 1

    def stop(self, timeout: float = 2.0, drain: bool = False) -> None:
        if not drain:
            self._q.clear()
        self._running = False
        self._signal()
        if not self.in_thread():
            self._thread.join(timeout)
