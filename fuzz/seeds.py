"""Seed inputs of the fuzzers: real datagrams and values of every kind a peer sends, encoded by jgpy.

:func:`datagram_seeds` are the datagrams ``tests/test_bad_input.py`` mutates (the 2.12 captures of
``../shared/docs/jgroups-2.12-captures.md`` when present, plus a bundle and a unicast built here);
:func:`corpus` adds structured seeds (MergeViews, digests, FD_SOCK caches, join responses, every header
class, ``setObject`` payloads, Java object streams, TCP handshakes and frames), each prefixed with the
byte that selects its decode target in :mod:`fuzz.targets`.
"""

from __future__ import annotations

import re
import struct

from jgpy import (DIALECT, AdditionalDataUUID, Digest, IpAddress, JoinRsp, MergeId, MergeView, Message, PayloadUUID,
                  PingData, Range, TopologyUUID, UUID, View, ViewId)
from jgpy._core import jg212
from jgpy.headers import (AuthHeader, BlocksMuxHeader, CompressHeader, CoordAnnouncement, DaisyHeader, FcHeader,
                          FdHeader, FdSimpleHeader, FdSockHeader, FlushHeader, FragHeader, GmsHeader, HeartbeatHeader,
                          MergefastHeader, MultiDestinationHeader, MuxHeader, NakAckHeader, PingHeader, PrioHeader,
                          RelayHeader, RequestCorrelatorHeader, ScopeHeader, SequencerHeader, SmackHeader, StableHeader,
                          StateHeader, StompHeader, StreamingStateHeader, TpHeader, Unicast2Header, UnicastHeader,
                          VerifyHeader, ViewSyncHeader)
from jgpy.javaser import state_request_bytes

A = UUID(1, 2)
B = UUID(3, 4)
CLUSTER = "fuzz"


def _capture_datagrams() -> list[bytes]:
    from tests.support import shared_file

    path = shared_file("docs/jgroups-2.12-captures.md")
    if path is None or not path.exists():
        return []
    return [bytes.fromhex(h) for h in re.findall(r"```\n([0-9a-f]+)\n```", path.read_text())
            if not h.startswith("62656c61")]          # TCP handshakes ("bela") are seeds of the TCP target


def datagram_seeds() -> list[bytes]:
    """Real datagrams: the captures, plus a bundle and a unicast with a digest built by jgpy."""
    seeds = _capture_datagrams()
    msgs = []
    for i in range(4):
        m = Message(None, bytes([i]) * 50, A)
        m.put_header(15, NakAckHeader.msg(i + 1)).put_header(21, TpHeader(CLUSTER))
        msgs.append(m)
    seeds.append(DIALECT.encode_bundle(msgs))
    m = Message(A, None, B)
    m.put_header(14, GmsHeader(5, my_digest=Digest([(A, 0, 5, 5), (B, 1, 2, -1)])))
    m.put_header(12, UnicastHeader(0, 1, 0, True)).put_header(21, TpHeader(CLUSTER))
    seeds.append(DIALECT.encode_message(m))
    return seeds


# ---- structured values ----------------------------------------------------------------------------------

def _addresses() -> list:
    return [A, IpAddress("127.0.0.1", 7800), IpAddress("::1", 7801, scope_id=3, additional_data=b"ad"),
            UUID(5, 6, additional_data=b"xyz"), PayloadUUID(7, 8, "payload"), AdditionalDataUUID(9, 10, b"\x00\x01"),
            TopologyUUID(11, 12, "site", "rack", "machine")]


def _views() -> list:
    v1 = View(ViewId(A, 3), [A, B])
    v2 = View(ViewId(B, 4), [B], payload=b"\xac\xed\x00\x05p")
    mv = MergeView(ViewId(A, 5), [A, B], [v1, v2])
    nested = MergeView(ViewId(A, 6), [A, B, UUID(5, 6)], [mv, View(ViewId(UUID(5, 6), 1), [UUID(5, 6)])])
    return [v1, v2, mv, nested, MergeView(ViewId(A, 7), None, None)]


def _digests() -> list:
    return [Digest([(A, 0, 5, 5), (B, 1, 2, -1)]), Digest([(a, 0, 0, 0) for a in _addresses()]), Digest()]


def _headers() -> list[tuple[int, object]]:
    """(protocol id, header) of every 2.12 header class jgpy knows, with their sub-values filled in."""
    views, digests, addrs = _views(), _digests(), _addresses()
    ping_data = PingData(A, views[3], ViewId(A, 6), True, "node-a", [addrs[1], addrs[2]])
    join_rsp = JoinRsp(views[0], digests[0], None)
    return [
        (15, NakAckHeader.msg(7)), (15, NakAckHeader.xmit_req(3, 9, B)), (12, UnicastHeader(0, 5, 1, True)),
        (12, UnicastHeader(1, 5)), (5, FragHeader(3, 1, 4)), (44, FcHeader(2)), (6, PingHeader(1, ping_data, CLUSTER)),
        (6, PingHeader(2, PingData(B, None, None, False, None, None), None, ViewId(B, 1))),
        (14, GmsHeader(GmsHeader.VIEW, view=views[3], my_digest=digests[1])),
        (14, GmsHeader(GmsHeader.JOIN_RSP, join_rsp=join_rsp)),
        (14, GmsHeader(GmsHeader.JOIN_RSP, join_rsp=JoinRsp(None, None, "rejected"))),
        (14, GmsHeader(GmsHeader.MERGE_RSP, view=views[2], my_digest=digests[0], merge_id=MergeId(A, 9))),
        (14, GmsHeader(GmsHeader.MERGE_REQ, mbr=A, mbrs=[A, B], merge_id=MergeId(B, 1), merge_rejected=True)),
        (40, Unicast2Header(1, 4, 9)), (16, StableHeader(1, digests[0])), (2, FdHeader(2, [A, B], A)),
        (29, HeartbeatHeader()),
        (3, FdSockHeader(FdSockHeader.GET_CACHE_RSP, cached_addrs=[(A, addrs[1]), (B, addrs[2])])),
        (3, FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=A, sock_addr=addrs[1])),
        (3, FdSockHeader(FdSockHeader.SUSPECT, mbrs=[A, B])), (13, VerifyHeader(1, A)),
        (17, StateHeader(2, 4, A, digests[0], "sid")), (32, StreamingStateHeader(3, 1, B, digests[0], addrs[1], None)),
        (31, FlushHeader(1, 4, [A, B], digests[0])), (26, SequencerHeader(1, ViewId(A, 2))),
        (19, CompressHeader(1234)), (34, CoordAnnouncement(views[2])),
        (33, AuthHeader(("org.jgroups.auth.SimpleToken", "chris"))),
        (33, AuthHeader(("org.jgroups.auth.X509Token", bytes(range(64))))),
        (33, AuthHeader(("org.jgroups.auth.RegexMembership", None))),
        (201, RequestCorrelatorHeader(0, 77, True, 201)), (201, MultiDestinationHeader(1, 78, False, 201, [B])),
        (18, SmackHeader(1, 12)), (27, FdSimpleHeader(1)), (28, ViewSyncHeader(1, views[2])),
        (28, ViewSyncHeader(1, views[3])), (28, ViewSyncHeader(2, None)), (202, MuxHeader("svc", None)),
        (202, MuxHeader(None, (3, "svc", A, b"state"))), (35, MergefastHeader(views[0])), (41, ScopeHeader(2, 7)),
        (204, BlocksMuxHeader(5)), (42, DaisyHeader(3)), (43, RelayHeader(0, addrs[1])), (43, RelayHeader(2)),
        (47, StompHeader(0, (("destination", "/a"), ("sender", "x")))), (48, PrioHeader(4)),
    ]


def _values() -> list:
    views = _views()
    return _addresses() + views + _digests() + [
        ViewId(A, 1), JoinRsp(views[0], _digests()[0], "reason"), MergeId(A, 3), Range(4, 9),
        PingData(A, views[3], ViewId(A, 6), True, "x", [IpAddress("127.0.0.1", 1)]),
    ] + [h for _, h in _headers()]


def header_datagrams() -> list[bytes]:
    """One datagram per header of :func:`_headers`, with a TpHeader; a setObject payload on some."""
    out = []
    for i, (pid, hdr) in enumerate(_headers()):
        m = Message(B if i % 2 else None, None, A)
        if i % 3 == 0:
            m.set_object(_views()[3])
        m.put_header(pid, hdr).put_header(21, TpHeader(CLUSTER))
        out.append(DIALECT.encode_message(m, m.dest is None))
    return out


def object_payloads() -> list[bytes]:
    """``Message.setObject`` payloads of every type tag, Streamables included."""
    inner = Message(B, b"abc", A)
    inner.put_header(15, NakAckHeader.msg(2))
    objs = [None, True, 7, 1 << 40, 2.5, "text", b"\x00\x01",
            jg212.JavaObject("Character", "x"), jg212.JavaObject("Short", -3), jg212.JavaObject("Byte", 5),
            jg212.JavaObject("Float", 1.5), jg212.JavaObject("Serializable", state_request_bytes("s", A)),
            jg212.JavaObject("Streamable", (999, b"\x01\x02")),
            jg212.JavaObject("Streamable", ("org.example.Thing", b"\x03")),
            inner, ViewId(A, 2), _digests()[0], JoinRsp(_views()[0], None, None),
            PingData(A, None, None, False, "n", None), A, IpAddress("10.0.0.1", 5)] + _views()
    return [jg212.object_to_buffer(o) for o in objs]


# ---- Java object streams --------------------------------------------------------------------------------

def _utf(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _class_desc(name: str, flags: int, fields: list[tuple[str, str, bytes | None]], super_desc: bytes = b"\x70",
                annotations: bytes = b"") -> bytes:
    out = b"\x72" + _utf(name) + struct.pack(">qBH", 42, flags, len(fields))
    for code, fname, cls in fields:
        out += code.encode() + _utf(fname) + (cls or b"")
    return out + annotations + b"\x78" + super_desc


def java_streams() -> list[bytes]:
    """Object streams as Java writes them: state requests, and strings, enums, arrays, Serializable objects with
    a super class and writeObject data, references, resets, a proxy class and long block data."""
    head = b"\xac\xed\x00\x05"
    serializable = (b"\x73" + _class_desc("org.example.Point", 0x03, [("I", "x", None), ("L", "name", b"\x74" +
                    _utf("Ljava/lang/String;"))], super_desc=_class_desc("org.example.Base", 0x02, [("J", "id", None)]))
                    + struct.pack(">q", 5) + struct.pack(">i", 9) + b"\x74" + _utf("nm") + b"\x77\x02hi\x78")
    enum = b"\x7e" + _class_desc("org.example.Color", 0x12, [], _class_desc("java.lang.Enum", 0x12, [])) + \
        b"\x74" + _utf("RED")
    int_array = b"\x75" + _class_desc("[I", 0x02, []) + struct.pack(">i", 3) + struct.pack(">iii", 1, 2, 3)
    obj_array = (b"\x75" + _class_desc("[Ljava.lang.Object;", 0x02, []) + struct.pack(">i", 2) + b"\x74" + _utf("a")
                 + b"\x75\x71\x00\x7e\x00\x00" + struct.pack(">i", 0))
    proxy = b"\x73\x7d" + struct.pack(">i", 1) + _utf("java.lang.Runnable") + b"\x78\x70"
    long_block = b"\x73" + _class_desc("org.example.Ext", 0x0C, []) + b"\x7a" + struct.pack(">i", 300) + \
        bytes(300) + b"\x78"
    streams = [state_request_bytes(None, None), state_request_bytes("state-1", A),
               state_request_bytes("h\u00e9llo\x00\U0001F600" * 20, UUID(-1, -2))]
    reset = b"\x74" + _utf("before reset") + b"\x79\x74" + _utf("after reset")
    a_class = b"\x76" + _class_desc("java.lang.Thread", 0x02, [])
    long_string = b"\x7c" + struct.pack(">q", 3) + b"abc"
    streams += [head + body for body in (serializable, enum, int_array, obj_array, proxy, long_block, reset, a_class,
                                         long_string)]
    return streams


def tcp_streams() -> list[bytes]:
    """A connecting peer's first bytes: the ``bela`` handshake, then frames."""
    frames = b"".join(jg212.frame(d) for d in datagram_seeds()[-2:])
    return [jg212.encode_tcp_handshake(IpAddress("127.0.0.1", 7800)) + frames,
            jg212.encode_tcp_handshake(IpAddress("::1", 7801, additional_data=b"a")) + jg212.frame(b"")]


def corpus() -> list[bytes]:
    """Every seed, prefixed with the byte that selects its target in :mod:`fuzz.targets`."""
    from fuzz.targets import TARGET_NAMES, value_kind_index

    def tagged(name: str, items) -> list[bytes]:
        sel = bytes([TARGET_NAMES.index(name)])
        return [sel + x for x in items]

    out = tagged("datagram", datagram_seeds() + header_datagrams())
    out += tagged("object", object_payloads())
    out += tagged("javaser", java_streams())
    out += tagged("tcp", tcp_streams())
    out += tagged("value", [bytes([value_kind_index(v)]) + DIALECT.encode(v) for v in _values()])
    return out
