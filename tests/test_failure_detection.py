"""FD_ALL, VERIFY_SUSPECT and FD_SOCK in small in-process stacks (tests/fakestack.py), no UDP sockets.

Wire bytes are checked against the 2.12 layout (version, tp_flags, Message.writeTo with header id/magic
and body); FD_SOCK runs real TCP sockets on 127.0.0.1. Every wait is bounded.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from jgpy import DIALECT, UUID, IpAddress, Message
from jgpy._core.wire import utf_encode
from jgpy.headers import FdSockHeader, HeartbeatHeader, NakAckHeader, TpHeader, VerifyHeader
from jgpy.protocols.fd_all import FD_ALL
from jgpy.protocols.fd_sock import FD_SOCK
from jgpy.protocols.verify_suspect import VERIFY_SUSPECT
from jgpy.stack.events import Event, EventType
from tests.fakestack import TP_ID, FakeNetwork, FakeStack, wait_until

CLUSTER = "fdtest"
OOB = Message.OOB


def addrs(n: int) -> list:
    return [UUID.random() for _ in range(n)]


@pytest.fixture
def stacks():
    """Factory of fake stacks; all are stopped after the test."""
    made: list[FakeStack] = []

    def make(prot, local_addr=None, **kw) -> FakeStack:
        kw.setdefault("cluster_name", CLUSTER)
        s = FakeStack(prot, local_addr, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()
    # every FD_SOCK thread (acceptor, client handlers, pinger) ends within about a second of stop()
    wait_until(lambda: not fd_sock_threads(), 1.5, msg="all FD_SOCK threads ended")


def expected_datagram(*, multicast: bool, flags: int, dest, src, headers: list[tuple[int, int, bytes]],
                      payload: bytes | None = None) -> bytes:
    """A single-message 2.12 datagram built by hand from the layout of the wire doc (sections 1.2, 2.1)."""
    out = bytearray(b"\x13\x02")
    out.append((0x02 if multicast else 0) | (0x04 if flags & OOB else 0))
    leading = (0x01 if dest is not None else 0) | (0x02 if src is not None else 0) | (0x04 if payload is not None else 0)
    out += bytes([leading, flags])
    if dest is not None:
        out += DIALECT.encode_address(dest)
    if src is not None:
        out += DIALECT.encode_address(src)
    if payload is not None:
        out += struct.pack(">i", len(payload)) + payload
    out += struct.pack(">h", len(headers))
    for pid, magic, body in headers:
        out += struct.pack(">hh", pid, magic) + body
    return bytes(out)


def tp_header() -> tuple[int, int, bytes]:
    return (TP_ID, 56, utf_encode(CLUSTER))


def is_type(pid: int, htype: int):
    return lambda s: s.msg.has_header(pid) and s.msg.get_header(pid).type == htype


def heartbeat_from(src) -> Message:
    m = Message(None, None, src, OOB)
    m.put_header(29, HeartbeatHeader())
    return m


class Beater:
    """Injects heartbeats (or plain messages) from ``src`` into a stack every ``period`` s until stopped."""

    def __init__(self, stack: FakeStack, src, period: float, plain: bool = False):
        self.stack, self.src, self.period, self.plain = stack, src, period, plain
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            m = Message(None, b"data", self.src) if self.plain else heartbeat_from(self.src)
            if self.plain:
                m.put_header(15, NakAckHeader.msg(1))
            self.stack.tp.inject([m])
            self._stop.wait(self.period)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)


# ------------------------------------------------------------------------------------------------
# FD_ALL
# ------------------------------------------------------------------------------------------------

def fd_all(interval=100, timeout=400, **kw) -> FD_ALL:
    p = FD_ALL()
    p.interval, p.timeout = interval, timeout
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def test_fd_all_heartbeats_at_interval_and_wire_bytes(stacks):
    a, b = addrs(2)
    s = stacks(fd_all(interval=100), a)
    s.connect()
    time.sleep(0.25)
    assert not s.tp.sent_where(), "no heartbeats while alone in the view"
    s.install_view([a, b])
    hbs = s.tp.wait_sent(lambda x: x.msg.has_header(29), count=4, timeout=3)
    gaps = [y.time - x.time for x, y in zip(hbs, hbs[1:4])]
    assert all(0.07 <= g <= 1.0 for g in gaps), gaps
    want = expected_datagram(multicast=True, flags=OOB, dest=None, src=a, headers=[(29, 61, b""), tp_header()])
    for hb in hbs:
        assert hb.data == want, hb.data.hex()
    dg = hbs[0].decoded()
    assert dg.tp_flags == 0x06 and not dg.is_list
    m = dg.messages[0]
    assert m.dest is None and m.src == a and m.flags == OOB and not m.has_buffer()
    assert [(pid, magic, end - off) for pid, magic, off, end in m.header_refs()] == [(29, 61, 0),
                                                                                     (21, 56, 2 + len(CLUSTER))]
    # our own heartbeat came back through the loopback and was consumed (not passed up, no timestamp for us)
    assert not s.top.messages and a not in s.prot.timestamps()
    s.stop()
    n = len(s.tp.sent)
    time.sleep(0.3)
    assert len(s.tp.sent) == n, "heartbeats continue after stop()"


def test_fd_all_single_member_view_stops_tasks(stacks):
    a, b = addrs(2)
    s = stacks(fd_all(interval=50), a)
    s.connect()
    s.install_view([a, b])
    wait_until(lambda: s.prot.is_running, 2)
    s.install_view([a], 2)
    assert not s.prot.is_running
    n = len(s.tp.sent)
    time.sleep(0.25)
    assert len(s.tp.sent) <= n + 1


def test_fd_all_suspects_silent_member_only(stacks):
    """A (first in the view) suspects the silent B after > timeout; C keeps beating and is never suspected."""
    a, b, c = addrs(3)
    s = stacks(fd_all(interval=50, timeout=300), a)
    s.connect()
    t0 = time.monotonic()
    with Beater(s, c, 0.04):
        s.install_view([a, b, c])
        ev = s.top.wait_event(EventType.SUSPECT, timeout=4)
        elapsed = time.monotonic() - t0
        assert ev.arg == b
        assert elapsed >= 0.29, elapsed
        time.sleep(0.3)
    assert {e.arg for e in s.top.events_of(EventType.SUSPECT)} == {b}, "only B is suspected, never C or self"
    assert b in {e.arg for e in s.tp.events_of(EventType.SUSPECT)}, "Java passes SUSPECT down too"
    assert not any(x.msg.has_header(29) and x.msg.dest is not None for x in s.tp.sent)
    # FD_ALL multicasts nothing but heartbeats (no suspect message in 2.12)
    assert all(x.msg.has_header(29) for x in s.tp.sent)
    assert b in s.prot.suspected_mbrs
    # heartbeats were consumed, never passed up
    assert not s.top.messages


def test_fd_all_only_first_unsuspected_member_passes_suspect_up(stacks):
    a, b, c = addrs(3)
    s = stacks(fd_all(interval=50, timeout=250), a)
    s.connect()
    with Beater(s, c, 0.04):
        s.install_view([c, a, b])          # C is coordinator and alive: A only records the suspicion
        wait_until(lambda: b in s.prot.suspected_mbrs, 4, msg="B suspected")
        time.sleep(0.1)
    assert not s.top.events_of(EventType.SUSPECT)
    # once C is silent too, A is the first member not suspected and passes up both
    s.top.wait_event(EventType.SUSPECT, lambda e: e.arg == c, timeout=4)
    s.top.wait_event(EventType.SUSPECT, lambda e: e.arg == b, timeout=4)


def test_fd_all_coordinator_suspected_by_next_member(stacks):
    a, b = addrs(2)
    s = stacks(fd_all(interval=50, timeout=250), a)
    s.connect()
    s.install_view([b, a])
    assert s.top.wait_event(EventType.SUSPECT, timeout=4).arg == b


@pytest.mark.parametrize("counts", [True, False])
def test_fd_all_msg_counts_as_heartbeat(stacks, counts):
    a, b = addrs(2)
    s = stacks(fd_all(interval=50, timeout=250, msg_counts_as_heartbeat=counts), a)
    s.connect()
    with Beater(s, b, 0.04, plain=True):
        s.install_view([a, b])
        if counts:
            time.sleep(0.8)
            assert not s.top.events_of(EventType.SUSPECT)
        else:
            assert s.top.wait_event(EventType.SUSPECT, timeout=4).arg == b
    # data messages are always passed up
    assert s.top.messages and all(m.src == b and m.buffer == b"data" for m in s.top.messages)


def test_fd_all_heartbeats_consumed_data_passed_in_same_batch(stacks):
    a, b = addrs(2)
    s = stacks(fd_all(), a)
    s.connect()
    data = Message(None, b"x", b)
    s.tp.inject([heartbeat_from(b), data, heartbeat_from(b)])
    assert s.top.batches == [[data]]
    assert s.prot.num_heartbeats_received == 2


def test_fd_all_view_change_resets_timestamps(stacks):
    a, b, c = addrs(3)
    s = stacks(fd_all(interval=50, timeout=600), a)
    s.connect()
    s.install_view([a, b, c])
    time.sleep(0.3)
    assert s.prot.timestamps()[b] >= 250
    s.install_view([a, b], 2)                   # C left, B's timestamp starts afresh
    ts = s.prot.timestamps()
    assert set(ts) == {b} and ts[b] < 100
    t0 = time.monotonic()
    ev = s.top.wait_event(EventType.SUSPECT, timeout=4)
    assert ev.arg == b and time.monotonic() - t0 >= 0.59
    assert c not in {e.arg for e in s.top.events_of(EventType.SUSPECT)}


def test_fd_all_properties():
    from jgpy.stack.properties import apply_properties, properties_of
    props = properties_of(FD_ALL)
    assert props["interval"].default == 3000 and props["timeout"].default == 10000
    assert props["msg_counts_as_heartbeat"].default is False and props["shun"].deprecated
    p = FD_ALL()
    apply_properties(p, {"interval": "2000", "timeout": "6000", "shun": "true", "msg_counts_as_heartbeat": "true"})
    assert (p.interval, p.timeout, p.msg_counts_as_heartbeat) == (2000, 6000, True)


# ------------------------------------------------------------------------------------------------
# VERIFY_SUSPECT
# ------------------------------------------------------------------------------------------------

def verify(timeout=200, num_msgs=1) -> VERIFY_SUSPECT:
    p = VERIFY_SUSPECT()
    p.timeout, p.num_msgs = timeout, num_msgs
    return p


def test_verify_answers_are_you_dead_with_i_am_not_dead(stacks):
    a, b = addrs(2)
    s = stacks(verify(num_msgs=2), a)
    s.connect()
    probe = Message(a, None, b, OOB)
    probe.put_header(13, VerifyHeader(VerifyHeader.ARE_YOU_DEAD, b))
    probe.put_header(TP_ID, TpHeader(CLUSTER))
    plain = Message(a, b"app", b)
    s.tp.inject_datagrams([DIALECT.encode_message(probe, False), DIALECT.encode_message(plain, False)])
    answers = s.tp.wait_sent(is_type(13, VerifyHeader.I_AM_NOT_DEAD), count=2, timeout=2)
    assert len(answers) == 2
    body = struct.pack(">h", 2) + DIALECT.encode_address(a)
    want = expected_datagram(multicast=False, flags=OOB, dest=b, src=a, headers=[(13, 22, body), tp_header()])
    for ans in answers:
        assert ans.data == want, ans.data.hex()
        dg = ans.decoded()
        assert dg.tp_flags == 0x04 and dg.messages[0].dest == b
        h = dg.messages[0].get_header(13)
        assert (h.type, h.from_) == (VerifyHeader.I_AM_NOT_DEAD, a)
    # the probe is consumed, the application message passes
    assert [m.buffer for m in s.top.messages] == [b"app"]


def test_verify_passes_suspect_up_after_timeout(stacks):
    a, b = addrs(2)
    s = stacks(verify(timeout=300), a)
    s.connect()
    t0 = time.monotonic()
    s.tp.up_prot.up(Event(EventType.SUSPECT, b))
    probe = s.tp.wait_sent(is_type(13, VerifyHeader.ARE_YOU_DEAD), timeout=2)[0]
    body = struct.pack(">h", 1) + DIALECT.encode_address(a)
    assert probe.data == expected_datagram(multicast=False, flags=OOB, dest=b, src=a,
                                           headers=[(13, 22, body), tp_header()])
    s.tp.up_prot.up(Event(EventType.SUSPECT, b))          # already being verified: no second probe
    assert not s.top.events_of(EventType.SUSPECT)
    ev = s.top.wait_event(EventType.SUSPECT, timeout=4)
    assert ev.arg == b and time.monotonic() - t0 >= 0.29
    assert len(s.tp.sent_where(is_type(13, VerifyHeader.ARE_YOU_DEAD))) == 1
    time.sleep(0.1)
    assert len(s.top.events_of(EventType.SUSPECT)) == 1
    assert not s.prot.suspects
    wait_until(lambda: s.prot._thread is None, 2, msg="the confirmation thread ends when nothing is pending")


def test_verify_cancelled_by_i_am_not_dead(stacks):
    a, b, c = addrs(3)
    s = stacks(verify(timeout=300), a)
    s.connect()
    s.tp.up_prot.up(Event(EventType.SUSPECT, b))
    s.tp.up_prot.up(Event(EventType.SUSPECT, c))
    s.tp.wait_sent(is_type(13, VerifyHeader.ARE_YOU_DEAD), count=2, timeout=2)
    alive = Message(a, None, b, OOB)
    alive.put_header(13, VerifyHeader(VerifyHeader.I_AM_NOT_DEAD, b))
    s.tp.inject([alive])
    assert s.top.wait_event(EventType.UNSUSPECT, timeout=1).arg == b
    assert [e.arg for e in s.tp.events_of(EventType.UNSUSPECT)] == [b]
    assert s.top.wait_event(EventType.SUSPECT, timeout=4).arg == c
    time.sleep(0.15)
    assert [e.arg for e in s.top.events_of(EventType.SUSPECT)] == [c]
    assert not s.top.messages


def test_verify_ignores_suspicion_of_self_and_null(stacks):
    a = UUID.random()
    s = stacks(verify(timeout=100), a)
    s.connect()
    s.tp.up_prot.up(Event(EventType.SUSPECT, a))
    s.tp.up_prot.up(Event(EventType.SUSPECT, None))
    time.sleep(0.25)
    assert not s.tp.sent and not s.top.events_of(EventType.SUSPECT)


def test_verify_end_to_end_over_fake_network(stacks):
    """A suspects B; B's VERIFY_SUSPECT answers over the (fake) network, so A drops the suspicion."""
    a, b, c = addrs(3)
    net = FakeNetwork()
    sa = stacks(verify(timeout=1000), a, network=net)
    sb = stacks(verify(timeout=1000), b, network=net)
    sa.connect()
    sb.connect()
    sa.tp.up_prot.up(Event(EventType.SUSPECT, b))
    sa.tp.up_prot.up(Event(EventType.SUSPECT, c))       # C is not there: confirmed after the timeout
    assert sa.top.wait_event(EventType.UNSUSPECT, timeout=2).arg == b
    assert sa.top.wait_event(EventType.SUSPECT, timeout=4).arg == c
    assert b not in {e.arg for e in sa.top.events_of(EventType.SUSPECT)}
    assert sb.prot.num_are_you_dead_received == 1


def test_verify_stop_ends_thread(stacks):
    a, b = addrs(2)
    s = stacks(verify(timeout=5000), a)
    s.connect()
    s.tp.up_prot.up(Event(EventType.SUSPECT, b))
    t = wait_until(lambda: s.prot._thread, 1)
    t0 = time.monotonic()
    s.stop()
    t.join(2)
    assert not t.is_alive() and time.monotonic() - t0 < 1.0
    assert not s.top.events_of(EventType.SUSPECT)


def test_verify_use_icmp_warns_and_uses_messages(caplog):
    p = VERIFY_SUSPECT()
    p.use_icmp = True
    with caplog.at_level("WARNING"):
        p.init()
    assert p.use_icmp is False and "not implemented" in caplog.text


def test_verify_bind_addr_system_property():
    from jgpy.stack.properties import apply_properties
    p = VERIFY_SUSPECT()
    apply_properties(p, {"bind_addr": "10.0.0.1"}, overrides={"jgroups.bind_addr": "127.0.0.1"})
    assert p.bind_addr == "127.0.0.1"


# ------------------------------------------------------------------------------------------------
# FD_SOCK
# ------------------------------------------------------------------------------------------------

def fd_sock(**kw) -> FD_SOCK:
    p = FD_SOCK()
    p.bind_addr = "127.0.0.1"
    p.get_cache_timeout = 500
    p.suspect_msg_interval = 250
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def fd_sock_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("FD_SOCK") and t.is_alive()]


def ring(stacks, n=2, **kw):
    """n FD_SOCK stacks on one fake network, connected (server sockets up), with the view installed on
    the coordinator first (so the joiners fetch the cache from it)."""
    mbrs = addrs(n)
    net = FakeNetwork()
    ss = [stacks(fd_sock(**kw), m, network=net) for m in mbrs]
    for s in ss:
        s.connect()
    return mbrs, net, ss


def server_clients(s: FakeStack) -> int:
    with s.prot._clients_lock:
        return len(s.prot._clients)


def connected(s: FakeStack, dest) -> bool:
    c = s.prot._ping_conn
    return c is not None and c.dest == dest and c.sock is not None


def ring_formed(sa: FakeStack, sb: FakeStack) -> bool:
    """A monitors B and B monitors A, both connections accepted by the servers."""
    return (connected(sa, sb.local_addr) and connected(sb, sa.local_addr)
            and server_clients(sa) == 1 and server_clients(sb) == 1)


def test_fd_sock_ring_and_cache_messages(stacks):
    (a, b), net, (sa, sb) = ring(stacks)
    assert sa.prot.srv_sock_addr.host == "127.0.0.1" and sa.prot.srv_sock_addr.port > 0
    sa.install_view([a, b])
    # A announces its server socket, then (B's address not cached) asks B with WHO_HAS_SOCK, B answers
    ihs = sa.tp.wait_sent(is_type(3, FdSockHeader.I_HAVE_SOCK), timeout=3)[0]
    h = ihs.header(3)
    assert ihs.multicast and ihs.msg.flags & OOB and (h.mbr, h.sock_addr) == (a, sa.prot.srv_sock_addr)
    assert ihs.decoded().tp_flags == 0x06
    who = sa.tp.wait_sent(is_type(3, FdSockHeader.WHO_HAS_SOCK), timeout=3)[0]
    assert who.msg.dest == b and who.msg.flags & OOB and who.header(3).mbr == b and who.decoded().tp_flags == 0x04
    rsp = sb.tp.wait_sent(is_type(3, FdSockHeader.I_HAVE_SOCK), timeout=3)[0]
    assert rsp.msg.dest == a and (rsp.header(3).mbr, rsp.header(3).sock_addr) == (b, sb.prot.srv_sock_addr)
    wait_until(lambda: connected(sa, b) and server_clients(sb) == 1, 3, msg="A monitors B")
    # B joins: announces itself, asks the coordinator for the cache, connects to A from the cache
    sb.install_view([a, b])
    gc = sb.tp.wait_sent(is_type(3, FdSockHeader.GET_CACHE), timeout=3)[0]
    assert gc.msg.dest == a and gc.msg.flags & OOB and not gc.multicast
    gcr = sa.tp.wait_sent(is_type(3, FdSockHeader.GET_CACHE_RSP), timeout=3)[0]
    assert gcr.msg.dest == b and gcr.msg.flags & OOB
    cached = dict(gcr.header(3).cached_addrs)
    assert cached[a] == sa.prot.srv_sock_addr and cached[b] == sb.prot.srv_sock_addr
    wait_until(lambda: connected(sb, a) and server_clients(sa) == 1, 3, msg="B monitors A")
    assert sb.prot.cache[a] == sa.prot.srv_sock_addr
    # B needed no WHO_HAS_SOCK (the cache had A); nobody suspected anybody; nothing was passed up
    assert not sb.tp.sent_where(is_type(3, FdSockHeader.WHO_HAS_SOCK))
    for s in (sa, sb):
        assert not s.tp.sent_where(is_type(3, FdSockHeader.SUSPECT)) and not s.top.events and not s.top.messages
    # the FD_SOCK header bytes are exactly Java's layout: byte type, addr mbr, S(IpAddress), int 0, int 0
    ih = DIALECT.decode_datagram(ihs.data).messages[0].raw_header(3)
    ip = sa.prot.srv_sock_addr
    assert ih == (6, bytes([12]) + DIALECT.encode_address(a) + b"\x01" + DIALECT.encode(ip) + b"\0" * 8)


@pytest.mark.parametrize("victim", [0, 1])
def test_fd_sock_crash_without_0x09_is_suspected(stacks, victim):
    (a, b), net, (sa, sb) = ring(stacks)
    sa.install_view([a, b])
    sb.install_view([a, b])
    wait_until(lambda: ring_formed(sa, sb), 3, msg="ring formed")
    dead, dead_addr = (sa, a) if victim == 0 else (sb, b)
    watcher = sb if victim == 0 else sa
    net.blocked.add(dead_addr)
    dead.prot.stop_server_socket(graceful=False)       # the socket goes away without 0x09: a crash
    sus = watcher.tp.wait_sent(is_type(3, FdSockHeader.SUSPECT), timeout=3)[0]
    assert sus.multicast and sus.msg.flags & OOB and sus.decoded().tp_flags == 0x06
    assert list(sus.header(3).mbrs) == [dead_addr]
    # the SUSPECT multicast comes back to the watcher, the only member left that is not suspected
    assert watcher.top.wait_event(EventType.SUSPECT, timeout=2).arg == dead_addr
    assert {e.arg for e in watcher.tp.events_of(EventType.SUSPECT)} == {dead_addr}
    # the BroadcastTask re-sends SUSPECT every suspect_msg_interval until a view without the suspect
    watcher.tp.wait_sent(is_type(3, FdSockHeader.SUSPECT), count=2, timeout=2)
    watcher.install_view([watcher.local_addr], 2)
    n = len(watcher.tp.sent_where(is_type(3, FdSockHeader.SUSPECT)))
    time.sleep(0.6)
    assert len(watcher.tp.sent_where(is_type(3, FdSockHeader.SUSPECT))) <= n + 1
    assert not dead.top.events_of(EventType.SUSPECT)


def test_fd_sock_graceful_stop_sends_0x09_and_no_suspicion(stacks):
    (a, b), net, (sa, sb) = ring(stacks)
    sa.install_view([a, b])
    sb.install_view([a, b])
    wait_until(lambda: ring_formed(sa, sb), 3, msg="ring formed")
    # a raw client on B's server socket sees exactly 0x09, then EOF, when B leaves gracefully
    raw = socket.create_connection(sb.prot.srv_sock_addr.sockaddr(), timeout=3)
    wait_until(lambda: server_clients(sb) == 2, 2)
    t0 = time.monotonic()
    sb.stop()
    assert time.monotonic() - t0 < 1.5
    got = b""
    while True:
        chunk = raw.recv(16)
        if not chunk:
            break
        got += chunk
    raw.close()
    assert got == b"\x09"
    # A read 0x09: B is no longer pingable, A stops pinging (alone), nobody is suspected
    wait_until(lambda: sa.prot.ping_dest is None and not sa.prot._pinger_running(), 3, msg="A's pinger ends")
    time.sleep(0.2)
    assert b not in sa.prot.pingable_mbrs
    assert not sa.tp.sent_where(is_type(3, FdSockHeader.SUSPECT)) and not sa.top.events_of(EventType.SUSPECT)
    # B's pinger told A's server it was leaving: A's client handler ended
    wait_until(lambda: server_clients(sa) == 0, 2, msg="A's server handler for B ends")


def test_fd_sock_server_reads_until_0x09_and_closes_without_it_on_crash(stacks):
    a = UUID.random()
    s = stacks(fd_sock(), a)
    s.connect()
    addr = s.prot.srv_sock_addr.sockaddr()
    c1 = socket.create_connection(addr, timeout=3)
    c2 = socket.create_connection(addr, timeout=3)
    wait_until(lambda: server_clients(s) == 2, 2)
    c1.sendall(b"\x01\x02\x09")                          # the handler ignores other bytes, ends on 0x09
    wait_until(lambda: server_clients(s) == 1, 2)
    assert c1.recv(16) == b""
    s.prot.stop_server_socket(graceful=False)
    assert c2.recv(16) == b""                             # no 0x09: looks like a crash to the client
    for c in (c1, c2):
        c.close()
    with pytest.raises(OSError):
        socket.create_connection(addr, timeout=1).close()


def test_fd_sock_answers_who_has_sock_and_get_cache(stacks):
    a, b, c, x = addrs(4)
    s = stacks(fd_sock(), a)
    s.connect()
    # learn X's address from an I_HAVE_SOCK
    xa = IpAddress("127.0.0.1", 45454)
    m = Message(None, None, b, OOB)
    m.put_header(3, FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=x, sock_addr=xa))
    s.tp.inject([m])
    assert s.prot.cache[x] == xa
    # WHO_HAS_SOCK about X (from the cache) and about us (our server socket); our own request is ignored
    for who in (x, a):
        q = Message(None, None, c, OOB)
        q.put_header(3, FdSockHeader(FdSockHeader.WHO_HAS_SOCK, mbr=who))
        s.tp.inject([q])
    mine = Message(None, None, a, OOB)
    mine.put_header(3, FdSockHeader(FdSockHeader.WHO_HAS_SOCK, mbr=x))
    s.tp.inject([mine])
    rsps = s.tp.sent_where(is_type(3, FdSockHeader.I_HAVE_SOCK))
    assert [(r.msg.dest, r.header(3).mbr, r.header(3).sock_addr) for r in rsps] == \
        [(c, x, xa), (c, a, s.prot.srv_sock_addr)]
    assert all(r.msg.flags & OOB and not r.multicast for r in rsps)
    # GET_CACHE is answered with the whole cache (Java answers whoever asks)
    g = Message(a, None, c, OOB)
    g.put_header(3, FdSockHeader(FdSockHeader.GET_CACHE))
    s.tp.inject([g])
    rsp = s.tp.sent_where(is_type(3, FdSockHeader.GET_CACHE_RSP))[0]
    assert rsp.msg.dest == c and dict(rsp.header(3).cached_addrs) == {x: xa}
    # none of it went up
    assert not s.top.messages and not s.top.events


def test_fd_sock_received_suspect_passed_up_by_first_unsuspected_member(stacks):
    a, b, c = addrs(3)
    s = stacks(fd_sock(), a)
    s.connect()
    s.install_view([b, a, c])

    def suspect_msg(*mbrs):
        m = Message(None, None, b, OOB)
        m.put_header(3, FdSockHeader(FdSockHeader.SUSPECT, mbrs=list(mbrs)))
        return m

    s.tp.inject([suspect_msg(c)])
    assert not s.top.events_of(EventType.SUSPECT), "B is first and not suspected: A does nothing"
    s.tp.inject([suspect_msg(b)])                        # now A is the first member not suspected
    assert [e.arg for e in s.top.events_of(EventType.SUSPECT)] == [b]
    assert [e.arg for e in s.tp.events_of(EventType.SUSPECT)] == [b]


def test_fd_sock_unreachable_ping_dest_is_suspected(stacks):
    a, b = addrs(2)
    s = stacks(fd_sock(sock_conn_timeout=500), a)
    s.connect()
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()                                         # nobody listens there
    _announce(s, b, IpAddress("127.0.0.1", port))
    s.install_view([a, b])
    sus = s.tp.wait_sent(is_type(3, FdSockHeader.SUSPECT), timeout=3)[0]
    assert list(sus.header(3).mbrs) == [b]
    assert s.top.wait_event(EventType.SUSPECT, timeout=2).arg == b


@pytest.fixture
def hanging_server():
    """A listening socket whose accept queue is full: connects to it hang (SYNs are dropped)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    filler = socket.create_connection(srv.getsockname(), timeout=2)
    yield IpAddress(*srv.getsockname())
    filler.close()
    srv.close()


def _announce(s: FakeStack, mbr, addr: IpAddress) -> None:
    m = Message(None, None, mbr, OOB)
    m.put_header(3, FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=mbr, sock_addr=addr))
    s.tp.inject([m])


def test_fd_sock_connect_timeout_suspects_and_stop_interrupts_connect(stacks, hanging_server):
    a, b = addrs(2)
    s = stacks(fd_sock(sock_conn_timeout=300), a)
    s.connect()
    _announce(s, b, hanging_server)
    t0 = time.monotonic()
    s.install_view([a, b])
    sus = s.tp.wait_sent(is_type(3, FdSockHeader.SUSPECT), timeout=3)[0]
    assert sus.time - t0 >= 0.29 and list(sus.header(3).mbrs) == [b]
    s.stop()
    # a long sock_conn_timeout does not hold up stop(): the pinger gives up connecting at once
    s2 = stacks(fd_sock(sock_conn_timeout=20000), b)
    s2.connect()
    _announce(s2, a, hanging_server)
    s2.install_view([b, a])
    time.sleep(0.3)
    pinger = s2.prot._pinger.thread
    assert pinger.is_alive()
    t0 = time.monotonic()
    s2.stop()
    pinger.join(2)
    assert not pinger.is_alive() and time.monotonic() - t0 < 1.0
    assert not s2.tp.sent_where(is_type(3, FdSockHeader.SUSPECT))


def test_fd_sock_retargets_on_view_change(stacks):
    (a, b, c), net, (sa, sb, sc) = ring(stacks, 3)
    for s in (sa, sb, sc):
        s.install_view([a, b, c])
    wait_until(lambda: connected(sa, b) and connected(sb, c) and connected(sc, a), 4, msg="ring of 3")
    # C leaves gracefully (no 0x09 from its server this time: it is just dropped from the view):
    # B re-targets to A without suspecting anybody
    for s in (sa, sb):
        s.install_view([a, b], 2)
    wait_until(lambda: connected(sb, a), 3, msg="B now monitors A")
    time.sleep(0.1)
    for s in (sa, sb):
        assert not s.tp.sent_where(is_type(3, FdSockHeader.SUSPECT)), "a view change is not a suspicion"


def test_fd_sock_stop_ends_threads_and_closes_sockets(stacks):
    (a, b), net, (sa, sb) = ring(stacks)
    sa.install_view([a, b])
    sb.install_view([a, b])
    wait_until(lambda: ring_formed(sa, sb), 3, msg="ring formed")
    # 2 acceptors, 2 pingers, 2 client handlers (an acceptor admits a client, then starts its handler: a moment)
    wait_until(lambda: len(fd_sock_threads()) >= 6, 3, msg="the FD_SOCK threads all started")
    addrs_ = [s.prot.srv_sock_addr.sockaddr() for s in (sa, sb)]
    t0 = time.monotonic()
    sa.stop()
    sb.stop()
    wait_until(lambda: not fd_sock_threads(), 1.5, msg="FD_SOCK threads end")
    assert time.monotonic() - t0 < 2.0
    for ad in addrs_:
        with pytest.raises(OSError):
            socket.create_connection(ad, timeout=1).close()


def test_fd_sock_properties():
    from jgpy.stack.properties import apply_properties, properties_of
    props = properties_of(FD_SOCK)
    want = {"get_cache_timeout": 1000, "suspect_msg_interval": 5000, "num_tries": 3, "start_port": 0,
            "client_bind_port": 0, "port_range": 50, "keep_alive": True, "sock_conn_timeout": 1000}
    assert {k: props[k].default for k in want} == want
    assert props["srv_sock_bind_addr"].deprecated
    p = FD_SOCK()
    apply_properties(p, {"bind_addr": "10.1.1.1", "start_port": "7800"}, overrides={"bind.address": "127.0.0.1"})
    assert p.bind_addr == "127.0.0.1" and p.start_port == 7800


def test_fd_sock_start_port_range(stacks):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        s = stacks(fd_sock(start_port=port, port_range=5), UUID.random())
        s.connect()
        assert port < s.prot.srv_sock_addr.port <= port + 5
        s.stop()
    finally:
        blocker.close()


# ------------------------------------------------------------------------------------------------
# the messages these protocols send, encoded by the Java classes (skipped without the Java peer)
# ------------------------------------------------------------------------------------------------

def test_messages_match_java_encoding(java_codec, stacks):
    from jgpy.testing.javajson import to_json
    a, b = addrs(2)
    sa = stacks(fd_all(interval=50), a)
    sa.connect()
    sa.install_view([a, b])
    sent = [sa.tp.wait_sent(lambda x: x.msg.has_header(29), timeout=2)[0]]
    sv = stacks(verify(timeout=100), a)
    sv.connect()
    sv.tp.up_prot.up(Event(EventType.SUSPECT, b))
    q = Message(a, None, b, OOB)
    q.put_header(13, VerifyHeader(VerifyHeader.ARE_YOU_DEAD, b))
    sv.tp.inject([q])
    sent += sv.tp.wait_sent(lambda x: x.msg.has_header(13), count=2, timeout=2)
    sf = stacks(fd_sock(), a)
    sf.connect()
    g = Message(a, None, b, OOB)
    g.put_header(3, FdSockHeader(FdSockHeader.GET_CACHE))
    w = Message(None, None, b, OOB)
    w.put_header(3, FdSockHeader(FdSockHeader.WHO_HAS_SOCK, mbr=a))
    sf.tp.inject([w, g])
    sf.prot.broadcast_suspect_message(b)
    sent += sf.tp.wait_sent(lambda x: x.msg.has_header(3), count=3, timeout=2)
    for s in sent:
        value = {"class": "Datagram", "list": False, "multicast": s.multicast, "dest": None, "src": None,
                 "messages": [to_json(s.decoded().messages[0])]}
        assert java_codec.encode("Datagram", value).hex() == s.data.hex()
        rep = java_codec.decode("Datagram", s.data)
        assert rep["remaining"] == 0 and rep["hex"] == s.data.hex()
