"""Strangers on a member's server sockets (issue 18): TCP's connection table, FD_SOCK's server socket and
STREAMING_STATE_TRANSFER's state server hold only what is bounded, keep accepting after accept() errors, and
serve the legitimate peers meanwhile.

Every wait is bounded; each test closes the sockets, threads and processes it started. Times are measured
against generous bounds only (they catch a peer that holds up everybody, not slowness).
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest

from jgpy import DIALECT, UUID, Message
from jgpy._core import jg212
from jgpy._core.address import IpAddress
from jgpy._core.headers import StreamingStateHeader
from jgpy.javaser import state_request_bytes
from jgpy.protocols.fd_sock import FD_SOCK
from jgpy.protocols.pbcast.streaming_state_transfer import STREAMING_STATE_TRANSFER
from jgpy.stack.events import EventType
from jgpy.stack.tcpconnections import ConnectionTable, SocketOptions
from tests.fakestack import FakeStack, wait_until

pytestmark = pytest.mark.timeout(120)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def datagram(text: bytes) -> bytes:
    """A frame's content (the table hands frames up unparsed)."""
    return struct.pack(">hB", jg212.VERSION, 0) + text


class Frames:
    """The frames a table handed up."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.errors: list[BaseException] = []
        self._cond = threading.Condition()

    def handler(self, frames, sources, multicast) -> None:
        with self._cond:
            self.got.extend(frames)
            self._cond.notify_all()

    def wait_for(self, text: bytes, timeout: float = 5.0) -> float:
        """Seconds until a frame ending in ``text`` came (fails after ``timeout``)."""
        t0 = time.monotonic()
        with self._cond:
            ok = self._cond.wait_for(lambda: any(f.endswith(text) for f in self.got), timeout)
        assert ok, f"no frame {text!r} within {timeout} s (got {[f[-8:] for f in self.got]})"
        return time.monotonic() - t0


class Clients:
    """Client sockets of a test, all closed at the end."""

    def __init__(self) -> None:
        self.socks: list[socket.socket] = []

    def raw(self, addr, source: str = "127.0.0.1") -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socks.append(s)
        s.bind((source, 0))
        s.settimeout(5)
        s.connect(addr)
        return s

    def peer(self, table: ConnectionTable, claim: IpAddress, frames=(), source: str = "127.0.0.1") -> socket.socket:
        """A connection that sends a valid handshake claiming ``claim``, then ``frames``."""
        s = self.raw(table.local_addr.sockaddr(), source)
        s.sendall(jg212.encode_tcp_handshake(claim) + b"".join(jg212.frame(datagram(f)) for f in frames))
        return s

    def close(self) -> None:
        for s in self.socks:
            s.close()


def refused(clients, addr, data: bytes, timeout: float) -> bool:
    """Whether a new connection to ``addr`` that sends ``data`` is closed by the other side within ``timeout`` s
    (a reset may come before connect() returns)."""
    try:
        sock = clients.raw(addr)
        if data:
            sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        return True
    return closed_by_peer(sock, timeout)


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the other side closes ``sock`` within ``timeout`` s (EOF or reset; data is skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True


@pytest.fixture
def clients():
    c = Clients()
    yield c
    c.close()


@pytest.fixture
def tables():
    """Factory of started connection tables on 127.0.0.1 (no send queues); all stopped at the end."""
    made: list[ConnectionTable] = []

    def make(**opts) -> tuple[ConnectionTable, Frames]:
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
        srv.listen(128)
        opts.setdefault("use_send_queues", False)
        got = Frames()
        t = ConnectionTable(srv, IpAddress("127.0.0.1", srv.getsockname()[1]), "127.0.0.1", got.handler,
                            got.errors.append, SocketOptions(**opts), name="jgpy-test-tcp", dialect=DIALECT)
        made.append(t)
        t.start()
        return t, got

    yield make
    for t in made:
        t.stop()
    wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("jgpy-test-tcp")], 5,
               msg="the tables' threads ended")


# ---- TCP ----------------------------------------------------------------------------------------------

def test_a_slow_handshake_delays_nobody_and_ends_at_its_deadline(tables, clients):
    table, got = tables(peer_addr_read_timeout_ms=1000)
    hello = jg212.encode_tcp_handshake(IpAddress("127.0.0.1", 40001))
    slow = clients.raw(table.local_addr.sockaddr())
    t_slow = time.monotonic()
    stop = threading.Event()
    sent = []

    def dribble() -> None:                    # a byte every 0.7 s: never a read that waits a whole timeout
        for b in hello:
            try:
                slow.sendall(bytes([b]))
            except OSError:
                return
            sent.append(b)
            if stop.wait(0.7):
                return
    th = threading.Thread(target=dribble, daemon=True)
    th.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        clients.peer(table, IpAddress("127.0.0.1", 40002), frames=[b"legit"])
        got.wait_for(b"legit", timeout=5)
        legit_s = time.monotonic() - t0
        assert legit_s < 3.0, f"the legitimate connection waited {legit_s:.2f} s behind the slow handshake"
        # the slow peer is closed once peer_addr_read_timeout has passed in all, while it still sends
        assert closed_by_peer(slow, 4.0), "the slow handshake was never cut"
        slow_s = time.monotonic() - t_slow
        assert 0.9 <= slow_s < 3.0 and len(sent) < len(hello), (slow_s, len(sent))
    finally:
        stop.set()
        th.join(2)
    assert table.counters["handshake_timeouts"] == 1 and table.counters["connections_accepted"] == 1
    assert [c.peer for c in table.connections()] == [IpAddress("127.0.0.1", 40002)]


def test_a_handshake_in_pieces_within_the_deadline_is_taken(tables, clients):
    table, got = tables(peer_addr_read_timeout_ms=3000)
    claim = IpAddress("::1", 47000, additional_data=b"extra")          # the longest form: IPv6, scope, data
    hello = jg212.encode_tcp_handshake(claim)
    s = clients.raw(table.local_addr.sockaddr())
    for piece in (hello[:3], hello[3:9], hello[9:30], hello[30:] + jg212.frame(datagram(b"pieces"))):
        s.sendall(piece)
        time.sleep(0.1)
    got.wait_for(b"pieces")
    [conn] = table.connections()
    assert conn.peer == claim and conn.peer.additional_data == b"extra" and not conn.verified
    bad = clients.raw(table.local_addr.sockaddr())
    bad.sendall(b"bela\x13\x02\x05")                  # an address of 5 bytes: refused before any more is read
    assert closed_by_peer(bad, 2.0) and table.counters["connections_rejected"] == 1


def test_connections_beyond_max_connections_make_room_or_are_refused(tables, clients):
    table, got = tables(max_connections=8, peer_addr_read_timeout_ms=10000)     # 1 handshake slot, 7 connections
    assert (table.handshake_slots, table.max_established) == (1, 7)
    member = IpAddress("127.0.0.1", 41000)
    m = clients.peer(table, member, frames=[b"m0"])
    got.wait_for(b"m0")
    table.retain_all({member})
    strangers = []
    for i in range(12):
        strangers.append(clients.peer(table, IpAddress("127.0.0.1", 42000 + i), frames=[b"s%02d" % i]))
        got.wait_for(b"s%02d" % i)
    assert len(table.connections()) == 7 and table.counters["connections_evicted"] == 6
    assert member in {c.peer for c in table.connections()}            # a member's connection is never evicted
    assert all(closed_by_peer(s, 2.0) for s in strangers[:6])          # the oldest strangers made room
    assert not any(closed_by_peer(s, 0.05) for s in strangers[6:])
    m.sendall(jg212.frame(datagram(b"m1")))
    got.wait_for(b"m1")
    # one handshake slot: a new connection closes the oldest one still in its handshake (long before its
    # 10 s deadline)
    h1 = clients.raw(table.local_addr.sockaddr())
    wait_until(lambda: table.stats()["handshakes_pending"] == 1, 2)
    h2 = clients.raw(table.local_addr.sockaddr())
    assert closed_by_peer(h1, 2.0) and table.counters["handshakes_evicted"] == 1
    wait_until(lambda: table.stats()["handshakes_pending"] == 1, 2)
    # all connections are members': a new one is refused, the others stay
    table.retain_all({c.peer for c in table.connections()})
    late = clients.peer(table, IpAddress("127.0.0.1", 43000), frames=[b"late"])
    assert closed_by_peer(late, 2.0) and closed_by_peer(h2, 2.0)
    assert table.counters["connections_refused"] == 1 and len(table.connections()) == 7
    assert not any(f.endswith(b"late") for f in got.got)
    m.sendall(jg212.frame(datagram(b"m2")))
    got.wait_for(b"m2")
    assert len(table._rl) <= 4                 # log keys name no peers


def test_a_frame_longer_than_max_frame_closes_only_its_connection(tables, clients):
    table, got = tables()
    assert table.options.max_frame == 1 << 20
    a = clients.peer(table, IpAddress("127.0.0.1", 44001), frames=[b"a0"])
    b = clients.peer(table, IpAddress("127.0.0.1", 44002), frames=[b"b0"])
    got.wait_for(b"a0")
    got.wait_for(b"b0")
    conn_b = next(c for c in table.connections() if c.peer.port == 44002)
    initial = conn_b.reader.capacity
    # a long frame only announced allocates nothing yet
    body = datagram(b"x" * 1_000_000)
    b.sendall(struct.pack(">i", len(body)) + body[:100])
    time.sleep(0.2)
    assert conn_b.reader.capacity == initial
    # the 1.2 MB frame of the remote crash report: closed before anything is read into memory
    a.sendall(struct.pack(">i", 1_200_000) + b"\x13\x02\x00")
    assert closed_by_peer(a, 3.0)
    wait_until(lambda: table.counters["bad_streams"] == 1, 2)
    # the other connection goes on: its long frame arrives whole, then its buffer is back to its first size
    b.sendall(body[100:] + jg212.frame(datagram(b"b1")))
    got.wait_for(b"b1")
    assert body in got.got
    wait_until(lambda: conn_b.reader.capacity == initial, 2, msg="the buffer shrank back")
    assert [c.peer.port for c in table.connections()] == [44002]


def test_a_claim_from_another_host_does_not_take_a_connection_over(tables, clients):
    table, got = tables(sock_conn_timeout_ms=100, peer_addr_read_timeout_ms=100)   # crossing connects: 0.2 s
    member = IpAddress("127.0.0.1", 65000)
    assert member.compare_to(table.local_addr) > 0       # Java would let any new connection claiming it win
    m = clients.peer(table, member, frames=[b"m0"])
    got.wait_for(b"m0")
    time.sleep(0.3)
    thief = clients.peer(table, member, frames=[b"t0"], source="127.0.0.2")
    assert closed_by_peer(thief, 2.0)
    [conn] = table.connections()
    assert conn.peer == member and conn.verified and not closed_by_peer(m, 0.05)
    m.sendall(jg212.frame(datagram(b"m1")))
    got.wait_for(b"m1")
    assert not any(f.endswith(b"t0") for f in got.got)
    # a new connection from the member's own host replaces it, as in Java (e.g. the member restarted)
    m2 = clients.peer(table, member, frames=[b"m2"])
    got.wait_for(b"m2")
    assert closed_by_peer(m, 2.0) and table.counters["connections_replaced"] == 1


# ---- accept() errors (EMFILE in a process of its own) ---------------------------------------------------

SERVER = r"""
import json, os, resource, socket, sys
from jgpy import DIALECT
from jgpy._core.address import IpAddress

kind = sys.argv[1]
frames = []
if kind == "tcp":
    from jgpy.stack.tcpconnections import ConnectionTable, SocketOptions
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    port = srv.getsockname()[1]
    server = ConnectionTable(srv, IpAddress("127.0.0.1", port), "127.0.0.1", lambda fs, s, m: frames.extend(fs),
                             print, SocketOptions(use_send_queues=False), dialect=DIALECT)
    server.start()
    def stats():
        return {"accepted": len(server.connections()), "frames": len(frames),
                "acceptor": server._acceptor.is_alive(), **server.counters}
else:
    from jgpy.protocols.fd_sock import FD_SOCK
    server = FD_SOCK()
    server.bind_addr = "127.0.0.1"
    server.start_server_socket()
    port = server.srv_sock_addr.port
    def stats():
        return {"accepted": len(server._clients), "acceptor": server._acceptor.is_alive(),
                **getattr(server, "counters", {})}
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 3, hard))
print(port, flush=True)
for line in sys.stdin:
    if line.strip() == "raise":
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    print(json.dumps(stats()), flush=True)
"""


class ServerProcess:
    """A server in a process of its own whose file descriptors run out after a few connections."""

    def __init__(self, kind: str):
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, kind], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self._line(30))

    def _line(self, timeout: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the server process did not answer"
        line = self.proc.stdout.readline()
        assert line, f"the server process ended ({self.proc.poll()})"
        return line

    def stats(self, command: str = "stats") -> dict:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line(10))

    def wait_stats(self, pred, timeout: float, msg: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if pred(s):
                return s
            assert time.monotonic() < deadline, f"{msg}: {s}"
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc.stdout.close()


@pytest.mark.processes
@pytest.mark.parametrize("kind", ["tcp", "fd_sock"])
def test_the_acceptor_survives_running_out_of_file_descriptors(kind, clients):
    server = ServerProcess(kind)
    try:
        addr = ("127.0.0.1", server.port)
        n = 8
        for i in range(n):
            s = clients.raw(addr)                      # the kernel's backlog takes them all
            if kind == "tcp":
                s.sendall(jg212.encode_tcp_handshake(IpAddress("127.0.0.1", 45000 + i)) + jg212.frame(datagram(b"f")))
        s = server.wait_stats(lambda s: s["accept_errors"] >= 1 if "accept_errors" in s else not s["acceptor"], 10,
                              "accept() never failed")
        assert s["accepted"] < n and s["acceptor"], s
        server.stats("raise")                          # descriptors are back: the connections waiting are taken
        s = server.wait_stats(lambda s: s["accepted"] == n, 10, "accepting did not resume")
        assert s["acceptor"] and s.get("frames", n) == n
        later = clients.raw(addr)                      # and new ones too
        if kind == "tcp":
            later.sendall(jg212.encode_tcp_handshake(IpAddress("127.0.0.1", 46000)))
        server.wait_stats(lambda s: s["accepted"] == n + 1, 10, "a new connection was not accepted")
    finally:
        server.close()


# ---- FD_SOCK's server socket ----------------------------------------------------------------------------

@pytest.fixture
def fd_sock_server():
    made: list[FD_SOCK] = []

    def make(**kw) -> FD_SOCK:
        p = FD_SOCK()
        p.bind_addr = "127.0.0.1"
        for k, v in kw.items():
            setattr(p, k, v)
        p.start_server_socket()
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop_server_socket(graceful=False)
    wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("FD_SOCK")], 3,
               msg="FD_SOCK threads ended")


def test_fd_sock_server_holds_at_most_max_connections(fd_sock_server, clients):
    p = fd_sock_server(max_connections=3)
    addr = p.srv_sock_addr.sockaddr()
    cs = [clients.raw(addr) for _ in range(3)]
    wait_until(lambda: len(p._clients) == 3, 2)
    # nobody's host is a member's: the oldest client makes room for a new one
    cs.append(clients.raw(addr))
    assert closed_by_peer(cs[0], 2.0)
    wait_until(lambda: p.counters["clients_evicted"] == 1 and len(p._clients) == 3, 2)
    handlers = [t for t in threading.enumerate() if t.name.startswith("FD_SOCK client connection handler")]
    assert len(handlers) <= 3 + 1                      # the evicted one's thread may still be ending
    # 127.0.0.1 is a member's host now: a new client is refused, the others keep their connections
    member = UUID.random()
    p.members = [member]
    p.cache[member] = IpAddress("127.0.0.1", 7777)
    late = clients.raw(addr)
    assert closed_by_peer(late, 2.0)
    assert p.counters["clients_refused"] == 1 and len(p._clients) == 3
    assert not any(closed_by_peer(c, 0.05) for c in cs[1:])


def test_fd_sock_cache_and_suspects_keep_no_more_strangers_than_bounded(fd_sock_server):
    from jgpy._core.headers import FdSockHeader
    from jgpy.protocols.fd_sock import MAX_STRANGERS
    p = fd_sock_server()
    member = UUID.random()
    p.members = [member]
    for i in range(MAX_STRANGERS * 3):
        made_up = UUID.random()
        p._handle(Message(None, None, made_up), FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=made_up,
                                                              sock_addr=IpAddress("10.0.0.1", 1000 + i)))
    p._handle(Message(None, None, member), FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=member,
                                                        sock_addr=IpAddress("127.0.0.1", 7777)))
    assert len(p.cache) == MAX_STRANGERS + 1 and p.cache[member] == IpAddress("127.0.0.1", 7777)
    p.suspect([UUID.random() for _ in range(100)])
    assert not p.suspected_mbrs


# ---- STREAMING_STATE_TRANSFER's state server -----------------------------------------------------------

@pytest.fixture
def provider():
    """A state provider A (FakeStack) in a view with B; the top records the state requests it is asked to
    write."""
    p = STREAMING_STATE_TRANSFER()
    p.bind_addr = "127.0.0.1"
    p.max_pool = 1
    a, b = UUID.random(), UUID.random()
    s = FakeStack(p, a)
    s.install_view([a, b])
    yield s, b
    s.stop()


def _state_req(s: FakeStack, sender, src=None, state_id=None) -> None:
    m = Message(s.local_addr, None, src if src is not None else sender)
    m.put_header(s.prot.id, StreamingStateHeader(StreamingStateHeader.STATE_REQ, 0, sender, None, None, state_id))
    s.tp.inject([m])


def _served(s: FakeStack) -> list:
    return [e.arg.target for e in s.top.events_of(EventType.STATE_TRANSFER_OUTPUTSTREAM)]


def _is_rsp(sent) -> bool:
    h = sent.msg.get_header(32)
    return h is not None and h.type == StreamingStateHeader.STATE_RSP


def test_the_state_server_serves_only_answered_members_and_cuts_slow_strangers(provider, clients):
    s, b = provider
    p = s.prot
    p.handshake_timeout = 2.0
    p.max_pool = 2                                     # a thread for the slow stranger, one for B
    # a stranger's request (or a member's name on somebody else's message) is not answered
    stranger = UUID.random()
    _state_req(s, stranger)
    _state_req(s, b, src=stranger)
    time.sleep(0.3)
    assert not s.tp.sent_where(_is_rsp) and p.counters["state_requests_refused"] == 2
    # B asks: the answer carries the state socket, which now expects B once
    _state_req(s, b)
    rsp = s.tp.wait_sent(_is_rsp)[0].msg.get_header(p.id)
    addr = rsp.bind_addr.sockaddr()
    # a slow stranger that claims B gets there first, a byte every 0.3 s: cut after handshake_timeout in all,
    # and B, connecting meanwhile, is served at once
    stream = state_request_bytes(None, b)
    slow = clients.raw(addr)
    stop = threading.Event()

    def dribble() -> None:
        for x in stream:
            try:
                slow.sendall(bytes([x]))
            except OSError:
                return
            if stop.wait(0.3):
                return
    th = threading.Thread(target=dribble, daemon=True)
    th.start()
    try:
        t_slow = time.monotonic()
        time.sleep(0.2)
        real = clients.raw(addr)
        t0 = time.monotonic()
        real.sendall(stream)
        wait_until(lambda: _served(s) == [b], 3, msg="B served")
        assert time.monotonic() - t0 < 1.5            # not behind the slow one (cut at 2 s)
        assert closed_by_peer(real, 2.0)               # the (empty) state ends
        assert closed_by_peer(slow, 5.0) and 1.9 <= time.monotonic() - t_slow < 3.5
    finally:
        stop.set()
        th.join(2)
    # B was served once: the same request again, or any connection while nobody is answered, is closed at once
    # (with a reset, which may already reach connect())
    assert refused(clients, addr, stream, 2.0) and refused(clients, addr, b"", 0.5)
    time.sleep(0.2)
    assert _served(s) == [b] and p.counters["state_connections_refused"] >= 2


def test_the_state_server_queues_at_most_max_pool_connections(provider, clients):
    s, b = provider
    p = s.prot
    p.handshake_timeout = 3.0
    _state_req(s, b, state_id="part")
    addr = s.tp.wait_sent(_is_rsp)[0].msg.get_header(p.id).bind_addr.sockaddr()
    held = [clients.raw(addr) for _ in range(2)]       # max_pool 1: one served, one waiting for a thread
    time.sleep(0.2)
    t0 = time.monotonic()
    assert refused(clients, addr, b"", 2.0) and time.monotonic() - t0 < 1.5     # (the reset may beat connect())
    assert all(closed_by_peer(h, 8.0) for h in held)   # each within handshake_timeout of its turn
    assert p.dump_stats()["pool_threads"] <= 1


def test_a_huge_announced_string_on_the_state_socket_is_cut_and_the_requester_still_served(provider, clients):
    s, b = provider
    p = s.prot
    p.handshake_timeout = 10.0
    _state_req(s, b)
    addr = s.tp.wait_sent(_is_rsp)[0].msg.get_header(p.id).bind_addr.sockaddr()
    bomb = clients.raw(addr)
    t0 = time.monotonic()
    try:                                               # a TC_LONGSTRING of 1 TB, then 2 MiB of it
        bomb.sendall(b"\xac\xed\x00\x05\x7c" + struct.pack(">q", 1 << 40) + b"a" * (2 << 20))
    except OSError:
        pass                                           # closed while we were still sending
    assert closed_by_peer(bomb, 5.0) and time.monotonic() - t0 < 5.0    # after 1 MiB, not at the deadline
    real = clients.raw(addr)
    real.sendall(state_request_bytes(None, b))
    wait_until(lambda: _served(s) == [b], 3, msg="B served")


def test_a_requester_ignores_a_state_response_it_did_not_ask_for(provider):
    s, b = provider
    p = s.prot
    lure = socket.socket()
    try:
        lure.bind(("127.0.0.1", 0))
        lure.listen(1)
        lure.settimeout(1.0)
        m = Message(s.local_addr, None, b)
        m.put_header(p.id, StreamingStateHeader(StreamingStateHeader.STATE_RSP, 0, b, None,
                                                IpAddress("127.0.0.1", lure.getsockname()[1]), None))
        s.tp.inject([m])
        with pytest.raises(socket.timeout):
            lure.accept()[0].close()                   # nobody connects to where the stranger points
        assert p.counters["state_responses_ignored"] == 1
        assert not s.top.events_of(EventType.STATE_TRANSFER_INPUTSTREAM)
    finally:
        lure.close()
