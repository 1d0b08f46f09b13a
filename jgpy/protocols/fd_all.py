"""FD_ALL: failure detection by multicast heartbeats (``org.jgroups.protocols.FD_ALL`` of 2.12).

Every member multicasts an OOB heartbeat (an empty ``HeartbeatHeader``, no payload) every ``interval``
ms and keeps a timestamp per member: a heartbeat from P (or, with ``msg_counts_as_heartbeat``, any
message from P) sets P's timestamp to now. Every ``interval`` ms the timestamps are checked and the
members not heard from for more than ``timeout`` ms are suspected.

As in Java 2.12, nothing is multicast on a suspicion: only the member that is first in the view once
the suspects are taken out (the coordinator, or the next member if the coordinator is among the
suspects) passes ``SUSPECT`` up (to VERIFY_SUSPECT / GMS) and down; everybody else just records the
suspicion. A silent member is suspected again on every check until a view without it arrives. Both
tasks run only while the view has more than one member. Heartbeats are consumed here.

Unlike 2.12, only members of the view get a timestamp: a heartbeat (or, with ``msg_counts_as_heartbeat``,
any message) from a sender that is not a member is ignored, so made-up senders neither grow the table nor
get suspected.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from jgpy._core.headers import HeartbeatHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_EVERY, UP_HEADER, Protocol
from jgpy.stack.timer import now_ms


class FD_ALL(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FD_ALL"

    interval = Property(to_int, 3000, "ms between two heartbeats multicast to the cluster (and between two "
                        "checks of the timestamps)")
    timeout = Property(to_int, 10000, "ms without a heartbeat (or data) from P after which P is suspected")
    msg_counts_as_heartbeat = Property(to_bool, False, "treat any message received from P as a heartbeat of P "
                                       "(jgpy updates the timestamp once per batch per sender)")
    shun = Property(to_bool, False, "(no effect)", deprecated="shunning was removed in 2.12; the property is ignored")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._timestamps: dict[Any, float] = {}     # member -> last heard of (monotonic ms)
        self.members: list = []
        self._member_set: frozenset = frozenset()
        self._guard = MessageGuard(self, "an FD_ALL heartbeat")
        self.suspected_mbrs: set = set()
        self.suspect_history: collections.deque = collections.deque(maxlen=20)
        self._addr = None                            # from SET_LOCAL_ADDRESS (else the stack's)
        self._heartbeat_task = None
        self._checker_task = None
        self.num_heartbeats_sent = 0
        self.num_heartbeats_received = 0
        self.num_suspect_events = 0

    # ---- life cycle ----

    def init(self) -> None:
        if self.interval <= 0:
            raise ConfigError(f"FD_ALL: interval must be > 0 (is {self.interval})")

    def stop(self) -> None:
        self._stop_heartbeat_sender()
        self._stop_timeout_checker()
        with self._lock:
            self.suspected_mbrs.clear()

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self.down_prot.down(evt)
            self._handle_view_change(evt.arg)
            return None
        if t == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
        return self.down_prot.down(evt)

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_EVERY if self.msg_counts_as_heartbeat else UP_HEADER

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            self._guard.each(mine, self._heartbeat)
            self.num_heartbeats_received += len(mine)
        if rest:
            if self.msg_counts_as_heartbeat:
                seen = set()
                for m in rest:
                    src = m.src
                    if src not in seen:
                        seen.add(src)
                        self._update(src)
            self.up_prot.up_batch(rest)

    def _heartbeat(self, msg: Message) -> None:
        self._update(msg.src)

    def _update(self, sender) -> None:
        if sender is None or sender not in self._member_set:
            return
        me = self.me
        if me is not None and sender == me:
            return
        with self._lock:
            self._timestamps[sender] = now_ms()

    # ---- view ----

    def _handle_view_change(self, view) -> None:
        mbrs = list(view.members or ()) if view is not None else []
        keep = set(mbrs)
        with self._lock:
            self.members = mbrs
            self._member_set = frozenset(keep)
            self.suspected_mbrs &= keep
            for a in [a for a in self._timestamps if a not in keep]:
                del self._timestamps[a]
        me = self.me
        for m in mbrs:                 # everybody starts afresh with the new view
            if me is None or m != me:
                self._update(m)
        if len(mbrs) > 1:
            self._start_heartbeat_sender()
            self._start_timeout_checker()
        else:
            self._stop_heartbeat_sender()
            self._stop_timeout_checker()

    # ---- tasks ----

    def _start_heartbeat_sender(self) -> None:
        with self._lock:
            if self._heartbeat_task is None or self._heartbeat_task.done:
                timer = self.stack.timer if self.stack is not None else None
                if timer is None:
                    return
                self._heartbeat_task = timer.schedule_with_fixed_delay(self.interval, self.interval,
                                                                       self._send_heartbeat, "FD_ALL heartbeat")

    def _stop_heartbeat_sender(self) -> None:
        with self._lock:
            task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()

    def _start_timeout_checker(self) -> None:
        with self._lock:
            if self._checker_task is None or self._checker_task.done:
                timer = self.stack.timer if self.stack is not None else None
                if timer is None:
                    return
                self._checker_task = timer.schedule_with_fixed_delay(self.interval, self.interval,
                                                                     self._check_timeouts, "FD_ALL timeout checker")

    def _stop_timeout_checker(self) -> None:
        with self._lock:
            task, self._checker_task = self._checker_task, None
        if task is not None:
            task.cancel()

    @property
    def is_running(self) -> bool:
        with self._lock:
            return (self._heartbeat_task is not None and not self._heartbeat_task.done and
                    self._checker_task is not None and not self._checker_task.done)

    def _send_heartbeat(self) -> None:
        hb = Message(None, None, None, Message.OOB)
        hb.put_header(self.id, HeartbeatHeader())
        self.down_prot.down_msg(hb)
        self.num_heartbeats_sent += 1

    def _check_timeouts(self) -> None:
        now = now_ms()
        with self._lock:
            suspects = [a for a, ts in self._timestamps.items() if now - ts > self.timeout]
        if suspects:
            for a in suspects:
                self.log.debug("%s: no heartbeat from %s for more than %d ms, suspecting it", self.me, a,
                               self.timeout)
            self.suspect(suspects)

    def suspect(self, suspects: list) -> None:
        """Record the suspects; the first member not suspected passes SUSPECT up and down (Java's rule)."""
        if not suspects:
            return
        self.num_suspect_events += len(suspects)
        with self._lock:
            for s in suspects:
                self.suspect_history.append(s)
                self.suspected_mbrs.add(s)
            eligible = [m for m in self.members if m not in self.suspected_mbrs]
        me = self.me
        if me is not None and eligible and eligible[0] == me:
            self.log.debug("%s: suspecting %s", me, suspects)
            for s in suspects:
                self.up_prot.up(Event(EventType.SUSPECT, s))
                self.down_prot.down(Event(EventType.SUSPECT, s))

    # ---- diagnostics ----

    def timestamps(self) -> dict:
        """``{member: ms since last heard of}``."""
        now = now_ms()
        with self._lock:
            return {a: now - ts for a, ts in self._timestamps.items()}

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {"num_heartbeats_sent": self.num_heartbeats_sent,
                    "num_heartbeats_received": self.num_heartbeats_received, "failed_msgs": self._guard.failed,
                    "num_suspect_events": self.num_suspect_events,
                    "members": [str(m) for m in self.members],
                    "suspected": [str(m) for m in self.suspected_mbrs]}
