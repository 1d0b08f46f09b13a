# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-message receive paths of pbcast.NAKACK and UNICAST, in C.

NAKACK's Python code calls :meth:`NakackReceive.classify` once per received batch and
:meth:`NakackReceive.process` once per batch of data messages (under its delivery lock); UNICAST's calls
:meth:`UnicastReceive.process` once per received batch. Everything that is per message -- reading the
header, grouping by sender, adding to the sender's window, removing the deliverable run, picking out OOB
messages, applying ACKs -- happens here. Retransmission requests, ACKs to send, logging and the hand-over
to the delivery thread stay in the protocols.
"""

from time import monotonic

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint64_t

from jgpy._core.headers cimport NakAckHeader, UnicastHeader
from jgpy._core.message cimport Message
from jgpy._core.tables cimport AckReceiverWindow, AckSenderWindow, NakReceiverWindow

cdef int OOB = 1
cdef int NO_RELIABILITY = 16
cdef int OOB_DELIVERED = 1          # Message.transient_flags
cdef int MSG = 1
cdef int XMIT_RSP = 3
cdef int UNICAST_DATA = 0
cdef int UNICAST_ACK = 1
cdef int UNICAST_SEND_FIRST_SEQNO = 2


cdef class NakackReceive:
    """Counters and the per-message work of NAKACK's receive side (``windows`` is the protocol's dict)."""

    cdef public dict windows
    cdef public int prot_id
    cdef public int64_t msgs_received
    cdef public int64_t msgs_delivered
    cdef public int64_t oob_delivered
    cdef public int64_t xmit_rsps_received
    cdef public int64_t dropped_not_server
    cdef public int64_t dropped_no_window
    cdef public int64_t dropped_duplicate
    cdef public int64_t dropped_bad_seqno
    cdef public int64_t dropped_null_sender

    def __init__(self, int prot_id, dict windows):
        self.prot_id = prot_id
        self.windows = windows

    def classify(self, list msgs, bint is_server):
        """Sort a batch of NAKACK messages: ``(data, control, unreliable)``.

        ``data``: ``{sender: ([seqno], [msg])}`` of MSG (and XMIT_RSP, turned back into MSG as Java does);
        ``control``: ``[(msg, header)]`` of the others (XMIT_REQ, unknown types) for the protocol;
        ``unreliable``: NO_RELIABILITY messages, to pass up as they are. Nothing but unreliable messages
        counts before we are a server (joined)."""
        cdef dict data = {}
        cdef list control = [], unreliable = []
        cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
        cdef Message m
        cdef NakAckHeader h
        cdef tuple entry
        for i in range(n):
            m = <Message>PyList_GET_ITEM(msgs, i)
            if m.flags & NO_RELIABILITY:
                unreliable.append(m)
                continue
            hdr = m.header(self.prot_id)
            if not is_server:
                self.dropped_not_server += 1
                continue
            if type(hdr) is not NakAckHeader:
                control.append((m, hdr))
                continue
            h = <NakAckHeader>hdr
            if h.type == XMIT_RSP:
                self.xmit_rsps_received += 1
                m.dest = None
                h.type = MSG
            elif h.type != MSG:
                control.append((m, h))
                continue
            src = m.src
            if src is None:
                self.dropped_null_sender += 1
                continue
            entry = data.get(src)
            if entry is None:
                entry = data[src] = ([], [])
            (<list>entry[0]).append(h.seqno)
            (<list>entry[1]).append(m)
        return data, control, unreliable

    def process(self, dict data, object me, bint discard_delivered, Py_ssize_t max_batch, double now):
        """Add classified data to the windows and take out what is deliverable (call under the lock).

        Returns ``(deliver, marks, oob, no_window, bad)``: regular messages in per-sender order for the
        delivery thread; ``(sender, window, highest_delivered)`` per sender that delivered something; OOB
        messages to pass up right away (each once); ``(sender, count)`` of senders without a window;
        ``(sender, error)`` of seqnos the window refused (absurdly far ahead)."""
        cdef list deliver = [], marks = [], oob = [], no_window = [], bad = []
        cdef list seqnos, msgs, ready
        cdef Py_ssize_t i, n, j, k
        cdef bint loopback
        cdef NakReceiverWindow win
        cdef Message m
        cdef int64_t seq
        for sender, entry in data.items():
            seqnos = <list>(<tuple>entry)[0]
            msgs = <list>(<tuple>entry)[1]
            n = PyList_GET_SIZE(msgs)
            w = self.windows.get(sender)
            if w is None:
                self.dropped_no_window += n
                no_window.append((sender, n))
                continue
            win = <NakReceiverWindow>w
            loopback = sender == me
            self.msgs_received += n
            for i in range(n):
                m = <Message>PyList_GET_ITEM(msgs, i)
                seq = <int64_t>seqnos[i]
                if loopback:
                    # our own multicast: the window holds it since we sent it; the copy only says "deliver"
                    if m.flags & OOB:
                        stored = win.c_get(seq)
                        if stored is not None and not (<Message>stored).transient_flags & OOB_DELIVERED:
                            (<Message>stored).transient_flags |= OOB_DELIVERED
                            oob.append(stored)
                    continue
                try:
                    added = win.c_add(seq, m, now)
                except OverflowError as e:        # a seqno absurdly far ahead: a bogus message
                    self.dropped_bad_seqno += 1
                    bad.append((sender, str(e)))
                    continue
                if added:
                    if m.flags & OOB and not m.transient_flags & OOB_DELIVERED:
                        m.transient_flags |= OOB_DELIVERED
                        oob.append(m)
                else:
                    self.dropped_duplicate += 1
            delivered = False
            while True:                           # everything deliverable now, max_batch at a time
                ready = win.c_remove_many(discard_delivered and not loopback, max_batch)
                k = PyList_GET_SIZE(ready)
                if k == 0:
                    break
                delivered = True
                for j in range(k):
                    m = <Message>PyList_GET_ITEM(ready, j)
                    if m.flags & OOB:
                        if m.transient_flags & OOB_DELIVERED:
                            continue
                        m.transient_flags |= OOB_DELIVERED
                        oob.append(m)
                        continue
                    deliver.append(m)
                if max_batch <= 0 or k < max_batch:
                    break
            if delivered:
                marks.append((sender, win, win._hd))
        self.msgs_delivered += PyList_GET_SIZE(deliver)
        self.oob_delivered += PyList_GET_SIZE(oob)
        return deliver, marks, oob, no_window, bad


# ---------------------------------------------------------------------------------------------
# UNICAST
# ---------------------------------------------------------------------------------------------

cdef class UnicastReceiver:
    """The receiving side of one UNICAST connection: the sender's conn id and the window of its messages;
    whether the sender is a member of the view, and (for a non-member) when it last sent (``monotonic()``)."""

    cdef readonly int conn_id
    cdef readonly AckReceiverWindow win
    cdef public bint member
    cdef public double last_used

    def __init__(self, int conn_id, int64_t first_seqno, bint member=True):
        self.conn_id = conn_id
        self.win = AckReceiverWindow(first_seqno)
        self.member = member

    def __repr__(self):
        return f"<UnicastReceiver conn_id={self.conn_id} member={self.member} {self.win!r}>"


cdef class UnicastReceive:
    """UNICAST's receive side: counters and the per-message work of a batch (``recv_table``: sender ->
    :class:`UnicastReceiver`, ``send_table``: dest -> ``UnicastConnection``, ``pending_acks``: sender -> the
    delayed ACK, all the protocol's, guarded by its lock, which the caller of :meth:`process` holds).

    Senders that are not in ``members`` (strangers, joiners, other partitions' coordinators) get receive
    windows too (a joiner's JOIN_REQ travels over UNICAST), but bounded ones: at most ``max_nonmembers``
    windows (``nonmembers`` keeps them in least recently used order; beyond, the least recently used goes),
    and such a window takes only seqnos less than ``nonmember_window`` ahead of the next one to deliver
    (the sender retransmits the others). :meth:`expire_nonmembers` drops the idle ones."""

    cdef public dict recv_table
    cdef public dict send_table
    cdef public dict pending_acks
    cdef public int prot_id
    cdef public int64_t msgs_received
    cdef public int64_t acks_received
    cdef public int64_t duplicates
    cdef public int64_t dropped_unknown_conn
    cdef public int64_t dropped_bad_seqno
    cdef public int64_t dropped_nonmember_window   # seqnos of non-members beyond nonmember_window
    cdef public int64_t nonmembers_evicted         # windows of non-members dropped for newer ones
    cdef public bint delay_acks           # ack_delay > 0: ACKs wait in pending_acks (the protocol sends them)
    cdef public int64_t ack_threshold     # unacked messages from one sender that are acked at once
    cdef public frozenset members         # the view's members
    cdef public dict nonmembers           # sender -> UnicastReceiver of non-members, least recently used first
    cdef public Py_ssize_t max_nonmembers
    cdef public int64_t nonmember_window

    def __init__(self, int prot_id, dict recv_table, dict send_table, dict pending_acks):
        self.prot_id = prot_id
        self.recv_table = recv_table
        self.send_table = send_table
        self.pending_acks = pending_acks
        self.ack_threshold = 1
        self.members = frozenset()
        self.nonmembers = {}
        self.max_nonmembers = 64
        self.nonmember_window = 8

    def set_members(self, members):
        """A new view: mark each receiver member or not (the caller has dropped the non-members' ones)."""
        self.members = frozenset(members)
        self.nonmembers = {}
        for sender, e in self.recv_table.items():
            (<UnicastReceiver>e).member = sender in self.members
            if not (<UnicastReceiver>e).member:
                (<UnicastReceiver>e).last_used = monotonic()
                self.nonmembers[sender] = e

    def forget(self, sender):
        """Drop sender's receive window and pending ACK (its connection went)."""
        e = self.recv_table.pop(sender, None)
        self.nonmembers.pop(sender, None)
        self.pending_acks.pop(sender, None)
        return e

    def expire_nonmembers(self, double idle_s):
        """Drop the windows of non-members idle for idle_s seconds or more; returns their senders."""
        cdef list gone = []
        cdef double cutoff = monotonic() - idle_s
        for sender, e in list(self.nonmembers.items()):     # least recently used first
            if (<UnicastReceiver>e).last_used > cutoff:
                break
            gone.append(sender)
            self.forget(sender)
        return gone

    cdef UnicastReceiver _open(self, object sender, int conn_id, int64_t seq, dict acks):
        """A new connection (a ``first`` message): its window, bounded for a non-member."""
        cdef bint member = sender in self.members
        cdef UnicastReceiver e = UnicastReceiver(conn_id, seq, member)
        cdef object old
        if self.nonmembers.pop(sender, None) is None and not member:
            while len(self.nonmembers) >= self.max_nonmembers > 0:
                old = next(iter(self.nonmembers))
                self.forget(old)
                acks.pop(old, None)
                self.nonmembers_evicted += 1
        self.recv_table[sender] = e
        if not member:
            e.last_used = monotonic()
            self.nonmembers[sender] = e
        acks.pop(sender, None)              # an ACK (it has no conn_id) for the old connection
        self.pending_acks.pop(sender, None) # would acknowledge the new one's seqnos
        return e

    def process(self, list mine, list rest, Py_ssize_t max_batch):
        """Handle a batch of messages with UNICAST's header (in arrival order; the caller holds the protocol's
        lock, and hands ``deliver`` over under it, so that the hand-overs keep the order of the windows).

        Messages that UNICAST does not handle (multicasts, NO_RELIABILITY) are appended to ``rest``. DATA is
        added to the sender's window on its connection (a ``first`` message for a connection we do not know
        opens it; a non-member's seqno ``nonmember_window`` or more ahead of its window is dropped unacked)
        and whatever became deliverable is removed (at most ``max_batch`` per message added); ACKs
        release the acknowledged messages of our connection to their sender (the highest of a batch only).

        Returns ``(deliver, oob, acks, events)``: regular messages in per-sender order for the delivery
        thread; OOB messages to pass up now (each once: when it is added); the ACKs to send now, a list of
        ``(sender, highest seqno)`` (see :meth:`_decide_acks`); and ``None``, or a list of ``(what, sender,
        detail)`` for the protocol: ``"no_connection"`` (a message on a connection we do not know: ask for
        its first message), ``"send_first_seqno"`` (the sender asks us to resend our first unacked message),
        ``"bad_seqno"`` (a seqno the window refused; detail: why), ``"bad_type"`` (detail: the header type)."""
        cdef list deliver = [], oob = [], ready
        cdef dict acks = {}, acked = {}
        cdef list events = None
        cdef Py_ssize_t i, j, n = PyList_GET_SIZE(mine), k
        cdef Message m, r
        cdef UnicastHeader h
        cdef UnicastReceiver entry
        cdef int result, t
        cdef int64_t seq, highest
        cdef uint64_t ahead
        cdef list ack
        for i in range(n):
            m = <Message>PyList_GET_ITEM(mine, i)
            if m.dest is None or m.flags & NO_RELIABILITY:
                rest.append(m)
                continue
            hdr = m.header(self.prot_id)
            if type(hdr) is not UnicastHeader:
                rest.append(m)
                continue
            h = <UnicastHeader>hdr
            t = h.type
            sender = m.src
            if t == UNICAST_DATA:
                self.msgs_received += 1
                seq = h.seqno
                e = self.recv_table.get(sender)
                if h.first:
                    if e is None or (<UnicastReceiver>e).conn_id != h.conn_id:
                        e = self._open(sender, h.conn_id, seq, acks)
                elif e is not None and (<UnicastReceiver>e).conn_id != h.conn_id:
                    e = None
                if e is None:
                    self.dropped_unknown_conn += 1
                    if events is None:
                        events = []
                    events.append(("no_connection", sender, None))
                    continue
                entry = <UnicastReceiver>e
                if not entry.member:
                    ahead = <uint64_t>seq - <uint64_t>entry.win._ntr
                    if seq > entry.win._ntr and ahead >= <uint64_t>self.nonmember_window:   # holds little
                        self.dropped_nonmember_window += 1
                        continue
                    entry.last_used = monotonic()
                    if self.nonmembers.pop(sender, None) is not None:     # most recently used: last
                        self.nonmembers[sender] = entry
                try:
                    result = entry.win.c_add(seq, m)
                except OverflowError as err:         # a seqno absurdly far ahead: a bogus message
                    self.dropped_bad_seqno += 1
                    if events is None:
                        events = []
                    events.append(("bad_seqno", sender, str(err)))
                    continue
                ready, highest = entry.win.c_remove_many(max_batch)
                if result == 1 and m.flags & OOB:
                    oob.append(m)
                k = PyList_GET_SIZE(ready)
                for j in range(k):
                    r = <Message>PyList_GET_ITEM(ready, j)
                    if not r.flags & OOB:
                        deliver.append(r)
                ack = acks.get(sender)
                if ack is None:
                    ack = acks[sender] = [0, 0, False]
                if result == -1:     # already delivered: ack it again at once (our ACK may have been lost)
                    self.duplicates += 1
                    if seq > highest:
                        highest = seq
                    ack[2] = True
                elif result == 0:
                    self.duplicates += 1
                    ack[2] = True
                else:
                    ack[1] = <int64_t>ack[1] + 1
                if highest > <int64_t>ack[0]:
                    ack[0] = highest
            elif t == UNICAST_ACK:               # cumulative: only the highest of a batch matters
                self.acks_received += 1
                if h.seqno > <int64_t>acked.get(sender, 0):
                    acked[sender] = h.seqno
            else:
                if events is None:
                    events = []
                events.append(("send_first_seqno" if t == UNICAST_SEND_FIRST_SEQNO else "bad_type", sender, t))
        for sender, seqno in acked.items():
            c = self.send_table.get(sender)
            if c is not None:
                (<AckSenderWindow?>c.win).c_ack(<int64_t>seqno)
        return deliver, oob, self._decide_acks(acks), events

    cdef list _decide_acks(self, dict acks):
        """The ACKs of a batch, ``{sender: [highest seqno, new messages, at once?]}`` (at once: a duplicate, our
        ACK may have been lost): which to send now, as ``[(sender, seqno)]``. Without ``delay_acks`` (2.12)
        all of them; else those due at once or covering ``ack_threshold`` messages with what ``pending_acks``
        held for that sender, and the rest wait there (merged: one cumulative ACK) for the protocol's timer or
        a message we send to that sender."""
        cdef list now = []
        cdef list a, p
        cdef int64_t seq, count
        cdef dict pending = self.pending_acks
        for sender, ack in acks.items():
            a = <list>ack
            seq = <int64_t>a[0]
            if seq <= 0:
                continue
            if not self.delay_acks:
                now.append((sender, seq))
                continue
            count = <int64_t>a[1]
            prev = pending.get(sender)
            if prev is not None:
                p = <list>prev
                if <int64_t>p[0] > seq:
                    seq = <int64_t>p[0]
                count += <int64_t>p[1]
            if a[2] or count >= self.ack_threshold:
                if prev is not None:
                    del pending[sender]
                now.append((sender, seq))
            else:
                pending[sender] = [seq, count]
        return now
