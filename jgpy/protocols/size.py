"""SIZE: logs (at DEBUG, 2.12: trace) the size of every message passing it, both ways
(``org.jgroups.protocols.SIZE`` of 2.12): the serialized size (``Message.writeTo``) when it is above
``min_size``, or the payload's with ``raw_buffer``; ``print_msg`` adds the headers. Counts the messages and
their payload bytes."""

from __future__ import annotations

import logging
from typing import Any

from jgpy._core.message import Message
from jgpy._core.wire import Writer
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import Protocol


class SIZE(Protocol):
    NAME = "SIZE"

    print_msg = Property(to_bool, False, "log the headers too")
    raw_buffer = Property(to_bool, False, "log the payload's size instead of the serialized message's")
    min_size = Property(to_int, 0, "log a serialized size only above this")

    def __init__(self) -> None:
        super().__init__()
        self.counters = {"msgs_up": 0, "bytes_up": 0, "msgs_down": 0, "bytes_down": 0}

    def serialized_size(self, msg: Message) -> int:
        """``Message.writeTo``'s length (2.12's sizeOf), or the payload's with ``raw_buffer``."""
        if self.raw_buffer:
            return msg.length
        w = Writer()
        self.stack.dialect.write_message_to(w, msg)
        return len(w.getvalue())

    def _log(self, msg: Message, direction: str) -> None:
        size = self.serialized_size(msg)
        if self.raw_buffer or size > self.min_size:
            what = "message buffer" if self.raw_buffer else "serialized message"
            self.log.debug("%s: size of %s is %d, %d headers", direction, what, size, msg.num_headers)
        if self.print_msg:
            self.log.debug("headers are %s, payload size=%d", msg.headers, msg.length)

    def down_msg(self, msg: Message) -> Any:
        self.counters["msgs_down"] += 1
        self.counters["bytes_down"] += msg.length
        if self.log.isEnabledFor(logging.DEBUG):
            self._log(msg, "sent")
        return self.down_prot.down_msg(msg)

    def up_batch(self, msgs: list) -> None:
        debug = self.log.isEnabledFor(logging.DEBUG)
        for msg in msgs:
            self.counters["msgs_up"] += 1
            self.counters["bytes_up"] += msg.length
            if debug:
                self._log(msg, "received")
        self.up_prot.up_batch(msgs)

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters)
