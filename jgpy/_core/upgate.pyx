# cython: language_level=3
"""The stack's up gates: a run of protocols that need only some batches is skipped in one C pass."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport uint32_t
from libc.string cimport memset

from jgpy._core.message cimport Message


DEF MAX_GATED = 32

#: what a protocol's up_batch must see (``Protocol.up_needs``): batches with a message that carries its
#: header, with a multicast, with a unicast; all three = every batch
UP_HEADER = 1
UP_MULTICASTS = 2
UP_UNICASTS = 4
UP_EVERY = UP_HEADER | UP_MULTICASTS | UP_UNICASTS


cdef class UpGate:
    """``up_batch`` of a run of consecutive protocols that need to see only some batches (see
    ``Protocol.up_needs``): those with their own header, and maybe those with a multicast or a unicast.

    One C pass over the batch finds the first protocol of the run that needs it and calls that protocol's
    own ``up_batch``; a batch that none of them needs goes straight to ``after`` (the next protocol that
    needs every batch). Exactly what calling the run one by one would do, without a Python call per
    protocol. Run positions are bits: a header id maps to the positions of the protocols with that id
    (a table for ids below 256, a comparison with each id of the run above that)."""

    cdef int _n
    cdef int _ids[MAX_GATED]          # 0: a protocol without an id (it sends no headers)
    cdef uint32_t _by_id[256]         # header id -> run positions of the protocols with that id
    cdef uint32_t _mcast, _ucast      # run positions that need the batches with a multicast / a unicast
    cdef bint _large_ids              # some id >= 256 (user-assigned): compared one by one
    cdef list _handlers               # the run's own up_batch functions, bound to their protocols
    cdef object _after                # the protocol above the run; its up_batch is looked up per call

    def __init__(self, list ids, list needs, list handlers, after):
        if not 1 <= len(ids) <= MAX_GATED or len(ids) != len(handlers) or len(ids) != len(needs):
            raise ValueError(f"a gated run has 1..{MAX_GATED} protocols with an id, needs and a handler each, "
                             f"got {len(ids)} ids, {len(needs)} needs and {len(handlers)} handlers")
        cdef int j
        cdef uint32_t bit
        memset(self._by_id, 0, sizeof(self._by_id))
        self._mcast = self._ucast = 0
        self._large_ids = False
        for j in range(len(ids)):
            bit = (<uint32_t>1) << j
            self._ids[j] = ids[j] if needs[j] & UP_HEADER else 0
            if 0 < self._ids[j] < 256:
                self._by_id[self._ids[j]] |= bit
            elif self._ids[j] >= 256:
                self._large_ids = True
            if needs[j] & UP_MULTICASTS:
                self._mcast |= bit
            if needs[j] & UP_UNICASTS:
                self._ucast |= bit
        self._n = len(ids)
        self._handlers = handlers
        self._after = after

    def up_batch(self, list msgs):
        cdef int first = self._first_needing(msgs)
        if first < self._n:
            return self._handlers[first](msgs)
        return self._after.up_batch(msgs)

    cdef int _first_needing(self, list msgs):
        """Index of the first protocol of the run that needs ``msgs``, or ``_n``; the scan stops as soon as
        the first protocol of the run needs the batch."""
        cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
        cdef int k, j, hid
        cdef uint32_t need = 0
        cdef Message m
        for i in range(n):
            m = <Message>PyList_GET_ITEM(msgs, i)
            need |= self._mcast if m.dest is None else self._ucast
            for k in range(m._nh):
                hid = m._h[k].id
                if 0 <= hid < 256:
                    need |= self._by_id[hid]
                elif self._large_ids:
                    for j in range(self._n):
                        if self._ids[j] == hid:
                            need |= (<uint32_t>1) << j
            if need & 1:
                return 0
        for j in range(1, self._n):
            if (need >> j) & 1:
                return j
        return self._n

    def __repr__(self):
        return f"<UpGate ids={[self._ids[i] for i in range(self._n)]} after={self._after!r}>"
