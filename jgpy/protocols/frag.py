"""FRAG: fragmentation by serialising the whole message (``org.jgroups.protocols.FRAG`` of 2.12).

Down: when Java's estimate of a message's serialised size (``Message.size()``, which
``stack.dialect.message_size`` gives) exceeds ``frag_size``, the whole message — flags, dest, src, payload and
every header added above FRAG — is written with ``Message.writeTo`` and those bytes are cut into
``frag_size`` pieces. Each piece travels as the payload of a new message to the same dest, with no flags
(an OOB message's fragments are regular ones) and only ``FragHeader(id, frag_id, num_frags)``; ``id``
comes from a counter starting at 1. Smaller messages pass unchanged. A Java application's message has no
src at FRAG (JChannel leaves it to the transport) while jgpy's channel fills it in, so jgpy serialises
without a src equal to its own address: the bytes and the decision are those of the Java node.

Up: fragments are collected per sender and id (any order, interleaved senders, duplicates ignored); the
last one completes the bytes, which are read back with ``Message.readFrom`` into the original message,
whose src is set to the sender. It is passed up in the place of its last fragment, with the batch's other
messages in their order. Fragments that cannot be used (bad indexes, counts that disagree, bytes that do
not read as a message) are dropped, counted and logged. A view change drops the partial messages of
members that left, as in 2.12; unlike 2.12, nothing is allocated from ``num_frags`` on the wire and
incomplete messages are bounded per sender and in all, and expire (:mod:`jgpy.protocols.fragtable`). At init
FRAG sends ``CONFIG {"frag_size"}`` up and down; a CONFIG event with ``frag_size`` sets FRAG's own.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from jgpy._core.headers import FragHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError, WireFormatError
from jgpy.protocols.fragtable import FragProtocol
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_size


class FRAG(FragProtocol):  # noqa: N801 - the JGroups name
    NAME = "FRAG"

    frag_size = Property(to_size, 8192, "max serialised size of a message (Java's Message.size()); bigger ones "
                         "are serialised and fragmented")
    max_retained_buffer = Property(to_size, 70000, "(no effect)", deprecated="not used anymore")

    def __init__(self) -> None:
        super().__init__()
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()
        self.num_sent_msgs = 0
        self.num_sent_frags = 0
        self.num_bad_frags = 0

    # ---- life cycle ----

    def init(self) -> None:
        if self.frag_size <= 0:
            raise ConfigError(f"FRAG: frag_size={self.frag_size}: frag_size must be > 0")
        super().init()
        info = {"frag_size": self.frag_size}
        if self.up_prot is not None:
            self.up_prot.up(Event(EventType.CONFIG, dict(info)))
        if self.down_prot is not None:
            self.down_prot.down(Event(EventType.CONFIG, dict(info)))

    def next_id(self) -> int:
        with self._id_lock:
            return next(self._ids)

    # ---- sending ----

    def _as_java_sends_it(self, msg: Message) -> Message:
        """The message as Java's FRAG sees it: without a src that is just our own address."""
        src = msg.src
        if src is not None and src == self.local_addr:
            msg = msg.copy(True, True)         # shares the payload and the header objects
            msg.src = None
        return msg

    def serialized_size(self, msg: Message) -> int:
        """Java's ``Message.size()`` of ``msg`` as FRAG compares it with frag_size."""
        return self.stack.dialect.message_size(self._as_java_sends_it(msg))

    def down_msg(self, msg: Message) -> Any:
        self.num_sent_msgs += 1
        jmsg = self._as_java_sends_it(msg)
        size = self.stack.dialect.message_size(jmsg)
        if size > self.frag_size:
            self.fragment(jmsg)
            return None
        return self.down_prot.down_msg(msg)

    def fragment(self, msg: Message) -> None:
        """Serialise ``msg`` (``Message.writeTo``) and send the bytes in frag_size pieces."""
        dialect = self.stack.dialect
        data = dialect.encode(msg)
        size = self.frag_size
        num_frags = (len(data) + size - 1) // size
        frag_id = self.next_id()
        self.num_sent_frags += num_frags
        dest, src, pid = msg.dest, msg.src, self.id
        self.log.debug("%s: fragmenting a message to %s (%d bytes) into %d fragments of %d bytes", self.local_addr,
                       dest if dest is not None else "<all members>", len(data), num_frags, size)
        down = self.down_prot.down_msg
        for i in range(num_frags):
            frag = Message(dest, None, src)
            frag.set_buffer(data, i * size, min(size, len(data) - i * size))
            frag.put_header(pid, FragHeader(frag_id, i, num_frags))
            down(frag)

    # ---- receiving ----

    def _drop(self, frag: Message, why: str, *args) -> None:
        self.num_bad_frags += 1
        self._rl.warning("bad-frag", "%s: dropped a fragment from %s: " + why, self.local_addr, frag.src, *args)

    def _unfragment(self, frag: Message) -> Message | None:
        try:
            hdr = frag.get_header(self.id)
        except (WireFormatError, ValueError, TypeError) as e:
            self._drop(frag, "unreadable FragHeader (%s)", e)
            return None
        sender = frag.src
        self.num_received_frags += 1
        data = frag.buffer if frag.has_buffer() else b""
        bad = self.table.bad
        parts = self.table.add(sender, hdr.id, hdr.frag_id, hdr.num_frags, data, len(data))
        if parts is None:
            self.num_bad_frags += self.table.bad - bad
            return None
        buf = b"".join(parts)
        try:
            msg = self.stack.dialect.decode(Message, buf, False)
        except Exception as e:  # noqa: BLE001 - any decoding failure: Java logs and drops it
            self.num_bad_frags += 1
            self._rl.error("bad-assembly", "%s: failed unfragmenting a message of %d bytes from %s: %s",
                           self.local_addr, len(buf), sender, e)
            return None
        msg.src = sender
        self.num_received_msgs += 1
        return msg

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        d["num_bad_frags"] = self.num_bad_frags
        return d
