"""FC (the older credit-based flow control) in a fake stack (tests/fakestack.py), against Java's own FC run in a
probe (same credit messages, same payload types, same blocking and credit requests), and in real clusters: a fast
sender and a slow receiver lose nothing, jgpy-only and mixed with a Java member."""

from __future__ import annotations

import tempfile
import threading
import time
import uuid

import pytest

from jgpy import DIALECT, Channel, Message, Receiver, UUID
from jgpy._core.jg212 import JavaObject, object_from_buffer, object_to_buffer
from jgpy.errors import ConfigError
from jgpy.headers import FcHeader
from jgpy.protocols.fc import FC, parse_block_times
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import stock, wait_all
from jgpy.testing.java import udp_props, unique_group
from tests.fakestack import FakeStack, JavaProtocolProbe, as_java_sent, probe_msg, probe_view, wait_until

pytestmark = pytest.mark.timeout(120)

PID = 20                         # FC's protocol id
OOB, NO_FC = Message.OOB, Message.NO_FC
JAVA_FC = "org.jgroups.protocols.FC"
REPLENISH, CREDIT_REQUEST = FcHeader.REPLENISH, FcHeader.CREDIT_REQUEST


def fc(max_credits=10000, min_threshold=0.6, max_block_time=300, **kw) -> FC:
    p = FC()
    p.max_credits, p.min_threshold, p.max_block_time = max_credits, min_threshold, max_block_time
    for k, v in kw.items():
        setattr(p, k, v)
    return p


@pytest.fixture
def stacks():
    made: list[FakeStack] = []

    def make(prot, local_addr=None, members=None, **kw) -> FakeStack:
        kw.setdefault("cluster_name", "fctest")
        s = FakeStack(prot, local_addr, **kw)
        s.connect()
        if members:
            s.install_view([s.local_addr if m is None else m for m in members])
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def is_fc(htype):
    return lambda x: x.msg.has_header(PID) and x.msg.get_header(PID).type == htype


def credit_of(sent) -> JavaObject:
    return object_from_buffer(sent.msg.payload, True)


def sent_credits(s: FakeStack) -> dict:
    """{member: credits we have left with it} (FC's dump_stats "senders")."""
    return {str(k): v for k, v in s.prot.dump_stats()["senders"].items()}


def received_credits(s: FakeStack) -> dict:
    """{sender: credits it has left with us} (FC's dump_stats "receivers")."""
    return {str(k): v for k, v in s.prot.dump_stats()["receivers"].items()}


def by_name(d: dict) -> dict:
    return {str(k): v for k, v in d.items()}


def credit_request_from(src, dest, left: int, java_type="Long") -> Message:
    m = Message(dest, object_to_buffer(JavaObject(java_type, left)), src)
    m.put_header(PID, FcHeader(CREDIT_REQUEST))
    return m


def data_from(src, n: int, dest=None, flags=0) -> Message:
    return Message(dest, b"d" * n, src, flags)


def replenish_from(src, credits: int, java_type="Integer") -> Message:
    m = Message(None, object_to_buffer(JavaObject(java_type, credits)), src, OOB)
    m.put_header(PID, FcHeader(REPLENISH))
    return m


class Sender:
    """Sends ``msg`` down a fake stack in its own thread (the application's sending thread)."""

    def __init__(self, stack: FakeStack, msg: Message):
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.elapsed = None

        def run():
            stack.send(msg)
            self.elapsed = time.monotonic() - self.t0
            self.done.set()
        self.thread = threading.Thread(target=run, name="app-sender", daemon=True)
        self.thread.start()

    def wait(self, timeout=5.0) -> bool:
        return self.done.wait(timeout)


# ------------------------------------------------------------------------------------------------
# sending side
# ------------------------------------------------------------------------------------------------

def test_credits_spent_per_member(stacks):
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    s = stacks(fc(), a, [None, b, c], loopback=False)
    s.send(Message(b, b"x" * 4000))                      # unicast: only B's credit
    assert sent_credits(s) == by_name({a: 10000, b: 6000, c: 10000}) and s.prot.lowest_credit == 6000
    s.send(Message(None, b"x" * 1000))                   # multicast: everybody's, ours included
    assert sent_credits(s) == by_name({a: 9000, b: 5000, c: 9000}) and s.prot.lowest_credit == 5000
    s.send(Message(c, b"x" * 5000, None, NO_FC))          # NO_FC and empty messages are not counted
    s.send(Message(c, None))
    s.send(Message(UUID.random(), b"x" * 100))           # a non-member: no credit spent
    assert sent_credits(s) == by_name({a: 9000, b: 5000, c: 9000})
    assert len(s.tp.sent) == 5 and s.prot.num_blockings == 0
    # FC adds no header to data messages
    assert not any(x.msg.has_header(PID) for x in s.tp.sent)


def test_blocks_only_the_sender_and_resumes_on_credits(stacks):
    """A multicast bigger than the lowest credit blocks the sending thread until every creditor sent credits;
    the thread delivering the credits (a receive thread) never waits."""
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=5000), a, [None, b, c], loopback=False)
    s.send(Message(None, b"x" * 7000))                   # 3000 left everywhere
    snd = Sender(s, Message(None, b"y" * 4000))
    assert not snd.wait(0.3), "the sender must block: 4000 > 3000"
    assert s.prot.creditors == {a, b, c} and s.prot.num_blockings == 1
    assert len(s.tp.sent) == 1
    for who in (a, b):
        t0 = time.monotonic()
        s.tp.inject([replenish_from(who, 7000)])          # the receive thread: returns at once
        assert time.monotonic() - t0 < 0.5
    assert not snd.wait(0.2), "C has not sent credits yet"
    s.tp.inject([replenish_from(c, 7000)])
    assert snd.wait(2), "the last creditor's credits wake the sender"
    assert snd.elapsed >= 0.45
    assert [x.msg.length for x in s.tp.sent] == [7000, 4000]
    assert sent_credits(s) == by_name({a: 6000, b: 6000, c: 6000}) and not s.prot.creditors
    assert s.prot.num_credit_responses_received == 3 and s.prot.num_credit_requests_sent == 0
    assert not s.top.messages, "credit messages are not passed up"


@pytest.mark.parametrize("max_block_time", [0, 5000])
def test_unicast_blocked_by_another_members_credit_resumes(stacks, max_block_time):
    """Regression: a unicast to C blocked by B's low credit (lowest_credit is per protocol, as in Java) has no
    creditor of its own; B's credits must still wake it, also with max_block_time <= 0 (wait for credits)."""
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=max_block_time), a, [None, b, c], loopback=False)
    s.send(Message(b, b"x" * 8000))                      # lowest credit: B's 2000
    snd = Sender(s, Message(c, b"y" * 5000))
    assert not snd.wait(0.3), "5000 > lowest_credit 2000: the sender blocks"
    s.tp.inject([replenish_from(b, 8000)])
    assert snd.wait(3), "B's credits restore lowest_credit: the unicast to C goes"
    assert sent_credits(s) == by_name({a: 10000, b: 10000, c: 5000})


def test_credit_request_after_max_block_time(stacks):
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=300), a, [None, b], loopback=False)
    s.send(Message(b, b"x" * 6000))                      # B: 4000 left
    t0 = time.monotonic()
    snd = Sender(s, Message(b, b"y" * 5000))
    req = s.tp.wait_sent(is_fc(CREDIT_REQUEST), timeout=3)[0]
    waited = req.time - t0
    assert 0.28 <= waited <= 2.0, waited
    assert req.msg.dest == b and not req.msg.flags & OOB           # queues up behind the data: not OOB
    assert credit_of(req) == JavaObject("Long", 4000)               # the credits we have left with B
    assert req.decoded().tp_flags == 0
    # at most one request per max_block_time
    time.sleep(0.45)
    reqs = s.tp.sent_where(is_fc(CREDIT_REQUEST))
    assert 1 <= len(reqs) <= 3
    gaps = [y.time - x.time for x, y in zip(reqs, reqs[1:])]
    assert all(g >= 0.28 for g in gaps), gaps
    s.tp.inject([replenish_from(b, 6000)])
    assert snd.wait(2)
    assert s.tp.sent[-1].msg.length == 5000


def test_max_block_times_send_after_the_block_time(stacks):
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=5000, max_block_times="100:50,10000:400"), a, [None, b], loopback=False)
    assert s.prot.get_max_block_time(1) == 50 and s.prot.get_max_block_time(100) == 50
    assert s.prot.get_max_block_time(101) == 400 and s.prot.get_max_block_time(10 ** 6) == 400
    s.send(Message(b, b"x" * 9950))                      # 50 left
    for size, lo, hi in ((60, 0.045, 0.3), (5000, 0.38, 1.0)):
        snd = Sender(s, Message(b, b"y" * size))
        assert snd.wait(3)
        assert lo <= snd.elapsed <= hi, (size, snd.elapsed)
    assert not s.tp.sent_where(is_fc(CREDIT_REQUEST)), "max_block_times: no credit requests"
    assert s.prot.num_blockings == 2 and sent_credits(s)[str(b)] == 0


def test_ignore_synchronous_response(stacks):
    """A thread passing a message up through FC (e.g. the application answering in receive()) is not blocked
    (JGRP-465); with ignore_synchronous_response=false it is."""
    a, b = UUID.random(), UUID.random()
    for ignore in (True, False):
        s = stacks(fc(max_block_time=5000, ignore_synchronous_response=ignore), UUID.random(), [None, b],
                   loopback=False)
        s.send(Message(b, b"x" * 9000))
        answered = threading.Event()

        def app(msgs, s=s, answered=answered):          # the application's receive(): answers with 2000 bytes
            s.prot.down_msg(Message(b, b"r" * 2000))
            answered.set()
        s.top.up_batch = app
        rx = threading.Thread(target=s.tp.inject, args=([data_from(b, 10)],), daemon=True)
        rx.start()
        if ignore:
            assert answered.wait(1) and s.prot.num_blockings == 0
        else:
            assert not answered.wait(0.4), "blocked without ignore_synchronous_response"
            s.tp.inject([replenish_from(b, 9000)])
            assert answered.wait(2)
        rx.join(2)
        s.stop()


def test_view_change_and_stop_release_blocked_senders(stacks):
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=5000), a, [None, b, c], loopback=False)
    s.send(Message(c, b"x" * 8000))
    snd = Sender(s, Message(c, b"y" * 5000))
    assert not snd.wait(0.2) and s.prot.creditors == {c}
    s.install_view([a, b], 2)                           # C left: no creditor left, the sender goes on
    assert snd.wait(2)
    assert sent_credits(s) == by_name({a: 10000, b: 10000}) and s.prot.lowest_credit == 10000
    assert received_credits(s) == by_name({a: 10000, b: 10000})
    s.install_view([a, b, c], 3)                        # C back: full credits
    s.send(Message(b, b"x" * 8000))
    snd = Sender(s, Message(b, b"y" * 5000))
    assert not snd.wait(0.2)
    t0 = time.monotonic()
    s.stop()
    assert snd.wait(2) and time.monotonic() - t0 < 1.0


# ------------------------------------------------------------------------------------------------
# receiving side
# ------------------------------------------------------------------------------------------------

def test_credits_sent_after_the_messages_passed_up(stacks):
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(), a, [None, b])
    release = threading.Event()
    passed = []

    def slow_app(msgs):                                # a slow application on the delivery thread
        passed.extend(msgs)
        release.wait(5)
    s.top.up_batch = slow_app
    rx = threading.Thread(target=s.tp.inject, args=([data_from(b, 3500), data_from(b, 3000)],), daemon=True)
    rx.start()
    wait_until(lambda: len(passed) == 2, 2)
    time.sleep(0.2)
    assert not s.tp.sent_where(is_fc(REPLENISH)), "no credits before the application is done"
    release.set()
    rep = s.tp.wait_sent(is_fc(REPLENISH), timeout=2)[0]
    rx.join(2)
    assert rep.msg.dest == b and rep.msg.flags & OOB and rep.decoded().tp_flags == 0x04
    assert credit_of(rep) == JavaObject("Integer", 6500)           # FC sends an Integer (tag 15)
    assert rep.msg.payload.tobytes() == bytes.fromhex("0f00001964")
    assert received_credits(s)[str(b)] == 10000
    # 5999 more bytes: below min_credits (6000): nothing; one more byte: 6000 credits
    s.top.up_batch = lambda msgs: None
    s.tp.inject([data_from(b, 5999)])
    assert len(s.tp.sent_where(is_fc(REPLENISH))) == 1
    s.tp.inject([data_from(b, 1), data_from(b, 10, flags=NO_FC), data_from(UUID.random(), 9999)])
    reps = s.tp.sent_where(is_fc(REPLENISH))
    assert len(reps) == 2 and credit_of(reps[1]) == JavaObject("Integer", 6000)


def test_own_credits_granted_without_a_message_to_ourselves(stacks):
    """Our own share of a multicast's credits is granted at once (as MFC/UFC do), not sent through the stack to
    ourselves, where it would wait for the loopback thread while our sender is blocked."""
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(max_block_time=5000), a, [None, b], loopback=False)
    s.send(Message(None, b"x" * 9000))                   # 1000 left with both
    snd = Sender(s, Message(None, b"y" * 2000))
    assert not snd.wait(0.3), "blocked: not enough credits"
    s.top.up_batch = lambda msgs: None
    s.tp.inject([data_from(a, 6500)])                    # our own multicast comes up: we owe ourselves 6500
    assert not s.tp.sent_where(is_fc(REPLENISH)), "no credit message to ourselves"
    assert sent_credits(s)[str(a)] == 7500 and s.prot.creditors == {b}
    assert s.prot.num_credit_responses_sent == 1 and s.prot.num_credit_responses_received == 1
    assert not snd.wait(0.3), "still waiting for b's credits"
    s.tp.inject([replenish_from(b, 9000)])
    assert snd.wait(2)
    assert sent_credits(s) == by_name({a: 5500, b: 8000})


def test_credit_request_answered_and_payload_types(stacks):
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(), a, [None, b])
    s.tp.inject([data_from(b, 2000)])                    # B has 8000 left with us
    s.tp.inject([credit_request_from(b, a, 3000)])
    rep = s.tp.wait_sent(is_fc(REPLENISH), timeout=1)[0]
    assert rep.msg.dest == b and credit_of(rep) == JavaObject("Integer", 7000)   # max_credits - left (B's view)
    assert received_credits(s)[str(b)] == 10000 and s.prot.num_credit_requests_received == 1
    s.tp.inject([credit_request_from(b, a, 3000, "Integer")])                     # Java casts to Long: dropped
    assert len(s.tp.sent_where(is_fc(REPLENISH))) == 1
    # from Integer.MAX_VALUE on the credits travel as a Long
    big = stacks(fc(max_credits=3_000_000_000), UUID.random(), [None, b])
    for n in (2 ** 31 - 2, 2 ** 31 - 1):                 # answers of n credits to a credit request
        big.tp.inject([credit_request_from(b, big.local_addr, 3_000_000_000 - n)])
    assert [credit_of(x) for x in big.tp.sent_where(is_fc(REPLENISH))] == [JavaObject("Integer", 2 ** 31 - 2),
                                                                           JavaObject("Long", 2 ** 31 - 1)]
    # any Java Number is accepted as credits (Java: (Number) msg.getObject())
    s.send(Message(b, b"x" * 9000))
    s.tp.inject([replenish_from(b, 500, "Long"), replenish_from(b, 500, "Short")])
    assert sent_credits(s)[str(b)] == 2000
    nothing = Message(None, None, b, OOB)
    nothing.put_header(PID, FcHeader(REPLENISH))
    s.tp.inject([nothing])                               # no payload: dropped with a warning
    assert sent_credits(s)[str(b)] == 2000
    assert [m.length for m in s.top.messages] == [2000], "only the data message went up"


def test_properties_and_config():
    from jgpy.stack.properties import apply_properties, properties_of
    props = properties_of(FC)
    want = {"max_credits": 500000, "min_threshold": 0.60, "min_credits": 0, "max_block_time": 5000,
            "max_block_times": None, "ignore_synchronous_response": True}
    assert {k: props[k].default for k in want} == want
    p = FC()
    apply_properties(p, {"max_credits": "2M", "min_threshold": "0.4", "max_block_times": "50:2, 500:5,1500:10"})
    s = FakeStack(p, start=False)
    assert p.min_credits == 800000 and p.get_max_block_time(600) == 10
    for bad in ("50:2,40:5", "50:5,500:5", "50", "-1:4"):
        with pytest.raises(ConfigError):
            apply_properties(FC(), {"max_block_times": bad})
    assert parse_block_times(None) is None
    # a fragmentation protocol announces its frag_size; FC warns when it is bigger than max_credits
    s.prot.down(Event(EventType.CONFIG, {"frag_size": 60000}))
    assert s.prot.frag_size_received


# ------------------------------------------------------------------------------------------------
# against Java's FC (the 2.12.2 jar)
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from tests.conftest import require_java
    require_java()
    return JavaProtocolProbe(tmp_path_factory.mktemp("fcprobe"))


@pytest.mark.interop
def test_receiver_side_matches_java(stacks, probe):
    """The same received messages make Java's FC and jgpy's send the same REPLENISH messages, byte for byte."""
    a, b = UUID.random(), UUID.random()
    lengths = [1000, 2500, 3000, 10, 5999, 1, 12000, 0, 700, 6000]
    msgs = [data_from(b, n, a) for n in lengths]
    msgs.insert(3, data_from(b, 5000, a, flags=NO_FC))
    req = Message(a, object_to_buffer(JavaObject("Long", 1234)), b)
    req.put_header(PID, FcHeader(CREDIT_REQUEST))
    msgs.append(req)
    script = ["set max_credits 10000", "init", "start", "view " + probe_view([a, b])] + \
        ["up " + probe_msg(m) for m in msgs]
    java = [x for x in probe.run(JAVA_FC, PID, script) if x.kind == "down"]
    s = stacks(fc(), a, [None, b])
    for m in msgs:
        s.tp.inject([m])                                # one message a batch, as Java sees them
    mine = [as_java_sent(x) for x in s.tp.sent]
    assert [DIALECT.encode(m).hex() for m in mine] == [DIALECT.encode(j.msg).hex() for j in java]
    assert [object_from_buffer(j.msg.payload, True) for j in java] == [
        JavaObject("Integer", v) for v in (6500, 6009, 10000, 6700, 8766)]


@pytest.mark.interop
def test_sender_side_matches_java(stacks, probe):
    """Java's FC and jgpy's block the same message, send the same CREDIT_REQUEST after max_block_time and
    resume on the same REPLENISH; large credits travel as a Long in both."""
    a, b = UUID.random(), UUID.random()
    first, second = Message(b, b"x" * 6000), Message(b, b"y" * 5000)
    credit = replenish_from(b, 6000)
    credit.dest = a
    script = ["set max_credits 10000", "set max_block_time 300", "init", "start", "view " + probe_view([a, b]),
              "down " + probe_msg(first), "downasync second " + probe_msg(second), "sleep 450",
              "up " + probe_msg(credit), "sleep 200"]
    java = probe.run(JAVA_FC, PID, script)
    kinds = [x.kind if x.kind != "down" else ("req" if x.msg.has_header(PID) else x.msg.length) for x in java]
    assert kinds[0] == 6000 and kinds[-2:] == [5000, "returned"] and set(kinds[1:-2]) == {"req"}, kinds
    jreqs = [x for x in java if x.kind == "down" and x.msg.has_header(PID)]
    assert 280 <= jreqs[0].ms - java[0].ms <= 1000
    s = stacks(fc(max_block_time=300), a, [None, b], loopback=False)
    s.send(first.copy())
    snd = Sender(s, second.copy())
    time.sleep(0.45)
    s.tp.inject([credit])
    assert snd.wait(2)
    mine = s.tp.sent
    assert [x.msg.length if not x.msg.has_header(PID) else "req" for x in mine][-1] == 5000
    myreqs = [as_java_sent(x) for x in mine if x.msg.has_header(PID)]
    assert 1 <= len(myreqs) <= 2 and 1 <= len(jreqs) <= 2, (len(myreqs), len(jreqs))   # 300 ms, maybe 600
    assert DIALECT.encode(myreqs[0]).hex() == DIALECT.encode(jreqs[0].msg).hex()
    assert object_from_buffer(jreqs[0].msg.payload, True) == JavaObject("Long", 4000)
    # a credit request answered with more than Integer.MAX_VALUE credits: a Long in both
    req = Message(a, object_to_buffer(JavaObject("Long", 0)), b)
    req.put_header(PID, FcHeader(CREDIT_REQUEST))
    java = probe.run(JAVA_FC, PID, ["set max_credits 3000000000", "init", "view " + probe_view([a, b]),
                                    "up " + probe_msg(req)])
    s2 = stacks(fc(max_credits=3_000_000_000), a, [None, b])
    s2.tp.inject([req])
    assert DIALECT.encode(as_java_sent(s2.tp.sent[0])).hex() == DIALECT.encode(java[0].msg).hex()
    assert object_from_buffer(java[0].msg.payload, True) == JavaObject("Long", 3_000_000_000)


@pytest.mark.interop
def test_max_block_times_matches_java(stacks, probe):
    a, b = UUID.random(), UUID.random()
    msgs = [Message(b, b"x" * 9950), Message(b, b"y" * 60), Message(b, b"z" * 5000)]
    script = ["set max_credits 10000", "set max_block_time 5000", "call setMaxBlockTimes 100:50,10000:400", "init",
              "start", "view " + probe_view([a, b])] + ["down " + probe_msg(m) for m in msgs]
    java = probe.run(JAVA_FC, PID, script)
    assert [x.msg.length for x in java] == [9950, 60, 5000]             # sent after blocking, no credit request
    assert 40 <= java[1].ms - java[0].ms <= 300 and 380 <= java[2].ms - java[1].ms <= 1000
    s = stacks(fc(max_block_time=5000, max_block_times="100:50,10000:400"), a, [None, b], loopback=False)
    times = []
    for m in msgs:
        s.send(m)
        times.append(time.monotonic())
    assert [x.msg.length for x in s.tp.sent] == [9950, 60, 5000]
    assert 0.04 <= times[1] - times[0] <= 0.3 and 0.38 <= times[2] - times[1] <= 1.0


def test_credit_messages_encoded_like_java(stacks, java_codec):
    from jgpy.testing.javajson import to_json
    a, b = UUID.random(), UUID.random()
    s = stacks(fc(), a, [None, b], loopback=False)
    s.tp.inject([credit_request_from(b, a, 10000 - 4242)])              # answered with 4242 credits
    s.prot.send_credit_request(b, 77)
    for x in s.tp.sent:
        value = {"class": "Datagram", "list": False, "multicast": False, "dest": None, "src": None,
                 "messages": [to_json(x.decoded().messages[0])]}
        assert java_codec.encode("Datagram", value).hex() == x.data.hex()
        rep = java_codec.decode("Datagram", x.data)
        assert rep["remaining"] == 0 and rep["hex"] == x.data.hex()
    assert java_codec.decode("JavaObject", bytes(s.tp.sent[0].msg.payload))["value"] == \
        {"class": "JavaObject", "type": "Integer", "value": 4242}
    assert java_codec.decode("JavaObject", bytes(s.tp.sent[1].msg.payload))["value"] == \
        {"class": "JavaObject", "type": "Long", "value": 77}


# ------------------------------------------------------------------------------------------------
# real clusters: a fast sender, a slow receiver, nothing lost
# ------------------------------------------------------------------------------------------------

N = 1500
SIZE = 1000
FC_PROPS = {"max_credits": "200000", "min_threshold": "0.4", "max_block_time": "1000"}


def fc_config():
    return stock().remove("UFC").replace("MFC", "FC", FC_PROPS)


def parse(buf) -> tuple[str, int] | None:
    """``b"   S:12"`` -> ("S", 12): the numbered payloads of these tests (padded in front to SIZE bytes)."""
    if not buf:
        return None
    head, sep, num = bytes(buf).rpartition(b":")
    if not sep or not num.isdigit():
        return None
    return head.strip().decode(), int(num)


def numbered(name: str, i: int) -> bytes:
    return f"{name}:{i}".encode().rjust(SIZE)


class SlowRec(Receiver):
    """Records numbered messages per (sender name, unicast?), sleeping ``sleep_s`` in each receive()."""

    def __init__(self, sleep_s: float):
        self.sleep_s = sleep_s
        self.got: dict = {}
        self.cond = threading.Condition()
        self.threads = set()

    def receive(self, msg):
        p = parse(msg.buffer)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        with self.cond:
            self.threads.add(threading.current_thread().name)
            if p is not None:
                self.got.setdefault((p[0], msg.dest is not None), []).append(p[1])
            self.cond.notify_all()

    def total(self) -> int:
        with self.cond:
            return sum(len(v) for v in self.got.values())

    def wait_total(self, n, timeout) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: sum(len(v) for v in self.got.values()) >= n, timeout)


@pytest.mark.slow
def test_jgpy_cluster_fast_sender_slow_receiver(figures):
    props = udp_props(*unique_group())
    cluster = f"fc-{uuid.uuid4().hex[:8]}"
    fast, slow = SlowRec(0), SlowRec(0.002)
    with Channel(fc_config(), "S", props, fast) as s, Channel(fc_config(), "R", props, slow) as r:
        s.connect(cluster)
        r.connect(cluster)
        assert wait_all(lambda: len(s.view) == 2 and len(r.view) == 2, 20)
        assert s.stack.find("FC") is not None and s.stack.find("MFC") is None and s.stack.find("UFC") is None
        t0 = time.monotonic()
        for i in range(N):                               # multicasts (even) and unicasts (odd) to the slow member
            s.send(None if i % 2 == 0 else r.address, numbered("S", i))
        send_time = time.monotonic() - t0
        assert slow.wait_total(N, 60), slow.total()
        total = time.monotonic() - t0
        assert slow.got == {("S", False): list(range(0, N, 2)), ("S", True): list(range(1, N, 2))}
        assert fast.wait_total(N // 2, 10) and fast.got == {("S", False): list(range(0, N, 2))}
        st = s.dump_stats()["FC"]
        assert st["num_blockings"] > 0 and st["num_credit_responses_received"] > 0, st
        assert r.dump_stats()["FC"]["num_credit_responses_sent"] > 0
        # the slow application ran on the delivery thread; FC never blocked a receive thread
        assert slow.threads == {f"jgpy-deliver-R"} or all(t.startswith("jgpy-") for t in slow.threads), slow.threads
    figures("FC jgpy->jgpy (slow receiver 2 ms/msg) send time", send_time, "s")
    figures("FC jgpy->jgpy total time", total, "s")
    # the sender was held back to about the receiver's pace (2 ms a message; max_credits is ~200 messages)
    assert send_time >= (N - 250) * 0.002 * 0.8, send_time


def _java_connect(node, config: str, cluster: str, props: dict, sleep_ms: int = 0) -> None:
    rep = node.call("connect", timeout=60, config=config, cluster=cluster, name=node.name, props=props,
                    receive="events", receive_sleep_ms=sleep_ms)
    node.address = rep.get("address")


def _java_numbered(node, n: int, timeout: float) -> dict:
    """The numbered messages a Java node received: {(sender name, unicast?): [n, ...]}."""
    got: dict = {}
    count = 0
    deadline = time.monotonic() + timeout
    while count < n and time.monotonic() < deadline:
        try:
            ev = node.wait_event(lambda e: e.get("event") == "msg", max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - timed out
            break
        p = parse(bytes.fromhex(ev["payload"]) if ev.get("payload") else None)
        if p is not None:
            got.setdefault((p[0], ev.get("dest") is not None), []).append(p[1])
            count += 1
    return got


@pytest.mark.parametrize("slow", ["java", "jgpy"])
def test_java_and_jgpy_fast_sender_slow_receiver(java_nodes, slow, figures):
    """Java sends as fast as it can to a slow jgpy member, or jgpy to a slow Java member (2 ms a message):
    FC throttles the sender, nothing is lost, per-sender order holds."""
    props = udp_props(*unique_group())
    cluster = f"fcj-{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-fc-", delete=False) as f:
        f.write(fc_config().to_xml())
        xml = f.name
    try:
        j = java_nodes("J1")
        _java_connect(j, xml, cluster, props, sleep_ms=2 if slow == "java" else 0)
        rec = SlowRec(0.002 if slow == "jgpy" else 0)
        with Channel(fc_config(), "P1", props, rec) as p:
            p.connect(cluster)
            assert wait_all(lambda: len(p.view) == 2, 20)
            j.wait_event(lambda e: e.get("event") == "view" and len(e.get("names") or []) == 2, 20)
            t0 = time.monotonic()
            if slow == "jgpy":
                # Java multicasts N numbered messages: "<spaces>:n" (the harness appends ":n")
                j.send(payload=b" " * (SIZE - 5), count=N, numbered=True, timeout=90)
                send_time = time.monotonic() - t0
                assert rec.wait_total(N, 60), rec.total()
                assert rec.got == {("", False): list(range(N))}, {k: len(v) for k, v in rec.got.items()}
                stats = j.protocol_stats()["FC"]                  # getNumberOfBlockings() and friends
                assert int(stats["number_of_blockings"]) > 0, stats
                assert int(stats["number_of_credit_responses_received"]) > 0, stats
                assert p.dump_stats()["FC"]["num_credit_responses_sent"] > 0
            else:
                java_addr = next(m for m in p.view.members if str(m) == "J1")
                for i in range(N):
                    p.send(None if i % 2 == 0 else java_addr, numbered("P1", i))
                send_time = time.monotonic() - t0
                got = _java_numbered(j, N, 60)
                assert got == {("P1", False): list(range(0, N, 2)), ("P1", True): list(range(1, N, 2))}, \
                    {k: len(v) for k, v in got.items()}
                st = p.dump_stats()["FC"]
                assert st["num_blockings"] > 0 and st["num_credit_responses_received"] > 0, st
            figures(f"FC mixed, slow {slow} receiver (2 ms/msg): send time of {N} x {SIZE} B", send_time, "s")
    finally:
        import os
        os.unlink(xml)


@pytest.mark.parametrize("cls,pid", [("UFC", 45), ("MFC", 44)])
def test_ufc_mfc_ignore_synchronous_response(stacks, cls, pid):
    """MFC and UFC (2.12's FlowControl) do not block a message sent by a thread that is passing a message up
    through them either (default true, as in Java): with the thread pools disabled that thread is a receive
    thread, and the credits it would wait for could only come in through itself."""
    from jgpy.protocols import flow_control

    b = UUID.random()
    assert flow_control.FlowControl.ignore_synchronous_response.default is True
    for ignore in (True, False):
        p = getattr(flow_control, cls)()
        p.max_credits, p.min_threshold, p.max_block_time, p.ignore_synchronous_response = 10000, 0.6, 5000, ignore
        s = stacks(p, UUID.random(), [None, b], loopback=False)
        dest = b if cls == "UFC" else None
        s.send(Message(dest, b"x" * 9000))                   # 1000 credits left
        answered = threading.Event()

        def app(msgs, s=s, answered=answered, dest=dest):   # the application's receive(): answers with 2000 bytes
            s.prot.down_msg(Message(dest, b"r" * 2000))
            answered.set()
        s.top.up_batch = app
        incoming = data_from(b, 10, dest=s.local_addr if cls == "UFC" else None)
        rx = threading.Thread(target=s.tp.inject, args=([incoming],), daemon=True)
        rx.start()
        if ignore:
            assert answered.wait(1) and p.counters["synchronous_bypasses"] == 1 and p.counters["blockings"] == 0
        else:
            assert not answered.wait(0.4), "blocked without ignore_synchronous_response"
            credits = []
            for src in ([b] if cls == "UFC" else [b, s.local_addr]):     # MFC keeps credits with itself too
                credits.append(Message(None, object_to_buffer(JavaObject("Long", 9000)), src, OOB))
                credits[-1].put_header(pid, FcHeader(REPLENISH))
            s.tp.inject(credits)
            assert answered.wait(2)
        rx.join(2)
        s.stop()


def _mfc(max_credits=10000, min_threshold=0.6, max_block_time=5000):
    from jgpy.protocols.flow_control import MFC
    p = MFC()
    p.max_credits, p.min_threshold, p.max_block_time = max_credits, min_threshold, max_block_time
    return p


def test_mfc_sends_a_credit_before_passing_up_the_rest_of_a_big_batch(stacks):
    """A batch can hold more than a sender's whole window: its credit leaves when the sender reaches the
    threshold (as Java's per-message accounting sends it), not after the batch was delivered."""
    b = UUID.random()
    s = stacks(_mfc(), UUID.random(), [None, b], loopback=False)
    seen = []                                          # per up_batch call: (messages, credits sent before it)
    s.top.up_batch = lambda msgs: seen.append((len(msgs), len(s.tp.sent_where(is_mfc(REPLENISH)))))
    s.tp.inject([data_from(b, 1000) for _ in range(25)])  # 4000 bytes take b to min_credits (6000 left)
    assert seen == [(4, 0), (4, 1), (4, 2), (4, 3), (4, 4), (4, 5), (1, 6)]
    reps = s.tp.sent_where(is_mfc(REPLENISH))
    assert [credit_of(r) for r in reps] == [JavaObject("Long", 4000)] * 6 and all(r.msg.dest == b for r in reps)
    assert received_credits_of(s)[str(b)] == 9000


def test_mfc_grants_its_own_credits_without_sending_itself_a_message(stacks):
    """Our own share of a multicast's credits is granted at once, not sent through the stack to ourselves
    (where it would wait for the loopback thread while our sender is blocked); nothing is on the wire."""
    b = UUID.random()
    s = stacks(_mfc(), UUID.random(), [None, b], loopback=False)
    me = s.local_addr
    s.send(Message(None, b"x" * 9000))                 # 1000 credits left with every member
    sender = Sender(s, Message(None, b"y" * 2000))
    assert not sender.wait(0.3), "blocked: not enough credits"
    s.tp.inject([data_from(me, 4500)])                 # our own multicast comes up: we owe ourselves 4500
    assert not s.tp.sent_where(is_mfc(REPLENISH)), "no credit message to ourselves"
    assert by_name(s.prot.credits)[str(me)] == 5500 and s.prot.counters["credit_responses_sent"] == 1
    assert not sender.wait(0.3), "still waiting for b's credits"
    s.tp.inject([_mfc_replenish(b, 9000)])
    assert sender.wait(2)
    assert by_name(s.prot.credits) == {str(me): 3500, str(b): 8000}


def is_mfc(htype):
    return lambda x: x.msg.has_header(44) and x.msg.get_header(44).type == htype


def received_credits_of(s: FakeStack) -> dict:
    return {str(k): v for k, v in s.prot.received.left.items()}


def _mfc_replenish(src, credits: int) -> Message:
    m = Message(None, object_to_buffer(JavaObject("Long", credits)), src, OOB)
    m.put_header(44, FcHeader(REPLENISH))
    return m
