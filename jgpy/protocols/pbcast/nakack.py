"""pbcast.NAKACK: reliable, FIFO multicast with negative acknowledgements (``protocols.pbcast.NAKACK``).

Every multicast gets the sender's next seqno. Receivers keep a window per sender (Cython
``NakReceiverWindow``): messages are delivered in seqno order, a gap is asked for again with XMIT_REQ on
the schedule of ``retransmit_timeout`` (or ``exponential_backoff``), and the sender (or, with
``xmit_from_random_member``, anyone) answers by re-multicasting the message (``use_mcast_xmit``) or with
an XMIT_RSP unicast. STABLE's stability digests purge what everybody has, and also trigger a
retransmission when a sender's last message was lost (seed 000, "Last message dropped in NAKACK").

Threads: windows are filled on the receive threads; deliverable messages are handed, in order, to the
channel's delivery thread (everything above NAKACK runs there). OOB messages go up right away. The per-message
work of both directions is the C core this class derives from (``NakackCore``, ``jgpy/_core/nakack.pyx``); the
windows, the seqno and the counters are its fields.

Bounds (unlike 2.12, which asks for a whole gap at once and answers any requester in full): a window's
memory follows the messages it holds, not the seqno gap a (spoofed) message opens (see
``jgpy._core.tables``); each retransmission round asks a sender for at most ``max_xmit_req_size`` missing
seqnos, lowest first; XMIT_REQs from strangers (never members, or not for ``FORMER_MEMBER_S``) are dropped, and
one XMIT_REQ is answered with at most
``max_xmit_req_size`` messages and ``max_xmit_rsp_bytes`` bytes. Windows exist only for members (digests
create them), so multicasts from strangers are dropped without a trace but a counter.
"""

from __future__ import annotations

import random
import time
from typing import Any

from jgpy._core.headers import NakAckHeader
from jgpy._core.message import Message
from jgpy._core.nakack import NakackCore
from jgpy._core.tables import NakReceiverWindow
from jgpy._core.types import Digest
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, ignored, to_bool, to_int, to_longs
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms

MSG, XMIT_REQ, XMIT_RSP = NakAckHeader.MSG, NakAckHeader.XMIT_REQ, NakAckHeader.XMIT_RSP
OOB = Message.OOB
NO_RELIABILITY = Message.NO_RELIABILITY
OOB_DELIVERED = Message.OOB_DELIVERED
#: how long a member that left the view may still ask us for retransmissions (views disagree for a while
#: around partitions and merges), and how many such former members are remembered at most
FORMER_MEMBER_S = 300.0
MAX_FORMER_MEMBERS = 1024
_PAGED_WINDOW = ignored("jgpy's window is a table of 1024-seqno pages that exist while they hold messages")


class NAKACK(NakackCore, Protocol):
    NAME = "pbcast.NAKACK"

    retransmit_timeout = Property(to_longs, [600, 1200, 2400, 4800], "ms before asking for a missing message "
                                  "again: one value per attempt, the last one repeats",
                                  aliases=("retransmit_timeouts",))
    gc_lag = Property(to_int, 20, "seqnos garbage collection lags behind stability")
    max_msg_batch_size = CoreProperty(to_int, 20000, "max messages removed from a window in one go")
    use_mcast_xmit = Property(to_bool, True, "answer a retransmission request by multicasting the message")
    use_mcast_xmit_req = Property(to_bool, False, "multicast retransmission requests")
    xmit_from_random_member = Property(to_bool, False, "ask a random member (not the sender) for missing messages")
    exponential_backoff = Property(to_int, 0, "if > 0: retransmission schedule starts here and doubles (max 15 s)")
    discard_delivered_msgs = CoreProperty(to_bool, False, "drop other members' messages once delivered (they can "
                                          "then only be retransmitted by their sender)")
    log_discard_msgs = Property(to_bool, True, "log messages dropped because the sender is not a member")
    log_not_found_msgs = Property(to_bool, True, "log retransmission requests for messages we no longer have")
    xmit_history_max_size = Property(to_int, 50, "retransmission history kept for diagnostics")
    max_rebroadcast_timeout = Property(to_int, 2000, "timeout of a FLUSH rebroadcast")
    xmit_tick = Property(to_int, 0, "jgpy: ms between checks for due retransmissions (0: a quarter of the "
                         "smallest retransmit timeout)")
    max_xmit_buf_size = Property(to_int, 0, "bound of the retransmission buffer", deprecated="ignored, as in 2.12")
    max_xmit_req_size = Property(to_int, 1024, "jgpy (NAKACK2's name): seqnos asked for per sender and "
                                 "retransmission round, lowest first (a longer gap is asked for over the next "
                                 "rounds); also the most messages one XMIT_REQ is answered with (0: no limit)")
    max_xmit_rsp_bytes = Property(to_int, 2_000_000, "jgpy: payload bytes one XMIT_REQ is answered with at most "
                                  "(the requester asks again for the rest; 0: no limit)")

    DEPRECATED_PROPERTIES = ("enable_xmit_time_stats",)
    IGNORED_PROPERTIES = {
        "use_stats_for_retransmission": ignored("jgpy uses retransmit_timeout/exponential_backoff"),
        "use_range_based_retransmitter": ignored("jgpy's retransmitter always works on ranges"),
        "print_stability_history_on_failed_xmit": ignored("jgpy logs missing messages without the history"),
        "xmit_table_num_rows": _PAGED_WINDOW,
        "xmit_table_msgs_per_row": _PAGED_WINDOW,
        "xmit_table_resize_factor": _PAGED_WINDOW,
        "xmit_table_max_compaction_time": _PAGED_WINDOW,
        "max_xmit_size": ignored("deprecated in 2.12"),
        "eager_lock_release": ignored("deprecated in 2.12"),
        "stats_list_size": ignored("deprecated in 2.12"),
    }

    # the core's fields (jgpy/_core/nakack.pxd): windows (sender -> NakReceiverWindow, ours included), processed
    # (sender -> (window, highest seqno of that window the layers above have finished processing): the handed-over
    # batches update it on the delivery thread once they are through, for GET_DELIVERED_DIGEST), seqno (of our
    # last multicast, under seqno_lock), lock (orders the hand-overs), running, is_server, own_addr, counters

    def __init__(self) -> None:
        super().__init__()
        self.members: list = []
        self.view = None
        self.leaving = False
        self._xmit_task = None
        self._rl = RateLimitedLog(self.log)
        self.counters = dict.fromkeys(
            ("msgs_sent", "msgs_received", "msgs_delivered", "oob_delivered", "xmit_reqs_sent", "xmit_reqs_received",
             "xmit_rsps_sent", "xmit_rsps_received", "missing_msgs_received", "dropped_not_server",
             "dropped_no_window", "dropped_duplicate", "dropped_bad_seqno", "xmit_not_found", "last_msg_xmits",
             "windows_reset_with_pending", "xmit_reqs_dropped_non_member", "xmit_rsps_truncated",
             "control_failed", "rebroadcast_timeouts"), 0)
        self._member_set: frozenset = frozenset()
        self._former: dict = {}                  # members that left the view -> when (oldest first)

    # ---- life cycle ----

    def init(self) -> None:
        if not self.retransmit_timeout:
            self.retransmit_timeout = [600, 1200, 2400, 4800]

    def start(self) -> None:
        self.running = True
        self.own_addr = self.local_addr
        self.delivery = self.stack.delivery
        self.leaving = False
        tick = self.xmit_tick or max(20, min(self.retransmit_timeout) // 4)
        if self.exponential_backoff > 0:
            tick = self.xmit_tick or max(10, self.exponential_backoff // 4)
        self._xmit_task = self.timer.schedule_with_fixed_delay(tick, tick, self._retransmit_due, "NAKACK xmit")

    def stop(self) -> None:
        self.running = False
        self.delivery = None
        if self._xmit_task is not None:
            self._xmit_task.cancel()
            self._xmit_task = None
        self._reset()

    def _reset(self) -> None:
        with self.seqno_lock:
            self.seqno = 0
        for w in self.windows.values():
            w.destroy()
        self.windows.clear()
        self.processed.clear()
        self.is_server = False

    def _new_window(self, highest_delivered: int, low: int) -> NakReceiverWindow:
        return NakReceiverWindow(highest_delivered, low, list(self.retransmit_timeout), self.exponential_backoff)

    # ---- sending ----

    # down_msg: the core (multicasts get the next seqno and the header and stay in our window until stable)

    def _cannot_send(self, msg: Message, reason: str) -> None:
        if reason == "not-running":
            self._rl.warning(reason, "%s: dropped a multicast sent while NAKACK is not running", self.local_addr)
        else:
            self._rl.warning(reason, "%s: discarded a multicast: no window for myself (not joined yet), view is %s",
                             self.local_addr, self.view)

    # ---- receiving ----

    def up_needs(self) -> int:
        return UP_HEADER

    # up_batch: the core classifies the batch, fills the windows and hands the deliverable runs over in order;
    # these are its calls back:

    def _handle_control(self, control: list) -> None:
        """XMIT_REQs (and headers of unknown types) of a received batch."""
        for msg, hdr in control:
            try:
                if hdr.type == XMIT_REQ:
                    if hdr.range is None:
                        self._rl.error("xmit-no-range", "XMIT_REQ from %s without a range", msg.src)
                        continue
                    self._handle_xmit_req(msg.src, hdr.range.low, hdr.range.high, hdr.sender)
                else:
                    self._rl.error("bad-type", "NakAck header type %s not known", hdr.type)
            except Exception:  # noqa: BLE001 - one bad request must not hurt the rest of the batch
                self.counters["control_failed"] += 1
                self._rl.exception("control-failed", "%s: failed handling a NAKACK message from %s",
                                   self.local_addr, msg.src)

    def _null_senders(self, count: int) -> None:
        self._rl.error("null-sender", "dropped multicasts without a sender (%d so far)", count)

    def _report_dropped(self, no_window: list, bad: list) -> None:
        """Messages of senders without a window, and seqnos a window refused."""
        me = self.local_addr
        for sender, n in no_window:
            if not self.leaving and self.log_discard_msgs:
                self._rl.warning("no-window", "%s: dropped %d message(s) from %s (not in table %s), view=%s",
                                 me, n, sender, list(self.windows), self.view)
        for sender, err in bad:
            self._rl.warning("bad-seqno", "%s: dropped a message from %s: %s", me, sender, err)

    # ---- retransmission ----

    def _handle_xmit_req(self, requester, first: int, last: int, original_sender) -> None:
        """Answer a retransmission request. Unlike 2.12, only members and recent former members are answered
        (views disagree for a while around partitions and merges: a member we have left out may still have us
        in its view and need our messages; a stranger's request is dropped and counted), and the answer is
        bounded by ``max_xmit_req_size`` messages and ``max_xmit_rsp_bytes``: one small request must not make
        us send megabytes (the requester asks again for what is still missing)."""
        if first > last:
            return
        if requester not in self._member_set and requester != self.local_addr and not self._was_member(requester):
            self.counters["xmit_reqs_dropped_non_member"] += 1
            self._rl.warning("xmit-non-member", "%s: dropped an XMIT_REQ from %s: not a member of %s",
                             self.local_addr, requester, self.view)
            return
        self.counters["xmit_reqs_received"] += last - first + 1
        win = self.windows.get(original_sender)
        if win is None:
            self._rl.error("xmit-no-win", "%s: XMIT_REQ from %s: %s not found in the retransmission table",
                           self.local_addr, requester, original_sender)
            return
        limit = self.max_xmit_req_size
        found = win.get_range(first, last, limit)
        missing = last - first + 1 - len(found)
        if missing > 0 and (limit <= 0 or len(found) < limit):     # (cut by the limit: we cannot tell)
            self.counters["xmit_not_found"] += missing
            if self.log_not_found_msgs:
                self._rl.warning("xmit-missing", "%s: (requester=%s) %d message(s) of %s in [%d-%d] are not in "
                                 "the retransmission table (%s)", self.local_addr, requester, missing,
                                 original_sender, first, last, win.digest())
        max_bytes, sent = self.max_xmit_rsp_bytes, 0
        for msg in found:
            if max_bytes > 0 and sent > 0 and sent + msg.length > max_bytes:
                self.counters["xmit_rsps_truncated"] += 1
                break
            sent += msg.length
            self._send_xmit_rsp(requester, msg)

    def _send_xmit_rsp(self, dest, msg: Message) -> None:
        self.counters["xmit_rsps_sent"] += 1
        if msg.src is None:
            msg.src = self.local_addr
        if self.use_mcast_xmit:               # re-multicast the original message unchanged
            self.down_prot.down_msg(msg)
            return
        copy = msg.copy()
        copy.dest = dest
        copy.put_header(self.id, NakAckHeader(XMIT_RSP, msg.get_header(self.id).seqno))
        self.down_prot.down_msg(copy)

    def retransmit(self, first: int, last: int, sender, multicast_request: bool = False) -> None:
        dest = sender
        if multicast_request or self.use_mcast_xmit_req:
            dest = None
        elif self.xmit_from_random_member and sender != self.local_addr and self.members:
            candidate = random.choice(self.members)
            if candidate != self.local_addr:
                dest = candidate
        req = Message(dest, None, None, OOB)
        req.put_header(self.id, NakAckHeader.xmit_req(first, last, sender))
        self.counters["xmit_reqs_sent"] += last - first + 1
        self.down_prot.down_msg(req)

    def _retransmit_due(self) -> None:
        now = now_ms()
        me = self.local_addr
        for sender, win in list(self.windows.items()):
            if sender == me:
                continue
            for first, last in win.xmit_due(now, self.max_xmit_req_size):
                self.retransmit(first, last, sender)

    # ---- digests and stability ----

    def get_digest(self) -> Digest:
        d = Digest()
        for sender, win in list(self.windows.items()):
            d.set(sender, *win.digest())
        return d

    def get_delivered_digest(self) -> Digest:
        """Like :meth:`get_digest`, but highest_delivered is what the layers above NAKACK (the application
        included) have finished processing, not what was handed to the delivery thread: state transfer
        sends this digest with a state taken on the delivery thread, so digest and state agree."""
        d = Digest()
        processed = self.processed
        for sender, win in list(self.windows.items()):
            low, hd, hr = win.digest()
            p = processed.get(sender)
            if p is not None and p[0] is win and p[1] < hd:
                hd = p[1]
            d.set(sender, min(low, hd), hd, hr)
        return d

    def _install_window(self, sender, hd: int, low: int) -> None:
        win = self._new_window(hd, low)
        self.windows[sender] = win
        self.processed[sender] = (win, hd)

    def set_digest(self, digest: Digest, merge: bool) -> None:
        if digest is None:
            return
        me = self.local_addr
        for sender, low, hd, _hr in digest.entries():
            if sender is None:
                continue
            win = self.windows.get(sender)
            if win is not None:
                _low, my_hd, my_hr = win.digest()
                if not merge or sender == me or my_hd >= hd:
                    continue
                if my_hr > my_hd:
                    self.counters["windows_reset_with_pending"] += 1
                    self.log.warning("%s: merge digest resets the window for %s (delivered %d, received %d) to "
                                     "delivered %d: messages %d..%d are not delivered here",
                                     me, sender, my_hd, my_hr, hd, my_hd + 1, hd)
                del self.windows[sender]
                win.destroy()
                if sender == me:                       # JGRP-1251 (never reached: own entry is skipped above)
                    with self.seqno_lock:
                        self.seqno = hd
            self._install_window(sender, hd, low)

    def overwrite_digest(self, digest: Digest) -> None:
        if digest is None:
            return
        me = self.local_addr
        # under the delivery lock: a batch is handed over either before the windows are replaced (then it is
        # queued before anything the caller submits to the delivery thread afterwards) or not at all
        with self.lock:
            for sender, low, hd, _hr in digest.entries():
                if sender is None:
                    continue
                win = self.windows.get(sender)
                if win is not None:
                    if sender == me:
                        win.set_highest_delivered(hd)
                        self.processed[sender] = (win, hd)
                        continue
                    del self.windows[sender]
                    win.destroy()
                self._install_window(sender, hd, low)

    def rebroadcast(self, digest: Digest) -> bool:
        """FLUSH's reconciliation (2.12's REBROADCAST): fetch, with multicast XMIT_REQs, what ``digest`` says
        others have from a sender and we do not, for at most ``max_rebroadcast_timeout`` ms (requests again
        every third of it); True once we have it all. Unlike 2.12 it waits until the messages are handed over
        in order (not only received: a gap below them would let them be delivered after the next view), and
        asks for a sender's last message too (2.12's range leaves it out when it is the only one missing).
        Called by FLUSH's own thread."""
        if digest is None:
            return True
        timeout = max(self.max_rebroadcast_timeout, 0) / 1000.0
        deadline = time.monotonic() + timeout
        next_request = 0.0
        me = self.local_addr
        limit = self.max_xmit_req_size
        while self.running:
            missing = []
            for sender, _low, hd, hr in digest.entries():
                win = self.windows.get(sender) if sender is not None and sender != me else None
                if win is None:
                    continue
                mine = win.digest()[1]
                theirs = max(hd, hr)
                if theirs > mine:
                    missing.append((sender, mine + 1, theirs))
            if not missing:
                return True
            now = time.monotonic()
            if now >= deadline:
                self.counters["rebroadcast_timeouts"] += 1
                self._rl.warning("rebroadcast", "%s: FLUSH reconciliation: still missing %s after %d ms",
                                 me, [(str(s), a, b) for s, a, b in missing[:5]], self.max_rebroadcast_timeout)
                return False
            if now >= next_request:
                for sender, first, last in missing:
                    first = max(1, first)
                    self.retransmit(first, last if limit <= 0 else min(last, first + limit - 1), sender, True)
                next_request = now + timeout / 3
            time.sleep(0.005)
        return False

    def stable(self, digest: Digest) -> None:
        if digest is None or self.local_addr is None:
            return
        for sender, _low, hd, hr in digest.entries():
            if sender is None:
                continue
            win = self.windows.get(sender)
            if win is not None:
                my_hr = win.digest()[2]
                if 0 <= hr and hr > my_hr:     # the sender's last message(s) never reached us: ask for them
                    self.counters["last_msg_xmits"] += 1
                    self.retransmit(hr, hr, sender)
            hd -= self.gc_lag
            if hd < 0:
                continue
            if win is not None:
                win.stable(hd)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.STABLE:
            self.stable(evt.arg)
            return None
        if t == EventType.SET_LOCAL_ADDRESS:
            self.own_addr = evt.arg
        if t == EventType.GET_DIGEST:
            return self.get_digest()
        if t == EventType.GET_DELIVERED_DIGEST:
            return self.get_delivered_digest()
        if t == EventType.SET_DIGEST:
            self.set_digest(evt.arg, False)
            return None
        if t == EventType.MERGE_DIGEST:
            self.set_digest(evt.arg, True)
            return None
        if t == EventType.OVERWRITE_DIGEST:
            self.overwrite_digest(evt.arg)
            return None
        if t == EventType.REBROADCAST:
            self.rebroadcast(evt.arg)
            return None
        if t == EventType.TMP_VIEW:
            self.members = list(evt.arg.members or ())
            self._member_set = frozenset(self.members)
        elif t == EventType.VIEW_CHANGE:
            self._remember_former(self._member_set, evt.arg.members or ())
            self.members = list(evt.arg.members or ())
            self._member_set = frozenset(self.members)
            self.view = evt.arg
            me = self.local_addr
            for sender in list(self.windows):
                if sender not in self.members and sender != me:
                    self.windows.pop(sender).destroy()
                    self.processed.pop(sender, None)
            self.is_server = True
        elif t == EventType.BECOME_SERVER:
            self.is_server = True
        elif t == EventType.DISCONNECT:
            self.leaving = True
        return self.down_prot.down(evt)

    def _remember_former(self, old, new) -> None:
        """Members that left the view stay answerable for ``FORMER_MEMBER_S`` (at most ``MAX_FORMER_MEMBERS``)."""
        now = time.monotonic()
        former = self._former
        for a in set(old) - set(new):
            former.pop(a, None)
            former[a] = now
        while former and (len(former) > MAX_FORMER_MEMBERS or now - next(iter(former.values())) > FORMER_MEMBER_S):
            former.pop(next(iter(former)))

    def _was_member(self, addr) -> bool:
        t = self._former.get(addr)
        return t is not None and time.monotonic() - t <= FORMER_MEMBER_S

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.STABLE:
            self.stable(evt.arg)
            return None
        return self.up_prot.up(evt)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        for k in ("msgs_sent", "msgs_received", "msgs_delivered", "oob_delivered", "xmit_rsps_received",
                  "dropped_not_server", "dropped_no_window", "dropped_duplicate", "dropped_bad_seqno",
                  "dropped_null_sender"):
            d[k] = getattr(self, k)
        d["windows"] = {str(a): w.digest() for a, w in list(self.windows.items())}
        d["seqno"] = self.seqno
        return d
