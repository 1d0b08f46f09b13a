# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=False
# embedsignature is off here: Cython 3.3 misplaces the "*" of keyword-only __init__ arguments in the
# embedded signature; the class docstring starts with the right one.
# Every C index below is into an array allocated here with a size checked in __init__ (batch).
"""The receive loop of a UDP socket: ``epoll_wait()`` + ``recvmmsg()`` with the GIL released, one handler call per
batch (:class:`DatagramLoop`). Several threads share a socket through a :class:`jgpy._core.relay.Relay`.

Nothing here knows about JGroups: the transport creates and configures its sockets with Python's :mod:`socket`
module and hands them over.
"""

import logging
import os
import threading

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.errno cimport errno, EAGAIN, EINTR, EBADF, ENOTSOCK
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy
from posix.uio cimport iovec

from jgpy._core.clock cimport monotonic_ns, sleep_us
from jgpy._core.relay cimport MAX_READERS, Relay
from jgpy._core.sockets cimport (MAX_VLEN, MSG_DONTWAIT, MSG_TRUNC, SOCK_DGRAM, mmsghdr, recvmmsg, sock_fd,
                                 sockaddr_storage, sockaddr_to_tuple, socklen_t)

_log = logging.getLogger("jgpy.udp")

# a stream is dense after this many batches in a row, each less than 2 x coalesce_us after the previous one (a
# request that follows its peer's ACK closely is not a stream: it must not wait for a coalescing sleep)
DEF _DENSE_AFTER = 3


cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t newsize) except -1


cdef class _Reader:
    """One receive thread of a :class:`DatagramLoop`: its receive vector (buffers, ``mmsghdr``s, source
    addresses); it waits in its own epoll instance of the loop's :class:`Relay`."""

    cdef DatagramLoop _loop
    cdef Relay _relay
    cdef int _index
    cdef int _fd, _poll_ms            # copies of the loop's, for the nogil code
    cdef unsigned int _batch
    cdef PyObject** _slots            # one bytes object of bufsize per vector slot (owned references)
    cdef mmsghdr* _msgs
    cdef iovec* _iovs
    cdef sockaddr_storage* _addrs
    # source tuple cache: datagrams from one peer reuse one tuple
    cdef sockaddr_storage _last_sa
    cdef socklen_t _last_salen
    cdef object _last_src

    def __cinit__(self, DatagramLoop loop, int index):
        cdef unsigned int i, n = loop._batch
        self._loop = loop
        self._relay = loop._relay
        self._index = index
        self._fd, self._poll_ms, self._batch = loop._fd, loop._poll_ms, loop._batch
        self._slots = <PyObject**>calloc(n, sizeof(PyObject*))
        self._msgs = <mmsghdr*>calloc(n, sizeof(mmsghdr))
        self._iovs = <iovec*>calloc(n, sizeof(iovec))
        self._addrs = <sockaddr_storage*>calloc(n, sizeof(sockaddr_storage))
        if self._slots == NULL or self._msgs == NULL or self._iovs == NULL or self._addrs == NULL:
            raise MemoryError(f"cannot allocate {n} receive buffers of {loop._bufsize} bytes")
        for i in range(n):
            self._new_slot(i)
            self._iovs[i].iov_len = <size_t>loop._bufsize
            self._msgs[i].msg_hdr.msg_iov = &self._iovs[i]
            self._msgs[i].msg_hdr.msg_iovlen = 1
            self._msgs[i].msg_hdr.msg_name = &self._addrs[i]
        self._last_salen = 0
        self._last_src = None

    def __dealloc__(self):
        cdef unsigned int i
        if self._slots != NULL:
            for i in range(self._batch):
                Py_XDECREF(self._slots[i])
        free(self._slots)
        free(self._msgs)
        free(self._iovs)
        free(self._addrs)

    cdef int _new_slot(self, unsigned int i) except -1:
        """A fresh receive buffer for vector slot ``i``; the reference the slot held (if any) passes to the
        caller. On MemoryError the slot is unchanged."""
        buf = PyBytes_FromStringAndSize(NULL, self._loop._bufsize)
        self._slots[i] = <PyObject*>buf
        Py_INCREF(buf)                    # the slot owns a reference
        self._iovs[i].iov_base = PyBytes_AS_STRING(buf)
        return 0

    cdef object _take(self, unsigned int i, Py_ssize_t length):
        """Datagram ``i`` as a bytes object: its buffer itself when it is long (then the slot gets a new
        one), else a copy."""
        cdef PyObject* obj = self._slots[i]
        if length < self._loop._adopt_min:
            return PyBytes_FromStringAndSize(PyBytes_AS_STRING(<object>obj), length)
        try:
            self._new_slot(i)             # the slot's reference to obj is now ours
        except MemoryError:
            return PyBytes_FromStringAndSize(PyBytes_AS_STRING(<object>obj), length)
        try:
            _PyBytes_Resize(&obj, length)  # we held the only reference: shrinks in place
        except MemoryError:                # (the old buffer is gone): count it as lost, go on
            self._loop._st_recv_errors += 1
            return None
        datagram = <object>obj            # a new reference ...
        Py_DECREF(datagram)               # ... replacing the one the slot owned
        return datagram

    cdef object _source(self, unsigned int i):
        cdef socklen_t n = self._msgs[i].msg_hdr.msg_namelen
        cdef sockaddr_storage* sa = &self._addrs[i]
        if n > sizeof(sockaddr_storage):
            n = sizeof(sockaddr_storage)
        if n == self._last_salen and n != 0 and memcmp(sa, &self._last_sa, n) == 0:
            return self._last_src
        src = sockaddr_to_tuple(sa)
        memcpy(&self._last_sa, sa, n)
        self._last_salen = n
        self._last_src = src
        return src

    def hand_over(self):
        """Called by this reader's own thread (GIL held) before it runs code that may block (the application):
        if it owns the socket, the next reader does from now on (see :class:`Relay`). Returns False, and
        hands nothing over, in a stream; then the caller should leave the blocking work to a thread of its own."""
        return self._relay.hand_over(self._index)

    def take_back(self):
        """After the code that may block: this reader owns the socket again (it is hot, and a datagram that
        came meanwhile is read by it without a wake-up); the epoll registrations move once this reader has
        released the GIL. Does nothing unless :meth:`hand_over` gave it away."""
        self._relay.take_back(self._index)

    cdef int _receive(self, bint skip_wait, int timeout_ms, int* err) noexcept nogil:
        """Waits (at most ``timeout_ms``) for and reads one batch.  > 0: datagrams read; 0: nothing (timeout,
        EAGAIN, EINTR, wake-up); -1: error in ``err``."""
        cdef int r
        cdef unsigned int i
        if not skip_wait:
            r = self._relay.wait(self._index, timeout_ms, err)
            if r <= 0:
                return r                  # an error, a timeout or the wake-up pipe: the caller looks at _stopping
        for i in range(self._batch):
            self._msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage)
            self._msgs[i].msg_hdr.msg_flags = 0
            self._msgs[i].msg_len = 0
        r = recvmmsg(self._fd, self._msgs, self._batch, MSG_DONTWAIT, NULL)
        if r < 0:
            if errno == EAGAIN or errno == EINTR:
                return 0
            err[0] = errno
            return -1
        return r

    cdef _deliver(self, int n):
        cdef DatagramLoop loop = self._loop
        cdef int i
        cdef unsigned int length
        datagrams = []
        sources = []
        for i in range(n):
            if self._msgs[i].msg_hdr.msg_flags & MSG_TRUNC:
                loop._st_truncated += 1
                continue
            length = self._msgs[i].msg_len
            datagram = self._take(i, length)
            if datagram is None:
                continue
            datagrams.append(datagram)
            sources.append(self._source(i))
            loop._st_bytes += length
        if not datagrams:
            return
        loop._st_datagrams += len(datagrams)
        loop._st_batches += 1
        try:
            loop._handler(datagrams, sources)
        except BaseException as e:
            loop._st_handler_errors += 1
            if loop._log is not None:
                loop._log.exception("recv-handler", "%s: handler %r raised %s (batch of %d datagram(s) lost to it; "
                                    "the loop goes on)", loop._name, loop._handler, type(e).__name__, len(datagrams))

    def run(self):
        cdef DatagramLoop loop = self._loop
        cdef int n = 0
        cdef int err = 0
        cdef bint full = False
        cdef uint64_t t, last = 0
        cdef uint64_t dense_ns = <uint64_t>loop._coalesce_us * 2000
        cdef bint dense = False
        cdef int close_batches = 0        # batches in a row that came less than dense_ns after the previous one
        try:
            if loop._on_thread is not None:
                loop._on_thread(self.hand_over, self.take_back)
            while not loop._stopping:
                with nogil:
                    self._relay.rearm(self._index)
                    if dense and not full:
                        sleep_us(loop._coalesce_us)
                    n = self._receive(full, self._poll_ms, &err)
                    if n > 0 and dense_ns:
                        t = <uint64_t>monotonic_ns()
                        close_batches = close_batches + 1 if t - last < dense_ns else 0
                        dense = close_batches >= _DENSE_AFTER
                        last = t
                full = n == <int>self._batch
                if n > 0:
                    if dense and not full:
                        loop._st_coalesced += 1
                    self._deliver(n)
                elif n < 0:
                    if err == EBADF or err == ENOTSOCK:
                        break       # the socket was closed under us
                    loop._st_recv_errors += 1
                    if loop._log is not None:
                        loop._log.error("recv-failed", "%s: receive failed: %s (the loop goes on)", loop._name,
                                        os.strerror(err))
                if n <= 0 and loop._sock.fileno() != loop._fd:
                    break           # socket.close(): its descriptor may already be reused, stop reading it
        finally:
            self._relay.release(self._index)      # if the socket is ours, the others go on reading it
            loop._running -= 1


cdef class DatagramLoop:
    """DatagramLoop(sock, handler, *, batch=32, bufsize=65536, name="jgpy-recv", poll_ms=100, coalesce_us=0, adopt_min=8192, threads=1, on_thread=None, relay_gap_us=20, guest=False, log=None)

    The receive loop of one UDP socket, run by ``threads`` daemon threads.

    With the GIL released a thread waits in ``epoll_wait()`` (on the socket and on a wake-up pipe, so
    :meth:`stop` is noticed at once; ``poll_ms`` bounds how late a socket closed under it is noticed)
    and reads up to ``batch`` datagrams with one ``recvmmsg(MSG_DONTWAIT)`` into ``batch`` bytes objects of
    ``bufsize`` bytes.  Then it takes the GIL once for the batch and calls
    ``handler(datagrams: list[bytes], sources: list[tuple[str, int]])``.  A datagram of at least
    ``adopt_min`` bytes is the buffer itself, shrunk to its length (its slot gets a new buffer: no copy); a
    shorter one is a copy (the buffer is reused).  A handler exception is counted (and logged on ``log``, a
    ``jgpy.stack.logutil.RateLimitedLog`` or anything with its ``error``/``exception``) and the loop goes on.  Datagrams longer than ``bufsize`` are counted in ``truncated`` and dropped.
    If the socket is closed, the loop ends quietly.

    ``threads`` = 1: the handler runs on the loop's thread and the next batch is read only when it returns.
    ``threads`` > 1 (relay mode, a leader/followers pool; :class:`jgpy._core.relay.Relay`): each thread waits in
    an epoll instance of its own, and the socket is armed (level-triggered) in exactly one of them: the owner's, which reads as a single
    thread would.  Before the owner runs code that may block (an application's callback) its thread calls
    ``hand_over``: the socket is armed for the next thread instead, so a datagram that comes meanwhile wakes
    that one, which reads (handlers may then run concurrently for batches read by different threads);
    ``take_back`` afterwards makes the first thread the owner again.  ``hand_over`` refuses (returns False)
    in a stream, where the two threads would take turns for every batch: when a datagram is already waiting
    on the socket (``FIONREAD``), or the previous hand-over was less than ``relay_gap_us`` ago; the blocking
    work is then better left to a thread of its own.  With ``guest`` (relay mode only), a thread that waits for
    something this socket will bring may read the socket itself meanwhile (:meth:`read_while`).  ``on_thread(hand_over, take_back)`` is
    called on each thread when it starts (e.g. to register them with a delivery executor).  Each costs two
    ``epoll_ctl`` calls (``take_back``'s are made once the thread has released the GIL; ``hand_over`` also
    asks ``FIONREAD``), about 0.2 us each here, and wakes no thread unless a datagram is waiting or comes.

    ``coalesce_us`` > 0: once 3 batches in a row came less than ``2 * coalesce_us`` after the previous one (a
    dense stream, e.g. the per-message ACKs of a Java receiver), the thread sleeps ``coalesce_us`` (plus the
    kernel's timer slack: 50 us by default) after a batch that did not fill the vector, so that the next
    ``recvmmsg`` reads several datagrams for one wake-up instead of being woken for each (``coalesced`` counts
    the sleeps).  A sparse stream is never delayed, nor a request that closely follows its requester's ACK
    (a Java requester sends both).
    """

    cdef object _sock
    cdef object _handler
    cdef object _on_thread
    cdef list _readers
    cdef list _threads
    cdef str _name
    cdef int _fd
    cdef Relay _relay                 # the readers' epoll instances and which of them has the socket armed
    cdef _Reader _guest               # the receive vector of a waiting thread that reads (read_while), or None
    cdef object _log                  # RateLimitedLog (or None: errors are only counted)
    cdef unsigned int _batch
    cdef Py_ssize_t _bufsize
    cdef Py_ssize_t _adopt_min
    cdef int _poll_ms
    cdef long _coalesce_us
    cdef bint _started
    cdef bint _stopping
    cdef int _running                 # threads still running (changed with the GIL held)
    # stats (written by the loop threads with the GIL held)
    cdef uint64_t _st_datagrams, _st_bytes, _st_batches, _st_handler_errors, _st_recv_errors, _st_truncated
    cdef uint64_t _st_coalesced

    def __cinit__(self, *args, **kwargs):
        self._fd = -1

    def __init__(self, sock, handler, *, int batch=32, Py_ssize_t bufsize=65536, str name="jgpy-recv",
                 int poll_ms=100, long coalesce_us=0, Py_ssize_t adopt_min=8192, int threads=1, on_thread=None,
                 long relay_gap_us=20, bint guest=False, log=None):
        if self._readers is not None:
            raise RuntimeError("DatagramLoop.__init__ called twice: create a new DatagramLoop instead")
        if not callable(handler):
            raise TypeError(f"handler must be callable as handler(datagrams, sources), got {handler!r}")
        if on_thread is not None and not callable(on_thread):
            raise TypeError(f"on_thread must be callable as on_thread(hand_over, take_back) or None, got "
                            f"{on_thread!r}")
        if not 1 <= batch <= MAX_VLEN:
            raise ValueError(f"batch must be in 1..{MAX_VLEN} (the kernel's recvmmsg limit), got {batch}")
        if not 1 <= bufsize <= 65536:
            raise ValueError(f"bufsize must be in 1..65536 (a UDP datagram is at most 65535 bytes), got {bufsize}")
        if not 1 <= poll_ms <= 60000:
            raise ValueError(f"poll_ms must be in 1..60000, got {poll_ms}")
        if not 0 <= coalesce_us <= 10000:
            raise ValueError(f"coalesce_us must be in 0..10000, got {coalesce_us}")
        if adopt_min < 1:
            raise ValueError(f"adopt_min must be >= 1 (bytes), got {adopt_min}")
        if not 1 <= threads <= MAX_READERS - 1:
            raise ValueError(f"threads must be in 1..{MAX_READERS - 1}, got {threads}")
        if guest and threads < 2:
            raise ValueError("guest needs relay mode (threads >= 2): with one thread, it is the only reader")
        if not 0 <= relay_gap_us <= 1000000:
            raise ValueError(f"relay_gap_us must be in 0..1000000, got {relay_gap_us}")
        self._fd = sock_fd(sock, SOCK_DGRAM)
        self._sock = sock
        self._handler = handler
        self._on_thread = on_thread
        self._name = name
        self._batch = batch
        self._bufsize = bufsize
        self._poll_ms = poll_ms
        self._coalesce_us = coalesce_us
        self._adopt_min = adopt_min
        self._log = log
        self._relay = Relay(self._fd, threads, relay_gap_us, guest)
        self._readers = [_Reader(self, i) for i in range(threads)]
        self._guest = _Reader(self, threads) if guest else None

    def start(self):
        """Starts the daemon threads (named ``name``, then ``name-2`` ...) that run the loop.  Only once per object."""
        if self._readers is None:
            raise RuntimeError("DatagramLoop was not initialised")
        if self._started:
            raise RuntimeError("DatagramLoop.start() called twice: a loop runs once; create a new one")
        self._started = True
        self._threads = []
        for i, reader in enumerate(self._readers):
            t = threading.Thread(target=reader.run, name=self._name if i == 0 else f"{self._name}-{i + 1}",
                                 daemon=True)
            self._running += 1
            try:
                t.start()
            except BaseException:
                self._running -= 1
                raise
            self._threads.append(t)

    def stop(self, timeout=2.0):
        """Asks the loop to end and joins its threads (at most ``timeout`` seconds each).

        Idempotent, safe after the socket was closed, and safe from inside the handler (then it does
        not join that thread).  Returns True if the threads have ended (or never started).
        """
        self._stopping = True
        if self._relay is not None:
            self._relay.wake()
        ended = True
        me = threading.current_thread()
        for t in self._threads or ():
            if t is me:
                continue
            t.join(timeout)
            if t.is_alive():
                _log.warning("%s: the receive thread %s did not end within %.1f s (a handler call still "
                             "running?)", self._name, t.name, timeout)
                ended = False
        return ended

    def read_while(self, pending, double timeout):
        """For a thread waiting for something this socket will bring (an RPC caller, its answer): while
        ``pending()`` is true, for at most ``timeout`` seconds (< 0: no limit), this thread reads the socket
        itself, as the guest of the relay, and hands each batch to the handler, so what it waits for needs
        no thread switch to reach it. The socket is the owner's again before each batch is handled (a handler
        may block: the other readers go on reading). Returns False at once when there is no guest, another
        thread is the guest, or the loop is not running; True when it read until ``pending()`` was false, the
        time was up or the loop stopped (the caller then looks at what it waits for). Another thread that
        settles what the guest waits for calls :meth:`wake_reader`."""
        cdef _Reader g = self._guest
        cdef int n = 0, err = 0, ms
        cdef long long left
        cdef uint64_t deadline = 0
        if g is None or not self._started or self._stopping or self._running == 0:
            return False
        if not self._relay.claim():
            return False
        if timeout >= 0:
            deadline = <uint64_t>monotonic_ns() + <uint64_t>(timeout * 1e9)
        try:
            while not self._stopping:
                self._relay.lend(True)       # then look: what came before is handled, what comes now is ours
                if not pending():
                    break
                ms = self._poll_ms
                if deadline:
                    left = <long long>deadline - <long long>monotonic_ns()
                    if left <= 0:
                        break
                    if left < <long long>ms * 1000000:
                        ms = <int>((left + 999999) // 1000000)
                with nogil:
                    n = g._receive(False, ms, &err)
                self._relay.lend(False)
                if n > 0:
                    g._deliver(n)
                elif n < 0:
                    if err == EBADF or err == ENOTSOCK:
                        break
                    self._st_recv_errors += 1
                    if self._log is not None:
                        self._log.error("recv-failed", "%s: receive failed: %s (the loop goes on)", self._name,
                                        os.strerror(err))
                if n <= 0 and self._sock.fileno() != self._fd:
                    break
                if n > 0 and not pending():
                    break                    # (without lending again for nothing)
        finally:
            self._relay.unclaim()
        return True

    def wake_reader(self):
        """Wake the thread in :meth:`read_while` to look at what it waits for (no-op from that thread itself,
        or when nobody is in it)."""
        self._relay.wake_guest()

    @property
    def running(self):
        """True while any of the loop's threads runs."""
        return self._running > 0

    @property
    def name(self):
        """The (first) thread's name."""
        return self._name

    @property
    def threads(self):
        """The number of receive threads."""
        return len(self._readers)

    @property
    def stats(self):
        """Counters: datagrams, bytes, batches (handler calls), handler_errors, recv_errors, truncated,
        coalesced (the sleeps taken between the batches of a dense stream), handovers (relay mode: the
        socket passed to another thread by ``hand_over``), stream_refusals (``hand_over`` refused: a stream),
        guest_waits (the waits of threads in :meth:`read_while`)."""
        return {"datagrams": self._st_datagrams, "bytes": self._st_bytes, "batches": self._st_batches,
                "handler_errors": self._st_handler_errors, "recv_errors": self._st_recv_errors,
                "truncated": self._st_truncated, "coalesced": self._st_coalesced,
                "handovers": self._relay.handovers, "stream_refusals": self._relay.stream_refusals,
                "guest_waits": self._relay.lends}

    def __repr__(self):
        return (f"<DatagramLoop {self._name!r} fd={self._fd} batch={self._batch} bufsize={self._bufsize} "
                f"threads={len(self._readers)} running={self._running}>")
