"""UNICAST2 (2.12's NAK-based unicast): the protocol on a fake transport (loss of a message, of the first, of
the last, retransmission, stability, a sender that restarts, duplicates, hostile input), its header against
the jar, and the jar's udp-largecluster.xml with Java members, with and without loss."""

from __future__ import annotations

import gc
import random
import struct
import threading
import time
import tracemalloc

import pytest

from jgpy import DIALECT, UUID, Message
from jgpy._core.headers import Unicast2Header
from jgpy.protocols.unicast2 import FIRST_ASK_TRIES, UNICAST2
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import stock
from jgpy.testing.javajson import to_json
from tests.fakestack import FakeNetwork, FakeStack, LossyNetwork, wait_until
from tests.test_stack_interop import cluster_factory, exchange  # noqa: F401 - a fixture

DATA, XMIT_REQ, SEND_FIRST, STABLE = (Unicast2Header.DATA, Unicast2Header.XMIT_REQ,
                                      Unicast2Header.SEND_FIRST_SEQNO, Unicast2Header.STABLE)


def unicast2(**props) -> UNICAST2:
    u = UNICAST2()
    for k, v in props.items():
        setattr(u, k, v)
    return u


@pytest.fixture
def stack():
    s = FakeStack(unicast2(timeout=[50, 100], stable_interval=0), connect=True)
    yield s
    s.close()


def data(s: FakeStack, src, seqno: int, conn_id: int = 7, first: bool = False, payload: bytes | None = None,
         flags: int = 0) -> Message:
    m = Message(s.local_addr, f"{seqno}".encode() if payload is None else payload, src, flags)
    m.put_header(s.prot.id, Unicast2Header(DATA, seqno, 0, conn_id, first))
    return m


def control(s: FakeStack, src, typ: int, seqno: int, high: int = 0) -> Message:
    m = Message(s.local_addr, None, src)
    m.put_header(s.prot.id, Unicast2Header(typ, seqno, high))
    return m


def sent_to(s: FakeStack, dest, typ: int) -> list:
    """The Unicast2Headers of type typ sent to dest, with the payloads of their messages."""
    out = []
    for x in s.tp.sent_where(lambda x: x.msg.dest == dest):
        h = x.msg.get_header(s.prot.id)
        if h is not None and h.type == typ:
            out.append((h, x.msg.buffer))
    return out


def payloads(msgs, src=None) -> list[bytes]:
    return [bytes(m.payload) for m in msgs if src is None or m.src == src]


def test_in_order_messages_are_delivered_and_nothing_is_acked(stack):
    """NAK-based: a receiver that misses nothing sends nothing back (no STABLE before stable_interval)."""
    p, q = UUID.random(), UUID.random()
    stack.tp.inject([data(stack, p, i, first=i == 1) for i in range(1, 11)]
                    + [data(stack, q, i, conn_id=3, first=i == 1) for i in range(1, 4)])
    got = stack.top.wait_messages(13)
    assert payloads(got, p) == [f"{i}".encode() for i in range(1, 11)] and payloads(got, q) == [b"1", b"2", b"3"]
    time.sleep(0.2)
    assert stack.tp.sent == []
    assert stack.prot.dump_stats()["in_recv_windows"] == 0          # delivered messages leave the window


def test_a_lost_message_is_asked_for_with_xmit_req_until_it_comes(stack):
    p = UUID.random()
    stack.tp.inject([data(stack, p, 1, first=True), data(stack, p, 2), data(stack, p, 5), data(stack, p, 7)])
    assert payloads(stack.top.wait_messages(2)) == [b"1", b"2"]
    reqs = stack.tp.wait_sent(lambda x: x.msg.dest == p, count=2, timeout=5)
    ranges = {(x.msg.get_header(stack.prot.id).seqno, x.msg.get_header(stack.prot.id).high_seqno) for x in reqs}
    assert ranges == {(3, 4), (6, 6)}
    assert all(x.msg.get_header(stack.prot.id).type == XMIT_REQ for x in reqs)
    stack.tp.inject([data(stack, p, 4), data(stack, p, 6), data(stack, p, 3)])
    assert payloads(stack.top.wait_messages(7)) == [f"{i}".encode() for i in (1, 2, 3, 4, 5, 6, 7)]
    stack.tp.clear()
    time.sleep(0.3)                                  # nothing is missing any more: no more requests
    assert sent_to(stack, p, XMIT_REQ) == [] and stack.prot.dump_stats()["missing"] == 0


def test_the_lost_first_message_is_asked_for_once_per_batch(stack):
    """Messages on a connection we do not know are dropped and counted; the sender is asked (OOB) to resend
    its first message and what follows up to the highest seqno we saw (SEND_FIRST_SEQNO carries it)."""
    p = UUID.random()
    stack.tp.inject([data(stack, p, i) for i in range(2, 6)])
    reqs = stack.tp.sent_where(lambda x: x.msg.dest == p)
    assert len(reqs) == 1 and reqs[0].msg.flags & Message.OOB
    h = reqs[0].msg.get_header(stack.prot.id)
    assert (h.type, h.seqno) == (SEND_FIRST, 5)
    assert stack.prot.dump_stats()["dropped_unknown_conn"] == 4 and stack.top.messages == []
    stack.tp.inject([data(stack, p, 1, first=True)] + [data(stack, p, i) for i in range(2, 6)])
    assert payloads(stack.top.wait_messages(5)) == [f"{i}".encode() for i in range(1, 6)]


def test_an_unanswered_send_first_seqno_is_sent_again_until_the_connection_opens(stack):
    """The request (or its answer's first message) lost and nothing more arriving from the sender: asked again
    after the timeouts (50, 100 ms), not again once the first message opened the connection."""
    p = UUID.random()
    stack.tp.inject([data(stack, p, i) for i in range(2, 6)])
    asks = stack.tp.wait_sent(lambda x: x.msg.dest == p, count=3, timeout=5)
    assert [(x.msg.get_header(stack.prot.id).type, x.msg.get_header(stack.prot.id).seqno) for x in asks[:3]] \
        == [(SEND_FIRST, 5)] * 3
    stack.tp.inject([data(stack, p, 1, first=True)] + [data(stack, p, i) for i in range(2, 6)])
    assert payloads(stack.top.wait_messages(5)) == [f"{i}".encode() for i in range(1, 6)]
    time.sleep(0.15)
    stack.tp.clear()
    time.sleep(0.3)
    assert sent_to(stack, p, SEND_FIRST) == [] and stack.prot.dump_stats()["first_seqno_requests_abandoned"] == 0


def test_a_silent_stranger_is_asked_for_its_first_message_a_bounded_number_of_times(stack):
    p = UUID.random()
    stack.tp.inject([data(stack, p, 3)])
    wait_until(lambda: stack.prot.dump_stats()["first_seqno_requests_abandoned"] == 1, 10, msg="given up")
    assert len(sent_to(stack, p, SEND_FIRST)) == 1 + FIRST_ASK_TRIES
    assert stack.prot._first_asked == {}


def test_send_first_seqno_resends_the_lowest_kept_message_as_first_and_what_follows(stack):
    p = UUID.random()
    for i in range(1, 8):
        stack.send(Message(p, f"{i}".encode()))
    stack.tp.inject([control(stack, p, STABLE, 2, 7)])       # p delivered 1, 2: they go
    stack.tp.clear()
    stack.tp.inject([control(stack, p, SEND_FIRST, 5)])
    got = [(h.seqno, h.first, bytes(b)) for h, b in sent_to(stack, p, DATA)]
    assert got == [(3, True, b"3"), (4, False, b"4"), (5, False, b"5")]
    kept = stack.prot.send_table[p].win.get(3)
    assert not kept.get_header(stack.prot.id).first            # the copy was marked, not the kept message
    stack.tp.clear()
    stack.tp.inject([control(stack, p, SEND_FIRST, 1 << 62)])  # an absurd seqno: what we hold, no more
    assert [h.seqno for h, _ in sent_to(stack, p, DATA)] == [3, 4, 5, 6, 7]
    stack.tp.inject([control(stack, UUID.random(), SEND_FIRST, 3)])
    assert stack.prot.counters["first_seqno_requests_unknown"] == 1


def test_xmit_req_is_answered_from_the_send_window_and_bounded(stack):
    p = UUID.random()
    for i in range(1, 11):
        stack.send(Message(p, f"{i}".encode()))
    sent = stack.tp.sent_where(lambda x: x.msg.dest == p)
    assert [(x.msg.get_header(stack.prot.id).seqno, x.msg.get_header(stack.prot.id).first) for x in sent][:2] == \
        [(1, True), (2, False)]
    stack.tp.clear()
    stack.tp.inject([control(stack, p, XMIT_REQ, 3, 4)])
    assert [(h.seqno, bytes(b)) for h, b in sent_to(stack, p, DATA)] == [(3, b"3"), (4, b"4")]
    stack.tp.clear()
    stack.tp.inject([control(stack, p, XMIT_REQ, -(1 << 63), (1 << 63) - 1)])   # everything there is, no more
    assert [h.seqno for h, _ in sent_to(stack, p, DATA)] == list(range(1, 11))
    stack.prot.max_xmit_req_size = 4
    stack.tp.clear()
    stack.tp.inject([control(stack, p, XMIT_REQ, 2, 1 << 40), control(stack, p, XMIT_REQ, 9, 3)])
    assert [h.seqno for h, _ in sent_to(stack, p, DATA)] == [2, 3, 4, 5]
    stack.tp.clear()
    stack.tp.inject([control(stack, UUID.random(), XMIT_REQ, 1, 10)])          # a stranger: nothing
    assert stack.tp.sent == [] and stack.prot.counters["xmit_reqs_unknown"] == 1


def test_stable_purges_the_send_window_and_resends_the_tail(stack):
    """STABLE(highest delivered, highest received): the sender forgets what was delivered and resends what
    follows the highest received (how a lost last message is found)."""
    p = UUID.random()
    for i in range(1, 11):
        stack.send(Message(p, f"{i}".encode()))
    assert stack.prot.dump_stats()["in_send_windows"] == 10
    stack.tp.clear()
    stack.tp.inject([control(stack, p, STABLE, 6, 8)])
    assert stack.prot.dump_stats()["in_send_windows"] == 4
    assert [h.seqno for h, _ in sent_to(stack, p, DATA)] == [9, 10]
    stack.tp.clear()
    stack.tp.inject([control(stack, p, STABLE, 1 << 62, 1 << 62)])     # cannot purge what we never sent
    assert stack.prot.dump_stats()["in_send_windows"] == 0 and stack.tp.sent == []
    stack.send(Message(p, b"11"))
    assert stack.prot.send_table[p].win.get(11) is not None             # kept: the window still works
    stack.tp.inject([control(stack, UUID.random(), STABLE, 5, 5)])
    assert stack.prot.counters["stables_unknown"] == 1


def test_receivers_send_stable_periodically_and_after_max_bytes():
    s = FakeStack(unicast2(stable_interval=100, max_stable_msgs=2, max_bytes=250, timeout=[50]), connect=True)
    try:
        p = UUID.random()
        s.tp.inject([data(s, p, 1, first=True, payload=bytes(100)), data(s, p, 2, payload=bytes(100)),
                     data(s, p, 4, payload=bytes(100))])
        h, _ = sent_to(s, p, STABLE)[0]                  # 300 bytes >= max_bytes: at once
        assert (h.seqno, h.high_seqno) == (2, 4)
        time.sleep(0.6)                                  # then every 100 ms, twice for the same highest received
        stables = [(h.seqno, h.high_seqno) for h, _ in sent_to(s, p, STABLE)]
        assert stables == [(2, 4), (2, 4), (2, 4)]
        s.tp.inject([data(s, p, 3), data(s, p, 5)])
        wait_until(lambda: len(sent_to(s, p, STABLE)) == 5, timeout=5, msg="STABLEs after progress")
        assert [(h.seqno, h.high_seqno) for h, _ in sent_to(s, p, STABLE)][3:] == [(5, 5), (5, 5)]
    finally:
        s.close()


def test_a_sender_that_restarts_with_a_new_conn_id_starts_a_new_window(stack):
    p = UUID.random()
    stack.tp.inject([data(stack, p, i, conn_id=1, first=i == 1) for i in range(1, 6)])
    stack.tp.inject([data(stack, p, 1, conn_id=2, first=True), data(stack, p, 2, conn_id=2)])
    assert payloads(stack.top.wait_messages(7)) == [b"1", b"2", b"3", b"4", b"5", b"1", b"2"]
    assert stack.prot.recv_table[p].conn_id == 2
    stack.tp.inject([data(stack, p, 6, conn_id=1)])           # late, on the old connection: dropped, asked
    assert stack.prot.dump_stats()["dropped_unknown_conn"] == 1
    assert [h.seqno for h, _ in sent_to(stack, p, SEND_FIRST)] == [6]
    stack.tp.inject([data(stack, p, 3, conn_id=2)])
    assert payloads(stack.top.wait_messages(8))[-1] == b"3"


def test_duplicates_are_dropped_and_counted_and_oob_goes_up_once(stack):
    p = UUID.random()
    oob = data(stack, p, 3, flags=Message.OOB)
    stack.tp.inject([data(stack, p, 1, first=True), data(stack, p, 1), oob])
    assert sorted(payloads(stack.top.wait_messages(2))) == [b"1", b"3"]      # OOB ahead of the gap
    stack.tp.inject([data(stack, p, 2), data(stack, p, 3, flags=Message.OOB), data(stack, p, 2)])
    got = payloads(stack.top.wait_messages(3))
    time.sleep(0.05)
    assert payloads(stack.top.messages) == got and got.count(b"3") == 1 and got[-1] == b"2"
    assert stack.prot.dump_stats()["duplicates"] == 3


def test_a_member_that_leaves_gets_a_last_stable_and_its_connections_go(stack):
    p, q = UUID.random(), UUID.random()
    stack.install_view([stack.local_addr, p, q])
    stack.tp.inject([data(stack, p, 1, first=True), data(stack, p, 2)])
    stack.send(Message(p, b"x"))
    stack.top.wait_messages(2)
    stack.tp.clear()
    stack.install_view([stack.local_addr, q], view_id=2)
    assert [(h.seqno, h.high_seqno) for h, _ in sent_to(stack, p, STABLE)] == [(2, 2)]
    assert p not in stack.prot.send_table and p not in stack.prot.recv_table


# ---------------------------------------------------------------------------------------------- two members

def pair(net: FakeNetwork, **props):
    a = FakeStack(unicast2(**props), network=net, connect=True)
    b = FakeStack(unicast2(**props), network=net, connect=True)
    for s in (a, b):
        s.install_view([a.local_addr, b.local_addr])
    return a, b


def test_the_lost_last_message_is_resent_after_the_receivers_stable():
    net = LossyNetwork()
    a, b = pair(net, stable_interval=100, timeout=[50])
    try:
        for i in range(1, 5):
            a.send(Message(b.local_addr, f"{i}".encode()))
        b.top.wait_messages(4)
        net.drop = lambda d: b"last" in d               # the last message is lost; nothing follows it
        a.send(Message(b.local_addr, b"last"))
        net.drop = lambda d: False
        got = b.top.wait_messages(5, timeout=5)
        assert payloads(got) == [b"1", b"2", b"3", b"4", b"last"] and net.dropped == 1
        assert a.prot.counters["stables_received"] >= 1 and a.prot.counters["xmits"] >= 1
        wait_until(lambda: a.prot.dump_stats()["in_send_windows"] == 0, timeout=5, msg="purge")
    finally:
        a.close()
        b.close()


def test_two_members_exchange_everything_in_order_over_a_lossy_network():
    net = LossyNetwork(loss=0.2, seed=7)
    a, b = pair(net, stable_interval=200, timeout=[40, 80])
    try:
        n = 400

        def send(src, dest):
            for i in range(n):
                src.send(Message(dest.local_addr, f"{i}".encode(), None, Message.OOB if i % 50 == 7 else 0))
        threads = [threading.Thread(target=send, args=(x, y)) for x, y in ((a, b), (b, a))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for s in (a, b):
            got = s.top.wait_messages(n, timeout=60)
            regular = [int(p) for p in payloads(got) if int(p) % 50 != 7]
            assert regular == [i for i in range(n) if i % 50 != 7]
            assert sorted(int(p) for p in payloads(got)) == list(range(n))
        assert net.dropped > 50
        stats = [s.prot.dump_stats() for s in (a, b)]
        for k in ("xmit_reqs_sent", "xmit_reqs_received", "xmits", "stables_received"):
            assert sum(st[k] for st in stats) > 0, (k, stats)
        assert sum(st["first_seqno_requests_sent"] for st in stats) < 20, stats    # not one per message
        wait_until(lambda: a.prot.dump_stats()["in_send_windows"] == 0 == b.prot.dump_stats()["in_send_windows"],
                   timeout=10, msg="STABLEs empty the send windows")
    finally:
        a.close()
        b.close()


# ------------------------------------------------------------------------------------------------- hostile

def test_windows_of_non_members_are_capped_and_memory_does_not_follow_their_seqnos():
    s = FakeStack(unicast2(max_nonmember_connections=16, stable_interval=0), connect=True)
    try:
        q = UUID.random()
        s.install_view([s.local_addr, q])
        strangers = [UUID.random() for _ in range(100)]
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i, x in enumerate(strangers):
                crafted = [data(s, x, 1, first=True), data(s, x, 3), data(s, x, 1 << 40), data(s, x, -5),
                           data(s, x, 9, conn_id=99), control(s, x, STABLE, 1 << 60, 1 << 60),
                           control(s, x, XMIT_REQ, 0, 1 << 62)]
                s.tp.inject(crafted + [data(s, q, i + 1, first=i == 0)])
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 3_000_000
        st = s.prot.dump_stats()
        assert st["nonmember_recv_windows"] == 16 and st["nonmembers_evicted"] == 84
        assert len(s.prot.recv_table) == 17
        assert st["dropped_nonmember_window"] == 100 and st["dropped_unknown_conn"] == 100
        assert st["stables_unknown"] == 100 and st["xmit_reqs_unknown"] == 100
        got = payloads(s.top.wait_messages(200), q)
        assert got == [f"{i}".encode() for i in range(1, 101)]
    finally:
        s.close()


def test_a_non_members_window_is_bounded_and_answered_with_a_stable():
    s = FakeStack(unicast2(nonmember_window=8, stable_interval=0), connect=True)
    try:
        x, q = UUID.random(), UUID.random()
        s.install_view([s.local_addr, q])
        s.tp.inject([data(s, x, 1, first=True)] + [data(s, x, i) for i in range(3, 200)])
        assert s.prot.recv_table[x].win.size == 7                 # 3..9: less than 8 ahead of 2
        assert s.prot.dump_stats()["dropped_nonmember_window"] == 190
        assert [(h.seqno, h.high_seqno) for h, _ in sent_to(s, x, STABLE)] == [(1, 9)]   # resend from 10
        s.tp.inject([data(s, q, 1, first=True)] + [data(s, q, i) for i in range(3, 200)])
        assert s.prot.recv_table[q].win.size == 197               # a member's window takes them all
    finally:
        s.close()


def test_absurd_seqnos_from_a_member_are_dropped_and_its_gaps_asked_for_in_bounded_requests():
    s = FakeStack(unicast2(timeout=[30], max_xmit_req_size=100, stable_interval=0), connect=True)
    try:
        p = UUID.random()
        s.install_view([s.local_addr, p])
        s.tp.inject([data(s, p, 1, first=True), data(s, p, 1 << 50), data(s, p, 0, first=True, conn_id=8)])
        assert s.prot.dump_stats()["dropped_bad_seqno"] == 2
        s.tp.inject([data(s, p, 1_000_000)])                        # a gap of ~10^6 seqnos: one range
        reqs = s.tp.wait_sent(lambda x: x.msg.dest == p, count=3, timeout=5)
        asked = [(x.msg.get_header(s.prot.id).seqno, x.msg.get_header(s.prot.id).high_seqno) for x in reqs]
        assert all(hi - lo + 1 <= 100 for lo, hi in asked) and asked[0] == (2, 101)
        assert s.prot.dump_stats()["in_recv_windows"] == 1
    finally:
        s.close()


def test_connections_to_non_members_are_capped_and_expire():
    """Send windows to non-members: at most max_nonmember_connections (the oldest goes), and removed
    max_retransmit_time after they were opened (2.12's AgeOutCache), with the receive window of the peer."""
    s = FakeStack(unicast2(max_nonmember_connections=10, max_retransmit_time=300, xmit_tick=20,
                           stable_interval=0), connect=True)
    try:
        q = UUID.random()
        s.install_view([s.local_addr, q])
        for _ in range(50):
            s.send(Message(UUID.random(), b"answer to a stranger"))
        s.send(Message(q, b"to a member"))
        st = s.prot.dump_stats()
        assert len(s.prot.send_table) == 11 and st["nonmember_send_windows"] == 10
        assert st["nonmember_sends_evicted"] == 40
        x = UUID.random()
        s.tp.inject([data(s, x, 1, first=True)])
        s.send(Message(x, b"answer"))
        wait_until(lambda: set(s.prot.send_table) == {q} and set(s.prot.recv_table) == set(), timeout=5,
                   msg="expiry of the non-members' connections")
        assert s.prot.counters["nonmembers_expired"] + len(sent_to(s, x, STABLE)) >= 1
    finally:
        s.close()


def test_total_above_unicast2_takes_it_for_the_reliable_unicast_layer():
    """TOTAL drops a unicast that did not come through the reliable unicast layer below it: with UNICAST2 in
    place of UNICAST, that is UNICAST2's header."""
    from jgpy.stack.config import load_config
    from jgpy.stack.protocol import Protocol
    from jgpy.stack.stack import ProtocolStack
    from jgpy.testing.java import udp_props, unique_group
    stack = ProtocolStack(load_config("total-udp.xml").replace("UNICAST", "UNICAST2"), Protocol(),
                          udp_props(*unique_group()))
    try:
        stack.start(f"u2-total-{UUID.random()}")
        assert stack.find("TOTAL")._reliable_ids == (stack.find("pbcast.NAKACK").id, stack.find("UNICAST2").id)
    finally:
        stack.stop()
        stack.destroy()


def test_properties_are_checked_at_init():
    from jgpy.errors import ConfigError
    for bad in ({"max_stable_msgs": 0}, {"max_bytes": 0}):
        with pytest.raises(ConfigError):
            FakeStack(unicast2(**bad), start=False)


# ------------------------------------------------------------------------------------------------- golden

GOLDEN = [
    (Unicast2Header(DATA, 1, 0, 0, True), struct.pack(">bqh?", 0, 1, 0, True)),
    (Unicast2Header(DATA, (1 << 63) - 1, 0, -32768, False), struct.pack(">bqh?", 0, (1 << 63) - 1, -32768, False)),
    (Unicast2Header(XMIT_REQ, 3, 1 << 40), struct.pack(">bqq", 1, 3, 1 << 40)),
    (Unicast2Header(SEND_FIRST, 17), struct.pack(">bq", 2, 17)),
    (Unicast2Header(STABLE, -1, 9), struct.pack(">bqq", 3, -1, 9)),
]


@pytest.mark.parametrize("hdr,expected", GOLDEN, ids=lambda v: v.hex() if isinstance(v, bytes) else None)
def test_header_bytes_match_the_jar(java_codec, hdr, expected):
    """Type, then DATA: seqno, conn_id, first; XMIT_REQ and STABLE: seqno, high_seqno; SEND_FIRST_SEQNO: seqno."""
    cls = "protocols.UNICAST2$Unicast2Header"
    assert DIALECT.encode(hdr) == expected
    assert java_codec.encode(cls, to_json(hdr)) == expected
    rep = java_codec.decode(cls, expected)
    assert rep["hex"] == expected.hex() and rep["remaining"] == 0
    back = DIALECT.decode(Unicast2Header, expected)
    assert (back.type, back.seqno, back.high_seqno, back.conn_id, back.first) == \
        (hdr.type, hdr.seqno, hdr.high_seqno, hdr.conn_id, hdr.first)


# ------------------------------------------------------------------ the jar's udp-largecluster.xml with Java

LARGECLUSTER = "udp-largecluster.xml"


@pytest.mark.interop
@pytest.mark.timeout(400)
@pytest.mark.parametrize("kinds", ["JP", "PJ", "PJPJ"])
def test_udp_largecluster_in_mixed_clusters(cluster_factory, kinds):
    """The jar's udp-largecluster.xml unchanged (UNICAST2 timeout="300,600,1200"): Java and jgpy coordinators,
    multicasts and UNICAST2 unicasts both ways, every stream complete and in order."""
    c = cluster_factory(kinds, config=stock(LARGECLUSTER))
    c.start()
    c.assert_agreement()
    exchange(c, 2000 if len(kinds) <= 2 else 1000, unicasts=2000)
    for m in c.members:
        st = m.stats()
        assert "UNICAST2" in st and "UNICAST" not in st, sorted(st)
        if m.kind == "jgpy":
            assert st["UNICAST2"]["msgs_sent"] >= 2000 and st["UNICAST2"]["dropped_unknown_conn"] == 0


@pytest.mark.interop
@pytest.mark.timeout(400)
@pytest.mark.parametrize("kinds", ["JP", "PJ"])
def test_udp_largecluster_loss_is_recovered_by_xmit_req(cluster_factory, kinds):
    """10 % loss both ways on the jgpy member (DISCARD above UDP): the gaps in the unicast streams are asked
    for with XMIT_REQ by both sides and answered. A lost last unicast is only found by the receiver's STABLE
    (every stable_interval, 60 s in the config; 2.12 has no other way): STABLE every 2 s here, the same path
    sooner."""
    base = stock(LARGECLUSTER).with_properties("UNICAST2", stable_interval="2000") \
        .with_properties("pbcast.STABLE", desired_avg_gossip="5000")
    lossy = base.insert("DISCARD", {"up": "0", "down": "0", "excludeItself": "false"}, after="UDP")
    c = cluster_factory(kinds, config=base, jgpy_config=lossy)
    c.start()
    c.assert_agreement()
    for m in c.members:
        if m.kind == "jgpy":
            d = m.channel.stack.find("DISCARD")
            d.up_loss = d.down_loss = 0.1
    exchange(c, 500, unicasts=2000, timeout=300)
    for m in c.members:
        st = m.stats()
        if m.kind == "jgpy":
            u2 = st["UNICAST2"]
            assert st["DISCARD"]["num_up"] > 0 and st["DISCARD"]["num_down"] > 0
            assert u2["xmit_reqs_sent"] > 0 and u2["xmit_reqs_received"] > 0 and u2["xmits"] > 0, u2
        else:
            assert int(st["UNICAST2"]["num_xmits"]) > 0, st["UNICAST2"]


# ------------------------------------------------------------------ hostile peers against a live member

def _u2(typ: int, seqno: int, high: int = 0, conn_id: int = 0, first: bool = False):
    from jgpy.testing import hostile
    body = struct.pack(">bqh?", typ, seqno, conn_id, first) if typ == DATA else \
        struct.pack(">bq", typ, seqno) if typ == SEND_FIRST else struct.pack(">bqq", typ, seqno, high)
    return hostile.Hdr(40, 73, body)              # UNICAST2's protocol id, Unicast2Header's magic


def _unicast2_attacks(f, rnd: random.Random, target, member, strangers: int):
    """Made-up senders' DATA (first at random seqnos, absurdly far, seqno 0, unknown connections), XMIT_REQs,
    STABLEs and SEND_FIRST_SEQNOs for absurd ranges, a header type 2.12 does not know; then the same requests
    in a member's name, and a DATA of it far ahead."""
    from jgpy.testing import hostile
    for _ in range(strangers):
        src = hostile.stranger(rnd)
        first = rnd.randrange(1, 1000)
        for kind, hdr, payload in (
                ("u2-first", _u2(DATA, first, conn_id=3, first=True), b"hello"),
                ("u2-far-seqno", _u2(DATA, first + (1 << 40), conn_id=3), b"far"),
                ("u2-seqno-0", _u2(DATA, 0, conn_id=4, first=True), b"zero"),
                ("u2-unknown-conn", _u2(DATA, rnd.randrange(1 << 62), conn_id=5), b"who"),
                ("u2-xmit-req", _u2(XMIT_REQ, -(1 << 63), (1 << 63) - 1), None),
                ("u2-stable", _u2(STABLE, 1 << 62, 1 << 62), None),
                ("u2-send-first", _u2(SEND_FIRST, 1 << 62), None),
                ("u2-bad-type", _u2(9, 1, 2), None)):
            yield kind, f.dgram(src, [hdr], target, payload)
    for kind, hdr in (("u2-member-xmit-req", _u2(XMIT_REQ, -(1 << 63), (1 << 63) - 1)),
                      ("u2-member-send-first", _u2(SEND_FIRST, 1 << 62)),
                      ("u2-member-far-seqno", _u2(DATA, 1 << 40, conn_id=0)),
                      ("u2-member-far-seqno", _u2(DATA, 1 << 22, conn_id=0))):
        yield kind, f.dgram(member, [hdr], target, b"spoofed")


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_hostile_unicast2_input_is_counted_and_bounded(figures):
    """A jgpy member on udp-largecluster.xml (own process) under UNICAST2 attacks on its unicast socket: alive,
    RSS bounded, the legitimate member's traffic complete and in order, the attacks counted."""
    from jgpy.testing import hostile
    from jgpy.testing.java import udp_props, unique_group
    from tests.test_hostile_peers import Scene
    scene = Scene(stock(LARGECLUSTER), udp_props(*unique_group()), "p")
    try:
        scene.legit_round(100)
        assert scene._wait_delivery(30)
        base = scene.rss()
        f = hostile.Forger(scene.cluster)
        attacks = list(_unicast2_attacks(f, random.Random(5), scene.t_addr, scene.l_addr, 300))
        sent: dict = {}
        for i in range(0, len(attacks), 200):
            for k, v in hostile.send_datagrams(attacks[i:i + 200], scene.target_physical).items():
                sent[k] = sent.get(k, 0) + v
            scene.legit_round(10)
        scene.legit_round(50)
        stats = scene.assert_survived(base, figures, "UNICAST2 attacks")
        u2 = stats["UNICAST2"]
        figures("UNICAST2 attack datagrams", sum(sent.values()))
        assert u2["events_failed"] == 0, u2
        assert u2["xmit_reqs_unknown"] >= 250 and u2["stables_unknown"] >= 250, u2
        assert u2["first_seqno_requests_unknown"] >= 250 and u2["dropped_bad_seqno"] >= 250, u2
        assert u2["dropped_unknown_conn"] >= 250 and u2["nonmember_recv_windows"] <= 64, u2
        assert len(u2["connections"]) <= 2 * 64 + 2 and u2["in_recv_windows"] < 1000, u2
    finally:
        scene.close()


@pytest.mark.interop
@pytest.mark.timeout(300)
def test_new_connection_with_a_lost_first_message_both_ways_with_java(cluster_factory):
    """JP on udp-largecluster.xml: the jgpy member drops both its connections with the Java member (a restart
    of the connection: a new conn_id) and loses the first message of the new one. Java asks for it
    (SEND_FIRST_SEQNO) and we resend it; our receive window for Java is gone, so we ask Java the same way; every
    unicast stream stays complete and in order."""
    base = stock(LARGECLUSTER)
    c = cluster_factory("JP", config=base,
                        jgpy_config=base.insert("DISCARD", {"up": "0", "down": "0"}, after="UDP"))
    c.start()
    c.assert_agreement()
    p = c.members[1]
    u2, discard = p.channel.stack.find("UNICAST2"), p.channel.stack.find("DISCARD")
    java = p.address_of("J1")
    old_conn = u2.send_table[java].conn_id
    u2.remove_connection(java)
    discard.drop_down_unicasts = 1
    exchange(c, 100, unicasts=500)
    st = p.stats()["UNICAST2"]
    assert u2.send_table[java].conn_id != old_conn
    assert st["first_seqno_requests_received"] >= 1 and st["first_seqno_requests_sent"] >= 1, st
    assert st["dropped_unknown_conn"] >= 1, st
