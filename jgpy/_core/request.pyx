# cython: language_level=3
"""What every remote call runs through, in C: the core ``GroupRequest`` (``jgpy/blocks/correlator.py``) derives
from. It holds the answers by member, their counts, ``done`` and the latch a caller waits on, and runs a call's
common steps: an answer without a response filter (:meth:`RequestCore.receive_response`), completion
(``_complete``, ``_notify``), the caller's wait without a filter (:meth:`RequestCore.wait`, reading its answers
on its own thread through the correlator's ``read_while``) and the answer a reading caller takes
(``_consume``). Anything that runs application code (response filters, done callbacks) or is rare
(suspicions, views, offers) stays in the Python class, which calls back in here.

The latch is a C lock taken at creation and released once, when the request first becomes complete or done; a
waiter takes it with its timeout (the GIL released, signals handled as ``threading.Lock.acquire`` handles them)
and gives it back at once, so every other waiter passes too.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport (PY_LOCK_ACQUIRED, PY_LOCK_INTR, PyLockStatus, PyThread_acquire_lock,
                               PyThread_allocate_lock, PyThread_free_lock, PyThread_get_thread_ident,
                               PyThread_release_lock, PyThread_type_lock, WAIT_LOCK)
from libc.stdint cimport int64_t

from jgpy._core.clock cimport monotonic_ns
from jgpy._core.headers cimport MultiDestinationHeader, RequestCorrelatorHeader
from jgpy._core.message cimport Message
from jgpy.errors import JgpyError

import threading
from _thread import RLock

cdef extern from "pythread.h":
    ctypedef long long PY_TIMEOUT_T
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock lock, PY_TIMEOUT_T microseconds,
                                             int intr_flag) nogil

cdef enum:
    CORRELATOR_ID = 201
    REQ = 0
    RSP = 1
    TAG_BYTEARRAY = 19            # Util.objectToByteBuffer's tag of a byte[]
    GET_FIRST = 1
    GET_ALL = 2
    GET_MAJORITY = 3
    GET_ABS_MAJORITY = 4
    GET_NONE = 6

#: longer waits than this (seconds) wait for ever (a deadline in ns must fit in 63 bits)
cdef double _FOREVER_S = 1e9

# set by configure(): the Python half's answer type (Rsp) and list type (RspList, over a dict it owns: _rsps)
cdef object _rsp_type = None
cdef object _rsp_new = None
cdef object _rsplist_type = None


def configure(type rsp_type, rsplist_type) -> None:
    """What the core takes from ``jgpy.blocks.correlator``: the type of one member's answer (``Rsp``: its fields
    ``sender``, ``value``, ``received``, ``suspected``) and of the answers of a call (``RspList``, whose
    ``_rsps`` is the dict of them)."""
    global _rsp_type, _rsp_new, _rsplist_type
    if not issubclass(rsp_type, RspCore):
        raise TypeError(f"{rsp_type.__name__} must derive from RspCore")
    _rsp_type, _rsp_new, _rsplist_type = rsp_type, rsp_type.__new__, rsplist_type


cdef class RspCore:
    """One member's answer to a call (``Rsp`` in ``jgpy.blocks.correlator`` derives from it): ``value`` (a value,
    or the exception the call raised there), ``received``, ``suspected``."""

    cdef public object sender
    cdef public object value
    cdef public bint received
    cdef public bint suspected

    def __init__(self, sender):
        self.sender = sender


cdef RspCore _new_rsp(sender, value, bint received, bint suspected):
    cdef RspCore r = <RspCore>_rsp_new(_rsp_type)
    r.sender = sender
    r.value = value
    r.received = received
    r.suspected = suspected
    return r


cdef inline Py_ssize_t _majority(Py_ssize_t n) noexcept:
    return n if n < 2 else n // 2 + 1


cdef class RequestCore:
    """The C half of ``GroupRequest`` (see the module docstring). Its fields are the request's: ``corr``,
    ``req_id``, ``options``, ``rsps`` ({member: Rsp}), ``done``, and the state the Python half shares."""

    cdef public object corr
    cdef public object req_id
    cdef public object options
    cdef public dict rsps
    cdef public bint done
    cdef public bint _notified                # the latch is open and the callbacks taken
    cdef public Py_ssize_t _num_received
    cdef public Py_ssize_t _num_suspected
    cdef public object _lock                  # an RLock: the answers, the counts, done, the callbacks
    cdef public object _cv                    # a Condition on _lock with a response filter, else None
    cdef public list _callbacks
    cdef public list _inbox                   # answers other threads offered a filtering caller
    cdef public object _waker                 # wakes a waiter that reads its answers (read_while)
    cdef public unsigned long _reader         # the first such waiter's thread: its own completions wake nobody
    cdef public Py_ssize_t _takers            # threads in _wait_filtered, or reserved by a caller (reserve)
    cdef public bint _reserved
    cdef object _filter                       # options.rsp_filter, as the request was made
    cdef int _mode
    cdef object _acquire, _release            # _lock's methods
    cdef PyThread_type_lock _latch
    cdef bint _latch_held

    def __cinit__(self, *args, **kwargs):
        self._latch = PyThread_allocate_lock()
        if self._latch == NULL:
            raise MemoryError("cannot allocate a request's latch")
        PyThread_acquire_lock(self._latch, WAIT_LOCK)
        self._latch_held = True

    def __dealloc__(self):
        if self._latch != NULL:
            if self._latch_held:
                PyThread_release_lock(self._latch)
            PyThread_free_lock(self._latch)

    def __init__(self, corr, req_id, targets, options):
        """A call to ``targets`` (``options``: a RequestOptions) as request ``req_id`` of ``corr`` (None: a
        request nobody sends, e.g. in tests); an answer, not received yet, for each target."""
        lock = RLock()                # re-entrant: an RspFilter runs under it and may read the request
        # with a response filter: answers other threads read, handed to a waiting caller (offer), which runs
        # the filter on its own thread (a caller waiting in an OOB handler would otherwise wait for them
        # behind itself in the OOB queue)
        self._setup(corr, req_id, targets, options, lock,
                    threading.Condition(lock) if options.rsp_filter is not None else None)

    cdef _setup(self, corr, req_id, targets, options, lock, cv):
        cdef dict rsps = {}
        if _rsp_type is None:
            raise RuntimeError("jgpy._core.request.configure() was not called (import jgpy.blocks.correlator)")
        for a in targets:
            rsps[a] = _new_rsp(a, None, False, False)
        self.corr = corr
        self.req_id = req_id
        self.options = options
        self.rsps = rsps
        self._filter = options.rsp_filter
        self._mode = options.mode
        self._lock = lock
        self._acquire = lock.acquire
        self._release = lock.release
        self._cv = cv
        self._callbacks = []
        self._inbox = []

    # ---- completion (under _lock)

    cdef int _is_complete(self) except -1:
        cdef Py_ssize_t n, got = self._num_received, susp = self._num_suspected
        if self.done:
            return True
        n = len(self.rsps) if self.rsps is not None else 0
        if self._mode == GET_ALL:
            return got + susp >= n
        if self._mode == GET_FIRST:
            return got > 0 or susp >= n
        if self._mode == GET_MAJORITY:
            return got + susp >= _majority(n)
        if self._mode == GET_ABS_MAJORITY:
            return got >= _majority(n)
        return True                                    # GET_NONE

    def _complete(self):
        return self._is_complete() != 0

    cdef object _open(self, bint force):
        """After a change, under ``_lock``: the first time the request is complete (or ``force``: done), open the
        latch and return the done callbacks to run outside the lock (None: none, or not now)."""
        cdef list callbacks
        if self._notified or not (force or self._is_complete()):
            return None
        self._notified = True
        if self._latch_held:
            self._latch_held = False
            PyThread_release_lock(self._latch)
        if self._cv is not None:
            self._cv.notify_all()
        if self._waker is not None and <unsigned long>PyThread_get_thread_ident() != self._reader:
            self._waker()                              # a waiter reading its answers: another thread settled it
        callbacks = self._callbacks
        if not callbacks:
            return None
        self._callbacks = []
        return callbacks

    def _notify(self, bint force):
        return self._open(force)

    # ---- an answer

    def receive_response(self, value, sender, defer=None):
        """Record ``sender``'s answer; False when the request does not expect one from it. ``defer(fn, *args)``:
        where the done callbacks run (None: here). With a response filter: the Python half's
        ``_receive_filtered``."""
        rsp = self.rsps.get(sender)
        if rsp is None:
            return False
        if self._filter is not None:
            return self._receive_filtered(rsp, value, sender, defer)
        return self._answer(rsp, value, defer)

    cdef bint _answer(self, rsp, value, defer) except -1:
        """``receive_response`` of member ``rsp`` without a response filter."""
        self._acquire()
        try:
            if self.done:
                return True
            if not (<RspCore?>rsp).received:
                (<RspCore>rsp).value = value
                (<RspCore>rsp).received = True
                self._num_received += 1
            callbacks = self._open(False)
        finally:
            self._release()
        self._run_done(callbacks, defer)
        return True

    def _run_done(self, callbacks, defer):
        """Run the done callbacks an answer released (if any): through ``defer(fn, *args)``, else here."""
        if callbacks:
            if defer is not None:
                defer(self._run, callbacks)
            else:
                self._run(callbacks)

    def _consume(self, Message msg):
        """Handle ``msg`` here if it answers this request; False: not ours. A ``byte[]`` answer from one of the
        request's members is taken here, as the correlator's ``_handle_response`` takes it (counted, the value
        read); any other answer goes to that method."""
        cdef object buf
        cdef const char* p
        hdr = msg.header(CORRELATOR_ID)
        if type(hdr) is not RequestCorrelatorHeader:
            return False
        h = <RequestCorrelatorHeader>hdr
        if h.type != RSP or h.id != self.req_id or h.corr_id != CORRELATOR_ID:
            return False
        buf = msg._buf
        rsp = self.rsps.get(msg.src)
        if (rsp is None or self.done or self._filter is not None or type(buf) is not bytes or msg._len < 1
                or msg._off + msg._len > PyBytes_GET_SIZE(buf) or PyBytes_AS_STRING(buf)[msg._off] != TAG_BYTEARRAY):
            self.corr._handle_response(msg, hdr)
            return True
        p = PyBytes_AS_STRING(buf) + msg._off
        self.corr.responses_received += 1
        self._answer(rsp, PyBytes_FromStringAndSize(p + 1, msg._len - 1), None)
        return True

    def _pending(self):
        return not self._notified and not self._inbox

    # ---- the caller

    def reserve(self):
        """Before the request is sent, by a caller that will :meth:`wait` for it: answers read before it waits
        are offered to it as well (with a response filter)."""
        if self._cv is not None:
            self._acquire()
            try:
                self._takers += 1
                self._reserved = True
            finally:
                self._release()

    def results(self):
        """The answers so far, by member (an ``RspList`` of copies)."""
        cdef dict out = {}
        self._acquire()
        try:
            for a, r in self.rsps.items():
                out[a] = _new_rsp(a, (<RspCore?>r).value, (<RspCore>r).received, (<RspCore>r).suspected)
        finally:
            self._release()
        rsps = _rsplist_type.__new__(_rsplist_type)
        rsps._rsps = out
        return rsps

    def wait(self, double timeout_ms):
        """Wait until the answers are complete or ``timeout_ms`` passed (<= 0: for ever); True if complete.
        The request is then done: the correlator forgets it, later answers are dropped."""
        cdef bint waiting, complete
        cdef double timeout = timeout_ms / 1000.0 if timeout_ms > 0 else -1.0
        self._acquire()
        try:
            waiting = not self._notified and not self._is_complete()
        finally:
            self._release()
        if timeout > _FOREVER_S:
            timeout = -1.0
        if waiting and self.corr is not None and self.corr.read_while is not None:
            timeout = self._read_answers(self.corr, timeout)
        if waiting:
            if self._cv is not None:
                self._wait_filtered(timeout)
            elif not self._notified and self._await_latch(timeout):
                PyThread_release_lock(self._latch)     # the next waiter passes too
        self._acquire()
        try:
            complete = self._is_complete()
            self.done = True
            callbacks = self._open(True)
        finally:
            self._release()
        self._forget(callbacks)
        return complete

    cdef double _read_answers(self, corr, double timeout) except? -2.0:
        """Read the answers on this thread while they are due (see the correlator's docstring); the time left."""
        cdef int64_t start = monotonic_ns()
        cdef double left
        if self._waker is None:                        # (kept: a second waiter may be the one that reads)
            self._reader = <unsigned long>PyThread_get_thread_ident()
            self._waker = corr.wake_reader
        corr.read_while(self._pending, timeout, self._consume)
        if timeout < 0:
            return timeout
        left = timeout - (monotonic_ns() - start) / 1e9
        return left if left > 0 else 0.0

    cdef bint _await_latch(self, double timeout) except -1:
        """Take the latch within ``timeout`` seconds (< 0: for ever), the GIL released; True if taken."""
        cdef PyLockStatus r
        cdef PY_TIMEOUT_T us = -1
        cdef int64_t deadline = 0, left
        if timeout >= 0:
            deadline = monotonic_ns() + <int64_t>(timeout * 1e9)
        while True:
            if timeout >= 0:
                left = deadline - monotonic_ns()
                us = left // 1000 if left > 0 else 0
            with nogil:
                r = PyThread_acquire_lock_timed(self._latch, us, 1)
            if r != PY_LOCK_INTR:
                return r == PY_LOCK_ACQUIRED
            PyErr_CheckSignals()                       # a signal handler's exception ends the wait

    def _forget(self, callbacks):
        """The request is done (``_notify(True)`` returned ``callbacks``): the correlator forgets it, then the
        callbacks run."""
        if self.corr is not None:
            (<CorrelatorCore?>self.corr)._done(self.req_id)
        if callbacks:
            self._run(callbacks)


cdef class CorrelatorCore:
    """The C half of ``RequestCorrelator`` (``jgpy/blocks/correlator.py``): our outstanding requests by id
    (``requests``, at most ``max_outstanding``, under ``_lock``), their ids, and a request's way out
    (:meth:`send_request`, through ``_send``)."""

    cdef public dict requests
    cdef public object _lock
    cdef public object _send
    cdef public Py_ssize_t max_outstanding
    cdef public int64_t requests_sent
    cdef int64_t _last_id

    def next_id(self):
        """A new request id (1, 2, ...; one C step: atomic under the GIL)."""
        self._last_id += 1
        return self._last_id

    def send_request(self, RequestCore req, Message msg, dests):
        """Send ``msg`` as request ``req`` (multicast when ``dests`` is None, else one copy per destination);
        a GET_NONE request is not remembered (rsp_expected false)."""
        cdef Message m
        cdef Py_ssize_t i, n
        cdef bint expect = req._mode != GET_NONE
        excl = req.options.exclusion_list
        if excl:
            hdr = MultiDestinationHeader(REQ, req.req_id, expect, CORRELATOR_ID, list(excl))
        else:
            hdr = RequestCorrelatorHeader(REQ, req.req_id, expect, CORRELATOR_ID)
        msg.put(CORRELATOR_ID, hdr)
        if expect:
            self._lock.acquire()
            try:
                if len(self.requests) >= self.max_outstanding:
                    raise JgpyError(f"{len(self.requests)} requests are waiting for answers already "
                                    f"(max_outstanding={self.max_outstanding})")
                self.requests[req.req_id] = req
            finally:
                self._lock.release()
        try:
            if dests is None:
                self._send(msg)
            else:
                dests = list(dests)
                n = len(dests)
                for i in range(n):
                    m = msg if i == n - 1 else msg.copy(True)
                    m.dest = dests[i]
                    self._send(m)
            self.requests_sent += 1
        except BaseException:
            self._done(req.req_id)
            raise

    cdef int _done(self, req_id) except -1:
        self._lock.acquire()
        try:
            self.requests.pop(req_id, None)
        finally:
            self._lock.release()
        return 0

    def done(self, req_id):
        """Forget request ``req_id`` (its answers are dropped from now on)."""
        self._done(req_id)
