"""SEQUENCER: total order through the coordinator (``org.jgroups.protocols.SEQUENCER``, JGroups 2.12.2).

A member does not multicast itself: it marshals its multicast (``Util.objectToByteBuffer(msg)``), keeps it in
its *forward table* under its own seqno and sends it to the coordinator as a FORWARD unicast whose header tags
it ``ViewId(original sender, seqno)``. The coordinator multicasts it as a WRAPPED_BCAST (the same bytes, the
same tag) through NAKACK, so all members deliver the coordinator's single FIFO stream: one total order. The
coordinator's own multicasts go out directly as BCAST. A receiver unwraps a WRAPPED_BCAST (the original
message, the original sender as src), drops what it delivered before (per original sender: the next expected
seqno plus the seqnos seen above it, as 2.12's ``SeqnoTable``) and passes it up; when the original sender gets
its own message back, it removes it from its forward table. When the coordinator changes (a view, or a
SUSPECT of the coordinator), every member resends what is still in its forward table, in seqno order, to the
new coordinator; duplicates are dropped by the receivers. Wire format and behaviour are 2.12's; 2.12's
SEQUENCER has no properties of its own, its counters are ``forwarded``, ``broadcast``, ``received_forwards``,
``received_bcasts``.

The per-message path, both ways, is the C core this class derives from (``jgpy._core.sequencer``); view changes,
SUSPECTs, resends and everything a stranger can trigger are here. With UNICAST below, the coordinator relays a
member's FORWARDs as UNICAST releases them, on the thread that received them (``ForwardTap``), as Java's relays
run on the thread that received them, not behind every delivery queued on the delivery thread.

Where jgpy deviates (each closes a hole 2.12 has; nothing changes on the wire):

* a FORWARD that reaches a member before it knows it is the new coordinator is kept (bounded:
  ``max_pending_forwards``) and broadcast once it becomes coordinator; 2.12 drops it and the message is lost
  (JGRP-1449). A member that becomes coordinator broadcasts its own forward table itself instead of
  forwarding it to itself (as later JGroups versions do);
* on a SUSPECT of the coordinator a member that is not next in line holds its multicasts (in its forward
  table) until the next view, at most ``max_hold_time``, and then resends them all, in order, to that view's
  coordinator: 2.12 resends at once, and a new coordinator that has not processed the SUSPECT yet drops
  them, while later ones reach it: lost or reordered. Sends are ordered with the resend (``_send_lock``), so a
  member's messages keep their order across a coordinator change;
* hostile input: a FORWARD is relayed only from a member of the view whose tag names that member (2.12 relays
  anyone's); BCAST/WRAPPED_BCAST are accepted only as multicasts from a member that is or may be the sequencer
  (the coordinator of this or the previous view, the member next in line, a coordinator chosen on a SUSPECT;
  2.12 delivers them from anybody) and a WRAPPED_BCAST only if its payload is a multicast of a member of this
  or the previous view whose src is the tag's sender; a header of an unknown type is dropped (2.12 passes the
  message up). Each is counted and dropped alone;
* duplicate detection: a seqno already seen above the next expected one is a duplicate (2.12's ``SeqnoTable``
  delivers it again); the first seqno seen from a sender starts its table (2.12 expects 0, so a member that
  joined late keeps every later seqno of older members in a set for ever); what was received above the next
  expected seqno is kept as runs, whose number is bounded (``delivery_table_max_size``; beyond it the oldest
  gap is given up: a few runs of thousands of seqnos, as a coordinator change makes, are kept whole, so a
  late resend is still delivered); the table holds members of the current and the previous view only.

A 2.12 member that becomes the coordinator while it is multicasting breaks its own FIFO order: it resends its
forward table to itself as FORWARDs (through UNICAST's loopback, then wrapped), while its new multicasts go
out at once as BCASTs, so everybody delivers its messages in the same (total) order but not in its send order.
A jgpy member cannot repair that without leaving the total order: it delivers them as the sequencer ordered
them. (A jgpy member taking over broadcasts its forward table before any new multicast.)

What SEQUENCER without FLUSH cannot do, in 2.12 as here: a multicast of the old coordinator that some members
missed (dropped by their socket) and that the coordinator did not retransmit before it crashed stays missing
at those members if its original sender had received it.
"""

from __future__ import annotations

import threading
from typing import Any

from jgpy._core.headers import SequencerHeader
from jgpy._core.message import Message
from jgpy._core.sequencer import ForwardTap, SeqnoWindow, SequencerCore
from jgpy._core.types import MergeView, View, ViewId
from jgpy.protocols.guard import MessageGuard, retained_bytes
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, to_int, to_size
from jgpy.stack.protocol import UP_HEADER, Protocol

FORWARD, BCAST, WRAPPED_BCAST = SequencerHeader.FORWARD, SequencerHeader.BCAST, SequencerHeader.WRAPPED_BCAST
NO_TOTAL_ORDER = Message.NO_TOTAL_ORDER

#: jgpy's drop counters (dump_stats)
DROP_COUNTERS = ("dropped_malformed", "dropped_forward_non_member", "dropped_forward_not_coord",
                 "dropped_not_sequencer", "dropped_non_member_sender", "pending_forwards_dropped")

#: the log line of each drop counted by :meth:`SEQUENCER._dropped` (``who``: the sender it names)
_DROP_LOGS = {"dropped_forward_non_member": "%s: dropped a FORWARD from non-member %s",
              "dropped_not_sequencer": "%s: dropped a broadcast from %s, which is not the sequencer",
              "dropped_non_member_sender": "%s: dropped a WRAPPED_BCAST of non-member %s"}


class SEQUENCER(SequencerCore, Protocol):
    NAME = "SEQUENCER"

    delivery_table_max_size = CoreProperty(
        to_int, 2000, "jgpy (named as JGroups 3's property): runs of seqnos (told apart by gaps) received above "
        "the next expected one that are kept per original sender for duplicate detection; beyond that the oldest "
        "gap is given up")
    max_pending_forwards = Property(
        to_int, 10000, "jgpy: FORWARDs from members received while not (yet) the coordinator that are kept, and "
        "broadcast if a view or a SUSPECT makes this member the coordinator (2.12 drops them); 0: drop them")
    max_pending_forward_bytes = Property(
        to_size, 16 << 20, "jgpy: bytes (of the datagrams they keep alive) of those FORWARDs")
    max_hold_time = Property(
        to_int, 10000, "jgpy: ms a member holds its multicasts after a SUSPECT of the coordinator, waiting for the "
        "view that names the new one (then they are resent to the coordinator it knows)")

    def __init__(self) -> None:
        super().__init__()
        self._send_lock = threading.Lock()     # sends, coordinator changes and resends, in one order
        self._lock = threading.Lock()          # the forward and delivery tables (also taken by OOB threads)
        self._seqno = 0
        self._forward_table: dict[int, bytes] = {}         # seqno -> marshalled message, in seqno order
        self._delivery_table: dict[Any, SeqnoWindow] = {}  # original sender -> what was delivered from it
        self._pending: list[Message] = []                  # FORWARDs received while not the coordinator
        self._pending_bytes = 0
        self._view: View | None = None
        self._members: tuple = ()
        self._member_set: frozenset = frozenset()
        self._known: frozenset = frozenset()               # members of this and the previous view
        self._sequencers: frozenset = frozenset()          # whose BCASTs are accepted
        self._suspected: set = set()
        self._holding = False                              # a SUSPECT of the coordinator: forward after the view
        self._hold_task: Any = None
        self.coord: Any = None
        self.is_coord = False
        self.forwarded_msgs = self.bcast_msgs = self.received_forwards = self.received_bcasts = 0
        self.delivered_bcasts = self.duplicates = self.gaps_given_up = 0
        self.counters = dict.fromkeys(DROP_COUNTERS, 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a SEQUENCER message", self._rl)

    # ---- JMX-like attributes (2.12's names) ----

    @property
    def forward_table_size(self) -> int:
        return len(self._forward_table)

    def is_coordinator(self) -> bool:
        return self.is_coord

    def reset_stats(self) -> None:
        self.forwarded_msgs = self.bcast_msgs = self.received_forwards = self.received_bcasts = 0
        self.delivered_bcasts = self.duplicates = self.gaps_given_up = 0
        self.counters = dict.fromkeys(DROP_COUNTERS, 0)

    def dump_stats(self) -> dict[str, Any]:
        d: dict[str, Any] = {"forwarded": self.forwarded_msgs, "broadcast": self.bcast_msgs,
                             "received_forwards": self.received_forwards, "received_bcasts": self.received_bcasts,
                             "delivered_bcasts": self.delivered_bcasts, "is_coord": self.is_coord,
                             "coord": str(self.coord) if self.coord is not None else None,
                             "forward_table": len(self._forward_table), "pending_forwards": len(self._pending),
                             "delivery_table": {str(k): repr(v) for k, v in list(self._delivery_table.items())},
                             "failed_msgs": self._guard.failed, "duplicates": self.duplicates,
                             "gaps_given_up": self.gaps_given_up,
                             "relayed_at_ordering_point": self._tap.relayed if self._tap is not None else 0}
        d.update(self.counters)
        return d

    # ---- life cycle ----

    def start(self) -> None:
        """With UNICAST below, FORWARDs are relayed at its ordering point (:class:`ForwardTap`)."""
        protocols = self.stack.protocols
        unicast = self.stack.find("UNICAST")
        if unicast is not None and protocols.index(unicast) < protocols.index(self):
            self._tap = unicast.tap = ForwardTap(self)

    def stop(self) -> None:
        unicast = self.stack.find("UNICAST")
        if unicast is not None and self._tap is not None and unicast.tap is self._tap:
            unicast.tap = None
        self._tap = None
        with self._send_lock, self._lock:
            self._forward_table.clear()
            self._delivery_table.clear()
            self._pending.clear()
            self._pending_bytes = 0
            self._view = None
            self._members, self._member_set, self._known, self._sequencers = (), frozenset(), frozenset(), frozenset()
            self._suspected.clear()
            self._end_hold()
            self.coord, self.is_coord = None, False

    # ---- events ----

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            ret = self.up_prot.up(evt)
            self._handle_view(evt.arg)
            return ret
        if t == EventType.SUSPECT:
            self._handle_suspect(evt.arg)
        return self.up_prot.up(evt)

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._handle_view(evt.arg)
        return self.down_prot.down(evt)

    def _handle_view(self, view: View) -> None:
        mbrs = tuple(view.members or ())
        if not mbrs:
            return
        with self._send_lock:
            if self._view is not None and view.vid.compare_to(self._view.vid) <= 0:
                return                                         # the same view (up and down) or an older one
            prev_coord, prev_view_coord, prev_members = self.coord, self._view_coord(), self._members
            self._view = view
            self._members, self._member_set = mbrs, frozenset(mbrs)
            self._known = self._member_set | frozenset(prev_members)
            self._suspected.clear()
            seqs = {mbrs[0], prev_view_coord, prev_coord}
            if len(mbrs) > 1:
                seqs.add(mbrs[1])                              # next in line: takes over on a SUSPECT
            if isinstance(view, MergeView):
                seqs.update(sg.members[0] for sg in view.subgroups or () if sg.members)
            seqs.discard(None)
            self._sequencers = frozenset(seqs)
            new_coord = mbrs[0]
            resend = new_coord != prev_coord or self._holding
            self._end_hold()
            self._set_coord(new_coord, resend)
            if not self.is_coord and self._pending:
                self.counters["pending_forwards_dropped"] += len(self._pending)
                self._pending.clear()
                self._pending_bytes = 0
        with self._lock:
            for sender in [s for s in self._delivery_table if s not in self._known]:
                del self._delivery_table[sender]

    def _view_coord(self) -> Any:
        return self._members[0] if self._members else None

    def _handle_suspect(self, mbr: Any) -> None:
        """2.12's handleSuspect: the first member not suspected is the coordinator from now on. If that is us, we
        take over at once; else our multicasts wait for the view (see the module's docstring)."""
        with self._send_lock:
            if mbr not in self._member_set:
                return
            self._suspected.add(mbr)
            rest = [m for m in self._members if m not in self._suspected]
            if not rest or rest[0] == self.coord:
                return
            self._sequencers = self._sequencers | {rest[0]}
            if rest[0] == self.local_addr:
                self._set_coord(rest[0], True)
                return
            self.coord = rest[0]
            if not self._holding and self.max_hold_time > 0 and self.stack.timer is not None:
                self._holding = True
                self._hold_task = self.timer.schedule(self.max_hold_time, self._hold_expired, "SEQUENCER hold")

    def _end_hold(self) -> None:
        """(send lock held)"""
        self._holding = False
        if self._hold_task is not None:
            self._hold_task.cancel()
            self._hold_task = None

    def _hold_expired(self) -> None:
        with self._send_lock:
            if not self._holding:
                return
            self._end_hold()
            self._rl.warning("hold-expired", "%s: no view %d ms after the coordinator was suspected: resending to %s",
                             self.local_addr, self.max_hold_time, self.coord)
            self._set_coord(self.coord, True)

    def _set_coord(self, new_coord: Any, resend: bool) -> None:
        """(send lock held) Make ``new_coord`` our coordinator; on a change, what we forwarded and did not see
        delivered goes to it again, in seqno order (or out to everybody if we are the coordinator now)."""
        was_coord = self.is_coord
        self.coord = new_coord
        self.is_coord = new_coord is not None and new_coord == self.local_addr
        if self.is_coord:
            resend = not was_coord               # what we broadcast ourselves needs no second copy
        if not resend:
            return
        with self._lock:
            entries = list(self._forward_table.items())
        if self.is_coord:
            for seqno, buf in entries:
                self._broadcast(self.local_addr, seqno, buf, 0, len(buf))
            pending, self._pending, self._pending_bytes = self._pending, [], 0
            for msg in pending:
                if msg.src in self._known:
                    self._relay(msg, msg.get_header(self.id))
        elif new_coord is not None:
            for seqno, buf in entries:
                self._forward(new_coord, seqno, buf)

    # ---- up (the common case is the core's: SequencerCore.up_batch) ----

    def up_needs(self) -> int:
        return UP_HEADER

    def _malformed(self, what: str, msg: Message) -> None:
        self.counters["dropped_malformed"] += 1
        self._rl.warning("malformed-" + what, "%s: dropped a SEQUENCER message from %s: bad %s (%d so far)",
                         self.local_addr, msg.src, what, self.counters["dropped_malformed"])

    def _dropped(self, counter: str, who: Any) -> None:
        """A message from somebody it may not come from (``counter`` in :data:`DROP_COUNTERS`)."""
        self.counters[counter] += 1
        self._rl.warning(counter, _DROP_LOGS[counter], self.local_addr, who)

    def _keep_pending(self, msg: Message) -> None:
        """A FORWARD while we are not the coordinator: kept (bounded) in case we are about to become it."""
        with self._send_lock:
            self._keep_pending_locked(msg)

    def _keep_pending_locked(self, msg: Message) -> None:
        """(send lock held) :meth:`_keep_pending`."""
        if self.is_coord:                            # became the coordinator meanwhile
            self._relay(msg, msg.get_header(self.id))
            return
        size = retained_bytes([msg])
        if len(self._pending) < self.max_pending_forwards and \
                self._pending_bytes + size <= self.max_pending_forward_bytes:
            self._pending.append(msg)
            self._pending_bytes += size
            return
        self.counters["dropped_forward_not_coord"] += 1
        self._rl.warning("forward-not-coord", "%s: not the coordinator (%s is): dropped a FORWARD from %s",
                         self.local_addr, self.coord, msg.src)
