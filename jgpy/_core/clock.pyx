# cython: language_level=3
"""The core's clock for Python code: CLOCK_MONOTONIC (see clock.pxd, which the C code cimports)."""

from jgpy._core.clock cimport monotonic_ms, monotonic_ns


def now_ms() -> float:
    """Monotonic milliseconds: every timeout and retransmission schedule, in C and in Python, reads this clock
    (the clock of ``time.monotonic``)."""
    return monotonic_ms()


def now_ns() -> int:
    """Monotonic nanoseconds (the clock of ``time.monotonic_ns`` and of Java's ``System.nanoTime`` on Linux)."""
    return monotonic_ns()
