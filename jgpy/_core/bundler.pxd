# Declarations of the Bundler (bundler.pyx) shared with other modules: the transport's send core adds entries
# with a C call.
from libc.stdint cimport uint32_t, uint64_t
from posix.uio cimport iovec
from posix.types cimport clockid_t
from posix.time cimport timespec

from jgpy._core.sockets cimport mmsghdr, sockaddr_storage, socklen_t


cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    ctypedef struct pthread_condattr_t:
        pass

    int pthread_mutex_init(pthread_mutex_t* m, const void* attr)
    int pthread_mutex_destroy(pthread_mutex_t* m)
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_trylock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_condattr_init(pthread_condattr_t* a)
    int pthread_condattr_setclock(pthread_condattr_t* a, clockid_t clock)
    int pthread_condattr_destroy(pthread_condattr_t* a)
    int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* a)
    int pthread_cond_destroy(pthread_cond_t* c)
    int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m)
    int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const timespec* abstime)
    int pthread_cond_signal(pthread_cond_t* c)
    int pthread_cond_broadcast(pthread_cond_t* c)


cdef class Bundler:
    cdef object _sock
    cdef object _thread
    cdef str _name
    cdef str _dest_repr
    cdef int _fd
    cdef bytes _prefix
    cdef bytes _suffix
    cdef const char* _pre
    cdef const char* _suf
    cdef size_t _prelen
    cdef size_t _suflen
    cdef size_t _max_size
    cdef size_t _limit          # payload bytes that fit one shared datagram: max_size - prefix - suffix
    cdef size_t _max_entry      # biggest entry at all: 65507 - prefix - suffix
    cdef uint64_t _capacity
    cdef uint64_t _mcap         # entry slots in the length ring
    cdef uint64_t _linger_ns
    cdef uint64_t _max_delay_ns
    cdef unsigned int _batch
    cdef sockaddr_storage _dest
    cdef socklen_t _destlen
    cdef char* _ring
    cdef uint32_t* _lens
    cdef bint _sync_ok

    # -- shared state, guarded by _mu ------------------------------------------------------------
    cdef pthread_mutex_t _mu
    cdef pthread_cond_t _data_cv      # the sender waits for entries / a reason to send
    cdef pthread_cond_t _space_cv     # adders wait for room
    cdef pthread_cond_t _flush_cv     # flush() waits for the sender's progress
    cdef uint64_t _wpos               # bytes ever added (ring write position)
    cdef uint64_t _wcount             # entries ever added
    cdef uint64_t _rpos               # bytes ever released by the sender
    cdef uint64_t _rcount             # entries ever released (sent or dropped)
    cdef uint64_t _wake_pos           # the waiting sender wants a signal once _wpos >= this
    cdef bint _sender_waiting
    cdef int _space_waiters
    cdef int _flush_waiters
    cdef uint64_t _ticket_next        # FIFO among adders waiting for room
    cdef uint64_t _ticket_serving
    cdef bint _started
    cdef bint _closing                # stop() called: drain, then end
    cdef bint _abort                  # stop() timed out: drop what is left and end
    cdef bint _dead                   # the sender has ended (or will never run)
    cdef bint _stop_dropped           # stop() dropped queued entries (never started, or gave up)
    cdef uint64_t _st_entries, _st_datagrams, _st_bytes, _st_send_errors, _st_max_epd, _st_blocked, _st_dropped

    # -- sender thread only -----------------------------------------------------------------------
    cdef mmsghdr* _msgs
    cdef iovec* _iovs                 # 4 per datagram: prefix, 1-2 ring segments, suffix
    cdef uint64_t* _dg_pos
    cdef uint64_t* _dg_len
    cdef uint64_t* _dg_cnt
    cdef int* _dg_state
    cdef object _log                  # RateLimitedLog (or None: errors are only counted)

    cdef int add_raw(self, const char* data, size_t n) except -1
    cdef int _check_ready(self) except -1
    cdef void _put(self, const char* data, size_t n) noexcept nogil
    cdef int _put_waiting(self, const char* data, size_t n) noexcept nogil
    cdef void _sender_loop(self) noexcept nogil
    cdef void _send(self, unsigned int ndg) noexcept nogil
    cdef void _log_send_error(self, int err, uint64_t size, uint64_t entries) noexcept nogil

    cdef inline void _lock(self) noexcept:
        """Takes the mutex from a thread holding the GIL without ever blocking with the GIL held."""
        if pthread_mutex_trylock(&self._mu) != 0:
            with nogil:
                pthread_mutex_lock(&self._mu)

    cdef inline void _unlock(self) noexcept nogil:
        pthread_mutex_unlock(&self._mu)

    cdef inline bint pending(self) noexcept nogil:
        """Entries queued or being sent (read without the mutex: a heuristic, stale by at most one send)."""
        return self._wcount != self._rcount

    cdef inline bint accepting(self) noexcept nogil:
        """Not stopped: add() queues (read without the mutex)."""
        return not (self._closing or self._dead)

    cdef inline bint _has_room(self, size_t n) noexcept nogil:
        return (self._capacity - (self._wpos - self._rpos) >= n and self._mcap - (self._wcount - self._rcount) >= 1)

    cdef inline void _close_datagram(self, unsigned int* ndg, uint64_t pos, uint64_t length, uint64_t cnt) noexcept nogil:
        self._dg_pos[ndg[0]] = pos
        self._dg_len[ndg[0]] = length
        self._dg_cnt[ndg[0]] = cnt
        ndg[0] += 1
