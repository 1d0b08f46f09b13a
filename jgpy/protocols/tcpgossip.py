"""TCPGOSSIP: discovery through GossipRouters (``org.jgroups.protocols.TCPGOSSIP`` of 2.12), with TCP below.

On CONNECT the member registers (logical address, name, physical address) with every router of
``initial_hosts``; a discovery round asks each router for the members registered under the cluster
(GOSSIP_GET), learns their physical addresses and names, and sends each of them a GET_MBRS_REQ as an OOB unicast;
their answers are the discovery responses, as with PING. A broken router connection is reconnected every
``reconnect_interval`` ms (see :mod:`jgpy.stack.routerstub`); DISCONNECT unregisters the member.
"""

from __future__ import annotations

from typing import Any

from jgpy._core.address import UUID, logical_name, set_logical_name
from jgpy._core.headers import PingHeader
from jgpy._core.message import Message
from jgpy._core.types import PingData
from jgpy.errors import ConfigError
from jgpy.protocols.discovery import Discovery
from jgpy.protocols.tunnel import parse_router_hosts
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int, to_str
from jgpy.stack.routerstub import RouterStub, RouterStubs

#: members taken from one round of GOSSIP_GET answers at most (a router cannot make us send without limit)
MAX_GOSSIP_MEMBERS = 4096


class TCPGOSSIP(Discovery):
    NAME = "TCPGOSSIP"

    initial_hosts = Property(to_str, None, "comma-separated host[port] list of the GossipRouters")
    sock_conn_timeout = Property(to_int, 1000, "max ms to open a router connection")
    sock_read_timeout = Property(to_int, 3000, "max ms to wait for a router's answer (0: forever)")
    reconnect_interval = Property(to_int, 10000, "ms between attempts to reconnect a broken router connection")
    DEPRECATED_PROPERTIES = Discovery.DEPRECATED_PROPERTIES + ("gossip_refresh_rate",)

    def __init__(self) -> None:
        super().__init__()
        self.routers: list[tuple[str, int]] = []
        self.stubs: RouterStubs | None = None
        self.counters.update({"gossip_gets": 0, "gossip_get_failures": 0})

    def init(self) -> None:
        super().init()
        self.routers = parse_router_hosts(self.initial_hosts, "TCPGOSSIP initial_hosts")
        if not self.routers:
            raise ConfigError("TCPGOSSIP: initial_hosts must contain the address of at least one GossipRouter")
        if self.timeout <= self.sock_conn_timeout:
            raise ConfigError(f"TCPGOSSIP: timeout ({self.timeout}) must be greater than sock_conn_timeout "
                              f"({self.sock_conn_timeout})")
        if getattr(self.stack.transport, "NAME", "") == "TUNNEL":
            raise ConfigError("TCPGOSSIP cannot be used with TUNNEL; use either TUNNEL:PING or TCP:TCPGOSSIP")

    def stop(self) -> None:
        stubs, self.stubs = self.stubs, None
        if stubs is not None:
            stubs.disconnect_all(self.cluster, self.local_addr)
            stubs.destroy()
        super().stop()

    def down(self, evt: Event) -> Any:
        ret = super().down(evt)
        if evt.type == EventType.CONNECT:
            self._register(str(evt.arg))
        elif evt.type == EventType.DISCONNECT and self.stubs is not None:
            self.stubs.disconnect_all(self.cluster, self.local_addr)
        return ret

    def _register(self, cluster: str) -> None:
        old, self.stubs = self.stubs, None
        if old is not None:
            old.destroy()
        dialect = self.stack.dialect

        def make(host: str, port: int) -> RouterStub:
            return RouterStub(host, port, dialect, conn_timeout_ms=self.sock_conn_timeout,
                              read_timeout_ms=self.sock_read_timeout, on_broken=lambda stub: stubs.broken(stub))

        def registration():
            physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))
            return cluster, self.local_addr, logical_name(self.local_addr), [physical] if physical else None

        stubs = RouterStubs(self.routers, make, registration, self.reconnect_interval,
                            f"jgpy-tcpgossip-reconnector-{cluster}")
        self.stubs = stubs
        stubs.connect_all()

    def send_get_members_request(self, cluster, view_id) -> None:
        stubs = self.stubs
        if stubs is None or cluster is None:
            return
        found: dict = {}
        for stub in stubs.connected():
            self.counters["gossip_gets"] += 1
            try:
                rsps = stub.get_members(cluster)
            except OSError as e:
                self.counters["gossip_get_failures"] += 1
                self._rl.warning("gossip-get", "failed fetching members from GossipRouter %s:%d: %s",
                                 stub.host, stub.port, e)
                continue
            for rsp in rsps:
                if rsp.own_addr is not None and len(found) < MAX_GOSSIP_MEMBERS:
                    found.setdefault(rsp.own_addr, rsp)
        for addr, rsp in found.items():
            for physical in rsp.physical_addrs or ():
                self.down_prot.down(Event(EventType.SET_PHYSICAL_ADDRESS, (addr, physical)))
            if rsp.logical_name is not None and isinstance(addr, UUID):
                set_logical_name(addr, rsp.logical_name)
        if not found:
            return
        physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))
        data = PingData(self.local_addr, None, None, False, logical_name(self.local_addr),
                        [physical] if physical is not None else None)
        for addr in found:
            msg = Message(addr, None, None, Message.OOB)
            msg.put_header(self.id, PingHeader(PingHeader.GET_MBRS_REQ, data, cluster, view_id))
            self.down_prot.down_msg(msg)

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        d.update(self.counters)
        if self.stubs is not None:
            d.update(self.stubs.stats())
        return d
