"""TRACE: logs every event and message passing it, both ways (``org.jgroups.protocols.TRACE`` of 2.12, which
prints them on stdout; jgpy logs them at INFO on ``jgpy.protocols.TRACE``)."""

from __future__ import annotations

from typing import Any

from jgpy.stack.events import Event
from jgpy.stack.protocol import Protocol


class TRACE(Protocol):
    NAME = "TRACE"

    def up(self, evt: Event) -> Any:
        self.log.info("received: %s", evt)
        return self.up_prot.up(evt)

    def down(self, evt: Event) -> Any:
        self.log.info("sent: %s", evt)
        return self.down_prot.down(evt)

    def down_msg(self, msg) -> Any:
        self.log.info("sent: %r", msg)
        return self.down_prot.down_msg(msg)

    def up_batch(self, msgs: list) -> None:
        for msg in msgs:
            self.log.info("received: %r", msg)
        self.up_prot.up_batch(msgs)
