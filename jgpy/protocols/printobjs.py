"""PRINTOBJS: logs the object each message carries, both ways (seed 002's PRINTOBJS; not in the 2.12 jar, a jgpy
protocol with no header). A payload is shown as ``Message.getObject`` would read it (a Java value, a jgpy
Streamable, or bytes when it is none of those), cut at ``max_length`` characters, at INFO on
``jgpy.protocols.PRINTOBJS``; ``print_headers`` adds the headers."""

from __future__ import annotations

from typing import Any

from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import Protocol


class PRINTOBJS(Protocol):
    NAME = "PRINTOBJS"

    max_length = Property(to_int, 200, "jgpy: characters of an object's text that are logged")
    print_headers = Property(to_bool, False, "jgpy: log the headers too")

    def describe(self, msg) -> str:
        if not msg.has_buffer():
            text = "<no payload>"
        else:
            try:
                text = repr(self.stack.dialect.object_from_buffer(msg.payload))
            except Exception:  # noqa: BLE001 - not an object stream: show the bytes
                text = f"{msg.length} bytes {bytes(msg.payload[:32]).hex()}"
        if len(text) > self.max_length:
            text = text[:self.max_length] + "..."
        if self.print_headers:
            text += f" headers={msg.headers}"
        return text

    def down_msg(self, msg) -> Any:
        if self.log.isEnabledFor(20):
            self.log.info("sent to %s: %s", msg.dest or "all", self.describe(msg))
        return self.down_prot.down_msg(msg)

    def up_batch(self, msgs: list) -> None:
        if self.log.isEnabledFor(20):
            for m in msgs:
                self.log.info("received from %s: %s", m.src, self.describe(m))
        self.up_prot.up_batch(msgs)
