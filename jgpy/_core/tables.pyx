# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# No Python-level indexing happens on the hot paths; every C array index below is derived from a seqno that
# was checked against the table's bounds (SeqRing lo/hi and its pages, XRange runs, SQueue head/tail) first.
"""Seqno bookkeeping of the reliable-delivery protocols: pbcast.NAKACK and UNICAST (JGroups 2.12.2).

* :class:`Retransmitter` -- ``RangeBasedRetransmitter``: missing seqno ranges, each with its own
  retransmission schedule (``StaticInterval``, or ``ExponentialInterval`` when ``exponential_backoff > 0``).
* :class:`NakReceiverWindow` -- the per-sender receive window of NAKACK (``stack/NakReceiverWindow.java``).
* :class:`AckSenderWindow` -- UNICAST's unacked messages to one peer, per-message retransmission schedule.
* :class:`AckReceiverWindow` -- UNICAST's receive window for one peer.

Threading contract: every method is called with the GIL held and never releases it, so each call is
atomic with respect to other Python threads; there are no locks inside. (The one way another thread
could run in the middle of a call is a stored object's finaliser -- ``__del__`` or a weakref callback --
running Python code when the table drops its reference; the tables update their own state *before*
dropping any reference, so such a thread always sees a consistent table.)

Stored values are Python objects (messages, never None); seqnos are C ``int64``. Time is passed in by the
caller as ``now`` in milliseconds (float or int, any monotonic clock): the tables never read a clock, which
makes them deterministic. A retransmission is rescheduled relative to the ``now`` of the :meth:`due` call
that returned it, as Java's timer reschedules a task relative to the moment it ran.

Messages live in pages of ``SEQ_PAGE_SLOTS`` (1024) ``PyObject*`` slots indexed by seqno, allocated when a
seqno first lands in one and released when it empties, under a directory with one pointer per page of the
window's span (a power of two, doubled when a seqno falls beyond it, shrunk when the live span drops below
1/8 of it). Missing ranges keep their missing seqnos as runs. So a window's memory grows with the messages
it holds, not with the seqnos between them: a sender (or a spoofer of its address) that jumps far ahead costs
a directory entry per 1024 seqnos of the jump and one page, not a slot per seqno. The span between the
lowest and the highest stored seqno of one window, and a gap, are limited to :data:`MAX_WINDOW` (an
``OverflowError`` names the offending seqno; :attr:`~NakReceiverWindow.refused` counts them). In-order
arrival is O(1) and never touches the retransmitter.
"""

from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.list cimport PyList_New
from libc.string cimport memset, memmove
from libc.stdint cimport int32_t, int64_t, uint64_t, INT64_MAX

cdef extern from "Python.h":
    # PyList_SET_ITEM steals the reference it is given
    void PyList_SET_ITEM_PTR "PyList_SET_ITEM" (object lst, Py_ssize_t i, PyObject* item)

#: Largest span (highest - lowest + 1 seqnos) a window may hold, and the largest range a Retransmitter takes.
MAX_WINDOW = 1 << 24
#: Cap of the exponential retransmission interval (``ExponentialInterval.MAX``), in ms.
EXPONENTIAL_MAX = 15000
#: Seqnos per page of a window (a page is 8 KB of pointers on a 64-bit machine).
PAGE_SLOTS = SEQ_PAGE_SLOTS
#: The first seqno of a UNICAST connection (``Global.DEFAULT_FIRST_UNICAST_SEQNO``).
DEFAULT_FIRST_UNICAST_SEQNO = 1

cdef enum:
    C_MAX_WINDOW = 1 << 24
    C_EXP_MAX = 15000

DEF_TIMEOUTS = (300, 600, 1200)


# ---------------------------------------------------------------------------------------------------------
# Retransmission intervals: StaticInterval and ExponentialInterval flattened into one list whose last value
# repeats forever.

cdef int make_intervals(object timeouts, int64_t exponential_backoff, int64_t** out, int* n) except -1:
    cdef list vals
    cdef int64_t v, nv
    cdef int i
    if exponential_backoff > 0:
        # ExponentialInterval: returns value, then value = min(MAX, value * 2)
        vals = [exponential_backoff]
        v = exponential_backoff
        while True:
            nv = C_EXP_MAX if v > C_EXP_MAX // 2 else v * 2
            if nv == v:
                break
            vals.append(nv)
            v = nv
    else:
        if timeouts is None:
            timeouts = DEF_TIMEOUTS
        vals = [int(x) for x in timeouts]
        if not vals:
            raise ValueError("retransmission timeouts must not be empty")
        for x in vals:
            if x <= 0:
                raise ValueError(f"retransmission timeouts must be positive (ms), got {vals!r}")
    out[0] = <int64_t*>PyMem_Malloc(len(vals) * sizeof(int64_t))
    if out[0] == NULL:
        raise MemoryError()
    for i in range(len(vals)):
        out[0][i] = vals[i]
    n[0] = len(vals)
    return 0


# ---------------------------------------------------------------------------------------------------------
# SeqRing: owned references indexed by seqno, in pages (see tables.pxd). A window's memory is its directory
# (one pointer per SEQ_PAGE_SLOTS seqnos of its span, a power of two) plus one page per SEQ_PAGE_SLOTS-aligned
# block of seqnos that holds a message: a handful of messages spread over MAX_WINDOW seqnos costs a few
# hundred KB, not the 128 MB of a flat array over the span.

cdef enum:
    PAGE_MASK = SEQ_PAGE_SLOTS - 1
    DIR_MIN_CAP = 4


cdef inline int64_t page_no(int64_t s) noexcept:
    return s >> SEQ_PAGE_SHIFT         # arithmetic shift: floor division, also for negative seqnos


cdef inline int64_t page_last(int64_t s) noexcept:
    """The last seqno of s's page (no overflow: a page starts at a multiple of SEQ_PAGE_SLOTS)."""
    return (s - (s & PAGE_MASK)) + PAGE_MASK


cdef inline SeqPage* ring_page(SeqRing* r, int64_t s) noexcept:
    return r.dir[<uint64_t>page_no(s) & r.dmask]


cdef int ring_init(SeqRing* r) except -1:
    r.dir = <SeqPage**>PyMem_Malloc(DIR_MIN_CAP * sizeof(SeqPage*))
    if r.dir == NULL:
        raise MemoryError()
    memset(r.dir, 0, DIR_MIN_CAP * sizeof(SeqPage*))
    r.dcap = DIR_MIN_CAP
    r.dmask = DIR_MIN_CAP - 1
    r.count = 0
    r.npages = 0
    r.lo = 0
    r.hi = -1
    r.spare = NULL
    r.idle = NULL
    r.refused = 0
    return 0


cdef SeqPage* page_new(SeqRing* r) except NULL:
    """An empty page (all slots NULL): the spare one, or a new one."""
    cdef SeqPage* pg = r.spare
    if pg != NULL:
        r.spare = NULL
        return pg
    pg = <SeqPage*>PyMem_Malloc(sizeof(SeqPage))
    if pg == NULL:
        raise MemoryError()
    memset(pg, 0, sizeof(SeqPage))
    return pg


cdef inline void page_detach(SeqRing* r, SeqPage* pg) noexcept:
    r.dir[<uint64_t>pg.pno & r.dmask] = NULL
    r.npages -= 1


cdef inline void page_recycle(SeqRing* r, SeqPage* pg) noexcept:
    """Keep a detached, emptied page (all slots NULL) as the spare, or free it."""
    pg.count = 0
    if r.spare == NULL:
        r.spare = pg
    else:
        PyMem_Free(pg)


cdef inline void page_emptied(SeqRing* r, SeqPage* pg) noexcept:
    """pg has just lost its last object (r.count already updated). When the ring is empty it stays in dir as
    the idle page, which the next put takes over in place (a stream delivered message by message never
    gives its page back and takes it again); else it goes."""
    if r.count == 0:
        r.idle = pg
    else:
        page_detach(r, pg)
        page_recycle(r, pg)


cdef SeqPage* page_attach(SeqRing* r, int64_t s, uint64_t idx) except NULL:
    """Give s's empty directory slot idx a page: the idle one (moved from its slot), the spare, or a new one."""
    cdef SeqPage* pg = r.idle
    if pg != NULL:
        r.dir[<uint64_t>pg.pno & r.dmask] = NULL
    else:
        pg = page_new(r)
        r.npages += 1
    pg.pno = page_no(s)
    r.dir[idx] = pg
    return pg


cdef inline PyObject* ring_get(SeqRing* r, int64_t s) noexcept:
    """Borrowed reference to the object stored at seqno s, or NULL."""
    cdef SeqPage* pg
    if r.count == 0 or s < r.lo or s > r.hi:
        return NULL
    pg = ring_page(r, s)
    if pg == NULL:
        return NULL
    return pg.slots[<uint64_t>s & PAGE_MASK]


cdef int ring_resize(SeqRing* r, Py_ssize_t new_cap) except -1:
    """Move the pages into a directory of new_cap slots (a power of two >= the page span)."""
    cdef SeqPage** nd = <SeqPage**>PyMem_Malloc(new_cap * sizeof(SeqPage*))
    cdef uint64_t nmask = <uint64_t>(new_cap - 1)
    cdef Py_ssize_t i
    cdef SeqPage* pg
    if nd == NULL:
        raise MemoryError()
    memset(nd, 0, new_cap * sizeof(SeqPage*))
    for i in range(r.dcap):
        pg = r.dir[i]
        if pg != NULL:
            nd[<uint64_t>pg.pno & nmask] = pg
    PyMem_Free(r.dir)
    r.dir = nd
    r.dcap = new_cap
    r.dmask = nmask
    return 0


cdef int ring_refuse(SeqRing* r, int64_t s) except -1:
    r.refused += 1
    raise OverflowError(f"seqno {s} is too far from the window's stored seqnos [{r.lo}, {r.hi}]: a span of "
                        f"more than MAX_WINDOW ({C_MAX_WINDOW}) seqnos")


cdef int ring_grow(SeqRing* r, int64_t s) except -1:
    """The slow part of ring_reserve: refuse s (OverflowError) or grow the directory for it."""
    cdef int64_t plo = page_no(s if s < r.lo else r.lo)
    cdef int64_t phi = page_no(s if s > r.hi else r.hi)
    cdef Py_ssize_t new_cap = r.dcap * 2
    if s > r.hi:
        if <uint64_t>s - <uint64_t>r.lo >= <uint64_t>C_MAX_WINDOW:
            return ring_refuse(r, s)
    elif <uint64_t>r.hi - <uint64_t>s >= <uint64_t>C_MAX_WINDOW:
        return ring_refuse(r, s)
    if phi - plo < r.dcap:
        return 0
    while new_cap < phi - plo + 1:
        new_cap *= 2
    return ring_resize(r, new_cap)


cdef inline int ring_reserve(SeqRing* r, int64_t s) except -1:
    """Make room for seqno s in the directory, refusing a span of more than MAX_WINDOW seqnos (OverflowError);
    stores nothing and allocates no page."""
    if r.count == 0 or (s >= r.lo and s <= r.hi):
        return 0
    if s > r.hi and <uint64_t>s - <uint64_t>r.lo < <uint64_t>C_MAX_WINDOW and page_no(s) - page_no(r.lo) < r.dcap:
        return 0                          # (the common case: s just beyond the highest stored seqno)
    return ring_grow(r, s)


cdef inline int ring_put(SeqRing* r, int64_t s, object o) except -1:
    """Store o at s (new reference), allocating s's page if it has none (MemoryError). Preconditions:
    ring_reserve(r, s) succeeded and slot s is empty."""
    cdef uint64_t idx = <uint64_t>page_no(s) & r.dmask
    cdef SeqPage* pg = r.dir[idx]
    if pg == NULL:
        pg = page_attach(r, s, idx)
    elif pg.count == 0:                   # the idle page (the ring is empty): s's page now
        pg.pno = page_no(s)
    r.idle = NULL                         # (a put into an empty ring always takes the idle page over)
    Py_INCREF(o)
    pg.slots[<uint64_t>s & PAGE_MASK] = <PyObject*>o
    pg.count += 1
    if r.count == 0:
        r.lo = s
        r.hi = s
    elif s < r.lo:
        r.lo = s
    elif s > r.hi:
        r.hi = s
    r.count += 1
    return 0


cdef inline Py_ssize_t ring_run(SeqRing* r, int64_t s, Py_ssize_t limit) noexcept:
    """How many consecutive seqnos s, s+1, ... are present (at most limit when limit > 0)."""
    cdef Py_ssize_t n = 0
    cdef SeqPage* pg
    cdef uint64_t off
    if r.count == 0 or s < r.lo or s > r.hi:
        return 0
    while True:
        pg = ring_page(r, s)
        if pg == NULL:
            return n
        off = <uint64_t>s & PAGE_MASK
        while True:
            if pg.slots[off] == NULL:
                return n
            n += 1
            if (limit > 0 and n >= limit) or s == r.hi:
                return n
            s += 1
            off += 1
            if off == SEQ_PAGE_SLOTS:
                break


cdef inline void ring_take_run(SeqRing* r, int64_t s, Py_ssize_t n, list out, bint remove) noexcept:
    """Put the references of the n present seqnos s..s+n-1 (see ring_run) into out (a PyList_New(n)):
    moved out of the ring with remove, else new references. Nothing is decref'd, so no finaliser runs."""
    cdef Py_ssize_t i = 0, k, j
    cdef int64_t start = s
    cdef SeqPage* pg
    cdef PyObject** slots
    while i < n:
        pg = ring_page(r, s)
        slots = &pg.slots[<uint64_t>s & PAGE_MASK]
        k = SEQ_PAGE_SLOTS - <Py_ssize_t>(<uint64_t>s & PAGE_MASK)
        if k > n - i:
            k = n - i
        if remove:
            for j in range(k):
                PyList_SET_ITEM_PTR(out, i + j, slots[j])
                slots[j] = NULL
            pg.count -= k
            r.count -= k
            if pg.count == 0:
                page_emptied(r, pg)
        else:
            for j in range(k):
                Py_INCREF(<object>slots[j])
                PyList_SET_ITEM_PTR(out, i + j, slots[j])
        i += k
        if i < n:
            s += k
    if remove and r.count > 0:
        # something else is stored in [lo, hi] outside the run: keep lo/hi bounds of what is left
        if start == r.lo:
            r.lo = start + n
        elif start + (n - 1) == r.hi:
            r.hi = start - 1


cdef Py_ssize_t ring_clear_upto(SeqRing* r, int64_t upto) noexcept:
    """Drop every stored seqno <= upto; returns how many were dropped. The ring is consistent whenever a
    reference is dropped (a finaliser may look at it): a whole page is detached first, then emptied."""
    cdef Py_ssize_t n = 0, j
    cdef int64_t s, pend
    cdef SeqPage* pg
    cdef PyObject* p
    while r.count > 0 and r.lo <= upto:
        s = r.lo
        pg = ring_page(r, s)
        pend = page_last(s)
        if pg == NULL:                            # nothing stored from lo to the end of its page
            r.lo = pend + 1                       # (hi is stored, so pend < hi)
            continue
        if pend <= upto:                          # the whole page goes
            page_detach(r, pg)
            r.count -= pg.count
            n += pg.count
            if r.count > 0:
                r.lo = pend + 1
            for j in range(SEQ_PAGE_SLOTS):
                p = pg.slots[j]
                if p != NULL:
                    pg.slots[j] = NULL
                    Py_XDECREF(p)
            page_recycle(r, pg)
            continue
        # the last page, partly dropped: seqno by seqno (s <= upto < pend, so s + 1 never overflows)
        while s <= upto:
            p = pg.slots[<uint64_t>s & PAGE_MASK]
            if p != NULL:
                pg.slots[<uint64_t>s & PAGE_MASK] = NULL
                pg.count -= 1
                r.count -= 1
                n += 1
                r.lo = s + 1
                if pg.count == 0:
                    page_emptied(r, pg)
                    Py_XDECREF(p)
                    break
                Py_XDECREF(p)
            else:
                r.lo = s + 1
            s += 1
        break
    return n


cdef void ring_clear(SeqRing* r) noexcept:
    """Drop every stored object (the directory stays; see ring_maybe_shrink)."""
    cdef Py_ssize_t i = 0, j
    cdef SeqPage* pg
    cdef PyObject* p
    while r.count > 0 and i < r.dcap:
        pg = r.dir[i]
        i += 1
        if pg == NULL:
            continue
        page_detach(r, pg)
        r.count -= pg.count
        for j in range(SEQ_PAGE_SLOTS):
            p = pg.slots[j]
            if p != NULL:
                pg.slots[j] = NULL
                Py_XDECREF(p)
        page_recycle(r, pg)


cdef inline int ring_maybe_shrink(SeqRing* r) except -1:
    """Compact: shrink the directory when the live page span has fallen below 1/8 of it."""
    if r.dcap <= DIR_MIN_CAP:
        return 0
    return ring_shrink(r)


cdef int ring_shrink(SeqRing* r) except -1:
    cdef int64_t span
    cdef Py_ssize_t new_cap
    span = 0 if r.count == 0 else page_no(r.hi) - page_no(r.lo) + 1
    if span * 8 > r.dcap:
        return 0
    new_cap = DIR_MIN_CAP
    while new_cap < span * 2:
        new_cap *= 2
    if new_cap < r.dcap:
        ring_resize(r, new_cap)
    return 0


cdef void ring_free(SeqRing* r) noexcept:
    if r.dir != NULL:
        ring_clear(r)
        PyMem_Free(r.dir)
        r.dir = NULL
    PyMem_Free(r.idle)                    # (empty, and in no directory any more)
    r.idle = NULL
    PyMem_Free(r.spare)
    r.spare = NULL
    r.dcap = 0
    r.count = 0


cdef inline Py_ssize_t ring_live_pages(SeqRing* r) noexcept:
    """Pages that hold something (the idle one does not)."""
    return r.npages - (1 if r.idle != NULL else 0)


cdef Py_ssize_t ring_memory(SeqRing* r) noexcept:
    """Bytes the ring has allocated: the directory and the pages, the spare one included."""
    return r.dcap * sizeof(SeqPage*) + (r.npages + (1 if r.spare != NULL else 0)) * sizeof(SeqPage)


cdef list ring_range(SeqRing* r, int64_t first, int64_t last, Py_ssize_t limit):
    """The stored objects with first <= seqno <= last, ascending (at most limit when limit > 0); absent pages
    are skipped whole."""
    cdef list out = []
    cdef PyObject* p
    cdef SeqPage* pg
    cdef int64_t s, pend
    if r.count == 0 or first > last:
        return out
    if first < r.lo:
        first = r.lo
    if last > r.hi:
        last = r.hi
    if first > last:
        return out
    s = first
    while True:
        pg = ring_page(r, s)
        pend = page_last(s)
        if pend > last:
            pend = last
        if pg != NULL:
            while True:
                p = pg.slots[<uint64_t>s & PAGE_MASK]
                if p != NULL:
                    out.append(<object>p)
                    if limit > 0 and len(out) >= limit:
                        return out
                if s == pend:
                    break
                s += 1
        if pend == last:
            return out
        s = pend + 1


cdef list ring_missing(SeqRing* r, int64_t s, int64_t end):
    """The seqnos in [s, end] that are not stored, as ascending (first, last) runs; absent pages are skipped
    whole."""
    cdef list out = []
    cdef int64_t run_start = 0, pend
    cdef bint in_run = False
    cdef SeqPage* pg
    if s > end:
        return out
    if r.count == 0 or r.lo > end or r.hi < s:
        return [(s, end)]
    while True:
        pg = ring_page(r, s)
        if pg != NULL and pg.pno != page_no(s):   # another page in the slot s's page would have
            pg = NULL
        pend = page_last(s)
        if pend > end:
            pend = end
        if pg == NULL:
            if not in_run:
                in_run = True
                run_start = s
        else:
            while True:
                if pg.slots[<uint64_t>s & PAGE_MASK] == NULL:
                    if not in_run:
                        in_run = True
                        run_start = s
                elif in_run:
                    out.append((run_start, s - 1))
                    in_run = False
                if s == pend:
                    break
                s += 1
        if pend == end:
            break
        s = pend + 1
    if in_run:
        out.append((run_start, end))
    return out


cdef int64_t to_seqno(object v, str what) except? -1:
    try:
        return v
    except OverflowError:
        raise OverflowError(f"{what} {v!r} does not fit a Java long (int64)") from None


# ---------------------------------------------------------------------------------------------------------
# The missing runs of an XRange.

cdef inline XRun* xr_runs(XRange* x) noexcept:
    return x.runs if x.runs != NULL else &x.one


cdef Py_ssize_t runs_find(XRun* runs, Py_ssize_t n, int64_t s) noexcept:
    """Index of the first run whose b >= s (n if none)."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    if n > 0 and runs[0].b >= s:
        return 0
    while lo < hi:
        mid = (lo + hi) >> 1
        if runs[mid].b < s:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int xr_split(XRange* x, Py_ssize_t j, int64_t s) except -1:
    """Seqno s arrived strictly inside run j: [a, b] becomes [a, s-1] and [s+1, b]."""
    cdef XRun* nr
    cdef Py_ssize_t new_cap
    if x.runs == NULL:
        nr = <XRun*>PyMem_Malloc(4 * sizeof(XRun))
        if nr == NULL:
            raise MemoryError()
        nr[0] = x.one
        x.runs = nr
        x.runs_cap = 4
    elif x.nruns == x.runs_cap:
        new_cap = x.runs_cap * 2
        nr = <XRun*>PyMem_Realloc(x.runs, new_cap * sizeof(XRun))
        if nr == NULL:
            raise MemoryError()
        x.runs = nr
        x.runs_cap = new_cap
    memmove(&x.runs[j + 2], &x.runs[j + 1], (x.nruns - j - 1) * sizeof(XRun))
    x.runs[j + 1].a = s + 1
    x.runs[j + 1].b = x.runs[j].b
    x.runs[j].b = s - 1
    x.nruns += 1
    return 0


cdef void xr_drop_runs(XRange* x, Py_ssize_t j, Py_ssize_t k) noexcept:
    """Remove runs j..j+k-1 (their seqnos arrived)."""
    cdef XRun* runs = xr_runs(x)
    memmove(&runs[j], &runs[j + k], (x.nruns - j - k) * sizeof(XRun))
    x.nruns -= k


# ---------------------------------------------------------------------------------------------------------

cdef class Retransmitter:
    """Missing seqno ranges with per-range retransmission schedules (``RangeBasedRetransmitter``).

    ``Retransmitter(timeouts=(300, 600, 1200), exponential_backoff=0)``: a range added at ``now`` is first
    due at ``now + timeouts[0]``; each time :meth:`due` returns it, it is rescheduled ``timeouts[1]``,
    ``timeouts[2]``, ... later, then by the last value forever (``StaticInterval``). With
    ``exponential_backoff > 0`` the intervals are ``exponential_backoff``, doubled each time, capped at
    15000 ms (``ExponentialInterval``), and ``timeouts`` is ignored.

    Java's ranges keep a bit per seqno; here a range keeps its missing seqnos as runs, so its memory grows with
    the seqnos that arrived inside it (each may split a run), not with its length: a range of MAX_WINDOW
    missing seqnos costs as little as one of a single seqno.
    """

    def __cinit__(self, timeouts=DEF_TIMEOUTS, exponential_backoff=0):
        self._r = NULL
        self._n = 0
        self._cap = 0
        self._missing = 0
        self._nruns = 0
        self._iv = NULL
        self._niv = 0
        self._next = 0.0
        self._next_valid = False
        make_intervals(timeouts, exponential_backoff, &self._iv, &self._niv)

    def __dealloc__(self):
        self.c_clear()
        PyMem_Free(self._r)
        PyMem_Free(self._iv)

    # ---- internals

    cdef Py_ssize_t _lower(self, int64_t seqno):
        """Index of the first range whose last >= seqno (self._n if none)."""
        cdef Py_ssize_t lo = 0, hi = self._n, mid
        # the common lookups hit the last range
        if hi > 0 and self._r[hi - 1].first <= seqno:
            return hi - 1 if self._r[hi - 1].last >= seqno else hi
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._r[mid].last < seqno:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cdef int _insert(self, Py_ssize_t idx, int64_t first, int64_t last, double now) except -1:
        cdef Py_ssize_t new_cap
        cdef XRange* nr
        cdef XRange* x
        if self._n == self._cap:
            new_cap = 8 if self._cap == 0 else self._cap * 2
            nr = <XRange*>PyMem_Realloc(self._r, new_cap * sizeof(XRange))
            if nr == NULL:
                raise MemoryError()
            self._r = nr
            self._cap = new_cap
        if idx < self._n:
            memmove(&self._r[idx + 1], &self._r[idx], (self._n - idx) * sizeof(XRange))
        x = &self._r[idx]
        x.first = first
        x.last = last
        x.missing = last - first + 1
        x.nxmits = 0
        x.resume = first
        x.resuming = False
        x.next_time = now + <double>self._iv[0]
        x.stage = 1 if self._niv > 1 else 0
        x.nruns = 1
        x.runs_cap = 0
        x.one.a = first
        x.one.b = last
        x.runs = NULL
        self._n += 1
        self._nruns += 1
        self._missing += x.missing
        if self._n == 1:
            self._next = x.next_time
            self._next_valid = True
        elif self._next_valid and x.next_time < self._next:
            self._next = x.next_time
        return 0

    cdef void _drop(self, Py_ssize_t idx) noexcept:
        cdef XRange* x = &self._r[idx]
        self._missing -= x.missing
        self._nruns -= x.nruns
        if self._next_valid and x.next_time <= self._next:
            self._next_valid = False
        PyMem_Free(x.runs)
        self._n -= 1
        if idx < self._n:
            memmove(&self._r[idx], &self._r[idx + 1], (self._n - idx) * sizeof(XRange))
        self._maybe_shrink()

    cdef void _maybe_shrink(self) noexcept:
        """Give memory back once most ranges are gone (a burst of gaps must not pin its peak)."""
        cdef XRange* nr
        cdef Py_ssize_t new_cap
        if self._cap > 64 and self._n * 4 < self._cap:
            new_cap = self._cap // 2
            nr = <XRange*>PyMem_Realloc(self._r, new_cap * sizeof(XRange))
            if nr != NULL:
                self._r = nr
                self._cap = new_cap

    # ---- C API

    cdef int c_add(self, int64_t first, int64_t last, double now) except -1:
        cdef int64_t tmp, cur
        cdef Py_ssize_t idx
        if first > last:        # Java swaps the bounds too
            tmp = first
            first = last
            last = tmp
        if <uint64_t>last - <uint64_t>first >= <uint64_t>C_MAX_WINDOW:
            raise OverflowError(f"range [{first}, {last}] is larger than MAX_WINDOW ({C_MAX_WINDOW}) seqnos")
        idx = self._lower(first)
        if idx == self._n or self._r[idx].first > last:     # no overlap: the common case
            return self._insert(idx, first, last, now)
        # register only the parts of [first, last] not covered by an existing range
        cur = first
        while idx < self._n and self._r[idx].first <= last:
            if self._r[idx].first > cur:
                self._insert(idx, cur, self._r[idx].first - 1, now)
                idx += 1
            if self._r[idx].last >= last:
                return 0
            cur = self._r[idx].last + 1
            idx += 1
        return self._insert(idx, cur, last, now)

    cdef int64_t c_remove(self, int64_t seqno) except -1:
        cdef Py_ssize_t idx, j
        cdef XRange* x
        cdef XRun* runs
        cdef int64_t res
        if self._n == 0:
            return 0
        idx = self._lower(seqno)
        if idx == self._n or self._r[idx].first > seqno:
            return 0
        x = &self._r[idx]
        runs = xr_runs(x)
        j = runs_find(runs, x.nruns, seqno)
        if j == x.nruns or runs[j].a > seqno:
            return 0                              # arrived before
        res = x.nxmits
        if runs[j].a == runs[j].b:
            xr_drop_runs(x, j, 1)
            self._nruns -= 1
        elif runs[j].a == seqno:
            runs[j].a = seqno + 1
        elif runs[j].b == seqno:
            runs[j].b = seqno - 1
        else:
            xr_split(x, j, seqno)
            self._nruns += 1
        x.missing -= 1
        self._missing -= 1
        if x.missing == 0:
            self._drop(idx)
        return res

    cdef void c_remove_up_to(self, int64_t seqno) noexcept:
        cdef Py_ssize_t k = 0, i, j
        cdef XRange* x
        cdef XRun* runs
        cdef int64_t gone = 0
        while k < self._n and self._r[k].last <= seqno:
            k += 1
        if k > 0:
            for i in range(k):
                self._missing -= self._r[i].missing
                self._nruns -= self._r[i].nruns
                PyMem_Free(self._r[i].runs)
            self._n -= k
            if self._n > 0:
                memmove(&self._r[0], &self._r[k], self._n * sizeof(XRange))
            self._next_valid = False
            self._maybe_shrink()
        if self._n > 0 and self._r[0].first <= seqno:
            x = &self._r[0]      # first <= seqno < last
            runs = xr_runs(x)
            j = runs_find(runs, x.nruns, seqno + 1)     # runs before j lie entirely <= seqno
            for i in range(j):
                gone += runs[i].b - runs[i].a + 1
            if j < x.nruns and runs[j].a <= seqno:
                gone += seqno - runs[j].a + 1
                runs[j].a = seqno + 1
            if j > 0:
                xr_drop_runs(x, 0, j)
                self._nruns -= j
            x.missing -= gone
            self._missing -= gone
            if x.missing == 0:
                self._drop(0)

    cdef list c_due(self, double now, int64_t budget):
        """See :meth:`due`; budget <= 0: no limit."""
        cdef list out = []
        cdef Py_ssize_t i, j
        cdef XRange* x
        cdef XRun* runs
        cdef int64_t left = budget if budget > 0 else INT64_MAX, a, b
        cdef double nmin = 0.0
        cdef bint cut
        if self._n == 0 or (self._next_valid and now < self._next):
            return out
        for i in range(self._n):
            x = &self._r[i]
            if x.next_time <= now and left > 0:
                runs = xr_runs(x)
                j = 0
                if x.resuming:
                    j = runs_find(runs, x.nruns, x.resume)
                else:
                    x.nxmits += 1
                b = 0
                while j < x.nruns and left > 0:
                    a = runs[j].a
                    if x.resuming and a < x.resume:
                        a = x.resume
                    b = runs[j].b
                    if b - a >= left:             # the budget ends inside this run
                        b = a + left - 1
                    out.append((a, b))
                    left -= b - a + 1
                    if b < runs[j].b:
                        break
                    j += 1
                cut = j < x.nruns                 # seqnos of this range not returned in this round
                if cut:
                    x.resume = b + 1              # (b < INT64_MAX: a run beyond b remains)
                if cut:                           # the rest of this round on the next call
                    x.resuming = True
                else:
                    x.resuming = False
                    x.next_time = now + <double>self._iv[x.stage]
                    if x.stage < self._niv - 1:
                        x.stage += 1
            if i == 0 or x.next_time < nmin:
                nmin = x.next_time
        self._next = nmin
        self._next_valid = True
        return out

    cdef void c_clear(self) noexcept:
        cdef Py_ssize_t i
        for i in range(self._n):
            PyMem_Free(self._r[i].runs)
        self._n = 0
        self._missing = 0
        self._nruns = 0
        self._next_valid = False

    # ---- Python API

    def add(self, first, last, double now):
        """Register the missing range [first, last] (inclusive; swapped if first > last), first due at
        ``now + timeouts[0]``. Parts already covered by a registered range are ignored."""
        self.c_add(to_seqno(first, "first"), to_seqno(last, "last"), now)

    def remove(self, seqno):
        """Seqno arrived: returns how many retransmissions had been requested for it (0 if it was not
        missing). A range whose seqnos have all arrived is dropped."""
        return self.c_remove(to_seqno(seqno, "seqno"))

    def remove_up_to(self, seqno):
        """Drop every missing seqno <= seqno."""
        self.c_remove_up_to(to_seqno(seqno, "seqno"))

    def due(self, double now, max_seqnos=0):
        """The still-missing sub-ranges ``(first, last)`` (ascending, inclusive, consecutive missing seqnos
        coalesced per range) of every range whose retransmission time is <= now; each such range is
        rescheduled by its next interval. A range with a hole in the middle yields two tuples.

        ``max_seqnos > 0`` bounds the seqnos returned by this call (lowest first). A range cut short stays due
        and is not rescheduled: the next call goes on where this one stopped, and the range is rescheduled
        once all its missing seqnos have been returned in the round."""
        return self.c_due(now, to_seqno(max_seqnos, "max_seqnos"))

    def next_due(self):
        """The earliest scheduled retransmission time, or None when nothing is missing."""
        cdef Py_ssize_t i
        if self._n == 0:
            return None
        if not self._next_valid:
            self._next = self._r[0].next_time
            for i in range(1, self._n):
                if self._r[i].next_time < self._next:
                    self._next = self._r[i].next_time
            self._next_valid = True
        return self._next

    @property
    def size(self):
        """Number of missing seqnos."""
        return self._missing

    def __len__(self):
        return self._missing

    @property
    def intervals(self):
        """The retransmission intervals (ms); the last one repeats forever."""
        return tuple([self._iv[i] for i in range(self._niv)])

    @property
    def memory(self):
        """Bytes allocated for the ranges and their runs."""
        cdef Py_ssize_t i, n = self._cap * sizeof(XRange)
        for i in range(self._n):
            n += self._r[i].runs_cap * sizeof(XRun)
        return n

    @property
    def num_runs(self):
        """Number of missing runs over all ranges (what the memory grows with)."""
        return self._nruns

    def clear(self):
        """Forget every range (``Retransmitter.reset``)."""
        self.c_clear()

    def ranges(self):
        """The registered ranges as ``(first, last, missing, nxmits, next_time)`` tuples (debugging/tests)."""
        return [(self._r[i].first, self._r[i].last, self._r[i].missing, self._r[i].nxmits, self._r[i].next_time)
                for i in range(self._n)]

    def __repr__(self):
        return f"<Retransmitter {self._missing} missing in {self._n} ranges>"


# ---------------------------------------------------------------------------------------------------------

cdef class NakReceiverWindow:
    """The receive window of one sender in pbcast.NAKACK (``org.jgroups.stack.NakReceiverWindow``).

    ``low`` <= ``highest_delivered`` <= ``highest_received`` (until :meth:`set_highest_delivered` says
    otherwise): messages <= ``low`` have been purged by :meth:`stable`; the next message to deliver is
    ``highest_delivered + 1``; gaps below ``highest_received`` are registered with :attr:`retransmitter`.
    """

    def __cinit__(self, highest_delivered=0, lowest=0, timeouts=DEF_TIMEOUTS, exponential_backoff=0):
        cdef int64_t hd = to_seqno(highest_delivered, "highest_delivered")
        cdef int64_t lw = to_seqno(lowest, "lowest")
        self._ring.dir = NULL
        self._ring.spare = NULL
        ring_init(&self._ring)
        self._hd = hd
        self._hr = hd
        self._low = lw if lw < hd else hd
        self._running = True
        self.retransmitter = Retransmitter(timeouts, exponential_backoff)

    def __dealloc__(self):
        ring_free(&self._ring)

    # ---- C API

    cdef int c_add(self, int64_t seqno, object msg, double now) except -1:
        """1 if added, 0 if not (duplicate, already delivered, destroyed)."""
        cdef int64_t next_to_add
        if not self._running:
            if seqno > self._hr:        # Java updates highest_received in a finally block, even here
                self._hr = seqno
            return 0
        if msg is None:
            raise ValueError("msg must not be None")
        next_to_add = self._hr + 1
        if seqno == next_to_add:        # case 1: the expected seqno (the common path)
            ring_reserve(&self._ring, seqno)
            ring_put(&self._ring, seqno, msg)
            self._hr = seqno
            return 1
        if seqno <= self._hd:           # case 2: already delivered
            if seqno > self._hr:
                self._hr = seqno
            return 0
        if seqno < next_to_add:         # case 3: a missing message (highest_delivered < seqno <= highest_received)
            if ring_get(&self._ring, seqno) != NULL:
                return 0
            ring_reserve(&self._ring, seqno)
            ring_put(&self._ring, seqno, msg)
            self.retransmitter.c_remove(seqno)
            return 1
        # case 4: seqno > highest_received + 1: a gap [highest_received + 1, seqno - 1]
        if <uint64_t>seqno - <uint64_t>next_to_add > <uint64_t>C_MAX_WINDOW:
            self._ring.refused += 1
            raise OverflowError(f"seqno {seqno} is too far ahead of the highest received ({self._hr}): a gap "
                                f"larger than MAX_WINDOW ({C_MAX_WINDOW}) seqnos")
        ring_reserve(&self._ring, seqno)
        self.retransmitter.c_add(next_to_add, seqno - 1, now)
        ring_put(&self._ring, seqno, msg)
        self._hr = seqno
        return 1

    cdef list c_remove_many(self, bint remove_msgs, Py_ssize_t max_results):
        cdef Py_ssize_t n = ring_run(&self._ring, self._hd + 1, max_results)
        cdef list out
        if n == 0:
            return []
        out = PyList_New(n)
        ring_take_run(&self._ring, self._hd + 1, n, out, remove_msgs)
        self._hd += n
        if remove_msgs:
            ring_maybe_shrink(&self._ring)
        return out

    cdef object c_get(self, int64_t seqno):
        cdef PyObject* p = ring_get(&self._ring, seqno)
        if p == NULL:
            return None
        return <object>p

    cdef bint c_stable(self, int64_t seqno) except -1:
        if seqno > self._hd:
            return False
        ring_clear_upto(&self._ring, seqno)
        self.retransmitter.c_remove_up_to(seqno)
        if seqno > self._low:
            self._low = seqno
        ring_maybe_shrink(&self._ring)
        return True

    # ---- Python API

    def add(self, seqno, msg, double now):
        """Add msg at seqno (``NakReceiverWindow.add``); True if added, False if it was a duplicate or had
        already been delivered. A seqno beyond ``highest_received + 1`` registers the gap with the
        retransmitter (first due at ``now + timeouts[0]``); a missing seqno is removed from it."""
        return self.c_add(to_seqno(seqno, "seqno"), msg, now) == 1

    def add_many(self, seqnos, msgs, double now):
        """Add a received batch: two parallel lists of seqnos and messages. Returns how many were added."""
        cdef list ls = seqnos if type(seqnos) is list else list(seqnos)
        cdef list lm = msgs if type(msgs) is list else list(msgs)
        cdef Py_ssize_t i, n = len(ls), added = 0
        if len(lm) != n:
            raise ValueError(f"add_many: {n} seqnos but {len(lm)} messages")
        for i in range(n):
            added += self.c_add(to_seqno(ls[i], "seqno"), lm[i], now)
        return added

    def remove_many(self, bint remove_msgs=False, Py_ssize_t max_results=0):
        """The deliverable messages ``highest_delivered+1, +2, ...`` (at most max_results when > 0),
        advancing ``highest_delivered``; [] when nothing is deliverable. With remove_msgs
        (NAKACK's discard_delivered_msgs) they leave the window, else they stay until :meth:`stable`."""
        return self.c_remove_many(remove_msgs, max_results)

    def get(self, seqno):
        """The message stored at seqno, or None."""
        return self.c_get(to_seqno(seqno, "seqno"))

    def get_range(self, first, last, Py_ssize_t max_results=0):
        """The stored messages with first <= seqno <= last, ascending (missing ones are skipped; at most
        max_results when > 0)."""
        return ring_range(&self._ring, to_seqno(first, "first"), to_seqno(last, "last"), max_results)

    def stable(self, seqno):
        """Purge messages <= seqno and their retransmission entries; ``low = max(low, seqno)``. Ignored
        (returns False) when seqno > highest_delivered, as Java ignores such a stability message."""
        return self.c_stable(to_seqno(seqno, "seqno"))

    def digest(self):
        """``(low, highest_delivered, highest_received)`` (``getDigest``)."""
        return (self._low, self._hd, self._hr)

    def set_highest_delivered(self, value):
        """Set highest_delivered (nothing else changes); returns the old value."""
        cdef int64_t old = self._hd
        self._hd = to_seqno(value, "highest_delivered")
        return old

    def missing(self):
        """The seqnos in (highest_delivered, highest_received] not received, as ascending ``(first, last)``."""
        return ring_missing(&self._ring, self._hd + 1, self._hr)

    def xmit_due(self, double now, max_seqnos=0):
        """Missing ranges whose retransmission is due, at most ``max_seqnos`` seqnos when > 0 (see
        :meth:`Retransmitter.due`)."""
        return self.retransmitter.c_due(now, to_seqno(max_seqnos, "max_seqnos"))

    def destroy(self):
        """Drop everything and reset low/highest_delivered/highest_received to 0; later adds are refused."""
        self._running = False
        self.retransmitter.c_clear()
        ring_clear(&self._ring)
        ring_maybe_shrink(&self._ring)
        self._low = 0
        self._hd = 0
        self._hr = 0

    @property
    def low(self):
        return self._low

    @property
    def highest_delivered(self):
        return self._hd

    @property
    def highest_received(self):
        return self._hr

    @property
    def pending_xmits(self):
        """Number of missing seqnos registered with the retransmitter (``getPendingXmits``)."""
        return self.retransmitter._missing

    @property
    def size(self):
        """Number of messages stored."""
        return self._ring.count

    def __len__(self):
        return self._ring.count

    @property
    def capacity(self):
        """Slots of the pages in use (a page of SEQ_PAGE_SLOTS seqnos exists while it holds a message)."""
        return ring_live_pages(&self._ring) * SEQ_PAGE_SLOTS

    @property
    def memory(self):
        """Bytes allocated by the window and its retransmitter (directory, pages, ranges; not the messages)."""
        return ring_memory(&self._ring) + self.retransmitter.memory

    @property
    def refused(self):
        """Seqnos refused (``OverflowError``) as too far from the window: more than MAX_WINDOW apart."""
        return self._ring.refused

    @property
    def running(self):
        return self._running

    def __repr__(self):
        return (f"<NakReceiverWindow [{self._low} : {self._hd} ({self._hr})] size={self._ring.count} "
                f"missing={self.retransmitter._missing}>")


# ---------------------------------------------------------------------------------------------------------
# SQueue: due-time-sorted array queue of (t, seqno).

cdef int sq_reserve(SQueue* q) except -1:
    """Room for one more entry at the tail."""
    cdef Py_ssize_t live, new_cap
    cdef SEntry* ne
    if q.tail < q.cap:
        return 0
    live = q.tail - q.head
    if q.head > 0 and live <= q.cap // 2:        # compact in place
        memmove(q.e, &q.e[q.head], live * sizeof(SEntry))
        q.head = 0
        q.tail = live
        return 0
    new_cap = 16 if q.cap == 0 else q.cap * 2
    ne = <SEntry*>PyMem_Realloc(q.e, new_cap * sizeof(SEntry))
    if ne == NULL:
        raise MemoryError()
    q.e = ne
    q.cap = new_cap
    return 0


cdef void sq_insert(SQueue* q, double t, int64_t seqno) noexcept:
    """Insert keeping the queue sorted by t (FIFO among equal t). Precondition: sq_reserve succeeded."""
    cdef Py_ssize_t lo, hi, mid
    if q.tail == q.head or q.e[q.tail - 1].t <= t:    # monotonic clock: always appended
        lo = q.tail
    else:
        lo = q.head
        hi = q.tail
        while lo < hi:
            mid = (lo + hi) >> 1
            if q.e[mid].t <= t:
                lo = mid + 1
            else:
                hi = mid
        memmove(&q.e[lo + 1], &q.e[lo], (q.tail - lo) * sizeof(SEntry))
    q.e[lo].t = t
    q.e[lo].seqno = seqno
    q.tail += 1


cdef inline void sq_pop(SQueue* q) noexcept:
    q.head += 1
    if q.head == q.tail:
        q.head = 0
        q.tail = 0


cdef class AckSenderWindow:
    """UNICAST's sender window for one peer (``org.jgroups.stack.AckSenderWindow``): unacked messages by
    seqno, each with its own retransmission schedule (``timeouts`` / ``exponential_backoff`` as for
    :class:`Retransmitter`; Java's DefaultRetransmitter keeps one task per seqno)."""

    def __cinit__(self, timeouts=DEF_TIMEOUTS, exponential_backoff=0):
        cdef int i
        self._ring.dir = NULL
        self._ring.spare = NULL
        self._q = NULL
        self._iv = NULL
        ring_init(&self._ring)
        make_intervals(timeouts, exponential_backoff, &self._iv, &self._niv)
        self._q = <SQueue*>PyMem_Malloc(self._niv * sizeof(SQueue))
        if self._q == NULL:
            raise MemoryError()
        for i in range(self._niv):
            self._q[i].e = NULL
            self._q[i].head = 0
            self._q[i].tail = 0
            self._q[i].cap = 0
        self._lowest = DEFAULT_FIRST_UNICAST_SEQNO
        self._highest = 0

    def __dealloc__(self):
        cdef int i
        ring_free(&self._ring)
        if self._q != NULL:
            for i in range(self._niv):
                PyMem_Free(self._q[i].e)
            PyMem_Free(self._q)
        PyMem_Free(self._iv)

    cdef void _purge_stale(self) noexcept:
        """Pop schedules of acked seqnos from the queue fronts."""
        cdef int k
        cdef SQueue* q
        for k in range(self._niv):
            q = &self._q[k]
            while q.head < q.tail and q.e[q.head].seqno < self._lowest:
                sq_pop(q)

    # ---- C API

    cdef bint c_add(self, int64_t seqno, object msg, double now) except -1:
        if msg is None:
            raise ValueError("msg must not be None")
        if seqno < self._lowest or ring_get(&self._ring, seqno) != NULL:
            return False
        ring_reserve(&self._ring, seqno)
        sq_reserve(&self._q[0])
        sq_insert(&self._q[0], now + <double>self._iv[0], seqno)
        ring_put(&self._ring, seqno, msg)
        if seqno > self._highest:
            self._highest = seqno
        return True

    cdef Py_ssize_t c_ack(self, int64_t seqno) except -1:
        cdef Py_ssize_t n
        if seqno < self._lowest:
            return 0
        self._lowest = seqno + 1 if seqno < INT64_MAX else seqno
        n = ring_clear_upto(&self._ring, seqno)
        self._purge_stale()
        ring_maybe_shrink(&self._ring)
        return n

    cdef list c_due(self, double now):
        cdef list out = []
        cdef int k, nk
        cdef SQueue* q
        cdef int64_t s, prev = 0
        cdef PyObject* p
        cdef bint ordered = True
        for k in range(self._niv):
            q = &self._q[k]
            nk = k + 1 if k + 1 < self._niv else k
            while q.head < q.tail and q.e[q.head].t <= now:
                sq_reserve(&self._q[nk])          # may compact q itself: read the head afterwards
                s = q.e[q.head].seqno
                sq_pop(q)
                p = ring_get(&self._ring, s) if s >= self._lowest else NULL
                if p == NULL:
                    continue                      # acked meanwhile
                sq_insert(&self._q[nk], now + <double>self._iv[nk], s)
                if out and s < prev:
                    ordered = False
                prev = s
                out.append((s, <object>p))
        if not ordered:
            out.sort(key=_first)
        return out

    # ---- Python API

    def add(self, seqno, msg, double now):
        """Add an unacked message, first due for retransmission at ``now + timeouts[0]``. Returns False
        (and changes nothing) when seqno is already present or already acked."""
        return self.c_add(to_seqno(seqno, "seqno"), msg, now)

    def ack(self, seqno):
        """Cumulative ack: drop every message <= seqno and its schedule; returns how many were dropped.
        An ack below the lowest unacked seqno is ignored (returns 0)."""
        return self.c_ack(to_seqno(seqno, "seqno"))

    def lowest(self):
        """``(seqno, msg)`` of the message at the lowest unacked seqno (Java's ``getLowestMessage``:
        the seqno after the highest ack, initially 1), or None when that message is not in the window."""
        cdef PyObject* p = ring_get(&self._ring, self._lowest)
        if p == NULL:
            return None
        return (self._lowest, <object>p)

    def get(self, seqno):
        """The unacked message at seqno, or None."""
        cdef PyObject* p = ring_get(&self._ring, to_seqno(seqno, "seqno"))
        if p == NULL:
            return None
        return <object>p

    def due(self, double now):
        """``[(seqno, msg), ...]`` (ascending) of the messages whose retransmission time is <= now; each is
        rescheduled by its next interval."""
        return self.c_due(now)

    def next_due(self):
        """The earliest scheduled retransmission time, or None when nothing is unacked."""
        cdef int k
        cdef SQueue* q
        cdef double best = 0.0
        cdef bint found = False
        self._purge_stale()
        for k in range(self._niv):
            q = &self._q[k]
            if q.head < q.tail and (not found or q.e[q.head].t < best):
                best = q.e[q.head].t
                found = True
        return best if found and self._ring.count > 0 else None

    def clear(self):
        """Drop every message and schedule; the lowest seqno goes back to 1 (``AckSenderWindow.reset``)."""
        cdef int k
        for k in range(self._niv):
            self._q[k].head = 0
            self._q[k].tail = 0
        self._lowest = DEFAULT_FIRST_UNICAST_SEQNO
        ring_clear(&self._ring)
        ring_maybe_shrink(&self._ring)

    @property
    def size(self):
        """Number of unacked messages."""
        return self._ring.count

    def __len__(self):
        return self._ring.count

    @property
    def capacity(self):
        """Slots of the pages in use (a page of SEQ_PAGE_SLOTS seqnos exists while it holds a message)."""
        return ring_live_pages(&self._ring) * SEQ_PAGE_SLOTS

    @property
    def memory(self):
        """Bytes allocated by the window (directory, pages, schedules; not the messages)."""
        cdef Py_ssize_t n = ring_memory(&self._ring)
        cdef int k
        for k in range(self._niv):
            n += self._q[k].cap * sizeof(SEntry)
        return n

    @property
    def lowest_seqno(self):
        """The lowest seqno not acked yet (Java's ``getLowest``)."""
        return self._lowest

    @property
    def highest(self):
        """The highest seqno ever added (Java's ``getHighest``)."""
        return self._highest

    @property
    def intervals(self):
        return tuple([self._iv[i] for i in range(self._niv)])

    def __repr__(self):
        return f"<AckSenderWindow {self._ring.count} msgs, lowest={self._lowest}, highest={self._highest}>"


def _first(t):
    return t[0]


# ---------------------------------------------------------------------------------------------------------

cdef class AckReceiverWindow:
    """UNICAST's receive window for one peer (``org.jgroups.stack.AckReceiverWindow``): messages are
    delivered in seqno order starting at ``next_to_remove`` (= initial_seqno)."""

    def __cinit__(self, initial_seqno):
        self._ring.dir = NULL
        self._ring.spare = NULL
        ring_init(&self._ring)
        self._ntr = to_seqno(initial_seqno, "initial_seqno")

    def __dealloc__(self):
        ring_free(&self._ring)

    cdef int c_add(self, int64_t seqno, object msg) except -2:
        if msg is None:
            raise ValueError("msg must not be None")
        if seqno < self._ntr:
            return -1
        if ring_get(&self._ring, seqno) != NULL:
            return 0
        ring_reserve(&self._ring, seqno)
        ring_put(&self._ring, seqno, msg)
        return 1

    cdef tuple c_remove_many(self, Py_ssize_t max_results):
        cdef Py_ssize_t n = ring_run(&self._ring, self._ntr, max_results)
        cdef list out
        if n == 0:
            return ([], 0)
        out = PyList_New(n)
        ring_take_run(&self._ring, self._ntr, n, out, True)
        self._ntr += n
        ring_maybe_shrink(&self._ring)
        return (out, self._ntr - 1)

    def add(self, seqno, msg):
        """1: added; 0: already present (duplicate); -1: seqno < next_to_remove (already delivered: the
        caller acks it again)."""
        return self.c_add(to_seqno(seqno, "seqno"), msg)

    def add_many(self, seqnos, msgs):
        """Add a received batch (two parallel lists). Returns ``(added, highest_old)``: how many were
        added, and the highest seqno that was below next_to_remove (to be acked again), or None."""
        cdef list ls = seqnos if type(seqnos) is list else list(seqnos)
        cdef list lm = msgs if type(msgs) is list else list(msgs)
        cdef Py_ssize_t i, n = len(ls), added = 0
        cdef int rc
        cdef int64_t s, old = 0
        cdef bint have_old = False
        if len(lm) != n:
            raise ValueError(f"add_many: {n} seqnos but {len(lm)} messages")
        for i in range(n):
            s = to_seqno(ls[i], "seqno")
            rc = self.c_add(s, lm[i])
            if rc == 1:
                added += 1
            elif rc == -1 and (not have_old or s > old):
                old = s
                have_old = True
        return (added, old if have_old else None)

    def remove_many(self, Py_ssize_t max_results=0):
        """``(messages, highest_removed)``: the in-order deliverable messages from next_to_remove on (at most
        max_results when > 0), removed from the window; ``([], 0)`` when none is deliverable."""
        return self.c_remove_many(max_results)

    def get(self, seqno):
        cdef PyObject* p = ring_get(&self._ring, to_seqno(seqno, "seqno"))
        if p == NULL:
            return None
        return <object>p

    def clear(self):
        """Drop every stored message (``reset``); next_to_remove is unchanged."""
        ring_clear(&self._ring)
        ring_maybe_shrink(&self._ring)

    @property
    def capacity(self):
        """Slots of the pages in use (a page of SEQ_PAGE_SLOTS seqnos exists while it holds a message)."""
        return ring_live_pages(&self._ring) * SEQ_PAGE_SLOTS

    @property
    def memory(self):
        """Bytes allocated by the window (directory and pages; not the messages)."""
        return ring_memory(&self._ring)

    @property
    def refused(self):
        """Seqnos refused (``OverflowError``) as too far from the window: more than MAX_WINDOW apart."""
        return self._ring.refused

    @property
    def next_to_remove(self):
        return self._ntr

    @property
    def size(self):
        """Number of messages stored (received, not yet removed)."""
        return self._ring.count

    def __len__(self):
        return self._ring.count

    def __repr__(self):
        return f"<AckReceiverWindow next_to_remove={self._ntr} size={self._ring.count}>"
