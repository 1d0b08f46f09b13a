"""The up path's shortcuts: header-gated protocols share an ``UpGate`` (a batch skips those of them that find
no header of theirs in it), BARRIER's in-flight count, MERGE2's and STABLE's per-batch helpers. Each must
deliver exactly what the protocol-by-protocol path delivers."""

from __future__ import annotations

import random
import threading

import pytest

from jgpy._core.batch import UpGate, multicast_length, unknown_multicast_sources
from jgpy._core.address import UUID
from jgpy._core.headers import TpHeader
from jgpy._core.message import Message
from jgpy.protocols.barrier import BARRIER
from jgpy.stack.config import parse_xml
from jgpy.stack.events import Event, EventType
from jgpy.stack.protocol import Protocol
from jgpy.stack.stack import PROTOCOLS, ProtocolStack, register_protocol
from tests.fakestack import FakeStack, wait_until

GATED_IDS = (901, 902, 903, 904)


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
    """Handles (records) the messages with its header and passes the rest up: header-gated."""

    NAME = "GATED_RECORDER"
    gated = True

    def __init__(self) -> None:
        super().__init__()
        self.handled: list[list] = []
        self.calls = 0

    def up_gated(self) -> bool:
        return self.gated

    def up_batch(self, msgs: list) -> None:
        self.calls += 1
        mine, rest = self.split_mine(msgs)
        if mine:
            self.handled.append(mine)
        if rest:
            self.up_prot.up_batch(rest)


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


def _stack(gated: bool) -> ProtocolStack:
    # a run of two gated protocols, one that sees every batch, then a run of two gated protocols with a
    # pure pass-through (no up_batch of its own: bypassed) between them
    GatedRecorder.gated = gated
    xml = ('<config><UDP/><GATED_RECORDER id="901"/><GATED_RECORDER id="902"/><EVERY_BATCH_RECORDER/>'
           '<GATED_RECORDER id="903"/><PASS_THROUGH/><GATED_RECORDER id="904"/></config>')
    return ProtocolStack(parse_xml(xml), Top())


def _batch(rng: random.Random, senders: list) -> list:
    out = []
    for _ in range(rng.randint(1, 6)):
        m = Message(None, b"x" * rng.randint(0, 3), rng.choice(senders))
        for pid in GATED_IDS:
            if rng.random() < 0.15:
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


def test_gated_runs_deliver_exactly_what_protocol_by_protocol_delivers(recorders):
    gated, plain = _stack(True), _stack(False)
    assert isinstance(gated.protocols[1].up_batch.__self__, UpGate)
    assert not isinstance(getattr(plain.protocols[1].up_batch, "__self__", None), UpGate)
    rng = random.Random(1234)
    senders = [UUID.random() for _ in range(3)]
    for _ in range(400):
        batch = _batch(rng, senders)
        gated.transport.up_prot.up_batch(list(batch))
        plain.transport.up_prot.up_batch(list(batch))
    assert _observed(gated) == _observed(plain)
    assert sum(len(b) for b in gated.top.batches) > 0
    # the gates did skip: the bottom protocol of the gated stack was called only for batches with its header
    g901, p901 = gated.protocols[1], plain.protocols[1]
    assert p901.calls == 400 and g901.calls == len(g901.handled) < 400


def test_stock_stack_gates_and_a_message_nobody_handles_reaches_the_top():
    stack = ProtocolStack("udp.xml", Top(), {"jgroups.udp.mcast_port": "47778"})
    gates = {p.NAME for p in stack.protocols if isinstance(getattr(p.up_batch, "__self__", None), UpGate)}
    assert gates == {"PING", "FD_SOCK", "FD_ALL", "VERIFY_SUSPECT", "pbcast.NAKACK", "UNICAST", "pbcast.GMS"}
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
    gate = UpGate([11, 12], [lambda b: calls.append(("11", b)), lambda b: calls.append(("12", b))], after)
    plain, with12, with11 = Message(), Message(), Message()
    with12.put_header(12, TpHeader("x"))
    with11.put_header(11, TpHeader("x"))
    gate.up_batch([plain])
    assert after.batches == [[plain]] and calls == []
    gate.up_batch([plain, with12])
    gate.up_batch([with12, with11])
    assert calls == [("12", [plain, with12]), ("11", [with12, with11])]
    with pytest.raises(ValueError, match="1..32"):
        UpGate([], [], after)


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


def test_batch_helpers():
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    msgs = [Message(None, b"12", a), Message(b, b"123", a), Message(None, b"1", b), Message(None, None, c),
            Message(None, b"", a), Message(None, b"1234", b)]
    assert multicast_length(msgs) == 2 + 1 + 4
    assert unknown_multicast_sources(msgs, [a], set()) == [b, c]
    assert unknown_multicast_sources(msgs, {a}, {c}) == [b]
    assert unknown_multicast_sources(msgs, [a, b, c], set()) == []
