"""FC: credit-based flow control for multicasts and unicasts in one protocol (``org.jgroups.protocols.FC``).

Sender side: every member of the view starts with ``max_credits`` bytes of credit. A multicast spends its
payload length at every member (ourselves included: our own multicasts come back up and are counted), a
unicast at its destination only. Before sending, the payload length is compared with the *lowest* credit
of any member (for unicasts too, as in Java); if that is not enough, the sending thread blocks — never a
receive or delivery thread — after noting the members short of credit as *creditors*. It resumes when a
REPLENISH has come from every creditor, when a view removes the creditors it waits for, on ``unblock()``
or on stop. Every ``max_block_time`` ms without that it sends the creditors a CREDIT_REQUEST (a regular
message, so it queues behind the data, payload a Java Long: the credits left) and waits again; with
``max_block_times`` (``"50:1,500:3,1500:5"``: size in bytes -> ms) a message of that size waits at most
its block time and is then sent anyway, and no credit requests are sent.

Receiver side: the bytes received from every sender are counted (after the message was processed above:
on the delivery thread for regular messages); once ``min_credits`` bytes (default ``max_credits *
min_threshold``) were received from a sender, the count is sent back as an OOB REPLENISH (payload a Java
Integer, or a Long above 2^31-1, as ``FC.sendCredit`` does). A CREDIT_REQUEST is answered with
``max_credits`` minus the credits the sender reports left.

With ``ignore_synchronous_response`` (default true) a message sent by the thread that is passing a
message up through FC (an answer sent from ``receive()``) never blocks (JGRP-465/928). Messages flagged
NO_FC and messages without payload are neither counted nor blocked.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from jgpy._core.headers import FcHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_float, to_size
from jgpy.stack.protocol import Protocol

REPLENISH, CREDIT_REQUEST = FcHeader.REPLENISH, FcHeader.CREDIT_REQUEST
NO_FC, OOB = Message.NO_FC, Message.OOB
INT_MAX = 2 ** 31 - 1


def parse_block_times(spec: str | None) -> list[tuple[int, int]] | None:
    """``"50:1,500:3"`` -> [(50, 1), (500, 3)], checked as ``FC.setMaxBlockTimes`` checks it (None: None)."""
    if spec is None or not spec.strip():
        return None
    pairs: list[tuple[int, int]] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        key, sep, val = part.partition(":")
        if not sep:
            raise ValueError(f"element {part!r} is missing a ':' separator")
        k, v = int(key.strip()), int(val.strip())
        if k < 0 or v < 0:
            raise ValueError("keys and values must be >= 0")
        if pairs and k <= pairs[-1][0]:
            raise ValueError(f"keys are not sorted: {spec}")
        if pairs and v <= pairs[-1][1]:
            raise ValueError(f"values are not sorted: {spec}")
        pairs.append((k, v))
    return pairs


def _checked_block_times(spec: str) -> str:
    parse_block_times(spec)          # a bad value is a configuration error right away
    return spec


class _Credit:
    """Credits of one member (``FC.Credit``); all access under the owner's lock."""

    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left

    def __repr__(self) -> str:
        return str(self.left)


class FC(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FC"

    max_credits = Property(to_size, 500000, "bytes a sender may send to each receiver before it needs new credits")
    max_block_time = Property(to_size, 5000, "ms a blocked sender waits before it asks its creditors for credits "
                              "again (<= 0: wait until credits arrive)")
    max_block_times = Property(_checked_block_times, None, "per message size max block times, e.g. "
                               "\"50:1,500:3,1500:5,10000:10,100000:100\" (bytes:ms); after that time the message is "
                               "sent regardless, and no credit requests are sent")
    min_threshold = Property(to_float, 0.60, "fraction of max_credits received from a sender after which it is "
                             "sent new credits")
    min_credits = Property(to_size, 0, "bytes received from a sender after which it is sent new credits "
                           "(0: max_credits * min_threshold)")
    ignore_synchronous_response = Property(to_bool, True, "never block a message sent by a thread that is passing "
                                           "a message up through FC (JGRP-465)")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._credits_available = threading.Condition(self._lock)
        self.sent: dict[Any, _Credit] = {}          # member -> credits we may still spend on it
        self.received: dict[Any, _Credit] = {}      # sender -> credits it may still spend on us
        self.creditors: set = set()                 # members we wait for (while blocked)
        self.lowest_credit = 0
        self.running = True
        self.frag_size_received = False
        self._last_credit_request = 0.0             # monotonic s
        self._tl = threading.local()                # .ignore (JGRP-465), .end_time (max_block_times)
        self._block_times: list[tuple[int, int]] | None = None
        self.num_blockings = 0
        self.num_credit_requests_sent = self.num_credit_requests_received = 0
        self.num_credit_responses_sent = self.num_credit_responses_received = 0
        self.num_bad_credit_msgs = 0
        self.total_time_blocking = 0.0              # ms
        self.last_blockings: collections.deque = collections.deque(maxlen=50)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an FC message", self._rl)

    # ---- life cycle ----

    def init(self) -> None:
        if self.max_credits <= 0:
            raise ConfigError(f"FC: max_credits={self.max_credits}: max_credits must be > 0")
        if not self.min_credits:
            self.min_credits = int(self.max_credits * self.min_threshold)
        self.lowest_credit = self.max_credits
        bt = self.max_block_times
        self._block_times = parse_block_times(bt) if isinstance(bt, str) else (list(bt) if bt else None)

    def start(self) -> None:
        if not self.frag_size_received:
            self.log.warning("No fragmentation protocol was found. When flow control (e.g. FC or SFC) is used, we "
                             "recommend a fragmentation protocol, due to http://jira.jboss.com/jira/browse/JGRP-590")
        with self._lock:
            self.running = True
            self.lowest_credit = self.max_credits

    def stop(self) -> None:
        with self._lock:
            self.running = False
            self._credits_available.notify_all()

    def get_max_block_time(self, length: int) -> int:
        """``FC.getMaxBlockTime``: the block time of the first size >= length (else the last one); 0 without
        max_block_times."""
        if not self._block_times:
            return 0
        chosen = 0
        for size, ms in self._block_times:
            chosen = ms
            if length <= size:
                break
        return chosen

    def unblock(self) -> None:
        """Give every member full credits and release blocked senders (Java's JMX operation)."""
        with self._lock:
            for c in self.sent.values():
                c.left = self.max_credits
            self.lowest_credit = self._compute_lowest()
            self.creditors.clear()
            self._credits_available.notify_all()

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.CONFIG:
            self._handle_config(evt.arg)
        elif t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
        elif t == EventType.CONFIG:
            self._handle_config(evt.arg)
        return self.up_prot.up(evt)

    def _handle_config(self, info) -> None:
        if isinstance(info, dict) and info.get("frag_size") is not None:
            frag_size = info["frag_size"]
            if frag_size > self.max_credits:
                self.log.warning("The fragmentation size of the fragmentation protocol is %d, which is greater than "
                                 "the max credits (%d). While this is not incorrect, it may lead to long blockings. "
                                 "Frag size should be less than max_credits (JGRP-590)", frag_size, self.max_credits)
            self.frag_size_received = True

    def _handle_view_change(self, view) -> None:
        if view is None:
            return
        mbrs = list(view.members or ())
        keep = set(mbrs)
        with self._lock:
            for m in mbrs:
                if m not in self.received:
                    self.received[m] = _Credit(self.max_credits)
                if m not in self.sent:
                    self.sent[m] = _Credit(self.max_credits)
            for table in (self.received, self.sent):
                for m in [m for m in table if m not in keep]:
                    del table[m]
            self.creditors &= keep
            if not self.creditors:
                self.lowest_credit = self._compute_lowest()
                self._credits_available.notify_all()

    def _compute_lowest(self) -> int:
        return min((c.left for c in self.sent.values()), default=self.max_credits)

    # ---- sending ----

    def down_msg(self, msg: Message) -> Any:
        if not msg.flags & NO_FC:
            length = msg.length
            if length:
                self._handle_down(msg, length)
        return self.down_prot.down_msg(msg)

    def _handle_down(self, msg: Message, length: int) -> None:
        dest = msg.dest
        tl = self._tl
        if self._block_times:
            tmp = self.get_max_block_time(length)
            if tmp > 0:
                tl.end_time = time.monotonic() * 1000.0 + tmp
        with self._lock:
            if length > self.lowest_credit:
                if self.ignore_synchronous_response and getattr(tl, "ignore", False):
                    self.log.debug("bypassing blocking to avoid deadlocking %s", threading.current_thread().name)
                else:
                    self._block(dest, length)
            tmp = self._decrement(dest, length)
            if tmp != -1:
                self.lowest_credit = min(tmp, self.lowest_credit)

    def _block(self, dest, length: int) -> None:
        """(lock held) Wait until credits arrive, the wait times out (max_block_times) or we stop."""
        self._determine_creditors(dest, length)
        start = time.monotonic()
        self.num_blockings += 1
        self.log.debug("blocking (lowest_credit=%d; length=%d)", self.lowest_credit, length)
        while length > self.lowest_credit and self.running:
            block_ms: float | None = self.max_block_time
            if self._block_times:
                end_time = getattr(self._tl, "end_time", None)
                if end_time is not None:
                    block_ms = end_time - start * 1000.0   # <= 0: not waiting at all
            elif block_ms <= 0:
                block_ms = None                            # documented: <= 0 waits until credits arrive
            if block_ms is None:
                # re-check every second: credits may come back without anybody listed as creditor
                signalled = self._credits_available.wait(1.0) and length <= self.lowest_credit
                if not signalled:
                    continue
            elif block_ms > 0:
                signalled = self._credits_available.wait(block_ms / 1000.0)
            else:
                signalled = False
            if length <= self.lowest_credit or signalled or not self.running:
                break
            if self._block_times:
                break           # no credit requests with max_block_times: it is up to the receivers
            now = time.monotonic()
            if (now - self._last_credit_request) * 1000.0 >= self.max_block_time:
                self._last_credit_request = now
                # send outside the lock (JGRP-292), to the creditors only
                requests = [(m, c.left) for m, c in self.sent.items() if m in self.creditors]
                self._lock.release()
                try:
                    for m, left in requests:
                        self.send_credit_request(m, left)
                finally:
                    self._lock.acquire()
        blocked_ms = (time.monotonic() - start) * 1000.0
        self.total_time_blocking += blocked_ms
        self.last_blockings.append(blocked_ms)

    def _determine_creditors(self, dest, length: int) -> None:
        if dest is None:
            for m, c in self.sent.items():
                if c.left <= length:
                    self.creditors.add(m)
        else:
            c = self.sent.get(dest)
            if c is not None and c.left <= length:
                self.creditors.add(dest)

    def _decrement(self, dest, length: int) -> int:
        """(lock held) Spend ``length`` at every member (multicast) or at ``dest``; the lowest credit left,
        or -1 (no members / unknown destination)."""
        if dest is None:
            if not self.sent:
                return -1
            lowest = self.max_credits
            for c in self.sent.values():
                c.left = max(0, c.left - length)
                lowest = min(lowest, c.left)
            return lowest
        c = self.sent.get(dest)
        if c is None:
            return -1
        c.left = max(0, c.left - length)
        return c.left

    def send_credit_request(self, dest, credits_left: int) -> None:
        msg = Message(dest, self.stack.dialect.object_to_buffer(credits_left, "Long"))
        msg.put_header(self.id, FcHeader(CREDIT_REQUEST))
        self.num_credit_requests_sent += 1
        self.log.debug("sending credit request to %s (%d credits left)", dest, credits_left)
        self.down_prot.down_msg(msg)

    def send_credit(self, dest, credits: int) -> None:
        if dest is not None and dest == self.local_addr:
            # our own share is granted here, as MFC/UFC do (flow_control.py): Java sends it to itself through the
            # transport's loopback, where it would wait for the loopback thread while our own sender is blocked
            self.num_credit_responses_sent += 1
            self.num_credit_responses_received += 1
            self._handle_credit(dest, credits)
            return
        msg = Message(dest, self.stack.dialect.object_to_buffer(credits, "Integer" if credits < INT_MAX else "Long"),
                      None, OOB)
        msg.put_header(self.id, FcHeader(REPLENISH))
        self.num_credit_responses_sent += 1
        self._rl.debug("replenish", "replenishing %s with %d credits", dest, credits)
        self.down_prot.down_msg(msg)

    # ---- receiving ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            no_fc = False
            for m in mine:
                if m.flags & NO_FC:                # Java passes NO_FC messages up untouched, even its own
                    no_fc = True
                    continue
                try:
                    self._handle_fc_msg(m, m.get_header(self.id))
                except Exception:  # noqa: BLE001 - one bad message must not hurt the rest
                    self.num_bad_credit_msgs += 1
                    self._guard.failure(m)
            if no_fc:
                pid = self.id
                rest = [m for m in msgs if m.flags & NO_FC or not m.has_header(pid)]
        if not rest:
            return
        owed = self._adjust_credits(rest)
        tl = self._tl
        ignore = self.ignore_synchronous_response
        prev = getattr(tl, "ignore", False)
        if ignore:
            tl.ignore = True
        try:
            self.up_prot.up_batch(rest)
        finally:
            if ignore:
                tl.ignore = prev
            for sender, credits in owed:
                self.send_credit(sender, credits)

    def _adjust_credits(self, msgs: list) -> list[tuple[Any, int]]:
        """Count the received bytes per sender (``FC.adjustCredit``, message by message); the credits owed."""
        owed = []
        max_credits, min_credits = self.max_credits, self.min_credits
        with self._lock:
            received = self.received
            for m in msgs:
                if m.flags & NO_FC:
                    continue
                length = m.length
                if not length:
                    continue
                c = received.get(m.src)
                if c is None:
                    continue
                c.left = max(0, c.left - length)
                response = max_credits - c.left
                if response >= min_credits:
                    c.left = max_credits
                    owed.append((m.src, response))
        return owed

    def _handle_fc_msg(self, msg: Message, hdr: FcHeader) -> None:
        if hdr.type == REPLENISH:
            self.num_credit_responses_received += 1
            value = self.stack.dialect.object_from_buffer(msg.payload) if msg.has_buffer() else None
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                self.num_bad_credit_msgs += 1
                self._rl.warning("bad-replenish", "%s: REPLENISH from %s without a non-negative Integer/Long payload "
                                 "(%r): dropped", self.local_addr, msg.src, value)
                return
            self._handle_credit(msg.src, value)
        elif hdr.type == CREDIT_REQUEST:
            self.num_credit_requests_received += 1
            value = self.stack.dialect.object_from_buffer(msg.payload, True) if msg.has_buffer() else None
            if value is None or value.type != "Long":
                self.num_bad_credit_msgs += 1         # Java casts the payload to a Long
                self._rl.warning("bad-request", "%s: CREDIT_REQUEST from %s without a Long payload (%r): dropped",
                                 self.local_addr, msg.src, value)
                return
            self._handle_credit_request(msg.src, value.value)
        else:
            self.num_bad_credit_msgs += 1
            self._rl.error("bad-type", "%s: FcHeader type %d from %s not known: dropped", self.local_addr, hdr.type,
                           msg.src)

    def _handle_credit(self, sender, increase: int) -> None:
        if sender is None:
            return
        with self._lock:
            c = self.sent.get(sender)
            if c is None:
                return
            c.left = min(self.max_credits, c.left + increase)
            self.lowest_credit = self._compute_lowest()
            self.creditors.discard(sender)
            if not self.creditors:
                # also wakes a sender blocked by another member's low credit that is not a creditor of its own
                # message (a unicast to B blocked by C's credits): it re-checks lowest_credit
                self._credits_available.notify_all()

    def _handle_credit_request(self, sender, left_credits: int) -> None:
        if sender is None:
            return
        with self._lock:
            c = self.received.get(sender)
            if c is None:
                return
            response = min(self.max_credits - left_credits, self.max_credits)
            c.left = self.max_credits
        self.send_credit(sender, response)

    # ---- diagnostics ----

    def sender_credits(self) -> dict:
        """``{member: credits we may still spend on it}``."""
        with self._lock:
            return {m: c.left for m, c in self.sent.items()}

    def receiver_credits(self) -> dict:
        """``{sender: credits it may still spend on us}``."""
        with self._lock:
            return {m: c.left for m, c in self.received.items()}

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            n = self.num_blockings
            return {"num_blockings": n, "total_time_blocking": self.total_time_blocking,
                    "avg_time_blocked": self.total_time_blocking / n if n else 0.0,
                    "num_credit_requests_sent": self.num_credit_requests_sent,
                    "num_credit_requests_received": self.num_credit_requests_received,
                    "num_credit_responses_sent": self.num_credit_responses_sent,
                    "num_credit_responses_received": self.num_credit_responses_received,
                    "num_bad_credit_msgs": self.num_bad_credit_msgs, "failed_msgs": self._guard.failed,
                    "lowest_credit": self.lowest_credit,
                    "senders": {str(m): c.left for m, c in self.sent.items()},
                    "receivers": {str(m): c.left for m, c in self.received.items()},
                    "creditors": [str(m) for m in self.creditors]}
