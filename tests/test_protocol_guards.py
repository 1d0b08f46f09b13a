"""Every protocol's receive loop against hostile input (issue 18): a message whose handling raises is
dropped alone, counted and logged rate-limited (one traceback, not one per message), and the per-peer tables
that strangers could grow stay bounded."""

from __future__ import annotations

import logging

import pytest

from jgpy import UUID, Message
from jgpy._core.headers import (EncryptHeader, FcHeader, FdHeader, GmsHeader, HeartbeatHeader, PingHeader,
                                StableHeader, StateHeader, VerifyHeader)
from jgpy._core.types import Digest, PingData
from jgpy.protocols import discovery
from jgpy.protocols.barrier import BARRIER
from jgpy.protocols.encrypt import ENCRYPT
from jgpy.protocols.fc import FC
from jgpy.protocols.fd import FD
from jgpy.protocols.fd_all import FD_ALL
from jgpy.protocols.flow_control import MFC, UFC
from jgpy.protocols.merge2 import MAX_MERGE_CANDIDATES, MERGE2
from jgpy.protocols.pbcast.gms import GMS, ViewHandler
from jgpy.protocols.pbcast.stable import STABLE
from jgpy.protocols.pbcast.state_transfer import STATE_TRANSFER
from jgpy.protocols.ping import PING
from jgpy.protocols.verify_suspect import VERIFY_SUSPECT
from jgpy.stack.events import Event, EventType
from tests.fakestack import FakeStack

BOOM = b"boom"

# protocol, the method its receive loop calls per message, a header of the protocol's own
LOOPS = [
    (PING, "_handle_msg", lambda: PingHeader(PingHeader.GET_MBRS_RSP, None)),
    (FD, "_handle_msg", lambda: FdHeader(FdHeader.HEARTBEAT_ACK, None, None)),
    (FD_ALL, "_heartbeat", HeartbeatHeader),
    (VERIFY_SUSPECT, "_handle_msg", lambda: VerifyHeader(VerifyHeader.I_AM_NOT_DEAD, None)),
    (GMS, "_handle_msg", lambda: GmsHeader(GmsHeader.VIEW_ACK)),
    (STABLE, "_handle_msg", lambda: StableHeader(StableHeader.STABLE_GOSSIP, None)),
    (STATE_TRANSFER, "_handle_msg", lambda: StateHeader(StateHeader.STATE_RSP)),
    (UFC, "_handle_credit_msg", lambda: FcHeader(FcHeader.REPLENISH)),
    (MFC, "_handle_credit_msg", lambda: FcHeader(FcHeader.REPLENISH)),
    (FC, "_handle_fc_msg", lambda: FcHeader(FcHeader.REPLENISH)),
    (ENCRYPT, "_control", lambda: EncryptHeader(EncryptHeader.KEY_REQUEST, None)),
]


@pytest.fixture
def stacks():
    made: list[FakeStack] = []

    def build(prot, members=()) -> FakeStack:
        s = FakeStack(prot, connect=True)
        s.install_view([s.local_addr, *members])
        made.append(s)
        return s

    yield build
    for s in made:
        s.close()


@pytest.mark.parametrize("cls,method,header", LOOPS, ids=[c.NAME for c, _, _ in LOOPS])
def test_a_message_that_fails_is_dropped_alone_counted_and_logged_once(stacks, caplog, cls, method, header):
    a = UUID.random()
    s = stacks(cls(), [a])
    handled = []

    def handler(msg, *args):
        if msg.buffer == BOOM:
            raise ValueError("a handler tripped over a crafted message")
        handled.append(msg.buffer)

    setattr(s.prot, method, handler)
    batch = []
    for i in range(50):
        for payload in (BOOM, b"ok%d" % i):
            m = Message(None, payload, a)
            m.put_header(s.prot.id, header())
            batch.append(m)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        s.tp.inject(batch)
    assert handled == [b"ok%d" % i for i in range(50)]
    stats = s.prot.dump_stats()
    assert stats["failed_msgs"] == 50
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "crafted message" in caplog.text


def test_fd_all_keeps_timestamps_of_members_only(stacks):
    a = UUID.random()
    s = stacks(FD_ALL(), [a])
    msgs = []
    for x in [UUID.random() for _ in range(500)] + [a]:
        m = Message(None, None, x, Message.OOB)
        m.put_header(s.prot.id, HeartbeatHeader())
        msgs.append(m)
    s.tp.inject(msgs)
    assert set(s.prot.timestamps()) == {a}


def test_verify_suspect_checks_members_only(stacks):
    a = UUID.random()
    s = stacks(VERIFY_SUSPECT(), [a])
    for _ in range(200):
        s.prot.up(Event(EventType.SUSPECT, UUID.random()))
    s.prot.up(Event(EventType.SUSPECT, a))
    assert s.prot.dump_stats()["pending"] == [str(a)] and s.prot.num_non_member_suspects == 200
    s.install_view([s.local_addr], 2)                          # a left: nothing to verify any more
    assert s.prot.dump_stats()["pending"] == []


def test_fd_ignores_suspect_messages_from_strangers_and_of_strangers(stacks):
    a, b, stranger = UUID.random(), UUID.random(), UUID.random()
    s = stacks(FD(), [a, b])
    forged = Message(None, None, stranger, Message.OOB)
    forged.put_header(s.prot.id, FdHeader(FdHeader.SUSPECT, [a], stranger))
    s.tp.inject([forged])
    assert s.top.events_of(EventType.SUSPECT) == [] and s.prot.num_suspect_msgs_ignored == 1
    named = Message(None, None, a, Message.OOB)
    named.put_header(s.prot.id, FdHeader(FdHeader.SUSPECT, [UUID.random(), b], a))
    s.tp.inject([named])
    assert [e.arg for e in s.top.events_of(EventType.SUSPECT)] == [b]


def test_merge2_remembers_a_bounded_number_of_strangers_and_keeps_one_round_pending(stacks):
    s = stacks(MERGE2())
    s.prot.is_coord = True
    msgs = [Message(None, b"x", UUID.random()) for _ in range(MAX_MERGE_CANDIDATES + 500)]
    s.tp.inject(msgs)
    assert len(s.prot.merge_candidates) == MAX_MERGE_CANDIDATES
    assert len(s.prot._fast_rounds) <= 1
    assert s.prot.counters["fast_triggers"] == MAX_MERGE_CANDIDATES + 500


def test_discovery_responses_of_one_round_are_bounded():
    rsps = discovery.Responses(2, 0, False)
    coord = UUID.random()
    rsps.add(PingData(coord, None, None, True, None, None), False)
    for _ in range(discovery.MAX_RESPONSES + 100):
        rsps.add(PingData(UUID.random(), None, None, False, None, None), False)
    assert len(rsps.rsps) == discovery.MAX_RESPONSES and rsps.dropped == 101
    rsps.add(PingData(coord, None, None, True, None, None), True)   # the member itself answers again: replaced
    assert rsps.rsps[-1].own_addr == coord and len(rsps.rsps) == discovery.MAX_RESPONSES


def test_stable_ignores_gossip_and_stability_from_strangers(stacks):
    a, stranger = UUID.random(), UUID.random()
    s = stacks(STABLE(), [a])
    d = Digest([(s.local_addr, 0, 5, 5), (a, 0, 5, 5)])
    for t in (StableHeader.STABLE_GOSSIP, StableHeader.STABILITY):
        m = Message(None, None, stranger, Message.OOB)
        m.put_header(s.prot.id, StableHeader(t, d))
        s.tp.inject([m])
    assert s.prot.counters["dropped_non_member"] == 2 and s.prot.votes == set()
    assert not [e for e in s.tp.down_events if e.type == EventType.STABLE]


def test_state_transfer_answers_members_only_and_takes_only_the_awaited_response(stacks):
    a, stranger = UUID.random(), UUID.random()
    s = stacks(STATE_TRANSFER(), [a])
    s.tp.clear()
    req = Message(s.local_addr, None, stranger)
    req.put_header(s.prot.id, StateHeader(StateHeader.STATE_REQ, 1, stranger))
    rsp = Message(s.local_addr, b"forged state", stranger)
    rsp.put_header(s.prot.id, StateHeader(StateHeader.STATE_RSP, 0, stranger, Digest([(a, 0, 99, 99)])))
    s.tp.inject([req, rsp])
    assert s.tp.sent_where() == [] and not s.tp.events_of(EventType.OVERWRITE_DIGEST)
    assert not s.top.events_of(EventType.GET_STATE_OK)
    assert s.prot.counters["state_reqs_dropped"] == 1 and s.prot.counters["state_rsps_dropped"] == 1


def test_barrier_holds_a_bounded_amount_while_closed(stacks):
    s = stacks(BARRIER())
    s.prot.max_held_bytes = 1_000_000
    s.prot.close_barrier()
    for _ in range(100):
        m = Message(None, None, UUID.random())
        m.set_buffer(bytes(60_000), 0, 1)                    # one byte of message, a 60 KB datagram
        s.tp.inject([m])
    stats = s.prot.dump_stats()
    assert stats["held_bytes"] <= 1_000_000 and stats["held"] < 20 and stats["dropped"] > 80
    s.prot.open_barrier()
    assert len(s.top.messages) == stats["held"] and s.prot.dump_stats()["held_bytes"] == 0


def test_the_view_handler_queue_is_bounded():
    class Impl:
        def handle_requests(self, requests):
            raise AssertionError("not started: requests only queue")

    gms = GMS()
    gms.impl = Impl()
    vh = ViewHandler(gms)
    vh._thread = type("Alive", (), {"is_alive": lambda self: True})()     # pretend the thread runs
    from jgpy.protocols.pbcast.gms import Request
    for _ in range(ViewHandler.MAX_QUEUED + 50):
        vh.add(Request(Request.JOIN, UUID.random(), False))
    assert vh.q.qsize() == ViewHandler.MAX_QUEUED and vh.dropped == 50
