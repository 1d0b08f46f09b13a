"""pbcast.STATE_TRANSFER: byte-array state transfer (``org.jgroups.protocols.pbcast.STATE_TRANSFER``).

STATUS: not implemented yet (issue #4). This placeholder accepts the protocol's configuration and
passes everything through, so a Java member asking a jgpy member for state gets no answer (its getState
times out) and ``Channel.get_state`` is not available.
"""

from __future__ import annotations

from jgpy.stack.properties import Property, to_bool
from jgpy.stack.protocol import Protocol


class STATE_TRANSFER(Protocol):  # noqa: N801 - the JGroups name
    NAME = "pbcast.STATE_TRANSFER"
    PASS_THROUGH = "state transfer is not implemented yet (issue #4)"

    use_flush = Property(to_bool, False, "run a flush around the transfer (deprecated in 2.12)",
                         deprecated="FLUSH decides by itself")

    def init(self) -> None:
        self.log.info("pbcast.STATE_TRANSFER is a pass-through in this jgpy version: %s", self.PASS_THROUGH)
