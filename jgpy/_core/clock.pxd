# The one clock of the core: CLOCK_MONOTONIC, the clock of Python's time.monotonic() and of Java's
# System.nanoTime() on Linux. Everything in C that measures time cimports it from here; Python code uses
# jgpy._core.clock.now_ms / now_ns (jgpy.stack.timer re-exports now_ms).

from libc.stdint cimport int64_t
from posix.time cimport clock_gettime, nanosleep, timespec, CLOCK_MONOTONIC

cdef enum:
    SECOND_NS = 1000000000


cdef inline int64_t monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * SECOND_NS + ts.tv_nsec


cdef inline double monotonic_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6


cdef inline double monotonic_s() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec / 1e9


cdef inline void deadline_timespec(int64_t deadline_ns, timespec* ts) noexcept nogil:
    """``deadline_ns`` of this clock as the absolute time of a wait on a condition variable that uses it
    (``pthread_condattr_setclock(CLOCK_MONOTONIC)``)."""
    ts.tv_sec = <long>(deadline_ns // SECOND_NS)
    ts.tv_nsec = <long>(deadline_ns % SECOND_NS)


cdef inline void sleep_us(long us) noexcept nogil:
    cdef timespec ts
    ts.tv_sec = us // 1000000
    ts.tv_nsec = (us % 1000000) * 1000
    nanosleep(&ts, NULL)
