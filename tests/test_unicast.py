"""UNICAST on a fake transport: cumulative ACKs (one per sender and received batch), re-ACKs of duplicates,
and the delayed ACKs (``ack_delay``, ``ack_threshold``)."""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

from jgpy import UUID, Message
from jgpy._core.headers import UnicastHeader
from jgpy.protocols.unicast import UNICAST
from jgpy.stack.events import Event, EventType
from tests.fakestack import FakeStack, wait_until

DATA, ACK, SEND_FIRST = UnicastHeader.DATA, UnicastHeader.ACK, UnicastHeader.SEND_FIRST_SEQNO


def unicast(**props) -> UNICAST:
    u = UNICAST()
    for k, v in props.items():
        setattr(u, k, v)
    return u


@pytest.fixture
def stack():
    """ack_delay=0: every batch acked at once, as 2.12 does."""
    s = FakeStack(unicast(ack_delay=0), connect=True)
    yield s
    s.close()


@pytest.fixture
def delayed():
    s = FakeStack(unicast(ack_delay=50, ack_threshold=8, timeout=[1000, 2000]), connect=True)
    yield s
    s.close()


def data(s: FakeStack, src, seqno: int, conn_id: int = 7, first: bool = False) -> Message:
    m = Message(s.local_addr, f"{seqno}".encode(), src)
    m.put_header(s.prot.id, UnicastHeader(DATA, seqno, conn_id, first))
    return m


def acks_to(s: FakeStack, dest) -> list[int]:
    out = []
    for sent in s.tp.sent_where(lambda x: x.msg.dest == dest):
        h = sent.msg.get_header(s.prot.id)
        if h is not None and h.type == ACK:
            out.append(h.seqno)
    return out


def test_one_cumulative_ack_per_sender_and_batch(stack):
    p, q = UUID.random(), UUID.random()
    batch = [data(stack, p, i, first=(i == 1)) for i in range(1, 11)]
    batch += [data(stack, q, i, conn_id=3, first=(i == 1)) for i in range(1, 4)]
    stack.tp.inject(batch)
    got = stack.top.wait_messages(13)
    assert [bytes(m.payload) for m in got if m.src == p] == [f"{i}".encode() for i in range(1, 11)]
    assert acks_to(stack, p) == [10] and acks_to(stack, q) == [3]


def test_a_gap_holds_back_the_ack_and_duplicates_are_acked_again(stack):
    p = UUID.random()
    stack.tp.inject([data(stack, p, 1, first=True), data(stack, p, 2), data(stack, p, 4)])
    stack.top.wait_messages(2)
    assert acks_to(stack, p) == [2]                  # 4 waits for 3: not acknowledged yet
    stack.tp.clear()
    stack.tp.inject([data(stack, p, 3), data(stack, p, 2)])  # fills the gap; 2 again (our ACK was lost)
    stack.top.wait_messages(4)
    assert acks_to(stack, p) == [4]
    stack.tp.clear()
    stack.tp.inject([data(stack, p, 1)])              # only a duplicate: acked again on its own
    assert acks_to(stack, p) == [1]
    assert stack.prot.dump_stats()["duplicates"] == 2


def ack(s: FakeStack, src, seqno: int) -> Message:
    m = Message(s.local_addr, None, src)
    m.put_header(s.prot.id, UnicastHeader(ACK, seqno))
    return m


def test_acks_of_a_batch_release_up_to_the_highest(stack):
    """A batch with several (cumulative) ACKs from one receiver releases everything up to the highest; each
    ACK is counted."""
    p = UUID.random()
    for i in range(10):
        stack.send(Message(p, f"{i}".encode()))
    stats = stack.prot.dump_stats
    assert stats()["unacked"] == 10
    stack.tp.inject([ack(stack, p, 3), ack(stack, p, 7), ack(stack, p, 5)])
    assert stats()["unacked"] == 3 and stats()["acks_received"] == 3
    stack.tp.inject([ack(stack, p, 10)])
    assert stats()["unacked"] == 0


def test_delayed_acks_cover_the_batches_that_follow(delayed):
    """Batches of a few messages are not acked at once: one cumulative ACK, ack_delay after the first."""
    p = UUID.random()
    t0 = time.monotonic()
    for i in range(1, 4):
        delayed.tp.inject([data(delayed, p, i, first=(i == 1))])
    delayed.top.wait_messages(3)
    assert acks_to(delayed, p) == []
    delayed.tp.wait_sent(lambda x: x.msg.dest == p, timeout=5.0)
    assert time.monotonic() - t0 >= 0.045
    assert acks_to(delayed, p) == [3]
    assert delayed.prot.counters["acks_delayed"] == 1


def test_ack_threshold_and_duplicates_ack_at_once(delayed):
    p = UUID.random()
    delayed.tp.inject([data(delayed, p, i, first=(i == 1)) for i in range(1, 9)])   # 8 = ack_threshold
    delayed.top.wait_messages(8)
    assert acks_to(delayed, p) == [8]
    delayed.tp.clear()
    delayed.tp.inject([data(delayed, p, 9)])
    assert acks_to(delayed, p) == []                 # one new message: waits
    delayed.tp.inject([data(delayed, p, 5)])          # a retransmission: the sender misses our ACK
    assert acks_to(delayed, p) == [9]                 # acked at once, the pending 9 included


def test_a_new_connection_drops_the_pending_ack_of_the_old_one(delayed):
    """An ACK carries no conn_id: a pending ACK(5) of an old connection would acknowledge 1..5 of the new one."""
    p = UUID.random()
    delayed.tp.inject([data(delayed, p, i, conn_id=1, first=(i == 1)) for i in range(1, 6)])
    delayed.tp.inject([data(delayed, p, 1, conn_id=2, first=True)])
    delayed.top.wait_messages(6)
    delayed.tp.wait_sent(lambda x: x.msg.dest == p, timeout=5.0)
    assert acks_to(delayed, p) == [1]


def test_disconnect_sends_the_pending_acks(delayed):
    p = UUID.random()
    delayed.tp.inject([data(delayed, p, 1, first=True), data(delayed, p, 2)])
    delayed.top.wait_messages(2)
    assert acks_to(delayed, p) == []
    delayed.prot.down(Event(EventType.DISCONNECT))
    assert acks_to(delayed, p) == [2]


def test_a_view_without_the_sender_sends_its_pending_ack_first(delayed):
    """The window of a member that left goes with the view; the ACK still owed for what we delivered from it
    is sent first. Dropped with the window, it would leave the sender retransmitting to us: after a merge (or
    while views briefly disagree) we would ask for its first seqno and deliver the same messages again."""
    from jgpy._core.types import View, ViewId
    p = UUID.random()
    delayed.prot.down(Event(EventType.VIEW_CHANGE, View(ViewId(delayed.local_addr, 1), [delayed.local_addr, p])))
    delayed.tp.inject([data(delayed, p, 1, first=True), data(delayed, p, 2)])
    delayed.top.wait_messages(2)
    assert acks_to(delayed, p) == []
    delayed.prot.down(Event(EventType.VIEW_CHANGE, View(ViewId(delayed.local_addr, 2), [delayed.local_addr])))
    assert acks_to(delayed, p) == [2]
    assert p not in delayed.prot.recv_table and not delayed.prot.pending_acks


def test_a_pending_ack_travels_with_the_next_regular_message_to_its_sender(delayed):
    """A delayed ACK to p goes with our next regular unicast to p (the transport puts both in one datagram,
    the ACK first); an OOB message or a message to someone else carries none, nor does the message kept for
    retransmission."""
    p, q = UUID.random(), UUID.random()
    delayed.tp.inject([data(delayed, p, 1, first=True), data(delayed, p, 2)])
    delayed.top.wait_messages(2)
    delayed.send(Message(q, b"to q"))
    delayed.send(Message(p, b"oob", None, Message.OOB))
    assert acks_to(delayed, p) == []
    delayed.send(Message(p, b"answer"))
    to_p = [x.msg for x in delayed.tp.sent_where(lambda x: x.msg.dest == p)]
    kinds = [(m.get_header(delayed.prot.id).type, m.buffer) for m in to_p]
    assert kinds == [(DATA, b"oob"), (ACK, None), (DATA, b"answer")]
    assert acks_to(delayed, p) == [2]
    assert all(m.piggyback is None for m in to_p)        # nothing stays attached to a kept message
    stats = delayed.prot.dump_stats()
    assert stats["acks_piggybacked"] == 1 and stats["acks_delayed"] == 0 and not delayed.prot.pending_acks
    delayed.send(Message(p, b"next"))                     # nothing pending any more: no ACK
    assert acks_to(delayed, p) == [2]
    time.sleep(0.12)                                      # the ack_delay timer (50 ms) finds nothing to send
    assert acks_to(delayed, p) == [2] and delayed.prot.counters["acks_delayed"] == 0


def test_ack_delay_is_capped_by_the_retransmission_timeout():
    s = FakeStack(unicast(ack_delay=1000, timeout=[100, 200]), connect=True)
    try:
        assert s.prot.ack_delay_ms == 10
    finally:
        s.close()


def test_unknown_connection_asks_once_per_batch_for_the_first_message(stack):
    """Messages on a connection we do not know (its first message was lost) are dropped, counted, and the sender
    is asked once per batch to resend its first unacked message (SEND_FIRST_SEQNO, OOB)."""
    p = UUID.random()
    stack.tp.inject([data(stack, p, i) for i in range(4, 8)])
    reqs = stack.tp.sent_where(lambda x: x.msg.dest == p and x.msg.get_header(stack.prot.id).type == SEND_FIRST)
    assert len(reqs) == 1 and reqs[0].msg.flags & Message.OOB
    stats = stack.prot.dump_stats()
    assert stats["dropped_unknown_conn"] == 4 and stats["first_seqno_requests_sent"] == 1
    assert stack.top.messages == [] and acks_to(stack, p) == []
    stack.tp.inject([data(stack, p, 4, first=True), data(stack, p, 5), data(stack, p, 6)])   # the answer, then
    assert [bytes(m.payload) for m in stack.top.wait_messages(3)] == [b"4", b"5", b"6"]     # the retransmissions


def test_send_first_seqno_resends_our_lowest_unacked_message_as_first(stack):
    p = UUID.random()
    for i in range(3):
        stack.send(Message(p, f"{i}".encode()))
    stack.tp.inject([ack(stack, p, 1)])
    stack.tp.clear()
    req = Message(stack.local_addr, None, p, Message.OOB)
    req.put_header(stack.prot.id, UnicastHeader(SEND_FIRST))
    stack.tp.inject([req])
    sent = stack.tp.sent_where(lambda x: x.msg.dest == p)
    assert len(sent) == 1
    h = sent[0].msg.get_header(stack.prot.id)
    assert (h.type, h.seqno, h.first, bytes(sent[0].msg.payload)) == (DATA, 2, True, b"1")
    assert stack.prot.dump_stats()["first_seqno_requests_received"] == 1


def test_oob_goes_up_at_once_and_unreliable_or_multicast_messages_pass(stack, caplog):
    """An OOB message goes up when it arrives, ahead of a gap, and is not delivered again in order; a seqno
    absurdly far ahead is dropped with a warning; NO_RELIABILITY unicasts and multicasts pass untouched."""
    p = UUID.random()
    stack.install_view([stack.local_addr, p])       # a member (a non-member's window takes little: see below)
    oob = data(stack, p, 3)
    oob.flags |= Message.OOB
    plain = Message(stack.local_addr, b"unreliable", p, Message.NO_RELIABILITY)
    plain.put_header(stack.prot.id, UnicastHeader(DATA, 99, 7, False))
    mcast = Message(None, b"mcast", p)
    mcast.put_header(stack.prot.id, UnicastHeader(DATA, 98, 7, False))
    stack.tp.inject([data(stack, p, 1, first=True), oob, plain, mcast, data(stack, p, 1 << 40)])
    got = [bytes(m.payload) for m in stack.top.wait_messages(4)]
    assert sorted(got) == [b"1", b"3", b"mcast", b"unreliable"]
    stack.tp.inject([data(stack, p, 2)])
    got = [bytes(m.payload) for m in stack.top.wait_messages(5)]
    assert got.count(b"3") == 1 and got[-1] == b"2"
    assert stack.prot.dump_stats()["dropped_bad_seqno"] == 1 and "dropped a unicast" in caplog.text
    assert acks_to(stack, p)[-1] == 3


# ------------------------------------------------------------------------------------------------ hostile senders
# (issue 18) a receive window used to be opened for any sender's `first` message, sized by the seqno span, and
# kept until a view change: 16 datagrams from made-up senders grew a member's RSS by ~900 MB.


def hostile(**props) -> FakeStack:
    props.setdefault("ack_delay", 0)
    return FakeStack(unicast(**props), connect=True)


def test_windows_of_non_members_are_capped_and_memory_does_not_follow_their_seqnos():
    s = hostile(max_nonmember_connections=16)
    try:
        q = UUID.random()
        s.install_view([s.local_addr, q])
        strangers = [UUID.random() for _ in range(100)]
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i, x in enumerate(strangers):
                crafted = [data(s, x, 1, first=True), data(s, x, 3)]        # 3 is held: 2 is missing
                if i < 4:
                    crafted.append(data(s, x, 1 << 24))                     # the span: 2^24 seqnos
                s.tp.inject(crafted + [data(s, q, i + 1, first=i == 0)])
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert grown < 3_000_000                  # 16 windows, 100 messages delivered; was 128 MB per crafted span
        stats = s.prot.dump_stats()
        assert stats["nonmember_recv_windows"] == 16 and stats["nonmembers_evicted"] == 84
        assert len(s.prot.recv_table) == 17 and len(s.prot.pending_acks) <= 17
        assert stats["dropped_nonmember_window"] == 4 and stats["dropped_bad_seqno"] == 0
        # the member's messages all came up, in order
        got = [bytes(m.payload) for m in s.top.wait_messages(200) if m.src == q]
        assert got == [f"{i}".encode() for i in range(1, 101)]
    finally:
        s.close()


def test_what_a_non_members_window_holds_is_bounded_and_a_member_is_not_limited():
    s = hostile(nonmember_window=8)
    try:
        x, q = UUID.random(), UUID.random()
        s.install_view([s.local_addr, q])
        s.tp.inject([data(s, x, 1, first=True)] + [data(s, x, i) for i in range(3, 200)])
        assert s.prot.recv_table[x].win.size == 7          # 3..9: less than 8 ahead of 2, the next to deliver
        assert s.prot.dump_stats()["dropped_nonmember_window"] == 190
        s.tp.inject([data(s, x, 2)] + [data(s, x, i) for i in range(10, 12)])
        got = [bytes(m.payload) for m in s.top.wait_messages(11)]
        assert got == [f"{i}".encode() for i in range(1, 12)]
        s.tp.inject([data(s, q, 1, first=True)] + [data(s, q, i) for i in range(3, 200)])
        assert s.prot.recv_table[q].win.size == 197        # a member's window takes them all
    finally:
        s.close()


def test_idle_windows_of_non_members_expire_and_a_joiner_becomes_a_member():
    s = hostile(max_retransmit_time=1000, xmit_tick=20)     # idle windows of non-members expire after 1 s
    try:
        x, joiner = UUID.random(), UUID.random()
        s.tp.inject([data(s, x, 1, first=True), data(s, joiner, 1, first=True)])
        s.top.wait_messages(2)                               # a joiner's JOIN_REQ is a non-member's first message
        time.sleep(0.6)
        s.tp.inject([data(s, joiner, 2)])                    # the joiner keeps its window alive
        s.install_view([s.local_addr, joiner])               # ... and becomes a member
        assert s.prot.recv_table[joiner].member and s.prot.dump_stats()["nonmember_recv_windows"] == 0
        s.tp.inject([data(s, UUID.random(), 1, first=True)])
        assert s.prot.dump_stats()["nonmember_recv_windows"] == 1
        wait_until(lambda: s.prot.dump_stats()["nonmember_recv_windows"] == 0, timeout=5, msg="expiry")
        assert set(s.prot.recv_table) == {joiner} and s.prot.counters["nonmembers_expired"] == 1
        s.tp.inject([data(s, joiner, 3)])
        assert [bytes(m.payload) for m in s.top.wait_messages(5)][-1] == b"3"
    finally:
        s.close()


def test_send_windows_to_non_members_are_capped():
    s = hostile(max_nonmember_connections=10)
    try:
        q = UUID.random()
        s.install_view([s.local_addr, q])
        for _ in range(50):
            s.send(Message(UUID.random(), b"answer to a stranger"))
        s.send(Message(q, b"to a member"))
        stats = s.prot.dump_stats()
        assert len(s.prot.send_table) == 11 and stats["nonmember_send_windows"] == 10
        assert s.prot.counters["nonmember_sends_evicted"] == 40 and q in s.prot.send_table
    finally:
        s.close()
