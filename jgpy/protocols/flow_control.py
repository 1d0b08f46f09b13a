"""Credit-based flow control: MFC for multicasts, UFC for unicasts (``FlowControl``, ``MFC``, ``UFC``).

A sender starts with ``max_credits`` bytes per receiver and spends the payload length of every message;
without credits it blocks (up to ``max_block_time`` at a time, asking for credits with CREDIT_REQUEST) —
never a receive thread, only the application's sending thread. With ``ignore_synchronous_response``
(default true, as in 2.12) a message sent by a thread that is passing a message up through this protocol
(an answer sent from ``receive()``) is never blocked: it goes out without credits (JGRP-465/928). That
matters most with the transport's thread pools disabled, where that thread is a receive thread and the
credits it would wait for could only come in through itself. A receiver counts what it consumed per
sender and, once a sender's credit with it falls to ``min_credits`` (``max_credits * min_threshold``),
sends REPLENISH (OOB, payload: a Java Long). Receivers count after the application has processed a
message (this runs on the delivery thread), so a slow application slows its senders down.
"""

from __future__ import annotations

import threading
import time
from threading import get_ident
from typing import Any

from jgpy._core.batch import split_by_header
from jgpy._core.credits import CreditCore, CreditTable, ReceiverCredits
from jgpy._core.headers import FcHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, to_bool, to_float, to_int, to_size
from jgpy.stack.protocol import UP_HEADER, UP_MULTICASTS, UP_UNICASTS, Protocol

REPLENISH, CREDIT_REQUEST = FcHeader.REPLENISH, FcHeader.CREDIT_REQUEST
NO_FC = Message.NO_FC


class FlowControl(CreditCore, Protocol):
    """The down path is the C core (``CreditCore``, ``jgpy/_core/credits.pyx``): its fields ``table`` (our credits
    with each member), ``multicast`` (MFC) and ``running``. So is ``up_batch`` for a lone message without our
    header (a request or its answer); every other batch comes to :meth:`_up_batch`."""

    max_credits = Property(to_size, 500000, "bytes a sender may send to a receiver before it needs new credits")
    min_threshold = Property(to_float, 0.40, "fraction of max_credits at which a receiver replenishes")
    min_credits = Property(to_size, 0, "credits at which a receiver replenishes (default: max_credits * "
                           "min_threshold)")
    max_block_time = Property(to_int, 5000, "ms a sender blocks before asking for credits again")
    max_block_times = Property(str, None, "per message size block times, e.g. 50:1,500:3,1500:5 (ms)")
    ignore_synchronous_response = CoreProperty(to_bool, True, "never block a message sent by a thread that is "
                                               "passing a message up through this protocol (JGRP-465)")

    def __init__(self) -> None:
        super().__init__()
        self.multicast = self.HANDLES_MULTICASTS
        self.received: ReceiverCredits | None = None
        self._block_times: list[tuple[int, int]] | None = None
        #: the threads passing messages up through this protocol now (JGRP-465): ids, not a threading.local,
        #: whose attribute access costs more than the rest of a lone message's way through here
        self._delivering: set[int] = set()
        self.counters = dict.fromkeys(("credit_requests_sent", "credit_requests_received", "credit_responses_sent",
                                       "credit_responses_received", "blockings", "synchronous_bypasses"), 0)
        self.counters["time_blocked_ms"] = 0.0
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, f"a {self.NAME} message", self._rl)

    def init(self) -> None:
        if not self.min_credits:
            self.min_credits = int(self.max_credits * self.min_threshold)
        self.received = ReceiverCredits(self.max_credits, self.min_credits)
        if self.max_block_times:
            pairs = []
            for part in self.max_block_times.split(","):
                k, _, v = part.partition(":")
                pairs.append((int(k), int(v)))
            if [k for k, _ in pairs] != sorted({k for k, _ in pairs}) or [v for _, v in pairs] != sorted({v for _, v in pairs}):
                raise ValueError(f"max_block_times must be sorted by size and time: {self.max_block_times}")
            self._block_times = pairs

    def block_time_for(self, length: int) -> int:
        if self._block_times is None:
            return self.max_block_time
        chosen = 0
        for size, t in self._block_times:
            chosen = t
            if length <= size:
                break
        return chosen

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False
        self.wake_all()

    def wake_all(self) -> None:
        """Release senders blocked on credits (on stop)."""

    # ---- to be provided by MFC/UFC ----

    HANDLES_MULTICASTS = False

    def wait_for_credits(self, msg: Message, length: int) -> None:
        """The slow path of the send core: the credits do not cover ``msg`` (blocks the sending thread)."""
        raise NotImplementedError

    def handle_credit(self, sender, credits: int) -> None:
        raise NotImplementedError

    def members_changed(self, mbrs: list) -> None:
        self.received.set_members(mbrs)

    # ---- sending ----

    # down_msg: the C core (CreditCore) spends the credits; when they do not cover a message it calls
    # wait_for_credits(msg, length), the slow path below

    def send_credit(self, dest, credits: int) -> None:
        if dest is not None and dest == self.local_addr:
            # our own share is granted here. Java 2.12 sends it down to itself and gets it back through the
            # transport's loopback; here that message waited for the loopback thread and the GIL behind the busy
            # receive threads (0.7-3.5 ms measured, sequencer.xml), and our own sender stayed blocked meanwhile.
            # Neither way puts anything on the wire.
            self.counters["credit_responses_sent"] += 1
            self.counters["credit_responses_received"] += 1
            self.handle_credit(dest, credits)
            return
        msg = Message(dest, self.stack.dialect.object_to_buffer(credits, "Long"), None, Message.OOB)
        msg.put_header(self.id, FcHeader(REPLENISH))
        self.counters["credit_responses_sent"] += 1
        self.down_prot.down_msg(msg)

    def send_credit_request(self, dest, credits_needed: int) -> None:
        msg = Message(dest, self.stack.dialect.object_to_buffer(credits_needed, "Long"))
        msg.put_header(self.id, FcHeader(CREDIT_REQUEST))
        self.counters["credit_requests_sent"] += 1
        self.down_prot.down_msg(msg)

    # ---- receiving ----

    def _up_batch(self, msgs: list) -> None:
        """``up_batch`` of a batch the core does not take (several messages, or one with our header)."""
        mine, rest = split_by_header(msgs, self.id)
        if mine:
            self._guard.each(mine, self._handle_credit_msg)
        if not rest:
            return
        # a big batch is delivered in pieces, each followed by the credits it earned: the credits leave when a
        # sender reaches its threshold, as Java's per-message accounting sends them, not after the whole batch
        # (a batch can hold more than a sender's window, which would stall it until the batch was delivered)
        if self.received is None:                # not initialised (a stack that was never started): nothing counts
            self.up_prot.up_batch(rest)
            return
        for chunk, counted in self.received.delivery_chunks(rest, self.HANDLES_MULTICASTS, NO_FC):
            if not counted:                      # nothing we grant credits for (e.g. unicasts, for MFC)
                self.up_prot.up_batch(chunk)
                continue
            try:
                self._up_delivering(chunk)
            finally:
                owed = self.received.consumed_all(counted)
                for sender, credits in owed:
                    self.send_credit(sender, credits)

    def _handle_credit_msg(self, msg: Message) -> None:
        """REPLENISH or CREDIT_REQUEST (a non-member's is ignored: the credit tables hold members only)."""
        hdr = msg.get_header(self.id)
        try:
            value = self.stack.dialect.object_from_buffer(msg.payload) if msg.has_buffer() else None
        except Exception:  # noqa: BLE001 - whatever the payload is, it is not a Long
            self._rl.warning("no-long", "%s: credit message from %s without a Long payload: dropped", self.local_addr,
                             msg.src)
            return
        if hdr.type == REPLENISH:
            self.counters["credit_responses_received"] += 1
            if isinstance(value, int):
                self.handle_credit(msg.src, value)
        elif hdr.type == CREDIT_REQUEST:
            self.counters["credit_requests_received"] += 1
            if isinstance(value, int) and value > 0 and self.received.requested(msg.src, value):
                self.send_credit(msg.src, value)
        else:
            self._rl.error("bad-type", "FcHeader type %s not known", hdr.type)

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.members_changed(list(evt.arg.members or ()))
        elif evt.type == EventType.CONFIG and isinstance(evt.arg, dict) and "frag_size" in evt.arg:
            if evt.arg["frag_size"] > self.max_credits:
                self.log.warning("frag_size (%d) > max_credits (%d): this may cause blockings", evt.arg["frag_size"],
                                 self.max_credits)
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.members_changed(list(evt.arg.members or ()))
        return self.up_prot.up(evt)

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, failed_msgs=self._guard.failed)


class _Credits(FlowControl):
    """What MFC and UFC share: a :class:`CreditTable` of the credits we have with each member.

    Spending credits is one C call per message with no lock (atomic under the GIL); the condition is only
    taken by a sender that has to wait, and credits wake it only when somebody waits."""

    def up_needs(self) -> int:
        return UP_HEADER | (UP_MULTICASTS if self.HANDLES_MULTICASTS else UP_UNICASTS)   # what it counts

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._waiting = 0

    def init(self) -> None:
        super().init()
        self.table = CreditTable(self.max_credits)

    def members_changed(self, mbrs: list) -> None:
        super().members_changed(mbrs)
        with self._cond:
            self.table.set_members(mbrs)
            self._cond.notify_all()

    def handle_credit(self, sender, credits: int) -> None:
        if credits > 0 and self.table.add(sender, credits) and self._waiting:
            with self._cond:
                self._cond.notify_all()

    def wake_all(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _wait_for_credits(self, fits, block: int, ask) -> None:
        """(the slow path) Wait until ``fits()`` spent the credits, ``block`` ms pass per round (asking
        ``ask()`` for credits every ``max_block_time``), or we stop; with ``max_block_times`` once only."""
        if get_ident() in self._delivering:       # an answer from receive(): never blocked (JGRP-465)
            self.counters["synchronous_bypasses"] += 1
            return
        with self._cond:
            self._waiting += 1
            try:
                while self.running:
                    if fits():
                        return
                    if block <= 0:
                        return
                    start = time.monotonic()
                    self._cond.wait(block / 1000.0)
                    self.counters["blockings"] += 1
                    self.counters["time_blocked_ms"] += (time.monotonic() - start) * 1000
                    if fits():
                        return
                    if self._block_times is not None:
                        return                      # max_block_times: send after the block time regardless
                    requests = ask()
                    if requests:
                        self._cond.release()        # send outside the lock (JGRP-292)
                        try:
                            for m, need in requests:
                                self.send_credit_request(m, need)
                        finally:
                            self._cond.acquire()
            finally:
                self._waiting -= 1


class MFC(_Credits):
    """Multicast flow control: a multicast needs credits from every member (the lowest credit counts)."""

    NAME = "MFC"
    HANDLES_MULTICASTS = True

    def __init__(self) -> None:
        super().__init__()
        self._last_request = 0.0

    @property
    def credits(self) -> dict:
        return dict(self.table.items()) if self.table is not None else {}

    def wait_for_credits(self, msg: Message, length: int) -> None:
        table = self.table
        self._wait_for_credits(lambda: table.spend_all(length), self.block_time_for(length), self._ask)

    def _ask(self) -> list:
        now = time.monotonic()
        if (now - self._last_request) * 1000 < self.max_block_time:
            return []
        self._last_request = now
        return [(m, min(self.max_credits, self.max_credits - c)) for m, c in self.table.below(self.min_credits)]


class UFC(_Credits):
    """Unicast flow control: credits per destination."""

    NAME = "UFC"
    HANDLES_MULTICASTS = False

    def __init__(self) -> None:
        super().__init__()
        self._last_request: dict = {}

    @property
    def sent(self) -> dict:
        return dict(self.table.items()) if self.table is not None else {}

    def wait_for_credits(self, msg: Message, length: int) -> None:
        dest = msg.dest
        table = self.table
        self._wait_for_credits(lambda: table.spend(dest, length) != 0, self.block_time_for(length),
                               lambda: self._ask(dest))

    def members_changed(self, mbrs: list) -> None:
        super().members_changed(mbrs)
        keep = set(mbrs)
        self._last_request = {m: t for m, t in list(self._last_request.items()) if m in keep}

    def _ask(self, dest) -> list:
        now = time.monotonic()
        left = self.table.get(dest)
        if left is None or (now - self._last_request.get(dest, 0.0)) * 1000 < self.max_block_time:
            return []
        self._last_request[dest] = now
        return [(dest, max(0, self.max_credits - left))]
