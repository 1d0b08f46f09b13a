"""UNICAST on a fake transport: cumulative ACKs (one per sender and received batch), re-ACKs of duplicates,
and the delayed ACKs (``ack_delay``, ``ack_threshold``)."""

from __future__ import annotations

import time

import pytest

from jgpy import UUID, Message
from jgpy._core.headers import UnicastHeader
from jgpy.protocols.unicast import UNICAST
from jgpy.stack.events import Event, EventType
from tests.fakestack import FakeStack

DATA, ACK = UnicastHeader.DATA, UnicastHeader.ACK


def unicast(**props) -> UNICAST:
    u = UNICAST()
    for k, v in props.items():
        setattr(u, k, v)
    return u


@pytest.fixture
def stack():
    """The default (ack_delay=0): every batch acked at once, as 2.12 does."""
    s = FakeStack(unicast(), connect=True)
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
    assert stack.prot.counters["duplicates"] == 2


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


def test_ack_delay_is_capped_by_the_retransmission_timeout():
    s = FakeStack(unicast(ack_delay=1000, timeout=[100, 200]), connect=True)
    try:
        assert s.prot._ack_delay_ms == 10
    finally:
        s.close()
