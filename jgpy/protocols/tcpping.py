"""TCPPING: discovery by asking a configured list of hosts (``org.jgroups.protocols.TCPPING`` of 2.12).

Every discovery request goes as an OOB unicast to each address of ``initial_hosts`` (``host[port]``, each
port up to port + port_range) and to the members found since (the dynamic hosts), but not to ourselves.
It always carries our PingData (and the view id when MERGE2 asks). Members answer with their whole
logical->physical cache (``return_entire_cache``, unless they are the coordinator), so a joiner learns
every member's address from any one of them.
"""

from __future__ import annotations

import socket

from jgpy._core.address import IpAddress, logical_name
from jgpy._core.headers import PingHeader
from jgpy._core.message import Message
from jgpy._core.types import PingData
from jgpy.errors import ConfigError
from jgpy.protocols.discovery import Discovery
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_bool, to_int, to_str


def parse_initial_hosts(spec: str, port_range: int, what: str = "TCPPING initial_hosts") -> list[IpAddress]:
    """``"A[7800],B[7801]"`` -> the IpAddresses A:7800..7800+port_range, B:7801..7801+port_range (Java's
    Util.parseCommaDelimitedHosts: both ends included), host names resolved, duplicates dropped. ``what``
    names the property in errors."""
    out: list[IpAddress] = []
    for item in (t.strip() for t in (spec or "").split(",")):
        if not item:
            continue
        if "[" not in item or not item.endswith("]"):
            raise ConfigError(f"{what}: {item!r} is not host[port] (e.g. 127.0.0.1[7800])")
        host, _, port_text = item[:-1].partition("[")
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(f"{what}: {item!r} has no numeric port") from None
        try:
            ip = socket.getaddrinfo(host.strip(), None, type=socket.SOCK_STREAM)[0][4][0]
        except OSError as e:
            raise ConfigError(f"{what}: cannot resolve {host.strip()!r}: {e}") from None
        for p in range(port, port + max(0, port_range) + 1):
            if p > 0xFFFF:
                break
            a = IpAddress(ip, p)
            if a not in out:
                out.append(a)
    return out


class TCPPING(Discovery):
    NAME = "TCPPING"
    DYNAMIC_DISCOVERY = False         # TCP needs a fixed bind_port with it

    port_range = Property(to_int, 1, "ports above each initial host's port to ask too")
    initial_hosts = Property(to_str, None, "comma-separated host[port] list of the members to ask",
                             system_property=("jgroups.tcpping.initial_hosts",))
    max_dynamic_hosts = Property(to_int, 100, "max hosts remembered beyond initial_hosts")
    return_entire_cache = Property(to_bool, True, "answer with the whole logical->physical cache")

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[IpAddress] = []
        self.dynamic_hosts: list[IpAddress] = []

    def init(self) -> None:
        super().init()
        if not self.initial_hosts:
            raise ConfigError("TCPPING needs initial_hosts (e.g. initial_hosts=\"127.0.0.1[7800]\" or "
                              "-Djgroups.tcpping.initial_hosts=...)")
        self.hosts = parse_initial_hosts(self.initial_hosts, self.port_range)

    def send_get_members_request(self, cluster, view_id) -> None:
        physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))
        data = PingData(self.local_addr, None, None, False, logical_name(self.local_addr),
                        [physical] if physical is not None else None)
        hdr = PingHeader(PingHeader.GET_MBRS_REQ, data, cluster, view_id)
        for addr in dict.fromkeys(self.hosts + self.dynamic_hosts):
            if addr == physical:
                continue
            msg = Message(addr, None, None, Message.OOB)
            msg.put_header(self.id, hdr)
            self.down_prot.down_msg(msg)

    def _add_dynamic(self, addr) -> None:
        if isinstance(addr, IpAddress) and addr not in self.hosts and addr not in self.dynamic_hosts:
            self.dynamic_hosts.append(addr)
            if len(self.dynamic_hosts) > self.max_dynamic_hosts:
                del self.dynamic_hosts[0]

    def down(self, evt: Event):
        ret = super().down(evt)
        if evt.type == EventType.VIEW_CHANGE:
            for m in self.members:
                self._add_dynamic(self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, m)))
        return ret

    def discovery_request_received(self, sender, name, physical_addrs) -> None:
        for a in physical_addrs or ():
            self._add_dynamic(a)
