"""Hypothesis strategies for every wire value of the 2.12 dialect."""

from __future__ import annotations

from hypothesis import strategies as st

from jgpy import (DIALECT, AdditionalDataUUID, Digest, IpAddress, JavaObject, JoinRsp, MergeId, MergeView, Message,
                  PayloadUUID, PingData, Range, TopologyUUID, UUID, View, ViewId)
from jgpy.headers import (CompressHeader, CoordAnnouncement, FcHeader, FdHeader, FdSockHeader, FlushHeader,
                          FragHeader, GmsHeader, HeartbeatHeader, MultiDestinationHeader, NakAckHeader, PingHeader,
                          RequestCorrelatorHeader, SequencerHeader, SfcHeader, StableHeader, StateHeader,
                          StreamingStateHeader, TpHeader, Unicast2Header, UnicastHeader, VerifyHeader)

i8 = st.integers(-128, 127)
i16 = st.integers(-(1 << 15), (1 << 15) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
u16 = st.integers(0, 0xFFFF)
# any Java string: UTF-16 code units incl. NUL, non-BMP and lone surrogates
jtext = st.text(st.characters(codec=None, blacklist_categories=()), max_size=40)
opt_text = st.none() | jtext
small_bytes = st.binary(max_size=40)
opt_extra = st.none() | st.binary(min_size=1, max_size=20)

plain_uuids = st.builds(UUID, i64, i64)
uuids = st.one_of(
    plain_uuids,
    st.builds(UUID, i64, i64, opt_extra),
    st.builds(PayloadUUID, i64, i64, opt_text, opt_extra),
    st.builds(AdditionalDataUUID, i64, i64, st.none() | small_bytes, opt_extra),
    st.builds(TopologyUUID, i64, i64, opt_text, opt_text, opt_text, opt_extra),
)
ipv4 = st.builds(IpAddress, st.binary(min_size=4, max_size=4), u16, st.none(), opt_extra)
ipv6 = st.builds(IpAddress, st.binary(min_size=16, max_size=16), u16, st.integers(0, (1 << 31) - 1), opt_extra)
ip_addrs = ipv4 | ipv6
addresses = uuids | ip_addrs
opt_addr = st.none() | addresses
addr_lists = st.none() | st.lists(opt_addr, max_size=5)
member_lists = st.none() | st.lists(plain_uuids, max_size=6)

view_ids = st.builds(ViewId, opt_addr, i64)
opt_view_id = st.none() | view_ids
plain_views = st.builds(View, opt_view_id, member_lists, st.none())


def _merge_views(children):
    return st.builds(MergeView, opt_view_id, member_lists, st.none() | st.lists(children, min_size=1, max_size=3),
                     st.none())


views = st.recursive(plain_views, _merge_views, max_leaves=6)
opt_view = st.none() | views


@st.composite
def digests(draw):
    n = draw(st.integers(0, 8))
    addrs = draw(st.lists(addresses, min_size=n, max_size=n, unique_by=lambda a: (type(a) is IpAddress, a)))
    entries = []
    for a in addrs:
        low = draw(i64)
        hd = draw(st.integers(low, (1 << 63) - 1))
        entries.append((a, low, hd, draw(i64)))
    return Digest(entries)


opt_digest = st.none() | digests()
join_rsps = st.builds(JoinRsp, st.none() | plain_views, opt_digest, opt_text)
merge_ids = st.builds(MergeId, opt_addr, i32)
ping_datas = st.builds(PingData, opt_addr, opt_view, opt_view_id, st.booleans(), opt_text, addr_lists)
ranges = st.builds(Range, i64, i64)

headers = st.one_of(
    st.builds(TpHeader, jtext),
    st.builds(NakAckHeader, st.sampled_from([1, 3]), i64),
    st.builds(NakAckHeader, st.just(2), st.just(-1), st.none() | ranges, opt_addr),
    st.builds(UnicastHeader, st.just(0), i64, i16, st.booleans()),
    st.builds(UnicastHeader, st.just(1), i64),
    st.builds(UnicastHeader, st.just(2)),
    st.builds(Unicast2Header, st.just(0), i64, st.just(0), i16, st.booleans()),
    st.builds(Unicast2Header, st.sampled_from([1, 3]), i64, i64),
    st.builds(Unicast2Header, st.just(2), i64),
    st.builds(FragHeader, i64, i32, i32),
    st.builds(FcHeader, i8), st.builds(SfcHeader, i8),
    st.builds(PingHeader, i8, st.none() | ping_datas, opt_text, opt_view_id),
    st.builds(GmsHeader, i8, opt_view, opt_addr, addr_lists, st.none() | join_rsps, opt_digest,
              st.none() | merge_ids, st.booleans(), st.booleans()),
    st.builds(StableHeader, i32, opt_digest),
    st.builds(FdHeader, i8, addr_lists, opt_addr),
    st.builds(HeartbeatHeader),
    st.builds(FdSockHeader, i8, opt_addr, st.none() | ip_addrs,
              st.none() | st.lists(st.tuples(opt_addr, st.none() | ip_addrs), min_size=1, max_size=4),
              st.none() | st.lists(opt_addr, min_size=1, max_size=4)),
    st.builds(VerifyHeader, i16, opt_addr),
    st.builds(StateHeader, i8, i64, opt_addr, opt_digest, opt_text),
    st.builds(StreamingStateHeader, i8, i64, opt_addr, opt_digest, st.none() | ip_addrs, opt_text),
    st.builds(FlushHeader, i8, i64, addr_lists, opt_digest),
    st.builds(SequencerHeader, i8, opt_view_id),
    st.builds(CompressHeader, i32),
    st.builds(CoordAnnouncement, opt_view),
    st.builds(RequestCorrelatorHeader, i8, i64, st.booleans(), i16),
    st.builds(MultiDestinationHeader, i8, i64, st.booleans(), i16, addr_lists),
    st.deferred(lambda: spec_headers()),       # every class of the spec by wire type: a new entry is covered
)


def _ids_carrying(magic: int) -> list[int]:
    """The 2.12 protocol ids whose protocol puts headers of class ``magic`` under its id."""
    return [pid for pid in range(1, 1024) if magic in DIALECT.allowed_magics(pid)]


def _in_the_jar(h) -> bool:
    """A header class of 2.12 (not one of jgpy's own protocols, which a Java peer cannot read)."""
    return DIALECT.magic_of(h) <= DIALECT.spec.MAX_JGROUPS_MAGIC


@st.composite
def messages(draw, with_addrs=True, java=False):
    """A message with up to 5 headers, each under a protocol id that may carry its class (a header under
    another protocol's id makes a message malformed: tests/test_bad_input.py covers that). ``java``: only
    headers a Java 2.12 peer knows."""
    m = Message(draw(opt_addr) if with_addrs else None, draw(st.none() | st.binary(max_size=300)),
                draw(opt_addr) if with_addrs else None, draw(st.integers(0, 255)))
    used: set[int] = set()
    for _ in range(draw(st.integers(0, 5))):
        h = draw(headers.filter(_in_the_jar) if java else headers)
        magic = DIALECT.magic_of(h)
        own = _ids_carrying(magic)
        unchecked = st.integers(1, 32767).filter(lambda p: not DIALECT.allowed_magics(p))
        pid = draw(st.sampled_from(own) | unchecked if own else unchecked)
        if pid not in used:
            used.add(pid)
            m.put_header(pid, h)
    return m


# the boxed primitives, as JavaObjects (setObject's and Util.objectToStream's alike)
java_primitives = (
    st.builds(JavaObject, st.just("Boolean"), st.booleans()),
    st.builds(JavaObject, st.just("Byte"), i8),
    st.builds(JavaObject, st.just("Short"), i16),
    st.builds(JavaObject, st.just("Integer"), i32),
    st.builds(JavaObject, st.just("Long"), i64),
    st.builds(JavaObject, st.just("Character"), st.characters(max_codepoint=0xFFFF)),
    st.builds(JavaObject, st.just("Double"), st.floats(allow_nan=False)),
    st.builds(JavaObject, st.just("Float"), st.floats(width=32, allow_nan=False)),
)

java_objects = st.one_of(
    st.builds(JavaObject, st.just("null"), st.none()),
    *java_primitives,
    st.builds(JavaObject, st.just("String"), st.text(st.characters(max_codepoint=0xFF), max_size=30)),
    st.builds(JavaObject, st.just("byte[]"), small_bytes),
    st.builds(JavaObject, st.just("Serializable"), small_bytes),
    st.builds(JavaObject, st.just("Streamable"), plain_views | views | view_ids | digests() | ping_datas),
)




def _object_stream(value) -> bytes:
    """A Java object stream (``ObjectOutputStream``) holding a String or a JGroups UUID."""
    from jgpy.javaser import ObjectOutput
    out = ObjectOutput()
    if isinstance(value, UUID):
        out.write_uuid(value)
    else:
        out.write_string(value)
    return out.getvalue()


# Util.objectToStream's values (a PullHeader's identifier): what reads back as written (a Streamable jgpy reads
# amid other data, a Serializable as its object stream), null as None
stream_objects = st.none() | st.one_of(
    *java_primitives,
    st.builds(JavaObject, st.just("String"), jtext),
    st.builds(JavaObject, st.just("byte[]"), small_bytes),
    st.builds(JavaObject, st.just("Serializable"), (jtext | plain_uuids).map(_object_stream)),
    st.builds(JavaObject, st.just("Streamable"), views | view_ids | digests() | plain_uuids),
)


# ---- values of every header class of the dialect spec, derived from the spec (a new entry is covered at once) ----

_DATA_VALUES = {"Range": ranges, "PingData": ping_datas, "ViewId": view_ids, "Digest": digests(), "JoinRsp": join_rsps,
                "MergeId": merge_ids, "IpAddress": ip_addrs, "View": views}


def wire_values(w):
    """Values of the wire type ``w`` (jgpy/_core/wirespec.py) that survive a round trip."""
    from jgpy._core import wirespec as ws
    simple = {ws.BYTE: i8, ws.SHORT: i16, ws.USHORT: u16, ws.INT: i32, ws.LONG: i64, ws.BOOL: st.booleans(),
              ws.UTF: jtext, ws.STRING: opt_text, ws.BYTE_BUFFER: st.none() | small_bytes,
              ws.OPT_SHORT_BYTES: opt_extra, ws.ADDRESS: opt_addr, ws.VIEW: opt_view, ws.GMS_VIEW: opt_view,
              ws.SYNC_VIEW: opt_view, ws.JAVA_OBJECT: stream_objects}
    if w in simple:
        return simple[w]
    if isinstance(w, ws.Opt):                    # a View in an Opt is read back as a plain View
        return st.none() | (plain_views if w.as_plain_view else _DATA_VALUES[w.cls.name])
    if w is ws.INT_BYTES:                         # an empty one reads back as None
        return st.none() | st.binary(min_size=1, max_size=40)
    if isinstance(w, ws.Struct):
        return st.tuples(*(wire_values(f.wire) for f in w.fields))
    if isinstance(w, ws.OptStruct):
        return st.none() | st.tuples(*(wire_values(f.wire) for f in w.fields))
    if isinstance(w, ws.ListOf):                 # with none=0, an empty list reads back as None
        return st.none() | st.lists(wire_values(w.elem), min_size=1 if w.none == 0 else 0, max_size=5).map(tuple)
    if isinstance(w, ws.Tagged):     # a class Java knows (an unknown one is no token) with a body Java can write
        def body_values(body):       # (Util.writeByteBuffer(null) throws)
            return st.none() if body is None else small_bytes if body is ws.BYTE_BUFFER else wire_values(body)
        return st.one_of([st.tuples(st.just(tag), body_values(body)) for tag, body in w.cases])
    raise ValueError(f"no values for {w!r}")


def spec_header(h):
    """Headers of the spec entry ``h``: any of its types (and, unless it is closed, one it does not name), the fields that type carries
    drawn by wire type, the others at their default (as a decoded header has them)."""
    from jgpy._core import headers as H

    cls = getattr(H, h.name)
    known = sorted(h.types.values())
    others = st.sampled_from([v for v in range(-3, 20) if v not in known])
    types = (st.sampled_from(known) if h.closed else st.sampled_from(known) | others) if known else None

    @st.composite
    def build(draw):
        values = {}
        t = draw(types if types is not None and any(f.name == "type" for f in h.all_fields) else st.none())
        for f in h.all_fields:
            if f.name == "type" and t is not None:
                values["type"] = t
            elif f.when is not None and t not in {h.type_value(n) for n in f.when.types}:
                values[f.name] = f.default
            else:
                values[f.name] = draw(wire_values(f.wire))
        return cls(**values)
    return build()


def spec_headers():
    return st.one_of([spec_header(h) for h in DIALECT.spec.HEADERS])
