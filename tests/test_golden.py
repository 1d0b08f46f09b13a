"""Golden tests against the live Java 2.12.2 classes, in both directions, for every wire class.

For each sample value:
  1. the Java classes encode it, and jgpy's encoding of the same value must be byte-identical;
  2. jgpy decodes the Java bytes to an equal value;
  3. the Java classes decode jgpy's bytes to an equal value and re-encode them byte-identically.
Java writes hash maps (digests, FD_SOCK caches) in its own iteration order; jgpy keeps the order it is
given, so samples are put in Java's order first (jgpy.testing.javaorder) and the bytes compared exactly.
"""

from __future__ import annotations

import json
import math

import pytest

from jgpy import (DIALECT, AdditionalDataUUID, Digest, IpAddress, JavaObject, JoinRsp, MergeId, MergeView, Message,
                  PayloadUUID, PingData, Range, TopologyUUID, UUID, View, ViewId, object_from_buffer, object_to_buffer)
from jgpy.headers import (AuthHeader, BlocksMuxHeader, CompressHeader, CoordAnnouncement, DaisyHeader, EncryptHeader,
                          FcHeader, FdHeader, FdSimpleHeader, FdSockHeader, FlushHeader, FragHeader, GmsHeader,
                          HeartbeatHeader, MergefastHeader, MultiDestinationHeader, MuxHeader, NakAckHeader, PingHeader,
                          PrioHeader, PullHeader, RelayHeader, RequestCorrelatorHeader, ScopeHeader, SequencerHeader, SfcHeader,
                          SmackHeader, StableHeader, StateHeader, StompHeader, StreamingStateHeader, TpHeader,
                          Unicast2Header, UnicastHeader, VerifyHeader, ViewSyncHeader)
from jgpy.protocols.encrypt_keys import key_version
from jgpy.testing import javaorder
from jgpy.testing.javajson import from_json, to_json

pytestmark = [pytest.mark.interop]

A = UUID(0x8F6B0E1397760F65, 0xE501531CB1B7DC67)
B = UUID(0x7D377371EAAB8002, 0x26FA1A6852EFC839)
C = UUID(-1, 1)
D = UUID(0, -(1 << 63))
E = UUID(0x0123456789ABCDEF, 0x0FEDCBA987654321, additional_data=b"legacy")
P = IpAddress("127.0.0.1", 46329)
P2 = IpAddress("10.1.2.3", 65535, additional_data=b"\x01\x02")
P6 = IpAddress("fe80::1", 7800, scope_id=3)
P6M = IpAddress("::ffff:1.2.3.4", 1)
PU = PayloadUUID(5, 6, "payload-\u00e9")
AD = AdditionalDataUUID(7, 8, b"\x00\xff")
TU = TopologyUUID(9, 10, "site", None, "m1")

V1 = View(ViewId(A, 1), [A, B])
V2 = View(ViewId(B, 7), [B, C, D])
MV = MergeView(ViewId(A, 9), [A, B, C, D], [V1, MergeView(ViewId(C, 3), [C, D], [View(ViewId(C, 2), [C])]), V2])
DG = Digest([(A, 0, 0, 0), (B, 0, 0, -1)])
DG5 = Digest([(A, 1, 5, 9), (B, 0, 7, 7), (C, 3, 3, -1), (D, 0, 1 << 40, 1 << 41), (E, 2, 2, 2)])
DG_BIG = Digest([(UUID(i * 7919, -i * 104729), i, i + 1, i + 2) for i in range(1, 40)])
PD = PingData(A, None, None, False, "A", [P])
PD_FULL = PingData(B, V2, ViewId(B, 7), True, "B\u0000\U0001F600", [P, P6])
PD_MERGE = PingData(C, MV, ViewId(A, 9), True, None, None)

SAMPLES: list[tuple[str, object]] = [
    # addresses (Util.writeAddress and the bare bodies)
    *[("Address", a) for a in (None, A, C, D, E, P, P2, P6, P6M, PU, AD, TU)],
    *[(None, a) for a in (A, E, P, P6, PU, AD, TU)],
    ("Addresses", None), ("Addresses", []), ("Addresses", [A, None, P, PU]),
    # data classes
    ("ViewId", ViewId(A, 0)), ("ViewId", ViewId(B, 1 << 40)), ("ViewId", ViewId(None, -5)),
    ("View", V1), ("View", View(None, None)), ("View", View(ViewId(A, 2), [])), ("MergeView", MV),
    ("MergeView", MergeView(ViewId(A, 1), [A], None)),
    (None, Digest()), (None, DG), (None, DG5), (None, DG_BIG),
    (None, JoinRsp(V1, DG, None)), (None, JoinRsp(None, None, "join rejected: auth failed")),
    (None, MergeId(A, 7)), (None, MergeId(None, -1)),
    (None, PD), (None, PD_FULL), (None, PD_MERGE), (None, PingData(None)),
    (None, Range(1, 10)), (None, Range(-1, (1 << 62) + 3)),
    # headers
    (None, TpHeader("jgtest")), (None, TpHeader("")), (None, TpHeader("n\u0000ul \u00e9\u20ac\U0001F600 \ud800x")),
    (None, NakAckHeader.msg(1)), (None, NakAckHeader.msg(-7)), (None, NakAckHeader.xmit_rsp(1 << 50)),
    (None, NakAckHeader.xmit_req(10, 20, B)), (None, NakAckHeader(2, -1, None, None)), (None, NakAckHeader(9)),
    (None, UnicastHeader(0, 1, 0, True)), (None, UnicastHeader(0, 123456789012, -2, False)),
    (None, UnicastHeader(1, 77)), (None, UnicastHeader(2)),
    (None, Unicast2Header(0, 5, 0, 3, True)), (None, Unicast2Header(1, 5, 9)), (None, Unicast2Header(2, 4)),
    (None, Unicast2Header(3, 1, 100)),
    (None, FragHeader(1, 0, 3)), (None, FragHeader(-1, 2147483647, -2147483648)),
    (None, FcHeader(1)), (None, FcHeader(2)), (None, SfcHeader(3)),
    (None, PingHeader(1, PD, "jgtest", None)), (None, PingHeader(2, PD_FULL, None, None)),
    (None, PingHeader(1, None, "jgtest", ViewId(A, 2))), (None, PingHeader(2, PD_MERGE, None, None)),
    (None, GmsHeader(1, mbr=B, use_flush_if_present=True)),
    (None, GmsHeader(2, join_rsp=JoinRsp(V1, DG))),
    (None, GmsHeader(3, mbr=B, use_flush_if_present=True)), (None, GmsHeader(4)),
    (None, GmsHeader(5, view=V1, my_digest=DG)), (None, GmsHeader(5, view=MV)),
    (None, GmsHeader(6, mbr=A, mbrs=[A, B], merge_id=MergeId(A, 3))),
    (None, GmsHeader(7, view=V2, my_digest=DG5, merge_id=MergeId(A, 3), merge_rejected=True)),
    (None, GmsHeader(8, view=MV, my_digest=DG5, merge_id=MergeId(A, 3))),
    (None, GmsHeader(9, merge_id=MergeId(B, 1))), (None, GmsHeader(10)),
    (None, GmsHeader(11, mbr=C, use_flush_if_present=True)), (None, GmsHeader(12, merge_id=MergeId(A, 4))),
    (None, GmsHeader(13)), (None, GmsHeader(14, my_digest=Digest([(A, 0, 4, 4)]))),
    (None, GmsHeader(15, my_digest=DG5)),
    (None, StableHeader(1, DG5)), (None, StableHeader(2, DG)), (None, StableHeader(1, None)),
    (None, FdHeader(0)), (None, FdHeader(1, None, B)), (None, FdHeader(2, [A, C], B)),
    (None, HeartbeatHeader()),
    (None, FdSockHeader(12, A, P)), (None, FdSockHeader(11, B)), (None, FdSockHeader(13, A)),
    (None, FdSockHeader(14, None, None, [(A, P), (B, P6), (C, P2), (D, IpAddress("127.0.0.2", 9))])),
    (None, FdSockHeader(10, None, None, None, [A, B, C, D, E])),
    (None, VerifyHeader(1, A)), (None, VerifyHeader(2, B)),
    (None, StateHeader(1, 1700000000123, B, None, None)), (None, StateHeader(2, 0, A, DG5, "partial-1")),
    (None, StreamingStateHeader(1, 5, B, None, None, None)),
    (None, StreamingStateHeader(2, 6, A, DG, IpAddress("127.0.0.1", 40001), "sid")),
    (None, StreamingStateHeader(3, 7, A, None, None, None)),
    (None, FlushHeader(0, 12, [A, B], None)), (None, FlushHeader(3, 12, None, DG5)), (None, FlushHeader(9)),
    (None, SequencerHeader(1, ViewId(A, 42))), (None, SequencerHeader(2, None)),
    (None, EncryptHeader(0, key_version(bytes(range(16))), False)), (None, EncryptHeader(3, "\ufffd\U0001f600", True)),
    (None, EncryptHeader(1, None, False)),
    (None, CompressHeader(123456)), (None, CompressHeader(-1)),
    (None, AuthHeader(("org.jgroups.auth.SimpleToken", "chris"))), (None, AuthHeader(("org.jgroups.auth.MD5Token", None))),
    (None, AuthHeader(("org.jgroups.auth.MD5Token", "\u00e9t\u00e9"))),
    (None, AuthHeader(("org.jgroups.auth.FixedMembershipToken", "emptyToken"))),
    (None, AuthHeader(("org.jgroups.auth.RegexMembership", None))),
    (None, AuthHeader(("org.jgroups.auth.X509Token", bytes(range(256))))),
    (None, CoordAnnouncement(V1)), (None, CoordAnnouncement(MV)),
    (None, CoordAnnouncement(None)),
    (None, RequestCorrelatorHeader(0, 2, True, 201)), (None, RequestCorrelatorHeader(1, -9, False, 201)),
    (None, MultiDestinationHeader(0, 3, True, 201, [B, C])), (None, MultiDestinationHeader(0, 3, False, 201, None)),
    # 2.12 protocols outside the jar's stack configs (decoded in captures)
    (None, SmackHeader(1, 42)), (None, SmackHeader(2, -1)), (None, SmackHeader(4, 1 << 40)), (None, SmackHeader(0)),
    (None, FdSimpleHeader(1)), (None, FdSimpleHeader(2)),
    (None, ViewSyncHeader(1, V1)), (None, ViewSyncHeader(1, MV)), (None, ViewSyncHeader(2, None)),
    (None, MuxHeader("svc-1", None)), (None, MuxHeader(None, (3, "svc-\u00e9", A, None))),
    (None, MuxHeader(None, (5, None, P, bytes(range(200))))), (None, MuxHeader("x", (7, "s", None, b"\x00"))),
    (None, MergefastHeader(V2)), (None, MergefastHeader(MV)), (None, MergefastHeader(None)),
    (None, ScopeHeader(1, 5)), (None, ScopeHeader(2, -32768)),
    (None, BlocksMuxHeader(7)), (None, BlocksMuxHeader(-1)),
    (None, DaisyHeader(3)), (None, DaisyHeader(0)),
    (None, RelayHeader(0, A)), (None, RelayHeader(0, P)), (None, RelayHeader(0, None)), (None, RelayHeader(1)),
    (None, RelayHeader(2)), (None, RelayHeader(3)),
    (None, StompHeader(0, [("destination", "/topic/\u00e9")])), (None, StompHeader(1, [("endpoint", "127.0.0.1:8787")])),
    (None, StompHeader(1, None)),
    (None, PrioHeader(0)), (None, PrioHeader(-128)), (None, PrioHeader(127)),
    # blocks.PullPushAdapter: an identifier as Util.objectToStream writes it (the Serializables: streams the JVM wrote)
    (None, PullHeader(None)), (None, PullHeader(JavaObject("Integer", 42))), (None, PullHeader(JavaObject("Short", -7))),
    (None, PullHeader(JavaObject("String", "id-\u00e9\U0001f600\x00"))), (None, PullHeader(JavaObject("String", ""))),
    (None, PullHeader(JavaObject("Long", -(1 << 40)))), (None, PullHeader(JavaObject("Boolean", True))),
    (None, PullHeader(JavaObject("Byte", -128))), (None, PullHeader(JavaObject("Character", "\u20ac"))),
    (None, PullHeader(JavaObject("Double", math.pi))), (None, PullHeader(JavaObject("Float", -0.25))),
    (None, PullHeader(JavaObject("byte[]", bytes(range(20))))), (None, PullHeader(JavaObject("byte[]", b""))),
    (None, PullHeader(JavaObject("Streamable", ViewId(A, 3)))), (None, PullHeader(JavaObject("Streamable", V1))),
    (None, PullHeader(JavaObject("Streamable", MV))), (None, PullHeader(JavaObject("Streamable", A))),
    *[(None, PullHeader(JavaObject("Serializable", bytes.fromhex(h)))) for h in (
        # new ArrayList<String>(Arrays.asList("a", "b")), new Date(1234567890123L), new int[]{1, 2, 3}, TimeUnit.SECONDS
        "aced0005737200136a6176612e7574696c2e41727261794c6973747881d21d99c7619d03000149000473697a6578700000000277"
        "0400000002740001617400016278",
        "aced00057372000e6a6176612e7574696c2e44617465686a81014b597419030000787077080000011f71fb04cb78",
        "aced0005757200025b494dba602676eab2a5020000787000000003000000010000000200000003",
        "aced00057e72001d6a6176612e7574696c2e636f6e63757272656e742e54696d65556e697400000000000000001200007872000e6a61"
        "76612e6c616e672e456e756d000000000000000012000078707400075345434f4e4453")],
]


def _messages():
    m1 = Message(None, bytes(range(256)) * 4, B)
    m1.put_header(15, NakAckHeader.msg(5)).put_header(21, TpHeader("jgtest"))
    m2 = Message(A, None, B, Message.OOB | Message.DONT_BUNDLE | Message.NO_FC)
    m2.put_header(201, RequestCorrelatorHeader(1, 4)).put_header(12, UnicastHeader(0, 3, 1, False))
    m2.put_header(21, TpHeader("jgtest"))
    m3 = Message(P, b"", None, 0xFF)
    m4 = Message(None, b"x", A)
    m4.put_header(14, GmsHeader(5, view=V1, my_digest=DG5)).put_header(15, NakAckHeader.msg(1))
    m4.put_header(21, TpHeader("jgtest"))
    return [m1, m2, m3, m4]


MESSAGES = _messages()
SAMPLES += [("Message", m) for m in MESSAGES]

JAVA_OBJECTS = [
    JavaObject("null", None), JavaObject("Boolean", True), JavaObject("Boolean", False), JavaObject("Byte", -128),
    JavaObject("Character", "\u20ac"), JavaObject("Short", -2), JavaObject("Integer", 42), JavaObject("Integer", -(1 << 31)),
    JavaObject("Long", (1 << 63) - 1), JavaObject("Float", 1.5), JavaObject("Float", -0.25), JavaObject("Double", math.pi),
    JavaObject("Double", float("-inf")), JavaObject("Double", float("nan")), JavaObject("String", "hello-string"),
    JavaObject("String", ""), JavaObject("byte[]", b"\x09\x08\x07"), JavaObject("byte[]", b""),
    JavaObject("Streamable", V1), JavaObject("Streamable", MV), JavaObject("Streamable", DG5),
    JavaObject("Streamable", ViewId(A, 3)), JavaObject("Streamable", JoinRsp(V1, DG)), JavaObject("Streamable", PD_FULL),
    JavaObject("Streamable", MESSAGES[0]),
]


def _kind(kind, value):
    return kind if kind is not None else to_json(value)["class"]


def _java_order_json(v):
    """Rearrange hash-map contents of a JSON value into the order Java writes them after reading."""
    if isinstance(v, list):
        return [_java_order_json(x) for x in v]
    if not isinstance(v, dict):
        return v
    v = {k: _java_order_json(x) for k, x in v.items()}
    cls = v.get("class")
    if cls == "util.Digest":
        keys = [from_json(e[0]) for e in v["entries"]]
        v["entries"] = javaorder.reorder(v["entries"], javaorder.digest_read_order(keys))
    elif cls == "protocols.FD_SOCK$FdHeader":
        if v["cached_addrs"]:
            keys = [from_json(e[0]) for e in v["cached_addrs"]]
            v["cached_addrs"] = javaorder.reorder(v["cached_addrs"], javaorder.hashmap_order(keys, len(keys)))
        if v["mbrs"]:
            keys = [from_json(e) for e in v["mbrs"]]
            v["mbrs"] = javaorder.reorder(v["mbrs"], javaorder.hashmap_order(keys, None))
    return v


def _canon(v):
    """A JSON value with hash-map order removed, for order-insensitive equality."""
    if isinstance(v, list):
        return [_canon(x) for x in v]
    if not isinstance(v, dict):
        return v
    v = {k: _canon(x) for k, x in v.items()}
    cls = v.get("class")
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731
    if cls == "util.Digest":
        v["entries"] = sorted(v["entries"], key=key)
    elif cls == "protocols.FD_SOCK$FdHeader":
        for f in ("cached_addrs", "mbrs"):
            if v[f]:
                v[f] = sorted(v[f], key=key)
    elif cls == "protocols.STOMP$StompHeader" and v["headers"]:
        v["headers"] = sorted(v["headers"], key=key)
    return v


def _jgpy_encode(kind, value):
    if kind == "Address":
        return DIALECT.encode_address(value)
    if kind == "Addresses":
        return DIALECT.encode_addresses(value)
    return DIALECT.encode(value)


def _jgpy_decode(kind, value, data):
    if kind == "Address":
        return DIALECT.decode_address(data)
    if kind == "Addresses":
        return DIALECT.decode_addresses(data)
    return DIALECT.decode(type(value), data)


def _json_of(kind, value):
    if kind == "Addresses":
        return None if value is None else [to_json(a) for a in value]
    return to_json(value)


def _value_of(kind, j):
    if kind == "Addresses":
        return None if j is None else [from_json(a) for a in j]
    return from_json(j)


@pytest.mark.parametrize("kind,value", SAMPLES, ids=lambda x: x if isinstance(x, str) else None)
def test_golden_both_directions(java_codec, kind, value):
    kind = _kind(kind, value)
    value = _value_of(kind, _java_order_json(_json_of(kind, value)))

    java_bytes = java_codec.encode(kind, _json_of(kind, value))
    mine = _jgpy_encode(kind, value)
    assert mine.hex() == java_bytes.hex(), "jgpy's encoding differs from the Java classes'"

    decoded = _jgpy_decode(kind, value, java_bytes)
    assert _canon(_json_of(kind, decoded)) == _canon(_json_of(kind, value))

    rep = java_codec.decode(kind, mine)
    assert rep["remaining"] == 0 and rep["consumed"] == len(mine)
    assert rep["hex"] == mine.hex(), "Java re-encoded jgpy's bytes differently"
    assert _canon(_json_of(kind, _value_of(kind, rep["value"]))) == _canon(_json_of(kind, value))


@pytest.mark.parametrize("obj", JAVA_OBJECTS, ids=lambda o: f"{o.type}")
def test_golden_java_objects(java_codec, obj):
    obj = from_json(_java_order_json(to_json(obj)))
    java_bytes = java_codec.encode("JavaObject", to_json(obj))
    assert object_to_buffer(obj).hex() == java_bytes.hex()
    back = object_from_buffer(java_bytes, typed=True)
    assert _canon(to_json(back)) == _canon(to_json(obj))
    rep = java_codec.decode("JavaObject", object_to_buffer(obj))
    assert rep["hex"] == java_bytes.hex()
    assert _canon(to_json(from_json(rep["value"]))) == _canon(to_json(obj))


def test_golden_default_object_mapping(java_codec):
    """Plain Python values box like Java's: int -> Integer/Long, float -> Double, str -> String, bytes -> byte[]."""
    cases = [(7, JavaObject("Integer", 7)), (1 << 40, JavaObject("Long", 1 << 40)), (2.5, JavaObject("Double", 2.5)),
             ("s", JavaObject("String", "s")), (b"\x01", JavaObject("byte[]", b"\x01")), (True, JavaObject("Boolean", True)),
             (None, JavaObject("null", None)), (V1, JavaObject("Streamable", V1))]
    for plain, typed in cases:
        assert object_to_buffer(plain) == java_codec.encode("JavaObject", to_json(typed))


@pytest.mark.parametrize("single", [True, False])
def test_golden_datagrams(java_codec, single):
    if single:
        msgs = [MESSAGES[1]]
        value = {"class": "Datagram", "list": False, "multicast": False, "dest": None, "src": None,
                 "messages": [to_json(MESSAGES[1])]}
        mine = DIALECT.encode_message(MESSAGES[1], multicast=False)
    else:
        msgs = []
        for i in range(5):
            m = Message(None, bytes([i]) * (i * 10), B if i != 3 else C)
            m.put_header(15, NakAckHeader.msg(i + 1)).put_header(21, TpHeader("jgtest"))
            msgs.append(m)
        value = {"class": "Datagram", "list": True, "multicast": True, "dest": None, "src": to_json(B),
                 "messages": [to_json(m) for m in msgs]}
        mine = DIALECT.encode_bundle(msgs, dest=None, src=B, multicast=True)
    java_bytes = java_codec.encode("Datagram", value)
    assert mine.hex() == java_bytes.hex()
    dg = DIALECT.decode_datagram(java_bytes)
    assert dg.trailing == 0 and dg.is_list == (not single)
    for got, want in zip(dg.messages, msgs):
        want_json = to_json(want)
        if not single:
            want_json["dest"] = None
        assert to_json(got) == want_json
    rep = java_codec.decode("Datagram", mine)
    assert rep["hex"] == mine.hex() and rep["remaining"] == 0


def test_id_tables_match_the_jar():
    """Protocol ids and magic numbers are exactly those of the jar's jg-protocol-ids.xml / jg-magic-map.xml."""
    import re
    import zipfile

    from jgpy._core import jg212, spec212
    from jgpy.testing.java import JGROUPS_JAR
    from tests.conftest import require_java

    require_java()
    with zipfile.ZipFile(JGROUPS_JAR) as jar:
        ids = re.findall(r'id="(\d+)"\s+name="([^"]+)"', jar.read("jg-protocol-ids.xml").decode())
        magics = re.findall(r'id="(\d+)"\s+name="([^"]+)"', jar.read("jg-magic-map.xml").decode())
    want_ids = {n.replace("org.jgroups.protocols.", "").replace("org.jgroups.", ""): int(i) for i, n in ids}
    custom_ids = {n: i for n, i in jg212.PROTOCOL_IDS.items() if i > spec212.MAX_JGROUPS_PROTOCOL_ID}
    assert {n: i for n, i in jg212.PROTOCOL_IDS.items() if n not in custom_ids} == want_ids
    want_magic = {int(i): n.replace("org.jgroups.", "") for i, n in magics}
    custom_magics = {m: c for m, c in jg212.MAGIC_CLASSES.items() if m > spec212.MAX_JGROUPS_MAGIC}
    assert {m: c for m, c in jg212.MAGIC_CLASSES.items() if m not in custom_magics} == want_magic
    for magic, typ in DIALECT.header_types().items():
        assert (custom_magics if magic in custom_magics else want_magic)[magic] == typ.JAVA_CLASS
    # jgpy's own protocols (docs/ARCHITECTURE.md, "jgpy's own protocols on the wire"): above the jar's ranges
    assert custom_ids == {"TOTAL": 513, "JMS": 514, "pbcast.PBCAST": 515}
    assert custom_magics == {1025: "protocols.TOTAL$TotalHeader", 1026: "protocols.pbcast.PBCAST$PbcastHeader"}
    assert max(want_ids.values()) <= spec212.MAX_JGROUPS_PROTOCOL_ID and max(want_magic) <= spec212.MAX_JGROUPS_MAGIC
