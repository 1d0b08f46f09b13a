"""PING: discovery by IP multicast (``org.jgroups.protocols.PING``)."""

from __future__ import annotations

from jgpy._core.address import logical_name
from jgpy._core.headers import PingHeader
from jgpy._core.message import Message
from jgpy._core.types import PingData
from jgpy.protocols.discovery import Discovery
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int


class PING(Discovery):
    NAME = "PING"

    discovery_timeout = Property(to_int, 0, "ms to wait for our own discovery request to come back (0: don't)")

    def send_get_members_request(self, cluster, view_id) -> None:
        self.down_prot.down_msg(self.get_members_request(cluster, view_id))

    def get_members_request(self, cluster, view_id) -> Message:
        """The GET_MBRS_REQ multicast (OOB): with our PingData when joining, with ``view_id`` for MERGE2."""
        data = None
        if view_id is None:
            physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))
            data = PingData(self.local_addr, None, None, False, logical_name(self.local_addr),
                            [physical] if physical is not None else None)
        hdr = PingHeader(PingHeader.GET_MBRS_REQ, data, cluster, view_id)
        msg = Message(None, None, None, Message.OOB)
        msg.put_header(self.id, hdr)
        return msg
