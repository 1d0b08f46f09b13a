"""FRAG2 in a small in-process stack (tests/fakestack.py): fragmentation, reassembly, bounded memory, and
byte-for-byte agreement with Java's own FRAG2 (a tiny probe program run against the 2.12.2 jar)."""

from __future__ import annotations

import random
import subprocess
import textwrap

import pytest

from jgpy import DIALECT, UUID, Message
from jgpy.errors import ConfigError
from jgpy.headers import FragHeader, NakAckHeader, RequestCorrelatorHeader, StateHeader, TpHeader
from jgpy.protocols.frag2 import FRAG2
from jgpy.stack.events import Event, EventType
from tests.fakestack import TP_ID, FakeStack, view_of

FRAG = 5
OOB, NO_FC = Message.OOB, Message.NO_FC


def frag2(frag_size: int = 1500) -> FRAG2:
    p = FRAG2()
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
    m = Message(dest, payload, src, flags)
    m.put_header(201, RequestCorrelatorHeader(0, req_id, True))
    m.put_header(17, StateHeader(1, 99, src))
    return m


def fragments_of(sender: FakeStack) -> list:
    return [s for s in sender.tp.sent if s.msg.has_header(FRAG)]


@pytest.mark.parametrize("frag_size", [1500, 60000])
def test_10mb_split_and_reassembled(stacks, frag_size):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag2(frag_size), a)
    payload = payload_of(10_000_000)
    msg = app_msg(b, a, payload, OOB | NO_FC)
    sa.send(msg)
    sent = sa.tp.sent
    n = -(-len(payload) // frag_size)
    assert len(sent) == n == len(fragments_of(sa))
    for i, s in enumerate(sent):
        m = s.msg
        h = m.get_header(FRAG)
        assert (h.id, h.frag_id, h.num_frags) == (1, i, n)
        assert (m.dest, m.src, m.flags) == (b, a, OOB | NO_FC)
        assert m.header_ids() == ([201, 17, FRAG, TP_ID] if i == 0 else [FRAG, TP_ID])
        assert m.raw_buffer is payload and m.offset == i * frag_size            # windows, no copies
        assert m.length == min(frag_size, len(payload) - i * frag_size)
    assert sent[0].msg.get_header(201) is msg.get_header(201)                  # copies share the header objects
    assert b"".join(bytes(s.msg.payload) for s in sent) == payload
    # the receiver gets the datagrams in random order, in batches of up to 50
    sb = stacks(frag2(frag_size), b)
    dgs = [s.data for s in sent]
    random.Random(3).shuffle(dgs)
    for i in range(0, len(dgs), 50):
        sb.tp.inject_datagrams(dgs[i:i + 50])
    got = sb.top.messages
    assert len(got) == 1
    m = got[0]
    assert m.buffer == payload and (m.dest, m.src, m.flags) == (b, a, OOB | NO_FC)
    assert m.header_ids() == [201, 17, TP_ID] and not m.has_header(FRAG)
    assert m.get_header(201) == msg.get_header(201) and m.get_header(17) == msg.get_header(17)
    assert sb.prot.pending() == {}
    assert sb.prot.num_received_frags == n and sb.prot.num_received_msgs == 1
    # the next message gets the next id
    sa.tp.clear()
    sa.send(app_msg(None, a, payload_of(3 * frag_size + 1)))
    assert [s.msg.get_header(FRAG).id for s in sa.tp.sent] == [2] * 4


def test_exactly_frag_size_is_not_fragmented(stacks):
    a = UUID.random()
    s = stacks(frag2(1500), a)
    m = app_msg(None, a, payload_of(1500))
    s.send(m)
    assert len(s.tp.sent) == 1 and s.tp.sent[0].msg is m and not m.has_header(FRAG)
    s.send(app_msg(None, a, None))                       # no payload at all
    s.send(app_msg(None, a, b""))
    assert len(s.tp.sent) == 3 and not any(x.msg.has_header(FRAG) for x in s.tp.sent)
    s.tp.clear()
    s.send(app_msg(None, a, payload_of(1501)))
    assert [(x.msg.get_header(FRAG).frag_id, x.msg.length) for x in s.tp.sent] == [(0, 1500), (1, 1)]


def test_payload_window_offsets(stacks):
    a = UUID.random()
    s = stacks(frag2(1000), a)
    buf = payload_of(5000)
    m = Message(None, None, a)
    m.set_buffer(buf, 10, 2500)
    s.send(m)
    assert [(x.msg.offset, x.msg.length) for x in s.tp.sent] == [(10, 1000), (1010, 1000), (2010, 500)]
    r = stacks(frag2(1000), UUID.random())
    r.tp.inject_datagrams([x.data for x in reversed(s.tp.sent)])
    assert r.top.messages[0].buffer == buf[10:2510]


def test_interleaved_senders_and_unfragmented_messages_keep_their_order(stacks):
    """Two senders whose fragment ids collide (both start at 1), fragments shuffled together, plain messages
    in between: every message is reassembled, plain ones pass unchanged and in order, in the same batches."""
    a, c, b = UUID.random(), UUID.random(), UUID.random()
    sa, sc = stacks(frag2(1000), a), stacks(frag2(1000), c)
    pa, pc, pa2 = payload_of(100_000, 1), payload_of(77_777, 2), payload_of(5_500, 3)
    sa.send(app_msg(None, a, pa, req_id=1))
    sc.send(app_msg(None, c, pc, req_id=2))
    sa.send(app_msg(None, a, pa2, req_id=3))
    frags = [x.data for x in sa.tp.sent + sc.tp.sent]
    assert {DIALECT.decode_datagram(d).messages[0].get_header(FRAG).id for d in frags} == {1, 2}
    rnd = random.Random(5)
    rnd.shuffle(frags)
    plain = []
    for i in range(40):
        m = Message(None, b"plain-%d" % i, a if i % 2 else c)
        m.put_header(15, NakAckHeader.msg(i + 1))
        m.put_header(TP_ID, TpHeader("fragtest"))
        plain.append(DIALECT.encode_message(m))
    stream = frags[:]
    for i, p in enumerate(plain):                        # plain messages at random places, in order
        stream.insert(rnd.randrange(0, len(stream) + 1) if i == 0 else
                      rnd.randrange(stream.index(plain[i - 1]) + 1, len(stream) + 1), p)
    sb = stacks(frag2(1000), b)
    for i in range(0, len(stream), 17):
        before = len(sb.top.batches)
        sb.tp.inject_datagrams(stream[i:i + 17])
        assert len(sb.top.batches) <= before + 1        # one call up per batch
    got = sb.top.messages
    plains = [m.buffer for m in got if m.buffer.startswith(b"plain-")]
    assert plains == [b"plain-%d" % i for i in range(40)]
    big = {m.get_header(201).id: m for m in got if not m.buffer.startswith(b"plain-")}
    assert set(big) == {1, 2, 3}
    assert (big[1].buffer, big[1].src) == (pa, a)
    assert (big[2].buffer, big[2].src) == (pc, c)
    assert (big[3].buffer, big[3].src) == (pa2, a)
    assert sb.prot.pending() == {}


def test_reassembled_message_takes_the_place_of_its_last_fragment(stacks):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag2(100), a)
    sa.send(app_msg(None, a, payload_of(250)))
    f0, f1, f2 = [x.msg for x in sa.tp.sent]
    u = [Message(None, b"u%d" % i, a) for i in range(3)]
    sb = stacks(frag2(100), b)
    sb.tp.inject([u[0], f2, f0, u[1], f1, u[2]])
    assert len(sb.top.batches) == 1
    batch = sb.top.batches[0]
    assert [m.buffer for m in batch] == [b"u0", b"u1", payload_of(250), b"u2"]
    assert batch[0] is u[0] and batch[1] is u[1] and batch[3] is u[2]


def test_duplicate_fragments_are_ignored(stacks):
    a, b = UUID.random(), UUID.random()
    sa = stacks(frag2(100), a)
    sa.send(app_msg(None, a, payload_of(300)))
    f = [x.data for x in sa.tp.sent]
    sb = stacks(frag2(100), b)
    sb.tp.inject_datagrams([f[0], f[0], f[1], f[1]])
    assert not sb.top.messages
    sb.tp.inject_datagrams([f[2]])
    assert [m.buffer for m in sb.top.messages] == [payload_of(300)]


@pytest.mark.parametrize("direction", ["down", "up"])
def test_partial_messages_of_departed_member_are_dropped(stacks, direction):
    a, b, c = UUID.random(), UUID.random(), UUID.random()
    sb_, sc_ = stacks(frag2(100), b), stacks(frag2(100), c)
    sb_.send(app_msg(None, b, payload_of(1000, 1)))
    sc_.send(app_msg(None, c, payload_of(1000, 2)))
    sc_.send(app_msg(None, c, payload_of(1000, 3)))
    fb, fc = [x.data for x in sb_.tp.sent], [x.data for x in sc_.tp.sent]
    sa = stacks(frag2(100), a)
    send_view = (lambda v: sa.prot.down(Event(EventType.VIEW_CHANGE, v))) if direction == "down" else \
        (lambda v: sa.prot.up(Event(EventType.VIEW_CHANGE, v)))
    send_view(view_of([a, b, c], 1))
    sa.tp.inject_datagrams(fb[:5] + fc[:5] + fc[10:15])
    assert sa.prot.pending() == {b: 1, c: 2}
    send_view(view_of([a, b], 2))                        # C left: its partial messages can never complete
    assert sa.prot.pending() == {b: 1}
    sa.tp.inject_datagrams(fb[5:])
    assert [m.buffer for m in sa.top.messages] == [payload_of(1000, 1)]
    assert sa.prot.pending() == {}


def test_config_event_at_init_and_start(stacks):
    a = UUID.random()
    s = stacks(frag2(60000), a)
    ups = s.top.events_of(EventType.CONFIG)
    downs = s.tp.events_of(EventType.CONFIG)
    assert ups and downs and all(e.arg == {"frag_size": 60000} for e in ups + downs)
    # a CONFIG event with frag_size (e.g. from a layer below) sets FRAG2's frag_size, and is passed on
    n = len(s.top.events_of(EventType.CONFIG))
    s.prot.up(Event(EventType.CONFIG, {"frag_size": 8000}))
    assert s.prot.frag_size == 8000 and len(s.top.events_of(EventType.CONFIG)) == n + 1
    s.prot.down(Event(EventType.CONFIG, {"frag_size": 9000, "other": 1}))
    assert s.prot.frag_size == 9000


def test_init_checks():
    from jgpy.stack.properties import apply_properties, properties_of
    p = FRAG2()
    apply_properties(p, {"frag_size": "60K", "overhead": "200"})
    assert p.frag_size == 60000 and properties_of(FRAG2)["overhead"].deprecated
    assert properties_of(FRAG2)["frag_size"].default == 1500
    with pytest.raises(ConfigError):
        FakeStack(frag2(0), start=False)
    s = FakeStack(frag2(64000), start=False)          # the fake transport does not bundle: accepted
    s.tp.enable_bundling = True                       # TP with bundling: frag_size must be < max_bundle_size
    with pytest.raises(ConfigError, match="max_bundle_size"):
        s.prot.init()
    s.prot.frag_size = 63999
    s.prot.init()


# ------------------------------------------------------------------------------------------------
# against Java's FRAG2 (the 2.12.2 jar): same fragments byte for byte, and each side reassembles the other's
# ------------------------------------------------------------------------------------------------

PROBE = textwrap.dedent("""
    import org.jgroups.*;
    import org.jgroups.protocols.FRAG2;
    import org.jgroups.stack.Protocol;
    import java.io.*;
    import java.util.*;

    /** stdin: "down|up <frag_size>", then one hex Message.writeTo per line; stdout: the messages FRAG2 passed
        on (down: the fragments, up: the reassembled messages), one hex Message.writeTo per line. */
    public class Frag2Probe {
        static final List<Message> out = new ArrayList<Message>();

        static class Sink extends Protocol {
            public Object down(Event e) { if(e.getType() == Event.MSG) out.add((Message)e.getArg()); return null; }
            public Object up(Event e) { if(e.getType() == Event.MSG) out.add((Message)e.getArg()); return null; }
        }

        public static void main(String[] args) throws Exception {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String[] cmd = in.readLine().trim().split(" ");
            FRAG2 frag = new FRAG2();
            frag.setId((short)5);
            frag.setFragSize(Integer.parseInt(cmd[1]));
            Sink sink = new Sink();
            frag.setDownProtocol(sink);
            frag.setUpProtocol(sink);
            String line;
            while((line = in.readLine()) != null) {
                line = line.trim();
                if(line.length() == 0) continue;
                byte[] data = new byte[line.length() / 2];
                for(int i = 0; i < data.length; i++)
                    data[i] = (byte)Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
                Message m = new Message(false);
                m.readFrom(new DataInputStream(new ByteArrayInputStream(data)));
                if(cmd[0].equals("down")) frag.down(new Event(Event.MSG, m));
                else frag.up(new Event(Event.MSG, m));
            }
            StringBuilder sb = new StringBuilder();
            for(Message m : out) {
                ByteArrayOutputStream bo = new ByteArrayOutputStream();
                m.writeTo(new DataOutputStream(bo));
                for(byte b : bo.toByteArray()) sb.append(String.format("%02x", b & 0xff));
                sb.append('\\n');
            }
            System.out.print(sb);
            System.out.flush();
        }
    }
""")


@pytest.fixture(scope="module")
def java_frag2(tmp_path_factory):
    """Runs Java's FRAG2 over messages: ``run("down"|"up", frag_size, [Message]) -> [Message]``."""
    from jgpy.testing.java import JGROUPS_JAR
    from tests.conftest import require_java
    require_java()
    d = tmp_path_factory.mktemp("frag2probe")
    (d / "Frag2Probe.java").write_text(PROBE)
    res = subprocess.run(["javac", "-nowarn", "-cp", str(JGROUPS_JAR), "-d", str(d), str(d / "Frag2Probe.java")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr

    def run(mode: str, frag_size: int, msgs: list) -> list:
        stdin = f"{mode} {frag_size}\n" + "".join(DIALECT.encode(m).hex() + "\n" for m in msgs)
        r = subprocess.run(["java", "-Djava.net.preferIPv4Stack=true", "-cp", f"{d}:{JGROUPS_JAR}", "Frag2Probe"],
                           input=stdin, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return [DIALECT.decode(Message, bytes.fromhex(line)) for line in r.stdout.split()]

    return run


def _without(msg: Message, *pids) -> Message:
    m = msg.copy()
    for pid in pids:
        m.remove_header(pid)
    return m


@pytest.mark.interop
def test_fragments_match_java_frag2_byte_for_byte(stacks, java_frag2):
    a, b = UUID.random(), UUID.random()
    originals = [app_msg(b, a, payload_of(100_003, 1), OOB | NO_FC, req_id=1),
                 app_msg(None, a, payload_of(3000, 2), 0, req_id=2),       # exactly 2 fragments
                 app_msg(None, a, payload_of(1500, 3), 0, req_id=3),       # == frag_size: passes unchanged
                 app_msg(None, a, payload_of(1501, 4), 0, req_id=4)]
    java_out = java_frag2("down", 1500, originals)
    s = stacks(frag2(1500), a)
    for m in originals:
        s.send(DIALECT.decode(Message, DIALECT.encode(m)))
    mine = [_without(x.msg, TP_ID) for x in s.tp.sent]
    assert len(mine) == len(java_out) == 67 + 2 + 1 + 2
    for i, (j, p) in enumerate(zip(java_out, mine)):
        assert DIALECT.encode(p).hex() == DIALECT.encode(j).hex(), f"message {i} differs from Java's FRAG2"
    # Java reassembles jgpy's fragments (shuffled) into the original messages (Java keeps its FragHeader on it)
    frags = mine[:]
    random.Random(9).shuffle(frags)
    java_up = java_frag2("up", 1500, frags)
    assert len(java_up) == len(originals)
    by_id = {m.get_header(201).id: m for m in java_up}
    for o in originals:
        got = by_id[o.get_header(201).id]
        assert got.buffer == o.buffer and (got.dest, got.src, got.flags) == (o.dest, o.src, o.flags)
        assert DIALECT.encode(_without(got, FRAG)) == DIALECT.encode(o)
    # and jgpy reassembles Java's fragments
    r = stacks(frag2(1500), b)
    jf = java_out[:]
    random.Random(11).shuffle(jf)
    r.tp.inject(jf)
    got = {m.get_header(201).id: m for m in r.top.messages}
    assert len(got) == len(originals)
    for o in originals:
        assert DIALECT.encode(got[o.get_header(201).id]) == DIALECT.encode(o)


def test_fragment_bytes_read_by_java_classes(stacks, java_codec):
    """Java's Message.readFrom reads a jgpy fragment (with the transport header) back to the same bytes."""
    a = UUID.random()
    s = stacks(frag2(1000), a)
    s.send(app_msg(None, a, payload_of(2500)))
    for x in s.tp.sent:
        data = DIALECT.encode(x.msg)
        rep = java_codec.decode("Message", data)
        assert rep["remaining"] == 0 and rep["hex"] == data.hex()
        hdrs = dict((pid, h) for pid, h in rep["value"]["headers"])
        fh = x.msg.get_header(FRAG)
        assert hdrs[FRAG] == {"class": "protocols.FragHeader", "id": fh.id, "frag_id": fh.frag_id,
                              "num_frags": fh.num_frags}
    assert isinstance(s.tp.sent[0].msg.get_header(FRAG), FragHeader)
