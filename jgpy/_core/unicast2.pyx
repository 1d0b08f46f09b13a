# cython: language_level=3, boundscheck=False, wraparound=False
"""UNICAST2's core: the per-message work of both directions in C (``UNICAST2`` is a subclass).

Down: per destination, a message is numbered on its connection (``conn_id``; the first one says ``first``), gets
the header and stays in the connection's :class:`AckSenderWindow` until a STABLE from the receiver covers it
(nothing is retransmitted unasked: the receiver asks). Up: DATA goes into the sender's
:class:`NakReceiverWindow` (a gap registers its missing range with the window's retransmitter, whose due ranges
the protocol sends as XMIT_REQs), the deliverable runs come out (and leave the window) and go to the delivery
executor in order (:class:`jgpy._core.reliable.OrderedCore`), OOB messages go up at once. Everything else
(XMIT_REQ, STABLE, SEND_FIRST_SEQNO, a message on a connection we do not know, a window that wants a STABLE
sent after ``max_bytes``) is left to the protocol's Python code as events.

Senders that are not in ``member_set`` get receive windows too (a joiner's JOIN_REQ travels over UNICAST2), but
bounded ones, as UNICAST's: at most ``max_nonmember_connections`` (least recently used first in
``nonmembers``), each taking seqnos less than ``nonmember_window`` ahead of the next one to deliver; a message
beyond is dropped and the protocol answers with a STABLE, which makes the sender resend what follows what we
hold.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint64_t

from jgpy._core.clock cimport monotonic_ms, monotonic_s
from jgpy._core.headers cimport Unicast2Header
from jgpy._core.message cimport Message
from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.tables cimport AckSenderWindow, NakReceiverWindow

cdef int OOB = 1
cdef int NO_RELIABILITY = 16
cdef int U2_DATA = 0
cdef int U2_XMIT_REQ = 1
cdef int U2_SEND_FIRST_SEQNO = 2
cdef int U2_STABLE = 3


cdef class Unicast2Sender:
    """The sending side of one connection: conn id, next seqno, what the receiver has not declared stable."""

    def __init__(self, int conn_id, AckSenderWindow win not None, double created):
        self.conn_id = conn_id
        self.next_seqno = 1
        self.win = win
        self.created = created

    def __repr__(self):
        return f"<Unicast2Sender conn_id={self.conn_id} next={self.next_seqno} {self.win!r}>"


cdef class Unicast2Receiver:
    """The receiving side of one connection: its conn id and window, and what the STABLE policy needs."""

    def __init__(self, int conn_id, NakReceiverWindow win not None, bint member):
        self.conn_id = conn_id
        self.win = win
        self.member = member
        self.last_highest = -1

    def __repr__(self):
        return f"<Unicast2Receiver conn_id={self.conn_id} member={self.member} {self.win!r}>"


cdef class Unicast2Arrival(Arrival):
    pass


cdef inline list _note(list events, str what, object sender, object x, object y):
    """events (a new list when None) with ``(what, sender, x, y)`` appended."""
    if events is None:
        events = []
    events.append((what, sender, x, y))
    return events


cdef class Unicast2Core(OrderedCore):
    """Hooks the protocol provides: ``_new_connection(dest)`` (lock held: a new Unicast2Sender in
    ``send_table``), ``_not_started(msg)`` and ``_handle_events(events)`` (after the lock; see
    :meth:`process`)."""

    def __cinit__(self):
        self.send_table = {}
        self.recv_table = {}
        self.nonmembers = {}
        self.member_set = frozenset()
        self.max_msg_batch_size = 50000
        self.max_bytes = 10000000
        self.max_nonmember_connections = 64
        self.nonmember_window = 8
        self.xmit_timeouts = (300, 600, 1200, 2400)

    # ---- down ----

    cdef object _down(self, Message msg):
        cdef Unicast2Sender conn
        cdef Unicast2Header hdr
        cdef int64_t seq
        dest = msg.dest
        if dest is None or msg.flags & NO_RELIABILITY:
            return self._pass(msg)
        if not self.started:
            self._not_started(msg)
            return None
        hdr = Unicast2Header.__new__(Unicast2Header)
        hdr.type = U2_DATA
        self.lock.take()
        try:
            c = self.send_table.get(dest)
            conn = <Unicast2Sender?>(self._new_connection(dest) if c is None else c)
            seq = conn.next_seqno
            hdr.seqno = seq
            hdr.conn_id = conn.conn_id
            hdr.first = seq == 1
            msg.put(self.id, hdr)
            conn.win.c_add(seq, msg, 0.0)
            conn.next_seqno = seq + 1
        finally:
            self.lock.give()
        self.msgs_sent += 1
        return self._pass(msg)

    # ---- members and connections (the caller holds lock) ----

    def set_members(self, members):
        """A new view: mark each receiver member or not (the caller has dropped the non-members' ones)."""
        cdef Unicast2Receiver r
        self.member_set = frozenset(members)
        self.nonmembers = {}
        for sender, e in self.recv_table.items():
            r = <Unicast2Receiver>e
            r.member = sender in self.member_set
            if not r.member:
                r.last_used = monotonic_s()
                self.nonmembers[sender] = r

    def drop_receiver(self, sender):
        """Remove sender's receive window; returns it (or None)."""
        return self._drop_receiver(sender)

    cdef object _drop_receiver(self, object sender):
        self.nonmembers.pop(sender, None)
        return self.recv_table.pop(sender, None)

    def expire_nonmembers(self, double idle_s):
        """Drop the receive windows of non-members idle for idle_s seconds or more; returns their senders."""
        cdef list gone = []
        cdef double cutoff = monotonic_s() - idle_s
        for sender, e in list(self.nonmembers.items()):     # least recently used first
            if (<Unicast2Receiver>e).last_used > cutoff:
                break
            gone.append(sender)
            self._drop_receiver(sender)
        return gone

    cdef Unicast2Receiver _open(self, object sender, int conn_id, int64_t seqno):
        """A ``first`` message on a connection we do not know: its window (the old one goes), bounded for a
        non-member (the least recently used non-member's window makes room)."""
        cdef bint member = sender in self.member_set
        cdef Unicast2Receiver r = Unicast2Receiver(
            conn_id, NakReceiverWindow(seqno - 1, seqno - 1, self.xmit_timeouts), member)
        if self.nonmembers.pop(sender, None) is None and not member:
            while len(self.nonmembers) >= self.max_nonmember_connections > 0:
                self._drop_receiver(next(iter(self.nonmembers)))
                self.nonmembers_evicted += 1
        self.recv_table[sender] = r
        if not member:
            r.last_used = monotonic_s()
            self.nonmembers[sender] = r
        return r

    # ---- up ----

    cdef Arrival _add(self, object batch):
        cdef Unicast2Arrival a = Unicast2Arrival.__new__(Unicast2Arrival)
        cdef list deliver = [], oob = []
        a.events = self._process(<list>(<tuple>batch)[0], <list>(<tuple>batch)[1], deliver, oob)
        if oob:
            a.oob = oob
        if deliver:
            a.fn = self.up_prot.up_batch
            a.args = (deliver,)
        return a

    cdef int _after(self, Arrival a) except -1:
        cdef Unicast2Arrival u = <Unicast2Arrival>a
        if u.events is not None:
            self._handle_events(u.events)
        return 0

    def process(self, list mine, list rest):
        """Handle a batch of messages with UNICAST2's header (in arrival order; the caller holds ``lock``).

        Messages UNICAST2 does not handle (multicasts, NO_RELIABILITY) are appended to ``rest``. DATA goes into
        the sender's window on its connection (a ``first`` message for a connection we do not know opens it)
        and what became deliverable leaves the window. Returns ``(deliver, oob, events)``: regular messages in
        per-sender order for the delivery thread; OOB messages to pass up now (each once: when it is added);
        ``None`` or a list of ``(what, sender, x, y)`` for the protocol: ``"no_connection"`` (x, y: the seqno and
        the conn id; ask for the first message), ``"window_full"`` (a non-member's seqno beyond ``nonmember_window``),
        ``"stable_due"`` (``max_bytes`` received since our last STABLE to it), ``"bad_seqno"`` (x: why),
        ``"xmit_req"``, ``"stable"`` (x, y: the header's seqno and high_seqno), ``"send_first_seqno"`` (x: the
        seqno), ``"bad_type"`` (x: the type)."""
        cdef list deliver = [], oob = []
        events = self._process(mine, rest, deliver, oob)
        return deliver, oob, events

    cdef list _process(self, list mine, list rest, list deliver, list oob):
        cdef list events = None
        cdef Py_ssize_t i, j, k, n = PyList_GET_SIZE(mine)
        cdef Py_ssize_t max_batch = self.max_msg_batch_size
        cdef Message m, r
        cdef Unicast2Header h
        cdef Unicast2Receiver entry
        cdef NakReceiverWindow win
        cdef list ready
        cdef int t, added
        cdef int64_t seq
        cdef double now = monotonic_ms()
        for i in range(n):
            m = <Message>PyList_GET_ITEM(mine, i)
            if m.dest is None or m.flags & NO_RELIABILITY:
                rest.append(m)
                continue
            hdr = m.header(self.id)
            if type(hdr) is not Unicast2Header:
                rest.append(m)
                continue
            h = <Unicast2Header>hdr
            t = h.type
            sender = m.src
            if t != U2_DATA:
                if t == U2_XMIT_REQ:
                    events = _note(events, "xmit_req", sender, h.seqno, h.high_seqno)
                elif t == U2_STABLE:
                    events = _note(events, "stable", sender, h.seqno, h.high_seqno)
                elif t == U2_SEND_FIRST_SEQNO:
                    events = _note(events, "send_first_seqno", sender, h.seqno, None)
                else:
                    events = _note(events, "bad_type", sender, t, None)
                continue
            self.msgs_received += 1
            seq = h.seqno
            e = self.recv_table.get(sender)
            if e is not None and (<Unicast2Receiver>e).conn_id != h.conn_id:
                e = None
            if e is None and h.first:
                if seq < 1:
                    self.dropped_bad_seqno += 1
                    events = _note(events, "bad_seqno", sender, f"first seqno {seq} < 1", None)
                    continue
                e = self._open(sender, h.conn_id, seq)
            if e is None:
                self.dropped_unknown_conn += 1
                events = _note(events, "no_connection", sender, seq, h.conn_id)
                continue
            entry = <Unicast2Receiver>e
            win = entry.win
            if not entry.member:
                if seq > win._hd and <uint64_t>seq - <uint64_t>win._hd > <uint64_t>self.nonmember_window:
                    self.dropped_nonmember_window += 1
                    events = _note(events, "window_full", sender, None, None)
                    continue
                entry.last_used = monotonic_s()
                if self.nonmembers.pop(sender, None) is not None:     # most recently used: last
                    self.nonmembers[sender] = entry
            try:
                added = win.c_add(seq, m, now)
            except OverflowError as err:         # a seqno absurdly far ahead: a bogus message
                self.dropped_bad_seqno += 1
                events = _note(events, "bad_seqno", sender, str(err), None)
                continue
            if not added:
                self.duplicates += 1
                continue
            self.bytes_received += m._len
            entry.received_bytes += m._len
            if entry.received_bytes >= self.max_bytes:
                entry.received_bytes = 0
                events = _note(events, "stable_due", sender, None, None)
            if m.flags & OOB:
                oob.append(m)
            while True:
                ready = win.c_remove_many(True, max_batch)
                k = PyList_GET_SIZE(ready)
                for j in range(k):
                    r = <Message>PyList_GET_ITEM(ready, j)
                    if not r.flags & OOB:          # an OOB message went up when it was added
                        deliver.append(r)
                if max_batch <= 0 or k < max_batch:
                    break
        return events
