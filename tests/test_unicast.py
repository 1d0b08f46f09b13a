"""UNICAST on a fake transport: cumulative ACKs (one per sender and received batch) and re-ACKs of duplicates."""

from __future__ import annotations

import pytest

from jgpy import UUID, Message
from jgpy._core.headers import UnicastHeader
from jgpy.protocols.unicast import UNICAST
from tests.fakestack import FakeStack

DATA, ACK = UnicastHeader.DATA, UnicastHeader.ACK


@pytest.fixture
def stack():
    s = FakeStack(UNICAST(), connect=True)
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
