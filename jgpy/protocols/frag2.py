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
VIEW_CHANGE, as in 2.12; unlike 2.12, nothing is allocated from ``num_frags`` on the wire and incomplete
messages are bounded per sender and in all, and expire (:mod:`jgpy.protocols.fragtable`).

At init (and again at start, for flow-control protocols that reset at start) FRAG2 sends
``Event(CONFIG, {"frag_size": frag_size})`` up and down; a CONFIG event with ``frag_size`` that reaches
FRAG2 sets its own frag_size, as in Java.
"""

from __future__ import annotations

import itertools
import threading

from jgpy._core.frag2 import FragCore
from jgpy._core.headers import FragHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.fragtable import FragProtocol
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import CoreProperty, Property, to_int, to_size


class FRAG2(FragCore, FragProtocol):  # noqa: N801 - the JGroups name
    """The down path is the C core (``FragCore``, ``jgpy/_core/frag2.pyx``): messages longer than ``frag_size`` go
    to :meth:`fragment`, the others pass in C."""

    NAME = "FRAG2"

    frag_size = CoreProperty(to_size, 1500, "max payload bytes of a message; bigger ones are fragmented")
    overhead = Property(to_int, 0, "(no effect)", deprecated="overhead was removed in 2.6.10; the property is ignored")

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self.num_sent_frags = 0

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
        super().init()
        self._announce()

    def start(self) -> None:
        super().start()
        self._announce()

    def _announce(self) -> None:
        info = {"frag_size": self.frag_size}
        if self.up_prot is not None:
            self.up_prot.up(Event(EventType.CONFIG, dict(info)))
        if self.down_prot is not None:
            self.down_prot.down(Event(EventType.CONFIG, dict(info)))

    def next_id(self) -> int:
        with self._id_lock:
            return next(self._ids)

    # ---- sending ----

    # down_msg: the core (messages longer than frag_size go to fragment(), the others pass)

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

    def _unfragment(self, frag: Message) -> Message | None:
        hdr = frag.get_header(self.id)
        sender = frag.src
        self.num_received_frags += 1
        frags = self.table.add(sender, hdr.id, hdr.frag_id, hdr.num_frags, frag, frag.length, frag.raw_buffer)
        if frags is None:
            return None
        msg = frags[0].copy(False, True)      # dest, src, flags and the headers of fragment 0
        msg.set_buffer(b"".join([f.payload for f in frags if f.length]))    # one copy, nothing zeroed first
        msg.src = sender
        msg.remove_header(self.id)
        self.num_received_msgs += 1
        return msg
