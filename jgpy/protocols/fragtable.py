"""The reassembly table of FRAG and FRAG2: fragments collected per (sender, message id), bounded.

Java 2.12 allocates ``new Message[num_frags]`` from the wire for every new message id and keeps incomplete
messages until their sender leaves the view (never, for a sender that was never a member). Here nothing is
allocated from ``num_frags`` (the fragments of a message go into a dict as they arrive) and what incomplete
messages hold is bounded:

* per sender, at most ``max_msgs`` incomplete messages (the oldest goes);
* in all, at most ``max_bytes`` accounted bytes, and for senders not in the view (``members``) at most
  ``max_nonmember_bytes`` together: beyond, the least recently extended message goes;
* a message that got no fragment for ``timeout_ms`` goes (:meth:`FragTable.expire`, run by the protocol's
  timer and when a new message starts).

A fragment is accounted by the buffer it keeps alive (a received fragment is a window into its datagram; a
buffer shared with the previous fragment of the same message is counted once) plus a fixed overhead, so a
datagram padded around a one-byte fragment costs what it weighs. Dropping a message loses it: the limits
are far above what members send (one message at a time per sending thread) and meant for made-up senders.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from jgpy._core.message import Message
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int, to_size
from jgpy.stack.protocol import Protocol

#: accounted per fragment and per message beside the buffers (the Python objects that hold them)
FRAGMENT_OVERHEAD = 256
MESSAGE_OVERHEAD = 512


class Reassembly:
    """The fragments of one message received so far."""

    __slots__ = ("key", "num", "parts", "size", "member", "touched", "last_raw")

    def __init__(self, key: tuple, num: int, member: bool, now: float) -> None:
        self.key = key
        self.num = num
        self.parts: dict[int, Any] = {}
        self.size = 0
        self.member = member
        self.touched = now
        self.last_raw: Any = None


class FragTable:
    """Incomplete messages of all senders; thread-safe. :meth:`add` returns a message's fragments in order
    once the last one is there."""

    def __init__(self, rl: RateLimitedLog, owner: str = "") -> None:
        self._rl = rl
        self._owner = owner
        self._lock = threading.Lock()
        self._senders: dict[Any, dict[int, Reassembly]] = {}   # sender -> {message id -> entry}, oldest first
        self._lru: OrderedDict[tuple, Reassembly] = OrderedDict()   # least recently extended first
        self._nonmember_lru: OrderedDict[tuple, Reassembly] = OrderedDict()    # the non-members' ones of _lru
        self._recent: Reassembly | None = None      # the entry last in the LRU order(s) for sure
        self.members: frozenset = frozenset()
        self.local_addr: Any = None
        self.max_msgs = 64
        self.max_bytes = 512 << 20
        self.max_nonmember_bytes = 16 << 20
        self.timeout_ms = 60_000
        self._now = time.monotonic()
        self.bytes = 0
        self.nonmember_bytes = 0
        self.bad = 0           # fragments dropped as malformed
        self.evicted = 0       # incomplete messages dropped to stay within the limits
        self.expired = 0       # incomplete messages dropped for getting no fragment within timeout_ms

    # ---- receiving

    def tick(self) -> None:
        """Read the clock for the fragments that follow (once per received batch: expiry is coarse)."""
        self._now = time.monotonic()

    def add(self, sender, msg_id: int, frag_id: int, num: int, item: Any, length: int, raw: Any = None) -> list | None:
        """Add fragment ``frag_id`` of ``num`` (``item``: what the protocol reassembles from, ``length`` its
        bytes, ``raw`` the buffer it keeps alive if that is bigger). Returns the items in fragment order when
        the message is complete, else None (also when the fragment was dropped)."""
        if num <= 0 or not 0 <= frag_id < num:
            self._bad("frag_id=%d, num_frags=%d", sender, frag_id, num)
            return None
        key = (sender, msg_id)
        with self._lock:
            entry = self._lru.get(key)
            if entry is None:
                entry = self._open(key, sender, num, self._now)
            elif entry.num != num:
                self._bad("fragment %d of message %d says num_frags=%d, the first one said %d", sender, frag_id,
                          msg_id, num, entry.num)
                return None
            parts = entry.parts
            if frag_id in parts:
                return None                                   # a duplicate
            parts[frag_id] = item
            if raw is None:
                size = FRAGMENT_OVERHEAD + length
            elif raw is entry.last_raw:
                size = FRAGMENT_OVERHEAD                      # the same buffer as the previous fragment
            else:
                entry.last_raw = raw
                size = FRAGMENT_OVERHEAD + max(length, len(raw))
            entry.size += size
            self.bytes += size
            entry.touched = self._now
            if len(parts) == entry.num:
                self._remove(entry)
                return [parts[i] for i in range(entry.num)]
            recent = entry is self._recent          # (fragments of one message mostly come in a row)
            if not recent:
                self._recent = entry
                self._lru.move_to_end(key)
            if entry.member:
                if 0 < self.max_bytes < self.bytes:
                    self._enforce(entry)
            else:
                self.nonmember_bytes += size
                if not recent:
                    self._nonmember_lru.move_to_end(key)
                if 0 < self.max_nonmember_bytes < self.nonmember_bytes or 0 < self.max_bytes < self.bytes:
                    self._enforce(entry)
            return None

    def _open(self, key: tuple, sender, num: int, now: float) -> Reassembly:
        member = sender in self.members or sender == self.local_addr
        entry = Reassembly(key, num, member, now)
        self._expire(now)
        table = self._senders.get(sender)
        while table is not None and 0 < self.max_msgs <= len(table):
            self._evict(next(iter(table.values())), "more than max_incomplete_msgs from one sender")
            table = self._senders.get(sender)
        self._senders.setdefault(sender, {})[key[1]] = entry
        self._lru[key] = entry
        if not member:
            self._nonmember_lru[key] = entry
        self._recent = entry
        self._account(entry, MESSAGE_OVERHEAD)
        return entry

    def _account(self, entry: Reassembly, size: int) -> None:
        entry.size += size
        self.bytes += size
        if not entry.member:
            self.nonmember_bytes += size

    def _enforce(self, current: Reassembly) -> None:
        """Evict least recently extended messages (the current one last) until within the byte limits."""
        if not current.member:
            while 0 < self.max_nonmember_bytes < self.nonmember_bytes and self._nonmember_lru:
                self._evict(next(iter(self._nonmember_lru.values())), "more than max_nonmember_bytes pending "
                            "from senders not in the view")
        while 0 < self.max_bytes < self.bytes and self._lru:
            self._evict(next(iter(self._lru.values())), "more than max_incomplete_bytes pending")

    def _evict(self, entry: Reassembly, why: str) -> None:
        self._remove(entry)
        self.evicted += 1
        self._rl.warning("frag-evicted", "%s: dropped an incomplete message (%d of %d fragments) from %s: %s",
                         self._owner, len(entry.parts), entry.num, entry.key[0], why)

    def _remove(self, entry: Reassembly) -> None:
        sender, msg_id = entry.key
        if self._lru.pop(entry.key, None) is None:
            return
        self._nonmember_lru.pop(entry.key, None)
        if entry is self._recent:
            self._recent = None
        table = self._senders.get(sender)
        if table is not None:
            table.pop(msg_id, None)
            if not table:
                del self._senders[sender]
        self.bytes -= entry.size
        if not entry.member:
            self.nonmember_bytes -= entry.size

    def _bad(self, what: str, sender, *args) -> None:
        self.bad += 1
        self._rl.warning("frag-bad", "%s: dropped a fragment from %s: " + what, self._owner, sender, *args)

    # ---- expiry, membership

    def expire(self) -> int:
        """Drop the incomplete messages that got no fragment for timeout_ms; returns how many."""
        with self._lock:
            return self._expire(time.monotonic())

    def _expire(self, now: float) -> int:
        if self.timeout_ms <= 0:
            return 0
        cutoff = now - self.timeout_ms / 1000
        n = 0
        while self._lru:
            entry = next(iter(self._lru.values()))
            if entry.touched > cutoff:
                break
            self._remove(entry)
            n += 1
        if n:
            self.expired += n
            self._rl.warning("frag-expired", "%s: dropped %d incomplete message(s) that got no fragment for %d ms",
                             self._owner, n, self.timeout_ms)
        return n

    def set_members(self, members) -> list:
        """A new view: drop the messages of senders that left it (as 2.12 does), and account the others as
        members' or non-members'. Returns the senders whose messages were dropped."""
        new = frozenset(members)
        with self._lock:
            left = [s for s in self._senders if s in self.members and s not in new]
            self.members = new
            for sender in left:
                for entry in list(self._senders.get(sender, {}).values()):
                    self._remove(entry)
            self._nonmember_lru.clear()
            self._recent = None
            for key, entry in self._lru.items():
                member = key[0] in new or key[0] == self.local_addr
                if member != entry.member:
                    self.nonmember_bytes += -entry.size if member else entry.size
                    entry.member = member
                if not member:
                    self._nonmember_lru[key] = entry
        return left

    def clear(self, sender=None) -> None:
        """Drop the incomplete messages of ``sender``, or of everybody."""
        with self._lock:
            for entry in list(self._lru.values()):
                if sender is None or entry.key[0] == sender:
                    self._remove(entry)

    def pending(self) -> dict:
        """``{sender: number of incomplete messages}``."""
        with self._lock:
            return {s: len(t) for s, t in self._senders.items() if t}

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"pending_bytes": self.bytes, "pending_nonmember_bytes": self.nonmember_bytes,
                    "pending_senders": len(self._senders), "bad_frags": self.bad,
                    "incomplete_evicted": self.evicted, "incomplete_expired": self.expired}


class FragProtocol(Protocol):
    """What FRAG and FRAG2 share: the bounded reassembly table (its limits are properties), its expiry on the
    timer, view changes, CONFIG events, and the receive loop (a fragment that cannot be handled is dropped
    and counted alone; the batch's other messages pass up in their order)."""

    max_incomplete_msgs = Property(to_int, 64, "jgpy: incomplete messages kept per sender; the oldest goes "
                                   "beyond (0: no limit)")
    max_incomplete_bytes = Property(to_size, 512 << 20, "jgpy: bytes the incomplete messages of all senders "
                                    "may hold; the least recently extended goes beyond (0: no limit)")
    max_nonmember_bytes = Property(to_size, 16 << 20, "jgpy: bytes the incomplete messages of senders that are "
                                   "not in the view may hold together (0: no limit)")
    incomplete_timeout = Property(to_int, 60000, "jgpy: ms after which an incomplete message that got no "
                                  "fragment is dropped (0: never)")

    def __init__(self) -> None:
        super().__init__()
        self._rl = RateLimitedLog(self.log)
        self.table = FragTable(self._rl, self.NAME)
        self.members: list = []
        self._expiry_task = None
        self.num_received_msgs = 0
        self.num_received_frags = 0
        self.num_failed = 0

    def _configure_table(self) -> None:
        t = self.table
        t.max_msgs, t.max_bytes = self.max_incomplete_msgs, self.max_incomplete_bytes
        t.max_nonmember_bytes, t.timeout_ms = self.max_nonmember_bytes, self.incomplete_timeout
        t.local_addr = self.local_addr

    def init(self) -> None:
        self._configure_table()

    def start(self) -> None:
        self._configure_table()
        if self.incomplete_timeout > 0 and self.stack is not None and self.stack.timer is not None:
            every = max(100, self.incomplete_timeout // 4)
            self._expiry_task = self.timer.schedule_with_fixed_delay(every, every, self.table.expire,
                                                                     f"{self.NAME} expiry")

    def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            self._expiry_task = None
        self.table.clear()

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
        elif t == EventType.SET_LOCAL_ADDRESS:
            self.table.local_addr = evt.arg
        elif t == EventType.CONFIG:
            ret = self.down_prot.down(evt)
            self._handle_config(evt.arg)
            return ret
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
        elif t == EventType.CONFIG:
            ret = self.up_prot.up(evt)
            self._handle_config(evt.arg)
            return ret
        return self.up_prot.up(evt)

    def _handle_config(self, cfg) -> None:
        if isinstance(cfg, dict) and cfg.get("frag_size") is not None:
            self.frag_size = int(cfg["frag_size"])

    def _handle_view_change(self, view) -> None:
        self.members = list(view.members or ()) if view is not None else []
        for m in self.table.set_members(self.members):    # left: will never complete its messages
            self.log.debug("%s: removed %s from the fragmentation table", self.local_addr, m)

    def clear_fragments_for(self, mbr) -> None:
        self.table.clear(mbr)

    def clear_all_fragments(self) -> None:
        self.table.clear()

    # ---- receiving ----

    def _up_batch(self, msgs: list) -> None:
        """``up_batch`` (FRAG2's C core takes a lone message without our header itself, then calls this for the
        other batches)."""
        if len(msgs) == 1 and not msgs[0].has_header(self.id):   # (a lone message, e.g. a request or its answer)
            self.num_received_msgs += 1
            self.up_prot.up_batch(msgs)
            return
        mine, rest = self.split_mine(msgs)
        if not mine:
            self.num_received_msgs += len(msgs)
            self.up_prot.up_batch(msgs)
            return
        pid = self.id
        out = []
        self.table.tick()
        for m in msgs:                      # keep the batch order: unfragmented messages pass where they are
            if m.has_header(pid):
                try:
                    m = self._unfragment(m)
                except Exception:  # noqa: BLE001 - one bad fragment must not hurt the rest of the batch
                    self.num_failed += 1
                    self._rl.exception("unfragment-failed", "%s: failed handling a fragment from %s",
                                       self.local_addr, m.src)
                    continue
                if m is None:
                    continue
            else:
                self.num_received_msgs += 1
            out.append(m)
        if out:
            self.up_prot.up_batch(out)

    up_batch = _up_batch

    def _unfragment(self, frag: Message) -> Message | None:
        raise NotImplementedError

    # ---- diagnostics ----

    def pending(self) -> dict:
        """``{sender: number of incomplete messages}``."""
        return self.table.pending()

    def dump_stats(self) -> dict[str, Any]:
        d = {"num_sent_msgs": self.num_sent_msgs, "num_sent_frags": self.num_sent_frags,
             "num_received_msgs": self.num_received_msgs, "num_received_frags": self.num_received_frags,
             "num_failed": self.num_failed, "pending": sum(self.pending().values())}
        d.update(self.table.stats())
        return d
