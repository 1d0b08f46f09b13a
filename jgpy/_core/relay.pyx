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

A relay may also have a guest: one more epoll instance, never in the rotation, for a thread that waits for
something the socket will bring (an RPC caller waiting for its answer) and reads the socket itself meanwhile,
so the answer needs no hand-over to it (:meth:`DatagramLoop.read_while`). While it waits (:meth:`Relay.lend`)
the socket is armed in the guest's instance instead of the owner's; it goes back before the guest handles
what it read. Arming always comes before disarming, so the socket is never unwatched; a race with a reader
re-arming at the same moment leaves two instances armed for a while, and both read (as in a hand-over).
"""

import os

from cpython.pythread cimport PyThread_get_thread_ident
from libc.errno cimport errno, EINTR
from libc.stdint cimport uint32_t, uint64_t
from posix.unistd cimport close as c_close, read as c_read, write as c_write

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
    """Relay(fd, readers, gap_us, guest=False)

    The epoll instances of the ``readers`` receive threads of the socket ``fd`` (reader 0 owns it first) and a
    wake-up pipe watched by all of them; with ``guest``, one more instance (index ``readers``) for a waiting
    thread (:meth:`claim`, :meth:`lend`). ``handovers`` counts the hand-overs made, ``stream_refusals`` those
    refused as a stream, ``lends`` the guest's waits."""

    def __cinit__(self, *args, **kwargs):
        cdef int i
        self._n = 0
        self._guest = -1
        self._wake_r = self._wake_w = -1
        self._gwake_r = self._gwake_w = -1
        for i in range(MAX_READERS):
            self._epfds[i] = -1
            self._rearm_from[i] = -1

    def __init__(self, int fd, int readers, long gap_us, bint guest=False):
        cdef int i, g
        if not 1 <= readers <= MAX_READERS - guest:
            raise ValueError(f"readers must be in 1..{MAX_READERS - guest}, got {readers}")
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
        if guest:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            self._gwake_r, self._gwake_w = r, w
            g = readers
            self._epfds[g] = epoll_create1(EPOLL_CLOEXEC)
            if self._epfds[g] < 0:
                raise OSError(errno, f"epoll_create1: {os.strerror(errno)}")
            self._guest = g
            _register(self._epfds[g], fd, EPOLLONESHOT, EV_SOCKET)
            _register(self._epfds[g], self._wake_r, EPOLLIN, EV_WAKE)
            _register(self._epfds[g], self._gwake_r, EPOLLIN, EV_GUEST)

    def __dealloc__(self):
        cdef int i
        for i in range(self._n):
            c_close(self._epfds[i])
        if self._guest >= 0:
            c_close(self._epfds[self._guest])
        for fd in (self._wake_r, self._wake_w, self._gwake_r, self._gwake_w):
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
        """Wait in ``reader``'s instance: 1 the socket is readable, 0 nothing (a timeout, EINTR, a wake-up
        pipe), -1 an error in ``err``."""
        cdef epoll_event evs[3]
        cdef int r, k
        r = epoll_wait(self._epfds[reader], evs, 3, timeout_ms)
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

    # ---- the guest: a thread that waits for what the socket brings and reads it meanwhile

    cdef bint claim(self) noexcept:
        """(GIL held) The calling thread becomes the guest: False if there is none or another thread is."""
        if self._guest < 0 or self._claimed:
            return False
        self._claimed = True
        self._guest_ident = PyThread_get_thread_ident()
        return True

    cdef void unclaim(self) noexcept:
        """(GIL held) The guest is done: the socket is the owner's (see :meth:`lend`)."""
        self.lend(False)
        self._claimed = False
        self._guest_ident = 0

    cdef void lend(self, bint on) noexcept:
        """(GIL held, by the guest) ``on``: the socket is armed in the guest's instance and no longer in the
        owner's, until ``lend(False)`` arms it in the owner's again. A pending :meth:`wake_guest` is drained
        first."""
        cdef char buf[64]
        if on == self._lent or self._guest < 0:
            return
        if on:
            if self._guest_woken:
                self._guest_woken = False
                while c_read(self._gwake_r, buf, sizeof(buf)) > 0:
                    pass
            _arm(self._epfds[self._guest], self._fd, True)
            _arm(self._epfds[self._owner], self._fd, False)
            self.lends += 1
        else:
            _arm(self._epfds[self._owner], self._fd, True)
            _arm(self._epfds[self._guest], self._fd, False)
        self._lent = on

    def wake_guest(self) -> None:
        """Wake the guest from its wait (it looks at what it waits for), unless the calling thread is the guest
        or there is none: e.g. when another reader handled the answer the guest waits for."""
        cdef char x = 120
        if not self._claimed or PyThread_get_thread_ident() == self._guest_ident:
            return
        self._guest_woken = True
        c_write(self._gwake_w, &x, 1)       # a full pipe: a wake-up is pending already
