"""The TCP transport and TCPPING: the jar's unchanged tcp.xml (only TCP's bind_port moved to a free block
of ports), jgpy and real Java 2.12.2 members in one cluster, and the connection layer's handling of bad
peers and broken streams."""

from __future__ import annotations

import socket
import struct
import threading
import uuid

import pytest

from jgpy import DIALECT, Message, UUID
from jgpy._core import jg212
from jgpy._core.address import IpAddress
from jgpy._core.tcp import SameSource, StreamReader, StreamWriter
from jgpy.errors import ConfigError
from jgpy.headers import TpHeader
from jgpy.protocols.tcpping import parse_initial_hosts
from jgpy.stack.stack import ProtocolStack
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import JavaError, private_tcp
from jgpy.testing.javajson import from_json
from tests.conftest import require_java
from tests.test_stack_interop import Cluster, exchange

pytestmark = pytest.mark.timeout(300)


# ---- the frame layer ----

def _datagram(flags: int, body: bytes = b"x") -> bytes:
    return struct.pack(">hB", jg212.VERSION, flags) + body


def test_frames_split_anywhere_arrive_whole_in_order_and_in_runs():
    frames = [_datagram(2, b"m0"), _datagram(2, b"m1"), _datagram(0, b"u0"), _datagram(2, b"m2"),
              _datagram(0, b"u1" * 5000), b""]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    for step in (1, 3, 7, 4096, len(stream)):
        got = []
        r = StreamReader(socket.socket(), lambda fs, src, mc: got.append((list(fs), src[0], mc)), SameSource("p"),
                         bufsize=16)
        for i in range(0, len(stream), step):
            assert r.feed(stream[i:i + step]) is None
        assert [f for run, _, _ in got for f in run] == frames, step
        for run, src, mc in got:
            assert src == "p" and all((len(f) >= 3 and f[2] & 2 != 0) == mc for f in run)
        assert r.pending == 0


def test_a_bad_frame_length_ends_the_stream_and_handler_errors_do_not():
    errors = []
    r = StreamReader(socket.socket(), lambda fs, src, mc: 1 / 0, None, max_frame=100)
    r.on_error = errors.append
    assert r.feed(struct.pack(">i", 3) + _datagram(0, b"")) is None
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)
    assert "frame length 101" in r.feed(struct.pack(">i", 101))
    assert "frame length -1" in StreamReader(socket.socket(), print, None).feed(b"\xff\xff\xff\xff")


def test_writer_and_reader_over_a_socket_pair_move_many_frames_in_order():
    a, b = socket.socketpair()
    got = []
    r = StreamReader(b, lambda fs, src, mc: got.extend(fs))
    t = threading.Thread(target=lambda: got.append(r.run()))
    t.start()
    w = StreamWriter(a)
    sent = [_datagram(0, str(i).encode() * (i % 50)) for i in range(3000)]
    w.send_many(sent[:1500])                     # more than one sendmsg's worth of iovecs
    for f in sent[1500:]:
        w.send(f)
    a.close()
    t.join(10)
    assert got[-1] == "eof" and got[:-1] == sent
    assert w.frames_sent == 3000 and r.frames_received == 3000
    with pytest.raises(OSError):
        StreamWriter(a)                          # closed socket: a clear error, not a crash


def test_initial_hosts_are_parsed_as_java_does():
    hosts = parse_initial_hosts("localhost[7800], 127.0.0.1[7801]", 1)
    assert [str(h) for h in hosts] == ["127.0.0.1:7800", "127.0.0.1:7801", "127.0.0.1:7802"]
    assert [str(h) for h in parse_initial_hosts("127.0.0.1[9000]", 0)] == ["127.0.0.1:9000"]
    for bad in ("127.0.0.1", "127.0.0.1[x]", "no-such-host.invalid[1]"):
        with pytest.raises(ConfigError):
            parse_initial_hosts(bad, 1)


def test_tcp_xml_loads_unchanged_and_refuses_an_ephemeral_port_with_tcpping():
    stack = ProtocolStack(stock("tcp.xml"), _Top())
    assert stack.protocols[0].NAME == "TCP" and stack.protocols[1].NAME == "TCPPING"
    assert stack.protocols[0].bind_port == 7800 and stack.protocols[1].port_range == 1
    bad = ProtocolStack(stock("tcp.xml").with_properties("TCP", bind_port="0"), _Top(),
                        {"jgroups.tcpping.initial_hosts": "127.0.0.1[7800]"})
    with pytest.raises(ConfigError, match="bind_port"):
        bad.protocols[0].init()


class _Top:
    def up(self, evt):
        return None

    def up_batch(self, msgs):
        return None


# ---- clusters ----

class TcpCluster(Cluster):
    """A cluster on tcp.xml (or another of the jar's TCP stacks) with its own block of ports (the transport's
    bind_port = the block's first)."""

    def __init__(self, kinds: str, config_name: str = "tcp.xml", java_properties: dict | None = None, **properties):
        stack = stock(config_name)
        self.transport = stack.protocols[0].name
        config, self.props, _ = private_tcp(stack.with_properties(self.transport, **properties), len(kinds))
        self.kinds = kinds
        self.name = f"tcp-{uuid.uuid4().hex[:8]}"
        self.config = self.jgpy_config = config
        java_config = config.with_properties(self.transport, **java_properties) if java_properties else config
        self.members = []
        counts = {"J": 0, "P": 0}
        for k in kinds:
            counts[k] += 1
            self.members.append(make_member(k, f"{k}{counts[k]}", java_config if k == "J" else config, self.props))


@pytest.fixture
def tcp_cluster():
    made: list[TcpCluster] = []

    def make(kinds: str, config_name: str = "tcp.xml", java_properties: dict | None = None, **kw) -> TcpCluster:
        if "J" in kinds:
            require_java()
        c = TcpCluster(kinds, config_name, java_properties, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ", "PJPJ")] + ["PPP"])
def test_mixed_tcp_cluster_joins_and_keeps_fifo(tcp_cluster, kinds):
    c = tcp_cluster(kinds)
    c.start()
    c.assert_agreement()
    assert all(m.view_names() == c.names() for m in c.members)
    exchange(c, 2000 if len(kinds) <= 2 else 1000, unicasts=200)
    _assert_clean_connections(c)


def _assert_clean_connections(c: TcpCluster) -> None:
    for p in (m for m in c.members if m.kind == "jgpy"):
        tcp = p.stats()[c.transport]
        assert tcp["connections_accepted"] + tcp["connections_opened"] >= 1
        assert tcp["dropped_malformed"] == 0 and tcp["dropped_version"] == 0 and tcp["bad_streams"] == 0


@pytest.mark.interop
@pytest.mark.parametrize("config_name,kinds", [("tcp-nio.xml", "JP"), ("tcp-nio.xml", "PJ"), ("tcp_nio.xml", "JP"),
                                               ("tcp_nio.xml", "PJ")])
def test_tcp_nio_stacks_form_mixed_clusters(tcp_cluster, config_name, kinds):
    """The jar's TCP_NIO stacks, unchanged but for the ports: TCP's wire under TCP_NIO's protocol id (23);
    tcp_nio.xml also has FC, FLUSH and STREAMING_STATE_TRANSFER and no UNICAST. Java 2.12.2 cannot start
    tcp_nio.xml as shipped (processor_keepAliveTime="-1" makes its ThreadPoolExecutor throw: see the next test),
    so its Java members get processor_keepAliveTime as tcp-nio.xml has it; jgpy's run the file unchanged.

    Java's members also get a longer processor queue: Java's TCP_NIO hands every frame to a processor pool whose
    queue holds processor_queueSize (100 in tcp_nio.xml) frames, and an overflow's RejectedExecutionException
    kills that connection's reader thread for good. jgpy's bundles are smaller than Java's (it writes what is
    queued instead of waiting for max_bundle_timeout), so jgpy senders under load overflow it where Java
    senders do not (a Java-only JJJ passes): a known limit of mixed tcp_nio.xml clusters."""
    java_fix = {"processor_keepAliveTime": "9223372036854775807", "processor_queueSize": "10000"} \
        if config_name == "tcp_nio.xml" else None
    c = tcp_cluster(kinds, config_name, java_fix)
    assert c.transport == "TCP_NIO"
    c.start()
    c.assert_agreement()
    assert all(m.view_names() == c.names() for m in c.members)
    # tcp_nio.xml has no UNICAST: nothing orders unicasts (Java's processor threads handle a connection's frames
    # in parallel), so only its multicasts (NAKACK) are checked for order
    exchange(c, 1000, unicasts=0 if config_name == "tcp_nio.xml" else 200)
    _assert_clean_connections(c)


@pytest.mark.interop
def test_java_cannot_start_tcp_nio_xml_as_shipped(tcp_cluster):
    """Why the test above adapts tcp_nio.xml for Java: the shipped file fails in Java 2.12.2 itself."""
    c = tcp_cluster("J", "tcp_nio.xml")
    with pytest.raises(JavaError, match="IllegalArgumentException"):
        c.start()


@pytest.mark.interop
@pytest.mark.parametrize("kinds,leaver", [("PJP", 0), ("JPJ", 0), ("PJP", 1)])
def test_tcp_leave_and_coordinator_hand_over(tcp_cluster, kinds, leaver):
    c = tcp_cluster(kinds)
    c.start()
    c.assert_agreement()
    gone = c.members[leaver]
    rest = [m for m in c.members if m is not gone]
    gone_addr = _physical(gone)
    # joins went through the coordinator: it has a connection to everybody, everybody one to it
    holders = [m for m in rest if m.kind == "jgpy" and (leaver == 0 or m is c.members[0])]
    before = {}
    for p in holders:
        before[p.name] = {str(conn.peer): conn for conn in p.channel.stack.transport._table.connections()}
        assert gone_addr in before[p.name], (gone_addr, list(before[p.name]))
    gone.disconnect()
    c.assert_agreement(rest)
    exchange(c, 300, unicasts=30, members=rest)
    for p in holders:           # the view change closed the connection to the leaver (not the others); a
        conns = before[p.name]  # leaver that still sends after the view may open a new one until it is gone
        assert wait_all(lambda: conns[gone_addr].closed, 10), p.stats()["TCP"]
        assert not any(conn.closed for addr, conn in conns.items() if addr != gone_addr), p.stats()["TCP"]


def _physical(member) -> str:
    if member.kind == "jgpy":
        return str(member.channel.stack.transport.physical_addr)
    return str(from_json(member.node.physical))


@pytest.mark.interop
def test_a_killed_java_member_is_removed_over_tcp(tcp_cluster):
    c = tcp_cluster("PJ")
    c.start()
    c.assert_agreement()
    c.members[1].kill()
    p = c.members[0]
    assert p.wait_view(["P1"], timeout=60), p.view_names()
    exchange(c, 100, unicasts=0, members=[p])


@pytest.mark.interop
def test_bad_peers_are_refused_and_counted_and_the_cluster_goes_on(tcp_cluster):
    c = tcp_cluster("PJ")
    c.start()
    c.assert_agreement()
    p = c.members[0]
    tcp = p.channel.stack.transport
    port = tcp.physical_addr.port
    before = dict(tcp.dump_stats())

    def connect_and_send(data: bytes, read_timeout: float = 0.0) -> bytes:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s.sendall(data)
            if read_timeout:
                s.settimeout(read_timeout)
                try:
                    return s.recv(10)             # the member closes the connection: b"" (or a reset)
                except ConnectionResetError:
                    return b""
                except socket.timeout:
                    return b"timeout"
            return b""
        finally:
            s.close()

    assert connect_and_send(b"GET / HTTP/1.0\r\n\r\n", 5) == b""          # wrong cookie: closed at once
    me = IpAddress("127.0.0.1", 1)
    hello = jg212.encode_tcp_handshake(me)
    assert connect_and_send(hello + struct.pack(">i", 1 << 30), 5) == b""  # absurd frame length: closed
    good = Message(None, b"x", UUID.random())
    good.put_header(tcp.id, TpHeader(c.name))
    data = DIALECT.encode_message(good)
    connect_and_send(hello + b"".join(struct.pack(">i", len(d)) + d
                                      for d in (data[:-5], bytes([0x1f, 0x02]) + data[2:], b"\x13")))
    assert wait_all(lambda: tcp.dump_stats()["connections_rejected"] > before["connections_rejected"]
                    and tcp.dump_stats()["bad_streams"] > before["bad_streams"]
                    and tcp.dump_stats()["dropped_malformed"] >= before["dropped_malformed"] + 2
                    and tcp.dump_stats()["dropped_version"] > before["dropped_version"], 10), tcp.dump_stats()
    exchange(c, 200, unicasts=20)               # the real members never noticed


def test_simultaneous_connects_settle_on_one_socket():
    """Both members connect to each other at the same time: each side keeps one connection, and traffic in
    both directions goes on (the acceptor keeps a new connection only if the peer's address is greater)."""
    c = TcpCluster("PP")
    try:
        c.start()
        c.assert_agreement()
        a, b = (m.channel.stack.transport for m in c.members)
        for t in (a, b):
            t._table.retain_all(set())            # forget the connections: the next sends reconnect
        barrier = threading.Barrier(2)

        def burst(m, dest_name):
            barrier.wait(5)
            m.send_numbered(200, dest_name=dest_name)
        ts = [threading.Thread(target=burst, args=(c.members[0], "P2")),
              threading.Thread(target=burst, args=(c.members[1], "P1"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        for m in c.members:
            assert m.wait_received(200, unicast=True, timeout=60), m.received.count(True)
        assert wait_all(lambda: len(a._table.connections()) == 1 and len(b._table.connections()) == 1, 10)
    finally:
        c.close()


def test_idle_connections_are_reaped():
    c = TcpCluster("PP", reaper_interval="200", conn_expire_time="300")
    try:
        c.start()
        c.assert_agreement()
        ts = [m.channel.stack.transport for m in c.members]
        # FD's heartbeats (every 3 s in tcp.xml) leave the connections idle for longer than 300 ms
        assert wait_all(lambda: sum(t.dump_stats()["connections_closed"] for t in ts) > 0, 15), \
            [t.dump_stats() for t in ts]
        c.members[0].send_numbered(10, dest_name="P2")        # a reaped connection is opened again
        assert c.members[1].wait_received(10, unicast=True, timeout=30)
        c.assert_agreement()
    finally:
        c.close()


def test_a_flood_of_strangers_leaves_the_members_connections_alone(tcp_cluster):
    """More connections than max_connections, handshakes that never end and claims of made-up peers: the
    strangers' connections take each other's places, the members' connection stays and the cluster goes on."""
    c = tcp_cluster("PP", max_connections="8")
    c.start()
    c.assert_agreement()
    tcp = c.members[0].channel.stack.transport
    table = tcp._table
    host, port = _physical(c.members[1]).rsplit(":", 1)
    other = IpAddress(host, int(port))
    assert other in {conn.peer for conn in table.connections()}
    before = tcp.dump_stats()
    socks = []
    try:
        for i in range(20):
            s = socket.create_connection(("127.0.0.1", tcp.physical_addr.port), timeout=5)
            socks.append(s)
            s.sendall(jg212.encode_tcp_handshake(IpAddress("127.0.0.1", 50000 + i)))
        for _ in range(3):                        # and some that never send a handshake
            socks.append(socket.create_connection(("127.0.0.1", tcp.physical_addr.port), timeout=5))
        # every connection was dealt with: established, or closed in its handshake (1 slot for handshakes:
        # a new connection closes one whose handshake has not come yet)
        def settled() -> bool:
            s = tcp.dump_stats()
            return (s["handshakes_pending"] == 0 and s["connections_accepted"] + s["handshakes_evicted"]
                    + s["handshake_timeouts"] - before["connections_accepted"] == 20 + 3)
        assert wait_all(settled, 10), tcp.dump_stats()
        s = tcp.dump_stats()
        peers = {conn.peer for conn in table.connections()}
        assert len(peers) <= table.max_established == 7 and other in peers
        assert s["connections_evicted"] == s["connections_accepted"] - before["connections_accepted"] - 6 > 0
        exchange(c, 300, unicasts=30)
    finally:
        for s in socks:
            s.close()
