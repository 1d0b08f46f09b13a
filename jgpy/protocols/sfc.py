"""SFC: simple flow control of multicasts (``org.jgroups.protocols.SFC`` of 2.12, the jar's ``sfc.xml``).

A sender has ``max_credits`` bytes for the whole group. When a multicast takes it to zero or below, it sends a
CREDIT_REQUEST to the group after that message and blocks its next multicast until every member answered with
REPLENISH (OOB unicast), or a view without the missing ones came. Blocked for ``max_block_time``, it asks again
with an URGENT_CREDIT_REQUEST. A receiver counts the payload bytes it received from each member; it answers a
request at once when it received ``max_credits`` since its last answer (an urgent request always), else once it
has. Unicasts pass untouched.

jgpy keeps 2.12's wire and behaviour, and bounds what a stranger can do: only members' bytes are counted and
only members' requests are remembered (a non-member's request is answered, as 2.12 does, and forgotten), and a
REPLENISH counts only from a member we wait for. A message sent by a thread that is passing a message up through
this protocol (an answer from ``receive()``) is not blocked (jgpy, as its MFC: JGRP-465), so that a member that
multicasts from ``receive()`` cannot stop the delivery that would unblock it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jgpy._core.headers import SfcHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int, to_size
from jgpy.stack.protocol import Protocol

CREDIT_REQUEST, REPLENISH, URGENT = SfcHeader.CREDIT_REQUEST, SfcHeader.REPLENISH, SfcHeader.URGENT_CREDIT_REQUEST


class _Delivering(threading.local):
    """Per thread: whether it passes messages up through SFC now (a class default, so that a thread that never
    did reads False without raising an AttributeError on every send)."""

    delivering = False


class SFC(Protocol):
    NAME = "SFC"

    max_credits = Property(to_size, 2000000, "bytes of multicasts a sender may send before every member "
                           "replenished its credits")
    max_block_time = Property(to_int, 5000, "ms a sender blocks before it asks again (urgently)")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Condition()               # our credits and the creditors we wait for
        self.credits = 0
        self._pending_creditors: set = set()
        self._received_lock = threading.Lock()           # what we received from each member
        self._received: dict[Any, int] = {}
        self._pending_requesters: set = set()
        self._members: frozenset = frozenset()
        self._running = False
        self._last_urgent = 0.0
        self._block_start = 0.0
        self._tl = _Delivering()                         # .delivering: passing messages up (JGRP-465)
        self.counters = dict.fromkeys(("blockings", "bytes_sent", "credit_requests_sent", "credit_requests_received",
                                       "replenishments_received", "replenishments_sent", "synchronous_bypasses",
                                       "ignored_non_member"), 0)
        self.counters["total_block_time_ms"] = 0.0
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an SFC message", self._rl)

    def init(self) -> None:
        self.credits = self.max_credits

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        with self._lock:
            self._running = False
            self._lock.notify_all()

    def unblock(self) -> None:
        """2.12's unblock(): full credits at once."""
        with self._lock:
            self.credits = self.max_credits
            self._lock.notify_all()

    # ---- down ----

    def down_msg(self, msg: Message) -> Any:
        if msg.dest is not None:
            return self.down_prot.down_msg(msg)
        if self._tl.delivering:
            self.counters["synchronous_bypasses"] += 1
            return self.down_prot.down_msg(msg)
        request = False
        with self._lock:
            while self.credits <= 0 and self._running:
                self.counters["blockings"] += 1
                self._lock.wait(self.max_block_time / 1000.0)
                if self.credits <= 0 and self._running:
                    now = time.monotonic()
                    if now - self._last_urgent >= self.max_block_time / 1000.0:
                        self._last_urgent = now
                        self._lock.release()             # 2.12: the request goes out without the lock
                        try:
                            self._send_credit_request(True)
                        finally:
                            self._lock.acquire()
            self.counters["bytes_sent"] += msg.length
            self.credits -= msg.length
            if self.credits <= 0:
                self._pending_creditors = set(self._members)
                self._block_start = time.monotonic()
                request = True
        ret = self.down_prot.down_msg(msg)               # the message before the request
        if request:
            self._send_credit_request(False)
        return ret

    def _send_credit_request(self, urgent: bool) -> None:
        m = Message(None, None, None)
        m.put_header(self.id, SfcHeader(URGENT if urgent else CREDIT_REQUEST))
        self.counters["credit_requests_sent"] += 1
        self.down_prot.down_msg(m)

    def _send_credit_response(self, dest) -> None:
        m = Message(dest, None, None, Message.OOB)
        m.put_header(self.id, SfcHeader(REPLENISH))
        self.counters["replenishments_sent"] += 1
        self.down_prot.down_msg(m)

    # ---- up ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            self._guard.each(mine, self._handle_credit_msg)
        if not rest:
            return
        counted: dict[Any, int] = {}
        for m in rest:
            if m.dest is None and m.src in self._members:
                counted[m.src] = counted.get(m.src, 0) + m.length
        self._tl.delivering = True
        try:
            self.up_prot.up_batch(rest)
        finally:
            self._tl.delivering = False
        for sender, n in counted.items():
            self._consumed(sender, n)

    def _consumed(self, sender, n: int) -> None:
        respond = False
        with self._received_lock:
            total = self._received.get(sender, self.max_credits) + n
            self._received[sender] = total
            if sender in self._pending_requesters and total >= self.max_credits:
                self._pending_requesters.discard(sender)
                self._received[sender] = 0
                respond = True
        if respond:
            self._send_credit_response(sender)

    def _handle_credit_msg(self, msg: Message) -> None:
        t = msg.get_header(self.id).type
        if t == REPLENISH:
            self._handle_credit_response(msg.src)
        elif t in (CREDIT_REQUEST, URGENT):
            self._handle_credit_request(msg.src, t == URGENT)
        else:
            self._rl.warning("type", "%s: dropped an SFC message of unknown type %d from %s", self.local_addr, t,
                             msg.src)

    def _handle_credit_request(self, sender, urgent: bool) -> None:
        self.counters["credit_requests_received"] += 1
        respond = True
        with self._received_lock:
            if sender not in self._members:
                self.counters["ignored_non_member"] += 1   # answered (as 2.12), not remembered
            elif self._received.get(sender, self.max_credits) < self.max_credits and not urgent:
                self._pending_requesters.add(sender)
                respond = False
            else:
                self._received[sender] = 0
        if respond:
            self._send_credit_response(sender)

    def _handle_credit_response(self, sender) -> None:
        with self._lock:
            self.counters["replenishments_received"] += 1
            if sender in self._pending_creditors:
                self._pending_creditors.discard(sender)
                if not self._pending_creditors:
                    self._replenished()

    def _replenished(self) -> None:
        """(lock held) Every creditor answered: full credits again."""
        self.credits = self.max_credits
        if self._block_start:
            self.counters["total_block_time_ms"] += (time.monotonic() - self._block_start) * 1000.0
            self._block_start = 0.0
        self._lock.notify_all()

    # ---- views ----

    def _handle_view(self, view) -> None:
        members = frozenset(view.members or ())
        self._members = members
        with self._lock:
            if self._pending_creditors:
                self._pending_creditors &= members
                if not self._pending_creditors:
                    self._replenished()
        with self._received_lock:
            self._received = {m: self._received.get(m, self.max_credits) for m in members}
            self._pending_requesters &= members

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._handle_view(evt.arg)
        elif evt.type == EventType.SUSPECT:
            self._handle_credit_response(evt.arg)
        return self.up_prot.up(evt)

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._handle_view(evt.arg)
        elif evt.type == EventType.SUSPECT:
            self._handle_credit_response(evt.arg)
        return self.down_prot.down(evt)

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, credits=self.credits, pending_creditors=len(self._pending_creditors),
                    pending_requesters=len(self._pending_requesters), failed_msgs=self._guard.failed)
