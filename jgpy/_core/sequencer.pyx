# cython: language_level=3, boundscheck=False, wraparound=False
"""SEQUENCER's core (``SEQUENCER`` is a subclass): both directions of the per-message path in C.

Down: a multicast gets its seqno; the coordinator's goes out as BCAST, a member's is marshalled, kept in the
forward table and sent to the coordinator as a FORWARD. Up: the coordinator relays a member's FORWARD as a
WRAPPED_BCAST (the same bytes); a receiver checks a broadcast's sender, unwraps a WRAPPED_BCAST without copying
it and drops what it delivered before (:class:`SeqnoWindow`). What is not the common case (hostile or malformed
input, FORWARDs while not the coordinator) goes to the protocol's Python methods (``_malformed``,
``_keep_pending``, ``_dropped``), as do view changes and resends, which share the state below under the same
locks.

The coordinator relays FORWARDs at UNICAST's ordering point (:class:`ForwardTap`), on the thread that received
them, not on the delivery thread, where they waited behind every delivery queued before them.
"""

from libc.stdint cimport int64_t

from jgpy._core.headers cimport SequencerHeader
from jgpy._core.message cimport Message, WireDialect, new_message
from jgpy._core.reliable cimport OrderedTap
from jgpy._core.sendpath cimport ProtocolCore
from jgpy._core.types cimport ViewId

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

from bisect import bisect_right
from collections import deque

cdef int FORWARD = 1, BCAST = 2, WRAPPED_BCAST = 3
cdef int NO_TOTAL_ORDER = 32
cdef int FORWARD_LEFT = 4             # Message.transient_flags: a FORWARD the tap left to the delivery thread


cdef class SeqnoWindow:
    """The seqnos delivered from one original sender: every seqno below ``next``, plus the runs of seqnos above
    it (2.12's ``SeqnoTable.Entry`` keeps a set of seqnos; jgpy keeps runs ``[lo, hi]``, sorted and apart, so
    memory follows the gaps, not the number of seqnos above one). At most ``limit`` runs are kept; beyond that
    the oldest gap is given up (its seqnos count as delivered)."""

    cdef public int64_t next
    cdef public list los                  # run starts, ascending; every run is above next + 1
    cdef public list his                  # run ends; his[i] + 1 < los[i + 1]

    def __init__(self, int64_t first):
        self.next = first + 1
        self.los = []
        self.his = []

    @property
    def above(self) -> int:
        """The number of seqnos kept above ``next``."""
        return sum(h - lo + 1 for lo, h in zip(self.los, self.his))

    def add(self, int64_t seqno, Py_ssize_t limit):
        """``(deliver, gave_up_a_gap)`` for ``seqno``."""
        cdef int r = self._add(seqno, limit)
        return r > 0, r == 2

    cdef int _add(self, int64_t seqno, Py_ssize_t limit) except -1:
        """0: a duplicate; 1: deliver; 2: deliver, and the oldest gap was given up."""
        cdef list los = self.los, his = self.his
        if seqno == self.next:
            self.next += 1
            if los and <int64_t>los[0] == self.next:
                self.next = <int64_t>his[0] + 1
                del los[0], his[0]
            return 1
        if seqno < self.next:
            return 0
        cdef Py_ssize_t i = bisect_right(los, seqno)          # runs[:i] start at or below seqno
        if i and seqno <= <int64_t>his[i - 1]:
            return 0
        cdef bint joins_left = i > 0 and <int64_t>his[i - 1] + 1 == seqno
        cdef bint joins_right = i < len(los) and <int64_t>los[i] == seqno + 1
        if joins_left and joins_right:
            his[i - 1] = his[i]
            del los[i], his[i]
        elif joins_left:
            his[i - 1] = seqno
        elif joins_right:
            los[i] = seqno
        else:
            los.insert(i, seqno)
            his.insert(i, seqno)
        if len(los) <= limit:
            return 1
        self.next = <int64_t>his[0] + 1
        del los[0], his[0]
        return 2

    def __repr__(self) -> str:
        return f"{self.next}" + "".join(f" +{lo}..{h}" for lo, h in zip(self.los[:3], self.his[:3])) + \
            (f" (+{len(self.los) - 3} runs)" if len(self.los) > 3 else "")


cdef inline SequencerHeader _header(int type, addr, int64_t seqno):
    """``SequencerHeader(type, ViewId(addr, seqno))``, built in C."""
    cdef ViewId tag = ViewId.__new__(ViewId)
    tag.coord_addr = addr
    tag.id = seqno
    cdef SequencerHeader h = SequencerHeader.__new__(SequencerHeader)
    h.type = type
    h.tag = tag
    return h


cdef bint _is_marshalled_message(Message m) except -1:
    """Whether the payload starts as ``Util.objectToByteBuffer`` of a message does: TYPE_STREAMABLE, present,
    a magic number follows (the rest is checked by whoever unwraps it)."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef bint ok
    if m._buf is None or m._len < 3:
        return False
    PyObject_GetBuffer(m._buf, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf + m._off
        ok = m._off + 3 <= view.len and p[0] == 1 and p[1] == 1 and p[2] == 1
    finally:
        PyBuffer_Release(&view)
    return ok


cdef class SequencerCore(ProtocolCore):
    """The state both directions share (the Python protocol's view handling and resends use it too, under
    ``_send_lock`` for sends and coordinator changes and ``_lock`` for the tables)."""

    cdef public object _send_lock
    cdef public object _lock
    cdef public int64_t _seqno
    cdef public dict _forward_table       # seqno -> marshalled message, in seqno order
    cdef public dict _delivery_table      # original sender -> SeqnoWindow
    cdef public frozenset _member_set
    cdef public frozenset _known          # members of this and the previous view
    cdef public frozenset _sequencers     # whose BCASTs are accepted
    cdef public bint _holding             # a SUSPECT of the coordinator: forward after the view
    cdef public object coord
    cdef public bint is_coord
    cdef public Py_ssize_t delivery_table_max_size
    cdef public int64_t forwarded_msgs, bcast_msgs, received_forwards, received_bcasts, delivered_bcasts
    cdef public int64_t duplicates, gaps_given_up
    cdef public OrderedTap _tap           # a ForwardTap on UNICAST below while started, else None
    cdef WireDialect _dialect

    cdef WireDialect dialect(self):
        if self._dialect is None:
            self._dialect = <WireDialect?>self.stack.dialect
        return self._dialect

    # ---- down ----

    cdef object _down(self, Message msg):
        cdef int64_t seqno
        cdef bytes buf
        if msg.dest is not None or msg.flags & NO_TOTAL_ORDER:
            return self._pass(msg)
        local = self.stack.local_addr
        if msg.src is None:
            msg.src = local
        with self._send_lock:
            seqno = self._seqno
            self._seqno = seqno + 1
            if self.is_coord:
                msg.put(self.id, _header(BCAST, local, seqno))
                self.bcast_msgs += 1
                self._pass(msg)
                return None
            buf = self.dialect().marshal_message(msg)
            with self._lock:
                self._forward_table[seqno] = buf
            if self.coord is not None and not self._holding:   # else it goes out with the resend
                self._send_forward(self.coord, local, seqno, buf)
        return None

    cdef _send_forward(self, coord, local, int64_t seqno, bytes buf):
        cdef Message fwd = new_message()
        fwd.dest = coord
        fwd.set_payload(buf, 0, len(buf))
        fwd.put(self.id, _header(FORWARD, local, seqno))
        self._pass(fwd)
        self.forwarded_msgs += 1

    cdef _send_wrapped(self, orig, int64_t seqno, raw, Py_ssize_t offset, Py_ssize_t length):
        cdef Message bcast = new_message()
        bcast.src = self.stack.local_addr
        bcast.set_payload(raw, offset, length)
        bcast.put(self.id, _header(WRAPPED_BCAST, orig, seqno))
        self._pass(bcast)
        self.bcast_msgs += 1

    def _forward(self, coord, int64_t seqno, bytes buf) -> None:
        """Send our marshalled multicast ``seqno`` to ``coord`` as a FORWARD."""
        self._send_forward(coord, self.stack.local_addr, seqno, buf)

    def _broadcast(self, orig, int64_t seqno, raw, Py_ssize_t offset, Py_ssize_t length) -> None:
        """Multicast a marshalled message of ``orig`` as WRAPPED_BCAST (the bytes shared, not copied)."""
        self._send_wrapped(orig, seqno, raw, offset, length)

    def _relay(self, Message msg, SequencerHeader hdr) -> None:
        """The coordinator's part: a member's FORWARD goes out to everybody."""
        self._send_wrapped((<ViewId>hdr.tag).coord_addr, (<ViewId>hdr.tag).id, msg._buf, msg._off, msg._len)
        self.received_forwards += 1

    # ---- up ----

    def up_batch(self, list msgs):
        """Relay FORWARDs; check and unwrap broadcasts (no lock), then decide their delivery under one hold of
        ``_lock`` for the whole batch; pass up what is delivered, in batch order."""
        cdef list out = []
        cdef list cands = []                  # (position in out, original sender, seqno) of broadcasts
        cdef Message m, d
        cdef object hdr
        cdef int t
        cdef int pid = self.id
        for msg in msgs:
            m = <Message>msg
            if m.flags & NO_TOTAL_ORDER:
                out.append(m)
                continue
            try:
                hdr = m.header(pid)
                if hdr is None:
                    out.append(m)
                    continue
                t = (<SequencerHeader?>hdr).type
                if t == FORWARD:
                    self._on_forward(m, <SequencerHeader>hdr)
                elif t == BCAST or t == WRAPPED_BCAST:
                    self.received_bcasts += 1
                    d = self._on_bcast(m, <SequencerHeader>hdr) if t == BCAST else \
                        self._on_wrapped(m, <SequencerHeader>hdr)
                    if d is not None:
                        cands.append((len(out), d.src, (<ViewId>(<SequencerHeader>hdr).tag).id))
                        out.append(d)
                else:
                    self._malformed("type", m)
            except Exception:  # one bad message must not hurt the rest of the batch
                self._guard.failure(m)
        if cands and self._drop_seen(out, cands):
            out = [x for x in out if x is not None]
        if out:
            self.up_prot.up_batch(out)

    cdef bint _drop_seen(self, list out, list cands) except -1:
        """Set the broadcasts of ``cands`` that were delivered before to None in ``out``; whether any was. Our
        own messages that are back leave the forward table."""
        cdef SeqnoWindow win
        cdef int r
        cdef int64_t seqno
        cdef Py_ssize_t dups = 0, gave_up = 0
        local = self.stack.local_addr
        with self._lock:
            for c in cands:
                sender = (<tuple>c)[1]
                seqno = (<tuple>c)[2]
                if sender == local:
                    self._forward_table.pop(seqno, None)    # our own message is back: delivered
                win = self._delivery_table.get(sender)
                if win is None:
                    self._delivery_table[sender] = SeqnoWindow(seqno)
                    r = 1
                else:
                    r = win._add(seqno, self.delivery_table_max_size)
                if r == 0:
                    out[<Py_ssize_t>(<tuple>c)[0]] = None
                    dups += 1
                elif r == 2:
                    gave_up += 1
        self.duplicates += dups
        self.gaps_given_up += gave_up
        self.delivered_bcasts += len(cands) - dups
        return dups > 0

    cdef bint _forward_ok(self, Message m, SequencerHeader hdr) except -1:
        src, tag = m.src, hdr.tag
        return type(tag) is ViewId and src is not None and (<ViewId>tag).coord_addr == src and m.dest is not None \
            and _is_marshalled_message(m)

    cdef _on_forward(self, Message m, SequencerHeader hdr):
        """A FORWARD on the delivery thread (no tap, or one the tap left here)."""
        cdef ForwardTap tap = <ForwardTap>self._tap
        if tap is not None and tap.queue:
            self._relay_taken()                 # what the tap took before this one goes first
        try:
            if not self._forward_ok(m, hdr):
                self._malformed("forward", m)
                return
            if m.src not in self._member_set:
                self._dropped("dropped_forward_non_member", m.src)
                return
            if not self.is_coord:
                self._keep_pending(m)
                return
            self._relay(m, hdr)
        finally:
            if m.transient_flags & FORWARD_LEFT:
                m.transient_flags &= ~FORWARD_LEFT
                if tap is not None and tap.left > 0:
                    tap.left -= 1

    cdef int _relay_taken(self) except -1:
        """Relay the FORWARDs the tap took, in order, under the send lock (so after a take-over's resends; a
        member that is no longer the coordinator keeps them as it keeps any FORWARD)."""
        cdef ForwardTap tap = <ForwardTap>self._tap
        cdef Message m
        if tap is None:                         # stopped meanwhile
            return 0
        with self._send_lock:
            while tap.queue:
                m = <Message>tap.queue.popleft()
                try:
                    if self.is_coord:
                        self._relay(m, <SequencerHeader>m.header(self.id))
                        tap.relayed += 1
                    else:
                        self._keep_pending_locked(m)
                except Exception:  # one bad message must not hurt the rest
                    self._guard.failure(m)
        return 0

    cdef Message _on_bcast(self, Message m, SequencerHeader hdr):
        src, tag = m.src, hdr.tag
        if type(tag) is not ViewId or src is None or (<ViewId>tag).coord_addr != src or m.dest is not None:
            self._malformed("bcast", m)
            return None
        if src not in self._sequencers:
            self._dropped("dropped_not_sequencer", src)
            return None
        return m

    cdef Message _on_wrapped(self, Message m, SequencerHeader hdr):
        """The original message of a WRAPPED_BCAST, if it comes from whom it may come from."""
        cdef Message inner
        tag = hdr.tag
        if type(tag) is not ViewId or m.src is None or m.dest is not None or m._buf is None:
            self._malformed("bcast", m)
            return None
        if m.src not in self._sequencers:
            self._dropped("dropped_not_sequencer", m.src)
            return None
        try:
            inner = self.dialect().unmarshal_message(m._buf, m._off, m._off + m._len)
        except Exception:  # whatever it is, it is not a marshalled message
            inner = None
        if inner is None or inner.dest is not None or inner.src is None or inner.src != (<ViewId>tag).coord_addr:
            self._malformed("payload", m)
            return None
        if inner.src not in self._known:
            self._dropped("dropped_non_member_sender", inner.src)
            return None
        return inner


cdef class ForwardTap(OrderedTap):
    """The coordinator's FORWARDs, taken at UNICAST's ordering point and relayed by the thread that received them.

    On the delivery thread a FORWARD waited behind every delivery queued before it (the application's receive()
    of the multicasts before it), and with it the original sender's credits. Order: a member's FORWARDs are taken
    in UNICAST's order and relayed in that order under the send lock. A member's FORWARD the tap does not relay (not
    the coordinator: the protocol's Python keeps it) stays in its run, marked; while any such is not yet handled on
    the delivery thread (``left``), the tap takes none, and handling it first relays what the tap took before it:
    so no FORWARD overtakes another. A malformed one or a non-member's stays in its run unmarked (the delivery
    thread counts and drops it; it has no order to keep, so strangers cannot stop the tap)."""

    cdef SequencerCore core
    cdef object queue                     # taken FORWARDs, in UNICAST's order (deque)
    cdef public Py_ssize_t left           # FORWARDs left to the delivery thread, not handled there yet
    cdef public int64_t relayed           # FORWARDs relayed by the tap

    def __init__(self, SequencerCore core):
        self.core = core
        self.queue = deque()

    cpdef list take(self, list run):
        cdef SequencerCore core = self.core
        cdef int pid = core.id
        cdef Message m
        cdef list rest = None
        cdef Py_ssize_t i
        cdef bint taken
        for i in range(len(run)):
            m = <Message>run[i]
            taken = False
            if not m.flags & NO_TOTAL_ORDER:
                try:
                    hdr = m.header(pid)
                except Exception:  # the delivery thread counts it as malformed
                    hdr = None
                if type(hdr) is SequencerHeader and (<SequencerHeader>hdr).type == FORWARD \
                        and m.src in core._member_set and core._forward_ok(m, <SequencerHeader>hdr):
                    if self.left == 0 and core.is_coord:
                        self.queue.append(m)
                        taken = True
                    else:
                        m.transient_flags |= FORWARD_LEFT
                        self.left += 1
            if taken:
                if rest is None:
                    rest = run[:i]
            elif rest is not None:
                rest.append(m)
        return run if rest is None else rest

    cpdef int drain(self) except -1:
        if self.queue:
            self.core._relay_taken()
        return 0
