"""FD: failure detection by heartbeats to the right-hand neighbour (``org.jgroups.protocols.FD`` of 2.12).

Every member pings the member after it in the view (the last one pings the first; suspected members are
skipped): every ``timeout`` ms a Monitor task sends an OOB unicast HEARTBEAT (``FdHeader``) to that
``ping_dest``, which answers with an OOB HEARTBEAT_ACK (``from`` = itself). An ACK, or any other message
from ``ping_dest``, resets the missed-heartbeat counter and the time of the last ACK. When a run of the
Monitor finds no ACK for more than ``timeout`` + 500 ms (Java's latency allowance) it counts a miss; the
run after ``max_tries`` misses suspects ``ping_dest``. So a crashed neighbour is suspected between
``(max_tries + 1) * timeout`` and ``(max_tries + 2) * timeout`` ms after its last ACK.

A suspicion is multicast (OOB, ``FdHeader(SUSPECT, mbrs, from)``) by the Broadcaster right away and then
every ``timeout`` ms, until a view no longer holds any of the suspects or they were all unsuspected: FD
sits below NAKACK, so the multicast is unreliable and is repeated. As in Java 2.12, the running broadcast
keeps the suspects it was started with (plus any added), even when one of them is unsuspected or leaves,
until the whole list is resolved.

Every member receiving SUSPECT (the sender included: multicasts loop back) stops pinging the suspects,
picks its next neighbour and passes ``SUSPECT`` up (VERIFY_SUSPECT, GMS) and down; a member that finds
itself suspected answers the sender with a HEARTBEAT_ACK instead. ``UNSUSPECT`` coming down (from
VERIFY_SUSPECT, on an I_AM_NOT_DEAD) makes the member pingable again and removes it from the broadcast
list; 2.12 does not unsuspect on a late HEARTBEAT_ACK, which only resets the counter.
The Monitor runs only while the view has at least two members. FD messages are never passed up.
Unlike 2.12, a SUSPECT message from a sender that is not a member of the view is ignored, and of the
members it names only those in the view are suspected.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from jgpy._core.headers import FdHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import Protocol
from jgpy.stack.timer import now_ms

HEARTBEAT, HEARTBEAT_ACK, SUSPECT = FdHeader.HEARTBEAT, FdHeader.HEARTBEAT_ACK, FdHeader.SUSPECT
OOB = Message.OOB
LATENCY_ALLOWANCE_MS = 500       # Java: "increase timeout by 500msecs to allow for latency"


class FD(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FD"

    timeout = Property(to_int, 3000, "ms between two heartbeats to the neighbour; a heartbeat ack missing for "
                       "more than timeout + 500 ms counts as a miss")
    max_tries = Property(to_int, 2, "misses counted before the neighbour is suspected (on the next miss)")
    shun = Property(to_bool, False, "(no effect)", deprecated="shunning was removed in 2.12; the property is ignored")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self.members: list = []
        self.pingable_mbrs: list = []
        self.ping_dest = None
        self.last_ack = now_ms()
        self.num_tries = 0
        self._monitor = None
        self._addr = None
        # the Broadcaster
        self.suspected_mbrs: list = []
        self._bcast_lock = threading.Lock()
        self._bcast_task = None
        self._bcast_list: list = []          # what the running broadcast sends (Java's BroadcastTask list)
        # statistics
        self.num_heartbeats = 0
        self.num_heartbeat_acks_sent = 0
        self.num_suspect_events = 0
        self.num_suspect_msgs_sent = 0
        self.num_suspect_msgs_received = 0
        self.suspect_history: collections.deque = collections.deque(maxlen=20)
        self.num_suspect_msgs_ignored = 0
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an FD message", self._rl)

    # ---- life cycle ----

    def init(self) -> None:
        if self.timeout <= 0:
            raise ConfigError(f"FD: timeout={self.timeout}: timeout must be > 0 (ms between heartbeats)")

    def stop(self) -> None:
        with self._lock:
            self._stop_monitor()
        self._stop_broadcast()

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self.down_prot.down(evt)
            view = evt.arg
            mbrs = list(view.members or ()) if view is not None else []
            with self._lock:
                self.members = mbrs
                self._adjust_suspected(mbrs)
                self.pingable_mbrs = list(mbrs)
                self._restart_monitor()
            return None
        if t == EventType.UNSUSPECT:
            self.unsuspect(evt.arg)
        elif t == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
        return self.down_prot.down(evt)

    # ---- messages ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            self._guard.each(mine, self._handle_msg)
        if rest:
            dest = self.ping_dest
            if dest is not None:
                for m in rest:                  # data from the neighbour counts as a heartbeat
                    if m.src == dest:
                        self._update_timestamp(dest)
                        break
            self.up_prot.up_batch(rest)

    def _handle_msg(self, msg: Message) -> None:
        self._handle(msg, msg.get_header(self.id))

    def _handle(self, msg: Message, hdr: FdHeader) -> None:
        t = hdr.type
        if t == HEARTBEAT:
            self._send_heartbeat_ack(msg.src)
        elif t == HEARTBEAT_ACK:
            self._update_timestamp(hdr.from_)
        elif t == SUSPECT:
            self.num_suspect_msgs_received += 1
            if hdr.mbrs is None:
                return
            members = self.members
            if msg.src not in members:
                self.num_suspect_msgs_ignored += 1
                self._rl.warning("suspect-non-member", "%s: ignored a SUSPECT message from %s: not a member of "
                                 "%s", self.me, msg.src, members)
                return
            me = self.me
            for mbr in hdr.mbrs:
                if mbr is None or mbr not in members:
                    continue
                if me is not None and mbr == me:
                    self._rl.warning("suspected-me", "%s: I was suspected by %s; ignoring the SUSPECT message and "
                                     "sending back a HEARTBEAT_ACK", me, msg.src)
                    self._send_heartbeat_ack(msg.src)
                    continue
                with self._lock:
                    if mbr in self.pingable_mbrs:
                        self.pingable_mbrs.remove(mbr)
                    self._restart_monitor()
                self.up_prot.up(Event(EventType.SUSPECT, mbr))
                self.down_prot.down(Event(EventType.SUSPECT, mbr))
        # any other type: dropped, as in Java

    def _send_heartbeat_ack(self, dest) -> None:
        if dest is None:
            return
        ack = Message(dest, None, None, OOB)
        ack.put_header(self.id, FdHeader(HEARTBEAT_ACK, None, self.me))
        self.num_heartbeat_acks_sent += 1
        self.down_prot.down_msg(ack)

    def _update_timestamp(self, sender) -> None:
        with self._lock:
            if sender is not None and self.ping_dest is not None and sender == self.ping_dest:
                self.last_ack = now_ms()
                self.num_tries = 0

    def unsuspect(self, mbr) -> None:
        """``mbr`` is alive after all: ping it again and stop broadcasting it once the list is empty."""
        if mbr is None:
            return
        with self._lock:
            self._remove_suspected(mbr)
            suspected = set(self.suspected_mbrs)
            self.pingable_mbrs = [m for m in self.members if m not in suspected]
            self._restart_monitor()

    # ---- the monitor (with the lock held) ----

    def ping_dest_of(self, mbrs: list):
        """The member after us in ``mbrs`` (wrapping around); None when alone or not a member."""
        me = self.me
        if not mbrs or len(mbrs) < 2 or me is None:
            return None
        for i, m in enumerate(mbrs):
            if m == me:
                return mbrs[(i + 1) % len(mbrs)]
        return None

    def _restart_monitor(self) -> None:
        dest = self.ping_dest_of(self.pingable_mbrs)
        if dest is None or self.ping_dest is None or dest != self.ping_dest:
            self.ping_dest = dest
            self._stop_monitor()
            if dest is not None:
                self._start_monitor()

    def _start_monitor(self) -> None:
        if self._monitor is not None and not self._monitor.done:
            return
        timer = self.stack.timer if self.stack is not None else None
        if timer is None:
            self.log.warning("%s: no timer (stack not started): failure detection not started", self.me)
            return
        self.last_ack = now_ms()
        self.num_tries = 0
        self._monitor = timer.schedule_with_fixed_delay(self.timeout, self.timeout, self._monitor_run, "FD monitor")

    def _stop_monitor(self) -> None:
        task, self._monitor = self._monitor, None
        if task is not None:
            task.cancel()

    @property
    def is_monitoring(self) -> bool:
        with self._lock:
            return self._monitor is not None and not self._monitor.done

    def stop_failure_detection(self) -> None:
        with self._lock:
            self._stop_monitor()

    def start_failure_detection(self) -> None:
        with self._lock:
            self._start_monitor()

    def _monitor_run(self) -> None:
        with self._lock:
            dest = self.ping_dest
            if dest is None:
                self.log.warning("%s: ping_dest is null: members=%s, pingable_mbrs=%s", self.me, self.members,
                                 self.pingable_mbrs)
                return
        hb = Message(dest, None, None, OOB)
        hb.put_header(self.id, FdHeader(HEARTBEAT))
        self.down_prot.down_msg(hb)
        self.num_heartbeats += 1
        suspect = False
        with self._lock:
            if dest != self.ping_dest:           # changed while we were sending: the new monitor takes over
                return
            not_heard_from = now_ms() - self.last_ack
            if not_heard_from > self.timeout + LATENCY_ALLOWANCE_MS:
                if self.num_tries >= self.max_tries:
                    self.log.debug("%s: no heartbeat ack from %s for %d times (%d ms): suspecting it", self.me, dest,
                                   self.num_tries + 1, (self.num_tries + 1) * self.timeout)
                    self.num_tries = 0
                    suspect = True
                else:
                    self.log.debug("%s: heartbeat missing from %s (number=%d)", self.me, dest, self.num_tries)
                    self.num_tries += 1
        if suspect:
            if self.stats:
                self.num_suspect_events += 1
                self.suspect_history.append(dest)
            self._add_suspected(dest)

    # ---- the Broadcaster ----

    def _add_suspected(self, mbr) -> None:
        with self._lock:
            if mbr is None or mbr not in self.members or mbr in self.suspected_mbrs:
                return
            self.suspected_mbrs.append(mbr)
        self._start_broadcast(mbr)

    def _remove_suspected(self, mbr) -> None:
        """(lock held)"""
        if mbr in self.suspected_mbrs:
            self.suspected_mbrs.remove(mbr)
        if not self.suspected_mbrs:
            self._stop_broadcast()

    def _adjust_suspected(self, mbrs: list) -> None:
        """(lock held) Keep only suspects that are still members; stop broadcasting when none are left."""
        if not mbrs:
            return
        keep = set(mbrs)
        self.suspected_mbrs = [m for m in self.suspected_mbrs if m in keep]
        if not self.suspected_mbrs:
            self._stop_broadcast()

    def _start_broadcast(self, suspect) -> None:
        with self._bcast_lock:
            if self._bcast_task is None or self._bcast_task.done:
                timer = self.stack.timer if self.stack is not None else None
                if timer is None:
                    return
                self._bcast_list = [m for m in self.suspected_mbrs]
                if suspect not in self._bcast_list:
                    self._bcast_list.append(suspect)
                self._bcast_task = timer.schedule_with_fixed_delay(0, self.timeout, self._broadcast_run,
                                                                   "FD broadcast")
            elif suspect not in self._bcast_list:
                self._bcast_list.append(suspect)

    def _stop_broadcast(self) -> None:
        with self._bcast_lock:
            task, self._bcast_task = self._bcast_task, None
            self._bcast_list = []
        if task is not None:
            task.cancel()

    @property
    def is_broadcasting(self) -> bool:
        with self._bcast_lock:
            return self._bcast_task is not None and not self._bcast_task.done

    def _broadcast_run(self) -> None:
        with self._bcast_lock:
            mbrs = list(self._bcast_list)
        if not mbrs:
            return
        msg = Message(None, None, None, OOB)
        msg.put_header(self.id, FdHeader(SUSPECT, mbrs, self.me))
        self.log.debug("%s: broadcasting SUSPECT message [suspected_mbrs=%s] to group", self.me, mbrs)
        self.num_suspect_msgs_sent += 1
        self.down_prot.down_msg(msg)

    # ---- diagnostics ----

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {"num_heartbeats": self.num_heartbeats, "num_heartbeat_acks_sent": self.num_heartbeat_acks_sent,
                    "num_suspect_events": self.num_suspect_events, "num_suspect_msgs_sent": self.num_suspect_msgs_sent,
                    "num_suspect_msgs_received": self.num_suspect_msgs_received, "num_tries": self.num_tries,
                    "num_suspect_msgs_ignored": self.num_suspect_msgs_ignored, "failed_msgs": self._guard.failed,
                    "ping_dest": str(self.ping_dest) if self.ping_dest is not None else None,
                    "members": [str(m) for m in self.members],
                    "pingable_mbrs": [str(m) for m in self.pingable_mbrs],
                    "suspected": [str(m) for m in self.suspected_mbrs]}
