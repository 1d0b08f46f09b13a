"""TOTAL: sequencer-based total order of multicasts (seed 003, "A Sequencer-based Total Order Protocol for
JavaGroups"), a jgpy protocol for jgpy-only clusters: 2.12 does not have it, so its protocol id (513) and its
header's magic number (1025) lie outside everything 2.12 uses (docs/ARCHITECTURE.md, "jgpy's own protocols on
the wire: TOTAL").

It sits above pbcast.GMS (``jgpy/conf/total-udp.xml``), so NAKACK and UNICAST below make its messages
reliable and FIFO per sender while the members stay; what the paper leaves open -- a view change, above all
the sequencer's crash -- is what most of this module is about.

**Ordering.** The first member of the view is the sequencer. A member multicasts nothing itself: it keeps
the message (``pending``, until it is delivered back) and sends it to the sequencer (REQUEST, with its own
number ``req_id``); the sequencer gives it the next global sequence number and multicasts it (BCAST, the
original sender named in the header). Every member delivers BCASTs in sequence-number order, holding those
that come early (at most ``max_window`` ahead), and each as a multicast of its original sender. A member that
sees a gap asks for the missing numbers (RESEND, every ``resend_timeout`` ms, at most ``max_resend_size`` a
time) and gets the BCASTs again as unicasts. Members acknowledge what they received without a gap
(CUM_SEQ_ACK); the sequencer multicasts the minimum every ``stable_interval`` ms (STABLE) and everybody
forgets the delivered messages below it. STABLE also says the last number assigned, and is repeated while a
member lags: a member that lost the tail, with nothing after it to show the gap, asks for it (the paper's
suffix problem). A member delivers no sender's message twice (its numbers only grow, in FIFO order), and a
leaving member waits up to ``leave_timeout`` ms for its multicasts to come back delivered.

**Uniformity at the sequencer** (jgpy; the paper has none): the sequencer delivers a number only once
``resilience`` other members acknowledged it, so no crashed sequencer can have delivered what no survivor has.

**View changes.** Each view starts a new *epoch* whose sequencer is the view's first member. On a view, every
member stops delivering and accepting BCASTs of the old epoch and reports to the new sequencer the highest
number it holds without a gap, with its epoch (NEW_VIEW_ACK, repeated until answered). With every member's
report the new sequencer takes the highest, ``T``, among the members of its own lineage (its epoch and the
epochs before it, or one ahead of it), fetches what it lacks up to ``T`` from a member that has it (RESEND),
and multicasts NEW_VIEW: ``T`` and the members that start afresh at ``T + 1`` (joiners, another subgroup's
members after a merge). The others deliver what they hold up to ``T`` and ask the new sequencer for the rest;
numbers from ``T + 1`` on are the new epoch's. Everything a live member held without a gap is kept, so what
any survivor delivered, every survivor delivers, in the same order; what nobody surviving has was never
delivered by a survivor, and its senders send it again (every member re-sends its undelivered REQUESTs to the
new sequencer, which drops the ones it has sequenced: ``req_id`` per sender). A new view during all this
starts it again.

Not covered (the paper's limits, in part): the crash of more than ``resilience`` members at once may leave a
crashed member having delivered what the survivors order differently; a coordinator that is itself new to
the cluster when all older members are gone starts a new sequence; after a merge the members of the subgroups
other than the merged view's coordinator's start afresh (what their subgroup sequenced and they had not
delivered is lost to them, unless its sender is one of them and sends it again; the two subgroups' orders of
what both delivered before the merge may differ).
The view goes up to the application at once, so messages of the old sequence it delivers after the view change
are delivered in the new view (without FLUSH below, the checker reports that as a same-view warning). The state
transfer protocols know nothing of TOTAL's numbers.

Hostile input: TOTAL messages from non-members are counted and dropped, and so is one that did not come through
NAKACK (a multicast) or UNICAST (a unicast) when the stack has them: every real TOTAL message does, and one
without their header, which Java's protocols pass up untouched, could claim any sender and any number (a
spoofed sequencer's BCAST at the next number, a member's REQUEST numbered 2^62 that would make its real ones
look like duplicates); a BCAST counts only from the current sequencer and within ``max_window``; RESEND answers
are bounded; reports of views not yet installed are kept for at most ``MAX_EARLY_REPORTS`` senders.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from jgpy._core.headers import TotalHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol

H = TotalHeader
BCAST, REQUEST, NEW_VIEW, NEW_VIEW_ACK = H.BCAST, H.REQUEST, H.NEW_VIEW, H.NEW_VIEW_ACK
CUM_SEQ_ACK, RESEND, STABLE = H.CUM_SEQ_ACK, H.RESEND, H.STABLE

#: reports (NEW_VIEW_ACK) for views the coordinator has not installed yet, kept for this many senders at most
MAX_EARLY_REPORTS = 64
#: closed epochs of our lineage remembered (a report from a member this many epochs behind starts afresh)
MAX_HISTORY = 16
_INF = 1 << 62


class _Recon:
    """The new sequencer's collection of reports for one view."""

    __slots__ = ("vid", "members", "reports", "target", "holder", "starts", "asked")

    def __init__(self, vid, members: list) -> None:
        self.vid = vid
        self.members = members
        self.reports: dict = {}            # member -> (epoch, hr, prev_epoch, prev_last)
        self.target = -1                   # T, once every member reported
        self.holder = None                 # a member that has everything up to T
        self.starts: list = []             # (member, first seqno) of the members that start afresh


class TOTAL(Protocol):
    NAME = "TOTAL"

    resend_timeout = Property(to_int, 100, "jgpy: ms between the checks for missing sequence numbers (a RESEND "
                              "to the sequencer for a gap seen twice in a row, the paper's retransmission "
                              "thread), and between repeated view-change reports")
    max_resend_size = Property(to_int, 1000, "jgpy: most sequence numbers asked for, or answered, in one RESEND")
    max_window = Property(to_int, 100000, "jgpy: how far beyond the next expected sequence number a BCAST is "
                          "kept; farther ones are dropped and counted")
    stable_interval = Property(to_int, 500, "jgpy: ms between the sequencer's STABLE multicasts (the minimum "
                               "acknowledged by every member: delivered messages below it are forgotten)")
    leave_timeout = Property(to_int, 5000, "jgpy: ms a leaving member waits for its multicasts to be sequenced and "
                             "delivered back before it leaves (they would be lost with it)")
    resilience = Property(to_int, 1, "jgpy: the sequencer delivers a sequence number only once this many other "
                          "members acknowledged receiving it (0: at once, as the paper), so a crashed sequencer "
                          "cannot have delivered what no survivor has")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()       # sends leave in the order they were decided in (_outq)
        self._outq: list = []
        self._flusher: int | None = None
        self._deliver_lock = threading.Lock()
        self._to_deliver: list = []              # ordered messages waiting for the delivering thread
        self._delivering = False
        self._reset()
        self.counters = dict.fromkeys((
            "requests_sent", "requests_received", "bcasts_sent", "delivered", "duplicates", "dropped_stale",
            "dropped_window", "dropped_non_member", "dropped_bad_type", "duplicate_requests", "resends_sent",
            "resends_received", "xmits_sent", "xmits_received", "acks_sent", "stable_sent", "views",
            "new_views_sent", "new_views_received", "reports_sent", "restarted_fresh", "early_reports_dropped",
            "duplicates_skipped", "dropped_unreliable"), 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a TOTAL message", self._rl)
        self._lower_ids: tuple = ()
        self._reliable_ids = (0, 0)              # NAKACK's and UNICAST's ids below us (0: not in the stack)
        self._task = None

    def _reset(self) -> None:
        """The state of a member that has no view yet (at creation, and again at each connect: a new address)."""
        self.members: list = []
        self.view_vid = None                     # the ViewId of the installed view
        self.epoch = None                        # the ViewId of the epoch we follow (None: none yet)
        self.prev_epoch = None
        self.prev_last = 0
        self.sequencer = None
        self.frozen = True                       # until the NEW_VIEW of the installed view
        self.next_deliver = 1
        self.contig = 0                          # highest seqno held or delivered without a gap
        self.received: dict = {}                 # seqno -> (message to deliver, req_id), not yet delivered
        self.kept: dict = {}                     # seqno -> (message, req_id), delivered, above stable
        self.log_low = 1
        self.stable = 0
        self.agreed = 0                          # numbers up to here are agreed (the last NEW_VIEW's T)
        self.last_req: dict = {}                 # original sender -> highest req_id in our gap-free prefix
        self.delivered_req: dict = {}            # original sender -> highest req_id delivered (kept when we
                                                 # start afresh: a sender's numbers only grow, FIFO)
        self.history: OrderedDict = OrderedDict()   # closed epochs of our lineage -> their last seqno
        self.bases: dict = {}                    # members that started afresh -> their first seqno
        # sequencer
        self.next_seqno = 1
        self.acks: dict = {}
        self.last_stable_sent = 0
        self._stable_due = 0.0
        # own multicasts
        self.my_req = 0
        self.pending: OrderedDict = OrderedDict()   # req_id -> message, until delivered back
        # retransmission
        self.catchup = 0                         # deliver up to here before the epoch's own numbers
        self.tail = 0                            # the highest seqno the sequencer said it assigned
        self.xmit_from = None                    # whom we asked, with which tag, up to where
        self.xmit_tag = 0
        self.xmit_hi = 0
        self._last_gap = None
        self.last_acked = 0
        # view change
        self.recon: _Recon | None = None
        self.early: OrderedDict = OrderedDict()  # sender -> (view id, report) for views not installed yet
        self.last_new_view: Message | None = None
        self._report: Message | None = None

    # ---- life cycle ----

    def init(self) -> None:
        if self.resend_timeout <= 0 or self.max_resend_size <= 0 or self.max_window <= 0:
            raise ValueError("TOTAL: resend_timeout, max_resend_size and max_window must be positive")

    def start(self) -> None:
        with self._lock:
            self._reset()
        prots = list(getattr(self.stack, "protocols", ()))
        below = prots[:prots.index(self)] if self in prots else []
        self._lower_ids = tuple(p.id for p in below if p.id)
        ids = {p.NAME: p.id for p in below}
        self._reliable_ids = (ids.get("pbcast.NAKACK", 0), ids.get("UNICAST", 0) or ids.get("UNICAST2", 0))
        self._task = self.timer.schedule_with_fixed_delay(self.resend_timeout, self.resend_timeout, self._tick,
                                                          "TOTAL retransmission")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.DISCONNECT:
            self._await_pending()
        return self.down_prot.down(evt)

    def _await_pending(self) -> None:
        """A leaving member waits (at most ``leave_timeout``) until its multicasts are delivered back: once it is
        gone, the sequencer no longer takes its requests."""
        deadline = time.monotonic() + self.leave_timeout / 1000
        while self.pending and self.sequencer is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.pending:
            self._rl.warning("leave-pending", "%s: leaving with %d multicasts not delivered", self.local_addr,
                             len(self.pending))

    def up_needs(self) -> int:
        return UP_HEADER

    # ---- down: multicasts go to the sequencer ----

    def down_msg(self, msg) -> Any:
        if msg.dest is not None or msg.is_flag_set(Message.NO_TOTAL_ORDER):
            return self.down_prot.down_msg(msg)
        with self._lock:
            self.my_req += 1
            req = self.my_req
            self.pending[req] = msg
            if not self.frozen and self.sequencer is not None:
                self._submit(req, msg, self._outq)
        self._flush()
        return None

    def _submit(self, req: int, msg, out: list) -> None:
        """Our multicast ``req`` to the sequencer (or sequenced here); under the lock."""
        me = self.local_addr
        if self.sequencer == me:
            if req > self.last_req.get(me, 0):             # else: sequenced already (before a view change)
                self._sequence(msg, me, req, out)
            return
        r = msg.copy()
        r.dest = self.sequencer
        r.transient_flags = 0
        r.clear_flag(Message.OOB)
        r.put_header(self.id, H(REQUEST, self.epoch.id, req_id=req))
        self.counters["requests_sent"] += 1
        out.append(r)

    def _sequence(self, msg, sender, req: int, out: list) -> None:
        """The sequencer: the next number for ``msg`` and its multicast; under the lock."""
        s = self.next_seqno
        self.next_seqno += 1
        b = msg.copy()
        for pid in self._lower_ids:
            b.remove_header(pid)
        b.dest = None
        b.src = None
        b.transient_flags = 0
        b.clear_flag(Message.OOB)
        b.put_header(self.id, H(BCAST, self.epoch.id, s, req_id=req, sender=sender))
        self._hold(s, self._entry(b, sender), req)
        self.counters["bcasts_sent"] += 1
        out.append(b)

    def _entry(self, msg, sender):
        """The message as it is delivered: a multicast of its original sender, without our or lower headers."""
        m = msg.copy()
        for pid in self._lower_ids:
            m.remove_header(pid)
        m.remove_header(self.id)
        m.src = sender
        m.dest = None
        m.transient_flags = 0
        return m

    def _flush(self) -> None:
        """Send what was decided, in the order it was decided in (one thread at a time; a send that comes back
        up on the same thread, a synchronous loopback, leaves what it adds to the sending thread's loop)."""
        me = threading.get_ident()
        if self._flusher == me:
            return
        with self._send_lock:
            self._flusher = me
            try:
                while True:
                    with self._lock:
                        batch, self._outq = self._outq, []
                    if not batch:
                        return
                    for m in batch:
                        try:
                            self.down_prot.down_msg(m)
                        except Exception:  # noqa: BLE001 - one failed send must not stop the others
                            self._rl.exception("send-failed", "%s: sending a TOTAL message failed", self.local_addr)
            finally:
                self._flusher = None

    # ---- up ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            for msg in mine:
                try:
                    with self._lock:
                        self._handle(msg, self._outq)
                except Exception:  # noqa: BLE001 - counted and logged; the batch goes on
                    self._guard.failure(msg)
            with self._lock:
                self._after_batch(self._outq)
            self._flush()
        if rest:
            self.up_prot.up_batch(rest)
        if mine:
            self._drain()

    def _handle(self, msg, out: list) -> None:
        hdr = msg.get_header(self.id)
        t = hdr.type
        src = msg.src
        rel = self._reliable_ids[0 if msg.dest is None else 1]
        if rel and not msg.has_header(rel):
            self.counters["dropped_unreliable"] += 1
            self._rl.warning("unreliable", "%s: dropped a TOTAL message from %s that did not come through %s",
                             self.local_addr, src, "NAKACK" if msg.dest is None else "UNICAST(2)")
            return
        if t == NEW_VIEW_ACK:                    # a joiner's report may come before we have its view
            self._on_report(src, hdr, out)
            return
        if src not in self.members:
            self.counters["dropped_non_member"] += 1
            self._rl.warning("non-member", "%s: dropped a TOTAL message from %s: not a member", self.local_addr,
                             src)
            return
        if t == BCAST:
            self._on_bcast(msg, hdr)
        elif t == REQUEST:
            self._on_request(msg, hdr, out)
        elif t == CUM_SEQ_ACK:
            self._on_ack(src, hdr)
        elif t == RESEND:
            self._on_resend(src, hdr, out)
        elif t == STABLE:
            self._on_stable(src, hdr)
        elif t == NEW_VIEW:
            self._on_new_view(src, hdr, out)
        else:
            self.counters["dropped_bad_type"] += 1

    def _on_bcast(self, msg, hdr) -> None:
        s = hdr.seqno
        if msg.dest is None:                     # the sequencer's multicast
            if self.frozen or self.sequencer != msg.src or self.epoch is None or hdr.view_id != self.epoch.id:
                if self.sequencer == self.local_addr and msg.src == self.local_addr:
                    return                       # our own, held since we sequenced it
                self.counters["dropped_stale"] += 1
                return
        else:                                    # a retransmission we asked for
            if msg.src != self.xmit_from or hdr.view_id != self.xmit_tag or s > self.xmit_hi:
                self.counters["dropped_stale"] += 1
                return
            self.counters["xmits_received"] += 1
        if s < self.next_deliver or s in self.received:
            if msg.src != self.local_addr:
                self.counters["duplicates"] += 1
            return
        if s >= self.next_deliver + self.max_window:
            self.counters["dropped_window"] += 1
            self._rl.warning("window", "%s: dropped BCAST %d from %s: beyond the window (next %d)",
                             self.local_addr, s, msg.src, self.next_deliver)
            return
        self._hold(s, self._entry(msg, hdr.sender), hdr.req_id)

    def _hold(self, s: int, m, req: int) -> None:
        self.received[s] = (m, req)
        while self.contig + 1 in self.received:
            self.contig += 1
            e = self.received[self.contig]
            snd = e[0].src
            if e[1] > self.last_req.get(snd, 0):
                self.last_req[snd] = e[1]

    def _on_request(self, msg, hdr, out: list) -> None:
        src = msg.src
        self.counters["requests_received"] += 1
        if self.frozen or self.sequencer != self.local_addr or hdr.view_id != self.epoch.id:
            self.counters["dropped_stale"] += 1            # the member sends it again after the NEW_VIEW
            return
        if hdr.req_id <= self.last_req.get(src, 0):
            self.counters["duplicate_requests"] += 1
            return
        self.last_req[src] = hdr.req_id
        self._sequence(msg, src, hdr.req_id, out)

    def _on_ack(self, src, hdr) -> None:
        if self.frozen or self.sequencer != self.local_addr or hdr.view_id != self.epoch.id:
            return
        s = min(hdr.seqno, self.next_seqno - 1)
        if s > self.acks.get(src, 0):
            self.acks[src] = s

    def _on_stable(self, src, hdr) -> None:
        if self.frozen or src != self.sequencer or hdr.view_id != self.epoch.id:
            return
        if hdr.high > self.tail:
            self.tail = hdr.high                 # what the sequencer assigned: a lost tail shows as a gap
        s = min(hdr.seqno, self.next_deliver - 1)
        if s > self.stable:
            self.stable = s
            while self.log_low <= s:
                self.kept.pop(self.log_low, None)
                self.log_low += 1

    def _on_resend(self, src, hdr, out: list) -> None:
        """Answer with what we have of ``seqno..high``: delivered, or held without a gap (agreed either way)."""
        self.counters["resends_received"] += 1
        lo = max(hdr.seqno, 1)
        hi = min(hdr.high, lo + self.max_resend_size - 1, self.contig)
        for s in range(max(lo, self.log_low), hi + 1):
            e = self.kept.get(s) or self.received.get(s)
            if e is None:
                continue
            r = e[0].copy()
            r.dest = src
            r.src = None
            r.transient_flags = 0
            r.put_header(self.id, H(BCAST, hdr.view_id, s, req_id=e[1], sender=e[0].src))
            out.append(r)
            self.counters["xmits_sent"] += 1

    # ---- delivery ----

    def _after_batch(self, out: list) -> None:
        """Under the lock: the view change goes on, deliverables are collected, an ACK to the sequencer if we
        got further."""
        if self.recon is not None:
            self._recon_step(out, ask=False)
        elif not self.frozen and self.catchup > self.contig >= self.xmit_hi and self.xmit_from is not None:
            self._ask(self.sequencer, self.epoch.id, self.catchup, out)     # a chunk is in: the next one
        self._collect()
        self._maybe_ack(out)

    def _maybe_ack(self, out: list) -> None:
        if (not self.frozen and self.sequencer is not None and self.sequencer != self.local_addr
                and self.contig > self.last_acked):
            self.last_acked = self.contig
            a = Message(self.sequencer)
            a.put_header(self.id, H(CUM_SEQ_ACK, self.epoch.id, self.contig))
            self.counters["acks_sent"] += 1
            out.append(a)

    def _bound(self) -> int:
        if self.sequencer != self.local_addr or self.resilience <= 0:
            return self.contig
        others = [self.acks.get(m, 0) for m in self.members if m != self.local_addr]
        if not others:
            return self.contig
        others.sort(reverse=True)
        k = min(self.resilience, len(others))
        return min(self.contig, max(others[k - 1], self.agreed))

    def _collect(self) -> None:
        """Move what may be delivered to the delivery list; under the lock."""
        if self.frozen:
            return
        bound = self._bound()
        if self.next_deliver > bound:
            return
        me = self.local_addr
        run = []
        done = self.delivered_req
        while self.next_deliver <= bound:
            s = self.next_deliver
            e = self.received.pop(s)
            self.kept[s] = e
            self.next_deliver += 1
            snd, req = e[0].src, e[1]
            if snd == me:
                self.pending.pop(req, None)
            if req <= done.get(snd, 0):          # delivered in a sequence we left (a merge): not again
                self.counters["duplicates_skipped"] += 1
                continue
            done[snd] = req
            run.append(e[0])
        self.counters["delivered"] += len(run)
        with self._deliver_lock:                 # in order: we hold the lock that orders the numbers
            self._to_deliver += run

    def _drain(self) -> None:
        """Deliver the delivery list, one thread at a time, in order, on the stack's delivery thread: a TOTAL
        message can come up on a receive thread too (one without NAKACK's or UNICAST's header, which they pass
        up at once), and what the top hands to the application from there is queued behind the delivery
        thread's current task, which would deliver later numbers first."""
        ex = self.stack.delivery if self.stack is not None else None
        if ex is not None and not ex.in_thread():
            with self._deliver_lock:
                if not self._to_deliver:
                    return
            ex.submit(self._drain)
            return
        with self._deliver_lock:
            if self._delivering or not self._to_deliver:
                return
            self._delivering = True
        try:
            while True:
                with self._deliver_lock:
                    batch = self._to_deliver
                    if not batch:
                        self._delivering = False
                        return
                    self._to_deliver = []
                self.up_prot.up_batch(batch)
        except BaseException:
            with self._deliver_lock:
                self._delivering = False
            raise

    # ---- views ----

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            with self._lock:
                self._on_view(evt.arg, self._outq)
            self._flush()
        return self.up_prot.up(evt)

    def _on_view(self, view, out: list) -> None:
        me = self.local_addr
        self.counters["views"] += 1
        self.members = list(view.members or ())
        self.view_vid = view.vid
        self.frozen = True
        self.catchup = 0
        self.xmit_from = None
        self._last_gap = None
        # keep only what we hold without a gap: the rest was never agreed and is asked for again if needed
        for s in [s for s in self.received if s > self.contig]:
            del self.received[s]
        mset = set(self.members)
        for table in (self.acks, self.bases, self.last_req, self.delivered_req):
            for a in [a for a in table if a not in mset]:
                del table[a]
        coord = self.members[0]
        rep = (self.epoch, self.contig, self.prev_epoch, self.prev_last)
        if coord == me:
            self.recon = _Recon(view.vid, list(self.members))
            self.recon.reports[me] = rep
            for a in list(self.early):
                vid_id, r = self.early[a]
                if vid_id == view.vid.id and a in mset:
                    self.recon.reports[a] = r
            self.early.clear()
            self._try_complete(out)
            self._report = None
        else:
            self.recon = None
            self._report = Message(coord)
            self._report.put_header(self.id, H(NEW_VIEW_ACK, view.vid.id, self.contig, high=self.prev_last,
                                               epoch=self.epoch, prev_epoch=self.prev_epoch))
            self.counters["reports_sent"] += 1
            out.append(self._report.copy())

    def _on_report(self, src, hdr, out: list) -> None:
        rep = (hdr.epoch, hdr.seqno, hdr.prev_epoch, hdr.high)
        rc = self.recon
        if rc is not None and hdr.view_id == rc.vid.id and src in rc.members:
            if rc.target < 0:
                rc.reports[src] = rep
                self._try_complete(out)
            return
        if (self.view_vid is not None and hdr.view_id == self.view_vid.id and not self.frozen
                and self.sequencer == self.local_addr and src in self.members and self.last_new_view is not None):
            r = self.last_new_view.copy()             # it missed our NEW_VIEW: again, to it alone
            r.dest = src
            out.append(r)
            return
        if self.view_vid is None or hdr.view_id > self.view_vid.id:
            self.early[src] = (hdr.view_id, rep)          # for a view we have not installed yet
            self.early.move_to_end(src)
            while len(self.early) > MAX_EARLY_REPORTS:
                self.early.popitem(last=False)
                self.counters["early_reports_dropped"] += 1
            return
        self.counters["dropped_stale"] += 1

    def _lineage(self) -> dict:
        line = dict(self.history)
        if self.epoch is not None:
            line[self.epoch] = _INF
        return line

    def _try_complete(self, out: list) -> None:
        """The new sequencer, every report in: ``T``, the members that start afresh, our own catch-up."""
        rc = self.recon
        if rc is None or rc.target >= 0 or len(rc.reports) < len(rc.members):
            return
        me = self.local_addr
        # a member one epoch ahead of us (we missed that epoch's NEW_VIEW): its epoch joins our lineage
        for a, (e, hr, pe, pl) in rc.reports.items():
            if e is not None and e != self.epoch and pe is not None and pe == self.epoch and e not in self.history:
                self.history[self.epoch] = pl
                self.epoch = e
        line = self._lineage()
        target = self.contig
        holder = me
        fresh: list = []
        for a in rc.members:
            if a == me:
                continue
            e, hr, pe, pl = rc.reports[a]
            if e is not None and e in line and hr <= line[e]:
                if hr > target:
                    target, holder = hr, a
            elif e is None and a in self.bases:
                rc.starts.append((a, self.bases[a]))
            else:
                fresh.append(a)
        rc.target, rc.holder = target, holder
        rc.starts += [(a, target + 1) for a in fresh]
        self._recon_step(out)

    def _recon_step(self, out: list, ask: bool = True) -> None:
        """The new sequencer: NEW_VIEW once we hold everything up to T, else (``ask``) ask the holder for it."""
        rc = self.recon
        if rc is None or rc.target < 0:
            return
        if self.contig >= rc.target:
            self._send_new_view(out)
        elif ask or self.contig >= self.xmit_hi:             # (a chunk is in: the next one at once)
            self._ask(rc.holder, rc.vid.id, rc.target, out)

    def _send_new_view(self, out: list) -> None:
        rc = self.recon
        self.recon = None
        nv = Message(None)
        nv.put_header(self.id, H(NEW_VIEW, rc.vid.id, rc.target, epoch=self.epoch, starts=tuple(rc.starts)))
        self.last_new_view = nv.copy()
        self.counters["new_views_sent"] += 1
        out.append(nv)
        self._adopt(rc.vid, rc.target, self.epoch, rc.starts, out)

    def _on_new_view(self, src, hdr, out: list) -> None:
        vid = self.view_vid
        if not self.frozen or vid is None or hdr.view_id != vid.id or src != self.members[0]:
            if src != self.local_addr:
                self.counters["dropped_stale"] += 1
            return
        self.counters["new_views_received"] += 1
        self._adopt(vid, hdr.seqno, hdr.epoch, list(hdr.starts or ()), out)

    def _adopt(self, vid, target: int, old_epoch, starts: list, out: list) -> None:
        """Start the epoch of view ``vid`` after ``target``: as the NEW_VIEW says (the sequencer: as it sent it)."""
        me = self.local_addr
        mine = next((s for a, s in starts if a == me), None)
        if mine is not None:                               # we start afresh: nothing of before counts
            self.received.clear()
            self.kept.clear()
            self.next_deliver = self.log_low = mine
            self.contig = self.stable = mine - 1
            self.last_req.clear()
            self.history.clear()
            self.counters["restarted_fresh"] += 1
        if old_epoch is not None:
            self.history[old_epoch] = target
            self.history.move_to_end(old_epoch)
            while len(self.history) > MAX_HISTORY:
                self.history.popitem(last=False)
        for a, s in starts:
            self.bases[a] = s
        self.prev_epoch, self.prev_last = old_epoch, target
        self.epoch = vid
        self.sequencer = self.members[0]
        self.frozen = False
        self._report = None
        self.agreed = target
        self.catchup = self.tail = target
        self.acks = {}
        self.last_acked = 0
        self.xmit_from = None
        if self.sequencer == me:
            self.next_seqno = target + 1
            self.last_stable_sent = 0
        elif self.contig < target:
            self._ask(self.sequencer, vid.id, target, out)
        self._collect()
        for req, msg in list(self.pending.items()):        # undelivered: to the sequencer again
            self._submit(req, msg, out)

    # ---- retransmission ----

    def _ask(self, whom, tag: int, hi: int, out: list) -> None:
        lo = self.contig + 1
        hi = min(hi, lo + self.max_resend_size - 1)
        if hi < lo:
            return
        same = whom == self.xmit_from and tag == self.xmit_tag     # answers to an earlier request still count
        self.xmit_from, self.xmit_tag, self.xmit_hi = whom, tag, max(hi, self.xmit_hi) if same else hi
        if whom == self.local_addr:
            return
        r = Message(whom)
        r.put_header(self.id, H(RESEND, tag, lo, high=hi))
        self.counters["resends_sent"] += 1
        out.append(r)

    def _tick(self) -> None:
        """Timer: retransmission requests, repeated reports, the sequencer's STABLE."""
        with self._lock:
            self._tick_locked(self._outq)
        self._flush()

    def _tick_locked(self, out: list) -> None:
        if self.frozen:
            if self._report is not None:                   # not answered yet: report again
                out.append(self._report.copy())
            elif self.recon is not None and self.recon.target >= 0:
                self._recon_step(out)
            return
        if self.sequencer == self.local_addr:
            self._send_stable(out)
            return
        if self.catchup > self.contig:
            self._ask(self.sequencer, self.epoch.id, self.catchup, out)
            return
        # held beyond a gap, or short of what the sequencer said it assigned (seen twice in a row): ask
        want = max(max(self.received) - 1 if self.received else 0, self.tail)
        gap = (self.contig, want)
        if want > self.contig and gap == self._last_gap:
            self._ask(self.sequencer, self.epoch.id, want, out)
        self._last_gap = gap
        self._maybe_ack(out)

    def _send_stable(self, out: list) -> None:
        now = time.monotonic()
        if now < self._stable_due:
            return
        self._stable_due = now + self.stable_interval / 1000
        lows = [self.next_deliver - 1] + [self.acks.get(m, 0) for m in self.members if m != self.local_addr]
        s = min(lows)
        high = self.next_seqno - 1
        if s > self.last_stable_sent or s < high:          # it advanced, or somebody lacks the tail
            self.last_stable_sent = max(s, self.last_stable_sent)
            m = Message(None)
            m.put_header(self.id, H(STABLE, self.epoch.id, s, high=high))
            self.counters["stable_sent"] += 1
            out.append(m)

    # ---- diagnostics ----

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counters, "pending": len(self.pending), "held": len(self.received), "kept": len(self.kept),
                    "next_deliver": self.next_deliver, "seqno": self.next_seqno - 1, "stable": self.stable,
                    "frozen": self.frozen, "sequencer": str(self.sequencer) if self.sequencer else None,
                    "early_reports": len(self.early), "malformed": self._guard.failed}
