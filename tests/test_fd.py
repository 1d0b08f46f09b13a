"""FD (heartbeats to the right-hand neighbour) in a fake stack (tests/fakestack.py), against Java's own FD run in
a probe (same heartbeat, ack and SUSPECT messages, same suspicion time), and in real clusters where a member is
killed with SIGKILL / Runtime.halt: the time until the survivors' view excludes it is recorded as a figure."""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
import uuid

import pytest

from jgpy import DIALECT, Channel, Message, UUID
from jgpy._core.wire import utf_encode
from jgpy.errors import ConfigError
from jgpy.headers import FdHeader, NakAckHeader
from jgpy.protocols.fd import FD
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import stock, wait_all
from jgpy.testing.java import PyNode, udp_props, unique_group
from tests.fakestack import (TP_ID, FakeNetwork, FakeStack, JavaProtocolProbe, as_java_sent, probe_addr, probe_msg,
                             probe_view, wait_until)

pytestmark = pytest.mark.timeout(120)

PID = 2                              # FD's protocol id
MAGIC = 3                            # FD$FdHeader
CLUSTER = "fdtest"
OOB = Message.OOB
HEARTBEAT, HEARTBEAT_ACK, SUSPECT = FdHeader.HEARTBEAT, FdHeader.HEARTBEAT_ACK, FdHeader.SUSPECT
JAVA_FD = "org.jgroups.protocols.FD"


def fd(timeout=200, max_tries=2) -> FD:
    p = FD()
    p.timeout, p.max_tries = timeout, max_tries
    return p


def suspicion_ms(timeout: int, max_tries: int) -> int:
    """When Java's Monitor suspects a silent neighbour: the first run more than timeout + 500 ms after the
    last ack counts miss 1, ..., the run after max_tries misses suspects."""
    first_miss = (timeout + 500) // timeout + 1
    return (first_miss + max_tries) * timeout


@pytest.fixture
def stacks():
    made: list[FakeStack] = []

    def make(prot, local_addr=None, **kw) -> FakeStack:
        kw.setdefault("cluster_name", CLUSTER)
        s = FakeStack(prot, local_addr, **kw)
        s.connect()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def addrs(n):
    return [UUID.random() for _ in range(n)]


def suspected(s: FakeStack) -> list[str]:
    """The members FD's Broadcaster is suspecting (dump_stats "suspected")."""
    return [str(m) for m in s.prot.dump_stats()["suspected"]]


def is_fd(htype):
    return lambda x: x.msg.has_header(PID) and x.msg.get_header(PID).type == htype


def fd_msg(src, htype, dest=None, mbrs=None, from_=None) -> Message:
    m = Message(dest, None, src, OOB)
    m.put_header(PID, FdHeader(htype, mbrs, from_))
    return m


def datagram(multicast: bool, dest, src, body: bytes) -> bytes:
    """A single-message 2.12 datagram of an FD message (OOB, no payload), built by hand from the wire doc."""
    out = bytearray(b"\x13\x02")
    out.append((0x02 if multicast else 0) | 0x04)
    out += bytes([(0x01 if dest is not None else 0) | 0x02, OOB])
    if dest is not None:
        out += DIALECT.encode_address(dest)
    out += DIALECT.encode_address(src)
    out += struct.pack(">hhh", 2, PID, MAGIC) + body
    out += struct.pack(">hh", TP_ID, 56) + utf_encode(CLUSTER)
    return bytes(out)


class Acker:
    """Answers every HEARTBEAT a stack sends to ``peer`` with a HEARTBEAT_ACK from ``peer`` (or, with
    ``plain``, with a data message from it), like a live neighbour."""

    def __init__(self, stack: FakeStack, peer, plain: bool = False):
        self.stack, self.peer, self.plain = stack, peer, plain
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self.seen = 0

    def _run(self):
        while not self._stop.is_set():
            hbs = self.stack.tp.sent_where(lambda x: is_fd(HEARTBEAT)(x) and x.msg.dest == self.peer)
            if len(hbs) > self.seen:
                self.seen = len(hbs)
                if self.plain:
                    m = Message(self.stack.local_addr, b"data", self.peer)
                    m.put_header(15, NakAckHeader.msg(1))
                else:
                    m = fd_msg(self.peer, HEARTBEAT_ACK, self.stack.local_addr, from_=self.peer)
                self.stack.tp.inject([m])
            self._stop.wait(0.01)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(2)


# ------------------------------------------------------------------------------------------------
# heartbeats and acks
# ------------------------------------------------------------------------------------------------

def test_heartbeats_to_the_right_hand_neighbour(stacks):
    a, b, c = addrs(3)
    s = stacks(fd(timeout=100), a, loopback=False)
    s.install_view([a])
    time.sleep(0.25)
    assert not s.tp.sent and s.prot.ping_dest is None and not s.prot.is_monitoring, "alone: no heartbeats"
    s.install_view([c, a, b], 2)                        # A pings B; the last member pings the first
    hbs = s.tp.wait_sent(is_fd(HEARTBEAT), count=4, timeout=3)
    gaps = [y.time - x.time for x, y in zip(hbs, hbs[1:4])]
    assert all(0.07 <= g <= 0.6 for g in gaps), gaps
    want = datagram(False, b, a, bytes.fromhex("00ffff01"))          # type, mbrs=null, from=null
    assert all(h.data == want for h in hbs), hbs[0].data.hex()
    assert hbs[0].decoded().tp_flags == 0x04                          # unicast, OOB
    sc = stacks(fd(timeout=100), b, loopback=False)
    sc.install_view([c, a, b])
    assert sc.tp.wait_sent(is_fd(HEARTBEAT), timeout=2)[0].msg.dest == c
    s.stop()
    n = len(s.tp.sent)
    time.sleep(0.3)
    assert len(s.tp.sent) == n, "heartbeats continue after stop()"


def test_heartbeat_answered_with_ack_and_nothing_passed_up(stacks):
    a, b = addrs(2)
    s = stacks(fd(timeout=5000), a, loopback=False)
    s.install_view([a, b])
    hb = fd_msg(b, HEARTBEAT, a)
    data = Message(a, b"app", b)
    s.tp.inject([hb, data])
    ack = s.tp.wait_sent(is_fd(HEARTBEAT_ACK), timeout=1)[0]
    assert ack.data == datagram(False, b, a, b"\x01\xff\xff" + DIALECT.encode_address(a))   # from = A
    assert [m.buffer for m in s.top.messages] == [b"app"] and s.top.batches == [[data]]


@pytest.mark.parametrize("plain", [False, True])
def test_acks_or_any_message_from_the_neighbour_keep_it_alive(stacks, plain):
    a, b = addrs(2)
    s = stacks(fd(timeout=100, max_tries=1), a, loopback=False)
    s.install_view([a, b])
    with Acker(s, b, plain=plain):
        time.sleep(1.2)                                  # suspicion would come at 800 ms without acks
        assert s.prot.num_tries == 0
    assert not s.tp.sent_where(is_fd(SUSPECT)) and not s.top.events_of(EventType.SUSPECT)
    # now B goes silent: suspected
    t0 = time.monotonic()
    sus = s.tp.wait_sent(is_fd(SUSPECT), timeout=3)[0]
    assert sus.time - t0 >= 0.5


# ------------------------------------------------------------------------------------------------
# suspicion
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("timeout,max_tries", [(200, 2), (300, 0), (120, 3)])
def test_suspicion_after_max_tries(stacks, timeout, max_tries):
    a, b, c = addrs(3)
    s = stacks(fd(timeout, max_tries), a)
    t0 = time.monotonic()
    s.install_view([a, b, c])
    sus = s.tp.wait_sent(is_fd(SUSPECT), timeout=5)[0]
    elapsed = (sus.time - t0) * 1000
    expected = suspicion_ms(timeout, max_tries)
    # the earliest the algorithm allows: a Monitor run late under load may count the first miss as soon as
    # timeout + 500 ms have passed, and each later run comes at least `timeout` after the one before
    earliest = timeout + 500 + max_tries * timeout
    assert earliest - 5 <= elapsed <= expected + 800, (elapsed, earliest, expected)
    hbs = [x for x in s.tp.sent if x.time <= sus.time and is_fd(HEARTBEAT)(x)]
    # one heartbeat per Monitor run: as many runs as fit before the suspicion (fewer when a late run counted
    # its miss early, as above)
    assert earliest // timeout <= len(hbs) <= expected // timeout, (len(hbs), earliest, expected)
    # the SUSPECT multicast: OOB, mbrs = [B], from = A; it comes back to us through the loopback
    assert sus.multicast and sus.data == datagram(True, None, a, b"\x02\x00\x01" + DIALECT.encode_address(b) +
                                                  DIALECT.encode_address(a))
    assert s.top.wait_event(EventType.SUSPECT, timeout=1).arg == b
    assert [e.arg for e in s.tp.events_of(EventType.SUSPECT)] == [b]
    # B is no longer pingable: A pings C now
    assert s.prot.pingable_mbrs == [a, c] and s.prot.ping_dest == c
    s.tp.wait_sent(lambda x: is_fd(HEARTBEAT)(x) and x.msg.dest == c, timeout=2)
    assert s.prot.num_suspect_events == 1 and list(s.prot.suspect_history) == [b]


def test_broadcast_repeats_until_a_view_excludes_the_suspect(stacks):
    a, b = addrs(2)
    s = stacks(fd(timeout=100, max_tries=0), a)
    s.install_view([a, b])
    s.tp.wait_sent(is_fd(SUSPECT), count=3, timeout=3)     # re-sent every timeout: multicasts are unreliable
    assert s.prot.ping_dest is None and not s.prot.is_monitoring        # nobody left to ping
    assert suspected(s) == [str(b)]
    s.install_view([a], 2)
    assert suspected(s) == []
    n = len(s.tp.sent_where(is_fd(SUSPECT)))
    time.sleep(0.3)
    assert len(s.tp.sent_where(is_fd(SUSPECT))) <= n + 1
    # each SUSPECT came back and was passed up (GMS decides what to do with repeated suspicions)
    assert {e.arg for e in s.top.events_of(EventType.SUSPECT)} == {b}


def test_received_suspect_retargets_and_view_change_resets(stacks):
    a, b, c, d = addrs(4)
    s = stacks(fd(timeout=5000), a, loopback=False)
    s.install_view([d, a, b, c])
    assert s.prot.ping_dest == b
    s.tp.inject([fd_msg(d, SUSPECT, mbrs=[b, c], from_=d)])
    assert s.prot.pingable_mbrs == [d, a] and s.prot.ping_dest == d
    assert [(e.type, e.arg) for e in s.top.events] == [(EventType.SUSPECT, b), (EventType.SUSPECT, c)]
    assert [e.arg for e in s.tp.events_of(EventType.SUSPECT)] == [b, c]
    assert not s.top.messages, "FD messages are never passed up"
    s.install_view([d, a, c], 2)                         # a view resets the pingable members
    assert s.prot.pingable_mbrs == [d, a, c] and s.prot.ping_dest == c
    # a SUSPECT naming us: answered with a HEARTBEAT_ACK to the sender, no suspicion of ourselves
    s.tp.inject([fd_msg(d, SUSPECT, mbrs=[a], from_=d)])
    ack = s.tp.sent_where(is_fd(HEARTBEAT_ACK))
    assert [(x.msg.dest, x.msg.get_header(PID).from_) for x in ack] == [(d, a)]
    assert a not in {e.arg for e in s.top.events_of(EventType.SUSPECT)}


def test_unsuspect_makes_a_member_pingable_again(stacks):
    a, b, c = addrs(3)
    s = stacks(fd(timeout=100, max_tries=0), a)
    s.install_view([a, b, c])
    wait_until(lambda: suspected(s) == [str(b)], 3, msg="B suspected")
    wait_until(lambda: s.prot.ping_dest == c, 2, msg="A pings C")
    with Acker(s, c):
        s.prot.down(Event(EventType.UNSUSPECT, b))      # VERIFY_SUSPECT: B answered ARE_YOU_DEAD
        assert [e.arg for e in s.tp.events_of(EventType.UNSUSPECT)] == [b]
        assert s.prot.pingable_mbrs == [a, b, c] and s.prot.ping_dest == b and suspected(s) == []
        n = len(s.tp.sent_where(is_fd(SUSPECT)))
        time.sleep(0.3)                                  # the broadcast has stopped
        assert len(s.tp.sent_where(is_fd(SUSPECT))) <= n + 1


def test_broadcast_keeps_its_suspects_until_none_is_left(stacks):
    """2.12's quirk: with one of two suspects unsuspected, the running BroadcastTask keeps naming both."""
    me, x, y = addrs(3)
    s = stacks(fd(timeout=100, max_tries=0), me)
    s.install_view([me, x, y])                          # X is suspected, then (pinged next) Y
    wait_until(lambda: suspected(s) == [str(x), str(y)], 4, msg="X and Y suspected")
    last = s.tp.wait_sent(is_fd(SUSPECT), count=len(s.tp.sent_where(is_fd(SUSPECT))) + 1, timeout=2)[-1]
    assert list(last.header(PID).mbrs) == [x, y]
    s.prot.down(Event(EventType.UNSUSPECT, x))
    assert suspected(s) == [str(y)] and s.prot.pingable_mbrs == [me, x] and s.prot.ping_dest == x
    n = len(s.tp.sent_where(is_fd(SUSPECT)))
    nxt = s.tp.wait_sent(is_fd(SUSPECT), count=n + 1, timeout=2)[n]
    assert list(nxt.header(PID).mbrs) == [x, y]


def test_properties_and_life_cycle(stacks):
    from jgpy.stack.properties import apply_properties, properties_of
    props = properties_of(FD)
    assert props["timeout"].default == 3000 and props["max_tries"].default == 2 and props["shun"].deprecated
    p = FD()
    apply_properties(p, {"timeout": "2500", "max_tries": "5", "shun": "true"})
    assert (p.timeout, p.max_tries) == (2500, 5)
    with pytest.raises(ConfigError):
        FakeStack(fd(timeout=0), start=False)
    a, b = addrs(2)
    s = stacks(fd(timeout=100), a)
    s.install_view([a, b])
    s.prot.stop_failure_detection()
    assert not s.prot.is_monitoring
    s.prot.start_failure_detection()
    assert s.prot.is_monitoring
    s.stop()
    assert not s.prot.is_monitoring


def test_two_fd_stacks_over_a_fake_network(stacks):
    """A and B ping each other over the (fake) network; nobody is suspected until B's traffic is dropped."""
    a, b = addrs(2)
    net = FakeNetwork()
    sa, sb = stacks(fd(timeout=100, max_tries=1), a, network=net), stacks(fd(timeout=100, max_tries=1), b,
                                                                           network=net)
    for st in (sa, sb):
        st.install_view([a, b])
    time.sleep(1.0)
    assert len(sa.tp.sent_where(is_fd(HEARTBEAT_ACK))) >= 5 and len(sb.tp.sent_where(is_fd(HEARTBEAT_ACK))) >= 5
    assert not sa.top.events_of(EventType.SUSPECT) and not sb.top.events_of(EventType.SUSPECT)
    net.blocked.add(b)
    assert sa.top.wait_event(EventType.SUSPECT, timeout=3).arg == b
    # B hears nothing either (blocked both ways): it suspects A, never itself
    assert sb.top.wait_event(EventType.SUSPECT, timeout=3).arg == a
    assert {e.arg for e in sa.top.events_of(EventType.SUSPECT)} == {b}


# ------------------------------------------------------------------------------------------------
# against Java's FD (the 2.12.2 jar)
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from tests.conftest import require_java
    require_java()
    return JavaProtocolProbe(tmp_path_factory.mktemp("fdprobe"))


@pytest.mark.interop
def test_same_messages_and_suspicion_time_as_java(stacks, probe):
    """Java's FD and jgpy's, each with a silent neighbour: the same heartbeats, the same SUSPECT at the same
    Monitor run, and the same reactions to received HEARTBEAT / SUSPECT messages."""
    a, b, c = addrs(3)
    timeout, max_tries = 200, 2
    got_hb = fd_msg(c, HEARTBEAT, a)
    sus_bc = fd_msg(c, SUSPECT, mbrs=[b, c], from_=c)
    sus_me = fd_msg(c, SUSPECT, mbrs=[a], from_=c)
    script = [f"set timeout {timeout}", f"set max_tries {max_tries}", "timer", "local " + probe_addr(a),
              "view " + probe_view([a, b, c]), "sleep 1500",
              "up " + probe_msg(got_hb), "up " + probe_msg(sus_me), "sleep 10", "up " + probe_msg(sus_bc),
              "sleep 300", "stop"]
    java = probe.run(JAVA_FD, PID, script)
    s = stacks(fd(timeout, max_tries), a, loopback=False)       # the probe has no loopback either
    t0 = time.monotonic()
    s.install_view([a, b, c])
    time.sleep(1.5)
    for m in (got_hb, sus_me):
        s.tp.inject([m])
    time.sleep(0.01)
    s.tp.inject([sus_bc])
    time.sleep(0.3)
    s.stop()

    def kinds(lines):
        out = []
        for x in lines:
            if x.kind == "down":
                h = x.msg.get_header(PID)
                out.append((FdHeader.TYPE_NAMES[h.type], x.msg.dest))
            elif x.kind.startswith("ev"):
                out.append((x.kind, x.event, x.addr))
        return out
    jk = kinds(java)
    # the same sequence before the received messages: heartbeats to B, then SUSPECT [B] at run 6
    jpre = [k for k in jk if k[0] in ("HEARTBEAT", "SUSPECT")]
    jsus = [x for x in java if x.kind == "down" and x.msg.get_header(PID).type == SUSPECT]
    msus = [x for x in s.tp.sent if is_fd(SUSPECT)(x)]
    jhb_before = [x for x in java if x.kind == "down" and x.msg.get_header(PID).type == HEARTBEAT
                  and x.ms < jsus[0].ms]
    mhb_before = [x for x in s.tp.sent if is_fd(HEARTBEAT)(x) and x.time < msus[0].time]
    assert len(jhb_before) == len(mhb_before) == suspicion_ms(timeout, max_tries) // timeout, (jpre, len(mhb_before))
    jfirst = next(x for x in java if x.kind == "down")
    assert abs((jsus[0].ms - jfirst.ms) - (msus[0].time - mhb_before[0].time) * 1000) <= 400
    # byte for byte: heartbeat, SUSPECT, and the ack to the SUSPECT naming us
    assert DIALECT.encode(as_java_sent(mhb_before[0])) == DIALECT.encode(jhb_before[0].msg)
    assert DIALECT.encode(as_java_sent(msus[0])) == DIALECT.encode(jsus[0].msg)
    jacks = [x.msg for x in java if x.kind == "down" and x.msg.get_header(PID).type == HEARTBEAT_ACK]
    macks = [as_java_sent(x) for x in s.tp.sent if is_fd(HEARTBEAT_ACK)(x)]
    assert len(jacks) == len(macks) == 2                        # one for the HEARTBEAT, one for the SUSPECT of us
    assert [DIALECT.encode(m) for m in macks] == [DIALECT.encode(m) for m in jacks]
    # the received SUSPECT [B, C]: SUSPECT up and down for each, in this order (Java's sinks record both)
    jev = [(x.kind, x.event, x.addr) for x in java if x.kind.startswith("ev")]
    mev = [("evup", e.type, e.arg) for e in s.top.events if e.type == EventType.SUSPECT]
    assert [e for e in jev if e[0] == "evup"] == mev == [("evup", "SUSPECT", b), ("evup", "SUSPECT", c)]
    assert [e[2] for e in jev if e[0] == "evdown"] == [e.arg for e in s.tp.events_of(EventType.SUSPECT)] == [b, c]


def test_fd_messages_encoded_like_java(stacks, java_codec):
    from jgpy.testing.javajson import to_json
    a, b = addrs(2)
    s = stacks(fd(timeout=50, max_tries=0), a)
    s.install_view([a, b])
    s.tp.inject([fd_msg(b, HEARTBEAT, a)])
    s.tp.wait_sent(is_fd(SUSPECT), timeout=2)
    sent = [s.tp.sent_where(is_fd(t))[0] for t in (HEARTBEAT, HEARTBEAT_ACK, SUSPECT)]
    for x in sent:
        value = {"class": "Datagram", "list": False, "multicast": x.multicast, "dest": None, "src": None,
                 "messages": [to_json(x.decoded().messages[0])]}
        assert java_codec.encode("Datagram", value).hex() == x.data.hex()
        rep = java_codec.decode("Datagram", x.data)
        assert rep["remaining"] == 0 and rep["hex"] == x.data.hex()
        hdr = dict(rep["value"]["messages"][0]["headers"])[PID]
        assert hdr["class"] == "protocols.FD$FdHeader"


# ------------------------------------------------------------------------------------------------
# real clusters: a member is killed, the survivors' view excludes it
# ------------------------------------------------------------------------------------------------

FD_TIMEOUT, FD_MAX_TRIES = 1000, 2


def fd_config():
    """udp.xml with FD instead of FD_ALL and without FD_SOCK (so FD alone detects the crash)."""
    return stock().remove("FD_SOCK").replace("FD_ALL", "FD", {"timeout": FD_TIMEOUT, "max_tries": FD_MAX_TRIES})


def _xml_file(cfg) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-fd-", delete=False) as f:
        f.write(cfg.to_xml())
        return f.name


def _names(ch) -> list[str]:
    return [str(m) for m in ch.view.members] if ch.view is not None else []


def _time_until_excluded(channels, victim: str, t_kill: float, timeout: float = 30.0) -> float:
    assert wait_all(lambda: all(victim not in _names(ch) for ch in channels), timeout), \
        [(_names(ch)) for ch in channels]
    return time.monotonic() - t_kill


@pytest.mark.processes
def test_jgpy_members_kill_9(figures):
    """A jgpy member in this process and one in its own process (killed with SIGKILL): FD suspects it,
    VERIFY_SUSPECT confirms, GMS excludes it."""
    props = udp_props(*unique_group())
    cluster = f"fd-{uuid.uuid4().hex[:8]}"
    xml = _xml_file(fd_config())
    try:
        with Channel(fd_config(), "A", props) as a, PyNode(name="B") as b:
            a.connect(cluster)
            b.connect(xml, cluster, props)
            assert wait_all(lambda: _names(a) == ["A", "B"], 20), _names(a)
            time.sleep(2.5)                              # a few heartbeats both ways, nobody suspected
            st = a.dump_stats()["FD"]
            assert st["num_heartbeats"] >= 1 and st["num_suspect_events"] == 0, st
            assert st["ping_dest"] == "B"
            t_kill = time.monotonic()
            b.kill()
            elapsed = _time_until_excluded([a], "B", t_kill)
            assert _names(a) == ["A"]
            st = a.dump_stats()["FD"]
            assert st["num_suspect_events"] >= 1 and st["num_suspect_msgs_sent"] >= 1, st
    finally:
        os.unlink(xml)
    figures(f"FD kill -9 -> view without it (jgpy, timeout={FD_TIMEOUT}, max_tries={FD_MAX_TRIES}, "
            f"VERIFY_SUSPECT 1500)", elapsed, "s")
    expected = suspicion_ms(FD_TIMEOUT, FD_MAX_TRIES) / 1000 + 1.5
    assert expected - FD_TIMEOUT / 1000 - 0.5 <= elapsed <= expected + 6, elapsed


def test_java_and_jgpy_kill(java_nodes, figures):
    """J1 (Java, coordinator), P1 (jgpy, this process), P2 (jgpy, own process). P2 is killed with SIGKILL: Java and
    jgpy exclude it; then J1 halts: P1 suspects the coordinator, takes over, and installs a view of its own."""
    props = udp_props(*unique_group())
    cluster = f"fdj-{uuid.uuid4().hex[:8]}"
    xml = _xml_file(fd_config())
    try:
        j = java_nodes("J1")
        j.connect(xml, cluster, props)
        with Channel(fd_config(), "P1", props) as p1, PyNode(name="P2") as p2:
            p1.connect(cluster)
            p2.connect(xml, cluster, props)
            assert wait_all(lambda: _names(p1) == ["J1", "P1", "P2"], 30), _names(p1)
            time.sleep(2.0)
            assert p1.dump_stats()["FD"]["ping_dest"] == "P2"
            j.drain_events()
            t_kill = time.monotonic()
            p2.kill()                                     # P2 pinged J1; P1 pinged P2
            elapsed1 = _time_until_excluded([p1], "P2", t_kill)
            j.wait_event(lambda e: e.get("event") == "view" and e.get("names") == ["J1", "P1"], 15)
            java_fd = j.protocol_stats()["FD"]
            assert int(java_fd["number_of_heartbeats_sent"]) > 0, java_fd
            assert p1.dump_stats()["FD"]["ping_dest"] == "J1"
            t_halt = time.monotonic()
            j.halt()
            elapsed2 = _time_until_excluded([p1], "J1", t_halt)
            assert _names(p1) == ["P1"]
    finally:
        os.unlink(xml)
    figures(f"FD kill -9 jgpy member -> view without it (timeout={FD_TIMEOUT}, max_tries={FD_MAX_TRIES})",
            elapsed1, "s")
    figures(f"FD halt Java coordinator -> jgpy view without it (timeout={FD_TIMEOUT}, max_tries={FD_MAX_TRIES})",
            elapsed2, "s")
