# Seqno tables of NAKACK and UNICAST: retransmitter, NakReceiverWindow, AckSenderWindow, AckReceiverWindow.
# Every method runs with the GIL held and never releases it (see the module docstring of tables.pyx).
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t


cdef struct SeqRing:
    # Circular buffer of owned references indexed by seqno: seqno s lives in slots[s & mask].
    # Invariant: every stored seqno lies in [lo, hi] and hi - lo < cap; lo/hi mean nothing when count == 0.
    PyObject** slots
    uint64_t mask           # cap - 1 (cap is a power of two)
    Py_ssize_t cap
    Py_ssize_t count        # non-NULL slots
    int64_t lo
    int64_t hi


cdef struct XRange:
    # One missing range registered with a Retransmitter, with its own retransmission schedule.
    int64_t first
    int64_t last
    int64_t missing         # seqnos of [first, last] not received yet (> 0 while the range exists)
    int64_t nxmits          # retransmissions requested so far (due() calls that returned this range)
    double next_time        # when the next retransmission is due (ms, caller's clock)
    int32_t stage           # index of the interval used at the next reschedule
    uint64_t* bits          # bit i set = first+i received; NULL for a single-seqno range


cdef struct SEntry:
    double t                # due time
    int64_t seqno


cdef struct SQueue:
    # Due-time-sorted queue of per-message schedules (AckSenderWindow), one per interval stage.
    SEntry* e
    Py_ssize_t head
    Py_ssize_t tail
    Py_ssize_t cap


cdef class Retransmitter:
    cdef XRange* _r             # sorted by first, never overlapping
    cdef Py_ssize_t _n
    cdef Py_ssize_t _cap
    cdef int64_t _missing       # sum of _r[i].missing
    cdef int64_t* _iv           # intervals (ms); the last one repeats forever
    cdef int _niv
    cdef double _next           # min next_time, valid when _next_valid
    cdef bint _next_valid

    cdef Py_ssize_t _lower(self, int64_t seqno)
    cdef int _insert(self, Py_ssize_t idx, int64_t first, int64_t last, double now) except -1
    cdef void _drop(self, Py_ssize_t idx)
    cdef int c_add(self, int64_t first, int64_t last, double now) except -1
    cdef int64_t c_remove(self, int64_t seqno)
    cdef void c_remove_up_to(self, int64_t seqno)
    cdef list c_due(self, double now)
    cdef void c_clear(self)


cdef class NakReceiverWindow:
    cdef SeqRing _ring
    cdef int64_t _low
    cdef int64_t _hd            # highest_delivered
    cdef int64_t _hr            # highest_received
    cdef bint _running
    cdef readonly Retransmitter retransmitter

    cdef int c_add(self, int64_t seqno, object msg, double now) except -1
    cdef list c_remove_many(self, bint remove_msgs, Py_ssize_t max_results)
    cdef object c_get(self, int64_t seqno)
    cdef bint c_stable(self, int64_t seqno) except -1


cdef class AckSenderWindow:
    cdef SeqRing _ring
    cdef SQueue* _q             # one queue per interval stage
    cdef int64_t* _iv
    cdef int _niv
    cdef int64_t _lowest        # Java's 'lowest': the next seqno an ack must cover
    cdef int64_t _highest

    cdef void _purge_stale(self)
    cdef bint c_add(self, int64_t seqno, object msg, double now) except -1
    cdef Py_ssize_t c_ack(self, int64_t seqno) except -1
    cdef list c_due(self, double now)


cdef class AckReceiverWindow:
    cdef SeqRing _ring
    cdef int64_t _ntr           # next_to_remove

    cdef int c_add(self, int64_t seqno, object msg) except -2
    cdef tuple c_remove_many(self, Py_ssize_t max_results)
