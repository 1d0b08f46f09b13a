# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=False
# embedsignature is off here: Cython 3.3 misplaces the "*" of keyword-only __init__ arguments in the
# embedded signature; the class docstrings start with the right one (and inspect.signature() works on
# the methods and on sendmany).
# Every C index below is into an array allocated here with a size checked in __init__ (batch, capacity,
# bufsize), and every ring offset is reduced modulo the ring size, which is what makes bounds and
# wraparound checking unnecessary; the two functions that index Python objects (_fill_sockaddr,
# sendmany) switch the checks back on.
"""UDP hot paths: a batched receive loop, a coalescing sender and a burst sender.

Nothing here knows about JGroups: the transport creates and configures its sockets with Python's
:mod:`socket` module and hands them to these classes.

* :class:`DatagramLoop` -- the receive thread(s) of one socket: ``epoll_wait()`` + ``recvmmsg()`` with the
  GIL released, then the GIL is taken *once per batch* to hand ``handler(datagrams, sources)`` a list of
  ``bytes`` and a parallel list of ``(host, port)`` tuples.  With several threads (relay mode) one holds
  the socket at a time and hands it over before it runs code that may block.
* :class:`Bundler` -- coalesces small entries for one destination into datagrams
  ``prefix + e1 + ... + ek + suffix`` (at most ``max_size`` bytes).  Entries are copied into a
  preallocated ring; a background thread sends them with ``sendmmsg()``, iovecs pointing straight
  into the ring, with the GIL released.  **Ordering:** entries added by one thread are sent in the
  order they were added (``add`` calls are serialised by a mutex, waiting adders are served first
  come, first served, and the ring is drained in order).
* :func:`sendmany` -- sends a list of ``(data, (host, port))`` with as few ``sendmmsg()`` calls as
  possible (bursts of retransmissions).

Locking rule (deadlock freedom): the Bundler's pthread mutex is never held while waiting for the
GIL.  Code that holds the GIL takes the mutex with ``trylock`` and, if that fails, releases the GIL
before blocking on it; the sender thread takes the GIL (only to log) with the mutex released.

Errors are logged on ``logging.getLogger("jgpy.udp")``, at most one line per second per object;
the next line carries the count of the suppressed ones.
"""

cimport cython

import logging
import os
import socket as _socket
import threading

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset, memcmp, strlen
from libc.stdint cimport uint16_t, uint32_t, uint64_t
from libc.errno cimport errno, EAGAIN, EINTR, EBADF, ENOTSOCK, ENOBUFS, ETIMEDOUT
from posix.uio cimport iovec
from posix.time cimport timespec, clock_gettime, nanosleep, CLOCK_MONOTONIC
from posix.types cimport clockid_t
from posix.unistd cimport close as c_close


cdef extern from "<netinet/in.h>" nogil:
    struct in_addr:
        uint32_t s_addr

    struct in6_addr:
        pass

    struct sockaddr_in:
        sa_family_t sin_family
        uint16_t sin_port
        in_addr sin_addr

    struct sockaddr_in6:
        sa_family_t sin6_family
        uint16_t sin6_port
        uint32_t sin6_flowinfo
        in6_addr sin6_addr
        uint32_t sin6_scope_id

    uint16_t htons(uint16_t)
    uint16_t ntohs(uint16_t)
    uint32_t htonl(uint32_t)


cdef extern from "<arpa/inet.h>" nogil:
    const char* inet_ntop(int af, const void* src, char* dst, socklen_t size)
    int inet_pton(int af, const char* src, void* dst)


cdef extern from "<sys/ioctl.h>" nogil:
    int ioctl(int fd, unsigned long request, ...)
    enum: FIONREAD

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents

    ctypedef unsigned long nfds_t
    int poll(pollfd* fds, nfds_t nfds, int timeout)

    enum:
        POLLIN
        POLLOUT
        POLLERR
        POLLHUP
        POLLNVAL


_log = logging.getLogger("jgpy.udp")

#: largest UDP payload over IPv4 (65535 - 8 byte UDP header - 20 byte IP header)
MAX_UDP_PAYLOAD = 65507

cdef enum:
    _MAX_UDP_PAYLOAD = 65507
    _MAX_VLEN = 1024            # the kernel caps the vector length of recvmmsg/sendmmsg (UIO_MAXIOV)
    _SECOND_NS = 1000000000
    _POLLOUT_MS = 10            # a sender waits this long for POLLOUT before re-checking whether to give up


# ---------------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------------

cdef inline uint64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <uint64_t>ts.tv_sec * _SECOND_NS + <uint64_t>ts.tv_nsec


cdef inline void _abstime(uint64_t deadline_ns, timespec* ts) noexcept nogil:
    ts.tv_sec = <long>(deadline_ns // _SECOND_NS)
    ts.tv_nsec = <long>(deadline_ns % _SECOND_NS)


# a stream is dense after this many batches in a row, each less than 2 x coalesce_us after the previous one (a
# request that follows its peer's ACK closely is not a stream: it must not wait for a coalescing sleep)
DEF _DENSE_AFTER = 3


cdef inline void _sleep_us(long us) noexcept nogil:
    cdef timespec ts
    ts.tv_sec = us // 1000000
    ts.tv_nsec = (us % 1000000) * 1000
    nanosleep(&ts, NULL)


cdef inline int _wait_writable(int fd, int timeout_ms) noexcept nogil:
    """poll() for POLLOUT; returns -1 if the descriptor is no longer valid."""
    cdef pollfd p
    p.fd = fd
    p.events = POLLOUT
    p.revents = 0
    if poll(&p, 1, timeout_ms) > 0 and (p.revents & POLLNVAL):
        return -1
    return 0


cdef inline bint _rl_should_log(_RateLimit* rl, uint64_t* suppressed) noexcept nogil:
    """True if a line may be logged now; ``suppressed`` receives the count to report with it."""
    cdef uint64_t now = _now_ns()
    if rl.last_ns != 0 and now - rl.last_ns < _SECOND_NS:
        rl.suppressed += 1
        return False
    suppressed[0] = rl.suppressed
    rl.suppressed = 0
    rl.last_ns = now
    return True


cdef _rl_report_suppressed(_RateLimit* rl, str what):
    """Logs the count of suppressed lines that no later line reported (called when an object stops)."""
    if rl.suppressed:
        _log.error("%s: %d more error(s) were not logged (rate limit: one line per second)", what, rl.suppressed)
        rl.suppressed = 0


cdef str _suffix_suppressed(uint64_t n):
    return f" ({n} similar error(s) in the last second not logged)" if n else ""


cdef int _sock_fd(object sock) except -1:
    try:
        fd = sock.fileno()
    except AttributeError:
        raise TypeError(f"expected a socket.socket, got {type(sock).__name__}") from None
    if fd < 0:
        raise ValueError("the socket is closed: pass an open socket")
    if sock.type != _socket.SOCK_DGRAM:
        raise ValueError(f"expected a UDP (SOCK_DGRAM) socket, got type {sock.type!r}")
    return fd


@cython.boundscheck(True)
@cython.wraparound(True)
cdef int _fill_sockaddr(object sock, object dest, sockaddr_storage* out, socklen_t* outlen) except -1:
    """Builds the sockaddr for ``dest`` = (host, port[, flowinfo, scope_id]) matching the socket's family.

    Numeric hosts are parsed with inet_pton; names are resolved once with getaddrinfo.  An IPv4
    destination on an AF_INET6 socket becomes the v4-mapped address ``::ffff:a.b.c.d``.
    """
    cdef sockaddr_in* sin
    cdef sockaddr_in6* sin6
    cdef unsigned char* a6
    cdef in_addr v4
    cdef int family = sock.family
    try:
        dest = tuple(dest)
        if not 2 <= len(dest) <= 4:
            raise ValueError
        host, port = dest[0], int(dest[1])
    except (TypeError, ValueError):
        raise ValueError(f"destination must be a (host, port) tuple, got {dest!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"destination port must be in 1..65535, got {port} in {dest!r}")
    if not isinstance(host, str):
        raise ValueError(f"destination host must be a str, got {host!r} in {dest!r}")
    hb = host.encode("ascii", "replace")
    memset(out, 0, sizeof(sockaddr_storage))
    if family == AF_INET:
        sin = <sockaddr_in*>out
        if inet_pton(AF_INET, hb, &sin.sin_addr) != 1:
            try:
                infos = _socket.getaddrinfo(host, port, _socket.AF_INET, _socket.SOCK_DGRAM)
            except OSError as e:
                raise ValueError(f"cannot resolve destination {dest!r} to an IPv4 address: {e}") from None
            hb = infos[0][4][0].encode("ascii")
            if inet_pton(AF_INET, hb, &sin.sin_addr) != 1:
                raise ValueError(f"cannot resolve destination {dest!r} to an IPv4 address")
        sin.sin_family = AF_INET
        sin.sin_port = htons(<uint16_t>port)
        outlen[0] = sizeof(sockaddr_in)
        return 0
    if family == AF_INET6:
        sin6 = <sockaddr_in6*>out
        a6 = <unsigned char*>&sin6.sin6_addr
        flowinfo = int(dest[2]) if len(dest) > 2 else 0
        scope_id = int(dest[3]) if len(dest) > 3 else 0
        if inet_pton(AF_INET6, hb, a6) != 1:
            if inet_pton(AF_INET, hb, &v4) == 1:
                memset(a6, 0, 10)
                a6[10] = 0xFF
                a6[11] = 0xFF
                memcpy(a6 + 12, &v4, 4)
            else:
                try:
                    infos = _socket.getaddrinfo(host, port, _socket.AF_INET6, _socket.SOCK_DGRAM)
                except OSError as e:
                    raise ValueError(f"cannot resolve destination {dest!r} to an IPv6 address: {e}") from None
                sa = infos[0][4]
                hb = sa[0].split("%")[0].encode("ascii")
                if len(sa) > 3 and not scope_id:
                    scope_id = int(sa[3])
                if inet_pton(AF_INET6, hb, a6) != 1:
                    raise ValueError(f"cannot resolve destination {dest!r} to an IPv6 address")
        sin6.sin6_family = AF_INET6
        sin6.sin6_port = htons(<uint16_t>port)
        sin6.sin6_flowinfo = htonl(<uint32_t>flowinfo)
        sin6.sin6_scope_id = <uint32_t>scope_id
        outlen[0] = sizeof(sockaddr_in6)
        return 0
    raise ValueError(f"only AF_INET and AF_INET6 sockets are supported, got family {family!r}")


cdef object _sockaddr_to_tuple(const sockaddr_storage* sa):
    """(host: str, port: int) for an IPv4/IPv6 source address, None for another family."""
    cdef char buf[64]
    cdef const sockaddr_in* sin
    cdef const sockaddr_in6* sin6
    if sa.ss_family == AF_INET:
        sin = <const sockaddr_in*>sa
        if inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof(buf)) == NULL:
            return None
        return (buf[:strlen(buf)].decode("ascii"), ntohs(sin.sin_port))
    if sa.ss_family == AF_INET6:
        sin6 = <const sockaddr_in6*>sa
        if inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof(buf)) == NULL:
            return None
        return (buf[:strlen(buf)].decode("ascii"), ntohs(sin6.sin6_port))
    return None


# ---------------------------------------------------------------------------------------------------
# DatagramLoop
# ---------------------------------------------------------------------------------------------------

cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t newsize) except -1


cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        void* ptr
        int fd
        uint32_t u32
        uint64_t u64

    struct epoll_event:
        uint32_t events
        epoll_data_t data

    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event* event)
    int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout)

    enum:
        EPOLLIN
        EPOLLONESHOT
        EPOLL_CTL_ADD
        EPOLL_CTL_MOD
        EPOLL_CLOEXEC


cdef enum:
    _EV_SOCKET = 1              # epoll_data.u32 of the socket's registration
    _EV_WAKE = 2                # ... and of the wake-up pipe's


cdef int _arm(int epfd, int fd, bint on) noexcept nogil:
    """Arm (level-triggered EPOLLIN) or disarm (one-shot with no events: at most one EPOLLERR/EPOLLHUP, then
    nothing) the socket's registration in ``epfd``."""
    cdef epoll_event ev
    ev.events = EPOLLIN if on else EPOLLONESHOT
    ev.data.u64 = 0
    ev.data.u32 = _EV_SOCKET
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)


cdef class _Reader:
    """One receive thread of a :class:`DatagramLoop`: its receive vector (buffers, ``mmsghdr``s, source
    addresses) and its own epoll instance, in which the socket is armed only while this reader owns it."""

    cdef DatagramLoop _loop
    cdef int _index
    cdef int _fd, _epfd, _poll_ms     # _fd, _poll_ms: copies of the loop's, for the nogil code
    cdef unsigned int _batch
    cdef bint _handed                 # hand_over() gave the socket away; take_back() takes it back
    cdef int _rearm_from              # take_back() left the re-arming to run(): the epoll to disarm (-1: none)
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
        cdef epoll_event ev
        self._epfd = -1
        self._rearm_from = -1
        self._loop = loop
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
        self._epfd = epoll_create1(EPOLL_CLOEXEC)
        if self._epfd < 0:
            raise OSError(errno, f"epoll_create1: {os.strerror(errno)}")
        ev.events = EPOLLIN if index == loop._owner else EPOLLONESHOT
        ev.data.u64 = 0
        ev.data.u32 = _EV_SOCKET
        if epoll_ctl(self._epfd, EPOLL_CTL_ADD, self._fd, &ev) < 0:
            raise OSError(errno, f"epoll_ctl(ADD) of the socket: {os.strerror(errno)}")
        ev.events = EPOLLIN               # level-triggered: a stop() wakes every thread
        ev.data.u64 = 0
        ev.data.u32 = _EV_WAKE
        if epoll_ctl(self._epfd, EPOLL_CTL_ADD, loop._wake_r, &ev) < 0:
            raise OSError(errno, f"epoll_ctl(ADD) of the wake-up pipe: {os.strerror(errno)}")

    def __dealloc__(self):
        cdef unsigned int i
        if self._epfd >= 0:
            c_close(self._epfd)
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
        src = _sockaddr_to_tuple(sa)
        memcpy(&self._last_sa, sa, n)
        self._last_salen = n
        self._last_src = src
        return src

    def hand_over(self):
        """Called by this reader's own thread (GIL held) before it runs code that may block (the application):
        if it owns the socket, the next reader does from now on, so a datagram that comes meanwhile wakes that
        one. Undone by :meth:`take_back`.

        Returns False, and hands nothing over, in a stream: when a datagram is already waiting on the socket
        (the next reader would be woken at once), or when the previous call on this loop was less than
        ``relay_gap_us`` ago (the two would take turns for every batch); then the caller should leave the
        blocking work to a thread of its own."""
        cdef DatagramLoop loop = self._loop
        cdef _Reader other
        cdef int nxt
        cdef int waiting = 0
        cdef uint64_t now = _now_ns(), last = loop._last_hand_over_ns
        loop._last_hand_over_ns = now
        if now - last < loop._relay_gap_ns or (ioctl(self._fd, FIONREAD, &waiting) == 0 and waiting > 0):
            loop._st_stream_refusals += 1
            return False
        if loop._owner != self._index or len(loop._readers) < 2:
            return True
        self._rearm()                             # a take_back() of this batch not carried out yet: now
        nxt = (self._index + 1) % len(loop._readers)
        other = loop._readers[nxt]
        _arm(other._epfd, self._fd, True)         # never a moment with nobody armed
        _arm(self._epfd, self._fd, False)
        loop._owner = nxt
        self._handed = True
        loop._st_handovers += 1
        return True

    def take_back(self):
        """After the code that may block: this reader owns the socket again (it is hot, and a datagram that
        came meanwhile is read by it without a wake-up). Does nothing unless :meth:`hand_over` gave it away.

        Only the ownership changes here; the two ``epoll_ctl`` calls that move the socket's registration are
        made by this reader's loop once it has released the GIL, before it waits again (the previous owner
        stays armed meanwhile, so the socket is never unwatched; only the owner re-arms, so nobody else moves
        the registration in between). The GIL is then free that much sooner for the thread the
        application just woke."""
        cdef DatagramLoop loop = self._loop
        cdef _Reader owner
        if not self._handed:
            return
        self._handed = False
        if loop._owner == self._index:
            return
        owner = loop._readers[loop._owner]
        loop._owner = self._index
        self._rearm_from = owner._epfd

    cdef void _rearm(self) noexcept nogil:
        """The re-arming :meth:`take_back` left to the loop: armed here, then disarmed in the previous owner's
        epoll (if it is reading already, it finishes its batch)."""
        if self._rearm_from >= 0:
            _arm(self._epfd, self._fd, True)
            _arm(self._rearm_from, self._fd, False)
            self._rearm_from = -1

    cdef int _receive(self, bint skip_wait, int* err) noexcept nogil:
        """Waits for and reads one batch.  > 0: datagrams read; 0: nothing (timeout, EAGAIN, EINTR,
        wake-up); -1: error in ``err``."""
        cdef epoll_event evs[2]
        cdef int r, k
        cdef bint readable = False
        cdef unsigned int i
        if not skip_wait:
            r = epoll_wait(self._epfd, evs, 2, self._poll_ms)
            if r < 0:
                if errno == EINTR:
                    return 0
                err[0] = errno
                return -1
            for k in range(r):
                if evs[k].data.u32 == _EV_SOCKET:
                    readable = True
            if not readable:
                return 0                  # a timeout or the wake-up pipe: the caller looks at _stopping
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
        cdef uint64_t sup = 0
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
            if _rl_should_log(&loop._rl, &sup):
                _log.error("%s: handler %r raised %s (batch of %d datagram(s) lost to it; the loop goes on)%s",
                           loop._name, loop._handler, type(e).__name__, len(datagrams), _suffix_suppressed(sup),
                           exc_info=True)

    def run(self):
        cdef DatagramLoop loop = self._loop
        cdef int n = 0
        cdef int err = 0
        cdef bint full = False
        cdef uint64_t sup = 0
        cdef uint64_t t, last = 0
        cdef uint64_t dense_ns = <uint64_t>loop._coalesce_us * 2000
        cdef bint dense = False
        cdef int close_batches = 0        # batches in a row that came less than dense_ns after the previous one
        try:
            if loop._on_thread is not None:
                loop._on_thread(self.hand_over, self.take_back)
            while not loop._stopping:
                with nogil:
                    self._rearm()
                    if dense and not full:
                        _sleep_us(loop._coalesce_us)
                    n = self._receive(full, &err)
                    if n > 0 and dense_ns:
                        t = _now_ns()
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
                    if _rl_should_log(&loop._rl, &sup):
                        _log.error("%s: receive failed: %s (the loop goes on)%s", loop._name, os.strerror(err),
                                   _suffix_suppressed(sup))
                if n <= 0 and loop._sock.fileno() != loop._fd:
                    break           # socket.close(): its descriptor may already be reused, stop reading it
        finally:
            self._rearm()
            loop._last_hand_over_ns = 0
            self.hand_over()                      # if the socket is ours, the others go on reading it
            loop._running -= 1
            if loop._running == 0:
                _rl_report_suppressed(&loop._rl, loop._name)


cdef class DatagramLoop:
    """DatagramLoop(sock, handler, *, batch=32, bufsize=65536, name="jgpy-recv", poll_ms=100, coalesce_us=0, adopt_min=8192, threads=1, on_thread=None, relay_gap_us=20)

    The receive loop of one UDP socket, run by ``threads`` daemon threads.

    With the GIL released a thread waits in ``epoll_wait()`` (on the socket and on a wake-up pipe, so
    :meth:`stop` is noticed at once; ``poll_ms`` bounds how late a socket closed under it is noticed)
    and reads up to ``batch`` datagrams with one ``recvmmsg(MSG_DONTWAIT)`` into ``batch`` bytes objects of
    ``bufsize`` bytes.  Then it takes the GIL once for the batch and calls
    ``handler(datagrams: list[bytes], sources: list[tuple[str, int]])``.  A datagram of at least
    ``adopt_min`` bytes is the buffer itself, shrunk to its length (its slot gets a new buffer: no copy); a
    shorter one is a copy (the buffer is reused).  A handler exception is counted and logged (rate-limited) and the
    loop goes on.  Datagrams longer than ``bufsize`` are counted in ``truncated`` and dropped.
    If the socket is closed, the loop ends quietly.

    ``threads`` = 1: the handler runs on the loop's thread and the next batch is read only when it returns.
    ``threads`` > 1 (relay mode, a leader/followers pool): each thread waits in an epoll instance of its own,
    and the socket is armed (level-triggered) in exactly one of them: the owner's, which reads as a single
    thread would.  Before the owner runs code that may block (an application's callback) its thread calls
    ``hand_over``: the socket is armed for the next thread instead, so a datagram that comes meanwhile wakes
    that one, which reads (handlers may then run concurrently for batches read by different threads);
    ``take_back`` afterwards makes the first thread the owner again.  ``hand_over`` refuses (returns False)
    in a stream, where the two threads would take turns for every batch: when a datagram is already waiting
    on the socket (``FIONREAD``), or the previous hand-over was less than ``relay_gap_us`` ago; the blocking
    work is then better left to a thread of its own.  ``on_thread(hand_over, take_back)`` is
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
    cdef int _owner                   # the reader whose epoll instance has the socket armed
    cdef int _wake_r
    cdef int _wake_w
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
    cdef uint64_t _relay_gap_ns, _last_hand_over_ns
    cdef uint64_t _st_coalesced, _st_handovers, _st_stream_refusals
    cdef _RateLimit _rl

    def __cinit__(self, *args, **kwargs):
        self._fd = -1
        self._wake_r = -1
        self._wake_w = -1

    def __init__(self, sock, handler, *, int batch=32, Py_ssize_t bufsize=65536, str name="jgpy-recv",
                 int poll_ms=100, long coalesce_us=0, Py_ssize_t adopt_min=8192, int threads=1, on_thread=None,
                 long relay_gap_us=20):
        if self._readers is not None:
            raise RuntimeError("DatagramLoop.__init__ called twice: create a new DatagramLoop instead")
        if not callable(handler):
            raise TypeError(f"handler must be callable as handler(datagrams, sources), got {handler!r}")
        if on_thread is not None and not callable(on_thread):
            raise TypeError(f"on_thread must be callable as on_thread(hand_over, take_back) or None, got "
                            f"{on_thread!r}")
        if not 1 <= batch <= _MAX_VLEN:
            raise ValueError(f"batch must be in 1..{_MAX_VLEN} (the kernel's recvmmsg limit), got {batch}")
        if not 1 <= bufsize <= 65536:
            raise ValueError(f"bufsize must be in 1..65536 (a UDP datagram is at most 65535 bytes), got {bufsize}")
        if not 1 <= poll_ms <= 60000:
            raise ValueError(f"poll_ms must be in 1..60000, got {poll_ms}")
        if not 0 <= coalesce_us <= 10000:
            raise ValueError(f"coalesce_us must be in 0..10000, got {coalesce_us}")
        if adopt_min < 1:
            raise ValueError(f"adopt_min must be >= 1 (bytes), got {adopt_min}")
        if not 1 <= threads <= 16:
            raise ValueError(f"threads must be in 1..16, got {threads}")
        if not 0 <= relay_gap_us <= 1000000:
            raise ValueError(f"relay_gap_us must be in 0..1000000, got {relay_gap_us}")
        self._fd = _sock_fd(sock)
        self._sock = sock
        self._handler = handler
        self._on_thread = on_thread
        self._name = name
        self._batch = batch
        self._bufsize = bufsize
        self._poll_ms = poll_ms
        self._coalesce_us = coalesce_us
        self._adopt_min = adopt_min
        self._relay_gap_ns = <uint64_t>relay_gap_us * 1000
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_r = r
        self._wake_w = w
        self._owner = 0
        self._readers = [_Reader(self, i) for i in range(threads)]

    def __dealloc__(self):
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                c_close(fd)

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
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass    # the pipe is full: a wake-up is already pending
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
        socket passed to another thread by ``hand_over``), stream_refusals (``hand_over`` refused: a stream)."""
        return {"datagrams": self._st_datagrams, "bytes": self._st_bytes, "batches": self._st_batches,
                "handler_errors": self._st_handler_errors, "recv_errors": self._st_recv_errors,
                "truncated": self._st_truncated, "coalesced": self._st_coalesced, "handovers": self._st_handovers,
                "stream_refusals": self._st_stream_refusals}

    def __repr__(self):
        return (f"<DatagramLoop {self._name!r} fd={self._fd} batch={self._batch} bufsize={self._bufsize} "
                f"threads={len(self._readers)} running={self._running}>")


# ---------------------------------------------------------------------------------------------------
# Bundler
# ---------------------------------------------------------------------------------------------------

cdef enum:
    _DG_SENT = 0
    _DG_FAILED = 1
    _DG_ABORTED = 2


cdef class Bundler:
    """Bundler(sock, dest, prefix, suffix, *, max_size=64000, capacity=8 << 20, max_entries=0, linger_us=100, max_delay_ms=30.0, batch=32, name="jgpy-bundler")

    Coalescing sender for one destination, drained by a daemon thread.

    Every datagram sent is ``prefix + e1 + ... + ek + suffix``: whole entries in the order they were
    added, at most ``max_size`` bytes in total.  An entry too big to share a datagram
    (``len(prefix) + len(entry) + len(suffix) > max_size``) goes alone in its own datagram if that is
    at most 65507 bytes; a bigger one makes :meth:`add` raise ValueError.

    :meth:`add` copies the entry into a ring of ``capacity`` bytes allocated once (its pages become
    resident as the ring wraps, so ``capacity`` is what it costs in RSS); ``max_entries`` bounds the
    entries queued (at most ``capacity``; 0: ``capacity // 64``, at least 4096).  When the ring or the
    entry slots are full it waits, with the GIL released, for room (``blocked_adds``); waiting adders
    are served in arrival order.  Entries from one thread are sent in the order they were added.  Entries added
    before :meth:`start` are queued and sent once it is called (an ``add`` that finds the ring full
    before ``start`` waits for it).

    The thread, with the GIL released, collects entries into datagrams; it sends when the next entry
    would not fit, when no entry arrived for ``linger_us`` microseconds, when ``max_delay_ms`` passed
    since the first entry of the datagram was seen, or at once when an adder is waiting for room, a
    :meth:`flush` is waiting or :meth:`stop` was called.  It sends up to ``batch`` datagrams per
    ``sendmmsg`` with iovecs pointing into the ring (prefix, entries, suffix; no copy).  EAGAIN and
    ENOBUFS are retried (after poll(POLLOUT)/a short sleep), never dropped; another error drops that
    datagram, counts ``send_errors`` and is logged (rate-limited).
    """

    def __cinit__(self, *args, **kwargs):
        self._ring = NULL
        self._lens = NULL
        self._msgs = NULL
        self._iovs = NULL
        self._dg_pos = NULL
        self._dg_len = NULL
        self._dg_cnt = NULL
        self._dg_state = NULL
        self._sync_ok = False
        cdef pthread_condattr_t attr
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        if (pthread_mutex_init(&self._mu, NULL) != 0 or pthread_cond_init(&self._data_cv, &attr) != 0
                or pthread_cond_init(&self._space_cv, &attr) != 0 or pthread_cond_init(&self._flush_cv, &attr) != 0):
            pthread_condattr_destroy(&attr)
            raise MemoryError("cannot initialise the Bundler's pthread mutex/condition variables")
        pthread_condattr_destroy(&attr)
        self._sync_ok = True

    def __init__(self, sock, dest, prefix, suffix, *, Py_ssize_t max_size=64000, Py_ssize_t capacity=8 << 20,
                 Py_ssize_t max_entries=0, long linger_us=100, double max_delay_ms=30.0, int batch=32,
                 str name="jgpy-bundler"):
        if self._ring != NULL:
            raise RuntimeError("Bundler.__init__ called twice: create a new Bundler instead")
        self._prefix = bytes(prefix)
        self._suffix = bytes(suffix)
        self._prelen = len(self._prefix)
        self._suflen = len(self._suffix)
        self._pre = self._prefix
        self._suf = self._suffix
        if self._prelen + self._suflen >= _MAX_UDP_PAYLOAD:
            raise ValueError(f"prefix ({self._prelen} bytes) + suffix ({self._suflen} bytes) leave no room "
                             f"for an entry in a {_MAX_UDP_PAYLOAD}-byte datagram")
        if not <Py_ssize_t>(self._prelen + self._suflen) < max_size <= _MAX_UDP_PAYLOAD:
            raise ValueError(f"max_size must be > len(prefix) + len(suffix) = {self._prelen + self._suflen} "
                             f"and <= {_MAX_UDP_PAYLOAD}, got {max_size}")
        if capacity < 65536:
            raise ValueError(f"capacity must be at least 65536 bytes (the largest entry must fit), got {capacity}")
        if not 0 <= max_entries <= 1 << 30:
            raise ValueError(f"max_entries must be in 0..{1 << 30} (0: capacity // 64), got {max_entries}")
        if not 0 <= linger_us <= 60_000_000:
            raise ValueError(f"linger_us must be in 0..60000000, got {linger_us}")
        if not 0 <= max_delay_ms <= 60_000:
            raise ValueError(f"max_delay_ms must be in 0..60000, got {max_delay_ms}")
        if not 1 <= batch <= _MAX_VLEN:
            raise ValueError(f"batch must be in 1..{_MAX_VLEN} (the kernel's sendmmsg limit), got {batch}")
        self._fd = _sock_fd(sock)
        self._sock = sock
        _fill_sockaddr(sock, dest, &self._dest, &self._destlen)
        self._dest_repr = repr(tuple(dest))
        self._name = name
        self._max_size = max_size
        self._limit = max_size - self._prelen - self._suflen
        self._max_entry = _MAX_UDP_PAYLOAD - self._prelen - self._suflen
        self._capacity = capacity
        # 0: entries of >= 64 bytes on average never wait for a slot
        self._mcap = min(max_entries, capacity) if max_entries > 0 else max(4096, capacity // 64)
        self._linger_ns = <uint64_t>linger_us * 1000
        self._max_delay_ns = <uint64_t>(max_delay_ms * 1e6)
        self._batch = batch
        self._ring = <char*>malloc(self._capacity)
        self._lens = <uint32_t*>malloc(self._mcap * sizeof(uint32_t))
        self._msgs = <mmsghdr*>calloc(batch, sizeof(mmsghdr))
        self._iovs = <iovec*>calloc(4 * batch, sizeof(iovec))
        self._dg_pos = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_len = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_cnt = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_state = <int*>calloc(batch, sizeof(int))
        if (self._ring == NULL or self._lens == NULL or self._msgs == NULL or self._iovs == NULL
                or self._dg_pos == NULL or self._dg_len == NULL or self._dg_cnt == NULL or self._dg_state == NULL):
            raise MemoryError(f"cannot allocate a ring of {capacity} bytes")

    def __dealloc__(self):
        if self._sync_ok:
            pthread_cond_destroy(&self._data_cv)
            pthread_cond_destroy(&self._space_cv)
            pthread_cond_destroy(&self._flush_cv)
            pthread_mutex_destroy(&self._mu)
        free(self._ring)
        free(self._lens)
        free(self._msgs)
        free(self._iovs)
        free(self._dg_pos)
        free(self._dg_len)
        free(self._dg_cnt)
        free(self._dg_state)

    # -- locking with the GIL held: _lock/_unlock (inline, in udp.pxd) ------------------------------

    cdef int _check_ready(self) except -1:
        if self._ring == NULL:
            raise RuntimeError("Bundler was not initialised")
        return 0

    # -- producer side (_has_room: inline, in udp.pxd) ------------------------------------------------

    cdef void _put(self, const char* data, size_t n) noexcept nogil:
        """Copies one entry into the ring (mutex held, room checked)."""
        cdef uint64_t idx = self._wpos % self._capacity
        cdef uint64_t first = self._capacity - idx
        if first >= n:
            memcpy(self._ring + idx, data, n)
        else:
            memcpy(self._ring + idx, data, first)
            memcpy(self._ring, data + first, n - first)
        self._lens[self._wcount % self._mcap] = <uint32_t>n
        self._wpos += n
        self._wcount += 1
        if self._sender_waiting and self._wpos >= self._wake_pos:
            pthread_cond_signal(&self._data_cv)

    cdef int _put_waiting(self, const char* data, size_t n) noexcept nogil:
        """Slow path of add(): mutex held on entry, released on return.  0: queued; -1: the bundler stopped."""
        cdef uint64_t ticket = self._ticket_next
        self._ticket_next += 1
        self._st_blocked += 1
        self._space_waiters += 1
        if self._sender_waiting:
            pthread_cond_signal(&self._data_cv)     # an adder waits: the sender sends what it holds now
        while not self._dead and not (ticket == self._ticket_serving and self._has_room(n)):
            pthread_cond_wait(&self._space_cv, &self._mu)
        self._space_waiters -= 1
        if self._dead:
            pthread_cond_broadcast(&self._space_cv)
            pthread_mutex_unlock(&self._mu)
            return -1
        self._put(data, n)
        self._ticket_serving += 1
        if self._space_waiters > 0:
            pthread_cond_broadcast(&self._space_cv)  # the next ticket may fit too
        pthread_mutex_unlock(&self._mu)
        return 0

    def add(self, entry):
        """Queues one entry (any bytes-like object; it is copied).  Thread-safe.

        Waits, with the GIL released, while the ring is full.  Raises ValueError if the entry can never
        be sent (and queues nothing), RuntimeError after :meth:`stop`.
        """
        cdef Py_buffer view
        PyObject_GetBuffer(entry, &view, PyBUF_SIMPLE)
        try:
            self.add_raw(<const char*>view.buf, <size_t>view.len)
        finally:
            PyBuffer_Release(&view)

    cdef int add_raw(self, const char* data, size_t n) except -1:
        """:meth:`add` of ``n`` bytes at ``data`` (the C entry point; the caller keeps them valid: the GIL
        may be released while it waits for room)."""
        cdef int rc
        self._check_ready()
        if n > self._max_entry:
            raise ValueError(
                f"entry of {n} bytes does not fit a UDP datagram: prefix ({self._prelen}) + entry + suffix "
                f"({self._suflen}) > {_MAX_UDP_PAYLOAD} bytes; configure fragmentation (FRAG/FRAG2 frag_size) "
                f"below max_bundle_size ({self._max_size}) so that no message is this big")
        if n == 0:
            return 0
        self._lock()
        if self._closing or self._dead:
            self._unlock()
            raise RuntimeError(f"{self._name}: add() after stop(): create a new Bundler")
        if self._space_waiters == 0 and self._has_room(n):
            self._put(data, n)
            self._unlock()
            return 0
        with nogil:
            rc = self._put_waiting(data, n)
        if rc != 0:
            raise RuntimeError(f"{self._name}: the bundler stopped while add() waited for room; "
                               f"the entry was not queued")
        return 0

    def flush(self, timeout=5.0):
        """Waits until every entry added before this call was handed to the kernel.

        Makes the sender send at once instead of lingering.  Entries dropped (a send error, or
        :meth:`stop` giving up) count as handled: see ``stats["dropped"]``.  Returns False on timeout,
        or at once if the bundler was never started.
        """
        cdef uint64_t target, deadline
        cdef timespec ts
        cdef bint ok
        cdef double t = timeout
        self._check_ready()
        if not t >= 0:
            raise ValueError(f"timeout must be >= 0, got {timeout}")
        deadline = _now_ns() + <uint64_t>(t * 1e9)
        self._lock()
        target = self._wcount
        if self._rcount >= target:
            self._unlock()
            return True
        if not self._started or self._dead:
            self._unlock()
            return False
        with nogil:
            self._flush_waiters += 1
            if self._sender_waiting:
                pthread_cond_signal(&self._data_cv)
            _abstime(deadline, &ts)
            while self._rcount < target and not self._dead:
                if pthread_cond_timedwait(&self._flush_cv, &self._mu, &ts) == ETIMEDOUT:
                    break
            self._flush_waiters -= 1
            ok = self._rcount >= target
            pthread_mutex_unlock(&self._mu)
        return ok

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self):
        """Starts the daemon sender thread (named ``name``).  Only once per object."""
        self._check_ready()
        self._lock()
        if self._started or self._closing:
            self._unlock()
            raise RuntimeError("Bundler.start() called twice or after stop(): create a new Bundler")
        self._started = True
        self._unlock()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._lock()
            self._dead = True
            pthread_cond_broadcast(&self._space_cv)
            self._unlock()
            raise

    def stop(self, timeout=2.0):
        """Sends what is queued (and what adders waiting for room add), then ends the thread.

        Waits at most ``timeout`` seconds; if the queue is not drained by then (the socket refuses to
        take datagrams), the rest is dropped (counted in ``dropped``).  Idempotent.  Later ``add``
        calls raise RuntimeError.  Entries queued on a bundler that was never started are dropped.
        Returns True if the thread has ended (or never started) and stop() dropped nothing.
        """
        self._check_ready()
        self._lock()
        self._closing = True
        if not self._started and not self._dead:
            self._dead = True
            self._stop_dropped = self._wcount != self._rcount
            self._st_dropped += self._wcount - self._rcount
            self._rpos = self._wpos
            self._rcount = self._wcount
            pthread_cond_broadcast(&self._space_cv)
            pthread_cond_broadcast(&self._flush_cv)
        pthread_cond_broadcast(&self._data_cv)
        self._unlock()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if t.is_alive():
                self._lock()
                self._abort = True
                pthread_cond_broadcast(&self._data_cv)
                self._unlock()
                t.join(max(1.0, timeout))
                if t.is_alive():
                    _log.error("%s: the sender thread did not end", self._name)
                    return False
        return not self._stop_dropped

    @property
    def stats(self):
        """Counters: entries (sent), datagrams, bytes (including prefix and suffix), send_errors (datagrams),
        max_entries_per_datagram, blocked_adds, plus dropped (entries lost to send errors or to stop),
        queued (entries) and queued_bytes."""
        self._check_ready()
        self._lock()
        d = {"entries": self._st_entries, "datagrams": self._st_datagrams, "bytes": self._st_bytes,
             "send_errors": self._st_send_errors, "max_entries_per_datagram": self._st_max_epd,
             "blocked_adds": self._st_blocked, "dropped": self._st_dropped,
             "queued": self._wcount - self._rcount, "queued_bytes": self._wpos - self._rpos}
        self._unlock()
        return d

    @property
    def running(self):
        """True while the sender thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def name(self):
        """The sender thread's name."""
        return self._name

    def __repr__(self):
        return f"<Bundler {self._name!r} dest={self._dest_repr} max_size={self._max_size} capacity={self._capacity}>"

    # -- sender thread -------------------------------------------------------------------------------

    def _run(self):
        with nogil:
            self._sender_loop()
        _rl_report_suppressed(&self._rl, self._name)

    cdef void _sender_loop(self) noexcept nogil:
        cdef uint64_t scan_pos, scan_cnt, wc, length, now, deadline
        cdef uint64_t cur_pos = 0, cur_len = 0, cur_cnt = 0, first_ns = 0, last_new_ns = 0
        cdef unsigned int ndg = 0
        cdef unsigned int i
        cdef timespec ts
        pthread_mutex_lock(&self._mu)
        scan_pos = self._rpos
        scan_cnt = self._rcount
        while not self._abort:
            wc = self._wcount
            if scan_cnt == wc:
                if cur_cnt == 0:
                    # idle: nothing queued
                    if self._closing and self._space_waiters == 0:
                        break
                    self._sender_waiting = True
                    self._wake_pos = self._wpos + 1
                    _abstime(_now_ns() + _SECOND_NS, &ts)     # the timeout is only a safety net
                    pthread_cond_timedwait(&self._data_cv, &self._mu, &ts)
                    self._sender_waiting = False
                    continue
                # a partial datagram and nothing new: linger, unless someone waits for it
                if not (self._closing or self._flush_waiters > 0 or self._space_waiters > 0):
                    now = _now_ns()
                    deadline = last_new_ns + self._linger_ns
                    if first_ns + self._max_delay_ns < deadline:
                        deadline = first_ns + self._max_delay_ns
                    if now < deadline:
                        self._sender_waiting = True
                        self._wake_pos = cur_pos + self._limit + 1     # enough to fill the datagram
                        _abstime(deadline, &ts)
                        pthread_cond_timedwait(&self._data_cv, &self._mu, &ts)
                        self._sender_waiting = False
                        continue
                self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                cur_cnt = 0
            else:
                # new entries: pack them (the ring between scan and wc is stable: adders only append)
                pthread_mutex_unlock(&self._mu)
                now = _now_ns()
                last_new_ns = now
                while scan_cnt < wc:
                    length = self._lens[scan_cnt % self._mcap]
                    if cur_cnt > 0 and cur_len + length > self._limit:
                        self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                        cur_cnt = 0
                        if ndg == self._batch:
                            break
                    if cur_cnt == 0:
                        cur_pos = scan_pos
                        cur_len = 0
                        first_ns = now
                    cur_len += length
                    cur_cnt += 1
                    scan_pos += length
                    scan_cnt += 1
                    if cur_len > self._limit:       # an oversized entry goes alone
                        self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                        cur_cnt = 0
                        if ndg == self._batch:
                            break
                if cur_cnt > 0 and ndg < self._batch and now - first_ns >= self._max_delay_ns:
                    self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                    cur_cnt = 0
                pthread_mutex_lock(&self._mu)
                if ndg == 0:
                    continue
            # send the closed datagrams (mutex released: adders keep appending meanwhile)
            pthread_mutex_unlock(&self._mu)
            self._send(ndg)
            pthread_mutex_lock(&self._mu)
            for i in range(ndg):
                if self._dg_state[i] == _DG_SENT:
                    self._st_entries += self._dg_cnt[i]
                    self._st_datagrams += 1
                    self._st_bytes += self._dg_len[i] + self._prelen + self._suflen
                    if self._dg_cnt[i] > self._st_max_epd:
                        self._st_max_epd = self._dg_cnt[i]
                else:
                    if self._dg_state[i] == _DG_FAILED:
                        self._st_send_errors += 1
                    else:
                        self._stop_dropped = True
                    self._st_dropped += self._dg_cnt[i]
                self._rcount += self._dg_cnt[i]
            self._rpos = self._dg_pos[ndg - 1] + self._dg_len[ndg - 1]
            ndg = 0
            if self._space_waiters > 0:
                pthread_cond_broadcast(&self._space_cv)
            if self._flush_waiters > 0:
                pthread_cond_broadcast(&self._flush_cv)
        # ended (drained, or aborted by stop()): whatever is left is dropped
        if self._wcount != self._rcount:
            self._stop_dropped = True
        self._st_dropped += self._wcount - self._rcount
        self._rcount = self._wcount
        self._rpos = self._wpos
        self._dead = True
        pthread_cond_broadcast(&self._space_cv)
        pthread_cond_broadcast(&self._flush_cv)
        pthread_mutex_unlock(&self._mu)

    cdef void _send(self, unsigned int ndg) noexcept nogil:
        """Sends datagrams 0..ndg-1 (mutex not held); sets _dg_state for each."""
        cdef unsigned int i, k
        cdef uint64_t idx, first
        cdef iovec* iov
        cdef int r, e
        for i in range(ndg):
            iov = &self._iovs[4 * i]
            k = 0
            if self._prelen:
                iov[k].iov_base = <void*>self._pre
                iov[k].iov_len = self._prelen
                k += 1
            idx = self._dg_pos[i] % self._capacity
            first = self._capacity - idx
            if first >= self._dg_len[i]:
                iov[k].iov_base = self._ring + idx
                iov[k].iov_len = self._dg_len[i]
                k += 1
            else:
                iov[k].iov_base = self._ring + idx
                iov[k].iov_len = first
                iov[k + 1].iov_base = self._ring
                iov[k + 1].iov_len = self._dg_len[i] - first
                k += 2
            if self._suflen:
                iov[k].iov_base = <void*>self._suf
                iov[k].iov_len = self._suflen
                k += 1
            self._msgs[i].msg_hdr.msg_name = &self._dest
            self._msgs[i].msg_hdr.msg_namelen = self._destlen
            self._msgs[i].msg_hdr.msg_iov = iov
            self._msgs[i].msg_hdr.msg_iovlen = k
            self._msgs[i].msg_hdr.msg_control = NULL
            self._msgs[i].msg_hdr.msg_controllen = 0
            self._msgs[i].msg_hdr.msg_flags = 0
            self._dg_state[i] = _DG_SENT
        i = 0
        while i < ndg:
            r = sendmmsg(self._fd, self._msgs + i, ndg - i, MSG_DONTWAIT)
            if r > 0:
                i += <unsigned int>r
                continue
            e = errno if r < 0 else EAGAIN
            if e == EINTR:
                continue
            if e == EAGAIN or e == ENOBUFS:
                if self._abort:
                    while i < ndg:
                        self._dg_state[i] = _DG_ABORTED
                        i += 1
                    break
                if _wait_writable(self._fd, _POLLOUT_MS) == 0 and e == ENOBUFS:
                    _sleep_us(200)
                continue
            self._dg_state[i] = _DG_FAILED
            self._log_send_error(e, self._dg_len[i] + self._prelen + self._suflen, self._dg_cnt[i])
            i += 1

    cdef void _log_send_error(self, int err, uint64_t size, uint64_t entries) noexcept nogil:
        cdef uint64_t sup = 0
        if not _rl_should_log(&self._rl, &sup):
            return
        with gil:
            try:
                _log.error("%s: sendmmsg to %s failed: %s; dropped a datagram of %d bytes (%d entries)%s",
                           self._name, self._dest_repr, os.strerror(err), size, entries, _suffix_suppressed(sup))
            except BaseException:
                pass


# ---------------------------------------------------------------------------------------------------
# sendmany
# ---------------------------------------------------------------------------------------------------

cdef _RateLimit _sendmany_rl


cdef int _sendmany_c(int fd, mmsghdr* msgs, Py_ssize_t n, Py_ssize_t* sent, int* fatal,
                     int* nfail, int* last_err, Py_ssize_t* last_idx) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef unsigned int vlen
    cdef int r, e
    while i < n:
        vlen = <unsigned int>(n - i if n - i < _MAX_VLEN else _MAX_VLEN)
        r = sendmmsg(fd, msgs + i, vlen, MSG_DONTWAIT)
        if r > 0:
            i += r
            sent[0] += r
            continue
        e = errno if r < 0 else EAGAIN
        if e == EINTR:
            continue
        if e == EAGAIN or e == ENOBUFS:
            if _wait_writable(fd, _POLLOUT_MS) != 0:
                fatal[0] = EBADF
                return -1
            if e == ENOBUFS:
                _sleep_us(200)
            continue
        if e == EBADF or e == ENOTSOCK:
            fatal[0] = e
            return -1
        nfail[0] += 1
        last_err[0] = e
        last_idx[0] = i
        i += 1      # drop that datagram, send the rest
    return 0


@cython.boundscheck(True)
@cython.wraparound(True)
def sendmany(sock, items):
    """Sends ``items`` = [(data: bytes-like, (host, port)), ...] with as few sendmmsg calls as possible.

    The GIL is released while sending; EAGAIN/ENOBUFS are retried after poll(POLLOUT).  A datagram
    the kernel refuses (e.g. EMSGSIZE, EACCES) is skipped and logged (rate-limited) and the rest is
    sent.  Returns the number of datagrams sent.  Raises OSError if the socket is closed, ValueError
    for a malformed item or destination (before anything is sent).
    """
    cdef int fd = _sock_fd(sock)
    cdef Py_ssize_t n
    cdef Py_ssize_t i, nviews = 0, sent = 0, last_idx = -1
    cdef Py_ssize_t naddr = 0
    cdef int fatal = 0, nfail = 0, last_err = 0
    cdef Py_buffer* views = NULL
    cdef mmsghdr* msgs = NULL
    cdef iovec* iovs = NULL
    cdef sockaddr_storage* addrs = NULL
    cdef socklen_t* addrlens = NULL
    cdef uint64_t sup = 0
    items = list(items)     # our own copy: resolving a name releases the GIL, another thread may change items
    n = len(items)
    if n == 0:
        return 0
    views = <Py_buffer*>calloc(n, sizeof(Py_buffer))
    msgs = <mmsghdr*>calloc(n, sizeof(mmsghdr))
    iovs = <iovec*>calloc(n, sizeof(iovec))
    addrs = <sockaddr_storage*>calloc(n, sizeof(sockaddr_storage))
    addrlens = <socklen_t*>calloc(n, sizeof(socklen_t))
    try:
        if views == NULL or msgs == NULL or iovs == NULL or addrs == NULL or addrlens == NULL:
            raise MemoryError(f"cannot allocate headers for {n} datagrams")
        index = {}
        for i in range(n):
            item = items[i]
            try:
                data, dest = item
            except (TypeError, ValueError):
                raise ValueError(f"items[{i}] must be (data, (host, port)), got {item!r}") from None
            key = dest if type(dest) is tuple else tuple(dest)
            j = index.get(key)
            if j is None:
                _fill_sockaddr(sock, key, &addrs[naddr], &addrlens[naddr])
                j = naddr
                index[key] = j
                naddr += 1
            PyObject_GetBuffer(data, &views[i], PyBUF_SIMPLE)
            nviews += 1
            iovs[i].iov_base = views[i].buf
            iovs[i].iov_len = <size_t>views[i].len
            msgs[i].msg_hdr.msg_iov = &iovs[i]
            msgs[i].msg_hdr.msg_iovlen = 1
            msgs[i].msg_hdr.msg_name = &addrs[<Py_ssize_t>j]
            msgs[i].msg_hdr.msg_namelen = addrlens[<Py_ssize_t>j]
        with nogil:
            _sendmany_c(fd, msgs, n, &sent, &fatal, &nfail, &last_err, &last_idx)
        if fatal:
            raise OSError(fatal, f"sendmany: {os.strerror(fatal)} (the socket was closed?) after {sent} of {n} "
                                 f"datagrams")
        if nfail and _rl_should_log(&_sendmany_rl, &sup):
            _log.error("sendmany: %d of %d datagrams refused by the kernel and skipped, the last one "
                       "(items[%d], %d bytes to %r): %s%s", nfail, n, last_idx, views[last_idx].len,
                       items[last_idx][1], os.strerror(last_err), _suffix_suppressed(sup))
        return sent
    finally:
        for i in range(nviews):
            PyBuffer_Release(&views[i])
        free(views)
        free(msgs)
        free(iovs)
        free(addrs)
        free(addrlens)


cdef extern from "<sys/socket.h>" nogil:
    ssize_t c_sendto "sendto" (int fd, const void* buf, size_t n, int flags, const sockaddr* addr, socklen_t alen)


cdef class DatagramSender:
    """Sends single datagrams from one socket, to destinations whose sockaddr it caches.

    A datagram first goes out with MSG_DONTWAIT while the GIL is held: on loopback that is a few
    microseconds and spares the thread the GIL hand-over a blocking ``socket.sendto`` costs (another
    thread takes the GIL and the sender waits to get it back). Only when the socket buffer is full does it
    wait for room, with the GIL released. Errors raise OSError with the kernel's errno."""

    def __init__(self, sock):
        self._sock = sock
        self._fd = _sock_fd(sock)
        self._addrs = {}

    cdef bytes _addr_of(self, object dest):
        cdef sockaddr_storage ss
        cdef socklen_t sl = 0
        cdef bytes blob = self._addrs.get(dest)
        if blob is None:
            _fill_sockaddr(self._sock, dest if type(dest) is tuple else dest.sockaddr(), &ss, &sl)
            blob = PyBytes_FromStringAndSize(<char*>&ss, sl)
            if len(self._addrs) > 4096:
                self._addrs.clear()
            self._addrs[dest] = blob
        return blob

    def send(self, data, dest):
        """Send ``data`` (bytes-like) to ``dest`` = (host, port[, flowinfo, scope_id]), or to an object
        whose ``sockaddr()`` returns such a tuple (an IpAddress)."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            return self.send_raw(<const char*>view.buf, <size_t>view.len, dest)
        finally:
            PyBuffer_Release(&view)

    cdef Py_ssize_t send_raw(self, const char* buf, size_t n, object dest) except -1:
        """:meth:`send` of ``n`` bytes at ``buf`` (the C entry point; the caller keeps them valid: the GIL
        is released while it waits for room)."""
        cdef bytes blob = self._addr_of(dest)
        cdef const sockaddr* sa = <const sockaddr*><const char*>blob
        cdef socklen_t sl = <socklen_t>len(blob)
        cdef ssize_t rc
        cdef int err = 0
        cdef int tries = 0
        rc = c_sendto(self._fd, buf, n, MSG_DONTWAIT, sa, sl)
        if rc < 0:
            err = errno
        while rc < 0 and (err == EAGAIN or err == ENOBUFS or err == EINTR) and tries < 50:   # <= ~5 s
            tries += 1
            with nogil:
                if _wait_writable(self._fd, 100) != 0:
                    err = EBADF                                 # the socket was closed meanwhile
                else:
                    rc = c_sendto(self._fd, buf, n, MSG_DONTWAIT, sa, sl)
                    err = errno if rc < 0 else 0
            if rc < 0 and err == EBADF:
                break
        if rc < 0:
            raise OSError(err, os.strerror(err))
        return rc
