"""The running stack against real Java 2.12.2 members, on the jar's unchanged udp.xml (issue 3).

Clusters are written as strings of member kinds: ``"JP"`` is a Java coordinator and a jgpy member,
``"PJPJ"`` a jgpy coordinator with Java and jgpy members; ``"PPPP"`` runs the same scenarios without Java.
Every member sends numbered messages (half raw bytes, half Java Strings), multicast and unicast, and every
member checks per-sender FIFO order with no gaps and no duplicates, its own multicasts included.

Partitions and merges are tested in test_merge.py, crashes in test_crash.py, state transfer in
test_state_transfer.py.
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
import uuid

import pytest

from jgpy import DIALECT, Message, UUID
from jgpy.headers import GmsHeader, TpHeader, UnicastHeader
from jgpy.testing.cluster import check_fifo, make_member, stock, wait_all
from jgpy.testing.java import udp_props, unique_group
from tests.conftest import require_java

pytestmark = [pytest.mark.timeout(400), pytest.mark.interop]

N_MSGS = int(os.environ.get("JGPY_TEST_MSGS", "10000"))


class Cluster:
    def __init__(self, kinds: str, config=None, jgpy_config=None, java_member=None):
        """``java_member``: makes the Java members (``(name, config, props)``; default: the harness's JavaMember)."""
        self.kinds = kinds
        addr, port = unique_group()
        self.props = udp_props(addr, port)
        self.group = (addr, port)
        self.name = f"stack-{uuid.uuid4().hex[:8]}"
        self.config = config or stock()
        self.jgpy_config = jgpy_config or self.config
        self.members = []
        counts = {"J": 0, "P": 0}
        for k in kinds:
            counts[k] += 1
            name = f"{k}{counts[k]}"
            self.members.append(java_member(name, self.config, self.props) if k == "J" and java_member
                                else make_member(k, name, self.config if k == "J" else self.jgpy_config, self.props))

    def start(self, concurrently: bool = False) -> None:
        if not concurrently:
            for m in self.members:
                m.connect(self.name)
            return
        errors = []

        def go(m):
            try:
                m.connect(self.name)
            except Exception as e:  # noqa: BLE001
                errors.append((m.name, e))
        threads = [threading.Thread(target=go, args=(m,)) for m in self.members]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert not errors, errors

    def names(self, members=None) -> list[str]:
        return [m.name for m in (members or self.members)]

    def assert_agreement(self, members=None, timeout: float = 30.0) -> None:
        """Everybody installs the same view: same view id, same members in the same order."""
        members = members or self.members
        ok = wait_all(lambda: len({(tuple(m.view_names()), m.view_id()) for m in members}) == 1
                      and sorted(members[0].view_names()) == sorted(self.names(members)), timeout)
        views = {m.name: (m.view_id(), m.view_names()) for m in members}
        assert ok, f"members disagree on the view: {views}"

    def close(self) -> None:
        for m in reversed(self.members):
            try:
                m.close()
            except Exception:  # noqa: BLE001
                pass


@pytest.fixture
def cluster_factory():
    made: list[Cluster] = []

    def make(kinds: str, **kw) -> Cluster:
        if "J" in kinds:
            require_java()
        c = Cluster(kinds, **kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def exchange(c: Cluster, n: int, unicasts: int, members=None, timeout: float = 180.0) -> None:
    """Every member multicasts n numbered messages (bytes, then Java Strings) and sends ``unicasts`` numbered
    unicasts to the next member; every member must receive everything in per-sender FIFO order."""
    members = members or c.members
    before = {m.name: (m.received.count(False), m.received.count(True)) for m in members}
    errors = []

    def send(m, i):
        try:
            m.send_numbered(n // 2)
            m.send_numbered(n - n // 2, java_string=True, start=n // 2)
            if unicasts:
                m.send_numbered(unicasts, dest_name=members[(i + 1) % len(members)].name)
        except Exception as e:  # noqa: BLE001
            errors.append((m.name, repr(e)))
    threads = [threading.Thread(target=send, args=(m, i)) for i, m in enumerate(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not errors, errors
    expected_total = n * len(members)
    for m in members:
        assert m.wait_received(before[m.name][0] + expected_total, timeout=timeout), \
            f"{m.name} received {m.received.count() - before[m.name][0]} of {expected_total} multicasts"
        if unicasts:
            assert m.wait_received(before[m.name][1] + unicasts, unicast=True, timeout=timeout)
    expected = {m.name: n for m in members}
    for i, m in enumerate(members):
        problems = check_fifo(m.received.by_sender, expected)
        assert not problems, f"{m.name} (multicast): {problems}"
        if unicasts:
            prev = members[(i - 1) % len(members)].name
            problems = check_fifo(m.received.unicast_by_sender, {prev: unicasts})
            assert not problems, f"{m.name} (unicast): {problems}"


# ---- 1, 2, 3, 4, 7: joins in both directions, mixed clusters, 10,000 messages per sender ----

@pytest.mark.parametrize("kinds", ["JP", "PJ", "JPJ", "PJPJ", "PPPP"])
def test_cluster_and_fifo_traffic(cluster_factory, kinds):
    c = cluster_factory(kinds)
    c.start()
    c.assert_agreement()
    coord = c.members[0]
    assert c.members[-1].view_names()[0] == coord.name       # the first member coordinates
    for m in c.members:
        assert m.view_names() == c.names(), f"{m.name} sees {m.view_names()}"
    exchange(c, N_MSGS if len(kinds) <= 2 else N_MSGS // 2, unicasts=500)


@pytest.mark.parametrize("kinds", ["JPJ", "PJPJ", "PPPP"])
def test_concurrent_start(cluster_factory, kinds):
    c = cluster_factory(kinds)
    c.start(concurrently=True)
    c.assert_agreement(timeout=45)
    exchange(c, 200, unicasts=20)


# ---- 5: 10 % loss on the jgpy side ----

@pytest.mark.parametrize("kinds,mcast_xmit", [("JP", True), ("PP", True), ("PJ", False)])
def test_loss_and_retransmission(cluster_factory, kinds, mcast_xmit):
    """10 % loss both ways on the jgpy members; with use_mcast_xmit=false (tcp.xml's choice) retransmissions
    travel as XMIT_RSP unicasts between Java and jgpy.

    A Java receiver learns that a sender's *last* multicast was lost only from the sender's next STABLE
    gossip (2.12 has no other way), every 50 s on average with udp.xml's desired_avg_gossip: with a few such
    tails per run the test took up to 3 minutes. Gossip every 5 s here exercises the same path, sooner."""
    base = stock().with_properties("pbcast.STABLE", desired_avg_gossip="5000")
    if not mcast_xmit:
        base = base.with_properties("pbcast.NAKACK", use_mcast_xmit="false")
    lossy = base.insert("DISCARD", {"up": "0", "down": "0", "excludeItself": "false"}, after="UDP")
    c = cluster_factory(kinds, config=base, jgpy_config=lossy)
    c.start()
    c.assert_agreement()
    # the loss starts once the cluster has formed: a join whose discovery replies are all lost ends in a
    # singleton that only MERGE2 (10-30 s later) brings back, in Java as in jgpy; not what this test is about
    for m in c.members:
        if m.kind == "jgpy":
            d = m.channel.stack.find("DISCARD")
            d.up_loss = d.down_loss = 0.1
    exchange(c, N_MSGS, unicasts=1000, timeout=300)
    jgpy_members = [m for m in c.members if m.kind == "jgpy"]
    for m in jgpy_members:
        st = m.stats()
        assert st["DISCARD"]["num_up"] > 0 and st["DISCARD"]["num_down"] > 0
        assert st["pbcast.NAKACK"]["xmit_reqs_sent"] > 0 and st["pbcast.NAKACK"]["xmit_reqs_received"] > 0, st
        assert st["UNICAST"]["xmits"] > 0, st["UNICAST"]
        if not mcast_xmit:
            assert st["pbcast.NAKACK"]["xmit_rsps_received"] > 0, st["pbcast.NAKACK"]
    for m in c.members:
        if m.kind == "java":
            st = m.stats()
            nak = st.get("NAKACK") or st.get("pbcast.NAKACK") or {}
            assert int(nak.get("xmit_reqs_received", 0)) > 0 or int(nak.get("xmit_rsps_sent", 0)) > 0, nak
            assert int(nak.get("xmit_reqs_sent", 0)) > 0, nak


# ---- delayed and piggybacked ACKs (jgpy's UNICAST ack_delay) with Java members ----

@pytest.mark.parametrize("kinds", ["JP", "PJ"])
def test_delayed_acks_empty_a_java_senders_window(cluster_factory, kinds):
    """jgpy acks sparse unicasts ack_delay ms late, one cumulative ACK for several messages: the Java sender's
    window still empties, with no retransmission (its first one is 300 ms away), and FIFO holds."""
    c = cluster_factory(kinds, jgpy_config=stock().with_properties("UNICAST", ack_delay="5"))
    c.start()
    c.assert_agreement()
    java = next(m for m in c.members if m.kind == "java")
    py = next(m for m in c.members if m.kind == "jgpy")
    before = py.stats()["UNICAST"]
    got_before = py.received.count(True)
    bursts, per_burst = 20, 5
    for i in range(bursts):                       # sparse: a burst every few ms (a command round trip)
        java.send_numbered(per_burst, dest_name=py.name, start=i * per_burst)
    n = bursts * per_burst
    assert py.wait_received(got_before + n, unicast=True, timeout=30)
    assert not check_fifo(py.received.unicast_by_sender, {java.name: n})
    assert wait_all(lambda: int(java.stats()["UNICAST"]["num_unacked_msgs"]) == 0, 10), java.stats()["UNICAST"]
    after = py.stats()["UNICAST"]
    assert after["acks_delayed"] > before["acks_delayed"], after
    assert after["acks_sent"] - before["acks_sent"] <= n // 2, after
    assert int(java.stats()["UNICAST"]["num_xmits"]) == 0


def test_piggybacked_acks_are_understood_by_java(cluster_factory):
    """jgpy answers a Java member's unicasts while it owes them an ACK: the ACK and the answer go in one LIST
    datagram. Java takes both: its window empties with no retransmission, and our answers arrive in order."""
    c = cluster_factory("JP", jgpy_config=stock().with_properties("UNICAST", ack_delay="30", ack_threshold="1000"))
    c.start()
    c.assert_agreement()
    java = next(m for m in c.members if m.kind == "java")
    py = next(m for m in c.members if m.kind == "jgpy")
    got = py.received.count(True)
    rounds = 20
    for i in range(rounds):
        java.send_numbered(3, dest_name=py.name, start=i * 3)
        assert py.wait_received(got + 3 * (i + 1), unicast=True, timeout=10)
        py.send_numbered(1, dest_name=java.name, start=i)          # takes the pending ACK along, if still due
    assert java.wait_received(rounds, unicast=True, timeout=20)
    assert not check_fifo(java.received.unicast_by_sender, {py.name: rounds})
    assert wait_all(lambda: int(java.stats()["UNICAST"]["num_unacked_msgs"]) == 0, 10), java.stats()["UNICAST"]
    stats = py.stats()["UNICAST"]
    assert stats["acks_piggybacked"] > 0 and stats["xmits"] == 0, stats
    assert py.stats()["UDP"]["pairs_sent"] >= stats["acks_piggybacked"]     # [ACK, answer] datagrams on the wire
    assert int(java.stats()["UNICAST"]["num_xmits"]) == 0
    assert wait_all(lambda: py.stats()["UNICAST"]["unacked"] == 0, 10), py.stats()["UNICAST"]


# ---- unicast streams: a bundler per destination (unicast_stream_gap_us) ----

def _bundlers(udp_stats: dict) -> dict:
    return {k[len("bundler-"):]: v for k, v in udp_stats.items() if k.startswith("bundler-")}


@pytest.mark.parametrize("kinds", ["PJ", "PP"])
def test_unicast_stream_is_bundled_and_arrives_in_order(cluster_factory, kinds):
    """Unicasts sent back to back are a stream: they leave in LIST datagrams of many messages through the
    destination's bundler, and the receiver (Java's own unmarshalling, or jgpy) gets them all, in order."""
    c = cluster_factory(kinds)
    c.start()
    c.assert_agreement()
    py, other = c.members
    n = 5000
    got = other.received.count(True)
    before = py.stats()["UDP"]
    py.send_numbered(n, dest_name=other.name)
    assert other.wait_received(got + n, unicast=True, timeout=60), other.received.count(True)
    assert not check_fifo(other.received.unicast_by_sender, {py.name: n})
    udp = py.stats()["UDP"]
    bundled = udp["unicasts_bundled"] - before.get("unicasts_bundled", 0)
    b = _bundlers(udp)[other.name]
    assert bundled > n // 2, (bundled, udp)
    assert b["entries"] > 2 * b["datagrams"], b                   # several messages per datagram
    assert wait_all(lambda: py.stats()["UNICAST"]["unacked"] == 0, 10), py.stats()["UNICAST"]


def test_spaced_unicasts_go_alone_and_a_leavers_bundler_is_stopped(cluster_factory):
    c = cluster_factory("PPP")
    c.start()
    c.assert_agreement()
    py, peer, leaver = c.members
    py.send_numbered(2000, dest_name=leaver.name)               # a stream: leaver gets a bundler
    assert leaver.name in _bundlers(py.stats()["UDP"])
    got = peer.received.count(True)
    before = py.stats()["UDP"]["unicasts_bundled"]
    for i in range(20):                                         # 2 ms apart: far more than unicast_stream_gap_us
        py.send_numbered(1, dest_name=peer.name, start=i)
        time.sleep(0.002)
    assert peer.wait_received(got + 20, unicast=True, timeout=10)
    assert py.stats()["UDP"]["unicasts_bundled"] == before
    assert peer.name not in _bundlers(py.stats()["UDP"])
    leaver.disconnect()
    assert wait_all(lambda: len(py.view_names()) == 2, 30), py.view_names()
    assert leaver.name not in _bundlers(py.stats()["UDP"])
    assert not [t for t in threading.enumerate() if t.name == f"jgpy-bundler-{py.name}-{leaver.name}"]


@pytest.mark.parametrize("gap,enabled,expect", [("-1", "false", "none"), ("20", "true", "all")])
def test_unicast_bundling_can_be_switched_off_or_made_unconditional(cluster_factory, gap, enabled, expect):
    cfg = stock().with_properties("UDP", unicast_stream_gap_us=gap, enable_unicast_bundling=enabled)
    c = cluster_factory("PP", jgpy_config=cfg)
    c.start()
    c.assert_agreement()
    py, peer = c.members
    got = peer.received.count(True)
    before = py.stats()["UDP"]["unicasts_bundled"]
    py.send_numbered(500, dest_name=peer.name)
    for i in range(5):
        py.send_numbered(1, dest_name=peer.name, start=500 + i)
        time.sleep(0.002)
    assert peer.wait_received(got + 505, unicast=True, timeout=30)
    assert not check_fifo(peer.received.unicast_by_sender, {py.name: 505})
    bundled = py.stats()["UDP"]["unicasts_bundled"] - before
    assert (bundled == 0) if expect == "none" else (bundled >= 505), bundled


# ---- sparse multicasts go at once, alone; streams are bundled (multicast_stream_gap_us) ----

@pytest.mark.parametrize("kinds", ["PJ", "PP"])
def test_sparse_multicasts_go_alone_and_streams_are_bundled(cluster_factory, kinds):
    """Multicasts 2 ms apart leave at once in a datagram each (no bundler linger); a burst behind them goes
    through the bundler, several per datagram; the receiver (Java or jgpy) gets all of them, in order."""
    c = cluster_factory(kinds)
    c.start()
    c.assert_agreement()
    py, other = c.members
    got = other.received.count(False)
    before = py.stats()["UDP"]
    for i in range(20):
        py.send_numbered(1, start=i)
        time.sleep(0.002)
    assert other.wait_received(got + 20, timeout=20)
    mid = py.stats()["UDP"]
    assert mid["multicasts_direct"] - before["multicasts_direct"] == 20, mid
    assert mid["bundler"]["entries"] == before["bundler"]["entries"], mid["bundler"]
    n = 3000
    py.send_numbered(n, start=20)
    assert other.wait_received(got + 20 + n, timeout=60)
    assert not check_fifo(other.received.by_sender, {py.name: 20 + n}), "gaps, duplicates or reordering"
    end = py.stats()["UDP"]
    bundled = end["bundler"]["entries"] - mid["bundler"]["entries"]
    datagrams = end["bundler"]["datagrams"] - mid["bundler"]["datagrams"]
    assert bundled > n // 2 and bundled > 2 * datagrams, end["bundler"]
    # our copies of the direct and bundled multicasts are skipped unread (LISTs with our prefix: dropped by the
    # kernel's filter, else counted as own bundles); only our OOB control multicasts come back as single
    # messages (FD_ALL's heartbeat every 3 s, MERGE2's discovery), far fewer than the 20 direct ones
    if end["own_bundles_filtered"]:
        assert end["dropped_own_bundles"] == before["dropped_own_bundles"], end
    assert end["dropped_own_mcast"] - before["dropped_own_mcast"] < 20, end


def test_multicast_bundling_of_every_message_can_be_restored(cluster_factory):
    cfg = stock().with_properties("UDP", multicast_stream_gap_us="-1")
    c = cluster_factory("PP", jgpy_config=cfg)
    c.start()
    c.assert_agreement()
    py, peer = c.members
    got = peer.received.count(False)
    for i in range(5):
        py.send_numbered(1, start=i)
        time.sleep(0.002)
    assert peer.wait_received(got + 5, timeout=20)
    assert py.stats()["UDP"]["multicasts_direct"] == 0


# ---- 6: graceful leaves, coordinator hand-over ----

@pytest.mark.parametrize("kinds,leaver", [("JPJ", 1), ("PJP", 1), ("PJP", 0), ("JPJ", 0), ("PPP", 0)])
def test_graceful_leave(cluster_factory, kinds, leaver):
    c = cluster_factory(kinds)
    c.start()
    c.assert_agreement()
    gone = c.members[leaver]
    rest = [m for m in c.members if m is not gone]
    gone.disconnect()
    c.assert_agreement(rest)
    expected_coord = rest[0].name if leaver == 0 else c.members[0].name
    assert rest[0].view_names()[0] == expected_coord
    exchange(c, 300, unicasts=30, members=rest)


# ---- 8: bad input is counted and logged, the cluster keeps working ----

def _sendto_group(group, data: bytes) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        s.sendto(data, group)
    finally:
        s.close()


@pytest.mark.parametrize("kinds", ["PJ", "JP"])
def test_bad_input_is_counted(cluster_factory, kinds):
    c = cluster_factory(kinds)
    c.start()
    c.assert_agreement()
    p = next(m for m in c.members if m.kind == "jgpy")
    tp = p.channel.stack.transport
    before = dict(tp.counters)
    good = Message(None, b"x", UUID.random())
    good.put_header(21, TpHeader(c.name))
    data = DIALECT.encode_message(good)
    other_version = bytes([0x1f, 0x02]) + data[2:]                      # 3.x.y
    _sendto_group(c.group, other_version)
    _sendto_group(c.group, data[:-7])                                   # truncated
    rnd = random.Random(1)
    for _ in range(20):
        _sendto_group(c.group, bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200))))
    other_cluster = Message(None, b"y", UUID.random())
    other_cluster.put_header(21, TpHeader("another-cluster"))
    _sendto_group(c.group, DIALECT.encode_message(other_cluster))
    # random bytes mostly fail the version check, the rest the decoding: all 22 bad datagrams are counted
    bad = lambda: (tp.counters["dropped_version"] - before["dropped_version"]  # noqa: E731
                   + tp.counters["dropped_malformed"] - before["dropped_malformed"])
    assert wait_all(lambda: bad() >= 22 and tp.counters["dropped_version"] > before["dropped_version"]
                    and tp.counters["dropped_malformed"] > before["dropped_malformed"]
                    and tp.counters["dropped_other_cluster"] > before["dropped_other_cluster"], 10), tp.counters

    # a JOIN_REQ for a member that is already in the view, sent to the coordinator
    coord = c.members[0]
    existing = next(m for m in c.members if m is not coord)
    if coord.kind == "jgpy":
        gms = coord.channel.stack.find("pbcast.GMS")
        n0 = gms.counters["joins_from_existing_members"]
        target = coord.address_of(existing.name)
        req = Message(coord.channel.address, None, None, Message.OOB)
        req.put_header(14, GmsHeader(GmsHeader.JOIN_REQ, mbr=target, use_flush_if_present=True))
        p.channel.send(req)
        assert wait_all(lambda: gms.counters["joins_from_existing_members"] > n0, 10)
    else:
        coord_addr = p.address_of(coord.name)
        req = Message(coord_addr, None, None, Message.OOB)
        req.put_header(14, GmsHeader(GmsHeader.JOIN_REQ, mbr=p.channel.address, use_flush_if_present=True))
        p.channel.send(req)
        time.sleep(1.0)
    c.assert_agreement()
    assert len(c.members[0].view_names()) == len(c.members)              # nobody was added or removed
    exchange(c, 200, unicasts=20)
