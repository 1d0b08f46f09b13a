"""FRAG and FRAG2 against crafted fragments (issue 18): nothing is allocated from ``num_frags`` on the wire,
incomplete messages are bounded per sender and in all (count and bytes), those of senders not in the view
more tightly, and they expire; a member's fragmented messages still come through whole and in order."""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest

from jgpy import UUID, Message
from jgpy.headers import FragHeader
from jgpy.protocols.frag import FRAG
from jgpy.protocols.frag2 import FRAG2
from jgpy.stack.events import Event, EventType
from tests.fakestack import FakeStack, view_of, wait_until


def make(cls, **props):
    p = cls()
    p.frag_size = 1000
    for k, v in props.items():
        setattr(p, k, v)
    return p


@pytest.fixture(params=[FRAG, FRAG2], ids=["FRAG", "FRAG2"])
def cls(request):
    return request.param


@pytest.fixture
def stacks():
    made: list[FakeStack] = []

    def build(prot, local_addr=None) -> FakeStack:
        s = FakeStack(prot, local_addr, cluster_name="fragbounds")
        s.connect()
        made.append(s)
        return s

    yield build
    for s in made:
        s.stop()


def crafted(s: FakeStack, src, msg_id: int, frag_id: int, num_frags: int, payload: bytes = b"x") -> Message:
    m = Message(None, payload, src)
    m.put_header(s.prot.id, FragHeader(msg_id, frag_id, num_frags))
    return m


def fragments(cls, src, payload: bytes, stacks) -> list[Message]:
    """The fragments a real sender's FRAG/FRAG2 (frag_size 1000) makes of ``payload``."""
    sender = stacks(make(cls), src)
    sender.send(Message(None, payload, src))
    return [x.msg for x in sender.tp.sent]


def traced(fn) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_num_frags_from_the_wire_allocates_nothing(cls, stacks):
    me, stranger = UUID.random(), UUID.random()
    s = stacks(make(cls), me)
    grown = traced(lambda: s.tp.inject([crafted(s, stranger, i, 0, 10_000_000) for i in range(4)]))
    assert grown < 100_000                  # was [None] * num_frags per message id: 80 MB each
    assert s.prot.pending() == {stranger: 4}
    s.tp.inject([crafted(s, stranger, 9, 5, 5), crafted(s, stranger, 9, -1, 5), crafted(s, stranger, 9, 0, 0),
                 crafted(s, stranger, 0, 1, 3)])           # bad indexes, and a count that disagrees
    assert s.prot.dump_stats()["bad_frags"] == 4 and s.prot.pending() == {stranger: 4}


def test_incomplete_messages_per_sender_are_bounded(cls, stacks):
    me, a = UUID.random(), UUID.random()
    s = stacks(make(cls, max_incomplete_msgs=10), me)
    s.install_view([me, a])
    s.tp.inject([crafted(s, a, i, 0, 2) for i in range(100)])
    assert s.prot.pending() == {a: 10} and s.prot.dump_stats()["incomplete_evicted"] == 90
    s.tp.inject([crafted(s, a, 99, 1, 2)])                  # the newest ones are kept and complete
    assert s.prot.pending() == {a: 9}


def test_strangers_hold_at_most_max_nonmember_bytes_and_members_still_get_through(cls, stacks):
    me, a = UUID.random(), UUID.random()
    big = random.Random(3).randbytes(50_000)
    frags = fragments(cls, a, big, stacks)
    s = stacks(make(cls, max_nonmember_bytes=200_000), me)
    s.install_view([me, a])
    strangers = [UUID.random() for _ in range(50)]

    def attack():
        for i, x in enumerate(strangers):
            s.tp.inject([crafted(s, x, j, 0, 1000, bytes(1000)) for j in range(20)])
            s.tp.inject([frags[i]])                        # the member's fragments, interleaved
    grown = traced(attack)
    st = s.prot.dump_stats()
    assert st["pending_nonmember_bytes"] <= 200_000 and st["incomplete_evicted"] > 0
    assert grown < 1_000_000                                # 1000 crafted 1 KB fragments, ~60 KB of the member's
    s.tp.inject(frags[len(strangers):])
    got = [m for m in s.top.wait_messages(1) if m.src == a]
    assert len(got) == 1 and got[0].buffer == big


def test_all_incomplete_messages_are_bounded_in_bytes(cls, stacks):
    me, a, b = UUID.random(), UUID.random(), UUID.random()
    s = stacks(make(cls, max_incomplete_bytes=300_000), me)
    s.install_view([me, a, b])
    for i in range(200):
        s.tp.inject([crafted(s, a if i % 2 else b, i, 0, 5, bytes(10_000))])
    st = s.prot.dump_stats()
    assert st["pending_bytes"] <= 300_000 and st["incomplete_evicted"] >= 170


def test_a_fragment_padded_in_a_big_datagram_counts_what_it_keeps_alive(stacks):
    me, stranger = UUID.random(), UUID.random()
    s = stacks(make(FRAG2, max_nonmember_bytes=1_000_000), me)
    padded = [bytes(64_000) for _ in range(100)]            # one byte of fragment, 64 KB of datagram each
    msgs = []
    for i, buf in enumerate(padded):
        m = crafted(s, stranger, 1, i, 1000)
        m.set_buffer(buf, 5, 1)
        msgs.append(m)
    s.tp.inject(msgs)
    assert s.prot.dump_stats()["pending_nonmember_bytes"] <= 1_000_000
    assert s.prot.dump_stats()["incomplete_evicted"] >= 1


def test_incomplete_messages_expire(cls, stacks):
    me, a, stranger = UUID.random(), UUID.random(), UUID.random()
    s = stacks(make(cls, incomplete_timeout=200), me)
    s.install_view([me, a])
    s.tp.inject([crafted(s, stranger, 1, 0, 3), crafted(s, a, 1, 0, 3)])
    assert s.prot.pending() == {stranger: 1, a: 1}
    wait_until(lambda: s.prot.pending() == {}, timeout=5, msg="expiry by the timer")
    assert s.prot.dump_stats()["incomplete_expired"] == 2 and s.prot.table.bytes == 0


def test_a_joiners_message_started_before_the_view_completes_after_it(cls, stacks):
    me, joiner = UUID.random(), UUID.random()
    payload = random.Random(5).randbytes(5000)
    frags = fragments(cls, joiner, payload, stacks)
    s = stacks(make(cls), me)
    s.install_view([me])
    s.tp.inject(frags[:2])
    assert s.prot.dump_stats()["pending_nonmember_bytes"] > 0
    s.prot.down(Event(EventType.VIEW_CHANGE, view_of([me, joiner], 2)))
    assert s.prot.dump_stats()["pending_nonmember_bytes"] == 0
    s.tp.inject(frags[2:])
    assert [m.buffer for m in s.top.wait_messages(1)] == [payload]
    assert s.prot.table.bytes == 0


def test_a_fragment_that_fails_is_dropped_alone(cls, stacks):
    me, a = UUID.random(), UUID.random()
    s = stacks(make(cls), me)
    bad = crafted(s, a, 1, 0, 1)
    bad.put_header(s.prot.id, "not a FragHeader")            # whatever a decoder could let through
    s.tp.inject([Message(None, b"before", a), bad, Message(None, b"after", a)])
    assert [m.buffer for m in s.top.messages] == [b"before", b"after"]
    assert s.prot.dump_stats()["num_failed"] + s.prot.dump_stats().get("num_bad_frags", 0) == 1
