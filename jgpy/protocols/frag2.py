"""FRAG2: fragment big messages, reassemble them on the receiver (``org.jgroups.protocols.FRAG2`` of 2.12).

Down: a message whose payload is longer than ``frag_size`` is cut into ``ceil(length / frag_size)``
fragments without copying: fragment ``i`` is a window ``[i*frag_size, (i+1)*frag_size)`` of the
original payload. Every fragment has the original's dest, src and flags and a
``FragHeader(id, frag_id=i, num_frags)`` under FRAG2's protocol id; only fragment 0 carries (copies
of) the headers added above FRAG2, before the FragHeader, exactly as Java's
``msg.copy(false, i == 0)``. ``id`` comes from a per-sender counter starting at 1. Messages of at
most ``frag_size`` bytes pass unchanged.

Up: fragments are collected per (sender, id), in any order and interleaved between senders; when the
last one arrives a single message with the whole payload goes up, made from fragment 0 (its
dest/src/flags and its headers: the ones from above FRAG2 are what the layers above need). Unfragmented
messages of the batch pass up in the same call, in their original order, with each reassembled message
taking the place of its last fragment. Partial messages of members that left the view are dropped on
VIEW_CHANGE, so memory stays bounded.

At init (and again at start, for flow-control protocols that reset at start) FRAG2 sends
``Event(CONFIG, {"frag_size": frag_size})`` up and down; a CONFIG event with ``frag_size`` that reaches
FRAG2 sets its own frag_size, as in Java.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from jgpy._core.batch import split_by_header
from jgpy._core.headers import FragHeader
from jgpy._core.message import Message
from jgpy._core.sendpath import FragSend
from jgpy.errors import ConfigError
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int, to_size
from jgpy.stack.protocol import Protocol


class _FragEntry:
    """The fragments of one message received so far."""

    __slots__ = ("fragments", "received")

    def __init__(self, num_frags: int) -> None:
        self.fragments: list = [None] * num_frags
        self.received = 0

    def set(self, frag_id: int, msg: Message) -> bool:
        """Add fragment ``frag_id``; True when all fragments are here (duplicates are not counted)."""
        if self.fragments[frag_id] is None:
            self.fragments[frag_id] = msg
            self.received += 1
        return self.received == len(self.fragments)

    def assemble(self) -> Message:
        frags = self.fragments
        first = frags[0]
        msg = first.copy(False, True)      # dest, src, flags and the headers of fragment 0
        msg.set_buffer(b"".join([f.payload for f in frags if f.length]))    # one copy, nothing zeroed first
        self.fragments = []
        return msg


class FRAG2(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FRAG2"

    frag_size = Property(to_size, 1500, "max payload bytes of a message; bigger ones are fragmented")
    overhead = Property(to_int, 0, "(no effect)", deprecated="overhead was removed in 2.6.10; the property is ignored")

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self._lock = threading.Lock()
        self.fragment_list: dict[Any, dict[int, _FragEntry]] = {}   # sender -> {frag id -> entry}
        self.members: list = []
        self._send = FragSend(self, self.frag_size, self.fragment)
        self.down_msg = self._send.down_msg           # the send path is the C core (jgpy/_core/sendpath.pyx)
        self.num_sent_frags = 0
        self.num_received_msgs = 0
        self.num_received_frags = 0

    # ---- life cycle ----

    def init(self) -> None:
        if self.frag_size <= 0:
            raise ConfigError(f"FRAG2: frag_size={self.frag_size}: frag_size must be > 0")
        tp = None
        if self.stack is not None:
            try:
                tp = self.stack.transport
            except (AttributeError, IndexError):
                tp = None
        if tp is not None and getattr(tp, "enable_bundling", False):
            max_bundle = getattr(tp, "max_bundle_size", None)
            if isinstance(max_bundle, int) and self.frag_size >= max_bundle:
                raise ConfigError(f"FRAG2: frag_size ({self.frag_size}) has to be < TP.max_bundle_size "
                                  f"({max_bundle})")
        self._send.frag_size = self.frag_size
        self._announce()

    def start(self) -> None:
        self._send.frag_size = self.frag_size
        self._announce()

    @property
    def num_sent_msgs(self) -> int:
        return self._send.num_sent_msgs

    def _announce(self) -> None:
        info = {"frag_size": self.frag_size}
        if self.up_prot is not None:
            self.up_prot.up(Event(EventType.CONFIG, dict(info)))
        if self.down_prot is not None:
            self.down_prot.down(Event(EventType.CONFIG, dict(info)))

    def next_id(self) -> int:
        with self._id_lock:
            return next(self._ids)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
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
            self._send.frag_size = self.frag_size

    def _handle_view_change(self, view) -> None:
        new = list(view.members or ()) if view is not None else []
        keep = set(new)
        with self._lock:
            left = [m for m in self.members if m not in keep]
            self.members = new
            for m in left:                 # a member that left will never complete its messages
                if self.fragment_list.pop(m, None) is not None:
                    self.log.debug("%s: removed %s from the fragmentation table", self.local_addr, m)

    def clear_fragments_for(self, mbr) -> None:
        with self._lock:
            self.fragment_list.pop(mbr, None)

    def clear_all_fragments(self) -> None:
        with self._lock:
            self.fragment_list.clear()

    # ---- sending ----

    # down_msg: FragSend (messages longer than frag_size go to fragment(), the others pass)

    def fragment(self, msg: Message) -> None:
        """Send ``msg`` as fragments of frag_size bytes (windows into its payload; no copy)."""
        size = self.frag_size
        buf, off, length = msg.raw_buffer, msg.offset, msg.length
        num_frags = (length + size - 1) // size
        frag_id = self.next_id()
        self.num_sent_frags += num_frags
        down = self.down_prot.down_msg
        pid = self.id
        for i in range(num_frags):
            start = i * size
            frag = msg.copy(False, i == 0)
            frag.set_buffer(buf, off + start, min(size, length - start))
            frag.put_header(pid, FragHeader(frag_id, i, num_frags))
            down(frag)

    # ---- receiving ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = split_by_header(msgs, self.id)
        if not mine:
            self.num_received_msgs += len(msgs)
            self.up_prot.up_batch(msgs)
            return
        if not rest:
            out = [m for m in (self._unfragment(f) for f in msgs) if m is not None]
        else:
            pid = self.id
            out = []
            for m in msgs:                  # keep the batch order: unfragmented messages pass where they are
                if m.has_header(pid):
                    m = self._unfragment(m)
                    if m is None:
                        continue
                else:
                    self.num_received_msgs += 1
                out.append(m)
        if out:
            self.up_prot.up_batch(out)

    def _unfragment(self, frag: Message) -> Message | None:
        hdr = frag.get_header(self.id)
        sender = frag.src
        self.num_received_frags += 1
        num = hdr.num_frags
        if num <= 0 or not 0 <= hdr.frag_id < num:
            self.log.warning("%s: dropped a fragment from %s with frag_id=%d, num_frags=%d", self.local_addr,
                             sender, hdr.frag_id, num)
            return None
        with self._lock:
            table = self.fragment_list.get(sender)
            if table is None:
                table = self.fragment_list[sender] = {}
            entry = table.get(hdr.id)
            if entry is None:
                entry = table[hdr.id] = _FragEntry(num)
            elif len(entry.fragments) != num:
                self.log.warning("%s: fragment %d of message %d from %s says num_frags=%d, expected %d: dropped",
                                 self.local_addr, hdr.frag_id, hdr.id, sender, num, len(entry.fragments))
                return None
            if not entry.set(hdr.frag_id, frag):
                return None
            del table[hdr.id]
        msg = entry.assemble()
        msg.src = sender
        msg.remove_header(self.id)
        self.num_received_msgs += 1
        return msg

    # ---- diagnostics ----

    def pending(self) -> dict:
        """``{sender: number of incomplete messages}``."""
        with self._lock:
            return {s: len(t) for s, t in self.fragment_list.items() if t}

    def dump_stats(self) -> dict[str, Any]:
        return {"num_sent_msgs": self.num_sent_msgs, "num_sent_frags": self.num_sent_frags,
                "num_received_msgs": self.num_received_msgs, "num_received_frags": self.num_received_frags,
                "pending": sum(self.pending().values())}
