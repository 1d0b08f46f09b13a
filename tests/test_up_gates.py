"""The up path's shortcuts: protocols that need only some batches (``Protocol.up_needs``) share an ``UpGate``
(a batch skips those of them that do not need it), BARRIER's in-flight count, MERGE2's and STABLE's per-batch
helpers. Each must deliver exactly what the protocol-by-protocol path delivers."""

from __future__ import annotations

import random
import threading
import time

import pytest

from jgpy._core.batch import total_length, unknown_multicast_sources
from jgpy._core.upgate import UP_EVERY, UP_HEADER, UP_MULTICASTS, UP_UNICASTS, UpGate
from jgpy._core.address import UUID
from jgpy._core.headers import TpHeader
from jgpy._core.message import Message
from jgpy.protocols.barrier import BARRIER
from jgpy.stack.config import parse_xml
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int
from jgpy.stack.protocol import Protocol
from jgpy.stack.stack import PROTOCOLS, ProtocolStack, register_protocol
from tests.fakestack import FakeStack, wait_until

GATED = (1, 2, 3, 4, 5)                 # ids (plus a base) of the gated recorders


class Top(Protocol):
    NAME = "top"

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list] = []

    def up(self, evt):
        return None

    def up_batch(self, msgs):
        self.batches.append(list(msgs))


class GatedRecorder(Protocol):
    """Records the messages with its header and, if its property ``needs`` says so, the multicasts or unicasts
    of a batch; passes the rest up."""

    NAME = "GATED_RECORDER"
    gated = True                                  # False: claim to need every batch (the reference stack)
    needs = Property(to_int, UP_HEADER, "what up_needs() returns")

    def __init__(self) -> None:
        super().__init__()
        self.handled: list[list] = []
        self.calls = 0

    def up_needs(self) -> int:
        return self.needs if self.gated else UP_EVERY

    def up_batch(self, msgs: list) -> None:
        self.calls += 1
        wanted = [m for m in msgs if m.has_header(self.id) or (self.needs & UP_MULTICASTS and m.dest is None)
                  or (self.needs & UP_UNICASTS and m.dest is not None)]
        if wanted:
            self.handled.append(wanted)
        self.up_prot.up_batch(msgs)


class EveryBatchRecorder(Protocol):
    """Sees every batch (not gated)."""

    NAME = "EVERY_BATCH_RECORDER"

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list] = []

    def up_batch(self, msgs: list) -> None:
        self.batches.append(list(msgs))
        self.up_prot.up_batch(msgs)


class PassThrough(Protocol):
    NAME = "PASS_THROUGH"


@pytest.fixture
def recorders():
    register_protocol("GATED_RECORDER", f"{__name__}:GatedRecorder")
    register_protocol("EVERY_BATCH_RECORDER", f"{__name__}:EveryBatchRecorder")
    register_protocol("PASS_THROUGH", f"{__name__}:PassThrough")
    yield
    GatedRecorder.gated = True
    for name in ("GATED_RECORDER", "EVERY_BATCH_RECORDER", "PASS_THROUGH"):
        PROTOCOLS.pop(name, None)


def _stack(gated: bool, base: int) -> ProtocolStack:
    # a run of three gated protocols (one also wants multicasts), one that sees every batch, then a run of
    # two gated protocols (one also wants unicasts) with a pure pass-through (no up_batch of its own:
    # bypassed) between them
    GatedRecorder.gated = gated
    xml = (f'<config><UDP/><GATED_RECORDER id="{base + 1}"/><GATED_RECORDER id="{base + 2}"/>'
           f'<GATED_RECORDER id="{base + 5}" needs="3"/><EVERY_BATCH_RECORDER/><GATED_RECORDER id="{base + 3}"/>'
           f'<PASS_THROUGH/><GATED_RECORDER id="{base + 4}" needs="5"/></config>')
    stack = ProtocolStack(parse_xml(xml), Top())
    return stack


def _batch(rng: random.Random, senders: list, base: int) -> list:
    out = []
    kind = rng.choice(("multicasts", "unicasts", "mixed"))
    for _ in range(rng.randint(1, 6)):
        unicast = kind == "unicasts" or (kind == "mixed" and rng.random() < 0.5)
        m = Message(senders[0] if unicast else None, b"x" * rng.randint(0, 3), rng.choice(senders))
        for pid in GATED:
            if rng.random() < 0.15:
                pid += base
                m.put_header(pid, TpHeader(f"h{pid}"))
        out.append(m)
    return out


def _observed(stack: ProtocolStack) -> dict:
    """What every protocol handled and what reached the top, as message identities."""
    out = {}
    for p in stack.protocols[1:]:
        if isinstance(p, GatedRecorder):
            out[f"G{p.id}"] = [[id(m) for m in b] for b in p.handled]
        elif isinstance(p, EveryBatchRecorder):
            out["every"] = [[id(m) for m in b] for b in p.batches]
    out["top"] = [[id(m) for m in b] for b in stack.top.batches]
    return out


@pytest.mark.parametrize("base", [200, 900], ids=["ids-below-256", "ids-above-255"])    # two code paths
def test_gated_runs_deliver_exactly_what_protocol_by_protocol_delivers(recorders, base):
    stacks = []
    for gated in (True, False):
        stack = _stack(gated, base)
        stack.find_by_id = {p.id - base: p for p in stack.protocols[1:] if isinstance(p, GatedRecorder)}
        assert stack.find_by_id[5].needs == UP_HEADER | UP_MULTICASTS
        assert stack.find_by_id[4].needs == UP_HEADER | UP_UNICASTS
        stacks.append(stack)
    gated, plain = stacks
    assert isinstance(gated.protocols[1].up_batch.__self__, UpGate)
    assert not isinstance(getattr(plain.protocols[1].up_batch, "__self__", None), UpGate)
    rng = random.Random(1234)
    senders = [UUID.random() for _ in range(3)]
    for _ in range(600):
        batch = _batch(rng, senders, base)
        gated.transport.up_prot.up_batch(list(batch))
        plain.transport.up_prot.up_batch(list(batch))
    assert _observed(gated) == _observed(plain)
    assert sum(len(b) for b in gated.top.batches) > 0
    # the gates did skip: each gated protocol was called only for batches it needed
    for pid in GATED:
        g, p = gated.find_by_id[pid], plain.find_by_id[pid]
        assert p.calls == 600 and g.calls == len(g.handled) < 600


def test_stock_stack_gates_and_a_message_nobody_handles_reaches_the_top():
    stack = ProtocolStack("udp.xml", Top(), {"jgroups.udp.mcast_port": "47778"})
    gates = {p.NAME for p in stack.protocols if isinstance(getattr(p.up_batch, "__self__", None), UpGate)}
    assert gates == {"PING", "MERGE2", "FD_SOCK", "FD_ALL", "VERIFY_SUSPECT", "BARRIER", "pbcast.NAKACK", "UNICAST",
                     "pbcast.STABLE", "pbcast.GMS", "UFC", "MFC", "pbcast.STATE_TRANSFER"}      # not FRAG2: it counts all
    msg = Message(UUID.random(), None, UUID.random())
    msg.put_header(stack.transport.id, TpHeader("c"))
    stack.transport.up_prot.up_batch([msg])
    assert stack.top.batches == [[msg]]


def test_fd_all_counting_every_message_as_heartbeat_is_not_gated():
    xml = '<config><UDP/><PING/><FD_ALL msg_counts_as_heartbeat="true"/><VERIFY_SUSPECT/></config>'
    stack = ProtocolStack(parse_xml(xml), Top())
    assert not isinstance(getattr(stack.find("FD_ALL").up_batch, "__self__", None), UpGate)
    gate = stack.find("PING").up_batch.__self__
    assert "after=<FD_ALL>" in repr(gate)


def test_upgate_dispatch():
    calls = []
    after = EveryBatchRecorder()
    after.up_prot = Top()
    gate = UpGate([11, 12, 0], [UP_HEADER, UP_HEADER, UP_UNICASTS],
                  [lambda b: calls.append(("11", b)), lambda b: calls.append(("12", b)),
                   lambda b: calls.append(("unicasts", b))], after)
    plain, with12, with11, unicast = Message(), Message(), Message(), Message(UUID.random())
    with12.put_header(12, TpHeader("x"))
    with11.put_header(11, TpHeader("x"))
    gate.up_batch([plain])
    assert after.batches == [[plain]] and calls == []
    gate.up_batch([plain, with12])
    gate.up_batch([with12, with11])
    gate.up_batch([plain, unicast])
    gate.up_batch([unicast, with12])
    assert calls == [("12", [plain, with12]), ("11", [with12, with11]), ("unicasts", [plain, unicast]),
                     ("12", [unicast, with12])]
    with pytest.raises(ValueError, match="1..32"):
        UpGate([], [], [], after)


def test_barrier_close_waits_for_a_batch_in_flight():
    entered, release = threading.Event(), threading.Event()

    class Blocking(Protocol):
        def up_batch(self, msgs):
            entered.set()
            release.wait(5)

    s = FakeStack(BARRIER())
    barrier = s.prot
    barrier.up_prot = Blocking()
    t = threading.Thread(target=barrier.up_batch, args=([Message(None, b"m", UUID.random())],))
    t.start()
    try:
        assert entered.wait(5)
        closer = threading.Thread(target=barrier.close_barrier, args=(5.0,))
        closer.start()
        wait_until(lambda: barrier.closed, 5)
        closer.join(0.2)
        assert closer.is_alive()                 # still waiting for the batch in flight
        release.set()
        closer.join(5)
        assert not closer.is_alive()
    finally:
        release.set()
        t.join(5)
        barrier.up(Event(EventType.OPEN_BARRIER))
        s.stop()


def test_barrier_close_from_inside_a_batch_in_flight_waits_only_for_other_threads():
    """A thread that closes the barrier while it passes a multicast batch up itself (a receive thread delivering
    what it read, then a state request) does not wait for itself, as Java's BARRIER takes the closing thread out
    of its in-flight threads; another thread's batch in flight is still waited for."""
    other_in, other_release = threading.Event(), threading.Event()
    waited: list[float] = []

    class Up(Protocol):
        def up_batch(self, msgs):
            if msgs[0].buffer == b"other":
                other_in.set()
                other_release.wait(5)
            else:                                # closes the barrier from inside its own batch
                t0 = time.monotonic()
                barrier.close_barrier(5.0)
                waited.append(time.monotonic() - t0)

    s = FakeStack(BARRIER())
    barrier = s.prot
    barrier.up_prot = Up()
    try:
        barrier.up_batch([Message(None, b"self", UUID.random())])
        assert barrier.closed and waited and waited[0] < 1.0
        barrier.up(Event(EventType.OPEN_BARRIER))
        t = threading.Thread(target=barrier.up_batch, args=([Message(None, b"other", UUID.random())],))
        t.start()
        assert other_in.wait(5)
        threading.Timer(0.3, other_release.set).start()
        barrier.up_batch([Message(None, b"self", UUID.random())])
        assert 0.2 < waited[1] < 4.0             # waited for the other thread's batch, not for its own
        t.join(5)
    finally:
        other_release.set()
        barrier.up(Event(EventType.OPEN_BARRIER))
        s.stop()


def test_batch_helpers():
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    msgs = [Message(None, b"12", a), Message(b, b"123", a), Message(None, b"1", b), Message(None, None, c),
            Message(None, b"", a), Message(None, b"1234", b)]
    assert total_length(msgs, multicasts_only=True) == 2 + 1 + 4 and total_length(msgs) == 2 + 3 + 1 + 4
    assert unknown_multicast_sources(msgs, [a], set()) == [b, c]
    assert unknown_multicast_sources(msgs, {a}, {c}) == [b]
    assert unknown_multicast_sources(msgs, [a, b, c], set()) == []
