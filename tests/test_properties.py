"""Property-based round trips of every codec: decode(encode(x)) == x and re-encoding is byte-identical."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jgpy import DIALECT, Message, object_from_buffer, object_to_buffer
from jgpy._core.wire import utf_decode, utf_encode
from jgpy.testing.javajson import to_json
from tests import strategies as S

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _roundtrip(value):
    data = DIALECT.encode(value)
    back = DIALECT.decode(type(value), data)
    assert to_json(back) == to_json(value)
    assert DIALECT.encode(back) == data
    return data


@SETTINGS
@given(S.jtext)
def test_modified_utf8_roundtrip(s):
    data = utf_encode(s)
    assert int.from_bytes(data[:2], "big") == len(data) - 2
    assert b"\x00" not in data[2:]                       # NUL is C0 80 in modified UTF-8
    assert all(b < 0xF0 for b in data[2:])               # no 4-byte forms: non-BMP chars are surrogate pairs
    assert utf_decode(data) == s


@SETTINGS
@given(S.addresses)
def test_address_bodies(a):
    _roundtrip(a)


@SETTINGS
@given(S.opt_addr)
def test_write_address(a):
    data = DIALECT.encode_address(a)
    assert DIALECT.decode_address(data) == a
    assert type(DIALECT.decode_address(data)) is type(a)


@SETTINGS
@given(S.addr_lists)
def test_write_addresses(addrs):
    back = DIALECT.decode_addresses(DIALECT.encode_addresses(addrs))
    assert back == (None if addrs is None else tuple(addrs))


@SETTINGS
@given(st.one_of(S.view_ids, S.views, S.digests(), S.join_rsps, S.merge_ids, S.ping_datas, S.ranges))
def test_data_classes(value):
    _roundtrip(value)


@SETTINGS
@given(S.headers)
def test_headers(hdr):
    _roundtrip(hdr)


@SETTINGS
@given(S.messages())
def test_messages(msg):
    _roundtrip(msg)


@SETTINGS
@given(S.messages(), st.booleans())
def test_single_datagram(msg, multicast):
    data = DIALECT.encode_message(msg, multicast=multicast)
    dg = DIALECT.decode_datagram(data)
    assert not dg.is_list and dg.is_multicast == multicast and dg.is_oob == bool(msg.flags & 1)
    assert to_json(dg.messages[0]) == to_json(msg)
    assert DIALECT.encode_message(dg.messages[0], multicast=multicast) == data


@SETTINGS
@given(st.lists(S.messages(with_addrs=False), min_size=0, max_size=8), S.opt_addr, S.opt_addr)
def test_bundle_datagram(msgs, dest, src):
    for m in msgs:
        m.src = src
    data = DIALECT.encode_bundle(msgs, dest=dest, src=src, multicast=dest is None)
    dg = DIALECT.decode_datagram(data)
    assert dg.is_list and len(dg.messages) == len(msgs)
    for got, want in zip(dg.messages, msgs):
        want.dest = dest
        assert to_json(got) == to_json(want)
    assert DIALECT.encode_bundle(dg.messages, dest=dest, src=src, multicast=dest is None) == data


@SETTINGS
@given(S.java_objects)
def test_java_objects(obj):
    data = object_to_buffer(obj)
    back = object_from_buffer(data, typed=True)
    assert to_json(back) == to_json(obj)
    assert object_to_buffer(back) == data


def test_lazy_headers_are_copied_raw():
    """A received header nobody touched is re-sent by copying its bytes; a touched one is re-encoded."""
    from jgpy.headers import NakAckHeader, TpHeader
    m = Message(None, b"abc", None)
    m.put_header(15, NakAckHeader.msg(7)).put_header(21, TpHeader("x"))
    data = DIALECT.encode(m)
    got = DIALECT.decode(Message, data)
    assert [r[2] >= 0 for r in got.header_refs()] == [True, True]      # still raw
    assert DIALECT.encode(got) == data
    got.get_header(15).seqno = 8                                         # materialise and change
    assert DIALECT.decode(Message, DIALECT.encode(got)).get_header(15).seqno == 8


def test_messages_kept_in_windows_cost_the_cycle_collector_nothing():
    """Messages with headers (sent, decoded and touched, copied) add no object the cycle collector tracks, so a
    retransmission window of 100,000 messages does not make every collection walk them."""
    import gc

    from jgpy.headers import NakAckHeader, TpHeader
    sent = Message(None, b"abc", None)
    sent.put_header(15, NakAckHeader.msg(7)).put_header(21, TpHeader("x"))
    got = DIALECT.decode(Message, DIALECT.encode(sent))
    got.get_header(15)
    before = len(gc.get_objects())
    kept = [m for m in (sent, got, got.copy(), sent.copy()) for _ in range(2500)]
    kept += [Message(None, b"p", None).put_header(15, NakAckHeader.msg(i)) for i in range(10_000)]
    assert not any(gc.is_tracked(m) for m in (sent, got, kept[-1]))
    assert len(gc.get_objects()) - before < 10, "message header lists are tracked by the cycle collector"
    assert got.get_header(15).seqno == 7 and kept[-1].get_header(15).seqno == 9999


def test_header_objects_are_owned_exactly_once():
    """Messages hold their header objects in C: put, replace, copy, remove and deallocation keep the counts right."""
    import sys

    from jgpy.headers import NakAckHeader
    h1, h2 = NakAckHeader.msg(1), NakAckHeader.msg(2)
    base1, base2 = sys.getrefcount(h1), sys.getrefcount(h2)
    m = Message(None, b"x", None).put_header(15, h1)
    assert sys.getrefcount(h1) == base1 + 1
    copies = [m.copy() for _ in range(10)]
    assert sys.getrefcount(h1) == base1 + 11
    m.put_header(15, h2)                                 # replaced in place: h1 only held by the copies
    assert sys.getrefcount(h1) == base1 + 10 and sys.getrefcount(h2) == base2 + 1
    assert copies[0].remove_header(15) is h1 and copies[0].get_header(15) is None
    assert sys.getrefcount(h1) == base1 + 9
    del copies, m
    assert sys.getrefcount(h1) == base1 and sys.getrefcount(h2) == base2
    got = DIALECT.decode(Message, DIALECT.encode(Message(None, b"y", None).put_header(15, h1)))
    built = got.get_header(15)                           # decoded once, then the same object
    again = got.get_header(15)
    assert again is built
    del again
    refs = sys.getrefcount(built)                        # built, the message, getrefcount's argument
    assert refs == 3


def test_python_registered_header_roundtrip():
    """The registration hook: a header class defined in Python, with Python read/write, rides in messages."""
    from jgpy._core.wire import Reader, Writer

    class ScoreHeader:
        def __init__(self, player: str, score: int):
            self.player, self.score = player, score

    def read(r: Reader):
        return ScoreHeader(r.read_string("ScoreHeader.player"), r.read_long("ScoreHeader.score"))

    def write(w: Writer, h: ScoreHeader):
        w.write_string(h.player)
        w.write_long(h.score)

    from jgpy._core.jg212 import Dialect212
    dialect = Dialect212()      # a dialect of its own: the shared one keeps the 2.12 header classes only
    dialect.register_header(4711, ScoreHeader, read, write, java_class="com.example.ScoreHeader")
    m = Message(None, b"p", None)
    m.put_header(1001, ScoreHeader("\u00e9ve", -3))
    got = dialect.decode_datagram(dialect.encode_message(m)).messages[0].get_header(1001)
    assert isinstance(got, ScoreHeader) and (got.player, got.score) == ("\u00e9ve", -3)
    assert dialect.magic_of(ScoreHeader) == 4711 and DIALECT.magic_of(ScoreHeader) is None
    import pytest
    with pytest.raises(ValueError):
        dialect.register_header(1000, ScoreHeader, read, write)      # Java reserves magics <= 1024
