"""TUNNEL, TCPGOSSIP and the GossipRouter (issue 24): the jar's tunnel.xml and tcpgossip.xml, unchanged but for
their system properties (jgroups.tunnel.gossip_router_hosts; tcpgossip.xml's TCP bind_port moved to a free block,
as test_tcp does with tcp.xml), with jgpy and Java 2.12.2 members through Java's GossipRouter from the jar and
through jgpy's (``python -m jgpy gossip-router``); routers restarted and killed under connected members, members
killed behind a router, several routers; and strangers against jgpy's router.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

import pytest

from jgpy import DIALECT, UUID
from jgpy._core.address import IpAddress
from jgpy._core.types import PingData
from jgpy.errors import ConfigError
from jgpy.gossip_router import GossipRouter
from jgpy.stack import gossip
from jgpy.stack.gossip import GossipData, Limits, NeedMore
from jgpy.stack.config import parse_xml
from jgpy.stack.routerstub import RouterStub
from jgpy.stack.stack import ProtocolStack
from jgpy.testing.children import listens_on
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import free_port_block
from jgpy.testing.routers import RouterProcess, router_props
from tests.conftest import require_java
from tests.test_stack_interop import Cluster, exchange

pytestmark = pytest.mark.timeout(300)


# ---- the wire ----

def test_gossip_data_round_trips_and_reads_from_any_split():
    me, dest = UUID.random(), UUID.random()
    reqs = [GossipData(gossip.CONNECT, "c1", me, "P1", None, [IpAddress("127.0.0.1", 7800)]),
            GossipData(gossip.MESSAGE, "c1", dest, buffer=b"\x13\x02" + b"d" * 3000),
            GossipData(gossip.GOSSIP_GET, "c1"), GossipData(gossip.PING), GossipData(gossip.CLOSE),
            GossipData(gossip.DISCONNECT, "c1", me)]
    stream = b"".join(gossip.encode(DIALECT, r) for r in reqs)
    # the MESSAGE prefix is the encoding of a MESSAGE without group name's copy of the buffer
    assert gossip.message_prefix(DIALECT, "c1", dest, 5) + b"abcde" == \
        gossip.encode(DIALECT, GossipData(gossip.MESSAGE, "c1", dest, buffer=b"abcde"))
    for step in (1, 7, 100, len(stream)):
        got, buf, need = [], b"", 0
        for i in range(0, len(stream), step):
            buf += stream[i:i + step]
            while buf and len(buf) >= need:
                try:
                    req, end = gossip.decode_request(DIALECT, buf, Limits())
                except NeedMore as e:
                    assert e.need >= len(buf) or e.need == 0
                    need = e.need
                    break
                got.append(req)
                buf, need = buf[end:], 0
        assert [(g.type, g.group, g.addr, g.logical_name, g.physical_addrs, g.buffer) for g in got] == \
            [(r.type, r.group, r.addr, r.logical_name, r.physical_addrs, r.buffer) for r in reqs], step


def test_bad_requests_are_refused_before_their_bytes_arrive():
    base = gossip.encode(DIALECT, GossipData(gossip.MESSAGE, "c", None, buffer=b"x"))
    huge = base[:-5] + struct.pack(">i", 1 << 30)
    with pytest.raises(gossip.WireFormatError, match="buffer of"):
        gossip.decode_request(DIALECT, huge, Limits(max_buffer=1 << 20))
    negative = base[:-5] + struct.pack(">i", -5)
    with pytest.raises(gossip.WireFormatError):
        gossip.decode_request(DIALECT, negative, Limits())
    many = bytes([gossip.CONNECT, 0, 1, 0]) + struct.pack(">h", 30000)   # null address, no name
    with pytest.raises(gossip.WireFormatError, match="addresses"):
        gossip.decode_request(DIALECT, many, Limits())
    with pytest.raises(gossip.WireFormatError):             # an address type that does not exist
        gossip.decode_request(DIALECT, bytes([gossip.CONNECT, 0, 0]) + struct.pack(">h", 117) + bytes(20), Limits())
    members = gossip.encode_members(DIALECT, [PingData(UUID.random(), None, None, True, "A",
                                                       [IpAddress("127.0.0.1", 1)])])
    rsps, end = gossip.decode_members(DIALECT, members, Limits())
    assert end == len(members) and rsps[0].logical_name == "A"
    with pytest.raises(NeedMore):
        gossip.decode_members(DIALECT, members[:-3], Limits())


def test_configs_load_unchanged_and_wrong_settings_are_refused():
    stack = ProtocolStack(stock("tunnel.xml"), _Top(), router_props([12001, 12002]))
    tunnel = stack.protocols[0]
    tunnel.init()
    assert tunnel.NAME == "TUNNEL" and tunnel.routers == [("127.0.0.1", 12001), ("127.0.0.1", 12002)]
    assert tunnel.enable_bundling is False and tunnel.loopback is True
    gossip_stack = ProtocolStack(stock("tcpgossip.xml"), _Top(), router_props([12003]))
    assert [p.NAME for p in gossip_stack.protocols[:2]] == ["TCP", "TCPGOSSIP"]
    gossip_stack.protocols[1].init()
    assert gossip_stack.protocols[1].routers == [("127.0.0.1", 12003)]
    with pytest.raises(ConfigError, match="gossip_router_hosts"):
        ProtocolStack(stock("tunnel.xml").with_properties("TUNNEL", gossip_router_hosts=""), _Top()).protocols[0].init()
    old_style = ProtocolStack(parse_xml('<config><TUNNEL router_host="127.0.0.1" router_port="12005"/><PING/>'
                                        '<pbcast.NAKACK/><UNICAST/><pbcast.STABLE/><pbcast.GMS/></config>'), _Top())
    old_style.protocols[0].init()                          # smack_tunnel.xml's deprecated pair
    assert old_style.protocols[0].routers == [("127.0.0.1", 12005)]
    both = ProtocolStack(stock("tunnel.xml").with_properties("TUNNEL", router_host="127.0.0.1", router_port="1"),
                         _Top(), router_props([12001]))
    with pytest.raises(ConfigError, match="not both"):
        both.protocols[0].init()
    bad = ProtocolStack(stock("tcpgossip.xml").with_properties("TCPGOSSIP", timeout="500"), _Top(),
                        router_props([12003]))
    with pytest.raises(ConfigError, match="sock_conn_timeout"):
        bad.protocols[1].init()


class _Top:
    def up(self, evt):
        return None

    def up_batch(self, msgs):
        return None


# ---- clusters through routers ----

class RouterCluster(Cluster):
    """Members on the jar's tunnel.xml or tcpgossip.xml, pointed at the routers on ``ports``."""

    def __init__(self, kinds: str, config_name: str, ports: list[int]):
        config = stock(config_name)
        if config.protocols[0].name == "TCP":              # tcpgossip.xml: TCP's fixed bind_port, moved
            config = config.with_properties("TCP", bind_port=str(free_port_block(len(kinds) + 2)))
        self.kinds = kinds
        self.props = router_props(ports)
        self.name = f"tun-{uuid.uuid4().hex[:8]}"
        self.config = self.jgpy_config = config
        self.members = []
        counts = {"J": 0, "P": 0, "p": 0}
        for k in kinds:
            counts[k] += 1
            self.members.append(make_member(k, f"{k.upper()}{counts[k]}", config, self.props))


@pytest.fixture
def made():
    things: list = []
    yield things
    for t in reversed(things):
        try:
            t.close()
        except Exception:  # noqa: BLE001
            pass


def _router(made: list, kind: str, port: int | None = None) -> RouterProcess:
    if kind == "java":
        require_java()
    r = RouterProcess(kind, port)
    made.append(r)
    return r


def _cluster(made: list, kinds: str, config_name: str, ports: list[int]) -> RouterCluster:
    if "J" in kinds:
        require_java()
    c = RouterCluster(kinds, config_name, ports)
    made.append(c)
    return c


@pytest.mark.processes
@pytest.mark.parametrize("router,kinds", [
    pytest.param("java", "JP", marks=pytest.mark.interop), pytest.param("java", "PJ", marks=pytest.mark.interop),
    pytest.param("jgpy", "JP", marks=pytest.mark.interop), pytest.param("jgpy", "PJP", marks=pytest.mark.interop),
    ("jgpy", "PP")])
def test_tunnel_xml_mixed_clusters_through_either_router(made, router, kinds):
    r = _router(made, router)
    c = _cluster(made, kinds, "tunnel.xml", [r.port])
    c.start()
    c.assert_agreement()
    assert c.members[-1].view_names()[0] == c.members[0].name       # the first member coordinates
    exchange(c, 600, unicasts=100)
    for m in (m for m in c.members if m.kind == "jgpy"):
        t = m.stats()["TUNNEL"]
        assert t["dropped_malformed"] == 0 and t["bad_answers"] == 0 and t["routers_connected"] == 1, t


@pytest.mark.processes
@pytest.mark.parametrize("router,kinds", [
    pytest.param("java", "JP", marks=pytest.mark.interop), pytest.param("java", "PJ", marks=pytest.mark.interop),
    pytest.param("jgpy", "PJ", marks=pytest.mark.interop), ("jgpy", "PP")])
def test_tcpgossip_xml_mixed_clusters_through_either_router(made, router, kinds):
    r = _router(made, router)
    c = _cluster(made, kinds, "tcpgossip.xml", [r.port])
    c.start()
    c.assert_agreement()
    exchange(c, 600, unicasts=100)
    for m in (m for m in c.members if m.kind == "jgpy"):
        g = m.stats()["TCPGOSSIP"]
        assert g["gossip_gets"] >= 1 and g["routers_connected"] == 1, g


@pytest.mark.processes
@pytest.mark.parametrize("router,kinds", [pytest.param("java", "PJ", marks=pytest.mark.interop),
                                          pytest.param("jgpy", "JP", marks=pytest.mark.interop),
                                          ("jgpy", "PP")])
def test_a_restarted_router_gets_its_members_back(made, router, kinds):
    """The router is killed under connected members and started again on its port: every member reconnects
    (tunnel.xml: every 5 s) and traffic goes on in the same view."""
    r = _router(made, router)
    c = _cluster(made, kinds, "tunnel.xml", [r.port])
    c.start()
    c.assert_agreement()
    exchange(c, 100, unicasts=20)
    view = c.members[0].view_id()
    r.kill()
    time.sleep(1.0)
    r.start()
    for m in (m for m in c.members if m.kind == "jgpy"):
        tunnel = m.channel.stack.transport
        assert wait_all(lambda: tunnel.dump_stats()["routers_connected"] == 1, 30), tunnel.dump_stats()
        assert tunnel.dump_stats()["breaks"] >= 1
    time.sleep(6.0)                      # Java's reconnector runs every reconnect_interval (5 s) too
    _forget_received(c)
    exchange(c, 200, unicasts=20, timeout=120)
    c.assert_agreement()
    assert c.members[0].view_id() == view


@pytest.mark.processes
@pytest.mark.parametrize("router,kinds,victim", [pytest.param("java", "PJ", 1, marks=pytest.mark.interop),
                                                 pytest.param("jgpy", "PJ", 1, marks=pytest.mark.interop),
                                                 pytest.param("jgpy", "JPp", 2, marks=pytest.mark.interop)])
def test_a_member_killed_behind_a_router_leaves_the_view(made, router, kinds, victim):
    r = _router(made, router)
    c = _cluster(made, kinds, "tunnel.xml", [r.port])
    c.start()
    c.assert_agreement()
    gone = c.members[victim]
    gone.kill()
    rest = [m for m in c.members if m is not gone]
    c.assert_agreement(rest, timeout=60)
    exchange(c, 100, unicasts=10, members=rest)
    if router == "jgpy":
        for m in (m for m in rest if m.kind == "jgpy" and hasattr(m, "channel")):
            assert m.stats()["TUNNEL"]["suspects_from_router"] >= 1


@pytest.mark.processes
@pytest.mark.interop
def test_several_routers_one_dies_and_traffic_goes_through_the_other(made):
    """Members register with a Java and a jgpy router; each datagram goes through one of them; when one dies the
    other carries everything."""
    rj, rp = _router(made, "java"), _router(made, "jgpy")
    c = _cluster(made, "PJP", "tunnel.xml", [rj.port, rp.port])
    c.start()
    c.assert_agreement()
    exchange(c, 300, unicasts=30)
    for m in (m for m in c.members if m.kind == "jgpy"):
        assert m.stats()["TUNNEL"]["routers_connected"] == 2
    rj.kill()
    for m in (m for m in c.members if m.kind == "jgpy"):
        tunnel = m.channel.stack.transport
        assert wait_all(lambda: tunnel.dump_stats()["routers_connected"] == 1, 30)
    time.sleep(4.0)                  # Java's stub notices the broken connection when it next sends or pings
    _forget_received(c)
    exchange(c, 300, unicasts=30, timeout=120)
    c.assert_agreement()


def _forget_received(c: RouterCluster) -> None:
    """A second exchange numbers its messages from 0 again: every member forgets what the first one delivered
    (all of it arrived: exchange waited for it)."""
    for m in c.members:
        if m.kind == "java" or not hasattr(m, "channel"):
            m._pump(0.5)
        m.received.by_sender.clear()
        m.received.unicast_by_sender.clear()


# ---- the jgpy router against strangers ----

@pytest.fixture
def router():
    r = GossipRouter(0, max_connections=40, handshake_timeout=1.0, request_timeout=1.0, max_message=1 << 16,
                     max_queued_bytes=1 << 18).start()
    yield r
    r.stop()


def _members(router: GossipRouter, n: int = 2):
    """n stubs registered under one cluster, receiving into lists."""
    group = f"hostile-{uuid.uuid4().hex[:6]}"
    got: list[list] = []
    stubs = []
    for i in range(n):
        inbox: list = []
        got.append(inbox)
        s = RouterStub("127.0.0.1", router.port, DIALECT, on_message=lambda d, mc, inbox=inbox: inbox.append(d))
        s.connect(group, UUID.random(), f"M{i}", [IpAddress("127.0.0.1", 40000 + i)])
        stubs.append(s)
    return group, stubs, got


def _assert_serves(router: GossipRouter) -> None:
    group, stubs, got = _members(router)
    try:
        stubs[0].send_to_member(group, None, b"hello")
        assert wait_all(lambda: got[1] == [b"hello"], 5), got
        asker = RouterStub("127.0.0.1", router.port, DIALECT)      # TCPGOSSIP's kind: no receiver thread
        stubs.append(asker)
        asker.connect(group, UUID.random(), "Q", None)
        rsps = asker.get_members(group)
        assert sorted(p.logical_name for p in rsps) == ["M0", "M1", "Q"]
        assert [p.physical_addrs for p in rsps if p.logical_name == "M1"] == [(IpAddress("127.0.0.1", 40001),)]
    finally:
        for s in stubs:
            s.destroy()


def _connect(port: int, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        s.sendall(data)
    return s


def _closed_by_peer(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        s.close()


def test_router_closes_bad_bytes_absurd_lengths_and_wrong_first_requests_alone(router):
    group, stubs, got = _members(router)
    try:
        connect = gossip.encode(DIALECT, GossipData(gossip.CONNECT, "x", UUID.random(), "S", None, None))
        msg = gossip.encode(DIALECT, GossipData(gossip.MESSAGE, group, None, buffer=b"x"))
        attacks = [b"GET / HTTP/1.0\r\n\r\n",                                     # not a request type
                   bytes([gossip.CONNECT, 0, 0]) + struct.pack(">h", 117) + bytes(20),  # no such address class
                   bytes([gossip.CONNECT, 0, 1, 0]) + struct.pack(">h", 32767),  # 32767 addresses claimed
                   msg,                                                          # MESSAGE before CONNECT
                   connect + msg[:-5] + struct.pack(">i", 1 << 30),              # a 1 GiB buffer claimed
                   connect + msg[:-5] + struct.pack(">i", -7),                   # a negative length
                   connect + bytes([gossip.MESSAGE, 1]) + struct.pack(">h", 5) + b"\xff\xffxyz"]  # bad UTF
        before = router.stats["malformed_requests"]
        for a in attacks:
            assert _closed_by_peer(_connect(router.port, a)), a[:20]
        assert router.stats["malformed_requests"] - before == len(attacks), router.stats
        stubs[0].send_to_member(group, None, b"still")
        assert wait_all(lambda: got[1] == [b"still"], 5), got
    finally:
        for s in stubs:
            s.destroy()
    _assert_serves(router)


def test_router_times_out_slow_handshakes_and_partial_requests(router):
    silent = _connect(router.port)
    slow = _connect(router.port, gossip.encode(DIALECT, GossipData(gossip.CONNECT, "c", UUID.random(), "S"))[:5])
    started = _connect(router.port)
    started.sendall(gossip.encode(DIALECT, GossipData(gossip.CONNECT, "c", UUID.random(), "T")))
    assert started.recv(1) == bytes([gossip.CONNECT_OK])
    started.sendall(gossip.encode(DIALECT, GossipData(gossip.MESSAGE, "c", None, buffer=b"y" * 100))[:-50])
    assert _closed_by_peer(silent) and _closed_by_peer(slow) and _closed_by_peer(started)
    assert router.stats["handshake_timeouts"] >= 2 and router.stats["request_timeouts"] >= 1
    _assert_serves(router)


def test_router_refuses_connections_beyond_max_and_serves_when_they_go(router):
    socks = [_connect(router.port) for _ in range(60)]
    try:
        assert wait_all(lambda: router.stats["connections_refused"] >= 20, 5), router.stats
        assert len(router.conns) <= router.max_connections
    finally:
        for s in socks:
            s.close()
    assert wait_all(lambda: len(router.conns) == 0, 5)
    _assert_serves(router)


def test_a_member_that_does_not_read_loses_messages_not_the_router(router):
    group, stubs, got = _members(router, 2)
    deaf = socket.socket()
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)      # before connect: a small window
    deaf.connect(("127.0.0.1", router.port))
    deaf.sendall(gossip.encode(DIALECT, GossipData(gossip.CONNECT, group, UUID.random(), "deaf")))
    try:
        assert deaf.recv(1) == bytes([gossip.CONNECT_OK])
        for i in range(3000):
            stubs[0].send_to_member(group, None, b"%d" % i + b"z" * 2000)
        assert wait_all(lambda: len(got[1]) == 3000, 30), len(got[1])
        assert router.stats["dropped_queue_full"] > 0
    finally:
        deaf.close()
        for s in stubs:
            s.destroy()


def test_a_stub_breaks_on_what_a_bad_router_sends_and_counts_it():
    """A "router" that answers CONNECT and then sends a MESSAGE longer than the stub accepts, or bytes that are no
    GossipData: the stub's connection breaks (counted, its owner told), its receiver thread ends, nothing is
    passed up."""
    for payload in (gossip.message_prefix(DIALECT, None, None, 1 << 30),
                    bytes([gossip.MESSAGE, 0, 0]) + struct.pack(">h", 117) + bytes(20)):
        srv = socket.create_server(("127.0.0.1", 0))
        got, broken = [], []
        stub = RouterStub("127.0.0.1", srv.getsockname()[1], DIALECT, limits=Limits(max_buffer=1 << 16),
                          on_message=lambda d, mc: got.append(d), on_broken=broken.append)
        try:
            def serve() -> None:
                conn, _ = srv.accept()
                conn.recv(4096)
                conn.sendall(bytes([gossip.CONNECT_OK]))
                conn.sendall(payload)
                conn.recv(1)                  # until the stub closes
                conn.close()
            t = threading.Thread(target=serve, daemon=True)
            t.start()
            stub.connect("c", UUID.random(), "S", None)
            assert wait_all(lambda: broken == [stub], 5), stub.counters
            assert stub.counters["bad_answers"] == 1 and got == [] and stub.state == "BROKEN"
            t.join(5)
        finally:
            stub.destroy()
            srv.close()


@pytest.mark.processes
def test_the_router_process_survives_emfile_and_stops_cleanly_on_sigterm():
    port = free_port_block(1)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    proc = subprocess.Popen([sys.executable, "-m", "jgpy", "gossip-router", "--port", str(port), "--stats-interval",
                             "0", "--handshake-timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, preexec_fn=limit)
    socks = []
    try:
        assert wait_all(lambda: listens_on(proc.pid, port), 30)
        for _ in range(60):                 # more than the process has descriptors: accept() fails (EMFILE)
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(1.0)
        assert proc.poll() is None
        for s in socks:
            s.close()
        socks.clear()
        stub = RouterStub("127.0.0.1", port, DIALECT, on_message=lambda d, mc: None)
        deadline = time.monotonic() + 20
        while True:                         # the backlog's connections are accepted and closed first
            try:
                stub.connect("c", UUID.random(), "late", None)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        stub.destroy()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, out[-2000:]
        text = out.decode("utf-8", "replace")
        assert "accept failed" in text and "stopped" in text, text[-2000:]
    finally:
        for s in socks:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
