# cython: language_level=3
"""Per-batch message helpers for the up path: C loops over a list of messages, so protocol code in
Python makes one call per batch instead of one per message."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint32_t
from libc.string cimport memcmp, memset

from jgpy._core.message cimport Message
from jgpy._core.headers cimport TpHeader
from jgpy._core.wire import utf_encode
from jgpy.errors import IncompatibleVersionError, WireFormatError


cdef inline bint _has(Message m, int id):
    cdef int i
    for i in range(m._nh):
        if m._h[i].id == id:
            return True
    return False


def split_by_header(list msgs, int id):
    """``(messages with a header of protocol id, the others)``, both in the original order."""
    cdef list mine = [], rest = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if _has(m, id):
            mine.append(m)
        else:
            rest.append(m)
    return mine, rest


def has_header_any(list msgs, int id):
    """True if at least one message has a header of protocol ``id``."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    for i in range(n):
        if _has(<Message>PyList_GET_ITEM(msgs, i), id):
            return True
    return False


def total_length(list msgs, bint multicasts_only=False):
    """Sum of the payload lengths (``multicasts_only``: of the multicasts, ``dest`` None)."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs), total = 0
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m._buf is not None and not (multicasts_only and m.dest is not None):
            total += m._len
    return total


def unknown_multicast_sources(list msgs, members, known):
    """Senders of the batch's multicasts that are in neither ``members`` nor ``known`` (each once, in
    batch order)."""
    cdef list out = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    cdef object last = None           # a batch mostly comes from one sender: look each one up once in a row
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        src = m.src
        if m.dest is not None or src is None or src is last:
            continue
        last = src
        if src not in members and src not in known and src not in out:
            out.append(src)
    return out


def credit_lengths(list msgs, bint multicast, int skip_flags):
    """``{src: total payload bytes}`` of the multicasts (``multicast``) or unicasts of the batch that have
    none of ``skip_flags`` (UFC/MFC count what they owe credits for)."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if (m.dest is None) == multicast and not (m.flags & skip_flags) and m._buf is not None and m._len:
            out[m.src] = out.get(m.src, 0) + m._len
    return out


def split_by_flag(list msgs, int flag):
    """``(messages with ``flag`` set, the others)``, each in the batch order."""
    cdef list with_flag = [], without = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m.flags & flag:
            with_flag.append(m)
        else:
            without.append(m)
    return with_flag, without


def group_by_sender(list msgs):
    """``{src: [messages]}`` in first-seen order, each list in the original order."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    cdef list lst
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        lst = out.get(m.src)
        if lst is None:
            out[m.src] = [m]
        else:
            lst.append(m)
    return out


def filter_transport(list msgs, int tp_id, bytes cluster_utf, object drop_src, bint drop_own):
    """The transport's receive checks for a whole batch (TP.passMessageUp).

    Keeps messages that carry a transport header whose cluster name equals ``cluster_utf`` (the
    ``writeUTF`` bytes of our cluster name, compared without decoding) and, when ``drop_own``, that do
    not come from ``drop_src``. Returns ``(kept, no_header, other_cluster, own)`` counts with the kept list.
    """
    cdef list kept = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Py_ssize_t no_hdr = 0, other = 0, own = 0
    cdef Message m
    cdef int k, idx
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(cluster_utf)
    cdef const char* want = PyBytes_AS_STRING(cluster_utf)
    cdef const unsigned char* raw
    cdef object hdr
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        idx = -1
        for k in range(m._nh):
            if m._h[k].id == tp_id:
                idx = k
                break
        if idx < 0:
            no_hdr += 1
            continue
        hdr = m.built_header(idx)
        if hdr is not None:
            if not isinstance(hdr, TpHeader) or utf_encode((<TpHeader>hdr).channel_name) != cluster_utf:
                other += 1
                continue
        else:
            if type(m._raw) is not bytes or m._h[idx].end - m._h[idx].off != blen:
                other += 1
                continue
            raw = <const unsigned char*>PyBytes_AS_STRING(m._raw) + m._h[idx].off
            if memcmp(raw, want, blen) != 0:
                other += 1
                continue
        if drop_own and drop_src is not None and m.src == drop_src:
            own += 1
            continue
        kept.append(m)
    return kept, no_hdr, other, own


cdef class TransportReceive:
    """``TP.receive_datagrams`` in C: the datagrams one socket read in a batch are decoded into messages,
    the transport's checks run (:func:`filter_transport`) and what is kept goes up as one batch.

    The common path's two counters live here (``datagrams_received``, ``msgs_received``), and so does that of
    the messages the dialect dropped alone, as malformed, from datagrams it decoded otherwise
    (``dropped_malformed_msgs``: a header under a protocol id that does not carry its class; the rest of the
    datagram and of the batch go up). The other drops are reported to the protocol, which counts and logs
    them: ``bad_datagram(kind, data, source, error)`` with kind "version" or "malformed" (the whole datagram)
    or "malformed_msgs" (its first dropped message's error), ``dropped(kind, count)`` for "own_bundles",
    "no_tp_header", "other_cluster" and "own_mcast", and ``up_failed(count, error)`` when the layer above
    raised."""

    cdef public object owner              # the TP protocol: its header, cluster, dialect, up_prot
    cdef public object local_addr         # ours (set by the protocol with SET_LOCAL_ADDRESS)
    cdef public int64_t datagrams_received
    cdef public int64_t msgs_received
    cdef public int64_t dropped_malformed_msgs
    cdef public object bad_datagram
    cdef public object dropped
    cdef public object up_failed

    def __init__(self, owner, bad_datagram, dropped, up_failed):
        self.owner = owner
        self.bad_datagram = bad_datagram
        self.dropped = dropped
        self.up_failed = up_failed

    def receive_unicasts(self, list datagrams, sources) -> None:
        """The unicast socket's loop handler."""
        self.receive(datagrams, sources, False)

    def receive_multicasts(self, list datagrams, sources) -> None:
        """The multicast socket's loop handler."""
        self.receive(datagrams, sources, True)

    cpdef receive(self, list datagrams, sources, bint multicast):
        """A batch of datagrams, all multicast or all unicast."""
        cdef object tp = self.owner
        cdef Py_ssize_t i, n = PyList_GET_SIZE(datagrams)
        cdef Py_ssize_t skipped = 0
        cdef bytes own = None
        cdef list msgs = []
        cdef list rejected = []               # the errors of the messages the dialect dropped alone (one call's:
                                              # several threads receive through this object)
        cdef bint check
        self.datagrams_received += n
        if tp._tp_header is None:
            return None
        decode = tp.stack.dialect.decode_messages
        check = tp.discard_incompatible_packets
        if multicast and tp.loopback:
            own = tp.own_bundle_prefix
        for i in range(n):
            data = <object>PyList_GET_ITEM(datagrams, i)
            if own is not None and type(data) is bytes and data.startswith(own):
                skipped += 1                  # our own bundle back from the kernel: its messages went up
                continue                      # through loopback already
            try:
                decode(data, msgs, check, rejected)
            except IncompatibleVersionError as e:
                self.bad_datagram("version", data, _source(sources, i), e)
            except WireFormatError as e:
                self.bad_datagram("malformed", data, _source(sources, i), e)
            if PyList_GET_SIZE(rejected):
                self.dropped_malformed_msgs += PyList_GET_SIZE(rejected)
                error = rejected[0]
                del rejected[:]
                self.bad_datagram("malformed_msgs", data, _source(sources, i), error)
        if skipped:
            self.dropped("own_bundles", skipped)
        if not msgs:
            return None
        kept, no_hdr, other, own_mcast = filter_transport(msgs, tp.id, tp._cluster_utf, self.local_addr,
                                                          tp.loopback and multicast)
        if no_hdr:
            self.dropped("no_tp_header", no_hdr)
        if other:
            self.dropped("other_cluster", other)
        if own_mcast:
            self.dropped("own_mcast", own_mcast)
        if not kept:
            return None
        self.msgs_received += PyList_GET_SIZE(kept)
        try:
            tp.up_prot.up_batch(kept)
        except Exception as e:                # never let a protocol error kill a receive thread
            self.up_failed(PyList_GET_SIZE(kept), e)
        return None


cdef object _source(sources, Py_ssize_t i):
    try:
        return sources[i]
    except Exception:
        return None


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
