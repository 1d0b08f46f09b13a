"""pbcast.STABLE: agree on which messages everybody has, so NAKACK can purge them (seed 000).

Every member keeps a digest of the highest seqno *delivered* per sender. It gossips its digest
(STABLE_GOSSIP) at random intervals (average ``desired_avg_gossip`` per member) and after ``max_bytes`` of
received multicasts. A received digest lowers ours to the minimum (highest delivered) and raises the
highest received; the sender goes on the heard-from list. A digest with other senders than ours resets the
round (no unilateral action). When everybody has been heard from, the digest is stable: after a random
delay (up to ``stability_delay``) it is multicast as STABILITY, unless somebody else's STABILITY came
first; on STABILITY, NAKACK purges and asks for any "last message" it missed.

Unlike 2.12, STABLE_GOSSIP and STABILITY from senders that are not members of the view are ignored (and
counted): a stranger's vote would keep the votes from ever matching the members (no stability, so NAKACK's
windows would grow forever), and a stranger's STABILITY would purge messages others may still need.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from jgpy._core.batch import total_length
from jgpy._core.headers import StableHeader
from jgpy._core.message import Message
from jgpy._core.types import Digest
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_float, to_int, to_size
from jgpy.stack.protocol import UP_HEADER, UP_MULTICASTS, Protocol

STABLE_GOSSIP, STABILITY = StableHeader.STABLE_GOSSIP, StableHeader.STABILITY
MAX_SUSPEND_TIME = 200000


class STABLE(Protocol):
    NAME = "pbcast.STABLE"

    desired_avg_gossip = Property(to_int, 20000, "average ms between stability gossips a member receives")
    stability_delay = Property(to_int, 6000, "max random ms to wait before multicasting STABILITY")
    max_bytes = Property(to_size, 2000000, "bytes of received multicasts that trigger a gossip (0: never)")
    cap = Property(to_float, 0.10, "ergonomics: max_bytes is at most this fraction of the heap (ignored: Python "
                   "has no fixed heap)")
    digest_timeout = Property(to_int, 0, "(2.12: deprecated)", deprecated="ignored, as in 2.12")
    max_gossip_runs = Property(to_int, 0, "(2.12: deprecated)", deprecated="ignored, as in 2.12")
    max_suspend_time = Property(to_int, 0, "(2.12: deprecated)", deprecated="ignored, as in 2.12")

    def __init__(self) -> None:
        super().__init__()
        self.mbrs: list = []
        self.digest: dict = {}           # sender -> [low, highest_delivered, highest_received]
        self.votes: set = set()
        self.initialized = False
        self.suspended = False
        self._lock = threading.Lock()
        self._bytes = 0
        self._stable_task = None
        self._stability_task = None
        self._resume_task = None
        self.counters = dict.fromkeys(("stable_sent", "stable_received", "stability_sent", "stability_received",
                                       "digest_resets", "dropped_non_member"), 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a STABLE message", self._rl)

    # ---- life cycle ----

    def start(self) -> None:
        if self.desired_avg_gossip > 0:
            self._stable_task = self.timer.schedule_dynamic(self._next_gossip_interval, self._gossip, "STABLE gossip")

    def stop(self) -> None:
        for t in (self._stable_task, self._stability_task, self._resume_task):
            if t is not None:
                t.cancel()
        self._stable_task = self._stability_task = self._resume_task = None
        self.initialized = False

    def _next_gossip_interval(self) -> float:
        r = random.random() * (len(self.mbrs) * self.desired_avg_gossip * 2)
        return r if r > 0 else 10000

    # ---- digest bookkeeping ----

    def _nakack_digest(self) -> Digest | None:
        return self.down_prot.down(Event(EventType.GET_DIGEST))

    def _reset_digest(self) -> None:
        d = self._nakack_digest()
        self.digest = {a: [lo, hd, hr] for a, lo, hd, hr in d.entries()} if d is not None else {}
        self.votes.clear()
        self.counters["digest_resets"] += 1

    def _update_local_digest(self, d: Digest, sender) -> bool:
        if d is None or len(d) == 0 or not self.initialized:
            return False
        if set(d) != set(self.digest):              # not the same senders: reset (no unilateral action)
            self._reset_digest()
            return False
        for mbr, low, hd, hr in d.entries():
            mine = self.digest[mbr]
            mine[0] = min(mine[0], low)
            mine[1] = min(mine[1], hd)
            mine[2] = max(mine[2], hr)
        return True

    def _digest_copy(self) -> Digest:
        return Digest([(a, v[0], v[1], v[2]) for a, v in self.digest.items()])

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_HEADER | UP_MULTICASTS if self.max_bytes > 0 else UP_HEADER   # max_bytes counts multicasts

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            self._guard.each(mine, self._handle_msg)
        if rest:
            if self.max_bytes > 0:
                self._count_bytes(rest)
            self.up_prot.up_batch(rest)

    def _handle_msg(self, msg: Message) -> None:
        hdr = msg.get_header(self.id)
        if hdr.type not in (STABLE_GOSSIP, STABILITY):
            return
        if msg.src not in self.mbrs:
            self.counters["dropped_non_member"] += 1
            self._rl.warning("non-member", "%s: dropped a STABLE message from %s: not a member of %s",
                             self.local_addr, msg.src, self.mbrs)
            return
        if hdr.type == STABLE_GOSSIP:
            self._handle_stable(msg.src, hdr.stable_digest)
        else:
            self._handle_stability(hdr.stable_digest, msg.src)

    def _count_bytes(self, msgs: list) -> None:
        n = total_length(msgs, multicasts_only=True)
        if not n:
            return
        send = False
        with self._lock:
            self._bytes += n
            if self._bytes >= self.max_bytes:
                self._bytes = 0
                send = True
        if send:
            self._send_stable(self._nakack_digest())

    def _handle_stable(self, sender, d: Digest) -> None:
        if d is None or sender is None or not self.initialized or self.suspended:
            return
        copy = None
        with self._lock:
            if sender in self.votes:
                return
            self.counters["stable_received"] += 1
            if not self._update_local_digest(d, sender):
                return
            self.votes.add(sender)
            if self.votes == set(self.mbrs):
                copy = self._digest_copy()
        if copy is not None:
            self._schedule_stability(copy)

    def _handle_stability(self, d: Digest, sender) -> None:
        if d is None or not self.initialized or self.suspended:
            return
        if self._stability_task is not None:
            self._stability_task.cancel()
            self._stability_task = None
        with self._lock:
            if set(d) != set(self.digest):
                self._reset_digest()
                return
            self.counters["stability_received"] += 1
            self._reset_digest()
        self.down_prot.down(Event(EventType.STABLE, d))

    def _gossip(self) -> None:
        if self.suspended:
            return
        d = self._nakack_digest()
        if d is None:
            self.log.warning("received a null digest, skipped sending of a stable message")
            return
        self._send_stable(d)

    def _send_stable(self, d: Digest | None) -> None:
        if self.suspended or d is None or len(d) == 0:
            return
        msg = Message(None, None, None, Message.OOB)
        msg.put_header(self.id, StableHeader(STABLE_GOSSIP, d))
        self.counters["stable_sent"] += 1
        if self.timer is not None:
            self.timer.execute(lambda: self.down_prot.down_msg(msg), "send STABLE_GOSSIP")

    def _schedule_stability(self, d: Digest) -> None:
        if self.suspended:
            return
        if self._stability_task is not None and not self._stability_task.done:
            return
        delay = random.random() * self.stability_delay
        self._stability_task = self.timer.schedule(delay, lambda: self._send_stability(d), "send STABILITY")

    def _send_stability(self, d: Digest) -> None:
        if self.suspended:
            return
        msg = Message(None, None, None, Message.OOB)
        msg.put_header(self.id, StableHeader(STABILITY, d))
        self.counters["stability_sent"] += 1
        self.down_prot.down_msg(msg)

    def run_message_garbage_collection(self) -> None:
        """Gossip right now (e.g. before a test checks that windows get purged)."""
        self._send_stable(self._nakack_digest())

    # ---- suspension (during joins and merges) ----

    def _suspend(self, timeout: int) -> None:
        self.suspended = True
        max_suspend = int(timeout * 1.1) if timeout and timeout > 0 else MAX_SUSPEND_TIME
        if self._resume_task is None or self._resume_task.done:
            self._resume_task = self.timer.schedule(max_suspend, self._auto_resume, "STABLE resume")

    def _auto_resume(self) -> None:
        if self.suspended:
            self.log.warning("ResumeTask resumed message garbage collection - this should be done by a "
                             "RESUME_STABLE event")
        self._resume()

    def _resume(self) -> None:
        with self._lock:
            self._reset_digest()
            self.suspended = False
        if self._resume_task is not None:
            self._resume_task.cancel()
            self._resume_task = None

    # ---- events ----

    def _handle_view(self, view) -> None:
        self.mbrs = list(view.members or ())
        with self._lock:
            self._reset_digest()
            self.initialized = True

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            ret = self.up_prot.up(evt)
            self._handle_view(evt.arg)
            return ret
        return self.up_prot.up(evt)

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            ret = self.down_prot.down(evt)
            self._handle_view(evt.arg)
            return ret
        if t == EventType.SUSPEND_STABLE:
            self._suspend(evt.arg if isinstance(evt.arg, int) else 0)
        elif t == EventType.RESUME_STABLE:
            self._resume()
        return self.down_prot.down(evt)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["suspended"] = self.suspended
        d["votes"] = len(self.votes)
        d["failed_msgs"] = self._guard.failed
        return d
