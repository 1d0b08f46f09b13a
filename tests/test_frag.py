"""FRAG (the old fragmentation protocol) in a fake stack (tests/fakestack.py), against Java's own FRAG run in a
probe (byte-identical fragments, mutual reassembly), and in real clusters: two jgpy channels, and a Java member
with a jgpy member, exchanging 10 MB messages both ways."""

from __future__ import annotations

import random
import tempfile
import threading
import time
import uuid

import pytest

from jgpy import DIALECT, Channel, Message, Receiver, UUID
from jgpy.errors import ConfigError
from jgpy.headers import FragHeader, NakAckHeader, RequestCorrelatorHeader, StateHeader, TpHeader
from jgpy.protocols.frag import FRAG
from jgpy.stack.events import Event, EventType
from jgpy.testing.cluster import stock, wait_all
from jgpy.testing.java import udp_props, unique_group
from tests.fakestack import TP_ID, FakeStack, JavaProtocolProbe, as_java_sent, probe_msg, view_of

pytestmark = pytest.mark.timeout(120)

PID = 4                      # FRAG's protocol id
OOB, NO_FC = Message.OOB, Message.NO_FC
JAVA_FRAG = "org.jgroups.protocols.FRAG"


def frag(frag_size: int = 8192) -> FRAG:
    p = FRAG()
    p.frag_size = frag_size
    return p


@pytest.fixture
def stacks():
    made: list[FakeStack] = []

    def make(prot, local_addr=None, **kw) -> FakeStack:
        kw.setdefault("cluster_name", "fragtest")
        s = FakeStack(prot, local_addr, **kw)
        s.connect()
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def payload_of(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def app_msg(dest, src, payload, flags=0, req_id=7) -> Message:
    """A message as it reaches FRAG from a jgpy channel: src set, headers of the layers above."""
    m = Message(dest, payload, src, flags)
    m.put_header(201, RequestCorrelatorHeader(0, req_id, True))
    m.put_header(17, StateHeader(1, 99, src))
    return m


def without_src(m: Message) -> Message:
    c = m.copy()
    c.src = None
    return c


def java_size(m: Message) -> int:
    """Java's ``Message.size()`` of ``m`` as FRAG sees it (no src: JChannel leaves it to the transport). For the
    headers used here (RequestCorrelator, StateHeader without digest and state_id, UUIDs) Java's estimate is
    exactly the serialised length."""
    return len(DIALECT.encode(without_src(m)))


@pytest.mark.parametrize("frag_size", [1500, 60000])
def test_10mb_split_and_reassembled_out_of_order(stacks, frag_size):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag(frag_size), a)
    msg = app_msg(b, a, payload_of(10_000_000), OOB | NO_FC)
    sa.send(msg)
    inner = DIALECT.encode(without_src(msg))            # the whole message, headers included, as Java writes it
    n = -(-len(inner) // frag_size)
    sent = sa.tp.sent
    assert len(sent) == n
    for i, s in enumerate(sent):
        m = s.msg
        h = m.get_header(PID)
        assert (h.id, h.frag_id, h.num_frags) == (1, i, n)
        # no flags (the fragments of an OOB|NO_FC message are regular and flow controlled), only FragHeader
        assert (m.dest, m.flags) == (b, 0) and m.header_ids() == [PID, TP_ID]
        assert m.raw_buffer is sent[0].msg.raw_buffer                    # windows into one serialisation
        assert m.length == min(frag_size, len(inner) - i * frag_size)
    assert b"".join(bytes(s.msg.payload) for s in sent) == inner
    assert sa.prot.num_sent_frags == n and sa.prot.num_sent_msgs == 1
    # the receiver gets the datagrams shuffled, in batches of up to 50
    sb = stacks(frag(frag_size), b)
    dgs = [s.data for s in sent]
    random.Random(3).shuffle(dgs)
    for i in range(0, len(dgs), 50):
        sb.tp.inject_datagrams(dgs[i:i + 50])
    got = sb.top.messages
    assert len(got) == 1
    m = got[0]
    assert m.buffer == msg.buffer and (m.dest, m.src, m.flags) == (b, a, OOB | NO_FC)
    assert m.header_ids() == [201, 17] and m.get_header(201) == msg.get_header(201)
    assert m.get_header(17) == msg.get_header(17)
    assert sb.prot.pending() == {} and sb.prot.num_received_frags == n and sb.prot.num_received_msgs == 1
    sa.tp.clear()
    sa.send(app_msg(None, a, payload_of(3 * frag_size)))
    assert {s.msg.get_header(PID).id for s in sa.tp.sent} == {2}          # the next message, the next id


def test_serialized_size_decides(stacks):
    """Java compares Message.size() (headers, addresses and all) with frag_size, not the payload length."""
    a, b = UUID.random(), UUID.random()
    s = stacks(frag(1000), a)
    probe = app_msg(b, a, b"")
    overhead = java_size(probe)                              # size of the message with an empty payload
    fits = app_msg(b, a, payload_of(1000 - overhead))
    s.send(fits)
    assert len(s.tp.sent) == 1 and s.tp.sent[0].msg is fits and not fits.has_header(PID)
    s.send(app_msg(b, a, payload_of(1000 - overhead + 1)))   # one byte more: 2 fragments, of 1000 and 1 bytes
    assert [(x.msg.get_header(PID).frag_id, x.msg.length) for x in s.tp.sent[1:]] == [(0, 1000), (1, 1)]
    plain = Message(None, None, a)                            # no payload, no headers: passes
    s.send(plain)
    assert s.tp.sent[-1].msg is plain and not plain.has_header(PID)
    # a src other than ours is kept, in the serialised message and on the fragments (sending on behalf of X)
    x = UUID.random()
    s.tp.clear()
    other = app_msg(b, x, payload_of(1500))
    s.send(other)
    assert all(f.msg.src == x for f in s.tp.sent)
    assert b"".join(bytes(f.msg.payload) for f in s.tp.sent) == DIALECT.encode(other)


def test_interleaved_senders_and_plain_messages_keep_their_order(stacks):
    a, c, b = UUID.random(), UUID.random(), UUID.random()
    sa, sc = stacks(frag(1000), a), stacks(frag(1000), c)
    pa, pc, pa2 = payload_of(100_000, 1), payload_of(77_777, 2), payload_of(5_500, 3)
    sa.send(app_msg(None, a, pa, req_id=1))
    sc.send(app_msg(None, c, pc, req_id=2))
    sa.send(app_msg(None, a, pa2, req_id=3))
    frags = [x.data for x in sa.tp.sent + sc.tp.sent]
    assert {DIALECT.decode_datagram(d).messages[0].get_header(PID).id for d in frags} == {1, 2}   # ids collide
    rnd = random.Random(5)
    rnd.shuffle(frags)
    plain = []
    for i in range(40):
        m = Message(None, b"plain-%d" % i, a if i % 2 else c)
        m.put_header(15, NakAckHeader.msg(i + 1))
        m.put_header(TP_ID, TpHeader("fragtest"))
        plain.append(DIALECT.encode_message(m))
    stream = frags[:]
    pos = 0
    for p in plain:                                          # plain messages at random places, in order
        pos = rnd.randrange(pos, len(stream) + 1)
        stream.insert(pos, p)
        pos += 1
    sb = stacks(frag(1000), b)
    for i in range(0, len(stream), 17):
        before = len(sb.top.batches)
        sb.tp.inject_datagrams(stream[i:i + 17])
        assert len(sb.top.batches) <= before + 1            # one call up per batch
    got = sb.top.messages
    assert [m.buffer for m in got if m.buffer.startswith(b"plain-")] == [b"plain-%d" % i for i in range(40)]
    big = {m.get_header(201).id: m for m in got if not m.buffer.startswith(b"plain-")}
    assert (big[1].buffer, big[1].src) == (pa, a)
    assert (big[2].buffer, big[2].src) == (pc, c)
    assert (big[3].buffer, big[3].src) == (pa2, a)
    assert sb.prot.pending() == {}


def test_reassembled_message_takes_the_place_of_its_last_fragment(stacks):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag(100), a)
    sa.send(Message(None, payload_of(250), a))
    frags = [x.msg for x in sa.tp.sent]
    assert len(frags) == 3                                    # 250 bytes + 8 bytes of message framing
    u = [Message(None, b"u%d" % i, a) for i in range(3)]
    sb = stacks(frag(100), b)
    sb.tp.inject([u[0], frags[2], frags[0], u[1], frags[1], u[2]])
    assert len(sb.top.batches) == 1
    batch = sb.top.batches[0]
    assert [m.buffer for m in batch] == [b"u0", b"u1", payload_of(250), b"u2"]
    assert batch[0] is u[0] and batch[1] is u[1] and batch[3] is u[2]


def test_duplicates_and_bad_fragments(stacks):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag(100), a)
    sa.send(Message(None, payload_of(300), a))
    f = [x.data for x in sa.tp.sent]
    assert len(f) == 4
    sb = stacks(frag(100), b)
    sb.tp.inject_datagrams([f[0], f[0], f[1], f[1], f[2]])
    assert not sb.top.messages and sb.prot.pending() == {a: 1}
    bad = Message(None, b"x", a)
    bad.put_header(PID, FragHeader(1, 7, 4))                # frag_id out of range: dropped (Java would throw)
    bad2 = Message(None, b"x", a)
    bad2.put_header(PID, FragHeader(1, 0, 9))               # num_frags differs from the first fragment's
    sb.tp.inject([bad, bad2])
    assert not sb.top.messages
    sb.tp.inject_datagrams([f[3]])
    assert [m.buffer for m in sb.top.messages] == [payload_of(300)]
    # bytes that do not read as a message: logged and dropped, nothing else affected
    junk = Message(None, b"\x07\x00garbage", a)
    junk.put_header(PID, FragHeader(9, 0, 1))
    sb.tp.inject([junk, Message(None, b"after", a)])
    assert [m.buffer for m in sb.top.messages][-1] == b"after"


@pytest.mark.parametrize("direction", ["down", "up"])
def test_partial_messages_of_departed_member_are_dropped(stacks, direction):
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    sb_, sc_ = stacks(frag(100), b), stacks(frag(100), c)
    sb_.send(Message(None, payload_of(1000, 1), b))
    sc_.send(Message(None, payload_of(1000, 2), c))
    sc_.send(Message(None, payload_of(1000, 3), c))
    fb, fc = [x.data for x in sb_.tp.sent], [x.data for x in sc_.tp.sent]
    sa = stacks(frag(100), a)
    send_view = (lambda v: sa.prot.down(Event(EventType.VIEW_CHANGE, v))) if direction == "down" else \
        (lambda v: sa.prot.up(Event(EventType.VIEW_CHANGE, v)))
    send_view(view_of([a, b, c], 1))
    sa.tp.inject_datagrams(fb[:5] + fc[:5] + fc[11:15])
    assert sa.prot.pending() == {b: 1, c: 2}
    send_view(view_of([a, b], 2))
    assert sa.prot.pending() == {b: 1}
    sa.tp.inject_datagrams(fb[5:])
    assert [m.buffer for m in sa.top.messages] == [payload_of(1000, 1)]


def test_config_event_and_properties(stacks):
    from jgpy.stack.properties import apply_properties, properties_of
    s = stacks(frag(60000), UUID.random())
    ups, downs = s.top.events_of(EventType.CONFIG), s.tp.events_of(EventType.CONFIG)
    assert len(ups) == 1 and len(downs) == 1 and ups[0].arg == downs[0].arg == {"frag_size": 60000}
    s.prot.up(Event(EventType.CONFIG, {"frag_size": 8000}))
    assert s.prot.frag_size == 8000
    s.prot.down(Event(EventType.CONFIG, {"frag_size": 9000}))
    assert s.prot.frag_size == 9000
    props = properties_of(FRAG)
    assert props["frag_size"].default == 8192 and props["max_retained_buffer"].deprecated
    p = FRAG()
    apply_properties(p, {"frag_size": "60K", "max_retained_buffer": "1000"})
    assert p.frag_size == 60000
    with pytest.raises(ConfigError):
        FakeStack(frag(0), start=False)


# ------------------------------------------------------------------------------------------------
# against Java's FRAG (the 2.12.2 jar)
# ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from tests.conftest import require_java
    require_java()
    return JavaProtocolProbe(tmp_path_factory.mktemp("fragprobe"))


@pytest.mark.interop
def test_fragments_match_java_frag_byte_for_byte(stacks, probe):
    a, b = UUID.random(), UUID.random()
    s = stacks(frag(1500), a)
    overhead = java_size(app_msg(None, a, b""))
    originals = [app_msg(b, a, payload_of(100_003, 1), OOB | NO_FC, req_id=1),
                 app_msg(None, a, payload_of(3000, 2), 0, req_id=2),
                 app_msg(None, a, payload_of(1500 - overhead, 3), 0, req_id=3),       # size == frag_size: passes
                 app_msg(None, a, payload_of(1500 - overhead + 1, 4), 0, req_id=4),   # size == frag_size + 1
                 app_msg(b, a, payload_of(1500 - overhead - 17, 5), 0, req_id=5)]     # + 18 bytes of dest
    # Java's FRAG gets them as a JChannel hands them down: src not set yet
    java_out = probe.run(JAVA_FRAG, PID, ["set frag_size 1500"] + [
        "down " + probe_msg(without_src(m)) for m in originals])
    for m in originals:
        s.send(DIALECT.decode(Message, DIALECT.encode(m)))
    mine = [as_java_sent(x) for x in s.tp.sent]
    jmsgs = [x.msg for x in java_out if x.kind == "down"]
    assert len(mine) == len(jmsgs) == 67 + 3 + 1 + 2 + 2
    for i, (j, p) in enumerate(zip(jmsgs, mine)):
        assert DIALECT.encode(p).hex() == DIALECT.encode(j).hex(), f"message {i} differs from Java's FRAG"
    # Java reassembles jgpy's fragments (shuffled, with the src the transport adds)
    frags = [x.msg.copy() for x in s.tp.sent if x.msg.has_header(PID)]
    for f in frags:
        f.remove_header(TP_ID)
    random.Random(9).shuffle(frags)
    java_up = [x.msg for x in probe.run(JAVA_FRAG, PID, ["set frag_size 1500"] + ["up " + probe_msg(f) for f in frags])
               if x.kind == "up"]
    assert len(java_up) == 4
    by_id = {m.get_header(201).id: m for m in java_up}
    for o in originals:
        if o.get_header(201).id == 3:
            continue
        got = by_id[o.get_header(201).id]
        assert DIALECT.encode(got) == DIALECT.encode(o)                 # src restored from the fragments
    # and jgpy reassembles Java's fragments
    r = stacks(frag(1500), b)
    jf = []
    for j in jmsgs:
        if j.has_header(PID):
            j.src = a                                                  # what Java's transport adds
            jf.append(j)
    random.Random(11).shuffle(jf)
    r.tp.inject(jf)
    got = {m.get_header(201).id: m for m in r.top.messages}
    assert set(got) == {1, 2, 4, 5}
    for o in originals:
        if o.get_header(201).id != 3:
            assert DIALECT.encode(got[o.get_header(201).id]) == DIALECT.encode(o)


def test_fragment_datagrams_read_by_java_classes(stacks, java_codec):
    a = UUID.random()
    s = stacks(frag(1000), a)
    s.send(app_msg(None, a, payload_of(2500)))
    for x in s.tp.sent:
        rep = java_codec.decode("Datagram", x.data)
        assert rep["remaining"] == 0 and rep["hex"] == x.data.hex()
        hdrs = dict(rep["value"]["messages"][0]["headers"])
        fh = x.msg.get_header(PID)
        assert hdrs[PID] == {"class": "protocols.FragHeader", "id": fh.id, "frag_id": fh.frag_id,
                             "num_frags": fh.num_frags}


# ------------------------------------------------------------------------------------------------
# real clusters
# ------------------------------------------------------------------------------------------------

BIG = 10_000_000


def frag_config():
    return stock().replace("FRAG2", "FRAG", {"frag_size": "60K"})


class Rec(Receiver):
    def __init__(self):
        self.msgs: list = []
        self.cond = threading.Condition()

    def receive(self, msg):
        with self.cond:
            self.msgs.append((msg.src, msg.dest, msg.buffer))
            self.cond.notify_all()

    def wait(self, n, timeout):
        with self.cond:
            return self.cond.wait_for(lambda: len(self.msgs) >= n, timeout)


def test_jgpy_cluster_10mb_both_ways():
    props = udp_props(*unique_group())
    cluster = f"frag-{uuid.uuid4().hex[:8]}"
    ra, rb = Rec(), Rec()
    cfg = frag_config()
    with Channel(cfg, "FA", props, ra) as a, Channel(cfg, "FB", props, rb) as b:
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 20)
        assert a.stack.find("FRAG") is not None and a.stack.find("FRAG2") is None
        pa, pb, pu = payload_of(BIG, 1), payload_of(BIG, 2), payload_of(BIG, 3)
        t0 = time.monotonic()
        ta = threading.Thread(target=lambda: (a.send(None, pa), a.send(b.address, pu)))
        tb = threading.Thread(target=lambda: b.send(None, pb))
        ta.start()
        tb.start()
        ta.join(60)
        tb.join(60)
        assert ra.wait(2, 60) and rb.wait(3, 60), (len(ra.msgs), len(rb.msgs))
        elapsed = time.monotonic() - t0
        assert sorted((str(s), d is None, p == pa or p == pb) for s, d, p in ra.msgs) == [("FA", True, True),
                                                                                          ("FB", True, True)]
        got_b = {(str(s), d is None): p for s, d, p in rb.msgs}
        assert got_b == {("FA", True): pa, ("FB", True): pb, ("FA", False): pu}
        st = a.dump_stats()["FRAG"]
        assert st["num_sent_frags"] >= 2 * (BIG // 60000) and st["pending"] == 0
        assert b.dump_stats()["FRAG"]["num_received_msgs"] >= 3
    print(f"4 x 10 MB deliveries in {elapsed:.1f} s")


def test_java_and_jgpy_10mb_both_ways(java_nodes):
    """A Java member (its own FRAG) and a jgpy member exchange 10 MB multicasts and unicasts."""
    props = udp_props(*unique_group())
    cluster = f"fragj-{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-frag-", delete=False) as f:
        f.write(frag_config().to_xml())
        xml = f.name
    j = java_nodes("J1")
    j.connect(xml, cluster, props)
    rp = Rec()
    with Channel(frag_config(), "P1", props, rp) as p:
        p.connect(cluster)
        assert wait_all(lambda: len(p.view) == 2, 20)
        j.wait_event(lambda e: e.get("event") == "view" and len(e.get("names") or []) == 2, 20)
        pj, pp, pu = payload_of(BIG, 4), payload_of(BIG, 5), payload_of(BIG, 6)
        j.send(payload=pj, timeout=60)                                     # Java -> everybody
        p.send(None, pp)                                                   # jgpy -> everybody
        java_addr = next(m for m in p.view.members if str(m) == "J1")
        p.send(java_addr, pu)                                              # jgpy -> Java, unicast
        assert rp.wait(2, 60), len(rp.msgs)
        got_p = {str(s): pl for s, d, pl in rp.msgs}
        assert got_p == {"J1": pj, "P1": pp}
        seen = {}
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:
            ev = j.wait_event(lambda e: e.get("event") == "msg", max(0.1, deadline - time.monotonic()))
            seen[(ev["src_name"], ev["dest"] is None)] = bytes.fromhex(ev["payload"])
        assert seen == {("J1", True): pj, ("P1", True): pp, ("P1", False): pu}
        stats = j.protocol_stats()
        assert int(stats["FRAG"]["num_sent_frags"]) >= BIG // 60000
        assert int(stats["FRAG"]["num_received_msgs"]) >= 3
        assert p.dump_stats()["FRAG"]["num_received_frags"] >= 2 * (BIG // 60000)
    import os
    os.unlink(xml)
