# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# Every C index below is a reader index checked against _n (at most MAX_READERS) where it comes from Python.
"""Relay delivery: one socket, several receive threads, each waiting in an epoll instance of its own.

The socket is armed (level-triggered ``EPOLLIN``) in exactly one of them, the owner's, which reads it as a
single thread would. Before the owner runs code that may block (the application) it hands the socket to the
next reader (:meth:`Relay.hand_over`: two ``epoll_ctl`` calls, no wake-up unless a datagram comes), and takes
it back afterwards (:meth:`Relay.take_back`: the ownership at once, the two ``epoll_ctl`` calls once the reader
has released the GIL, :meth:`Relay.rearm`). A hand-over is refused in a stream: when a datagram is already
waiting on the socket (``FIONREAD``), or the previous hand-over was less than the relay gap ago.

Every instance also watches a wake-up pipe (level-triggered): :meth:`Relay.wake` wakes every reader at once.
"""

import os

from libc.errno cimport errno, EINTR
from libc.stdint cimport uint32_t, uint64_t
from posix.unistd cimport close as c_close

from jgpy._core.clock cimport monotonic_ns


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


cdef extern from "<sys/ioctl.h>" nogil:
    int ioctl(int fd, unsigned long request, ...)
    enum: FIONREAD


cdef int _arm(int epfd, int fd, bint on) noexcept nogil:
    """Arm (level-triggered EPOLLIN) or disarm (one-shot with no events: at most one EPOLLERR/EPOLLHUP, then
    nothing) the socket's registration in ``epfd``."""
    cdef epoll_event ev
    ev.events = EPOLLIN if on else EPOLLONESHOT
    ev.data.u64 = 0
    ev.data.u32 = EV_SOCKET
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)


cdef int _register(int epfd, int fd, uint32_t events, uint32_t tag) except -1:
    cdef epoll_event ev
    ev.events = events
    ev.data.u64 = 0
    ev.data.u32 = tag
    if epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0:
        raise OSError(errno, f"epoll_ctl(ADD): {os.strerror(errno)}")
    return 0


cdef class Relay:
    """Relay(fd, readers, gap_us)

    The epoll instances of the ``readers`` receive threads of the socket ``fd`` (reader 0 owns it first) and a
    wake-up pipe watched by all of them. ``handovers`` counts the hand-overs made, ``stream_refusals`` those
    refused as a stream."""

    def __cinit__(self, *args, **kwargs):
        cdef int i
        self._n = 0
        self._wake_r = self._wake_w = -1
        for i in range(MAX_READERS):
            self._epfds[i] = -1
            self._rearm_from[i] = -1

    def __init__(self, int fd, int readers, long gap_us):
        cdef int i
        if not 1 <= readers <= MAX_READERS:
            raise ValueError(f"readers must be in 1..{MAX_READERS}, got {readers}")
        self._fd = fd
        self._gap_ns = <uint64_t>gap_us * 1000
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._wake_r, self._wake_w = r, w
        for i in range(readers):
            self._epfds[i] = epoll_create1(EPOLL_CLOEXEC)
            if self._epfds[i] < 0:
                raise OSError(errno, f"epoll_create1: {os.strerror(errno)}")
            self._n = i + 1
            _register(self._epfds[i], fd, EPOLLIN if i == 0 else EPOLLONESHOT, EV_SOCKET)
            _register(self._epfds[i], self._wake_r, EPOLLIN, EV_WAKE)     # level-triggered: wakes every reader
        self._owner = 0

    def __dealloc__(self):
        cdef int i
        for i in range(self._n):
            c_close(self._epfds[i])
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                c_close(fd)

    def wake(self) -> None:
        """Wake every reader (they look at their loop's state)."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass    # the pipe is full: a wake-up is already pending

    cdef int wait(self, int reader, int timeout_ms, int* err) noexcept nogil:
        """Wait in ``reader``'s instance: 1 the socket is readable, 0 nothing (a timeout, EINTR, the wake-up
        pipe), -1 an error in ``err``."""
        cdef epoll_event evs[2]
        cdef int r, k
        r = epoll_wait(self._epfds[reader], evs, 2, timeout_ms)
        if r < 0:
            if errno == EINTR:
                return 0
            err[0] = errno
            return -1
        for k in range(r):
            if evs[k].data.u32 == EV_SOCKET:
                return 1
        return 0

    cdef bint hand_over(self, int reader) except -1:
        """Called by ``reader``'s own thread (GIL held) before it runs code that may block: if it owns the
        socket, the next reader does from now on. False, and nothing handed over, in a stream (a datagram is
        waiting, or the previous call was less than the gap ago)."""
        cdef int nxt
        cdef int waiting = 0
        cdef uint64_t now = <uint64_t>monotonic_ns(), last = self._last_ns
        self._last_ns = now
        if now - last < self._gap_ns or (ioctl(self._fd, FIONREAD, &waiting) == 0 and waiting > 0):
            self.stream_refusals += 1
            return False
        if self._owner != reader or self._n < 2:
            return True
        self.rearm(reader)                        # a take_back() of this batch not carried out yet: now
        nxt = (reader + 1) % self._n
        _arm(self._epfds[nxt], self._fd, True)    # never a moment with nobody armed
        _arm(self._epfds[reader], self._fd, False)
        self._owner = nxt
        self._handed[reader] = True
        self.handovers += 1
        return True

    cdef void take_back(self, int reader) noexcept:
        """After the code that may block: ``reader`` owns the socket again. Does nothing unless
        :meth:`hand_over` gave it away. Only the ownership changes here; the ``epoll_ctl`` calls are left to
        :meth:`rearm`, which the reader calls once it has released the GIL (the previous owner stays armed
        meanwhile, so the socket is never unwatched; only the owner re-arms, so nobody else moves the
        registration in between)."""
        if not self._handed[reader]:
            return
        self._handed[reader] = False
        if self._owner == reader:
            return
        self._rearm_from[reader] = self._epfds[self._owner]
        self._owner = reader

    cdef void rearm(self, int reader) noexcept nogil:
        """The re-arming :meth:`take_back` left to ``reader``: armed in its instance, then disarmed in the previous
        owner's (if that one is reading already, it finishes its batch)."""
        if self._rearm_from[reader] >= 0:
            _arm(self._epfds[reader], self._fd, True)
            _arm(self._rearm_from[reader], self._fd, False)
            self._rearm_from[reader] = -1

    cdef void release(self, int reader) noexcept:
        """``reader``'s thread ends: if the socket is its, the others go on reading it."""
        self.rearm(reader)
        self._last_ns = 0
        try:
            self.hand_over(reader)
        except Exception:
            pass
