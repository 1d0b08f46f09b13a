"""A TCP connect to a port nobody listens on can connect the socket to itself (its ephemeral source port is the
destination port: TCP's simultaneous open). Every jgpy client socket treats that as a refused connection instead
of reading back its own bytes (CI saw TCP_NIO read its own handshake cookie "bela" as a 1.6 GB frame length)."""

from __future__ import annotations

import socket
import threading

import pytest

from jgpy import DIALECT
from jgpy._core.address import UUID, IpAddress
from jgpy._core.headers import StreamingStateHeader
from jgpy.protocols import fd_sock
from jgpy.protocols.pbcast.streaming_state_transfer import STREAMING_STATE_TRANSFER
from jgpy.stack.netutil import refuse_self_connection
from jgpy.stack.routerstub import RouterStub
from jgpy.stack.tcpconnections import ConnectionTable, SocketOptions


_RealSocket = socket.socket


def _free_port() -> int:
    with _RealSocket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def self_connecting(monkeypatch):
    """A port nobody listens on; TCP sockets bound to an ephemeral port on 127.0.0.1 get that port instead, so a
    connect to it connects them to themselves (what the kernel does by chance when it picks that port)."""
    port = _free_port()

    class Binder(_RealSocket):
        def bind(self, address):
            if self.type == socket.SOCK_STREAM and address[0] == "127.0.0.1" and address[1] == 0:
                address = (address[0], port)
            super().bind(address)

    monkeypatch.setattr(socket, "socket", Binder)
    return port


def test_the_fixture_really_connects_a_socket_to_itself(self_connecting):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        s.connect(("127.0.0.1", self_connecting))
        assert s.getsockname() == s.getpeername()
        s.sendall(b"bela")
        assert s.recv(4) == b"bela"
        with pytest.raises(ConnectionRefusedError, match="connected to itself"):
            refuse_self_connection(s)
    finally:
        s.close()


def test_a_connected_socket_passes():
    with socket.socket() as srv, socket.socket() as c:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        c.connect(srv.getsockname())
        refuse_self_connection(c)


def test_the_tcp_connection_table_counts_a_self_connection_as_a_failed_connect(self_connecting):
    srv = _RealSocket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    table = ConnectionTable(srv, IpAddress("127.0.0.1", srv.getsockname()[1]), "127.0.0.1", lambda fs, s, m: None,
                            lambda e: None, SocketOptions(use_send_queues=False), name="jgpy-test-selfconn",
                            dialect=DIALECT)
    table.start()
    try:
        table.send(IpAddress("127.0.0.1", self_connecting), b"x" * 100)
        assert table.counters["connect_failures"] == 1
        assert table.counters["bad_streams"] == 0
        assert table.connections() == []
    finally:
        table.stop()


def test_fd_sock_refuses_a_self_connection(self_connecting):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        with pytest.raises(ConnectionRefusedError):
            fd_sock._connect(s, ("127.0.0.1", self_connecting), 2000, threading.Event())
    finally:
        s.close()


def test_a_router_stub_refuses_a_self_connection(self_connecting):
    stub = RouterStub("127.0.0.1", self_connecting, DIALECT, bind_addr="127.0.0.1", conn_timeout_ms=2000)
    with pytest.raises(ConnectionRefusedError, match="connected to itself"):     # not its own CONNECT read back
        stub.connect("g", UUID(1, 2), "A", None)
    assert stub.counters["connect_failures"] == 1


def test_a_state_requester_refuses_a_self_connection(self_connecting):
    sst = STREAMING_STATE_TRANSFER()
    sst.bind_addr = "127.0.0.1"
    provider = IpAddress("127.0.0.1", self_connecting)
    hdr = StreamingStateHeader(StreamingStateHeader.STATE_RSP, 1, UUID(1, 2), None, provider, None)
    with pytest.raises(ConnectionRefusedError):
        sst._open_state_socket(provider, hdr, None)
    assert not sst._active


def test_test_clusters_take_their_tcp_ports_below_the_ephemeral_range():
    """So that a member that connects before its peer listens cannot connect to itself (what CI saw)."""
    from jgpy.testing.java import free_port_block
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    for _ in range(20):
        base = free_port_block(6)
        if low - 6 > 12000:
            assert 10000 <= base and base + 6 <= low
        else:
            assert 20000 <= base < 60000
