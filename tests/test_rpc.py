"""MessageDispatcher / RpcDispatcher on a jgpy-only cluster: response modes, filters, anycast, a member leaving
during a call, the asyncio variant, and hostile input on the request/response path (the Java interop is
tests/test_rpc_interop.py)."""

from __future__ import annotations

import asyncio
import random
import struct
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Iterator

import pytest

from jgpy import AsyncChannel, Channel, Message, Receiver
from jgpy.blocks import (GroupRequest, JavaException, MessageDispatcher, RequestCorrelator, RequestOptions,
                         ResponseMode, RpcDispatcher, SuspectedError)
from jgpy.blocks.aio import AsyncRpcDispatcher
from jgpy.blocks.correlator import CORRELATOR_ID, REQ, RSP
from jgpy.errors import JgpyError
from jgpy.headers import RequestCorrelatorHeader
from jgpy.javaser import JavaSerializationError
from jgpy.testing import hostile
from jgpy.testing.cluster import IN_PROCESS, wait_all
from jgpy.stack.config import load_config
from jgpy.testing.java import private_tcp, udp_props, unique_group

pytestmark = pytest.mark.timeout(180)


class Server:
    def __init__(self, name):
        self.me = name
        self.release = threading.Event()

    def name(self):
        return self.me

    def value(self, n):
        return n

    def wait_release(self):
        self.release.wait(20)
        return self.me


class Collect(Receiver):
    def __init__(self):
        self.msgs = []

    def receive(self, msg):
        self.msgs.append(bytes(msg.buffer))


@contextmanager
def three_members(config, props: dict | None = None) -> Iterator[tuple]:
    """Three jgpy members A, B, C with RpcDispatchers (servers named after them); A's plain messages go to a
    Collect receiver. ``props``: the system properties (default: a private multicast group)."""
    props = props if props is not None else udp_props(*unique_group())
    cluster = f"rpc-{uuid.uuid4().hex[:8]}"
    chans = [Channel(config, n, props) for n in "ABC"]
    try:
        for c in chans:
            c.connect(cluster)
        assert wait_all(lambda: all(c.view is not None and len(c.view) == 3 for c in chans), 30)
        rec = Collect()
        disps = [RpcDispatcher(c, Server(c.name), receiver=rec if c.name == "A" else None) for c in chans]
        yield chans, disps, rec, props, cluster
    finally:
        for c in chans:
            c.close()


@pytest.fixture
def three():
    """three_members in one process (shared-loopback.xml: the jar's udp.xml above an in-process transport)."""
    with three_members(IN_PROCESS) as t:
        yield t


@pytest.fixture
def three_tcp():
    """three_members on the jar's tcp.xml, on a block of free ports of their own."""
    cfg, props, _ = private_tcp(load_config("tcp.xml"), 3)
    with three_members(cfg, props) as t:
        yield t


@pytest.fixture
def three_udp():
    """three_members on the jar's udp.xml (for tests that send datagrams to them)."""
    with three_members("udp.xml") as t:
        yield t


def test_modes_filters_anycast_and_plain_messages(three):
    (a, b, c), (da, db, dc), rec, _, _ = three
    assert {str(k): r.value for k, r in da.call_remote_methods(None, "name").items()} == {"A": "A", "B": "B", "C": "C"}
    maj = da.call_remote_methods(None, "name", options=RequestOptions(ResponseMode.GET_MAJORITY, 5000))
    assert maj.num_received >= 2
    first = da.call_remote_methods([b.address, c.address], "name", options=RequestOptions(ResponseMode.GET_FIRST))
    assert first.num_received >= 1 and set(map(str, first)) == {"B", "C"}

    class OnlyC:
        def __init__(self):
            self.got = False

        def is_acceptable(self, value, sender):
            self.got = self.got or value == "C"
            return value == "C"

        def need_more_responses(self):
            return not self.got
    filtered = da.call_remote_methods(None, "name", options=RequestOptions(rsp_filter=OnlyC()))
    assert [str(k) for k, r in filtered.items() if r.received] == ["C"]
    anycast = da.call_remote_methods([b.address, c.address], "name", options=RequestOptions(anycasting=True))
    assert {str(k): r.value for k, r in anycast.items()} == {"B": "B", "C": "C"}
    assert da.call_remote_method(b.address, "value", [123456789012]) == 123456789012
    with pytest.raises(JavaException, match="NoSuchMethodException"):
        da.call_remote_method(b.address, "value", [1, 2])                  # wrong number of arguments
    b.send(a.address, b"plain")                                             # not a call: goes to A's receiver
    assert wait_all(lambda: rec.msgs == [b"plain"], 10)
    assert not da.corr.requests and not db.corr.requests


def test_a_member_leaving_during_a_call_is_suspected(three):
    (a, b, c), (da, db, dc), _, _, _ = three
    req = da.call_remote_methods_with_future(None, "wait_release", options=RequestOptions(timeout=30000))
    assert wait_all(lambda: da.corr.requests, 5)
    db.server.release.set()
    da.server.release.set()
    t0 = time.monotonic()
    c.close()                                                               # C leaves without answering
    rsps = req.result()
    assert time.monotonic() - t0 < 20
    by = {str(k): r for k, r in rsps.items()}
    assert by["A"].value == "A" and by["B"].value == "B"
    assert by["C"].suspected and not by["C"].received
    with pytest.raises(SuspectedError):
        by["C"].get()
    assert not da.corr.requests


def test_message_dispatcher_with_a_function_handler(three):
    (a, b, _), (da, db, _), _, _, _ = three
    da.stop()
    db.stop()
    ma = MessageDispatcher(a, lambda msg: bytes(msg.buffer).upper())
    mb = MessageDispatcher(b, lambda msg: bytes(msg.buffer)[::-1])
    try:
        assert mb.send_message(Message(a.address, b"abc"), RequestOptions(timeout=5000)) == b"ABC"
        rsps = ma.cast_message(None, Message(None, b"xyz"))
        got = {str(k): r.value for k, r in rsps.items() if r.received}
        assert got["A"] == b"XYZ" and got["B"] == b"zyx"
        assert ma.send_message(Message(b.address, b"q"), RequestOptions(ResponseMode.GET_NONE)) is None
    finally:
        ma.stop()
        mb.stop()


def test_asyncio_rpc():
    props = udp_props(*unique_group())
    cluster = f"arpc-{uuid.uuid4().hex[:8]}"

    async def main():
        async with AsyncChannel("udp.xml", "A", props) as a, AsyncChannel("udp.xml", "B", props) as b:
            await a.connect(cluster)
            await b.connect(cluster)
            for _ in range(300):
                if len(a.view) == 2 and len(b.view) == 2:
                    break
                await asyncio.sleep(0.05)
            ra, rb = AsyncRpcDispatcher(a, Server("A")), AsyncRpcDispatcher(b, Server("B"))
            assert await ra.call_remote_method(b.address, "name") == "B"
            rsps = await ra.call_remote_methods(None, "name")
            assert sorted(r.value for r in rsps.values()) == ["A", "B"]
            many = await asyncio.gather(*(ra.call_remote_method(b.address, "value", [i]) for i in range(200)))
            assert many == list(range(200))
            with pytest.raises(TimeoutError):
                await ra.call_remote_method(b.address, "wait_release", timeout=200)
            rb.dispatcher.server.release.set()
            await b.send(a.address, b"plain")                               # still reaches A's message queue
            msg = await a.receive(timeout=10)
            assert msg.buffer == b"plain"
            assert not ra.dispatcher.corr.requests
    asyncio.run(main())


# ---- hostile input ---------------------------------------------------------------------------------------

def _call_stream(array_len: int) -> bytes:
    """A MethodCall stream whose argument array claims ``array_len`` elements (and holds none)."""
    mc = b"\x73\x72\x00\x1dorg.jgroups.blocks.MethodCall" + struct.pack(">qBH", 7873471327078957662, 0x0C, 0)
    mc += b"\x78\x70" + b"\x77\x04\x01\x00\x01x"
    arr = b"\x75\x72\x00\x13[Ljava.lang.Object;" + struct.pack(">qBH", -8012369246846506644, 2, 0) + b"\x78\x70"
    return b"\x02\xac\xed\x00\x05" + mc + arr + struct.pack(">i", array_len)


@pytest.mark.parametrize("payload", [
    b"\x02\xac\xed\x00\x05garbage",                       # not a stream
    b"\x02" + b"\xac\xed\x00\x05\x74\x00\x02hi",          # a String, not a MethodCall
    _call_stream(0x7FFFFFFF),                              # an absurd array length
    _call_stream(-5),
    b"\x02\xac\xed\x00\x05" + b"\x75\x72" * 40000,         # nesting without end
    b"\x12text",                                           # a tagged String
    b"",
], ids=["garbage", "string", "absurd-length", "negative-length", "deep", "tagged", "empty"])
def test_malformed_calls_are_answered_with_an_error_and_counted(three, payload):
    (a, b, _), (da, db, _), _, _, _ = three
    before = db.malformed_calls
    t0 = time.monotonic()
    with pytest.raises((JavaException, JavaSerializationError, JgpyError)):
        da.send_message(Message(b.address, payload), RequestOptions(timeout=5000))
    assert time.monotonic() - t0 < 5
    assert db.malformed_calls >= before + (1 if payload[:1] == b"\x02" and len(payload) > 1 else 0)
    assert da.call_remote_method(b.address, "name") == "B"                 # B is unharmed


def test_strangers_requests_and_unknown_responses_are_dropped_and_counted(three_udp):
    (a, b, _), (da, db, _), _, _, cluster = three_udp
    forger = hostile.Forger(cluster)
    rnd = random.Random(7)
    phys = b.stack.transport.physical_addr
    corr_hdr = lambda t, i: hostile.Hdr(CORRELATOR_ID, 71, struct.pack(">bq?h", t, i, True, CORRELATOR_ID))
    attacks = []
    for i in range(200):
        src = hostile.stranger(rnd)
        call = da._buffer("name", [], None)
        attacks.append(("req", forger.dgram(src, [corr_hdr(REQ, i), hostile.unicast_data(1, 1, True)], b.address,
                                            call)))
        attacks.append(("rsp", forger.dgram(hostile.stranger(rnd), [corr_hdr(RSP, i),
                                                                     hostile.unicast_data(1, 1, True)],
                                            b.address, b"\x12x")))
    sent = hostile.send_datagrams(attacks, (phys.host, phys.port))
    assert sent == {"req": 200, "rsp": 200}
    # a loaded machine may lose a few datagrams on loopback: nearly all must have arrived, and been dropped
    assert wait_all(lambda: db.corr.dropped_non_member_requests >= 190 and db.corr.dropped_unknown_responses >= 190,
                    15), db.corr.stats()
    assert db.corr.requests_handled == 0 and db.corr.responses_sent == 0        # no stranger got an answer
    assert da.call_remote_method(b.address, "name") == "B"
    assert not db.corr.requests


class _Sent:
    def __init__(self):
        self.msgs = []

    def __call__(self, msg):
        self.msgs.append(msg)


def _corr(members, max_outstanding=100_000, handler=None):
    from jgpy import DIALECT, UUID
    me = UUID(1, 1)
    sent = _Sent()
    corr = RequestCorrelator(sent, handler, DIALECT, lambda: me, lambda: members, max_outstanding)
    return corr, sent, me


def test_outstanding_requests_are_bounded():
    from jgpy import UUID
    peer = UUID(2, 2)
    corr, sent, me = _corr([UUID(1, 1), peer], max_outstanding=50)
    reqs = []
    for _ in range(50):
        r = GroupRequest(corr, corr.next_id(), [peer], RequestOptions())
        corr.send_request(r, Message(None, b"x"), None)
        reqs.append(r)
    extra = GroupRequest(corr, corr.next_id(), [peer], RequestOptions())
    with pytest.raises(JgpyError, match="max_outstanding"):
        corr.send_request(extra, Message(None, b"x"), None)
    assert len(corr.requests) == 50 and len(sent.msgs) == 50
    for r in reqs[:10]:
        r.cancel()
    assert len(corr.requests) == 40
    corr.stop()
    assert not corr.requests and all(r.done for r in reqs)


def test_a_request_goes_once_to_each_destination_and_a_failed_send_forgets_it():
    """send_request: one copy per destination (the last is the message itself), each with the REQ header; a
    GET_NONE request is not remembered; an exclusion list takes the multi-destination header; a send that
    raises leaves no request behind."""
    from jgpy import UUID
    from jgpy.headers import MultiDestinationHeader
    a, b, c = UUID(2, 2), UUID(3, 3), UUID(4, 4)
    corr, sent, me = _corr([UUID(1, 1), a, b, c])
    ids = [corr.next_id() for _ in range(3)]
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
    r = GroupRequest(corr, corr.next_id(), [a, b], RequestOptions())
    msg = Message(None, b"x")
    corr.send_request(r, msg, [a, b])
    assert [m.dest for m in sent.msgs] == [a, b] and sent.msgs[-1] is msg and sent.msgs[0] is not msg
    for m in sent.msgs:
        h = m.get_header(CORRELATOR_ID)
        assert (type(h), h.type, h.id, h.rsp_expected) == (RequestCorrelatorHeader, REQ, r.req_id, True)
    assert corr.requests == {r.req_id: r} and corr.stats()["requests_sent"] == 1
    n = GroupRequest(corr, corr.next_id(), [a], RequestOptions(ResponseMode.GET_NONE))
    corr.send_request(n, Message(None, b"y"), None)
    assert not sent.msgs[-1].get_header(CORRELATOR_ID).rsp_expected and n.req_id not in corr.requests
    x = GroupRequest(corr, corr.next_id(), [a, b], RequestOptions(exclusion_list=[c]))
    corr.send_request(x, Message(None, b"z"), None)
    h = sent.msgs[-1].get_header(CORRELATOR_ID)
    assert type(h) is MultiDestinationHeader and list(h.exclusion_list) == [c]

    def broken(m):
        raise OSError("down")
    corr._send = broken
    f = GroupRequest(corr, corr.next_id(), [a], RequestOptions())
    with pytest.raises(OSError):
        corr.send_request(f, Message(None, b"w"), [a])
    assert f.req_id not in corr.requests and corr.stats()["requests_sent"] == 3


def test_responses_are_matched_to_request_and_member():
    from jgpy import UUID
    peer, other = UUID(2, 2), UUID(3, 3)
    corr, sent, me = _corr([UUID(1, 1), peer, other])
    r = GroupRequest(corr, corr.next_id(), [peer], RequestOptions())
    corr.send_request(r, Message(None, b"x"), None)

    def rsp(src, rid, payload):
        m = Message(None, payload, src)
        m.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, rid, False, CORRELATOR_ID))
        return m
    assert corr.receive_message(rsp(peer, r.req_id + 1000, b"\x12x"))       # unknown id
    assert corr.receive_message(rsp(other, r.req_id, b"\x12x"))             # not asked
    assert corr.dropped_unknown_responses == 2 and not r.is_complete()
    assert corr.receive_message(rsp(peer, r.req_id, b"\x02\xac\xed\x00\x05\x75"))   # truncated stream
    assert corr.malformed_responses == 1 and r.is_complete()
    assert isinstance(r.results()[peer].value, JavaSerializationError)
    stranger_req = Message(None, b"x", UUID(9, 9))
    stranger_req.put_header(CORRELATOR_ID, RequestCorrelatorHeader(REQ, 5, True, CORRELATOR_ID))
    assert corr.receive_message(stranger_req)
    assert corr.dropped_non_member_requests == 1 and corr.requests_handled == 0
    foreign = Message(None, b"x", peer)
    foreign.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, 5, False, 204))   # another correlator's id
    assert not corr.receive_message(foreign)


@pytest.mark.parametrize("payload", [b"\x13" + bytes(100), b"\x13", b"", b"\x12x", b"\x02\xac\xed\x00\x05\x75",
                                     bytearray(b"\x13ab")])
def test_a_reading_caller_takes_an_answer_as_the_correlator_does(payload):
    """What a caller reading its own answers takes (``_consume``: a byte[] answer read in C) ends as the
    correlator's ``receive_message`` ends: the same value, the same counters; another member's, an unknown
    id's or an answer after the request was done too."""
    from jgpy import UUID
    peer, other = UUID(2, 2), UUID(3, 3)
    outcomes = []
    for way in ("consume", "correlator"):
        corr, sent, me = _corr([UUID(1, 1), peer, other])
        r = GroupRequest(corr, corr.next_id(), [peer], RequestOptions())
        corr.send_request(r, Message(None, b"x"), None)
        # (what the caller does not take goes on to the correlator's interceptor, as on a receive thread)
        take = (lambda m: r._consume(m) or corr.intercept(m)) if way == "consume" else corr.receive_message
        got = []
        for src, rid in ((other, r.req_id), (peer, r.req_id + 1000), (peer, r.req_id)):
            m = Message(None, payload, src)
            m.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, rid, False, CORRELATOR_ID))
            got.append(take(m))
        value = r.results()[peer].value
        r.cancel()
        m = Message(None, payload, peer)
        m.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, r.req_id, False, CORRELATOR_ID))
        got.append(take(m))                                              # after the request was done
        outcomes.append((got if way == "correlator" else None, repr(value) if isinstance(value, Exception) else value,
                         r.results()[peer].received, corr.stats()))
    (_, *consumed), (_, *general) = outcomes
    assert consumed == general
    assert outcomes[0][1] == (bytes(payload[1:]) if payload[:1] == b"\x13" else outcomes[0][1])


def _waiters(req, n, timeout_ms):
    """``n`` threads in ``req.wait(timeout_ms)``; their results land in the returned list."""
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(req.wait(timeout_ms)), daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return out, threads


def test_a_completing_response_wakes_every_waiter_once_and_runs_callbacks_once():
    """GroupRequest's latch: the answer that completes a request wakes all its waiters (each gives the latch back
    for the next), the done callbacks run exactly once, and later waits return at once."""
    from jgpy import UUID
    a, b = UUID(2, 2), UUID(3, 3)
    r = GroupRequest(None, 1, [a, b], RequestOptions(ResponseMode.GET_ALL, 10_000))
    calls: list = []
    r.add_done_callback(calls.append)
    out, threads = _waiters(r, 3, 10_000)
    time.sleep(0.1)
    assert r.receive_response("x", a) and not out and not calls        # one of two: not complete yet
    assert r.receive_response("y", b)
    for t in threads:
        t.join(5)
    assert out == [True, True, True] and calls == [r]
    assert r.wait(10_000) is True and calls == [r]
    assert r.results()[a].value == "x" and r.results()[b].value == "y"
    r.add_done_callback(calls.append)                                   # done already: called at once
    assert calls == [r, r]


def test_a_wait_times_out_and_cancel_or_suspicion_wake_the_waiters():
    from jgpy import UUID
    a = UUID(2, 2)
    r = GroupRequest(None, 1, [a], RequestOptions(ResponseMode.GET_ALL, 10_000))
    t0 = time.monotonic()
    assert r.wait(50) is False and 0.04 <= time.monotonic() - t0 < 5
    assert r.done and not r.results()[a].received
    assert r.receive_response("late", a) and not r.results()[a].received     # done: later answers dropped

    r2 = GroupRequest(None, 2, [a], RequestOptions(ResponseMode.GET_ALL, 10_000))
    out, threads = _waiters(r2, 2, 10_000)
    time.sleep(0.1)
    assert r2.cancel() is True
    for t in threads:
        t.join(5)
    assert out == [True, True] and not r2.results()[a].received        # woken: done (as before the latch)

    r3 = GroupRequest(None, 3, [a], RequestOptions(ResponseMode.GET_ALL, 10_000))
    out, threads = _waiters(r3, 1, 10_000)
    time.sleep(0.1)
    r3.suspect(a)
    threads[0].join(5)
    assert out == [True] and r3.results()[a].suspected


@pytest.mark.parametrize("mode,n,answers,suspects,complete", [
    (ResponseMode.GET_ALL, 3, 2, 0, False), (ResponseMode.GET_ALL, 3, 2, 1, True),
    (ResponseMode.GET_FIRST, 3, 0, 2, False), (ResponseMode.GET_FIRST, 3, 1, 0, True),
    (ResponseMode.GET_FIRST, 2, 0, 2, True),
    (ResponseMode.GET_MAJORITY, 4, 1, 1, False), (ResponseMode.GET_MAJORITY, 4, 2, 1, True),
    (ResponseMode.GET_ABS_MAJORITY, 4, 2, 2, False), (ResponseMode.GET_ABS_MAJORITY, 4, 3, 0, True),
    (ResponseMode.GET_MAJORITY, 1, 0, 1, True), (ResponseMode.GET_NONE, 2, 0, 0, True),
])
def test_a_request_is_complete_as_its_response_mode_says(mode, n, answers, suspects, complete):
    """Java's Request.responsesComplete: GET_ALL counts answers and suspicions, GET_FIRST one answer (or every
    member suspected), GET_MAJORITY a majority of both, GET_ABS_MAJORITY a majority of answers."""
    from jgpy import UUID
    members = [UUID(7, i) for i in range(1, n + 1)]
    r = GroupRequest(None, 1, members, RequestOptions(mode, 10_000))
    for m in members[:answers]:
        assert r.receive_response("v", m)
    for m in members[answers:answers + suspects]:
        r.suspect(m)
    assert r.is_complete() is complete
    assert r.wait(1 if not complete else 10_000) is complete         # (incomplete: a 1 ms wait times out)


def test_a_signal_handlers_exception_ends_a_wait():
    """The C latch wait gives the GIL up and still runs signal handlers, as threading.Lock.acquire does: an
    exception a handler raises ends the wait (a KeyboardInterrupt reaches a caller waiting for ever)."""
    import signal
    from jgpy import UUID

    class Alarm(Exception):
        pass

    def handler(signum, frame):
        raise Alarm

    old = signal.signal(signal.SIGALRM, handler)
    try:
        r = GroupRequest(None, 1, [UUID(2, 2)], RequestOptions(ResponseMode.GET_ALL, 20_000))
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        t0 = time.monotonic()
        with pytest.raises(Alarm):
            r.wait(20_000)                                           # (without the handler: False after 20 s)
        assert time.monotonic() - t0 < 5
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class _ThreadOf:
    """An RspFilter that records which thread handled each answer."""

    def __init__(self):
        self.threads: list[int] = []

    def is_acceptable(self, response, sender):
        self.threads.append(threading.get_ident())
        return True

    def need_more_responses(self):
        return True


def test_a_waiting_caller_handles_its_answers_on_its_own_thread(three_udp):
    """udp.xml (relay delivery): a synchronous caller reads its answers itself, so an answer that comes while it
    waits reaches it with no thread switch; callers in several threads at once (one reads, the others wait as
    usual) all get their answers. (An answer that comes while the caller handles another is read by the
    loop's threads: the socket is theirs during a batch; then the waker ends the caller's wait.)"""
    (a, b, c), (da, db, dc), _, _, _ = three_udp
    loop = a.stack.transport._loops[0]
    waits = loop.stats["guest_waits"]
    flt = _ThreadOf()
    threading.Timer(0.2, db.server.release.set).start()          # the caller waits by then
    threading.Timer(0.6, dc.server.release.set).start()
    rsps = da.call_remote_methods([b.address, c.address], "wait_release",
                                  options=RequestOptions(ResponseMode.GET_ALL, 10_000, rsp_filter=flt))
    assert sorted(rsps.get_results()) == ["B", "C"]
    assert len(flt.threads) == 2 and flt.threads[0] == threading.get_ident()
    assert loop.stats["guest_waits"] > waits
    errors: list = []

    def caller(k):
        try:
            for i in range(100):
                assert da.call_remote_method(b.address if i % 2 else c.address, "value", [k * 1000 + i]) == \
                    k * 1000 + i
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=caller, args=(k,), daemon=True) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert not da.corr.requests


def test_a_caller_reading_its_answers_survives_a_strangers_junk_and_forged_answers(three_udp):
    """While A's caller waits for B (and reads A's unicast socket itself), a stranger sends A random bytes,
    absurd datagrams and answers forged with the id of A's outstanding request: they are dropped and counted,
    the caller gets B's real answer, and A's receive threads and later calls are unharmed."""
    (a, b, _), (da, db, _), _, _, cluster = three_udp
    server = db.server
    forger = hostile.Forger(cluster)
    rnd = random.Random(11)
    phys = a.stack.transport.physical_addr
    loop = a.stack.transport._loops[0]
    out: list = []
    t = threading.Thread(target=lambda: out.append(da.call_remote_method(b.address, "wait_release", timeout=20_000)),
                         daemon=True)
    t.start()
    assert wait_all(lambda: len(da.corr.requests) == 1, 10)
    rid = next(iter(da.corr.requests))
    waits = loop.stats["guest_waits"]
    corr_hdr = hostile.Hdr(CORRELATOR_ID, 71, struct.pack(">bq?h", RSP, rid, False, CORRELATOR_ID))
    attacks = [("forged-rsp", forger.dgram(hostile.stranger(rnd), [corr_hdr, hostile.unicast_data(1, 1, True)],
                                           a.address, b"\x12x")) for _ in range(100)]
    attacks += list(hostile.random_bytes(rnd, 100)) + list(hostile.absurd(forger, rnd, False, a.address))
    dropped0 = da.corr.dropped_unknown_responses
    hostile.send_datagrams(attacks, (phys.host, phys.port))
    assert wait_all(lambda: da.corr.dropped_unknown_responses - dropped0 >= 90, 15), da.corr.stats()
    assert t.is_alive() and not out                              # the forgeries answered nothing
    assert loop.stats["guest_waits"] > waits                     # the caller read them itself and waited again
    server.release.set()
    t.join(20)
    assert out == ["B"]
    assert da.call_remote_method(b.address, "value", [7]) == 7
    assert loop.running and loop.stats["handler_errors"] == 0


def test_a_nested_call_from_an_oob_request_does_not_deliver_on_its_waiting_thread(three_udp):
    """A's OOB request handler makes a synchronous call of its own: it gets its answer (as the guest reader:
    through the OOB queue, the answer would wait behind this very handler), and another OOB request that comes
    meanwhile, read by the waiting handler's thread or not, runs after the handler, not nested inside it."""
    (a, b, c), (da, db, dc), _, _, _ = three_udp
    depth = [0]
    log: list = []

    def nested():
        depth[0] += 1
        try:
            log.append(("nested", depth[0]))
            return da.call_remote_method(c.address, "wait_release", timeout=20_000)
        finally:
            depth[0] -= 1

    def record():
        log.append(("record", depth[0]))
        return "r"
    da.server.nested, da.server.record = nested, record
    oob = RequestOptions(ResponseMode.GET_ALL, 20_000, flags=Message.OOB)
    first = db.call_remote_method_with_future(a.address, "nested", options=oob)
    assert wait_all(lambda: log == [("nested", 1)] and dc.corr.requests_handled >= 1, 10), log
    second = db.call_remote_method_with_future(a.address, "record", options=oob)
    time.sleep(0.3)
    assert log == [("nested", 1)]                                 # waits behind the handler, not inside it
    dc.server.release.set()
    assert first.result(20)[a.address].value == "C"
    assert second.result(20)[a.address].value == "r"
    assert log == [("nested", 1), ("record", 0)]


def _nested_caller(da, target, method: str, log: list, rsp_filter=None):
    """A server method for A that calls ``method`` on ``target`` synchronously (OOB, with ``rsp_filter``) and
    logs the result."""
    def nested():
        try:
            log.append(da.call_remote_method(target, method, options=RequestOptions(
                ResponseMode.GET_ALL, 15_000, flags=Message.OOB, rsp_filter=rsp_filter)))
        except Exception as e:  # noqa: BLE001 - the test reads what happened
            log.append(e)
        return log[-1]
    return nested


def _assert_a_nested_call_gets_its_answer(a, c, da, db, rsp_filter=None) -> None:
    """B's OOB request makes A's handler call C synchronously: the nested call gets C's answer, long before its
    15 s timeout, and so does B."""
    log: list = []
    da.server.nested = _nested_caller(da, c.address, "name", log, rsp_filter)
    oob = RequestOptions(ResponseMode.GET_ALL, 20_000, flags=Message.OOB)
    t0 = time.monotonic()
    rsp = db.call_remote_methods([a.address], "nested", options=oob)
    assert rsp[a.address].value == "C" and log == ["C"], (rsp, log)
    assert time.monotonic() - t0 < 10


def test_a_nested_call_from_an_oob_request_gets_its_answer_on_tcp(three_tcp):
    """tcp.xml (no guest reader): A's OOB request handler calls C synchronously. C's answer comes up on a
    receive thread while the OOB queue is busy with that very handler: it is handled there, not queued behind
    the handler (where it waited until the nested call timed out)."""
    (a, b, c), (da, db, dc), _, _, _ = three_tcp
    _assert_a_nested_call_gets_its_answer(a, c, da, db)
    assert da.corr.stats()["outstanding"] == 0


class _RecordingFilter:
    """An RspFilter that accepts everything and records the threads it ran on."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def is_acceptable(self, response, sender) -> bool:
        self.threads.append(threading.current_thread().name)
        return True

    def need_more_responses(self) -> bool:
        return True


def test_a_nested_call_with_a_response_filter_from_an_oob_request_gets_its_answer_on_tcp(three_tcp):
    """tcp.xml: A's OOB request handler calls C synchronously with a response filter. The filter is application
    code, so C's answer is not handled on the receive thread that read it; it is handed to the waiting caller,
    which runs the filter on its own thread (it waited in the OOB queue behind that very caller until the nested
    call timed out)."""
    (a, b, c), (da, db, dc), _, _, _ = three_tcp
    flt = _RecordingFilter()
    _assert_a_nested_call_gets_its_answer(a, c, da, db, flt)
    assert len(flt.threads) == 1 and flt.threads[0].startswith("jgpy-oob"), flt.threads
    assert da.corr.stats()["outstanding"] == 0


def test_answers_to_a_filtered_call_are_handled_by_its_waiting_caller(three_tcp):
    """tcp.xml: a filtered call to two members from an ordinary thread: both answers are handed to the caller,
    whose filter sees each once, on its own thread; a future with a filter that nobody waits on is completed by
    the OOB thread, as before."""
    (a, b, c), (da, db, dc), _, _, _ = three_tcp
    flt = _RecordingFilter()
    rsps = da.call_remote_methods([b.address, c.address], "name", options=RequestOptions(
        ResponseMode.GET_ALL, 10_000, rsp_filter=flt))
    assert sorted(r.value for r in rsps.values()) == ["B", "C"]
    assert flt.threads == [threading.current_thread().name] * 2, flt.threads
    flt2 = _RecordingFilter()
    fut = da.call_remote_method_with_future(b.address, "name", options=RequestOptions(
        ResponseMode.GET_ALL, 10_000, rsp_filter=flt2))
    assert wait_all(lambda: flt2.threads, 10)
    assert flt2.threads[0].startswith("jgpy-oob"), flt2.threads
    assert fut.result(10)[b.address].value == "B"


def test_a_filtered_answer_read_before_its_caller_waits_is_handed_to_it():
    """reserve(): a synchronous caller counts itself before its request leaves, so an answer read before it waits
    is handed to it (the OOB queue may hold the caller's own OOB handler); with nobody waiting, intercept leaves
    the answer to the OOB thread. An answer from a member the request did not go to is not handed over (the
    usual way drops it), so it cannot take a member's place; answers waiting for the caller are bounded (no
    more than the request has members: the rest go the usual way)."""
    from jgpy import DIALECT, UUID
    from jgpy.blocks.correlator import marshal_value
    peer, stranger = UUID(2, 2), UUID(9, 9)
    corr, _, _ = _corr([UUID(1, 1), peer])
    flt = _RecordingFilter()
    opts = RequestOptions(ResponseMode.GET_ALL, 10_000, rsp_filter=flt)

    def rsp(src, rid):
        m = Message(None, marshal_value("v", DIALECT), src)
        m.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, rid, False, CORRELATOR_ID))
        return m
    free = GroupRequest(corr, corr.next_id(), [peer], opts)
    corr.send_request(free, Message(None, b"x"), None)
    assert corr.intercept(rsp(peer, free.req_id)) is False           # nobody waits: for the OOB thread
    r = GroupRequest(corr, corr.next_id(), [peer], opts)
    r.reserve()
    corr.send_request(r, Message(None, b"x"), None)
    assert [corr.intercept(rsp(stranger, r.req_id)) for _ in range(100)] == [False] * 100   # not its member
    assert r._inbox == [] and flt.threads == []
    assert corr.receive_message(rsp(stranger, r.req_id))             # the usual way: dropped and counted
    assert corr.dropped_unknown_responses == 1 and flt.threads == []
    assert corr.intercept(rsp(peer, r.req_id)) is True                # its member's: handed to the caller
    assert [corr.intercept(rsp(peer, r.req_id)) for _ in range(100)] == [False] * 100   # bounded
    assert len(r._inbox) == 1 and flt.threads == []                   # not run on the reading thread
    assert r.wait(10_000) is True and r.results()[peer].value == "v"
    assert flt.threads == [threading.current_thread().name]


def test_a_blocking_done_callback_does_not_hold_up_the_answers_after_it(three_tcp):
    """tcp.xml: an answer handled on B's connection's receive thread completes a future whose done callback
    blocks for 1.5 s; the callback runs on the OOB thread, not there, so the answer to the next call over the
    same connection is read at once (the receive thread would read nothing while it ran the callback)."""
    (a, b, c), (da, db, dc), _, _, _ = three_tcp
    ran: list = []
    fut = da.call_remote_method_with_future(b.address, "wait_release", options=RequestOptions(
        ResponseMode.GET_ALL, 20_000, flags=Message.OOB))
    fut.add_done_callback(lambda r: (ran.append(threading.current_thread().name), time.sleep(1.5)))
    assert wait_all(lambda: db.corr.requests_handled >= 1, 10)
    db.server.release.set()
    assert wait_all(lambda: ran, 10)
    t0 = time.monotonic()
    assert da.call_remote_method(b.address, "name", timeout=10_000) == "B"
    assert time.monotonic() - t0 < 1.0, ran
    assert fut.result(10)[b.address].value == "B"


def test_a_nested_call_from_an_oob_request_gets_its_answer_while_another_thread_is_the_guest(three_udp):
    """udp.xml: A's own caller waits for C (and reads A's unicast socket: it is the guest) when A's OOB request
    handler calls C as well. That nested call cannot read (one guest at a time); its answer, read by the guest,
    is not the guest's: it is handled on the guest's thread, not queued behind the handler that waits for it."""
    (a, b, c), (da, db, dc), _, _, _ = three_udp
    out: list = []
    t = threading.Thread(target=lambda: out.append(da.call_remote_method(c.address, "wait_release", timeout=20_000)),
                         daemon=True)
    t.start()
    assert wait_all(lambda: dc.corr.requests_handled >= 1 and len(da.corr.requests) == 1, 10)
    loop = a.stack.transport._loops[0]
    assert wait_all(lambda: loop.stats["guest_waits"] >= 1, 10), loop.stats
    _assert_a_nested_call_gets_its_answer(a, c, da, db)
    assert t.is_alive() and not out                              # the guest still waits for its own answer
    dc.server.release.set()
    t.join(20)
    assert out == ["C"]


def test_an_answer_handled_by_another_thread_wakes_the_reading_caller():
    """The caller reads its answers (read_while), but another thread completes the request: the request's
    waker ends the read at once, not when the reader's poll would."""
    from jgpy import UUID
    peer = UUID(2, 2)
    corr, _, _ = _corr([UUID(1, 1), peer])
    woken = threading.Event()
    reads: list = []

    def read_while(pending, timeout, consume):
        reads.append(timeout)
        deadline = time.monotonic() + 30
        while pending() and time.monotonic() < deadline:
            woken.wait(30)                       # a reader asleep in epoll_wait with a 30 s poll
            woken.clear()
        return True

    corr.read_while, corr.wake_reader = read_while, woken.set
    r = GroupRequest(corr, corr.next_id(), [peer], RequestOptions(ResponseMode.GET_ALL, 20_000))
    corr.send_request(r, Message(None, b"x"), None)
    threading.Timer(0.1, r.receive_response, ("v", peer)).start()
    t0 = time.monotonic()
    assert r.wait(20_000) is True and r.results()[peer].value == "v"
    assert time.monotonic() - t0 < 5 and reads and 19 < reads[0] <= 20


def test_a_filter_may_read_the_request_while_it_decides():
    """The request's lock is re-entrant, as the Condition's was: an RspFilter that looks at the request does not
    deadlock the receive thread."""
    from jgpy import UUID
    a, b = UUID(2, 2), UUID(3, 3)
    box: list = []

    class Flt:
        def is_acceptable(self, response, sender):
            return not box[0].is_complete()

        def need_more_responses(self):
            return len(box[0].results().get_results()) < 1

    r = GroupRequest(None, 1, [a, b], RequestOptions(ResponseMode.GET_ALL, 10_000, rsp_filter=Flt()))
    box.append(r)
    assert r.receive_response("x", a)
    assert r.wait(5_000) is True and r.results()[a].value == "x" and not r.results()[b].received


def test_a_server_finds_a_calls_method_once_and_remembers_a_bounded_number_of_lookups(monkeypatch):
    """A call's method is looked up once per (name, mode, types, arity): an unmarked method's signature check
    (inspect.signature) does not run for every call; what callers can make it remember is bounded, and a
    method that is not there is not remembered."""
    from jgpy.blocks import MethodCall, rpc
    from jgpy.blocks.rpc import NoSuchMethodError, _MethodTable

    checks = []
    real_fits = rpc._fits
    monkeypatch.setattr(rpc, "_fits", lambda fn, n: checks.append(n) or real_fits(fn, n))
    table = _MethodTable(Server("S"))

    def find(mc):
        return table.find(mc.name, mc.mode, mc.types, mc.args)

    for _ in range(3):
        assert find(MethodCall.old("value", [1]))(7) == 7
    assert checks == [1]
    assert find(MethodCall.with_types("value", [1], ["int"]))(8) == 8 and checks == [1, 1]
    for _ in range(2):
        with pytest.raises(NoSuchMethodError):
            find(MethodCall.old("value", [1, 2]))           # wrong arity: checked each time, not remembered
    assert checks == [1, 1, 2, 2]
    for i in range(rpc.MAX_REMEMBERED_LOOKUPS * 3):              # a caller varying the types: bounded
        find(MethodCall.with_types("value", [i], [f"my.Type{i}"]))
    assert len(table._found) <= rpc.MAX_REMEMBERED_LOOKUPS
