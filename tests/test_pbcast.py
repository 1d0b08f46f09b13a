"""pbcast.PBCAST, jgpy's gossip-based reliable multicast (seed 000): the header on the wire, members on the fake
stack (gossip repairing loss, retransmission from a third member, garbage collection with its lag, the dynamic
interval, bounded caches, digests for GMS, hostile input), and jgpy process clusters on pbcast-udp.xml with
journals and the checker under 10 % loss and a kill -9."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from jgpy import DIALECT, UUID, Message
from jgpy._core import jg212, spec212
from jgpy._core.headers import PbcastHeader
from jgpy._core.types import Digest
from jgpy.protocols.pbcast.pbcast import PBCAST, gossip_interval, pick_subset
from jgpy.stack.config import load_config
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import kill_mid_stream, lossy_journaled_members, multicast_all, wait_all
from tests.fakestack import FakeStack, LossyNetwork, closing_factory, wait_until

H = PbcastHeader
PBCAST_ID = 515


# ---- the header on the wire ------------------------------------------------------------------------------

def test_ids_are_outside_the_ranges_of_2_12():
    assert jg212.protocol_id("pbcast.PBCAST") == PBCAST_ID > spec212.MAX_JGROUPS_PROTOCOL_ID
    assert DIALECT.magic_of(H(H.GOSSIP)) == 1026 > spec212.MAX_JGROUPS_MAGIC
    assert DIALECT.allowed_magics(PBCAST_ID) == (1026,)
    assert not DIALECT.header_fits(15, 1026) and not DIALECT.header_fits(PBCAST_ID, 25)


def test_header_bytes_per_type():
    a, b = UUID(1, 2), UUID(3, 4)
    m = Message(None, b"x", a)
    m.put_header(PBCAST_ID, H(H.MCAST_MSG, 7))
    data = DIALECT.encode(m)
    assert (1026).to_bytes(2, "big") + bytes([0]) + (7).to_bytes(8, "big") in data
    digest = Digest([(a, 1, 5, 7), (b, 0, 3, 3)])
    for hdr in (H(H.XMIT_RSP, 9, sender=b), H(H.XMIT_REQ, xmit_reqs=((a, 4, 9), (b, 1, 1))),
                H(H.GOSSIP, gossip_id=3, origin=a, digest=digest, not_seen=(b,), seen=(a,)),
                H(H.GOSSIP, gossip_id=4, origin=a, digest=digest, seen=(b,))):
        m = Message(None, None, a)
        m.put_header(PBCAST_ID, hdr)
        got = DIALECT.decode(Message, DIALECT.encode(m)).get_header(PBCAST_ID)
        assert [getattr(got, f) for f in hdr.FIELDS] == [getattr(hdr, f) for f in hdr.FIELDS], hdr
        assert DIALECT.message_size(m) > 0
    from jgpy.tools.dump import describe_datagram          # the capture decoder names it
    m = Message(None, None, a)
    m.put_header(PBCAST_ID, H(H.XMIT_RSP, 9, sender=b))
    text = "\n".join(describe_datagram(DIALECT.encode_message(m, True)))
    assert "pbcast.PBCAST(515): PbcastHeader(type=XMIT_RSP, seqno=9" in text, text
    bad = Message(None, None, a)                 # under another protocol's id: the message is malformed
    bad.put_header(15, H(H.MCAST_MSG, 1))
    dg = DIALECT.decode_datagram(DIALECT.encode_message(bad, True))
    assert len(dg.rejected) == 1 and not dg.messages


def test_pbcast_udp_config_replaces_nakack_and_stable():
    from jgpy.stack.protocol import Protocol
    from jgpy.stack.stack import ProtocolStack
    names = load_config("pbcast-udp.xml").names()
    udp = load_config("udp.xml").names()
    assert names == [("pbcast.PBCAST" if n == "pbcast.NAKACK" else n) for n in udp if n != "pbcast.STABLE"]
    stack = ProtocolStack(load_config("pbcast-udp.xml"), Protocol())
    p = stack.find("pbcast.PBCAST")
    assert isinstance(p, PBCAST) and p.id == PBCAST_ID and p.dynamic and p.mcast_gossip


# ---- members on the fake stack ----------------------------------------------------------------------------

class Group:
    """``n`` PBCAST members on one (lossy) fake network, joined with a digest and a view."""

    def __init__(self, n: int, net: LossyNetwork | None = None, **props) -> None:
        self.net = net or LossyNetwork()
        self.addrs = [UUID(0, i + 1) for i in range(n)]
        self.stacks: list[FakeStack] = []
        props = {"dynamic": False, "gossip_interval": 20, "gc_lag": 0, **props}
        for a in self.addrs:
            p = PBCAST()
            for k, v in props.items():
                setattr(p, k, v)
            self.stacks.append(FakeStack(p, local_addr=a, network=self.net))
        self.join(self.stacks, self.addrs)

    @staticmethod
    def join(stacks: list, members: list, vid: int = 1) -> None:
        for st in stacks:
            st.prot.down(Event(EventType.SET_DIGEST, Digest([(a, 0, 0, 0) for a in members])))
            st.install_view(members, vid)

    def send(self, i: int, count: int, start: int = 0) -> None:
        for k in range(start, start + count):
            self.stacks[i].send(Message(None, f"{i}:{k}".encode()))

    def delivered(self, i: int) -> list[tuple]:
        return [(m.src, bytes(m.payload).decode()) for m in self.stacks[i].top.messages]

    def stats(self, i: int) -> dict:
        return self.stacks[i].prot.dump_stats()

    def close(self) -> None:
        for st in self.stacks:
            st.close()


@pytest.fixture
def group():
    yield from closing_factory(Group)


def _fifo_complete(g: Group, i: int, counts: dict) -> None:
    got = g.delivered(i)
    for s, n in counts.items():
        assert [p for src, p in got if src == g.addrs[s]] == [f"{s}:{k}" for k in range(n)], (i, s)
    assert len(got) == sum(counts.values())


def test_gossip_repairs_random_loss(group):
    """20 % of all datagrams lost (multicasts, gossips, requests, retransmissions alike): every member delivers
    every multicast once, in each sender's order."""
    g = group(3, net=LossyNetwork(loss=0.2, seed=3))
    threads = [threading.Thread(target=g.send, args=(i, 100)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for i in range(3):
        g.stacks[i].top.wait_messages(300, timeout=30)
    time.sleep(0.2)                              # nothing more comes (no duplicates)
    for i in range(3):
        _fifo_complete(g, i, {0: 100, 1: 100, 2: 100})
    assert g.net.dropped > 0
    assert sum(g.stats(i)["xmit_reqs_sent"] for i in range(3)) > 0
    assert sum(g.stats(i)["xmit_rsps_received"] for i in range(3)) > 0


def test_a_lost_tail_comes_from_a_third_members_gossip(group):
    """C never hears A directly (its multicasts, gossips and retransmissions): B's gossip tells C what A sent
    and B retransmits it (seed 000: any member that has a message can send it, not only its sender; and a lost
    last message is found without a later one to show the gap)."""
    g = group(3)
    A, B, C = g.addrs
    g.net.cut.add((A, C))
    g.send(0, 5)
    g.stacks[2].top.wait_messages(5, timeout=5)
    _fifo_complete(g, 2, {0: 5})
    c, b = g.stats(2), g.stats(1)
    assert c["xmit_rsps_received"] >= 5 and b["xmit_rsps_sent"] >= 5


def test_garbage_collection_waits_for_every_member_and_lags(group):
    """Messages are kept until every member has delivered them (their gossiped digests say so), then purged up
    to that point minus gc_lag; a member that lacks them holds collection up."""
    g = group(3, gc_lag=4)
    A, B, C = g.addrs
    g.net.blocked.add(C)                         # C hears nothing and says nothing for now
    g.send(0, 20)
    g.stacks[1].top.wait_messages(20, timeout=5)
    time.sleep(0.3)                              # many gossip rounds
    for i in (0, 1):
        assert g.stats(i)["windows"][str(A)][0] == 0, "collected what C has not delivered"
    g.net.blocked.clear()
    g.stacks[2].top.wait_messages(20, timeout=5)
    for i in range(3):
        wait_until(lambda i=i: g.stats(i)["windows"][str(A)][0] == 20 - 4, 5, msg=f"GC at {i}")
    assert all(g.stats(i)["msgs_collected"] >= 16 for i in range(3))
    assert g.stacks[0].prot.windows[A].size == 4     # the lag is still there, for late requests


def test_a_single_member_collects_its_own_messages(group):
    g = group(1, gc_lag=3)
    g.send(0, 10)
    g.stacks[0].top.wait_messages(10, timeout=5)
    wait_until(lambda: g.stats(0)["windows"][str(g.addrs[0])][0] == 7, 5)


def test_dynamic_gossip_interval():
    """Seed 000: Random(desired_avg_gossip * 2 * members): the mean is desired_avg_gossip * members, so with every
    member gossiping a member receives one every desired_avg_gossip ms on average."""
    rnd = random.Random(11)
    draws = [gossip_interval(10, 30, rnd) for _ in range(20000)]
    assert 0 <= min(draws) and max(draws) < 600
    assert 290 < sum(draws) / len(draws) < 310
    p = PBCAST()
    p.members = [UUID(0, i) for i in range(4)]
    p.desired_avg_gossip, p.min_gossip_interval = 50, 10
    ivs = [p.next_interval() for _ in range(2000)]
    assert min(ivs) >= 10 and max(ivs) < 400 and 150 < sum(ivs) / len(ivs) < 250
    p.members = [UUID(0, i) for i in range(40)]
    assert sum(p.next_interval() for _ in range(2000)) / 2000 > 1500       # it grows with the group
    p.dynamic, p.gossip_interval = False, 1234
    assert p.next_interval() == 1234


def test_pick_subset():
    mbrs = [UUID(0, i) for i in range(20)]
    assert len(pick_subset(mbrs, 0.1)) == 2 and len(pick_subset(mbrs[:3], 0.1)) == 1
    assert pick_subset([], 0.5) == [] and set(pick_subset(mbrs, 1.0)) == set(mbrs)


def test_unicast_gossips_are_forwarded_to_those_that_have_not_seen_them(group):
    """Without mcast_gossip a gossip goes to a subset with its not-seen list and is forwarded from there; loss
    is still repaired."""
    g = group(4, net=LossyNetwork(loss=0.1, seed=5), mcast_gossip=False, subset=0.34)
    g.send(0, 40)
    g.send(3, 40)
    for i in range(4):
        g.stacks[i].top.wait_messages(80, timeout=20)
    for i in range(4):
        _fifo_complete(g, i, {0: 40, 3: 40})
    assert sum(g.stats(i)["gossips_forwarded"] for i in range(4)) > 0
    sent = [s for s in g.stacks[0].tp.sent if s.msg.get_header(PBCAST_ID) is not None
            and s.msg.get_header(PBCAST_ID).type == H.GOSSIP]
    assert sent and all(not s.multicast for s in sent)


def test_a_joiner_starts_where_the_digest_says(group):
    """A alone sends 10; B joins with A's digest (GMS's JOIN_RSP) and delivers only what A sends after it."""
    g = group(1)
    A = g.addrs[0]
    g.send(0, 10)
    d = g.stacks[0].prot.down(Event(EventType.GET_DIGEST))
    assert d.get(A)[1] == 10
    B = UUID(0, 2)
    b = FakeStack(PBCAST(), local_addr=B, network=g.net)
    g.stacks.append(b)
    b.prot.dynamic, b.prot.gossip_interval = False, 20
    jd = d.copy()
    jd.set(B, 0, 0, 0)
    for st in (b, g.stacks[0]):
        st.prot.down(Event(EventType.SET_DIGEST, jd))
        st.install_view([A, B], 2)
    g.send(0, 5, 10)
    g.send(1, 3)
    b.top.wait_messages(8, timeout=5)
    g.stacks[0].top.wait_messages(13, timeout=5)
    got = g.delivered(1)
    assert [p for s, p in got if s == A] == [f"0:{k}" for k in range(10, 15)]
    assert [p for s, p in got if s == B] == [f"1:{k}" for k in range(3)] and len(got) == 8


def test_digest_events_for_gms_and_state_transfer(group):
    g = group(2)
    A, B = g.addrs
    a = g.stacks[0].prot
    g.send(0, 6)
    g.send(1, 2)
    g.stacks[0].top.wait_messages(8, timeout=5)
    d = a.down(Event(EventType.GET_DIGEST))
    assert d.get(A) == (0, 6, 6) and d.get(B)[1] == 2
    wait_until(lambda: a.down(Event(EventType.GET_DELIVERED_DIGEST)).get(A)[1] == 6, 5)
    # MERGE_DIGEST replaces a window behind the digest; SET_DIGEST does not
    a.down(Event(EventType.SET_DIGEST, Digest([(B, 0, 50, 50)])))
    assert a.windows[B].highest_delivered == 2
    a.down(Event(EventType.MERGE_DIGEST, Digest([(B, 0, 50, 50)])))
    assert a.windows[B].highest_delivered == 50
    a.down(Event(EventType.OVERWRITE_DIGEST, Digest([(A, 0, 4, 4), (B, 0, 60, 60)])))
    assert a.windows[A].highest_delivered == 4 and a.windows[B].highest_delivered == 60
    # a view without B drops its window
    g.stacks[0].install_view([A], 3)
    assert set(a.windows) == {A}


# ---- hostile input ----------------------------------------------------------------------------------------

def _from(src, hdr, dest=None, payload=b"p"):
    m = Message(dest, payload, src)
    m.put_header(PBCAST_ID, hdr)
    return m


def _quiet(g: Group) -> None:
    """No gossip of our own meanwhile: what is sent is the answer to what a test injects."""
    for st in g.stacks:
        st.prot._gossip_task.cancel()


def test_strangers_and_spoofed_senders_are_counted_and_dropped(group):
    g = group(2)
    _quiet(g)
    A, B = g.addrs
    b = g.stacks[1]
    x = UUID(99, 99)
    digest = Digest([(A, 0, 1 << 40, 1 << 40)])
    hostile = [_from(x, H(H.GOSSIP, gossip_id=1, origin=x, digest=digest, seen=(x,))),      # a stranger's
               _from(x, H(H.GOSSIP, gossip_id=2, origin=A, digest=digest, seen=(x,))),      # relayed by one
               _from(A, H(H.GOSSIP, gossip_id=3, origin=x, digest=digest, seen=(x,))),      # originated by one
               _from(x, H(H.XMIT_REQ, xmit_reqs=((A, 1, 1 << 40),)), dest=B)]
    n0 = len(b.tp.sent)
    b.tp.inject(hostile)
    wait_until(lambda: b.prot.dump_stats()["queued"] == 0, 5)
    st = b.prot.dump_stats()
    assert st["dropped_non_member"] == 4 and st["gossips_received"] == 0 and len(b.tp.sent) == n0
    b.tp.inject([_from(x, H(H.MCAST_MSG, 1)),                             # a stranger's multicast: no window
                 _from(x, H(H.XMIT_RSP, 1, sender=A), dest=B),           # a stranger's retransmission
                 _from(A, H(H.XMIT_RSP, 1, sender=A), dest=B),           # a member's, never asked for
                 _from(A, H(H.MCAST_MSG, 1 << 50)),                      # far beyond any window
                 _from(A, H(H.MCAST_MSG, 3), dest=B),                    # a "multicast" sent as a unicast
                 _from(A, H(77))])                                       # an unknown type
    st = b.prot.dump_stats()
    assert (st["dropped_no_window"], st["dropped_non_member"], st["dropped_unsolicited"], st["dropped_bad_seqno"],
            st["dropped_bad_type"]) == (1, 5, 1, 1, 2), st
    assert b.top.messages == [] and st["held"] == 0
    g.send(0, 3)                                 # the members still talk
    b.top.wait_messages(3, timeout=5)


def test_absurd_digests_and_lists_ask_and_forward_within_bounds(group):
    g = group(3, mcast_gossip=False, max_xmit_req_size=50)
    _quiet(g)
    A, B, C = g.addrs
    b = g.stacks[1]
    strangers = tuple(UUID(50, i) for i in range(1000))
    digest = Digest([(s, 0, 1 << 60, 1 << 60) for s in strangers[:200]] + [(A, 0, 1 << 61, 1 << 61)] * 3)
    b.tp.inject([_from(A, H(H.GOSSIP, gossip_id=9, origin=A, digest=digest, not_seen=strangers + (B, C),
                            seen=strangers), dest=B)])
    reqs = b.tp.wait_sent(lambda s: s.msg.get_header(PBCAST_ID).type == H.XMIT_REQ)
    fwd = b.tp.wait_sent(lambda s: s.msg.get_header(PBCAST_ID).type == H.GOSSIP)
    time.sleep(0.05)
    [req] = [s for s in b.tp.sent if s.msg.get_header(PBCAST_ID).type == H.XMIT_REQ]
    assert req.msg.dest == A and req.header(PBCAST_ID).xmit_reqs == ((A, 1, 50),)
    assert [s.msg.dest for s in fwd] == [C]                              # the only member not reached yet
    h = fwd[0].header(PBCAST_ID)
    assert h.not_seen == (C,) and set(h.seen) == {B}
    assert b.prot.asked == {A: 50}
    # the same gossip again: seen before, nothing sent
    n0 = len(b.tp.sent)
    b.tp.inject([_from(A, H(H.GOSSIP, gossip_id=9, origin=A, digest=digest, not_seen=(B, C)), dest=B)])
    wait_until(lambda: b.prot.dump_stats()["gossips_seen_before"] == 1, 5)
    assert len(b.tp.sent) == n0 and len(reqs) == 1


def test_an_absurd_retransmission_request_is_answered_within_bounds(group):
    g = group(2, max_xmit_req_size=7, max_xmit_rsp_bytes=0)
    _quiet(g)
    A, B = g.addrs
    a = g.stacks[0]
    g.send(0, 20)
    n0 = len(a.tp.sent)
    a.tp.inject([_from(B, H(H.XMIT_REQ, xmit_reqs=((A, -(1 << 62), 1 << 62),) * 50 + ((UUID(5, 5), 1, 9),)),
                       dest=A)])
    rsps = a.tp.wait_sent(lambda s: s.msg.get_header(PBCAST_ID).type == H.XMIT_RSP, count=7)
    time.sleep(0.05)
    assert len(a.tp.sent) - n0 == 7 and [s.header(PBCAST_ID).seqno for s in rsps] == list(range(1, 8))
    assert all(s.msg.dest == B and s.header(PBCAST_ID).sender == A for s in rsps)
    n0 = len(a.tp.sent)                                     # several ranges of one sender: all answered
    a.tp.inject([_from(B, H(H.XMIT_REQ, xmit_reqs=((A, 2, 3), (A, 9, 9), (A, 15, 16))), dest=A)])
    a.tp.wait_sent(lambda s: s.msg.get_header(PBCAST_ID).type == H.XMIT_RSP, count=12)
    time.sleep(0.05)
    assert [s.header(PBCAST_ID).seqno for s in a.tp.sent[n0:]] == [2, 3, 9, 15, 16]
    g.stacks[0].prot.max_xmit_rsp_bytes = 3                 # the byte bound: at least one, then stop
    a.tp.inject([_from(B, H(H.XMIT_REQ, xmit_reqs=((A, 1, 5),)), dest=A)])
    wait_until(lambda: a.prot.dump_stats()["xmit_rsps_truncated"] == 1, 5)
    assert a.prot.dump_stats()["xmit_rsps_sent"] == 7 + 5 + 1


def test_the_request_queue_and_the_gossip_cache_are_bounded(group):
    g = group(2, max_queue=10, max_gossip_cache=5)
    _quiet(g)
    A, B = g.addrs
    b = g.stacks[1]
    gossips = [_from(A, H(H.GOSSIP, gossip_id=i, origin=A, digest=Digest([(A, 0, 0, 0)]), seen=(B,)))
               for i in range(1, 101)]

    def held(batch: list) -> None:               # injected while the timer cannot work off the queue
        hold = threading.Event()
        b.timer.execute(lambda: hold.wait(5), "hold the timer")
        b.tp.inject(batch)
        hold.set()
    held(gossips)
    st = b.prot.dump_stats()
    assert st["queued"] <= 10 and st["dropped_queue_full"] == 90
    wait_until(lambda: b.prot.dump_stats()["queued"] == 0, 5)
    held(gossips[20:30])
    wait_until(lambda: b.prot.dump_stats()["queued"] == 0, 5)
    st = b.prot.dump_stats()
    assert st["gossip_cache"] == 5 and st["gossips_received"] == 20 and st["dropped_queue_full"] == 90
    b.tp.inject(gossips[28:30])                                     # among the last five: seen before
    wait_until(lambda: b.prot.dump_stats()["gossips_seen_before"] == 2, 5)


def test_a_failing_message_is_dropped_alone(group, monkeypatch):
    g = group(2)
    A, B = g.addrs
    b = g.stacks[1]
    real = b.prot._on_xmit_rsp

    def boom(msg, hdr):
        if hdr.seqno == 4242:
            raise RuntimeError("boom")
        return real(msg, hdr)
    monkeypatch.setattr(b.prot, "_on_xmit_rsp", boom)
    b.tp.inject([_from(A, H(H.XMIT_RSP, 4242, sender=A), dest=B), _from(A, H(H.XMIT_RSP, 1, sender=A), dest=B)])
    assert b.prot.dump_stats()["malformed"] == 1 and b.prot.dump_stats()["dropped_unsolicited"] == 1
    g.send(0, 2)
    b.top.wait_messages(2, timeout=5)


# ---- jgpy process clusters, journals and the checker ----------------------------------------------------

LOSS = 0.1


@pytest.fixture
def pbcast_members(udp_group, tmp_path):
    """``start(names, run)``: jgpy processes on pbcast-udp.xml + DISCARD, journaling into ``run``, joined one after
    the other, then losing ``LOSS`` of what they receive; every process is closed after the test."""
    yield from lossy_journaled_members("pbcast-udp.xml", tmp_path, udp_group, LOSS)


def _stats(node) -> dict:
    return node.call("dump_stats")["stats"]


def _check(leaving: list, run: Path, spark):
    from jgpy.analysis import check_run
    for x in leaving:
        x.call("disconnect", timeout=60)
    return check_run(run, spark=spark)


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_four_members_under_loss_pass_the_checker(spark, pbcast_members, tmp_path, figures):
    """Four jgpy processes on pbcast-udp.xml with 10 % receive loss multicast at once; gossip repairs the loss
    and their journals pass every check: no loss, no duplicates, FIFO per sender."""
    run = tmp_path / "run=pbcast-loss"
    n = 300
    nodes = pbcast_members(["P1", "P2", "P3", "P4"], run)
    t0 = time.monotonic()
    multicast_all(nodes, n)
    total = len(nodes) * n
    assert wait_all(lambda: all(x.call("stats")["received"] >= total for x in nodes), 120), \
        [x.call("stats")["received"] for x in nodes]
    figures("PBCAST, 4 jgpy members, 10 % receive loss: 4 x 300 multicasts delivered everywhere in",
            time.monotonic() - t0, "s")
    stats = [_stats(x) for x in nodes]
    assert all(s["DISCARD"]["num_up"] > 0 for s in stats)                       # the loss was real
    assert sum(s["pbcast.PBCAST"]["xmit_rsps_received"] for s in stats) > 0     # and gossip repaired it
    assert all(x.call("stats")["received"] == total for x in nodes)
    res = _check(list(reversed(nodes)), run, spark)
    assert res.findings == [], [str(f) for f in res.findings]
    assert res.stats["numbered_deliveries"] == len(nodes) * total


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_member_killed_mid_stream_passes_the_checker(spark, pbcast_members, tmp_path, figures):
    """The coordinator of three members is killed with SIGKILL while all multicast under 10 % loss; the survivors go on
    through the view change and deliver each other's multicasts completely, once, in order; the journals of all
    three (the killed one's as far as it got) pass the checker without errors."""
    run = tmp_path / "run=pbcast-crash"
    nodes = pbcast_members(["P1", "P2", "P3"], run)
    victim = nodes[0]                             # the coordinator: GMS moves on, PBCAST drops its window
    survivors = [x for x in nodes if x is not victim]
    sent, to_view = kill_mid_stream(nodes, victim, run)
    figures("PBCAST: kill -9 of the coordinator -> survivors' view", to_view, "s")
    need = sum(sent[x.name] for x in survivors)
    assert need >= 200 and sent[victim.name] >= 20, sent

    def caught_up() -> bool:                      # every survivor delivered every survivor's last multicast
        pb = [_stats(x)["pbcast.PBCAST"] for x in survivors]
        return all(p["windows"].get(q["local_addr"], (0, -1))[1] == q["seqno"] for p in pb for q in pb)
    assert wait_all(caught_up, 120), [_stats(x)["pbcast.PBCAST"] for x in survivors]
    figures("PBCAST crash run: multicasts sent by the survivors", need, "msgs")
    assert all(_stats(x)["DISCARD"]["num_up"] > 0 for x in survivors)
    res = _check(list(reversed(survivors)), run, spark)
    errors_found = [str(f) for f in res.findings if f.severity == "error"]
    assert not errors_found, errors_found
    assert res.stats["abrupt_ends"] == [victim.name]
    assert res.stats["required_deliveries"] > 0
