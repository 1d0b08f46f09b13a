# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-task path of :class:`jgpy.stack.executor.SerialExecutor` in C.

Every delivered batch goes through ``enqueue`` + ``run_pending`` (or the executor thread's loop), and the
channel asks ``in_thread`` for each one: as Python methods these were five frames per batch, a measurable part
of a round trip. The semantics are documented on ``SerialExecutor``; this is their only implementation. The
ordering protocols' cores hand over with C calls (``_enqueue``, ``_run_pending``: serial.pxd; see
``jgpy._core.reliable``).
"""

import logging
import threading
from collections import deque

from cpython.pythread cimport PyThread_get_thread_ident

log = logging.getLogger("jgpy.executor")

class _Relays(threading.local):
    """The per-thread fields below, with their defaults as class attributes: reading one a thread never set
    finds the default instead of raising (and catching) an AttributeError, which costs more than the rest of
    a lone message's way up."""

    pair = None
    consume = None
    running = False


relays = _Relays()
"""Per receive thread: ``relays.pair`` = (hand_over, take_back), set by ``executor.register_relay``;
``relays.running``: the thread runs an executor's tasks between the two calls. A thread that reads its own
answers (``Channel.read_while``) has ``relays.pair`` = :data:`GUEST` and ``relays.consume``, meanwhile."""

GUEST = ("guest",)
"""``relays.pair`` of a thread that reads its own answers: it runs no executor's tasks (they go to the
executor's thread), and no executor counts it as its own (``in_thread`` is False), so nothing it reads is
delivered nested in the task it may be waiting in."""
cdef object _GUEST = GUEST


def _yes() -> bool:
    return True


def _nothing() -> None:
    pass


cdef tuple _NO_RELAY = (_yes, _nothing)


cdef class SerialCore:
    """Queue, claim and task running of a serial executor (see ``SerialExecutor``, its subclass, which owns
    the thread). ``_runner``: the thread id of a submitter running tasks (0: none). Fields: serial.pxd."""

    def __init__(self, str name, bint caller_runs=False, bint relay=False, wakeup=None):
        self.name = name
        self.caller_runs = caller_runs
        self.relay = relay
        self._q = deque()
        self._append = self._q.append
        self._popleft = self._q.popleft
        self._wakeup = wakeup
        self._running = True
        self._busy = False
        self._claim = threading.Lock()
        self._acquire = self._claim.acquire
        self._release = self._claim.release
        self._runner = 0
        self._thread_ident = 0
        self._drainers = 0
        self._idle = threading.Condition()

    def submit(self, fn, *args) -> None:
        """Queue ``fn(*args)``; the calling thread runs it (and what is queued) when it may (see the class doc).
        Not while holding a lock that other submitters take: use :meth:`enqueue` there."""
        if self._enqueue(fn, args):
            self._run_pending()

    def enqueue(self, fn, *args) -> bool:
        """Queue ``fn(*args)`` without running anything. The ordering protocols call this under the lock that
        orders their hand-overs, so the queue keeps that order. Returns True when the calling thread may run
        tasks: it should then call :meth:`run_pending` once it has released its locks (tasks run the
        application, which must not run under a protocol's lock)."""
        return self._enqueue(fn, args)

    cdef bint _enqueue(self, fn, tuple args) except -1:
        if not self._running:
            return False
        self._append((fn, args))
        if self._relay_pair() is not None:
            return True
        if self._wakeup.sleeping:            # read after the append (see Wakeup)
            self._wakeup.wake()
        return False

    def run_pending(self) -> None:
        """Run what is queued in the calling thread, if it may run tasks and nobody else is running them (they
        look at the queue again when they stop); a relay that refuses leaves them to the executor's thread."""
        self._run_pending()

    cdef int _run_pending(self) except -1:
        cdef object relay = self._relay_pair()
        if relay is None or not self._q or not self._acquire(False):
            return 0
        if relay is _NO_RELAY:
            self._run_here()
            return 0
        # a receive thread that runs another executor's tasks has handed its socket over already, and the inner
        # take_back would take it back while the outer tasks still run: nested, the executor's thread runs them
        if relays.running or not (<tuple>relay)[0]():   # or refused (a stream on our socket)
            self._release()
            if self._wakeup.sleeping:
                self._wakeup.wake()
            return 0
        relays.running = True
        try:
            self._run_here()
        finally:
            relays.running = False
            (<tuple>relay)[1]()
        return 0

    cdef object _relay_pair(self):
        """The calling thread's (hand_over, take_back) if it may run tasks, else None."""
        cdef object pair
        if self.relay or self.caller_runs:
            pair = relays.pair
            if pair is _GUEST:
                return None
            if pair is None and self.caller_runs:
                return _NO_RELAY
            return pair
        return None

    cdef int _run_here(self) except -1:
        """(claim held) Run the queue until it is empty; release the claim."""
        q = self._q
        cdef unsigned long me = PyThread_get_thread_ident()
        while True:
            self._runner = me
            try:
                self._run_queued()
            finally:
                self._runner = 0
                self._release()
                if self._drainers:
                    with self._idle:
                        self._idle.notify_all()
            # a task queued after our last look by a submitter that found the claim taken: ours to run
            if not q or not self._running or not self._acquire(False):
                return 0

    cdef int _run_queued(self) except -1:
        """(claim held) Run tasks until the queue is empty."""
        q = self._q
        while q:
            try:
                fn, args = self._popleft()
            except IndexError:               # stop() cleared the queue meanwhile
                break
            self._call(fn, args)
        return 0

    cdef int _call(self, fn, tuple args) except -1:
        try:
            fn(*args)
        except Exception:  # a failing callback must not stop delivery or kill its thread
            log.exception("%s: task %r failed", self.name, getattr(fn, "__name__", fn))
        return 0

    cpdef bint in_thread(self):
        """Whether the calling thread is the one running tasks (the executor's, or a submitter's right now)."""
        cdef unsigned long me = PyThread_get_thread_ident()
        if me == self._thread_ident or (self._runner != 0 and me == self._runner):
            return relays.pair is not _GUEST
        return False

    def run_queue(self) -> None:
        """(the executor's thread) Run the queue until it is empty, taking the claim (a submitter may be running
        tasks: it goes first)."""
        q = self._q
        while q:
            self._busy = True                # before the pop: drain() never sees an empty queue and no task
            self._acquire()
            try:
                self._run_queued()
            finally:
                self._release()
        self._busy = False

    @property
    def pending(self) -> int:
        return len(self._q)
