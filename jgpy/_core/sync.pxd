# Synchronisation shared by the cores: a lock taken from C and Python, a hand-off to one consumer thread.

from cpython.pythread cimport (PyThread_type_lock, PyThread_acquire_lock, PyThread_release_lock, NOWAIT_LOCK,
                               WAIT_LOCK)


cdef class Lock:
    cdef PyThread_type_lock _lock

    cdef inline void take(self) noexcept:
        if not PyThread_acquire_lock(self._lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)

    cdef inline void give(self) noexcept:
        PyThread_release_lock(self._lock)


cdef class Handoff:
    cdef list _items
    cdef readonly object wakeup

    cdef int put(self, object item) except -1
