"""SEQUENCER (JGroups 2.12.2's total order through the coordinator): the protocol on fake stacks (forwarding,
broadcasting, duplicates, coordinator changes, hostile input), Java's own SEQUENCER class against ours (the same
bytes both ways), the jar's sequencer.xml in mixed Java/jgpy clusters whose journals the checker holds to total
order, with a Java and with a jgpy coordinator, and with the sequencing coordinator killed mid-stream."""

from __future__ import annotations

import threading

import pytest

from jgpy import DIALECT, UUID, Channel, Message, ViewId
from jgpy.headers import SequencerHeader, UnicastHeader
from jgpy._core.sequencer import ForwardTap
from jgpy.protocols.sequencer import SEQUENCER, SeqnoWindow
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import wait_all
from tests.fakestack import TP_ID, FakeNetwork, FakeStack, wait_until

SEQ_ID = 26
FORWARD, BCAST, WRAPPED = SequencerHeader.FORWARD, SequencerHeader.BCAST, SequencerHeader.WRAPPED_BCAST


class OrderedNetwork(FakeNetwork):
    """A fake network whose multicasts reach every stack in one order (as NAKACK's seqnos make them do): the
    hand-over to the receivers' queues happens under one lock."""

    def __init__(self) -> None:
        super().__init__()
        self._order = threading.Lock()

    def send(self, src, dest, data: bytes) -> None:
        with self._order:
            super().send(src, dest, data)


@pytest.fixture
def cluster():
    made: list[FakeStack] = []

    def build(n: int, **props) -> tuple[OrderedNetwork, list[FakeStack]]:
        net = OrderedNetwork()
        stacks = []
        for _ in range(n):
            prot = SEQUENCER()
            for k, v in props.items():
                setattr(prot, k, v)
            s = FakeStack(prot, network=net, connect=True)
            made.append(s)
            stacks.append(s)
        members = [s.local_addr for s in stacks]
        for s in stacks:
            s.install_view(members, 1, up=True)
        return net, stacks

    yield build
    for s in made:
        s.close()


def payloads(stack: FakeStack, src=None) -> list[bytes]:
    return [bytes(m.buffer) for m in stack.top.messages if src is None or m.src == src]


def delivered(stack: FakeStack) -> list[tuple]:
    return [(m.src, bytes(m.buffer)) for m in stack.top.messages]


def sent_with(stack: FakeStack, typ: int) -> list:
    return [s for s in stack.tp.sent_where(lambda s: s.msg.get_header(SEQ_ID) is not None
                                           and s.msg.get_header(SEQ_ID).type == typ)]


def mcast(data: bytes) -> Message:
    return Message(None, data)


# ---- forwarding and broadcasting ---------------------------------------------------------------------------

def test_the_coordinator_broadcasts_its_own_multicasts_with_its_tag(cluster):
    _, (a, b, c) = cluster(3)
    for i in range(3):
        a.send(mcast(b"a%d" % i))
    for s in (a, b, c):
        wait_until(lambda: len(s.top.messages) == 3)
        assert delivered(s) == [(a.local_addr, b"a%d" % i) for i in range(3)]
    hdrs = [x.header(SEQ_ID) for x in sent_with(a, BCAST)]
    assert [(h.tag.coord_addr, h.tag.id) for h in hdrs] == [(a.local_addr, i) for i in range(3)]
    assert a.prot.bcast_msgs == 3 and a.prot.forwarded_msgs == 0 and a.prot.forward_table_size == 0
    assert b.prot.received_bcasts == 3 and b.prot.delivered_bcasts == 3


def test_a_member_forwards_to_the_coordinator_which_wraps_it_for_everybody(cluster):
    _, (a, b, c) = cluster(3)
    msg = mcast(b"hello")
    b.send(msg)
    for s in (a, b, c):
        wait_until(lambda: len(s.top.messages) == 1)
        (m,) = s.top.messages
        assert m.src == b.local_addr and m.dest is None and bytes(m.buffer) == b"hello"
    (fwd,) = sent_with(b, FORWARD)
    assert fwd.msg.dest == a.local_addr and not fwd.multicast
    h = fwd.header(SEQ_ID)
    assert (h.tag.coord_addr, h.tag.id) == (b.local_addr, 0)
    # the payload is Util.objectToByteBuffer of the message, as it was sent (src set)
    assert bytes(fwd.msg.buffer) == DIALECT.object_to_buffer(msg)
    inner = DIALECT.object_from_buffer(fwd.msg.buffer)
    assert inner.src == b.local_addr and bytes(inner.buffer) == b"hello"
    (wrapped,) = sent_with(a, WRAPPED)
    assert wrapped.multicast and wrapped.msg.src == a.local_addr
    assert bytes(wrapped.msg.buffer) == bytes(fwd.msg.buffer)
    h = wrapped.header(SEQ_ID)
    assert (h.tag.coord_addr, h.tag.id) == (b.local_addr, 0)
    wait_until(lambda: b.prot.forward_table_size == 0, msg="the forward table empties once the message is back")
    assert (b.prot.forwarded_msgs, a.prot.received_forwards, a.prot.bcast_msgs) == (1, 1, 1)


def test_unicasts_and_no_total_order_multicasts_pass_untouched(cluster):
    _, (a, b) = cluster(2)
    b.send(Message(a.local_addr, b"uni"))
    b.send(Message(None, b"nto", None, Message.NO_TOTAL_ORDER))
    sent = b.tp.sent_where()
    assert [s.msg.get_header(SEQ_ID) for s in sent] == [None, None]
    assert [bytes(s.msg.buffer) for s in sent] == [b"uni", b"nto"]


def test_every_member_delivers_the_same_total_order(cluster):
    _, stacks = cluster(4)
    n = 60

    def send(i: int) -> None:
        for k in range(n):
            stacks[i].send(mcast(b"%d:%d" % (i, k)))
    threads = [threading.Thread(target=send, args=(i,)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    wait_until(lambda: len(stacks[0].top.messages) == 3 * n, timeout=20)
    send(0)                      # the fake transport loops back before it sends: not concurrently with relays
    total = 4 * n
    for s in stacks:
        wait_until(lambda: len(s.top.messages) == total, timeout=20)
    orders = [delivered(s) for s in stacks]
    assert all(o == orders[0] for o in orders[1:])
    for i, s in enumerate(stacks):             # per sender FIFO, nothing lost or doubled
        assert payloads(stacks[0], s.local_addr) == [b"%d:%d" % (i, k) for k in range(n)]
    assert all(s.prot.forward_table_size == 0 for s in stacks)


def test_duplicates_are_dropped_and_a_gap_is_filled_later():
    s = FakeStack(SEQUENCER(), connect=True)
    try:
        coord, other = UUID.random(), UUID.random()
        s.install_view([coord, s.local_addr, other], 1, up=True)

        def wrapped(seqno: int, data: bytes) -> Message:
            inner = Message(None, data, other)
            m = Message(None, DIALECT.object_to_buffer(inner), coord)
            m.put_header(SEQ_ID, SequencerHeader(WRAPPED, ViewId(other, seqno)))
            return m
        for seqno in (0, 1, 1, 3, 0, 3, 2, 4, 2):
            s.tp.inject([wrapped(seqno, b"%d" % seqno)])
        assert payloads(s) == [b"0", b"1", b"3", b"2", b"4"]
        assert s.prot.duplicates == 4
        assert s.prot.received_bcasts == 9 and s.prot.delivered_bcasts == 5
    finally:
        s.close()


def test_seqno_window_keeps_a_bounded_number_of_runs_above_a_gap():
    w = SeqnoWindow(10)
    assert w.add(10, 3) == (False, False) and w.add(11, 3) == (True, False)
    for k in (13, 14, 15, 17, 20, 19, 21):     # 12, 16 and 18 missing: runs 13..15, 17, 19..21
        assert w.add(k, 3) == (True, False)
    assert (w.los, w.his, w.above) == ([13, 17, 19], [15, 17, 21], 7)
    assert all(w.add(k, 3) == (False, False) for k in (11, 13, 15, 17, 19, 21))   # duplicates, in runs too
    assert w.add(16, 3) == (True, False)        # fills the gap between two runs: they join
    assert (w.los, w.his) == ([13, 19], [17, 21])
    assert w.add(25, 3) == (True, False) and w.add(23, 3) == (True, True)   # a fourth run: the gap at 12 goes
    assert w.next == 18 and (w.los, w.his) == ([19, 23, 25], [21, 23, 25])
    assert w.add(12, 3) == (False, False)
    assert w.add(18, 3) == (True, False) and w.next == 22   # the next one pulls the run after it in
    assert (w.los, w.his) == ([23, 25], [23, 25])


def test_seqno_window_keeps_thousands_above_one_gap_as_one_run():
    """A coordinator change: a member's new multicasts (thousands) are delivered before its resent older ones
    (a 2.12 coordinator's takeover does so); the resent ones must still be delivered, each once."""
    w = SeqnoWindow(126)
    for k in range(1735, 4000):
        assert w.add(k, 5) == (True, False)
    assert (w.los, w.his) == ([1735], [3999])
    assert all(w.add(k, 5) == (True, False) for k in range(127, 1735))
    assert w.next == 4000 and not w.los
    assert w.add(2000, 5) == (False, False)


# ---- coordinator changes -----------------------------------------------------------------------------------

def test_a_new_coordinator_gets_the_forward_table_again_in_order(cluster):
    net, (a, b, c) = cluster(3)
    net.blocked.add(a.local_addr)                     # A is gone: C's FORWARDs to it are lost
    for k in range(5):
        c.send(mcast(b"c%d" % k))
    assert c.prot.forward_table_size == 5 and not c.top.messages
    fwd_before = len(sent_with(c, FORWARD))
    members = [b.local_addr, c.local_addr]
    b.install_view(members, 2, up=True)
    c.install_view(members, 2, up=True)
    for s in (b, c):
        wait_until(lambda: len(s.top.messages) == 5)
        assert payloads(s) == [b"c%d" % k for k in range(5)]
    resent = sent_with(c, FORWARD)[fwd_before:]
    assert [x.msg.dest for x in resent] == [b.local_addr] * 5
    assert [x.header(SEQ_ID).tag.id for x in resent] == list(range(5))
    assert c.prot.forward_table_size == 0 and b.prot.is_coord and b.prot.coord == b.local_addr


def test_after_a_suspect_a_member_holds_its_multicasts_until_the_view_then_resends_them_in_order(cluster):
    """C suspects A: B is its coordinator now, but B may not know yet (2.12 resends at once and B drops what
    comes too early). C holds what it sends until the view, then sends it all to B in order."""
    net, (a, b, c) = cluster(3)
    net.blocked.add(a.local_addr)
    for k in range(3):
        c.send(mcast(b"c%d" % k))
    fwd_before = len(sent_with(c, FORWARD))
    c.prot.up(Event(EventType.SUSPECT, a.local_addr))
    assert c.prot.coord == b.local_addr and c.prot._holding
    for k in range(3, 6):
        c.send(mcast(b"c%d" % k))
    assert len(sent_with(c, FORWARD)) == fwd_before and c.prot.forward_table_size == 6
    b.prot.up(Event(EventType.SUSPECT, a.local_addr))          # B is next in line: it takes over at once
    assert b.prot.is_coord
    members = [b.local_addr, c.local_addr]
    for s in (b, c):
        s.install_view(members, 2, up=True)
    assert not c.prot._holding
    for s in (b, c):
        wait_until(lambda: len(s.top.messages) == 6)
        assert payloads(s) == [b"c%d" % k for k in range(6)]
    assert [x.header(SEQ_ID).tag.id for x in sent_with(c, FORWARD)[fwd_before:]] == list(range(6))
    wait_until(lambda: c.prot.forward_table_size == 0)


def test_the_hold_ends_after_max_hold_time_without_a_view(cluster):
    net, (a, b, c) = cluster(3, max_hold_time=200)
    c.prot.up(Event(EventType.SUSPECT, a.local_addr))
    b.prot.up(Event(EventType.SUSPECT, a.local_addr))
    c.send(mcast(b"late"))
    assert not b.top.messages
    for s in (b, c):
        wait_until(lambda: payloads(s) == [b"late"], timeout=5)
    assert not c.prot._holding


def test_forwards_that_reach_the_next_coordinator_early_are_kept_and_broadcast_when_it_takes_over(cluster):
    """A 2.12 member resends to B as soon as it suspects A; B, not yet the coordinator, keeps the FORWARDs (2.12
    drops them: JGRP-1449) and broadcasts them, in order, when it takes over."""
    _, (a, b, c) = cluster(3)
    b.tp.inject([_forward(c.local_addr, b.local_addr, k, b"c%d" % k) for k in range(4)])
    assert len(b.prot._pending) == 4 and not b.top.messages
    b.prot.up(Event(EventType.SUSPECT, a.local_addr))
    for s in (b, c):
        wait_until(lambda: len(s.top.messages) == 4)
        assert payloads(s) == [b"c%d" % k for k in range(4)]
    assert not b.prot._pending and b.prot.received_forwards == 4


def test_forwards_kept_by_a_member_that_does_not_become_coordinator_are_dropped(cluster):
    _, (a, b, c) = cluster(3)
    fwd = Message(b.local_addr, DIALECT.object_to_buffer(Message(None, b"x", c.local_addr)), c.local_addr)
    fwd.put_header(SEQ_ID, SequencerHeader(FORWARD, ViewId(c.local_addr, 0)))
    b.tp.inject([fwd])
    assert len(b.prot._pending) == 1
    b.install_view([a.local_addr, b.local_addr, c.local_addr, UUID.random()], 2, up=True)
    assert not b.prot._pending and b.prot.counters["pending_forwards_dropped"] == 1
    assert not sent_with(b, WRAPPED)


# ---- relaying at UNICAST's ordering point -------------------------------------------------------------------

def _tap(stack: FakeStack) -> ForwardTap:
    """The tap SEQUENCER.start() puts on UNICAST (the fake stack has no UNICAST: the test plays its part)."""
    tap = ForwardTap(stack.prot)
    stack.prot._tap = tap
    return tap


def _tags(stack: FakeStack, typ: int = WRAPPED) -> list[tuple]:
    return [(x.header(SEQ_ID).tag.coord_addr, x.header(SEQ_ID).tag.id) for x in sent_with(stack, typ)]


def test_the_coordinator_relays_the_forwards_it_takes_at_the_ordering_point_in_their_order(cluster):
    _, (a, b, c) = cluster(3)
    tap = _tap(a)
    other = Message(a.local_addr, b"a unicast", b.local_addr)
    run = [_forward(b.local_addr, a.local_addr, 0, b"b0"), other, _forward(c.local_addr, a.local_addr, 0, b"c0"),
           _forward(b.local_addr, a.local_addr, 1, b"b1")]
    assert tap.take(run) == [other]
    assert not sent_with(a, WRAPPED), "nothing is sent under UNICAST's lock"
    tap.drain()
    assert _tags(a) == [(b.local_addr, 0), (c.local_addr, 0), (b.local_addr, 1)]
    assert tap.relayed == 3 and tap.left == 0 and a.prot.received_forwards == 3
    for s in (a, b, c):
        wait_until(lambda: len(s.top.messages) == 3)
        assert payloads(s) == [b"b0", b"c0", b"b1"]


def test_a_forward_left_to_the_delivery_thread_is_overtaken_by_none(cluster):
    """One the tap does not relay (here: taken while A was not the coordinator) stays in its run; until the
    delivery thread has handled it the tap takes no FORWARD, and handling it first relays what the tap took
    before it."""
    _, (a, b, c) = cluster(3)
    tap = _tap(a)
    assert tap.take([_forward(b.local_addr, a.local_addr, 0, b"b0")]) == []          # taken, not relayed yet
    a.install_view([b.local_addr, a.local_addr, c.local_addr], 2, up=True)
    b1 = _forward(b.local_addr, a.local_addr, 1, b"b1")
    assert tap.take([b1]) == [b1] and tap.left == 1
    a.install_view([a.local_addr, b.local_addr, c.local_addr], 3, up=True)            # A is the coordinator again
    b2 = _forward(b.local_addr, a.local_addr, 2, b"b2")
    assert tap.take([b2]) == [b2] and tap.left == 2                                    # b1 waits: b2 may not pass
    a.tp.inject([b1, b2])                                                             # the delivery thread
    assert _tags(a) == [(b.local_addr, 0), (b.local_addr, 1), (b.local_addr, 2)]
    assert tap.left == 0 and tap.relayed == 1
    assert tap.take([_forward(b.local_addr, a.local_addr, 3, b"b3")]) == []          # taking again
    tap.drain()
    assert _tags(a)[-1] == (b.local_addr, 3)


def test_strangers_and_malformed_forwards_do_not_stop_the_tap(cluster):
    _, (a, b, c) = cluster(3)
    tap = _tap(a)
    stranger = _forward(UUID.random(), a.local_addr, 0)
    no_tag = Message(a.local_addr, b"x", b.local_addr)
    no_tag.put_header(SEQ_ID, SequencerHeader(FORWARD, None))
    b0 = _forward(b.local_addr, a.local_addr, 0, b"b0")
    assert tap.take([stranger, no_tag, b0]) == [stranger, no_tag] and tap.left == 0
    a.tp.inject([stranger, no_tag])
    tap.drain()
    assert _tags(a) == [(b.local_addr, 0)]
    assert a.prot.counters["dropped_forward_non_member"] == 1 and a.prot.counters["dropped_malformed"] == 1


def test_forwards_left_while_not_the_coordinator_go_out_before_later_ones(cluster):
    _, (a, b, c) = cluster(3)
    tap = _tap(b)
    left = tap.take([_forward(c.local_addr, b.local_addr, k, b"c%d" % k) for k in range(2)])
    assert len(left) == 2 and tap.left == 2
    b.prot.up(Event(EventType.SUSPECT, a.local_addr))              # B takes over; they still wait for delivery
    assert b.prot.is_coord
    later = tap.take([_forward(c.local_addr, b.local_addr, 2, b"c2")])
    assert len(later) == 1 and tap.left == 3
    b.tp.inject(left + later)
    for s in (b, c):
        wait_until(lambda: len(s.top.messages) == 3)
        assert payloads(s) == [b"c0", b"c1", b"c2"]
    assert tap.left == 0


def test_forwards_taken_by_a_coordinator_that_is_no_longer_one_are_kept_as_any(cluster):
    _, (a, b, c) = cluster(3)
    tap = _tap(a)
    assert tap.take([_forward(c.local_addr, a.local_addr, 0)]) == []
    a.install_view([b.local_addr, a.local_addr, c.local_addr], 2, up=True)
    tap.drain()
    assert len(a.prot._pending) == 1 and not sent_with(a, WRAPPED) and tap.relayed == 0


class _Receiver:
    """Keeps the payloads; with ``blocks`` receive() waits until released (an application slow to consume)."""

    def __init__(self, blocks: bool = False) -> None:
        self.payloads: list[bytes] = []
        self.blocks = blocks
        self.release = threading.Event()

    def receive(self, msg) -> None:
        self.payloads.append(bytes(msg.buffer))
        if self.blocks:
            self.release.wait(60)

    def view_accepted(self, view) -> None:
        pass


@pytest.mark.timeout(120)
def test_a_coordinator_whose_application_blocks_still_relays_the_members_multicasts(udp_group):
    """The jar's sequencer.xml, three jgpy members: while the coordinator's application is blocked in receive(),
    the others' multicasts still go out in total order, as in Java, whose UNICAST relays them on the thread that
    received them (relayed on the delivery thread, they waited behind that receive())."""
    props, cluster, _ = udp_group
    slow, rb, rc = _Receiver(blocks=True), _Receiver(), _Receiver()
    with Channel("sequencer.xml", "A", props, slow) as a, Channel("sequencer.xml", "B", props, rb) as b, \
            Channel("sequencer.xml", "C", props, rc) as c:
        try:
            for ch in (a, b, c):
                ch.connect(cluster)
            assert wait_all(lambda: all(len(ch.view) == 3 for ch in (a, b, c)), 30)
            b.send(None, b"first")
            assert wait_all(lambda: slow.payloads == [b"first"], 10)          # A's application now blocks
            sent = [b"b%d" % k for k in range(20)]
            for p in sent:
                b.send(None, p)
            c.send(None, b"c0")
            assert wait_all(lambda: len(rc.payloads) == 22 and len(rb.payloads) == 22, 10), \
                (len(rb.payloads), len(rc.payloads))
            assert rb.payloads == rc.payloads and [p for p in rc.payloads if p[:1] == b"b"] == sent
            assert slow.payloads == [b"first"]
            assert a.stack.find("SEQUENCER").dump_stats()["relayed_at_ordering_point"] >= 21
        finally:
            slow.release.set()


# ---- hostile input -----------------------------------------------------------------------------------------

def _forward(src, dest, seqno: int, data: bytes = b"x", orig=None) -> Message:
    m = Message(dest, DIALECT.object_to_buffer(Message(None, data, orig or src)), src)
    m.put_header(SEQ_ID, SequencerHeader(FORWARD, ViewId(orig or src, seqno)))
    return m


def test_hostile_forwards_are_counted_and_dropped(cluster):
    _, (a, b) = cluster(2)
    stranger = UUID.random()
    p = a.prot
    a.tp.inject([_forward(stranger, a.local_addr, 0)])
    assert p.counters["dropped_forward_non_member"] == 1
    a.tp.inject([_forward(b.local_addr, a.local_addr, 0, orig=stranger)])     # a tag naming somebody else
    bad_payload = Message(a.local_addr, b"\x00garbage", b.local_addr)
    bad_payload.put_header(SEQ_ID, SequencerHeader(FORWARD, ViewId(b.local_addr, 1)))
    no_tag = Message(a.local_addr, b"x", b.local_addr)
    no_tag.put_header(SEQ_ID, SequencerHeader(FORWARD, None))
    mcast_fwd = _forward(b.local_addr, None, 2)                                # a FORWARD must be a unicast
    unknown = Message(None, b"x", b.local_addr)
    unknown.put_header(SEQ_ID, SequencerHeader(77, ViewId(b.local_addr, 3)))
    a.tp.inject([bad_payload, no_tag, mcast_fwd, unknown])
    assert p.counters["dropped_malformed"] == 5
    assert not sent_with(a, WRAPPED) and not a.top.messages and p.received_forwards == 0


def test_spoofed_and_garbage_broadcasts_are_counted_and_dropped(cluster):
    _, stacks = cluster(4)
    a, b, c, d = stacks
    p = c.prot

    def bcast(src, seqno: int, data=b"x") -> Message:
        m = Message(None, data, src)
        m.put_header(SEQ_ID, SequencerHeader(BCAST, ViewId(src, seqno)))
        return m

    def wrapped(src, orig, seqno: int, payload: bytes) -> Message:
        m = Message(None, payload, src)
        m.put_header(SEQ_ID, SequencerHeader(WRAPPED, ViewId(orig, seqno)))
        return m
    stranger = UUID.random()
    inner = DIALECT.object_to_buffer(Message(None, b"y", b.local_addr))
    c.tp.inject([bcast(d.local_addr, 0),                           # D is a member, but not the sequencer
                 bcast(stranger, 0),
                 wrapped(d.local_addr, b.local_addr, 0, inner)])
    assert p.counters["dropped_not_sequencer"] == 3
    c.tp.inject([wrapped(a.local_addr, b.local_addr, 0, b"\x01\x01\x01\x00garbage"),
                 wrapped(a.local_addr, d.local_addr, 0, inner),    # the payload's src is not the tag's
                 wrapped(a.local_addr, stranger, 0,
                         DIALECT.object_to_buffer(Message(None, b"z", stranger))),
                 wrapped(a.local_addr, b.local_addr, 0, DIALECT.object_to_buffer(Message(c.local_addr, b"u",
                                                                                         b.local_addr)))])
    assert p.counters["dropped_malformed"] == 3 and p.counters["dropped_non_member_sender"] == 1
    assert not c.top.messages and p.delivered_bcasts == 0
    assert set(p._delivery_table) <= {a.local_addr, b.local_addr, c.local_addr, d.local_addr}
    c.tp.inject([wrapped(a.local_addr, b.local_addr, 0, inner), bcast(a.local_addr, 0)])
    assert payloads(c) == [b"y", b"x"]                              # the real ones still go through


def test_state_strangers_and_members_can_create_is_bounded(cluster):
    _, (a, b, c) = cluster(3, max_pending_forwards=50, delivery_table_max_size=100)
    for k in range(500):                                            # B is not the coordinator
        b.tp.inject([_forward(c.local_addr, b.local_addr, k)])
    assert len(b.prot._pending) == 50 and b.prot.counters["dropped_forward_not_coord"] == 450
    for k in range(500):                                            # strangers: nothing kept
        b.tp.inject([_forward(UUID.random(), b.local_addr, k)])
    assert len(b.prot._pending) == 50
    for k in range(0, 100_000, 97):                                 # a member's seqnos all over the place
        m = Message(None, DIALECT.object_to_buffer(Message(None, b"q", c.local_addr)), a.local_addr)
        m.put_header(SEQ_ID, SequencerHeader(WRAPPED, ViewId(c.local_addr, 10 + k)))
        b.tp.inject([m])
    assert all(len(w.los) <= 100 for w in b.prot._delivery_table.values())
    assert b.prot.gaps_given_up > 0


def test_a_receive_failure_is_counted_and_the_rest_of_the_batch_goes_up(cluster):
    """A message that fails in the middle of a batch (here: a header of another class filed under SEQUENCER's
    id, put there after decoding) is counted and dropped alone."""
    _, (a, b) = cluster(2)
    msgs = []
    for k, data in enumerate((b"ok0", b"boom", b"ok2")):
        m = Message(None, DIALECT.object_to_buffer(Message(None, data, a.local_addr)), a.local_addr)
        m.put_header(SEQ_ID, SequencerHeader(WRAPPED, ViewId(a.local_addr, k)) if data != b"boom"
                     else UnicastHeader(UnicastHeader.DATA, k, 1))
        msgs.append(m)
    b.tp.inject(msgs)
    assert payloads(b) == [b"ok0", b"ok2"] and b.prot._guard.failed == 1


# ---- config and decoder ------------------------------------------------------------------------------------

def test_the_jars_sequencer_xml_loads_unchanged():
    from jgpy.stack.protocol import Protocol
    from jgpy.stack.stack import ProtocolStack
    from jgpy.testing.cluster import stock
    stack = ProtocolStack(stock("sequencer.xml"), Protocol())
    names = [p.NAME for p in stack.protocols]
    assert names.index("pbcast.GMS") + 1 == names.index("SEQUENCER") == names.index("UFC") - 1
    seq = stack.protocols[names.index("SEQUENCER")]
    assert isinstance(seq, SEQUENCER) and seq.id == SEQ_ID


def test_the_decoder_shows_sequencer_headers_and_the_wrapped_message(capsys):
    """``python -m jgpy decode`` of a FORWARD: the header, and the message it carries decoded below it."""
    from jgpy.cli import main
    a, b = UUID.random(), UUID.random()
    fwd = Message(a, DIALECT.object_to_buffer(Message(None, b"payload!", b)), b)
    fwd.put_header(SEQ_ID, SequencerHeader(FORWARD, ViewId(b, 7)))
    assert main(["decode", DIALECT.encode_message(fwd).hex()]) == 0
    lines = capsys.readouterr().out.splitlines()
    text = "\n".join(lines)
    assert "SEQUENCER(26): SequencerHeader(type=FORWARD, tag=" in text, text
    assert any(line.strip().startswith("wrapped msg:") and f"src={b}" in line and "7061796c6f616421" in line
               for line in lines), text
    junk = Message(None, b"\x01\x01\x01\x00\x1e\xff", a)
    junk.put_header(SEQ_ID, SequencerHeader(WRAPPED, ViewId(b, 1)))
    main(["decode", DIALECT.encode_message(junk).hex()])
    assert "wrapped: NOT DECODABLE" in capsys.readouterr().out
    from jgpy.tools.dump import describe_datagram
    nested = Message(None, b"innermost")                    # hostile: wrapped in itself, deeper than the stack
    for k in range(1500):
        outer = Message(a, DIALECT.object_to_buffer(nested), b)
        outer.put_header(SEQ_ID, SequencerHeader(FORWARD, ViewId(b, k)))
        nested = outer
    lines = describe_datagram(DIALECT.encode_message(nested))
    assert sum("wrapped msg:" in line for line in lines) == 1


# ---- against Java's SEQUENCER (the 2.12.2 jar) -------------------------------------------------------------

JAVA_SEQUENCER = "org.jgroups.protocols.SEQUENCER"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from tests.conftest import require_java
    require_java()
    from tests.fakestack import JavaProtocolProbe
    return JavaProtocolProbe(tmp_path_factory.mktemp("seqprobe"))


def _java_lines(probe, local, members, commands: list[str], kind: str) -> list:
    from tests.fakestack import probe_addr, probe_view
    script = [f"local {probe_addr(local)}", f"view {probe_view(members)}", *commands]
    return [x for x in probe.run(JAVA_SEQUENCER, SEQ_ID, script) if x.kind == kind]


def _as_sent(sent, keep_src: bool) -> Message:
    """A message our fake transport sent, as it left SEQUENCER: without the transport header (and without the
    src the transport filled in, unless SEQUENCER set it itself)."""
    m = sent.msg.copy()
    m.remove_header(TP_ID)
    if not keep_src:
        m.src = None
    return m


@pytest.mark.interop
@pytest.mark.processes
def test_a_members_forward_is_javas_byte_for_byte(probe):
    from tests.fakestack import probe_msg
    a, b = UUID.random(), UUID.random()
    msgs = [Message(None, b"to all"), Message(None, b"oob", None, Message.OOB), Message(None, None)]
    java = _java_lines(probe, b, [a, b], [f"down {probe_msg(m.copy())}" for m in msgs], "down")
    s = FakeStack(SEQUENCER(), b, connect=True)
    try:
        s.install_view([a, b])
        for m in msgs:
            s.send(m)
        ours = [DIALECT.encode(_as_sent(x, False)) for x in sent_with(s, FORWARD)]
    finally:
        s.close()
    assert len(java) == 3 and [x.data for x in java] == ours


@pytest.mark.interop
@pytest.mark.processes
def test_the_coordinators_broadcasts_are_javas_byte_for_byte(probe):
    from tests.fakestack import probe_msg
    a, b = UUID.random(), UUID.random()
    own = Message(None, b"mine")
    fwd = _forward(b, a, 0, b"yours")
    java = _java_lines(probe, a, [a, b], [f"down {probe_msg(own.copy())}", f"up {probe_msg(fwd)}"], "down")
    s = FakeStack(SEQUENCER(), a, connect=True)
    try:
        s.install_view([a, b])
        s.send(own)
        s.tp.inject([fwd])
        bcast, wrapped = sent_with(s, BCAST), sent_with(s, WRAPPED)
        ours = [DIALECT.encode(_as_sent(bcast[0], False)), DIALECT.encode(_as_sent(wrapped[0], True))]
    finally:
        s.close()
    assert [x.data for x in java] == ours


@pytest.mark.interop
@pytest.mark.processes
def test_java_delivers_our_broadcasts_once_and_we_deliver_javas(probe):
    from tests.fakestack import probe_msg
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    s = FakeStack(SEQUENCER(), a, connect=True)
    try:
        s.install_view([a, b, c])
        s.tp.inject([_forward(b, a, k, b"b%d" % k) for k in range(3)])
        s.send(Message(None, b"a0"))
        out = [_as_sent(x, True) for x in s.tp.sent_where(lambda x: x.multicast)]
    finally:
        s.close()
    assert len(out) == 4
    java = _java_lines(probe, c, [a, b, c], [f"up {probe_msg(m)}" for m in out + out[:2]], "up")
    got = [DIALECT.decode(Message, x.data) for x in java]
    assert [(m.src, bytes(m.buffer)) for m in got] == [(b, b"b0"), (b, b"b1"), (b, b"b2"), (a, b"a0")]
    # and the other way: Java's coordinator wraps B's FORWARDs; our member C delivers each once
    java_down = _java_lines(probe, a, [a, b, c], [f"up {probe_msg(_forward(b, a, k, b'j%d' % k))}" for k in range(3)]
                            + [f"down {probe_msg(Message(None, b'ja'))}"], "down")
    r = FakeStack(SEQUENCER(), c, connect=True)
    try:
        r.install_view([a, b, c])
        msgs = [x.msg for x in java_down]
        for m in msgs:
            if m.src is None:
                m.src = a                                 # Java's transport fills it in
        r.tp.inject(msgs + msgs[:2])
        assert delivered(r) == [(b, b"j0"), (b, b"j1"), (b, b"j2"), (a, b"ja")]
        assert r.prot.duplicates == 2
    finally:
        r.close()


# ---- sequencer.xml in mixed clusters, journals held to total order by the checker ---------------------------

FORBIDDEN = {"gap", "duplicate", "lost", "lost_unicast", "duplicate_id", "lost_at_view_change", "lost_at_merge",
             "reorder", "inversion", "missing_self_delivery"}


class _Members:
    """Harness members by kind and rank (``J``: Java, ``p``: a jgpy process), all on sequencer.xml with journals,
    joining in order (the first is the coordinator)."""

    def __init__(self, kinds: str, java_nodes, run, udp_group) -> None:
        from jgpy.testing.java import PyNode
        self.props, self.cluster, _ = udp_group
        self.run = run
        self.nodes: list = []
        self._py: list = []
        for i, k in enumerate(kinds, 1):
            name = f"{k}{i}"
            if k == "J":
                node = java_nodes(name)
            else:
                node = PyNode(name=name)
                self._py.append(node)
            self.nodes.append(node)

    def connect(self) -> None:
        for node in self.nodes:
            node.call("connect", timeout=90, config="sequencer.xml", cluster=self.cluster, name=node.name,
                      props=self.props, receive="count", journal=str(self.run))
        assert wait_all(lambda: all(len(n.call("view")["members"]) == len(self.nodes) for n in self.nodes), 45)

    def close(self) -> None:
        for node in self._py:
            node.close()


def _received(node) -> int:
    return node.call("stats")["received"]


def _send_all(nodes, n: int, errors: list) -> list[threading.Thread]:
    def send(node) -> None:
        try:
            node.send(payload=node.name.encode(), count=n, numbered=True, timeout=300)
        except Exception as e:  # noqa: BLE001 - a killed member's call fails: recorded, judged by the test
            errors.append((node.name, repr(e)))
    threads = [threading.Thread(target=send, args=(node,), daemon=True) for node in nodes]
    for t in threads:
        t.start()
    return threads


def _sequencer_stats(node) -> dict:
    return node.protocol_stats()["SEQUENCER"]


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kinds", ["Jpp", "pJJ"], ids=["java-coordinator", "jgpy-coordinator"])
def test_mixed_cluster_delivers_one_total_order(kinds, spark, java_nodes, udp_group, tmp_path):
    """Three members multicast at the same time; every message goes through the coordinator (Java's or ours):
    the journals show every member delivering every message once, in one total order."""
    from jgpy.analysis import check_run
    run = tmp_path / "run=seq"
    c = _Members(kinds, java_nodes, run, udp_group)
    n = 1000
    try:
        c.connect()
        errors: list = []
        for t in _send_all(c.nodes, n, errors):
            t.join(120)
        assert not errors, errors
        assert wait_all(lambda: all(_received(x) == 3 * n for x in c.nodes), 90), [_received(x) for x in c.nodes]
        jgpy_stats = [_sequencer_stats(x) for x in c.nodes if x.name[0] == "p"]
        for node in reversed(c.nodes):
            node.call("disconnect", timeout=60)
    finally:
        c.close()
    coord_is_jgpy = kinds[0] == "p"
    if coord_is_jgpy:
        assert jgpy_stats[0]["received_forwards"] == 2 * n and jgpy_stats[0]["broadcast"] == 3 * n
        assert jgpy_stats[0]["relayed_at_ordering_point"] > 0      # as UNICAST released them, not on delivery
    else:
        assert all(s["forwarded"] == n and s["forward_table"] == 0 for s in jgpy_stats)
    res = check_run(run, spark=spark)
    assert res.total_order
    assert res.findings == [], [str(f) for f in res.findings]
    assert res.stats["numbered_deliveries"] == 9 * n


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("kinds", ["JpJ", "pJp"], ids=["java-coordinator-killed", "jgpy-coordinator-killed"])
def test_the_sequencing_coordinator_killed_mid_stream(kinds, spark, java_nodes, udp_group, tmp_path, figures):
    """Everybody multicasts; the coordinator is killed (SIGKILL) in the middle of it. The next member takes over
    the sequencing, the survivors resend what they forwarded and did not get back, and the journals show no
    loss, no duplicates and one total order."""
    import time

    from jgpy.analysis import check_run
    from jgpy.journal import mark_crash
    run = tmp_path / "run=seqkill"
    c = _Members(kinds, java_nodes, run, udp_group)
    n = 4000
    try:
        c.connect()
        victim, survivors = c.nodes[0], c.nodes[1:]
        errors: list = []
        # the victim sends a little (a harness answers one command at a time: its stats come once its send is
        # done), the survivors much: the kill comes once the victim relayed about a quarter of their messages
        threads = _send_all(survivors, n, errors) + _send_all([victim], n // 4, errors)
        deadline = time.monotonic() + 60
        while (at_kill := _received(victim)) < n // 4 + n // 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        crash_ns = time.monotonic_ns()
        victim.proc.kill()
        victim.proc.wait(timeout=10)
        mark_crash(run, victim.name, crash_ns)
        for t in threads:
            t.join(180)
        assert [e for e in errors if e[0] != victim.name] == []
        assert wait_all(lambda: all(len(x.call("view")["members"]) == 2 for x in survivors), 60)
        # every survivor gets both survivors' messages; the victim's as far as they went out
        assert wait_all(lambda: all(_received(x) >= 2 * n for x in survivors), 120), [_received(x) for x in survivors]
        assert n // 4 + n // 2 <= at_kill < n // 4 + 2 * n, at_kill          # mid-stream
        last = None
        for _ in range(50):                      # until nothing more comes
            now = [_received(x) for x in survivors]
            if now == last:
                break
            last = now
            time.sleep(0.5)
        figures("survivors' deliveries (2 x sent by survivors + the victim's)", sum(last) / len(last))
        figures("deliveries at the coordinator when it was killed", at_kill)
        # the jgpy survivor took over the sequencing (it relayed FORWARDs) or resent what it had forwarded
        seq = _sequencer_stats(next(x for x in survivors if x.name[0] == "p"))
        figures("jgpy survivor: FORWARDs relayed as the new coordinator", seq["received_forwards"])
        figures("jgpy survivor: FORWARDs sent beyond its own messages (resent)", seq["forwarded"] - n)
        if survivors[0].name[0] == "p":
            assert seq["received_forwards"] > 0, seq
        for node in reversed(survivors):
            node.call("disconnect", timeout=60)
    finally:
        c.close()
    res = check_run(run, spark=spark)
    assert res.total_order
    heir = survivors[0]
    bad = [str(f) for f in res.findings if (f.severity == "error" or f.kind in FORBIDDEN)
           and not (heir.name[0] == "J" and _own_stream_reordered(f, heir.name))]
    assert bad == [], bad
    assert res.stats["abrupt_ends"] == [c.nodes[0].name]


def _own_stream_reordered(finding, heir: str) -> bool:
    """A FIFO break of the stream of a Java member that took over the sequencing, and of no other: 2.12's
    SEQUENCER resends its forward table to itself (FORWARDs through UNICAST's loopback) while its new
    multicasts go out as BCASTs at once, so a Java heir still multicasting delivers its own messages out of
    send order, and everybody with it (the total order holds: the checker's inversion check). Seen in ~1 of
    18 runs: the heir was still sending when it took over. jgpy cannot repair it without leaving the order."""
    return finding.kind == "reorder" and bool(finding.examples) and \
        all(f"stream {heir}->*" in x for x in finding.examples)
