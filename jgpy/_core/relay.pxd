# Relay delivery's hand-over of a socket between its receive threads (relay.pyx).

from libc.stdint cimport uint64_t

cdef enum:
    MAX_READERS = 16
    EV_SOCKET = 1               # epoll_data.u32 of the socket's registration
    EV_WAKE = 2                 # ... and of the wake-up pipe's
    EV_GUEST = 3                # ... and of the guest's own wake-up pipe


cdef class Relay:
    cdef int _fd
    cdef int _n
    cdef int _epfds[MAX_READERS]
    cdef bint _handed[MAX_READERS]    # hand_over() gave the socket away; take_back() takes it back
    cdef int _rearm_from[MAX_READERS] # take_back() left the re-arming to the reader: the epoll to disarm (-1: none)
    cdef int _owner                   # the reader whose epoll instance has the socket armed
    cdef int _guest                   # the guest's epoll instance (index _n), -1: none; never the owner
    cdef bint _claimed                # a waiting thread is the guest (claim() .. unclaim())
    cdef bint _lent                   # ... and the socket is armed in the guest's instance (lend(True))
    cdef bint _guest_woken            # wake_guest() wrote to the guest's pipe: drained at the next lend
    cdef unsigned long _guest_ident
    cdef int _gwake_r, _gwake_w
    cdef int _wake_r, _wake_w
    cdef uint64_t _gap_ns, _last_ns
    cdef readonly uint64_t handovers, stream_refusals, lends

    cdef int wait(self, int reader, int timeout_ms, int* err) noexcept nogil
    cdef bint hand_over(self, int reader) except -1
    cdef void take_back(self, int reader) noexcept
    cdef void rearm(self, int reader) noexcept nogil
    cdef void release(self, int reader) noexcept
    cdef bint claim(self) noexcept
    cdef void unclaim(self) noexcept
    cdef void lend(self, bint on) noexcept
