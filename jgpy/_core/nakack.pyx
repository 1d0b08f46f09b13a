# cython: language_level=3, boundscheck=False, wraparound=False
"""pbcast.NAKACK's core: the per-message work of both directions in C (``NAKACK`` is a subclass).

Down: our multicasts get the next seqno and the header and stay in our own window for retransmission. Up: a
batch is classified (MSG and XMIT_RSP per sender, control messages for the protocol, unreliable ones), the
senders' windows take the data and release their deliverable runs, OOB messages go up at once (each once), and
the runs are handed to the delivery executor in order (:class:`jgpy._core.reliable.OrderedCore`). The protocol's
Python code answers retransmission requests, asks for missing messages, logs and handles digests.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t

from jgpy._core.batch cimport split_by_header
from jgpy._core.clock cimport monotonic_ms
from jgpy._core.headers cimport NakAckHeader
from jgpy._core.message cimport Message
from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.sync cimport Lock
from jgpy._core.tables cimport NakReceiverWindow

cdef int OOB = 1
cdef int NO_RELIABILITY = 16
cdef int OOB_DELIVERED = 1          # Message.transient_flags
cdef int KEPT_FOR_XMIT = 2          # Message.transient_flags: consumed by the transport (no loopback copy)
cdef int MSG = 1
cdef int XMIT_RSP = 3


cdef class NakackArrival(Arrival):
    pass


cdef class NakackCore(OrderedCore):
    """Hooks the protocol provides: ``_cannot_send(msg, reason)``, ``_handle_control([(msg, header)])``,
    ``_null_senders(count)`` and ``_report_dropped(no_window, bad)`` (see :meth:`process`)."""

    def __cinit__(self):
        self.windows = {}
        self.processed = {}
        self.seqno_lock = Lock()

    # ---- down ----

    cdef object _down(self, Message msg):
        cdef int64_t seq
        cdef NakReceiverWindow win
        cdef NakAckHeader hdr
        if msg.dest is not None or msg.flags & NO_RELIABILITY:
            msg.transient_flags &= ~KEPT_FOR_XMIT
            return self._pass(msg)
        if not self.running:
            self._cannot_send(msg, "not-running")
            return None
        me = self.own_addr
        w = self.windows.get(me)
        if w is None:
            self._cannot_send(msg, "no-own-window")
            return None
        win = <NakReceiverWindow?>w
        if msg.src is None:
            msg.src = me
        hdr = NakAckHeader.__new__(NakAckHeader)
        hdr.type = MSG
        self.seqno_lock.take()
        try:
            seq = self.seqno + 1
            hdr.seqno = seq
            msg.put(self.id, hdr)
            win.c_add(seq, msg, monotonic_ms())
            self.seqno = seq
        finally:
            self.seqno_lock.give()
        msg.transient_flags |= KEPT_FOR_XMIT
        self.msgs_sent += 1
        return self._pass(msg)

    # ---- up ----

    def up_batch(self, list msgs):
        mine, rest = split_by_header(msgs, self.id)
        if mine:
            self._receive(mine)
        if rest:
            self.up_prot.up_batch(rest)

    cdef int _receive(self, list msgs) except -1:
        data, control, unreliable = self._classify(msgs)
        for m in <list>unreliable:
            self.up_prot.up_batch([m])
        if control:
            self._handle_control(control)
        if self.dropped_null_sender != self._null_senders_seen:
            self._null_senders_seen = self.dropped_null_sender
            self._null_senders(self._null_senders_seen)
        if data:
            self.receive_ordered(data)
        return 0

    cdef Arrival _add(self, object data):
        cdef NakackArrival a = NakackArrival.__new__(NakackArrival)
        deliver, a.marks, a.oob, a.no_window, a.bad = self._process(<dict>data, monotonic_ms())
        if deliver or a.marks:
            a.fn = self._deliver
            a.args = (deliver, a.marks)
        return a

    cdef int _after(self, Arrival a) except -1:
        cdef NakackArrival n = <NakackArrival>a
        if n.no_window or n.bad:
            self._report_dropped(n.no_window, n.bad)
        return 0

    def _deliver(self, list msgs, list marks):
        """On the delivery thread: pass a handed-over batch up, then record how far it got (``processed``)."""
        try:
            if msgs:
                self.up_prot.up_batch(msgs)
        finally:
            for mark in marks:
                self.processed[(<tuple>mark)[0]] = ((<tuple>mark)[1], (<tuple>mark)[2])

    def classify(self, list msgs):
        """Sort a batch of NAKACK messages: ``(data, control, unreliable)``.

        ``data``: ``{sender: ([seqno], [msg])}`` of MSG (and XMIT_RSP, turned back into MSG as Java does);
        ``control``: ``[(msg, header)]`` of the others (XMIT_REQ, unknown types) for the protocol;
        ``unreliable``: NO_RELIABILITY messages, to pass up as they are. Nothing but unreliable messages
        counts before we are a server (``is_server``: joined)."""
        return self._classify(msgs)

    cdef tuple _classify(self, list msgs):
        cdef dict data = {}
        cdef list control = [], unreliable = []
        cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
        cdef Message m
        cdef NakAckHeader h
        cdef tuple entry
        cdef bint is_server = self.is_server
        for i in range(n):
            m = <Message>PyList_GET_ITEM(msgs, i)
            if m.flags & NO_RELIABILITY:
                unreliable.append(m)
                continue
            hdr = m.header(self.id)
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

    def process(self, dict data, double now):
        """Add classified data to the windows and take out what is deliverable (the caller holds ``lock``).

        Returns ``(deliver, marks, oob, no_window, bad)``: regular messages in per-sender order for the
        delivery thread; ``(sender, window, highest_delivered)`` per sender that delivered something; OOB
        messages to pass up right away (each once); ``(sender, count)`` of senders without a window;
        ``(sender, error)`` of seqnos the window refused (absurdly far ahead). Other members' messages are
        dropped from their windows once delivered with ``discard_delivered_msgs``; at most
        ``max_msg_batch_size`` are removed at a time (everything deliverable is)."""
        return self._process(data, now)

    cdef tuple _process(self, dict data, double now):
        cdef list deliver = [], marks = [], oob = [], no_window = [], bad = []
        cdef list seqnos, msgs, ready
        cdef Py_ssize_t i, n, j, k
        cdef Py_ssize_t max_batch = self.max_msg_batch_size
        cdef bint loopback
        cdef NakReceiverWindow win
        cdef Message m
        cdef int64_t seq
        me = self.own_addr
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
                ready = win.c_remove_many(self.discard_delivered_msgs and not loopback, max_batch)
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
