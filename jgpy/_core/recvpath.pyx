# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-message receive path of pbcast.NAKACK, in C.

NAKACK's Python code calls :meth:`NakackReceive.classify` once per received batch and
:meth:`NakackReceive.process` once per batch of data messages (under its delivery lock); everything that is
per message — reading the header, grouping by sender, adding to the sender's window, removing the
deliverable run, picking out OOB messages — happens here. Retransmission requests, logging and the hand-over
to the delivery thread stay in the protocol.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t

from jgpy._core.headers cimport NakAckHeader
from jgpy._core.message cimport Message
from jgpy._core.tables cimport NakReceiverWindow

cdef int OOB = 1
cdef int NO_RELIABILITY = 16
cdef int OOB_DELIVERED = 1          # Message.transient_flags
cdef int MSG = 1
cdef int XMIT_RSP = 3


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
