"""Single-thread FIFO executors: the delivery threads of a channel.

Regular messages are handed over here by the ordering protocols (NAKACK, UNICAST) in per-sender order,
and everything above them, the application's ``receive`` included, runs on this thread; receive threads
never wait for the application. A second executor delivers OOB messages.

The hand-over is on every message's path, so it is in C (``jgpy._core.serial.SerialCore``, the base class of
:class:`SerialExecutor`): ``enqueue`` appends to a deque and, only when the thread sleeps, wakes it (:class:`Wakeup`; a ``threading.Condition`` costs a few microseconds of Python
per hand-over on each side).

With the transport's ``thread_pool.enabled="false"`` (``oob_thread_pool.enabled="false"``) the regular (OOB)
executor lets the caller run a task when it is idle (``caller_runs``), as Java's ``DirectExecutor`` does when
the pools are disabled: the receive thread then delivers, with no hand-over and no thread switch. With the
pools enabled (the default) the regular executor lets the receive threads do the same (``relay``), but only
after they have handed their socket to another receive thread (``register_relay``), so that no socket ever
waits for the application.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from jgpy._core.serial import SerialCore, relays


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


def register_relay(hand_over: Callable[[], bool], take_back: Callable[[], None]) -> None:
    """Declare the calling thread a receive thread with a relay: ``hand_over()`` makes another thread take
    over its socket and returns True (False: it would rather not, e.g. because its socket has a backlog),
    ``take_back()`` makes it the reader again (``DatagramLoop`` in relay mode). Executors created with
    ``relay=True`` then let this thread run their tasks between the two calls, so the socket is still read
    while it runs them."""
    relays.pair = (hand_over, take_back)


class SerialExecutor(SerialCore):
    """One thread runs the submitted tasks, in submission order.

    Some submitters may run tasks themselves, in their own thread, with no hand-over and no thread switch:
    with ``caller_runs`` (the thread pools disabled) every submitter, with ``relay`` the receive threads that
    registered a relay (:func:`register_relay`; the thread pools enabled: such a thread hands its socket to
    another reader before it runs tasks, so no socket waits for the application, unless its socket carries
    a stream, then it refuses and the tasks go to the executor's thread). Such a submitter queues its task
    and, when nobody else is running tasks, runs the queue until it is empty; otherwise whoever is running
    tasks runs it. Only one thread runs tasks at any time, the executor's own or such a submitter (whoever
    holds the claim), so order and mutual exclusion stay those of a single thread. A submitter never waits
    for the claim, and tasks never run under a protocol's lock (:meth:`enqueue` + :meth:`run_pending`), so no
    lock order through the executor can deadlock. Other submitters queue the task and wake the executor's
    thread.
    """

    def __init__(self, name: str, caller_runs: bool = False, relay: bool = False):
        super().__init__(name, caller_runs, relay, Wakeup())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._thread_ident = self._thread.ident

    # submit, enqueue, run_pending, in_thread, pending: SerialCore (C), documented there

    def _run(self) -> None:
        self._thread_ident = threading.get_ident()
        while True:
            self.run_queue()
            if self._drainers:
                with self._idle:
                    self._idle.notify_all()
            if not self._running:
                return
            self._wakeup.sleep_unless(self._has_work)

    def _has_work(self) -> bool:
        return bool(self._q) or not self._running

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
