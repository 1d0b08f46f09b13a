"""pbcast.NAKACK against crafted input (issue 18): what strangers, or a spoofer of a member's address, can make
NAKACK allocate, request and send is bounded, and the real members' traffic still goes through in order."""

from __future__ import annotations

import gc
import time
import tracemalloc

import pytest

from jgpy import UUID, Message
from jgpy._core.tables import MAX_WINDOW
from jgpy._core.types import Digest
from jgpy.headers import NakAckHeader
from jgpy.protocols.pbcast.nakack import NAKACK
from jgpy.stack.events import Event, EventType
from tests.fakestack import FakeStack, wait_until

MSG, XMIT_REQ, XMIT_RSP = NakAckHeader.MSG, NakAckHeader.XMIT_REQ, NakAckHeader.XMIT_RSP


def nakack(**props) -> NAKACK:
    n = NAKACK()
    n.xmit_tick = 10**7            # retransmission rounds only when a test calls _retransmit_due()
    for k, v in props.items():
        setattr(n, k, v)
    return n


def member_stack(prot: NAKACK, *others) -> FakeStack:
    """A joined NAKACK (a server) in the view [me, *others], with a window for each."""
    s = FakeStack(prot, connect=True)
    s.install_view([s.local_addr, *others])
    d = Digest()
    for a in (s.local_addr, *others):
        d.set(a, 0, 0, 0)
    prot.down(Event(EventType.SET_DIGEST, d))
    return s


@pytest.fixture
def stacks():
    made: list[FakeStack] = []
    yield made
    for s in made:
        s.close()


def mcast(s: FakeStack, src, seqno: int, payload: bytes = b"") -> Message:
    m = Message(None, payload or b"%d" % seqno, src)
    m.put_header(s.prot.id, NakAckHeader(MSG, seqno))
    return m


def xmit_req(s: FakeStack, src, first: int, last: int, original_sender) -> Message:
    m = Message(s.local_addr, None, src, Message.OOB)
    m.put_header(s.prot.id, NakAckHeader.xmit_req(first, last, original_sender))
    return m


def xmit_reqs_sent(s: FakeStack) -> list[tuple[int, int]]:
    out = []
    for sent in s.tp.sent_where():
        h = sent.msg.get_header(s.prot.id)
        if h is not None and h.type == XMIT_REQ:
            out.append((h.range.low, h.range.high))
    return out


def delivered(s: FakeStack, src) -> list[bytes]:
    return [bytes(m.buffer) for m in s.top.messages if m.src == src]


def assert_delivered(s: FakeStack, src, expected: list[bytes]) -> None:
    """The delivery thread hands messages up asynchronously: wait (bounded) for exactly ``expected``."""
    wait_until(lambda: len(delivered(s, src)) >= len(expected), timeout=5, msg=f"{len(expected)} messages")
    assert delivered(s, src) == expected


def test_a_spoofed_seqno_far_ahead_allocates_little_and_is_asked_for_in_bounded_rounds(stacks):
    a = UUID.random()
    s = member_stack(nakack(retransmit_timeout=[10]), a)
    stacks.append(s)
    s.tp.inject([mcast(s, a, i) for i in range(1, 6)])
    assert_delivered(s, a, [b"%d" % i for i in range(1, 6)])
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        s.tp.inject([mcast(s, a, MAX_WINDOW - 10)])         # "from a", far beyond what a has sent
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 500_000                                  # was a flat array over the span: 128 MB
    win = s.prot.windows[a]
    assert win.pending_xmits == MAX_WINDOW - 16
    time.sleep(0.05)
    for _ in range(3):                                      # three rounds: at most max_xmit_req_size each
        before = len(xmit_reqs_sent(s))
        s.prot._retransmit_due()
        asked = xmit_reqs_sent(s)[before:]
        assert asked and sum(b - a_ + 1 for a_, b in asked) <= s.prot.max_xmit_req_size
    assert xmit_reqs_sent(s)[0] == (6, 6 + s.prot.max_xmit_req_size - 1)       # lowest first
    assert xmit_reqs_sent(s)[1][0] == 6 + s.prot.max_xmit_req_size             # then where it stopped
    # the real member's messages still go through, in order
    s.tp.inject([mcast(s, a, i) for i in range(6, 40)])
    assert_delivered(s, a, [b"%d" % i for i in range(1, 40)])


def test_multicasts_from_non_members_create_no_window(stacks):
    a, stranger = UUID.random(), UUID.random()
    s = member_stack(nakack(), a)
    stacks.append(s)
    s.tp.inject([mcast(s, stranger, i) for i in (1, 2, MAX_WINDOW)] + [mcast(s, a, 1)])
    assert set(s.prot.windows) == {s.local_addr, a}
    assert s.prot.dump_stats()["dropped_no_window"] == 3
    assert_delivered(s, a, [b"1"])
    assert delivered(s, stranger) == []


def test_xmit_req_from_a_non_member_is_dropped_and_counted(stacks):
    a, stranger = UUID.random(), UUID.random()
    s = member_stack(nakack(), a)
    stacks.append(s)
    for i in range(5):
        s.send(Message(None, b"m%d" % i))
    s.tp.clear()
    s.tp.inject([xmit_req(s, stranger, 1, 5, s.local_addr)])
    assert s.tp.sent_where() == []
    assert s.prot.counters["xmit_reqs_dropped_non_member"] == 1
    s.tp.inject([xmit_req(s, a, 1, 5, s.local_addr)])                  # a member is answered
    assert len(s.tp.sent_where()) == 5


def test_a_member_that_just_left_the_view_is_still_answered(stacks):
    """Views disagree for a while around partitions and merges: a member we left out may still have us in its
    view and need our messages (2.12 answers anybody); a stranger is still refused."""
    a, stranger = UUID.random(), UUID.random()
    s = member_stack(nakack(), a)
    stacks.append(s)
    for i in range(5):
        s.send(Message(None, b"m%d" % i))
    s.install_view([s.local_addr])
    s.tp.clear()
    s.tp.inject([xmit_req(s, a, 1, 5, s.local_addr), xmit_req(s, stranger, 1, 5, s.local_addr)])
    assert len(s.tp.sent_where()) == 5
    assert s.prot.counters["xmit_reqs_dropped_non_member"] == 1


@pytest.mark.parametrize("use_mcast_xmit", [True, False])
def test_the_answer_to_one_xmit_req_is_bounded(stacks, use_mcast_xmit):
    a = UUID.random()
    s = member_stack(nakack(use_mcast_xmit=use_mcast_xmit, max_xmit_req_size=1000, max_xmit_rsp_bytes=300_000), a)
    stacks.append(s)
    for i in range(3000):
        s.send(Message(None, bytes(1000)))
    s.tp.clear()
    s.tp.inject([xmit_req(s, a, 1, 10**12, s.local_addr)])            # ~100 bytes asking for everything
    sent = s.tp.sent_where()
    assert 0 < len(sent) <= 300 and sum(len(x.data) for x in sent) < 400_000
    assert s.prot.counters["xmit_rsps_truncated"] == 1
    s.prot.max_xmit_rsp_bytes = 0
    s.tp.clear()
    s.tp.inject([xmit_req(s, a, 1, 10**12, s.local_addr)])
    assert len(s.tp.sent_where()) == 1000                              # max_xmit_req_size messages
    s.tp.clear()
    s.tp.inject([xmit_req(s, a, 2990, 3010, s.local_addr)])
    assert len(s.tp.sent_where()) == 11 and s.prot.counters["xmit_not_found"] == 10


def test_a_bad_control_message_does_not_hurt_the_rest_of_the_batch(stacks):
    a = UUID.random()
    s = member_stack(nakack(), a)
    stacks.append(s)
    s.send(Message(None, b"x"))
    s.tp.clear()
    bad = xmit_req(s, a, 1, 1, s.local_addr)
    bad.get_header(s.prot.id).range = "not a range"                    # whatever a decoder could let through
    s.tp.inject([bad, xmit_req(s, a, 1, 1, s.local_addr), mcast(s, a, 1)])
    assert len(s.tp.sent_where()) == 1
    assert_delivered(s, a, [b"1"])
    assert s.prot.counters["control_failed"] == 1
