"""TUNNEL: the transport through GossipRouters (``org.jgroups.protocols.TUNNEL`` of 2.12).

Every datagram goes over TCP to a GossipRouter: a multicast as a MESSAGE to the cluster, a unicast as a MESSAGE
to the destination's logical address; the router forwards it to the members registered under the cluster. On
CONNECT the member registers with every router of ``gossip_router_hosts`` (a stub each, see
:mod:`jgpy.stack.routerstub`); a datagram goes through the first connected stub (2.12 shuffles them first), and
what any router forwards goes up as a received datagram. A broken router connection is reconnected every
``reconnect_interval`` ms; a SUSPECT from a router (a member's router connection broke) goes up as a suspicion.

As 2.12: bundling is off (2.12 does not bundle over TUNNEL), loopback is on (our own multicasts come back through
the router and are dropped as own messages), and the physical address is that of a UDP socket bound to
bind_addr:bind_port that carries nothing (it only makes the address unique, as 2.12's ``TUNNEL_UCAST_SOCK``).
Discovery is PING (its multicast request goes through the routers); TCPGOSSIP does not run over TUNNEL.
"""

from __future__ import annotations

import random
import socket
import threading
from collections import deque
from typing import Any

from jgpy._core.address import IpAddress, logical_name
from jgpy.errors import ConfigError
from jgpy.protocols.tcpping import parse_initial_hosts
from jgpy.protocols.tp import TP
from jgpy.stack.events import Event, EventType
from jgpy.stack.gossip import Limits
from jgpy.stack.netutil import bind_first_free, resolve_bind_addr
from jgpy.stack.properties import Property, to_bool, to_int, to_size, to_str
from jgpy.stack.routerstub import RouterStub, RouterStubs

#: suspicions from the routers waiting to go up at most (a router that floods SUSPECTs cannot grow the queue)
MAX_PENDING_SUSPECTS = 256


def parse_router_hosts(spec: str | None, what: str) -> list[tuple[str, int]]:
    """``"h1[12001],h2[12002]"`` (or 2.12's ``List.toString()`` form in brackets) -> [(ip, port), ...]."""
    spec = (spec or "").strip()
    if spec.startswith("[") and spec.endswith("]"):
        spec = spec[1:-1]
    return [(a.host, a.port) for a in parse_initial_hosts(spec, 0, what)]


class TUNNEL(TP):
    NAME = "TUNNEL"

    gossip_router_hosts = Property(to_str, None, "comma-separated host[port] list of the GossipRouters")
    router_host = Property(to_str, None, "(deprecated in 2.12: use gossip_router_hosts) the router's host")
    router_port = Property(to_int, 0, "(deprecated in 2.12: use gossip_router_hosts) the router's port")
    reconnect_interval = Property(to_int, 5000, "ms between attempts to reconnect a broken router connection (and "
                                  "between pings of a connected one)")
    tcp_nodelay = Property(to_bool, False, "TCP_NODELAY on the router connections")
    sock_conn_timeout = Property(to_int, 3000, "jgpy: max ms to open a router connection (2.12's RouterStub: 3000)")
    sock_read_timeout = Property(to_int, 3000, "jgpy: SO_TIMEOUT of a router connection: max ms a send or a "
                                 "CONNECT answer may take (2.12's RouterStub: 3000)")
    max_message = Property(to_size, 0, "jgpy: the longest MESSAGE a router may forward to us (0: the larger of 1 "
                           "MiB and the stack's frag_size + 64 KiB); a longer one breaks that connection")

    def __init__(self) -> None:
        super().__init__()
        self.routers: list[tuple[str, int]] = []
        self.stubs: RouterStubs | None = None
        self._sock: socket.socket | None = None
        self._suspects: deque = deque(maxlen=MAX_PENDING_SUSPECTS)
        self._suspect_wakeup = threading.Event()
        self._suspect_thread: threading.Thread | None = None
        self._running = False
        self.counters.update({"dropped_no_router": 0, "suspects_from_router": 0})

    def init(self) -> None:
        if self.enable_bundling:
            self.log.warning("bundling is not supported by TUNNEL; bundling is disabled")
            self.enable_bundling = False
        self.loopback = True              # 2.12: mandatory with TUNNEL
        hosts = parse_router_hosts(self.gossip_router_hosts, "TUNNEL gossip_router_hosts")
        if self.router_host and self.router_port and hosts:
            raise ConfigError("TUNNEL: set either router_host and router_port or gossip_router_hosts, not both")
        if self.router_host and self.router_port:
            hosts = parse_router_hosts(f"{self.router_host}[{self.router_port}]", "TUNNEL router_host")
        if not hosts:
            raise ConfigError("TUNNEL needs gossip_router_hosts (e.g. 127.0.0.1[12001], or "
                              "-Djgroups.tunnel.gossip_router_hosts=... with tunnel.xml) or router_host and "
                              "router_port")
        self.routers = hosts

    # ---- life cycle ----

    def start(self) -> None:
        bind = resolve_bind_addr(self.bind_addr)
        self._sock = bind_first_free(bind, self.bind_port, self.port_range, socket.SOCK_DGRAM, 0, "TUNNEL")
        self.physical_addr = IpAddress(bind, self._sock.getsockname()[1])
        if self.local_addr is not None:
            self.add_physical_address(self.local_addr, self.physical_addr)
        super().start()
        self._running = True
        self._suspect_thread = threading.Thread(target=self._suspect_loop, daemon=True,
                                                name=f"jgpy-tunnel-suspects-{self.physical_addr.port}")
        self._suspect_thread.start()

    def stop(self) -> None:
        self._running = False
        self._suspect_wakeup.set()
        stubs, self.stubs = self.stubs, None
        if stubs is not None:
            stubs.destroy()
        if self._suspect_thread is not None and self._suspect_thread is not threading.current_thread():
            self._suspect_thread.join(2.0)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        super().stop()

    def down(self, evt: Event) -> Any:
        ret = super().down(evt)
        if evt.type == EventType.CONNECT:
            self._connect_stubs(str(evt.arg))
        elif evt.type == EventType.DISCONNECT:
            stubs = self.stubs
            if stubs is not None:
                stubs.disconnect_all(self.stack.cluster_name, self.local_addr)
        return ret

    def _connect_stubs(self, cluster: str) -> None:
        old, self.stubs = self.stubs, None
        if old is not None:
            old.destroy()
        limits = Limits(max_buffer=self._message_limit())
        dialect = self.stack.dialect
        bind = resolve_bind_addr(self.bind_addr) if self.bind_addr else None

        def make(host: str, port: int) -> RouterStub:
            return RouterStub(host, port, dialect, bind_addr=bind, tcp_nodelay=self.tcp_nodelay,
                              conn_timeout_ms=self.sock_conn_timeout, read_timeout_ms=self.sock_read_timeout,
                              limits=limits, on_message=self._from_router, on_suspect=self._suspect_from_router,
                              on_broken=lambda stub: stubs.broken(stub))

        def registration():
            return cluster, self.local_addr, logical_name(self.local_addr), [self.physical_addr]

        stubs = RouterStubs(self.routers, make, registration, self.reconnect_interval,
                            f"jgpy-tunnel-reconnector-{self.physical_addr.port if self.physical_addr else 0}")
        self.stubs = stubs
        stubs.connect_all()

    def _message_limit(self) -> int:
        if self.max_message > 0:
            return self.max_message
        frag = max((getattr(p, "frag_size", 0) or 0 for p in self.stack.protocols), default=0)
        return max(1 << 20, frag + (64 << 10))

    # ---- sending: every datagram through a router ----

    def _send_single(self, msg, dest, multicast: bool) -> None:
        data = self.stack.dialect.encode_message(msg, multicast)
        self._to_router(data, None if multicast else dest)

    def send_multicast_datagram(self, data: bytes) -> None:
        self._to_router(data, None)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        self.counters["dropped_no_router"] += 1      # a physical destination cannot be routed (TCPPING's requests)

    def _to_router(self, data: bytes, dest) -> None:
        stubs = self.stubs
        connected = stubs.connected() if stubs is not None else []
        if len(connected) > 1:
            random.shuffle(connected)
        for stub in connected:
            try:
                stub.send_to_member(self.stack.cluster_name, dest, data)
                return
            except OSError:
                continue
        self.counters["dropped_no_router"] += 1
        self._rl.warning("no-router", "%s: no GossipRouter connection took a message (to %s): dropped",
                         self.local_addr, dest or "all")

    # ---- receiving ----

    def _from_router(self, datagram: bytes, multicast: bool) -> None:
        self.receive_datagrams([datagram], None, multicast)

    def _suspect_from_router(self, addr) -> None:
        """2.12 fires the suspicion on a thread of its own; jgpy queues it for one thread (bounded)."""
        self.counters["suspects_from_router"] += 1
        self._suspects.append(addr)
        self._suspect_wakeup.set()

    def _suspect_loop(self) -> None:
        while self._running:
            self._suspect_wakeup.wait(1.0)
            self._suspect_wakeup.clear()
            while self._suspects and self._running:
                addr = self._suspects.popleft()
                try:
                    self.up_prot.up(Event(EventType.SUSPECT, addr))
                except Exception:  # noqa: BLE001
                    self._rl.exception("suspect-up", "%s: passing a router's SUSPECT up failed", self.local_addr)

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        if self.stubs is not None:
            d.update(self.stubs.stats())
        return d
