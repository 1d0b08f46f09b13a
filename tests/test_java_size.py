"""Java's ``Message.size()`` estimates (``DIALECT.message_size``, from the spec: jgpy/_core/twin.py) against the
2.12.2 jar, and FRAG deciding
*whether* to fragment exactly as Java's FRAG does where ``size()`` and the encoded length differ.

A small probe program (our own code, compiled against the jar at test time) prints ``Message.size()`` of
messages given as ``Message.writeTo`` hex, or runs Java's FRAG over them and prints what FRAG passed down.
"""

from __future__ import annotations

import random
import subprocess
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

from jgpy import DIALECT, UUID, Digest, Message
from jgpy.headers import RequestCorrelatorHeader, StateHeader
from jgpy.protocols.frag import FRAG
from jgpy.testing.javaorder import digest_read_order
from tests import strategies as S
from tests.fakestack import TP_ID, FakeStack

pytestmark = [pytest.mark.interop]

FRAG_ID = 4

PROBE = textwrap.dedent("""
    import org.jgroups.*;
    import org.jgroups.protocols.FRAG;
    import org.jgroups.stack.Protocol;
    import java.io.*;
    import java.util.*;

    /** stdin: "size" or "frag <frag_size>", then one hex Message.writeTo per line. stdout: per message its
        Message.size() ("size"), or the hex Message.writeTo of every message FRAG passed down ("frag"). */
    public class SizeProbe {
        static final List<Message> out = new ArrayList<Message>();

        static class Sink extends Protocol {
            public Object down(Event e) { if(e.getType() == Event.MSG) out.add((Message)e.getArg()); return null; }
            public Object up(Event e) { return null; }
        }

        static String hex(Message m) throws IOException {
            ByteArrayOutputStream bo = new ByteArrayOutputStream();
            m.writeTo(new DataOutputStream(bo));
            StringBuilder sb = new StringBuilder();
            for(byte b : bo.toByteArray()) sb.append(String.format("%02x", b & 0xff));
            return sb.toString();
        }

        public static void main(String[] args) throws Exception {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String[] cmd = in.readLine().trim().split(" ");
            FRAG frag = null;
            if(cmd[0].equals("frag")) {
                frag = new FRAG();
                frag.setId((short)4);
                frag.setFragSize(Integer.parseInt(cmd[1]));
                Sink sink = new Sink();
                frag.setDownProtocol(sink);
                frag.setUpProtocol(sink);
            }
            StringBuilder sb = new StringBuilder();
            String line;
            while((line = in.readLine()) != null) {
                line = line.trim();
                if(line.length() == 0) continue;
                byte[] data = new byte[line.length() / 2];
                for(int i = 0; i < data.length; i++)
                    data[i] = (byte)Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
                Message m = new Message(false);
                m.readFrom(new DataInputStream(new ByteArrayInputStream(data)));
                if(frag == null)
                    sb.append(m.size()).append('\\n');
                else
                    frag.down(new Event(Event.MSG, m));
            }
            for(Message m : out)
                sb.append(hex(m)).append('\\n');
            System.out.print(sb);
            System.out.flush();
        }
    }
""")


@pytest.fixture(scope="module")
def java_probe(tmp_path_factory):
    """``run(["size"] | ["frag", n], [Message]) -> [str]``: the probe's output lines."""
    from jgpy.testing.java import JGROUPS_JAR
    from tests.conftest import require_java
    require_java()
    d = tmp_path_factory.mktemp("sizeprobe")
    (d / "SizeProbe.java").write_text(PROBE)
    res = subprocess.run(["javac", "-nowarn", "-cp", str(JGROUPS_JAR), "-d", str(d), str(d / "SizeProbe.java")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr

    def run(cmd: list, msgs: list) -> list[str]:
        stdin = " ".join(str(c) for c in cmd) + "\n" + "".join(DIALECT.encode(m).hex() + "\n" for m in msgs)
        r = subprocess.run(["java", "-Djava.net.preferIPv4Stack=true", "-cp", f"{d}:{JGROUPS_JAR}", "SizeProbe"],
                           input=stdin, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.split()

    return run


def _uniform_digests(msg: Message) -> bool:
    """Java sizes a Digest by the first address of its hash map; with addresses of one size the order does
    not matter (every cluster's digest has one kind of address)."""
    for _, h in msg.headers:
        for f in getattr(h, "FIELDS", ()):
            v = getattr(h, f)
            digests = [v] if isinstance(v, Digest) else [v.digest] if hasattr(v, "digest") and v.digest else []
            for d in digests:
                if len({DIALECT.java_size(e[0]) for e in d.entries()}) > 1:
                    return False
    return True


def test_message_size_matches_java(java_probe):
    """Every header type of 2.12, with every kind of address and awkward strings (non-BMP chars count two)."""
    msgs: list = []

    @settings(max_examples=1500, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(S.messages(java=True))
    def collect(m):
        try:
            DIALECT.encode(m)
        except Exception:  # noqa: BLE001 - values the codec refuses (e.g. too long) are not messages
            return
        if _uniform_digests(m):
            msgs.append(m)

    collect()
    assert len(msgs) > 1000
    java = [int(x) for x in java_probe(["size"], msgs)]
    assert len(java) == len(msgs)
    wrong = [(m, j, DIALECT.message_size(m)) for m, j in zip(msgs, java) if DIALECT.message_size(m) != j]
    assert not wrong, f"{len(wrong)} of {len(msgs)} differ, e.g. {wrong[:3]}"
    # the estimates really differ from the encoded lengths (else this module would be pointless)
    assert sum(1 for m, j in zip(msgs, java) if j != len(DIALECT.encode(m))) > 100


def _state_rsp(members: list, payload: bytes, req_id: int = 1) -> Message:
    """A partial-state response as it passes FRAG (STATE_TRANSFER sits above FRAG2/FRAG in udp.xml): its state
    id is not ASCII, so Java's StateHeader.size() (chars + 2) is less than the bytes written."""
    m = Message(members[1], payload)
    # Java re-writes a digest it read in its hash map's order: build ours in that order to compare bytes
    ordered = [members[i] for i in digest_read_order(members)]
    m.put_header(17, StateHeader(StateHeader.STATE_RSP, 5, members[0],
                                 Digest([(a, 0, 10, 12) for a in ordered]), "Zustand-\u00e4-\u72b6\u6001"))
    m.put_header(201, RequestCorrelatorHeader(0, req_id, True))
    return m


def test_frag_decides_like_java_where_size_and_length_differ(java_probe):
    """Around the boundary where Java's Message.size() reaches frag_size, jgpy's FRAG sends exactly what Java's
    FRAG sends: the message unchanged, or the same fragments, byte for byte."""
    members = [UUID.random() for _ in range(3)]
    frag_size = 1000
    base = _state_rsp(members, b"")
    java_base = int(java_probe(["size"], [base])[0])
    assert java_base == DIALECT.message_size(base) != len(DIALECT.encode(base)), \
        "a message whose estimate differs from its length"
    rnd = random.Random(4)
    deltas = range(-3, 4)                             # Java's size() = frag_size + delta
    msgs = [_state_rsp(members, rnd.randbytes(frag_size - java_base + d), d + 10) for d in deltas]
    assert [int(x) for x in java_probe(["size"], msgs)] == [frag_size + d for d in deltas]
    java_out = java_probe(["frag", frag_size], msgs)
    p = FRAG()
    p.frag_size = frag_size
    s = FakeStack(p, members[0], connect=True)
    try:
        for m in msgs:
            s.send(m)
        mine = []
        for x in s.tp.sent:
            m = x.msg.copy()
            m.remove_header(TP_ID)
            m.src = None                              # Java's FRAG leaves src to the transport
            mine.append(DIALECT.encode(m).hex())
        plain = sum(1 for x in s.tp.sent if not x.msg.has_header(FRAG_ID))
    finally:
        s.stop()
    assert mine == java_out
    assert plain == 4, "size <= frag_size passes unchanged (deltas -3..0), bigger ones are fragmented"


def test_frag_state_header_with_non_bmp_state_id(java_probe):
    """``StateHeader.size()`` counts UTF-16 chars + 2 for the state id, not its modified UTF-8 bytes."""
    a = UUID.random()
    m = Message(None, b"x" * 100)
    m.put_header(17, StateHeader(StateHeader.STATE_RSP, 5, a, None, "\U0001F600 state \u00e9"))
    assert int(java_probe(["size"], [m])[0]) == DIALECT.message_size(m) != len(DIALECT.encode(m))
