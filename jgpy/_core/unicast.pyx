# cython: language_level=3, boundscheck=False, wraparound=False
"""UNICAST's core: the per-message work of both directions in C (``UNICAST`` is a subclass).

Down: per destination, a message is numbered on its connection, gets the header and stays in the connection's
window until acked; a regular message to a member we owe a delayed ACK takes the ACK along (the transport sends
both in one datagram, the ACK first). Up: DATA goes into the sender's window on its connection, the deliverable
runs come out and go to the delivery executor in order (:class:`jgpy._core.reliable.OrderedCore`), OOB messages
go up at once, ACKs release our messages; the ACK policy decides which ACKs go now and which wait. The
protocol's Python code opens connections, sends ACKs, answers first-seqno requests, retransmits and logs.

Senders that are not in ``member_set`` (strangers, joiners, other partitions' coordinators) get receive windows
too (a joiner's JOIN_REQ travels over UNICAST), but bounded ones: at most ``max_nonmember_connections`` windows
(``nonmembers`` keeps them in least recently used order; beyond, the least recently used goes), and such a window
takes only seqnos less than ``nonmember_window`` ahead of the next one to deliver (the sender retransmits the
others). :meth:`UnicastCore.expire_nonmembers` drops the idle ones.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint64_t

from jgpy._core.clock cimport monotonic_ms, monotonic_s
from jgpy._core.headers cimport UnicastHeader
from jgpy._core.message cimport Message, new_message
from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.tables cimport AckReceiverWindow, AckSenderWindow

cdef int OOB = 1
cdef int NO_RELIABILITY = 16
cdef int UNICAST_DATA = 0
cdef int UNICAST_ACK = 1
cdef int UNICAST_SEND_FIRST_SEQNO = 2


cdef class UnicastConnection:
    """The sending side of one UNICAST connection: conn id, next seqno, the unacked messages."""

    def __init__(self, int conn_id, win, double created):
        self.conn_id = conn_id
        self.next_seqno = 1
        self.win = win
        self.created = created


cdef class UnicastReceiver:
    """The receiving side of one UNICAST connection: the sender's conn id and the window of its messages;
    whether the sender is a member of the view, and (for a non-member) when it last sent."""

    def __init__(self, int conn_id, int64_t first_seqno, bint member=True):
        self.conn_id = conn_id
        self.win = AckReceiverWindow(first_seqno)
        self.member = member

    def __repr__(self):
        return f"<UnicastReceiver conn_id={self.conn_id} member={self.member} {self.win!r}>"


cdef class UnicastArrival(Arrival):
    pass


cdef class UnicastCore(OrderedCore):
    """Hooks the protocol provides: ``_new_connection(dest)`` (lock held: a new UnicastConnection in
    ``send_table``), ``_not_started(msg)``, ``_schedule_delayed_acks()`` (lock held: sets ``ack_task``),
    ``_handle_events(events)`` and ``_send_ack(dest, seqno)``."""

    def __cinit__(self):
        self.send_table = {}
        self.recv_table = {}
        self.pending_acks = {}
        self.nonmembers = {}
        self.member_set = frozenset()
        self.ack_threshold = 1
        self.max_nonmember_connections = 64
        self.nonmember_window = 8

    # ---- down ----

    cdef object _down(self, Message msg):
        cdef object dest = msg.dest
        cdef UnicastConnection conn
        cdef int64_t seq
        cdef Message ack = None
        cdef list pending
        if dest is None or msg.flags & NO_RELIABILITY:
            return self._pass(msg)
        if not self.started:
            self._not_started(msg)
            return None
        self.lock.take()
        try:
            conn = self.send_table.get(dest)
            if conn is None:
                conn = self._new_connection(dest)
            seq = conn.next_seqno
            msg.put(self.id, UnicastHeader(UNICAST_DATA, seq, conn.conn_id, seq == 1))
            (<AckSenderWindow?>conn.win).c_add(seq, msg, monotonic_ms())
            conn.next_seqno = seq + 1
            if self.pending_acks and not (msg.flags & OOB):
                pending = self.pending_acks.pop(dest, None)
                if pending is not None:
                    ack = new_message()
                    ack.dest = dest
                    ack.put(self.id, UnicastHeader(UNICAST_ACK, pending[0]))
        finally:
            self.lock.give()
        self.msgs_sent += 1
        if ack is None:
            return self._pass(msg)
        self.acks_piggybacked += 1
        msg._piggyback = ack
        try:
            return self._pass(msg)
        finally:
            msg._piggyback = None          # this message stays in the window: a retransmission carries no old ACK

    # ---- members and connections (the caller holds lock) ----

    def set_members(self, members):
        """A new view: mark each receiver member or not (the caller has dropped the non-members' ones)."""
        self.member_set = frozenset(members)
        self.nonmembers = {}
        for sender, e in self.recv_table.items():
            (<UnicastReceiver>e).member = sender in self.member_set
            if not (<UnicastReceiver>e).member:
                (<UnicastReceiver>e).last_used = monotonic_s()
                self.nonmembers[sender] = e

    def forget(self, sender):
        """Drop sender's receive window and pending ACK (its connection went)."""
        return self._forget(sender)

    cdef object _forget(self, object sender):
        e = self.recv_table.pop(sender, None)
        self.nonmembers.pop(sender, None)
        self.pending_acks.pop(sender, None)
        return e

    def expire_nonmembers(self, double idle_s):
        """Drop the windows of non-members idle for idle_s seconds or more; returns their senders."""
        cdef list gone = []
        cdef double cutoff = monotonic_s() - idle_s
        for sender, e in list(self.nonmembers.items()):     # least recently used first
            if (<UnicastReceiver>e).last_used > cutoff:
                break
            gone.append(sender)
            self._forget(sender)
        return gone

    cdef UnicastReceiver _open(self, object sender, int conn_id, int64_t seq, dict acks):
        """A new connection (a ``first`` message): its window, bounded for a non-member."""
        cdef bint member = sender in self.member_set
        cdef UnicastReceiver e = UnicastReceiver(conn_id, seq, member)
        cdef object old
        if self.nonmembers.pop(sender, None) is None and not member:
            while len(self.nonmembers) >= self.max_nonmember_connections > 0:
                old = next(iter(self.nonmembers))
                self._forget(old)
                acks.pop(old, None)
                self.nonmembers_evicted += 1
        self.recv_table[sender] = e
        if not member:
            e.last_used = monotonic_s()
            self.nonmembers[sender] = e
        acks.pop(sender, None)              # an ACK (it has no conn_id) for the old connection
        self.pending_acks.pop(sender, None) # would acknowledge the new one's seqnos
        return e

    # ---- up ----

    cdef Arrival _add(self, object batch):
        cdef UnicastArrival a = UnicastArrival.__new__(UnicastArrival)
        deliver, a.oob, a.acks, a.events = self._process(<list>(<tuple>batch)[0], <list>(<tuple>batch)[1])
        if self.pending_acks and self.ack_task is None:
            self._schedule_delayed_acks()
        if deliver and self.tap is not None:
            deliver = self.tap.take(deliver)
        if deliver:
            a.fn = self.up_prot.up_batch
            a.args = (deliver,)
        return a

    cdef int _after(self, Arrival a) except -1:
        cdef UnicastArrival u = <UnicastArrival>a
        if u.events is not None:
            self._handle_events(u.events)
        for ack in u.acks:                # before the delivery (JGRP-713: no needless retransmissions)
            self._send_ack((<tuple>ack)[0], (<tuple>ack)[1])
        if self.tap is not None:
            self.tap.drain()
        return 0

    def process(self, list mine, list rest):
        """Handle a batch of messages with UNICAST's header (in arrival order; the caller holds ``lock``, and hands
        ``deliver`` over under it, so that the hand-overs keep the order of the windows).

        Messages that UNICAST does not handle (multicasts, NO_RELIABILITY) are appended to ``rest``. DATA is
        added to the sender's window on its connection (a ``first`` message for a connection we do not know
        opens it; a non-member's seqno ``nonmember_window`` or more ahead of its window is dropped unacked)
        and whatever became deliverable is removed (at most ``max_msg_batch_size`` per message added); ACKs
        release the acknowledged messages of our connection to their sender (the highest of a batch only).

        Returns ``(deliver, oob, acks, events)``: regular messages in per-sender order for the delivery
        thread; OOB messages to pass up now (each once: when it is added); the ACKs to send now, a list of
        ``(sender, highest seqno)`` (see :meth:`_decide_acks`); and ``None``, or a list of ``(what, sender,
        detail)`` for the protocol: ``"no_connection"`` (a message on a connection we do not know: ask for
        its first message), ``"send_first_seqno"`` (the sender asks us to resend our first unacked message),
        ``"bad_seqno"`` (a seqno the window refused; detail: why), ``"bad_type"`` (detail: the header type)."""
        return self._process(mine, rest)

    cdef tuple _process(self, list mine, list rest):
        cdef list deliver = [], oob = [], ready
        cdef dict acks = {}, acked = {}
        cdef list events = None
        cdef Py_ssize_t i, j, n = PyList_GET_SIZE(mine), k
        cdef Py_ssize_t max_batch = self.max_msg_batch_size
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
            hdr = m.header(self.id)
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
                    entry.last_used = monotonic_s()
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
                (<AckSenderWindow?>(<UnicastConnection>c).win).c_ack(<int64_t>seqno)
        return deliver, oob, self._decide_acks(acks), events

    cdef list _decide_acks(self, dict acks):
        """The ACKs of a batch, ``{sender: [highest seqno, new messages, at once?]}`` (at once: a duplicate, our
        ACK may have been lost): which to send now, as ``[(sender, seqno)]``. With ``ack_delay_ms`` 0 (2.12)
        all of them; else those due at once or covering ``ack_threshold`` messages with what ``pending_acks``
        held for that sender, and the rest wait there (merged: one cumulative ACK) for the protocol's timer or
        a message we send to that sender."""
        cdef list now = []
        cdef list a, p
        cdef int64_t seq, count
        cdef dict pending = self.pending_acks
        cdef bint delay = self.ack_delay_ms > 0
        for sender, ack in acks.items():
            a = <list>ack
            seq = <int64_t>a[0]
            if seq <= 0:
                continue
            if not delay:
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
