# Relay delivery's hand-over of a socket between its receive threads (relay.pyx).

from libc.stdint cimport uint64_t

cdef enum:
    MAX_READERS = 16
    EV_SOCKET = 1               # epoll_data.u32 of the socket's registration
    EV_WAKE = 2                 # ... and of the wake-up pipe's


cdef class Relay:
    cdef int _fd
    cdef int _n
    cdef int _epfds[MAX_READERS]
    cdef bint _handed[MAX_READERS]    # hand_over() gave the socket away; take_back() takes it back
    cdef int _rearm_from[MAX_READERS] # take_back() left the re-arming to the reader: the epoll to disarm (-1: none)
    cdef int _owner                   # the reader whose epoll instance has the socket armed
    cdef int _wake_r, _wake_w
    cdef uint64_t _gap_ns, _last_ns
    cdef readonly uint64_t handovers, stream_refusals

    cdef int wait(self, int reader, int timeout_ms, int* err) noexcept nogil
    cdef bint hand_over(self, int reader) except -1
    cdef void take_back(self, int reader) noexcept
    cdef void rearm(self, int reader) noexcept nogil
    cdef void release(self, int reader) noexcept
