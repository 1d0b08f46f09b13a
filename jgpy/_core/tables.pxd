# Seqno tables of NAKACK and UNICAST: retransmitter, NakReceiverWindow, AckSenderWindow, AckReceiverWindow.
# Every method runs with the GIL held and never releases it (see the module docstring of tables.pyx).
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint64_t


cdef enum:
    SEQ_PAGE_SHIFT = 10
    SEQ_PAGE_SLOTS = 1 << SEQ_PAGE_SHIFT      # seqnos per page: 8 KB of pointers


cdef struct SeqPage:
    int64_t pno             # page number: seqno >> SEQ_PAGE_SHIFT
    Py_ssize_t count        # non-NULL slots (a page is released the moment this reaches 0)
    PyObject* slots[SEQ_PAGE_SLOTS]


cdef struct SeqRing:
    # Owned references indexed by seqno, in pages allocated when a seqno first lands in them and released
    # when they empty: seqno s lives in dir[(s >> SEQ_PAGE_SHIFT) & dmask].slots[s % SEQ_PAGE_SLOTS].
    # Invariants: every stored seqno lies in [lo, hi] (lo/hi mean nothing when count == 0), hi - lo < MAX_WINDOW,
    # every page in dir but idle holds at least one object and its page number lies in [lo >> SHIFT, hi >> SHIFT],
    # whose length is at most dcap (so no two live pages share a directory slot).
    SeqPage** dir
    uint64_t dmask          # dcap - 1 (dcap is a power of two)
    Py_ssize_t dcap
    Py_ssize_t count        # stored objects
    Py_ssize_t npages       # pages in dir (idle included)
    int64_t lo
    int64_t hi
    SeqPage* spare          # one empty page kept for reuse (all slots NULL), or NULL
    SeqPage* idle           # while count == 0: the page that emptied last, left in dir for the next put, or NULL
    int64_t refused         # seqnos refused as too far from the stored ones (MAX_WINDOW)


cdef struct XRun:
    int64_t a               # a missing run [a, b] of an XRange
    int64_t b


cdef struct XRange:
    # One missing range registered with a Retransmitter, with its own retransmission schedule. Its missing
    # seqnos are kept as sorted, disjoint, non-adjacent runs: memory grows with the holes, not the length.
    int64_t first
    int64_t last
    int64_t missing         # seqnos of [first, last] not received yet (> 0 while the range exists)
    int64_t nxmits          # retransmission rounds started (due() calls that returned part of this range)
    int64_t resume          # while resuming: the next seqno to ask for in the round a budget cut short
    double next_time        # when the next retransmission is due (ms, caller's clock)
    int32_t stage           # index of the interval used at the next reschedule
    bint resuming
    Py_ssize_t nruns
    Py_ssize_t runs_cap     # capacity of runs (0 while runs is NULL)
    XRun one                # the only run while runs is NULL
    XRun* runs              # NULL until a seqno inside a run arrives (then all runs live here)


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
    cdef Py_ssize_t _nruns      # sum of _r[i].nruns
    cdef int64_t* _iv           # intervals (ms); the last one repeats forever
    cdef int _niv
    cdef double _next           # min next_time, valid when _next_valid
    cdef bint _next_valid

    cdef Py_ssize_t _lower(self, int64_t seqno)
    cdef int _insert(self, Py_ssize_t idx, int64_t first, int64_t last, double now) except -1
    cdef void _drop(self, Py_ssize_t idx) noexcept
    cdef void _maybe_shrink(self) noexcept
    cdef int c_add(self, int64_t first, int64_t last, double now) except -1
    cdef int64_t c_remove(self, int64_t seqno) except -1
    cdef void c_remove_up_to(self, int64_t seqno) noexcept
    cdef list c_due(self, double now, int64_t budget)
    cdef void c_clear(self) noexcept


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

    cdef void _purge_stale(self) noexcept
    cdef bint c_add(self, int64_t seqno, object msg, double now) except -1
    cdef Py_ssize_t c_ack(self, int64_t seqno) except -1
    cdef list c_due(self, double now)


cdef class AckReceiverWindow:
    cdef SeqRing _ring
    cdef int64_t _ntr           # next_to_remove

    cdef int c_add(self, int64_t seqno, object msg) except -2
    cdef tuple c_remove_many(self, Py_ssize_t max_results)
