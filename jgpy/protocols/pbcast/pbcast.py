"""pbcast.PBCAST: gossip-based reliable FIFO multicast (seed 000's PBCAST, JavaGroups 2.2's
``protocols.pbcast.PBCAST``), a jgpy protocol for jgpy-only clusters: 2.12 no longer has it, so its protocol id
(515) and its header's magic number (1026) lie outside everything 2.12 uses (docs/ARCHITECTURE.md, "jgpy's own
protocols on the wire"). It takes the place of pbcast.NAKACK and pbcast.STABLE (``jgpy/conf/pbcast-udp.xml``)
and answers GMS's and the state transfer's digest events as NAKACK does.

**Multicasts.** Each gets the sender's next seqno (MCAST_MSG) and goes out unreliably; receivers keep a window
per member (the Cython ``NakReceiverWindow``) and deliver each sender's messages in seqno order, keeping them
for retransmission until they are garbage-collected. Nothing asks for a gap when it is seen: gossip does.

**Gossip.** Every ``gossip_interval`` ms (``dynamic``: drawn anew before each gossip from
``random(desired_avg_gossip * 2 * members)``, so a member receives one every ``desired_avg_gossip`` ms on
average whatever the group's size) a member sends its digest (per sender: highest delivered = highest received
without a gap) as a gossip identified by (originator, round): with ``mcast_gossip`` multicast to everybody, else
to a random ``subset`` of the members with the list of those that have not seen it yet. A receiver drops a
gossip it has seen (a cache of the last ``max_gossip_cache``), asks the originator for every message of the
digest it lacks (XMIT_REQ: per sender a first and last seqno, at most ``max_xmit_req_size``; the answer is one
XMIT_RSP per message), removes itself from the not-seen list and forwards the gossip to a random ``subset`` of
the remaining ones. Gossips and retransmission requests wait in a queue of at most ``max_queue`` entries that
the timer works off (more are dropped and counted: no gossip storm fills a member's memory or the network);
multicasts and retransmitted messages are handled at once.

**Garbage collection** (deviation from seed 000, whose rule loses messages under loss): the seed collects
below the gossip's digest minus ``gc_lag`` once a gossip has been seen by everybody, but having seen a gossip
is not having received the messages it asked for; jgpy remembers the newest digest each member gossiped and
collects, per sender, below the lowest highest-delivered of all members (its own included) minus ``gc_lag``:
only what every member has delivered. So any member can retransmit what another lacks, and a member that has
not gossiped yet holds collection up.

The view: windows of members that left are dropped (their undelivered messages with them, as NAKACK's), and
members added by a view get windows through the digest GMS sets. OOB multicasts are delivered in order, as
regular ones (a permitted order; 2.2's PBCAST did the same).

Hostile input: MCAST_MSGs of senders without a window (strangers) are dropped; gossips and XMIT_REQs whose
sender or originator is not a member are counted and dropped; a digest counts only for members' windows and a
not-seen list only for members (whatever the lists claim, forwarding goes to members, and to a ``subset``); an
XMIT_RSP counts only from a member and for a seqno we asked for (so nobody can push messages ahead of what
was gossiped); a retransmission request is answered with at most ``max_xmit_req_size`` messages per sender and
``max_xmit_rsp_bytes``. As everywhere without AUTH/ENCRYPT, a spoofer that claims to be a member is that
member; its forged digest cannot make us collect what another member still lacks (the lowest entry counts).
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict, deque
from typing import Any

from jgpy._core.headers import PbcastHeader
from jgpy._core.message import Message
from jgpy._core.tables import NakReceiverWindow
from jgpy._core.types import Digest
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, ignored, to_bool, to_float, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms

H = PbcastHeader
MCAST_MSG, GOSSIP, XMIT_REQ, XMIT_RSP = H.MCAST_MSG, H.GOSSIP, H.XMIT_REQ, H.XMIT_RSP
OOB = Message.OOB
NO_RELIABILITY = Message.NO_RELIABILITY


def gossip_interval(num_members: int, desired_avg_gossip: float, rnd: random.Random | Any = random) -> float:
    """Seed 000's dynamic interval: ``Random(desired_avg_gossip * 2 * num_members)`` ms, so that with every
    member gossiping, a member receives a gossip every ``desired_avg_gossip`` ms on average."""
    return rnd.random() * desired_avg_gossip * 2 * max(1, num_members)


def pick_subset(members: list, fraction: float, rnd: random.Random | Any = random) -> list:
    """A random ``fraction`` of ``members`` (at least one of them when there are any)."""
    if not members:
        return []
    n = min(len(members), max(1, int(round(len(members) * fraction))))
    return rnd.sample(members, n)


class PBCAST(Protocol):
    NAME = "pbcast.PBCAST"

    gossip_interval = Property(to_int, 5000, "ms between a member's gossips (when not dynamic)")
    dynamic = Property(to_bool, True, "draw the interval before each gossip from random(desired_avg_gossip * 2 * "
                       "members) (gossip_interval is then ignored)")
    desired_avg_gossip = Property(to_int, 30000, "ms between the gossips a member receives, on average (dynamic)")
    subset = Property(to_float, 0.1, "fraction of the members a unicast gossip is sent or forwarded to")
    mcast_gossip = Property(to_bool, True, "multicast gossips to every member (subset ignored, never forwarded)",
                            aliases=("use_mcast_for_gossip",))
    gc_lag = Property(to_int, 30, "seqnos garbage collection lags behind what every member has delivered")
    max_queue = Property(to_int, 100, "gossips and retransmission requests waiting to be handled at most; more "
                         "are dropped")
    max_gossip_cache = Property(to_int, 100, "gossips remembered as seen (a gossip seen before is dropped)")
    min_gossip_interval = Property(to_int, 10, "jgpy: the shortest dynamic interval in ms (a draw near 0 would "
                                   "make a member gossip back to back)")
    max_xmit_req_size = Property(to_int, 1024, "jgpy: seqnos asked for per sender and gossip, and messages one "
                                 "XMIT_REQ is answered with per sender")
    max_xmit_rsp_bytes = Property(to_int, 2_000_000, "jgpy: payload bytes one XMIT_REQ is answered with at most")

    IGNORED_PROPERTIES = {
        "shun": ignored("2.12 has no shunning: a gossip from a non-member is dropped"),
        "max_invalid_gossips": ignored("2.12 has no shunning"),
    }

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a PBCAST message", self._rl)
        self._queue: deque = deque()             # (kind, src, header) of gossips and XMIT_REQs to handle
        self._direct: deque = deque()            # runs to deliver without an executor
        self._queue_task = None
        self._gossip_task = None
        self.counters = dict.fromkeys((
            "msgs_sent", "msgs_received", "msgs_delivered", "duplicates", "dropped_no_window", "dropped_not_server",
            "dropped_bad_seqno", "dropped_bad_type", "dropped_non_member", "dropped_queue_full", "dropped_unsolicited",
            "gossips_sent", "gossips_received", "gossips_seen_before", "gossips_forwarded", "xmit_reqs_sent",
            "xmit_reqs_received", "xmit_rsps_sent", "xmit_rsps_received", "xmit_rsps_truncated", "gc_runs",
            "msgs_collected"), 0)
        self._reset()

    def _reset(self) -> None:
        self.windows: dict = {}                  # sender -> NakReceiverWindow (ours included)
        self.processed: dict = {}                # sender -> (window, highest seqno the layers above are done with)
        self.seqno = 0                           # of our last multicast
        self.members: list = []
        self._member_set: frozenset = frozenset()
        self.view = None
        self.is_server = False
        self.gossip_round = 0
        self.heard: dict = {}                    # member -> (gossip round, {sender: highest delivered})
        self.asked: dict = {}                    # sender -> highest seqno we asked anybody for
        self.seen_gossips: OrderedDict = OrderedDict()
        self._queue.clear()

    # ---- life cycle ----

    def init(self) -> None:
        if self.max_queue <= 0 or self.max_gossip_cache <= 0 or self.max_xmit_req_size <= 0:
            raise ValueError("PBCAST: max_queue, max_gossip_cache and max_xmit_req_size must be positive")
        if not 0 < self.subset <= 1:
            raise ValueError("PBCAST: subset must be in (0, 1]")

    def start(self) -> None:
        with self._lock:
            self._reset()
        self._gossip_task = self.timer.schedule_dynamic(self.next_interval, self._gossip_tick, "PBCAST gossip")

    def stop(self) -> None:
        for task in (self._gossip_task, self._queue_task):
            if task is not None:
                task.cancel()
        self._gossip_task = self._queue_task = None
        with self._lock:
            for w in self.windows.values():
                w.destroy()
            self._reset()

    def next_interval(self) -> float:
        """The delay before our next gossip (ms): dynamic, or ``gossip_interval``."""
        if not self.dynamic:
            return max(1, self.gossip_interval)
        return max(self.min_gossip_interval, gossip_interval(len(self.members), self.desired_avg_gossip))

    def up_needs(self) -> int:
        return UP_HEADER

    # ---- sending ----

    def down_msg(self, msg: Message) -> Any:
        if msg.dest is not None or msg.is_flag_set(NO_RELIABILITY):
            return self.down_prot.down_msg(msg)
        me = self.local_addr
        with self._lock:
            win = self.windows.get(me)
            if win is None:
                self._rl.warning("no-own-window", "%s: discarded a multicast: no window for myself (not joined "
                                 "yet), view is %s", me, self.view)
                return None
            self.seqno += 1
            msg.put_header(self.id, H(MCAST_MSG, self.seqno))
            keep = msg.copy()
            keep.src = me
            win.add(self.seqno, keep, now_ms())
            self.counters["msgs_sent"] += 1
            run_here = self._hand_over(win, me)       # our own: delivered at once (the loopback is a duplicate)
        self._run_pending(run_here)
        return self.down_prot.down_msg(msg)

    # ---- receiving ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            run_here = False
            for msg in mine:
                try:
                    run_here |= self._receive(msg)
                except Exception:  # noqa: BLE001 - counted and logged; the batch goes on
                    self._guard.failure(msg)
            self._run_pending(run_here)
        if rest:
            self.up_prot.up_batch(rest)

    def _receive(self, msg: Message) -> bool:
        hdr = msg.get_header(self.id)
        t = hdr.type
        if t == MCAST_MSG:
            if msg.dest is not None:
                self.counters["dropped_bad_type"] += 1
                return False
            return self._add(msg, msg.src, hdr.seqno)
        if t == XMIT_RSP:
            return self._on_xmit_rsp(msg, hdr)
        if t in (GOSSIP, XMIT_REQ):
            self._enqueue(t, msg.src, hdr)
            return False
        self.counters["dropped_bad_type"] += 1
        self._rl.warning("bad-type", "%s: PbcastHeader type %s from %s not known", self.local_addr, t, msg.src)
        return False

    def _add(self, msg: Message, sender, seqno: int) -> bool:
        """A multicast of ``sender`` (received or retransmitted) into its window; what that makes deliverable is
        handed to the delivery executor. True when this thread should run the executor's queue."""
        with self._lock:
            win = self.windows.get(sender) if sender is not None else None
            if win is None:
                self.counters["dropped_no_window"] += 1
                return False
            if not self.is_server:
                self.counters["dropped_not_server"] += 1
                return False
            try:
                added = win.add(seqno, msg, now_ms())
            except (OverflowError, ValueError):
                self.counters["dropped_bad_seqno"] += 1
                self._rl.warning("bad-seqno", "%s: dropped a multicast from %s: seqno %s out of range", self.local_addr,
                                 sender, seqno)
                return False
            if not added:
                if sender != self.local_addr:        # (our own come back from the loopback: delivered at send)
                    self.counters["duplicates"] += 1
                return False
            self.counters["msgs_received"] += 1
            return self._hand_over(win, sender)

    def _hand_over(self, win: NakReceiverWindow, sender) -> bool:
        """Under the lock: the deliverable run of ``win`` to the delivery executor, in order."""
        run = win.remove_many()
        if not run:
            return False
        self.counters["msgs_delivered"] += len(run)
        mark = (win, win.highest_delivered)
        ex = self.stack.delivery if self.stack is not None else None
        if ex is None:                           # (a stack without a delivery executor: after the lock)
            self._direct.append((run, sender, mark))
            return True
        return ex.enqueue(self._deliver, run, sender, mark)

    def _run_pending(self, run_here: bool) -> None:
        if not run_here:
            return
        ex = self.stack.delivery if self.stack is not None else None
        if ex is not None:
            ex.run_pending()
            return
        while True:
            with self._lock:
                if not self._direct:
                    return
                run, sender, mark = self._direct.popleft()
            self._deliver(run, sender, mark)

    def _deliver(self, run: list, sender, mark: tuple) -> None:
        """On the delivery thread: the run goes up; then the layers above are done with it."""
        self.up_prot.up_batch(run)
        with self._lock:
            p = self.processed.get(sender)
            if p is None or p[0] is mark[0]:
                self.processed[sender] = mark

    def _on_xmit_rsp(self, msg: Message, hdr) -> bool:
        sender, seqno = hdr.sender, hdr.seqno
        if msg.src not in self._member_set:
            self.counters["dropped_non_member"] += 1
            return False
        if sender is None or seqno > self.asked.get(sender, 0):
            self.counters["dropped_unsolicited"] += 1
            return False
        self.counters["xmit_rsps_received"] += 1
        msg.src = sender
        msg.dest = None
        return self._add(msg, sender, seqno)

    # ---- gossips and retransmission requests: a bounded queue, worked off by the timer ----

    def _enqueue(self, kind: int, src, hdr) -> None:
        with self._lock:
            if len(self._queue) >= self.max_queue:
                self.counters["dropped_queue_full"] += 1
                self._rl.warning("queue-full", "%s: dropped a gossip or retransmission request: %d are waiting",
                                 self.local_addr, len(self._queue))
                return
            self._queue.append((kind, src, hdr))
            if self._queue_task is not None:
                return
            self._queue_task = self.timer.execute(self._work_queue, "PBCAST gossip queue")

    def _work_queue(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._queue_task = None
                    return
                kind, src, hdr = self._queue.popleft()
            out: list = []
            try:
                with self._lock:
                    if kind == GOSSIP:
                        self._on_gossip(src, hdr, out)
                    else:
                        self._on_xmit_req(src, hdr, out)
            except Exception:  # noqa: BLE001 - one bad request must not stop the queue
                self._guard.failed += 1
                self._rl.exception("queue-failed", "%s: failed handling a PBCAST request from %s", self.local_addr,
                                   src)
            self._send(out)

    def _send(self, out: list) -> None:
        for m in out:
            try:
                self.down_prot.down_msg(m)
            except Exception:  # noqa: BLE001 - one failed send must not stop the others
                self._rl.exception("send-failed", "%s: sending a PBCAST message failed", self.local_addr)

    # ---- gossip ----

    def _gossip_tick(self) -> None:
        out: list = []
        with self._lock:
            self._make_gossip(out)
            self._collect_garbage()
        self._send(out)

    def _make_gossip(self, out: list) -> None:
        me = self.local_addr
        others = [m for m in self.members if m != me]
        if not self.is_server or not others or me not in self.windows:
            return
        self.gossip_round += 1
        digest = self._digest()
        if self.mcast_gossip:
            g = Message(None, None, None, OOB)
            g.put_header(self.id, H(GOSSIP, gossip_id=self.gossip_round, origin=me, digest=digest,
                                    seen=tuple(others)))
            out.append(g)
        else:
            for dest in pick_subset(others, self.subset):
                g = Message(dest, None, None, OOB)
                g.put_header(self.id, H(GOSSIP, gossip_id=self.gossip_round, origin=me, digest=digest,
                                        not_seen=tuple(others), seen=(me,)))
                out.append(g)
        self.counters["gossips_sent"] += 1

    def _on_gossip(self, src, hdr, out: list) -> None:
        """Seed 000's handleGossip, under the lock."""
        me = self.local_addr
        origin = hdr.origin
        if origin == me:                         # our own multicast gossip, looped back
            return
        mset = self._member_set
        if origin not in mset or src not in mset or not self.is_server:
            self.counters["dropped_non_member"] += 1
            return
        key = (origin, hdr.gossip_id)
        if key in self.seen_gossips:
            self.counters["gossips_seen_before"] += 1
            return
        self.seen_gossips[key] = None
        while len(self.seen_gossips) > self.max_gossip_cache:
            self.seen_gossips.popitem(last=False)
        self.counters["gossips_received"] += 1
        theirs = self._their_highest(hdr.digest)
        prev = self.heard.get(origin)
        if prev is None or hdr.gossip_id > prev[0]:
            self.heard[origin] = (hdr.gossip_id, theirs)
        self._ask_for_missing(origin, theirs, out)
        if hdr.not_seen is None:                 # a multicast gossip: everybody got it, nobody forwards it
            self._collect_garbage()
            return
        not_seen = [m for m in dict.fromkeys(hdr.not_seen) if m in mset and m != me and m != origin]
        if not not_seen:
            self._collect_garbage()
            return
        seen = tuple(m for m in dict.fromkeys((*(hdr.seen or ()), me)) if m in mset)
        for dest in pick_subset(not_seen, self.subset):
            g = Message(dest, None, None, OOB)
            g.put_header(self.id, H(GOSSIP, gossip_id=hdr.gossip_id, origin=origin, digest=hdr.digest,
                                    not_seen=tuple(not_seen), seen=seen))
            out.append(g)
            self.counters["gossips_forwarded"] += 1

    def _their_highest(self, digest) -> dict:
        """Per sender we have a window for, the highest seqno the digest says was delivered (others ignored)."""
        theirs: dict = {}
        if digest is None:
            return theirs
        windows = self.windows
        for sender, _low, hd, _hr in digest.entries():
            if sender in windows and sender not in theirs:
                theirs[sender] = hd
                if len(theirs) == len(windows):
                    break
        return theirs

    def _ask_for_missing(self, whom, theirs: dict, out: list) -> None:
        """XMIT_REQ to ``whom`` for what it has delivered and we lack (at most ``max_xmit_req_size`` per sender)."""
        me = self.local_addr
        limit = self.max_xmit_req_size
        reqs = []
        for sender, their_hd in theirs.items():
            win = self.windows[sender]
            _low, hd, hr = win.digest()
            if sender == me or their_hd <= hd:
                continue
            left = limit
            for first, last in win.missing() + ([(hr + 1, their_hd)] if their_hd > hr else []):
                last = min(last, their_hd, first + left - 1)
                if first > last:
                    break
                reqs.append((sender, first, last))
                if last > self.asked.get(sender, 0):
                    self.asked[sender] = last
                left -= last - first + 1
                if left <= 0:
                    break
        if reqs:
            r = Message(whom, None, None, OOB)
            r.put_header(self.id, H(XMIT_REQ, xmit_reqs=tuple(reqs)))
            self.counters["xmit_reqs_sent"] += 1
            out.append(r)

    def _on_xmit_req(self, requester, hdr, out: list) -> None:
        """One XMIT_RSP per message asked for that we have, bounded per sender and in bytes; under the lock."""
        if requester not in self._member_set or requester == self.local_addr:
            self.counters["dropped_non_member"] += 1
            return
        self.counters["xmit_reqs_received"] += 1
        limit, max_bytes, sent = self.max_xmit_req_size, self.max_xmit_rsp_bytes, 0
        budget: dict = {}                        # sender -> seqnos still answered (the ranges may be many)
        for k, (sender, first, last) in enumerate(hdr.xmit_reqs or ()):
            if k >= limit:                       # (more ranges than seqnos we would answer)
                return
            win = self.windows.get(sender)
            left = budget.get(sender, limit)
            if win is None or left <= 0:
                continue
            first = max(first, win.low + 1, 1)
            last = min(last, win.highest_received, first + left - 1)
            if first > last:
                continue
            budget[sender] = left - (last - first + 1)
            for m in win.get_range(first, last, left):
                if max_bytes > 0 and sent > 0 and sent + m.length > max_bytes:
                    self.counters["xmit_rsps_truncated"] += 1
                    return
                sent += m.length
                c = m.copy()
                c.dest = requester
                c.src = None
                c.put_header(self.id, H(XMIT_RSP, m.get_header(self.id).seqno, sender=sender))
                out.append(c)
                self.counters["xmit_rsps_sent"] += 1

    # ---- garbage collection ----

    def _collect_garbage(self) -> None:
        """Under the lock: per sender, purge below what every member has delivered, minus ``gc_lag``."""
        me = self.local_addr
        others = [m for m in self.members if m != me]
        reports = [self.heard.get(m) for m in others]
        if any(r is None for r in reports):
            return
        collected = 0
        for sender, win in self.windows.items():
            lows = [win.highest_delivered]
            for _round, theirs in reports:
                hd = theirs.get(sender)
                if hd is None:
                    break
                lows.append(hd)
            else:
                upto = min(lows) - self.gc_lag
                if upto > win.low:
                    before = win.size
                    if win.stable(upto):
                        collected += before - win.size
        if collected:
            self.counters["gc_runs"] += 1
            self.counters["msgs_collected"] += collected

    # ---- digests ----

    def _digest(self) -> Digest:
        d = Digest()
        for sender, win in self.windows.items():
            d.set(sender, *win.digest())
        return d

    def get_digest(self) -> Digest:
        with self._lock:
            return self._digest()

    def get_delivered_digest(self) -> Digest:
        """As :meth:`get_digest`, with highest_delivered what the layers above have finished processing (the
        state transfer sends it with a state taken on the delivery thread)."""
        d = Digest()
        with self._lock:
            for sender, win in self.windows.items():
                low, hd, hr = win.digest()
                p = self.processed.get(sender)
                if p is not None and p[0] is win and p[1] < hd:
                    hd = p[1]
                d.set(sender, min(low, hd), hd, hr)
        return d

    def _install(self, sender, hd: int, low: int) -> None:
        old = self.windows.pop(sender, None)
        if old is not None:
            old.destroy()
        win = NakReceiverWindow(hd, low)
        self.windows[sender] = win
        self.processed[sender] = (win, hd)
        self.heard.clear()                       # reports about the window this one replaces no longer count

    def apply_digest(self, digest: Digest | None, how: EventType) -> None:
        """NAKACK's rules. SET_DIGEST: windows for the senders we have none for; MERGE_DIGEST: also a new window
        for one behind the digest; OVERWRITE_DIGEST (the state transfer): every window as the digest says (ours:
        only what was delivered)."""
        if digest is None:
            return
        me = self.local_addr
        with self._lock:
            for sender, low, hd, _hr in digest.entries():
                win = self.windows.get(sender) if sender is not None else False
                if win is None:
                    self._install(sender, hd, low)
                elif win is False or (sender == me and how != EventType.OVERWRITE_DIGEST):
                    continue
                elif sender == me:
                    win.set_highest_delivered(hd)
                    self.processed[sender] = (win, hd)
                elif how == EventType.OVERWRITE_DIGEST or (how == EventType.MERGE_DIGEST
                                                           and win.highest_delivered < hd):
                    self._install(sender, hd, low)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.GET_DIGEST:
            return self.get_digest()
        if t == EventType.GET_DELIVERED_DIGEST:
            return self.get_delivered_digest()
        if t in (EventType.SET_DIGEST, EventType.MERGE_DIGEST, EventType.OVERWRITE_DIGEST):
            self.apply_digest(evt.arg, t)
            return None
        if t == EventType.VIEW_CHANGE:
            self._on_view(evt.arg)
        elif t == EventType.TMP_VIEW:
            with self._lock:
                self.members = list(evt.arg.members or ())
                self._member_set = frozenset(self.members)
        elif t == EventType.BECOME_SERVER:
            self.is_server = True
        return self.down_prot.down(evt)

    def _on_view(self, view) -> None:
        me = self.local_addr
        with self._lock:
            self.view = view
            self.members = list(view.members or ())
            self._member_set = mset = frozenset(self.members)
            for sender in [s for s in self.windows if s not in mset and s != me]:
                self.windows.pop(sender).destroy()
                self.processed.pop(sender, None)
            for table in (self.heard, self.asked):
                for a in [a for a in table if a not in mset]:
                    del table[a]
            self.is_server = True

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counters, "local_addr": str(self.local_addr), "seqno": self.seqno, "queued": len(self._queue),
                    "gossip_cache": len(self.seen_gossips), "heard_from": len(self.heard),
                    "windows": {str(a): w.digest() for a, w in self.windows.items()},
                    "held": sum(w.size for w in self.windows.values()), "malformed": self._guard.failed}
