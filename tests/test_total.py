"""TOTAL, jgpy's sequencer-based total order (seed 003): the header on the wire, members on the fake stack (order,
the sequencer's crash with a member behind, joins, hostile input), and jgpy process clusters with journals and the
checker under 10 % loss and a kill -9 of the sequencer mid-stream."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from jgpy import DIALECT, UUID, Message, View, ViewId
from jgpy._core import jg212, spec212
from jgpy._core.headers import TotalHeader
from jgpy.protocols.total import MAX_EARLY_REPORTS, TOTAL
from jgpy.stack.config import load_config
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import kill_mid_stream, lossy_journaled_members, multicast_all, wait_all
from tests.fakestack import FakeNetwork, FakeStack, closing_factory, wait_until

H = TotalHeader
TOTAL_ID = 513


# ---- the header on the wire ------------------------------------------------------------------------------

def test_ids_are_outside_the_ranges_of_2_12():
    assert jg212.protocol_id("TOTAL") == TOTAL_ID > spec212.MAX_JGROUPS_PROTOCOL_ID
    assert DIALECT.magic_of(H(H.BCAST)) == 1025 > spec212.MAX_JGROUPS_MAGIC
    assert DIALECT.allowed_magics(TOTAL_ID) == (1025,)
    assert not DIALECT.header_fits(15, 1025) and not DIALECT.header_fits(TOTAL_ID, 25)
    jgpy_own = ("TOTAL", "JMS", "pbcast.PBCAST")
    assert all(i <= spec212.MAX_JGROUPS_PROTOCOL_ID for n, i in spec212.PROTOCOL_IDS.items() if n not in jgpy_own)


def test_header_bytes_per_type():
    """The layout documented in docs/ARCHITECTURE.md: fields only for the types that carry them."""
    a = UUID(1, 2)
    m = Message(None, b"x", a)
    m.put_header(TOTAL_ID, H(H.REQUEST, 7, req_id=9))
    data = DIALECT.encode(m)
    body = bytes([2]) + (7).to_bytes(8, "big") + (9).to_bytes(8, "big")
    assert body in data and (1025).to_bytes(2, "big") + body in data
    back = DIALECT.decode(Message, data).get_header(TOTAL_ID)
    assert (back.type, back.view_id, back.seqno, back.req_id, back.sender) == (H.REQUEST, 7, 0, 9, None)
    starts = ((a, 11), (UUID(3, 4), 12))
    for hdr in (H(H.BCAST, 3, 100, req_id=5, sender=a), H(H.RESEND, 3, 10, high=20),
                H(H.NEW_VIEW, 4, 99, epoch=ViewId(a, 3), starts=starts),
                H(H.NEW_VIEW_ACK, 4, 98, high=50, epoch=ViewId(a, 3), prev_epoch=ViewId(a, 1)),
                H(H.CUM_SEQ_ACK, 3, 77), H(H.STABLE, 3, 70)):
        m = Message(None, None, a)
        m.put_header(TOTAL_ID, hdr)
        got = DIALECT.decode(Message, DIALECT.encode(m)).get_header(TOTAL_ID)
        assert [getattr(got, f) for f in hdr.FIELDS] == [getattr(hdr, f) for f in hdr.FIELDS], hdr
    m = Message(None, None, a)
    m.put_header(TOTAL_ID, H(H.BCAST, 3, 100, req_id=5, sender=a))
    assert DIALECT.message_size(m) > 0
    # under another protocol's id the header makes its message malformed (dropped alone)
    bad = Message(None, None, a)
    bad.put_header(15, H(H.BCAST, 3, 1, req_id=1, sender=a))
    dg = DIALECT.decode_datagram(DIALECT.encode_message(bad, True))
    assert len(dg.rejected) == 1 and not dg.messages


def test_total_udp_config_puts_total_above_gms():
    from jgpy.stack.protocol import Protocol
    from jgpy.stack.stack import ProtocolStack
    cfg = load_config("total-udp.xml")
    names = cfg.names()
    assert names.index("TOTAL") == names.index("pbcast.GMS") + 1
    stack = ProtocolStack(cfg, Protocol())
    total = stack.find("TOTAL")
    assert isinstance(total, TOTAL) and total.id == TOTAL_ID
    assert load_config("udp.xml").names() == [n for n in names if n != "TOTAL"]    # otherwise the jar's udp.xml


# ---- members on the fake stack ----------------------------------------------------------------------------

class Cluster:
    def __init__(self, n: int, network: FakeNetwork | None = None, **props) -> None:
        self.net = network or FakeNetwork()
        self.addrs = [UUID(0, i + 1) for i in range(n)]
        self.stacks: list[FakeStack] = []
        for a in self.addrs:
            p = TOTAL()
            for k, v in props.items():
                setattr(p, k, v)
            self.stacks.append(FakeStack(p, local_addr=a, network=self.net))
        self.vid = 0

    def view(self, members: list, stacks: list | None = None, vid: int | None = None) -> None:
        """Install a view (coordinator first) at the given stacks (default: every member's)."""
        self.vid = vid if vid is not None else self.vid + 1
        v = View(ViewId(members[0], self.vid), members)
        for st in stacks if stacks is not None else [s for s in self.stacks if s.local_addr in members]:
            st.prot.up(Event(EventType.VIEW_CHANGE, v))

    def subgroups(self, *groups: list) -> None:
        """Each group a view of its own (id 1, its first member coordinator), as after a partition."""
        for g in groups:
            self.view(g, vid=1)
        _ready(self, range(len(self.stacks)))

    def merge(self, *groups: list) -> None:
        """The MergeView of the groups (id 2, the first group's coordinator first) everywhere."""
        from jgpy import MergeView
        members = [a for g in groups for a in g]
        mv = MergeView(ViewId(members[0], 2), members, [View(ViewId(g[0], 1), g) for g in groups])
        for st in self.stacks:
            st.prot.up(Event(EventType.VIEW_CHANGE, mv))
        _ready(self, range(len(self.stacks)))

    def send(self, i: int, count: int, start: int = 0) -> None:
        st = self.stacks[i]
        for k in range(start, start + count):
            st.prot.down_msg(Message(None, f"{i}:{k}".encode()))

    def delivered(self, i: int) -> list[tuple]:
        return [(m.src, bytes(m.payload).decode()) for m in self.stacks[i].top.messages]

    def close(self) -> None:
        for st in self.stacks:
            st.close()


@pytest.fixture
def cluster():
    yield from closing_factory(Cluster)


def _ready(c: Cluster, idx) -> None:
    wait_until(lambda: all(not c.stacks[i].prot.frozen for i in idx), 5, msg="NEW_VIEW everywhere")


def test_three_members_deliver_one_order(cluster):
    c = cluster(3)
    c.view(c.addrs)
    _ready(c, range(3))
    threads = [threading.Thread(target=c.send, args=(i, 60)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    for i in range(3):
        c.stacks[i].top.wait_messages(180, timeout=10)
    orders = [c.delivered(i) for i in range(3)]
    assert orders[0] == orders[1] == orders[2]
    assert len(set(orders[0])) == 180
    for i in range(3):                       # delivered as a multicast of its original sender, FIFO per sender
        mine = [p for s, p in orders[0] if s == c.addrs[i]]
        assert mine == [f"{i}:{k}" for k in range(60)]
    seq = c.stacks[0].prot.dump_stats()
    assert seq["bcasts_sent"] == 180 and seq["requests_received"] == 120
    assert all(m.dest is None for m in c.stacks[1].top.messages)


def test_sequencer_crash_with_a_member_behind(cluster):
    """The sequencer A dies while C misses its last multicasts that B got: B, the new sequencer, has them
    (and A delivered nothing that B did not acknowledge); C delivers them from B in A's order, then B and C
    deliver the new epoch in one order, everything of B and C exactly once."""
    c = cluster(3)
    A, B, C = c.addrs
    c.view(c.addrs)
    _ready(c, range(3))
    c.send(1, 20)
    c.send(2, 20)
    for i in range(3):
        c.stacks[i].top.wait_messages(40, timeout=10)
    c.net.cut.add((A, C))                    # C stops getting A's multicasts
    c.send(0, 10)
    c.send(1, 10, 20)
    wait_until(lambda: len(c.stacks[1].top.messages) >= 60, 5, msg="B has them all")
    wait_until(lambda: len(c.stacks[0].top.messages) >= 60, 5, msg="A delivered, once B acknowledged")
    assert len(c.stacks[2].top.messages) == 40
    a_order = c.delivered(0)
    c.net.blocked.add(A)                     # A crashes
    c.stacks[0].close()
    c.view([B, C])
    _ready(c, (1, 2))
    c.send(1, 15, 30)
    c.send(2, 15, 20)
    for i in (1, 2):
        c.stacks[i].top.wait_messages(90, timeout=10)
    b, cc = c.delivered(1), c.delivered(2)
    assert b == cc and len(set(b)) == len(b) == 90
    assert b[:len(a_order)] == a_order
    assert c.stacks[2].prot.dump_stats()["xmits_received"] >= 20
    assert [p for s, p in b if s == B] == [f"1:{k}" for k in range(45)]
    assert [p for s, p in b if s == C] == [f"2:{k}" for k in range(35)]


def test_a_lost_tail_is_asked_for(cluster):
    """C misses the sequencer's last multicasts and nothing follows them: the sequencer's STABLE says what it
    assigned, and C asks for the rest (the paper's suffix problem)."""
    c = cluster(3, stable_interval=50)
    A, B, C = c.addrs
    c.view(c.addrs)
    _ready(c, range(3))
    c.net.cut.add((A, C))
    c.send(1, 5)
    c.stacks[1].top.wait_messages(5, timeout=5)
    c.net.cut.discard((A, C))
    c.stacks[2].top.wait_messages(5, timeout=5)
    assert c.delivered(2) == c.delivered(1)
    st = c.stacks[2].prot.dump_stats()
    assert st["resends_sent"] >= 1 and st["xmits_received"] >= 5


def test_requests_lost_with_the_sequencer_are_sent_again(cluster):
    """C's requests reach A, which dies before its multicasts reach anybody: C sends them to B, the new
    sequencer, and everybody surviving delivers them once."""
    c = cluster(3)
    A, B, C = c.addrs
    c.view(c.addrs)
    _ready(c, range(3))
    c.net.cut.update({(A, B), (A, C)})
    c.send(2, 5)
    wait_until(lambda: c.stacks[0].prot.dump_stats()["bcasts_sent"] == 5, 5)
    assert c.stacks[0].top.messages == []    # nobody acknowledged: A delivered nothing
    c.net.blocked.add(A)
    c.stacks[0].close()
    c.view([B, C])
    for i in (1, 2):
        c.stacks[i].top.wait_messages(5, timeout=10)
    assert c.delivered(1) == c.delivered(2) == [(C, f"2:{k}") for k in range(5)]
    time.sleep(0.3)
    assert len(c.stacks[1].top.messages) == 5


def test_joiner_starts_after_the_old_sequence(cluster):
    c = cluster(3)
    A, B, C = c.addrs
    c.view([A, B])
    _ready(c, (0, 1))
    c.send(0, 10)
    c.send(1, 10)
    c.stacks[1].top.wait_messages(20, timeout=10)
    c.view([A, B, C])
    _ready(c, range(3))
    c.send(2, 10)
    c.send(0, 5, 10)
    for i, n in ((0, 35), (1, 35), (2, 15)):
        c.stacks[i].top.wait_messages(n, timeout=10)
    assert c.delivered(2) == c.delivered(0)[20:] == c.delivered(1)[20:]
    assert c.stacks[2].prot.dump_stats()["restarted_fresh"] == 1


def test_rapid_views_do_not_lose_the_epoch_in_between(cluster):
    """B joins and C joins before B saw the NEW_VIEW of its first view: B still delivers what was sequenced
    in that view (it was a member), from where it started."""
    c = cluster(3)
    A, B, C = c.addrs
    c.view([A])
    _ready(c, (0,))
    c.send(0, 3)
    c.stacks[0].top.wait_messages(3, timeout=5)
    c.net.cut.add((A, B))                    # B reports, but misses A's multicasts for now
    c.view([A, B])
    wait_until(lambda: not c.stacks[0].prot.frozen, 5)
    c.send(0, 4, 3)                          # sequenced in [A, B]
    c.view([A, B, C])
    c.net.cut.discard((A, B))
    _ready(c, range(3))
    c.send(0, 2, 7)
    for i, n in ((0, 9), (1, 6), (2, 2)):
        c.stacks[i].top.wait_messages(n, timeout=10)
    assert c.delivered(1) == c.delivered(0)[3:]
    assert c.delivered(2) == c.delivered(0)[7:]


def test_merge_starts_the_other_subgroup_afresh(cluster):
    """Two subgroups with sequences of their own merge: the merged view's coordinator's sequence goes on, the
    other subgroup's members start afresh after it, and everybody delivers the merged view's traffic in one
    order (what each subgroup delivered before stays there, as the paper's virtual synchrony has it)."""
    c = cluster(4)
    A, B, C, D = c.addrs
    c.subgroups([A, B], [C, D])
    c.send(0, 5)
    c.send(2, 7)
    for i, n in ((0, 5), (1, 5), (2, 7), (3, 7)):
        c.stacks[i].top.wait_messages(n, timeout=5)
    fresh = [c.stacks[i].prot.dump_stats()["restarted_fresh"] for i in range(4)]
    c.merge([A, B], [C, D])
    for i in range(4):
        c.send(i, 3, 10)
    before = (5, 5, 7, 7)                                  # what each delivered in its own subgroup
    for i in range(4):
        c.stacks[i].top.wait_messages(before[i] + 12, timeout=10)
    orders = [c.delivered(i)[before[i]:] for i in range(4)]
    assert orders[0] == orders[1] == orders[2] == orders[3] and len(orders[0]) == 12
    after = [c.stacks[i].prot.dump_stats()["restarted_fresh"] for i in range(4)]
    assert [a - b for a, b in zip(after, fresh)] == [0, 0, 1, 1]


def test_a_sequence_left_at_a_merge_delivers_nothing_twice(cluster):
    """C, sequencer of [C, D], has sequenced its own messages and D delivered them, but C has not yet (D's
    acknowledgements are lost): at the merge C starts afresh and sends them to the merged view's sequencer again;
    D, which delivered them, does not deliver them again."""
    c = cluster(4)
    A, B, C, D = c.addrs
    c.subgroups([A, B], [C, D])
    c.net.cut.add((D, C))                                  # D's ACKs do not reach C
    c.send(2, 3)
    c.stacks[3].top.wait_messages(3, timeout=5)
    assert c.stacks[2].top.messages == []
    c.net.cut.clear()
    c.merge([A, B], [C, D])
    for i in range(4):
        c.stacks[i].top.wait_messages(3, timeout=10)
    time.sleep(0.3)
    want = [(C, f"2:{k}") for k in range(3)]
    assert c.delivered(0) == c.delivered(1) == c.delivered(2) == c.delivered(3) == want
    assert c.stacks[3].prot.dump_stats()["duplicates_skipped"] == 3


def test_a_leaving_member_waits_for_its_multicasts(cluster):
    c = cluster(2, leave_timeout=300)
    A, B = c.addrs
    c.view([A, B])
    _ready(c, (0, 1))
    b = c.stacks[1]
    c.net.cut.add((B, A))                                  # B's requests do not get through for now
    c.send(1, 2)
    t0 = time.monotonic()
    b.prot.down(Event(EventType.DISCONNECT, B))             # gives up after leave_timeout, with a warning
    assert 0.25 < time.monotonic() - t0 < 3 and b.prot.dump_stats()["pending"] == 2
    c.net.cut.clear()
    c.view([A, B])                                         # (the fake network lost them: a view sends them again)
    _ready(c, (0, 1))
    c.send(1, 1, 2)
    b.prot.down(Event(EventType.DISCONNECT, B))             # its requests get through: it leaves once delivered
    assert b.prot.dump_stats()["pending"] == 0
    assert [p for _, p in c.delivered(1)] == ["1:0", "1:1", "1:2"]


# ---- hostile input ----------------------------------------------------------------------------------------

def _from(src, hdr, dest=None, payload=b"p"):
    m = Message(dest, payload, src)
    m.put_header(TOTAL_ID, hdr)
    return m


def test_strangers_and_absurd_numbers_are_counted_and_dropped(cluster):
    c = cluster(2)
    A, B = c.addrs
    c.view([A, B])
    _ready(c, (0, 1))
    b = c.stacks[1]
    stranger = UUID(99, 99)
    hostile = [_from(stranger, H(H.BCAST, 1, 1 << 60, req_id=1, sender=stranger)),
               _from(stranger, H(H.BCAST, 1, 1, req_id=1, sender=stranger)),
               _from(stranger, H(H.REQUEST, 1, req_id=5), dest=B),
               _from(stranger, H(H.RESEND, 1, 1, high=1 << 62), dest=B),
               _from(stranger, H(H.STABLE, 1, 1 << 61)),
               _from(stranger, H(H.NEW_VIEW, 1, 1 << 61, starts=((B, 5),))),
               _from(stranger, H(H.CUM_SEQ_ACK, 1, 1 << 61), dest=B)]
    b.tp.inject(hostile)
    st = b.prot.dump_stats()
    assert st["dropped_non_member"] == len(hostile) and st["held"] == 0 and st["next_deliver"] == 1
    # the sequencer itself, but absurdly far ahead: dropped, nothing kept
    b.tp.inject([_from(A, H(H.BCAST, c.vid, 1 << 40, req_id=1, sender=A)),
                 _from(A, H(H.BCAST, c.vid, 5, req_id=1, sender=A), dest=B),       # a retransmission never asked
                 _from(A, H(H.BCAST, c.vid + 7, 1, req_id=1, sender=A)),           # another epoch
                 _from(A, H(99, c.vid))])                                          # an unknown type
    st = b.prot.dump_stats()
    assert st["dropped_window"] == 1 and st["dropped_stale"] >= 2 and st["dropped_bad_type"] == 1
    assert st["held"] == 0 and b.top.messages == []
    # reports for views not installed yet: a bounded table, whatever a flood claims
    a = c.stacks[0]
    a.tp.inject([_from(UUID(7, i), H(H.NEW_VIEW_ACK, 1000 + i, 1 << 50), dest=A) for i in range(500)])
    assert a.prot.dump_stats()["early_reports"] == MAX_EARLY_REPORTS
    # a member's RESEND of an absurd range gets at most max_resend_size answers
    c.send(0, 5)
    b.top.wait_messages(5, timeout=5)
    n0 = len(a.tp.sent)
    a.tp.inject([_from(B, H(H.RESEND, 99, -(1 << 62), high=1 << 62), dest=A)])
    assert 0 < len(a.tp.sent) - n0 <= a.prot.max_resend_size
    c.send(1, 3)
    b.top.wait_messages(8, timeout=5)
    assert [p for _, p in c.delivered(1)] == [f"0:{k}" for k in range(5)] + [f"1:{k}" for k in range(3)]


def test_a_total_message_that_skipped_the_reliable_layers_is_dropped(cluster):
    """With pbcast.NAKACK and UNICAST below (as in total-udp.xml), every real TOTAL multicast carries NAKACK's
    header and every unicast UNICAST's; one without (Java's protocols pass such a message up untouched) could
    claim any sender and number: a spoofed sequencer's BCAST at the next number, a member's REQUEST numbered
    2^62 after which its real ones would look like duplicates. Counted and dropped, nothing kept."""
    from jgpy._core.headers import NakAckHeader, UnicastHeader
    c = cluster(2)
    A, B = c.addrs
    c.view([A, B])
    _ready(c, (0, 1))
    nakack_id, unicast_id = 15, 12
    for st in c.stacks:                      # what start() finds in a stack with NAKACK and UNICAST below
        st.prot._reliable_ids = (nakack_id, unicast_id)
    a, b = c.stacks
    b.tp.inject([_from(A, H(H.BCAST, c.vid, 1, req_id=1, sender=A)),                  # the next number
                 _from(A, H(H.STABLE, c.vid, 1 << 61, high=1 << 61)),
                 _from(A, H(H.RESEND, c.vid, 1, high=1 << 61), dest=B)])
    a.tp.inject([_from(B, H(H.REQUEST, c.vid, req_id=1 << 62), dest=A)])
    for st, n in ((b, 3), (a, 1)):
        d = st.prot.dump_stats()
        assert d["dropped_unreliable"] == n and d["held"] == 0 and d["requests_received"] == 0, d
    assert b.top.messages == [] and b.prot.tail == 0 and a.prot.last_req.get(B, 0) == 0
    # the same with the reliable layer's header: handled (B's REQUEST is sequenced, the BCAST comes back)
    req = _from(B, H(H.REQUEST, c.vid, req_id=1), dest=A, payload=b"1:0")
    req.put_header(unicast_id, UnicastHeader(UnicastHeader.DATA, 1, 1, True))
    a.tp.inject([req])
    assert a.prot.dump_stats()["requests_received"] == 1 and a.prot.last_req[B] == 1
    bc = _from(A, H(H.BCAST, c.vid, a.prot.next_seqno - 1, req_id=1, sender=B))
    bc.put_header(nakack_id, NakAckHeader(NakAckHeader.MSG, 1))
    b.tp.inject([bc])
    assert b.prot.dump_stats()["dropped_unreliable"] == 3
    wait_until(lambda: b.top.messages, msg="the BCAST with NAKACK's header delivered")


def test_a_failing_message_is_dropped_alone(cluster, monkeypatch):
    c = cluster(2)
    A, B = c.addrs
    c.view([A, B])
    _ready(c, (0, 1))
    b = c.stacks[1]
    real = b.prot._on_stable

    def boom(src, hdr):
        if hdr.seqno == 4242:
            raise RuntimeError("boom")
        return real(src, hdr)
    monkeypatch.setattr(b.prot, "_on_stable", boom)
    b.tp.inject([_from(A, H(H.STABLE, c.vid, 4242)), _from(A, H(H.STABLE, c.vid, 0))])
    assert b.prot.dump_stats()["malformed"] == 1
    c.send(0, 2)
    b.top.wait_messages(2, timeout=5)


# ---- jgpy process clusters, journals and the checker ----------------------------------------------------

LOSS = 0.1


@pytest.fixture
def total_members(udp_group, tmp_path):
    """``start(names, run)``: jgpy processes on total-udp.xml + DISCARD, journaling into ``run``, joined one after
    the other, then losing ``LOSS`` of what they receive; every process is closed after the test."""
    yield from lossy_journaled_members("total-udp.xml", tmp_path, udp_group, LOSS)


def _leave_and_check(leaving: list, run: Path, spark):
    """The members leave one after the other; the checker runs on the journals, with total order checked."""
    from jgpy.analysis import check_run
    for x in leaving:
        x.call("disconnect", timeout=60)
    res = check_run(run, spark=spark)
    assert res.stats.get("total_order_checked"), res.stats
    return res


def _received(node) -> int:
    return node.call("stats")["received"]


def _dropped(node) -> int:
    return node.call("dump_stats")["stats"]["DISCARD"]["num_up"]


def _total_stats(node) -> dict:
    return node.call("dump_stats")["stats"]["TOTAL"]


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_three_jgpy_members_under_loss_pass_the_checker(spark, total_members, tmp_path, figures):
    """Three jgpy processes on total-udp.xml with 10 % receive loss multicast at once; their journals pass every
    check of the checker, total order (TOTAL is in the stack) included: no loss, no duplicates, one order."""
    run = tmp_path / "run=total-loss"
    n = 400
    nodes = total_members(["T1", "T2", "T3"], run)
    t0 = time.monotonic()
    multicast_all(nodes, n)
    assert wait_all(lambda: all(_received(x) >= 3 * n for x in nodes), 120), [_received(x) for x in nodes]
    figures("TOTAL, 3 jgpy members, 10 % receive loss: 3 x 400 multicasts delivered everywhere in",
            time.monotonic() - t0, "s")
    stats = {x.name: _total_stats(x) for x in nodes}
    assert [s["bcasts_sent"] for s in stats.values()].count(3 * n) == 1, stats      # one sequencer did it all
    assert all(s["delivered"] == 3 * n for s in stats.values()), stats
    assert all(_received(x) == 3 * n for x in nodes)
    assert all(_dropped(x) > 0 for x in nodes)           # the loss was real
    res = _leave_and_check(list(reversed(nodes)), run, spark)
    assert res.findings == [], [str(f) for f in res.findings]
    assert res.stats["numbered_deliveries"] == 9 * n


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sequencer_killed_mid_stream_passes_the_checker(spark, total_members, tmp_path, figures):
    """The sequencer (the coordinator) is killed with SIGKILL while all three multicast under 10 % loss, and the
    survivors go on multicasting through the view change; the survivors deliver everything they sent, once, in
    one order, and the journals of all three (the killed one's as far as it got) pass the checker: total order
    across all three, no loss and no duplicates among the survivors."""
    run = tmp_path / "run=total-crash"
    nodes = total_members(["T1", "T2", "T3"], run)
    seq = next(x for x in nodes if x.name == nodes[0].call("view")["names"][0])
    survivors = [x for x in nodes if x is not seq]
    sent, to_view = kill_mid_stream(nodes, seq, run)
    figures("TOTAL: kill -9 of the sequencer -> survivors' view", to_view, "s")
    t_sent = time.monotonic()
    need = sum(sent[x.name] for x in survivors)
    assert need >= 200 and sent[seq.name] >= 20, sent

    def done() -> bool:
        a, b = (_total_stats(x) for x in survivors)
        return a["pending"] == b["pending"] == 0 and a["delivered"] == b["delivered"] >= need
    ok = wait_all(done, 120)
    stats = [_total_stats(x) for x in survivors]
    assert ok, stats
    figures("TOTAL crash run: survivors' last sends -> everything delivered", time.monotonic() - t_sent, "s")
    figures("TOTAL crash run: multicasts sent by the survivors", need, "msgs")
    figures("TOTAL crash run: multicasts sent by the killed sequencer", sent[seq.name], "msgs")
    assert len({_received(x) for x in survivors}) == 1
    assert all(_dropped(x) > 0 for x in survivors)      # the loss was real
    assert sum(s["new_views_sent"] for s in stats) >= 1 and sum(s["bcasts_sent"] for s in stats) > 0, stats
    res = _leave_and_check(list(reversed(survivors)), run, spark)
    errors_found = [str(f) for f in res.findings if f.severity == "error"]
    assert not errors_found, errors_found
    assert res.stats["abrupt_ends"] == [seq.name]
    assert res.stats["required_deliveries"] > 0
