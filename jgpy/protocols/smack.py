"""SMACK: simple multicast with positive acks, and membership without GMS (``org.jgroups.protocols.SMACK`` of 2.12).

* Sending: every multicast gets a ``SmackHeader(MCAST, seqno)`` (seqnos from 1) and is kept, with the members it
  went to, until each has sent an ``ACK`` for it; a member that has not acked is sent the message again (a unicast
  copy) after ``timeout[0]`` ms, then ``timeout[1]`` ms, ... (the last value repeats).
* Receiving: an ``MCAST`` is acked (every time, duplicates too) and goes into the sender's receive window, which
  starts at the first seqno received from that sender; messages go up in seqno order (an OOB one at once, and not
  again when its turn comes), older seqnos are dropped as duplicates.
* Membership is made here: on CONNECT a ``JOIN_ANNOUNCEMENT`` is multicast; a member that hears one from a stranger
  answers with its own (a unicast) and adds it; the sender of an ``MCAST`` or an ``ACK`` is added too; a
  ``LEAVE_ANNOUNCEMENT`` (multicast on DISCONNECT) or a ``SUSPECT`` (FD_SIMPLE's, below) removes a member. Each change
  sends a ``VIEW_CHANGE`` (``ViewId(local address, n)``, members in the order they were added, ourselves first) up
  and down.

Where jgpy deviates from 2.12, and why:

* ``max_xmits``: 2.12 declares it but never reads it, so an unacked multicast is retransmitted (and kept) forever,
  to a member that never acks (a crashed one without a failure detector, or a made-up sender) too. jgpy does what
  2.12's class documentation says: after ``max_xmits`` retransmissions the members that still have not acked are
  removed from the membership, and the message is dropped. What we hold is thus bounded in time.
* ``jgpy: max_members`` bounds the membership (everybody who sends an MCAST, ACK or JOIN_ANNOUNCEMENT becomes a member
  in 2.12, a spoofed sender too); ``jgpy: window_size`` bounds how far ahead of the next seqno a sender's MCAST may
  be (further ones are dropped unacked: the sender sends them again) and so what is held per sender;
  ``jgpy: max_held_bytes`` bounds what all senders' windows hold together (a message that cannot be delivered yet is
  dropped unacked when it would go beyond). 2.12 accepts any seqno (and a first seqno of 2^40 makes its
  AckReceiverWindow fill a table up to it).
* A seqno < 1 on an MCAST, and an unknown header type, are counted and dropped (2.12 passes a message with an
  unknown type up to the application).
* We do not expect (or send) an ack from ourselves: 2.12 does, through loopback, which changes nothing on the wire.
* Own LEAVE_ANNOUNCEMENTs are ignored (2.12 removes itself from its own view when its leave loops back).
* A sender's window is made once, under a lock, and delivers under its lock, so messages go up in seqno order.
  2.12 makes it without a lock (two multicasts arriving together on two pool threads can make two windows, and
  what the dropped one held is lost) and hands messages up from several threads in no fixed order. As in 2.12, a
  multicast older than the one that made the window (reordered on the way) is taken for a duplicate.

2.12's ``JChannel.connect(cluster)`` sends CONNECT_USE_FLUSH, which 2.12's SMACK ignores: its sender window is never
made, so such a Java member cannot multicast (NullPointerException), announces nothing and fails on disconnect;
only ``connect(cluster, false)`` gives a working 2.12 member. Over UDP without discovery (smack.xml) no member, Java
or jgpy, has a physical address for another, so acks, join answers and retransmissions are dropped by the
transport: multicasts arrive once, best effort. Over TUNNEL (smack_tunnel.xml) unicasts go by logical address.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jgpy._core.headers import SmackHeader
from jgpy._core.message import Message
from jgpy._core.types import View, ViewId
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard, retained_bytes
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int, to_longs, to_size
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms

MCAST, ACK, JOIN, LEAVE = SmackHeader.MCAST, SmackHeader.ACK, SmackHeader.JOIN_ANNOUNCEMENT, \
    SmackHeader.LEAVE_ANNOUNCEMENT
NO_RELIABILITY = Message.NO_RELIABILITY
OOB = Message.OOB

#: 2.12 sleeps this long after multicasting its LEAVE_ANNOUNCEMENT (so that it leaves before the stack stops)
LEAVE_LINGER_S = 0.1

DROP_COUNTERS = ("dropped_bad_seqno", "dropped_beyond_window", "dropped_held_limit", "dropped_unknown_type",
                 "dropped_member_limit", "duplicates", "unexpected_acks")


class _Pending:
    """A multicast we sent: the members whose ack is missing, when it is due again, how often it was resent."""

    __slots__ = ("msg", "waiting", "due", "xmits")

    def __init__(self, msg: Message, waiting: set, due: float) -> None:
        self.msg = msg
        self.waiting = waiting
        self.due = due
        self.xmits = 0


class _ReceiveWindow:
    """One sender's multicasts: ``next`` is the seqno to deliver next, ``held`` what arrived ahead of it with what
    holding it costs (an OOB message stays as ``None``: delivered already, only its turn is kept), ``held_bytes``
    the sum of those costs."""

    __slots__ = ("next", "held", "held_bytes", "lock", "closed")

    def __init__(self, first: int) -> None:
        self.next = first
        self.held: dict[int, tuple[Message | None, int]] = {}
        self.held_bytes = 0
        self.lock = threading.Lock()
        self.closed = False                     # its sender was removed: what still comes here is dropped


class SMACK(Protocol):
    NAME = "SMACK"

    timeout = Property(to_longs, [1000, 2000, 3000], "retransmission schedule of unacked multicasts (ms): the first "
                       "after timeout[0], the next after timeout[1], ...; the last value repeats")
    max_xmits = Property(to_int, 10, "retransmissions of a multicast to a member that does not ack it; then the "
                         "member is removed (2.12 declares but ignores it: see the module docstring)")
    print_local_addr = Property(to_bool, True, "print the 'GMS: address is ...' banner when the address is set, "
                                "as 2.12 does")
    max_members = Property(to_int, 1024, "jgpy: most members (senders of MCAST, ACK or JOIN_ANNOUNCEMENT); "
                           "strangers beyond that are dropped and counted")
    window_size = Property(to_int, 8192, "jgpy: an MCAST more than this many seqnos ahead of its sender's next is "
                           "dropped unacked (the sender resends it); bounds what is held per sender")
    max_held_bytes = Property(to_size, 64 << 20, "jgpy: most bytes the receive windows of all senders hold together "
                              "(messages waiting for an earlier one); a message beyond is dropped unacked")

    def __init__(self) -> None:
        super().__init__()
        self._addr = None
        self._view_lock = threading.RLock()              # member changes and the views they make, in order
        self._members: tuple = ()                        # ordered, ourselves first; replaced whole
        self._vid = 1
        self._windows: dict[Any, _ReceiveWindow] = {}    # sender -> its window (members only)
        self._held_lock = threading.Lock()
        self._held_bytes = 0                             # what all windows hold (max_held_bytes)
        self._send_lock = threading.Lock()               # seqno and the pending table
        self._seqno = 1
        self._pending: dict[int, _Pending] = {}
        self._xmit_task = None
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a SMACK message", self._rl)
        self.counters = dict.fromkeys(DROP_COUNTERS + ("sent", "received", "acks_sent", "acks_received",
                                                       "xmits", "members_removed_after_max_xmits"), 0)

    def init(self) -> None:
        if not self.timeout or any(t <= 0 for t in self.timeout):
            raise ConfigError(f"SMACK: timeout must be a list of positive ms values (is {self.timeout})")
        if self.max_xmits < 0 or self.max_members < 1 or self.window_size < 1:
            raise ConfigError("SMACK: max_xmits must be >= 0, max_members and window_size >= 1")

    def stop(self) -> None:
        self._stop_retransmitter()
        with self._send_lock:
            self._pending.clear()
        with self._view_lock:
            for win in self._windows.values():
                self._release_window(win)
            self._windows.clear()
            self._members = ()

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    @property
    def members(self) -> list:
        return list(self._members)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
            if self.print_local_addr:
                bar = "-" * 55
                print(f"\n{bar}\nGMS: address is {evt.arg}\n{bar}", flush=True)
            ret = self.down_prot.down(evt)
            self._add_member(evt.arg)
            return ret
        if t == EventType.CONNECT:
            ret = self.down_prot.down(evt)
            self._start_retransmitter()
            self._announce(JOIN, None)
            return ret
        if t == EventType.DISCONNECT:
            self._announce(LEAVE, None)
            time.sleep(LEAVE_LINGER_S)
            self._stop_retransmitter()
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.SUSPECT:
            self.log.info("%s: removing suspected member %s", self.me, evt.arg)
            self._remove_member(evt.arg)
        return self.up_prot.up(evt)

    # ---- sending ----

    def down_msg(self, msg: Message) -> Any:
        if msg.dest is None and not (msg.flags & NO_RELIABILITY):
            me = self.me
            with self._send_lock:
                seqno = self._seqno
                self._seqno += 1
                msg.put_header(self.id, SmackHeader(MCAST, seqno))
                waiting = {m for m in self._members if m != me}
                if waiting:
                    self._pending[seqno] = _Pending(msg, waiting, now_ms() + self.timeout[0])
                self.counters["sent"] += 1
        return self.down_prot.down_msg(msg)

    def _announce(self, kind: int, dest) -> None:
        m = Message(dest)
        m.put_header(self.id, SmackHeader(kind, -1))
        self.down_prot.down_msg(m)

    # ---- receiving ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self._handle)

    def _handle(self, msg: Message) -> None:
        if msg.flags & NO_RELIABILITY:           # 2.12 does nothing with such a message but pass it up
            self.up_prot.up_batch([msg])
            return
        hdr = msg.get_header(self.id)
        sender = msg.src
        if sender is None:
            return
        kind = hdr.type
        if kind == MCAST:
            self._on_mcast(msg, sender, hdr.seqno)
        elif kind == ACK:
            self._on_ack(sender, hdr.seqno)
        elif kind == JOIN:
            self.log.debug("%s: join announcement by %s", self.me, sender)
            stranger = sender not in self._members
            if self._add_member(sender) and stranger:
                self._announce(JOIN, sender)
        elif kind == LEAVE:
            self.log.debug("%s: leave announcement by %s", self.me, sender)
            if sender != self.me:
                self._remove_member(sender)
        else:
            self.counters["dropped_unknown_type"] += 1
            self._rl.warning("bad-type", "%s: dropped a SmackHeader of unknown type from %s", self.me, sender)

    def _on_mcast(self, msg: Message, sender, seqno: int) -> None:
        if seqno < 1:
            self.counters["dropped_bad_seqno"] += 1
            self._rl.warning("bad-seqno", "%s: dropped an MCAST with seqno %d from %s", self.me, seqno, sender)
            return
        win = self._windows.get(sender)
        if win is None:
            if not self._add_member(sender):
                return
            with self._view_lock:
                win = self._windows.get(sender)
                if win is None:
                    if sender not in self._members:         # removed again meanwhile
                        return
                    win = self._windows[sender] = _ReceiveWindow(seqno)
        with win.lock:
            if win.closed:
                return
            if seqno >= win.next + self.window_size:
                self.counters["dropped_beyond_window"] += 1
                self._rl.warning("beyond-window", "%s: dropped an MCAST %d seqnos ahead of the next from %s",
                                 self.me, seqno - win.next, sender)
                return
            fresh = seqno >= win.next and seqno not in win.held
            oob = bool(msg.flags & OOB)
            if fresh:
                cost = 0
                if seqno > win.next and not oob:              # held until the gap before it fills
                    cost = retained_bytes([msg])
                    if not self._reserve(cost):
                        self.counters["dropped_held_limit"] += 1
                        self._rl.warning("held-limit", "%s: the receive windows hold %d bytes (max_held_bytes): "
                                         "dropped an MCAST from %s", self.me, self._held_bytes, sender)
                        return
                    win.held_bytes += cost
                win.held[seqno] = (None if oob else msg, cost)
                self.counters["received"] += 1
            else:
                self.counters["duplicates"] += 1
            if sender != self.me:
                self._ack(sender, seqno)
            if oob and fresh:
                self.up_prot.up_batch([msg])
            run = []
            held = win.held
            freed = 0
            while win.next in held:
                m, cost = held.pop(win.next)
                freed += cost
                win.next += 1
                if m is not None:
                    run.append(m)
            if freed:
                win.held_bytes -= freed
                self._release(freed)
            if run:
                self.up_prot.up_batch(run)

    def _reserve(self, n: int) -> bool:
        with self._held_lock:
            if self._held_bytes + n > self.max_held_bytes:
                return False
            self._held_bytes += n
            return True

    def _release(self, n: int) -> None:
        with self._held_lock:
            self._held_bytes -= n

    def _release_window(self, win: _ReceiveWindow) -> None:
        with win.lock:
            n, win.held_bytes = win.held_bytes, 0
            win.held.clear()
            win.closed = True
        self._release(n)

    def _ack(self, dest, seqno: int) -> None:
        m = Message(dest)
        m.put_header(self.id, SmackHeader(ACK, seqno))
        self.down_prot.down_msg(m)
        self.counters["acks_sent"] += 1

    def _on_ack(self, sender, seqno: int) -> None:
        if not self._add_member(sender):
            return
        self.counters["acks_received"] += 1
        with self._send_lock:
            p = self._pending.get(seqno)
            if p is None or sender not in p.waiting:
                self.counters["unexpected_acks"] += 1
                return
            p.waiting.discard(sender)
            if not p.waiting:
                del self._pending[seqno]

    # ---- retransmission ----

    def _start_retransmitter(self) -> None:
        timer = self.stack.timer if self.stack is not None else None
        if timer is None or self._xmit_task is not None:
            return
        tick = max(10, min(250, min(self.timeout) // 4))
        self._xmit_task = timer.schedule_with_fixed_delay(tick, tick, self._retransmit_due, "SMACK retransmitter")

    def _stop_retransmitter(self) -> None:
        task, self._xmit_task = self._xmit_task, None
        if task is not None:
            task.cancel()

    def _retransmit_due(self) -> None:
        now = now_ms()
        resend: list[tuple[Message, Any]] = []
        give_up: set = set()
        timeouts = self.timeout
        with self._send_lock:
            for seqno, p in list(self._pending.items()):
                if p.due > now:
                    continue
                if p.xmits >= self.max_xmits:
                    give_up |= p.waiting
                    del self._pending[seqno]
                    continue
                p.xmits += 1
                p.due = now + timeouts[min(p.xmits, len(timeouts) - 1)]
                resend.extend((p.msg, dest) for dest in p.waiting)
        for msg, dest in resend:
            copy = msg.copy()
            copy.dest = dest
            self.counters["xmits"] += 1
            try:
                self.down_prot.down_msg(copy)
            except Exception:  # noqa: BLE001 - the timer task must go on
                self._rl.exception("xmit", "%s: retransmitting to %s failed", self.me, dest)
        for m in give_up:
            self.log.info("%s: %s did not ack a multicast after %d retransmissions, removing it", self.me, m,
                          self.max_xmits)
            self.counters["members_removed_after_max_xmits"] += 1
            self._remove_member(m)

    # ---- membership ----

    def _may_add(self, mbr) -> bool:
        if mbr in self._members:
            return True
        if len(self._members) >= self.max_members:
            self.counters["dropped_member_limit"] += 1
            self._rl.warning("member-limit", "%s: %d members already (max_members): dropped a message from a "
                             "stranger", self.me, len(self._members))
            return False
        return True

    def _add_member(self, mbr) -> bool:
        """Add ``mbr`` (a new view up and down); False when the membership is full."""
        if mbr in self._members:
            return True
        with self._view_lock:
            if mbr in self._members:
                return True
            if not self._may_add(mbr):
                return False
            self._members = self._members + (mbr,)
            self._install()
        return True

    def _remove_member(self, mbr) -> None:
        with self._view_lock:
            if mbr not in self._members:
                return
            self._members = tuple(m for m in self._members if m != mbr)
            win = self._windows.pop(mbr, None)
            if win is not None:
                self._release_window(win)
            with self._send_lock:
                for seqno, p in list(self._pending.items()):
                    p.waiting.discard(mbr)
                    if not p.waiting:
                        del self._pending[seqno]
            self._install()

    def _install(self) -> None:
        """A view of the current members up and down (called under ``_view_lock``)."""
        view = View(ViewId(self.me, self._vid), list(self._members))
        self._vid += 1
        self.up_prot.up(Event(EventType.VIEW_CHANGE, view))
        self.down_prot.down(Event(EventType.VIEW_CHANGE, view))

    # ---- diagnostics ----

    def pending(self) -> dict[int, list]:
        """``{seqno: members whose ack is missing}`` of our unacked multicasts."""
        with self._send_lock:
            return {s: list(p.waiting) for s, p in self._pending.items()}

    def dump_stats(self) -> dict[str, Any]:
        with self._send_lock:
            pending = len(self._pending)
        return dict(self.counters, failed_msgs=self._guard.failed, pending=pending, held_bytes=self._held_bytes,
                    windows=len(self._windows), members=[str(m) for m in self._members])
