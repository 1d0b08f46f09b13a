"""The transport's receive path against hostile input: a malformed message is counted and dropped alone, failures
above are counted and logged rate-limited, and what strangers can make the transport remember stays bounded."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from jgpy import DIALECT, UUID, Message
from jgpy.headers import NakAckHeader, TpHeader, UnicastHeader
from jgpy.protocols import tp as tp_module
from jgpy.protocols.tp import TP, Loopback
from jgpy.stack.events import Event, EventType
from tests.fakestack import Collector, wait_until

CLUSTER = "tp-receive"
ME = UUID(100, 1)
PEER = UUID(200, 2)
SOURCE = ("127.0.0.1", 7800)


def _transport(up) -> TP:
    """A bare TP (no sockets) under ``up``, connected to CLUSTER: datagrams go in through receive_datagrams."""
    tp = TP()
    tp.id = 21
    tp.stack = SimpleNamespace(dialect=DIALECT, cluster_name=None, local_addr=ME)
    tp.up_prot = up
    tp.down(Event(EventType.SET_LOCAL_ADDRESS, ME))
    tp.down(Event(EventType.CONNECT, CLUSTER))
    return tp


def _msg(seqno: int, header=None) -> Message:
    m = Message(None, f"payload {seqno}".encode(), PEER)
    m.put_header(15, header if header is not None else NakAckHeader.msg(seqno)).put_header(21, TpHeader(CLUSTER))
    return m


def test_misfiled_header_drops_only_its_message(caplog):
    """A LIST of 5 with a UNICAST header under NAKACK's id in the middle: the 4 others go up in one batch, the bad
    one is counted (dump_stats) and logged once however often it comes."""
    top = Collector()
    tp = _transport(top)
    msgs = [_msg(i) for i in range(1, 6)]
    msgs[2] = _msg(3, UnicastHeader(0, 3, 1, True))
    bundle = DIALECT.encode_bundle(msgs, None, PEER)
    single = DIALECT.encode_message(_msg(9, UnicastHeader(1, 9)), True)
    with caplog.at_level(logging.WARNING, logger=tp.log.name):
        tp.receive_datagrams([bundle, single], [SOURCE, SOURCE], True)
        got = [m.get_header(15).seqno for m in top.messages]
        assert got == [1, 2, 4, 5] and len(top.batches) == 1
        stats = tp.dump_stats()
        assert stats["dropped_malformed_msgs"] == 2
        assert stats["msgs_received"] == 4 and stats["dropped_malformed"] == 0      # no datagram dropped whole
        for _ in range(50):
            tp.receive_datagrams([bundle], [SOURCE], True)
    assert tp.dump_stats()["dropped_malformed_msgs"] == 52
    assert len(top.messages) == 4 + 50 * 4
    logged = [r.getMessage() for r in caplog.records if "malformed message" in r.getMessage()]
    assert len(logged) == 1 and "UNICAST$UnicastHeader header under protocol id 15" in logged[0], logged


def test_a_truncated_list_is_dropped_whole_and_the_batch_goes_on():
    """An undecodable LIST cannot be resynchronised: its messages are all dropped (as Java's readMessageList does),
    the other datagrams of the batch go up."""
    top = Collector()
    tp = _transport(top)
    good = DIALECT.encode_bundle([_msg(1), _msg(2)], None, PEER)
    bad = DIALECT.encode_bundle([_msg(3), _msg(4)], None, PEER)[:-20]
    tp.receive_datagrams([bad, good], [SOURCE, SOURCE], True)
    assert [m.get_header(15).seqno for m in top.messages] == [1, 2]
    assert tp.dump_stats()["dropped_malformed"] == 1


class _Failing(Collector):
    def up_batch(self, msgs: list) -> None:
        raise RuntimeError("a protocol above failed")


def test_up_failures_are_counted_and_logged_rate_limited(caplog):
    tp = _transport(_Failing())
    data = DIALECT.encode_message(_msg(1), True)
    with caplog.at_level(logging.ERROR, logger=tp.log.name):
        for _ in range(30):
            tp.receive_datagrams([data], [SOURCE], True)
    assert tp.dump_stats()["up_errors"] == 30
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "failed passing 1 message(s) up" in tracebacks[0].getMessage()


def test_loopback_failures_are_counted_and_logged_rate_limited(caplog):
    tp = _transport(_Failing())
    lb = Loopback(tp, "jgpy-loopback-test")
    try:
        with caplog.at_level(logging.ERROR, logger=tp.log.name):
            for i in range(20):
                lb.queue.add(_msg(i))
                wait_until(lambda: tp.counters["up_errors"] == i + 1, timeout=5.0)
    finally:
        lb.stop()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "loopback delivery" in tracebacks[0].getMessage()


def test_what_strangers_make_the_transport_remember_is_bounded(monkeypatch):
    """Unicasts to 5000 made-up members (e.g. answers to made-up senders), mappings learned for 5000 strangers
    and views in between: the who-has table, the address cache, its removal times and the log's keys stay
    bounded."""
    monkeypatch.setattr(tp_module, "MAX_WHO_HAS", 100)
    top = Collector()
    tp = _transport(top)
    for i in range(5000):
        assert tp.physical_for(UUID(7, i)) is None
    assert len(tp._who_has) == 100
    assert len(tp._rl) <= 2                     # "no-phys" (and nothing keyed by a destination)
    assert len(top.events_of(EventType.GET_PHYSICAL_ADDRESS)) == 5000         # discovery was asked about each
    assert tp.physical_for(UUID(7, 4999)) is None
    assert len(top.events_of(EventType.GET_PHYSICAL_ADDRESS)) == 5000         # ... once per WHO_HAS_INTERVAL
    from jgpy import IpAddress, View, ViewId

    view = View(ViewId(ME, 1), [ME])
    for i in range(5000):
        tp.add_physical_address(UUID(8, i), IpAddress("127.0.0.2", 1000 + i % 50000))
        if i % 100 == 0:
            tp.down(Event(EventType.VIEW_CHANGE, view))
    assert len(tp.logical_addr_cache) <= tp.logical_addr_cache_max_size
    assert len(tp._removal_times) <= tp.logical_addr_cache_max_size


def test_who_has_asks_again_after_the_interval():
    top = Collector()
    tp = _transport(top)
    tp.physical_for(PEER)
    tp.physical_for(PEER)
    assert len(top.events_of(EventType.GET_PHYSICAL_ADDRESS)) == 1
    tp._who_has[PEER] -= tp_module.WHO_HAS_INTERVAL + 0.1         # as if asked that long ago
    tp.physical_for(PEER)
    assert len(top.events_of(EventType.GET_PHYSICAL_ADDRESS)) == 2
