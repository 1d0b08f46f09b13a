"""Single-thread FIFO executors: the delivery threads of a channel.

Regular messages are handed over here by the ordering protocols (NAKACK, UNICAST) in per-sender order,
and everything above them, the application's ``receive`` included, runs on this thread; receive threads
never wait for the application. A second executor delivers OOB messages.

The hand-over is on every message's path, so it is kept to C calls: ``submit`` appends to a deque and, only
when the thread sleeps, wakes it (:class:`Wakeup`; a ``threading.Condition`` costs a few microseconds of Python
per hand-over on each side).

With the transport's ``thread_pool.enabled="false"`` (``oob_thread_pool.enabled="false"``) the regular (OOB)
executor lets the caller run a task when it is idle (``caller_runs``), as Java's ``DirectExecutor`` does when
the pools are disabled: the receive thread then delivers, with no hand-over and no thread switch.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable

log = logging.getLogger("jgpy.executor")


class Wakeup:
    """Sleep and wake-up of one consumer thread, for producers that make work visible with C calls (a deque).

    A lock serves as a binary semaphore (taken: nothing pending). The consumer announces its sleep, then
    checks for work once more and only then blocks; a producer appends first and then reads ``sleeping``, so
    (the GIL orders both) either the consumer sees the work or the producer sees the sleeper and wakes it.
    Hot paths test ``sleeping`` themselves and call :meth:`wake` only then."""

    __slots__ = ("_lock", "sleeping")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self.sleeping = False

    def wake(self) -> None:
        self.sleeping = False            # the producers that follow, until the consumer runs, need not wake it
        try:
            self._lock.release()
        except RuntimeError:             # already released, not yet taken by the consumer
            pass

    def sleep_unless(self, ready: Callable[[], Any], doze: float = 0.0) -> None:
        """Block until woken, unless ``ready()`` is true once the sleep is announced. May return spuriously.

        ``doze`` > 0: first sleep that many seconds unannounced (producers do not wake the thread, so a
        stream of work costs them no wake-up per item) and block only if there is still nothing to do.
        """
        if doze > 0.0:
            self._lock.acquire(timeout=doze)
            if ready():
                return
        self.sleeping = True
        if not ready():
            self._lock.acquire()
        self.sleeping = False


class SerialExecutor:
    """One thread runs the submitted tasks, in submission order.

    ``caller_runs``: a task submitted while the executor is idle (nothing queued, nothing running) runs at
    once in the submitting thread. Only one thread runs tasks at any time, the executor's own or such a
    submitter (whoever holds the claim), so order and mutual exclusion stay those of a single thread. A
    submitter never waits for the claim (it queues the task when it cannot take it), so no lock order
    through ``submit`` can deadlock, and a burst that finds the executor busy is delivered by its thread.
    """

    def __init__(self, name: str, caller_runs: bool = False):
        self.name = name
        self.caller_runs = caller_runs
        self._q: collections.deque = collections.deque()
        self._wakeup = Wakeup()
        self._running = True
        self._busy = False
        self._claim = threading.Lock()       # caller_runs: held by whoever runs tasks
        self._runner = 0                     # the thread id of a submitter running a task (0: none)
        self._idle = threading.Condition()   # for drain() only
        self._drainers = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._running:
            return
        if self.caller_runs and not self._q and self._claim.acquire(False):
            if not self._q:                  # still idle: run it here
                self._run_here(fn, args)
                return
            self._claim.release()            # something was queued meanwhile: ours goes after it
        self._q.append((fn, args))
        if self._wakeup.sleeping:        # read after the append (see Wakeup)
            self._wakeup.wake()

    def _run_here(self, fn: Callable[..., Any], args: tuple) -> None:
        self._runner = threading.get_ident()
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a failing callback must not kill the submitting thread
            log.exception("%s: task %r failed", self.name, getattr(fn, "__name__", fn))
        finally:
            self._runner = 0
            self._claim.release()            # tasks queued meanwhile: their producers woke the thread
            if self._drainers:
                with self._idle:
                    self._idle.notify_all()

    def in_thread(self) -> bool:
        """Whether the calling thread is the one running tasks (the executor's, or a submitter's right now)."""
        return threading.current_thread() is self._thread or (self._runner != 0 and
                                                              threading.get_ident() == self._runner)

    def _run(self) -> None:
        q = self._q
        claim = self._claim if self.caller_runs else None
        while True:
            while q:
                self._busy = True            # before the pop: drain() never sees an empty queue and no task
                if claim is not None:
                    claim.acquire()          # a submitter may be running a task: it goes first
                try:
                    while q:
                        try:
                            fn, args = q.popleft()
                        except IndexError:   # stop() cleared the queue meanwhile
                            break
                        try:
                            fn(*args)
                        except Exception:  # noqa: BLE001 - a failing callback must not stop delivery
                            log.exception("%s: task %r failed", self.name, getattr(fn, "__name__", fn))
                finally:
                    if claim is not None:
                        claim.release()
            self._busy = False
            if self._drainers:
                with self._idle:
                    self._idle.notify_all()
            if not self._running:
                return
            self._wakeup.sleep_unless(self._has_work)

    def _has_work(self) -> bool:
        return bool(self._q) or not self._running

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
                return self._idle.wait_for(lambda: not self._q and not self._busy and not self._runner, timeout)
            finally:
                self._drainers -= 1

    def stop(self, timeout: float = 2.0, drain: bool = False) -> None:
        if not drain:
            self._q.clear()
        self._running = False
        self._wakeup.wake()
        if not self.in_thread():
            self._thread.join(timeout)
