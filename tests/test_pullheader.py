"""blocks.PullPushAdapter$PullHeader (magic 66): its identifier as 2.12's Util.objectToStream writes it, decoded
from a datagram the jar wrote (the last of the magic map's header classes the capture decoder lacked), and what
a hostile one does: truncated anywhere, absurd lengths, nesting deeper than the javaser reader allows, unknown
type tags and classes: the datagram is refused (the transport counts and drops it), nothing is allocated for a
length the bytes cannot hold. The Java goldens of every kind of identifier are in tests/test_golden.py."""

from __future__ import annotations

import struct

import pytest

from jgpy import DIALECT, JavaObject, UUID
from jgpy._core import jg212
from jgpy.cli import main
from jgpy.errors import WireFormatError
from jgpy.headers import PullHeader
from jgpy.javaser import MAX_DEPTH

PULL_PUSH_ID = 200
INT_ARRAY = bytes.fromhex("aced0005757200025b494dba602676eab2a5020000787000000003000000010000000200000003")  # int[]{1,2,3}

# A bundle the jar's classes wrote (TP.writeMessageList through the interop harness): three multicasts of
# UUID(3, 4), each with a PullHeader (a String, a Serializable int[]{1, 2, 3}, none) and the transport's TpHeader
JAVA_BUNDLE = bytes.fromhex(
    "13020301020000000000000004000000000000000300010400000000026869000200c800421200000a6c697374656e65722d310015"
    "0038000763617074757265010000000200c8004202aced0005757200025b494dba602676eab2a502000078700000000300000001000000"
    "020000000300150038000763617074757265010000000200c80042000015003800076361707475726500")

# an Object[] holding an Object[] holding ... (as ObjectOutputStream writes it: the class descriptor once, then
# references to it), innermost null
_NESTED_HEAD = bytes.fromhex("aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001")


def nested_arrays(depth: int) -> bytes:
    return _NESTED_HEAD + bytes.fromhex("7571007e000000000001") * (depth - 1) + b"\x70"


def header_bytes(body: bytes) -> bytes:
    """A datagram (one multicast) whose only header is a PullHeader with this body, then a TpHeader."""
    good = DIALECT.encode_message(_msg(PullHeader(JavaObject("Integer", 0x55555555))), True)
    marker = b"\x0f\x55\x55\x55\x55"
    assert good.count(marker) == 1
    return good.replace(marker, body)


def _msg(hdr):
    from jgpy import Message
    from jgpy.headers import TpHeader
    m = Message(None, b"p", UUID(1, 2))
    m.put_header(PULL_PUSH_ID, hdr)
    m.put_header(21, TpHeader("c"))
    return m


def identifier_of(datagram: bytes):
    (m,) = DIALECT.decode_datagram(datagram).messages
    return m.get_header(PULL_PUSH_ID).identifier


def test_the_jars_bundle_decodes_field_by_field(capsys):
    dg = DIALECT.decode_datagram(JAVA_BUNDLE)
    assert [m.get_header(PULL_PUSH_ID).identifier for m in dg.messages] == [
        JavaObject("String", "listener-1"), JavaObject("Serializable", INT_ARRAY), None]
    assert all(m.get_header(21).channel_name == "capture" for m in dg.messages)    # read past the object stream
    assert DIALECT.encode_bundle(dg.messages, dest=None, src=UUID(3, 4), multicast=True) == JAVA_BUNDLE
    assert main(["decode", JAVA_BUNDLE.hex()]) == 0
    out = capsys.readouterr().out
    assert "blocks.PullPushAdapter(200): PullHeader(identifier=JavaObject('String', 'listener-1'))" in out
    assert "blocks.PullPushAdapter(200): PullHeader()" in out
    assert "unknown" not in out.lower() and "NOT DECODABLE" not in out


def test_java_size_is_12_without_an_identifier_else_64():
    assert DIALECT.java_size(PullHeader(None)) == 12
    assert DIALECT.java_size(PullHeader(JavaObject("byte[]", bytes(1000)))) == 64


def test_truncated_anywhere_is_refused():
    for hdr in (PullHeader(JavaObject("String", "abc")), PullHeader(JavaObject("Serializable", INT_ARRAY)),
                PullHeader(JavaObject("byte[]", b"12345"))):
        body = DIALECT.encode_header(hdr)
        for cut in range(1, len(body)):
            with pytest.raises(WireFormatError):
                DIALECT.decode_header(66, body[:cut])


@pytest.mark.parametrize("body,what", [
    (b"\x13\x7f\xff\xff\xff" + b"x", "a byte[] of 2 GB claimed"),
    (b"\x13\xff\xff\xff\xfe", "a negative byte[] length"),
    (b"\x12\x00\xff\xff" + b"x", "a String of 65535 bytes claimed"),
    (b"\x02" + bytes.fromhex("aced00057c7fffffffffffffff") + b"x", "a long string of 2^63 bytes in the stream"),
    (b"\x02" + bytes.fromhex("aced0005757200025b494dba602676eab2a50200007870") + b"\x7f\xff\xff\xff", "an int[] of 2^31"),
    (b"\x02" + INT_ARRAY[:-1], "an object stream cut short"),
    (b"\x02" + b"\xac\xed\x00\x04" + INT_ARRAY[4:], "not an object stream (version 4)"),
    (b"\x03", "type 3: no such type"),
    (b"\x7f", "type 127"),
    (b"\x01\x01\x01\x00\x1e", "a Streamable Message: it would nest headers in headers"),
    (b"\x01\x01\x01\x7f\x7f", "a Streamable of a magic nobody knows"),
    (b"\x01\x01\x00\x00\x03abc", "a Streamable of a class nobody knows"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_absurd_values_are_refused(body, what):
    with pytest.raises(WireFormatError):
        DIALECT.decode_datagram(header_bytes(body))


def test_nesting_is_bounded_by_the_javaser_reader():
    assert identifier_of(header_bytes(b"\x02" + nested_arrays(10))) == JavaObject("Serializable", nested_arrays(10))
    with pytest.raises(WireFormatError, match="nested"):
        identifier_of(header_bytes(b"\x02" + nested_arrays(MAX_DEPTH + 1)))
    with pytest.raises(WireFormatError):               # (2.12's readObject recurses until its stack overflows)
        identifier_of(header_bytes(b"\x02" + nested_arrays(5000)))


def test_without_a_reader_of_object_streams_a_serializable_is_refused():
    reader = jg212.embedded_object_reader()
    assert reader is not None                           # installed by importing jgpy
    jg212.set_embedded_object_reader(None)
    try:
        with pytest.raises(WireFormatError, match="no reader"):
            identifier_of(header_bytes(b"\x02" + INT_ARRAY))
        assert identifier_of(header_bytes(b"\x0f\x00\x00\x00\x07")) == JavaObject("Integer", 7)
    finally:
        jg212.set_embedded_object_reader(reader)


def test_a_long_string_goes_through_an_object_stream():
    """Longer than Short.MAX_VALUE chars: a boolean true, then the String serialized (as 2.12 writes it)."""
    s = "\u00e9" * 20000 + "x" * 20000
    body = DIALECT.encode_header(PullHeader(s))
    assert body[:2] == b"\x12\x01" and body[2:7] == bytes.fromhex("aced000574")
    assert struct.unpack(">H", body[7:9])[0] == 60000
    assert DIALECT.decode_header(66, body).identifier == JavaObject("String", s)


@pytest.mark.interop
def test_differential_fuzz_against_java(java_codec):
    """Mutated datagrams with PullHeaders: jgpy accepts exactly those the Java 2.12.2 classes accept, with the same
    identifiers. (Not a Serializable one: Java resolves its classes, jgpy reads the stream's structure only.)"""
    import random

    from jgpy import MergeView, View, ViewId
    from tests.test_bad_input import DIFFERENTIAL_CASES, differential

    a, b = UUID(1, 2), UUID(3, 4)
    identifiers = [None, True, 7, -(1 << 40), 2.5, "listener-\u00e9", b"\x00\x01\x02", JavaObject("Character", "x"),
                   JavaObject("Short", -3), JavaObject("Byte", 5), JavaObject("Float", 1.5),
                   JavaObject("Streamable", ViewId(a, 2)), JavaObject("Streamable", View(ViewId(a, 3), [a, b])),
                   JavaObject("Streamable", MergeView(ViewId(b, 4), [a, b], [View(ViewId(a, 3), [a])])),
                   JavaObject("Streamable", a)]
    seeds = [DIALECT.encode_message(_msg(PullHeader(i)), True) for i in identifiers]
    for data in seeds:
        assert java_codec.decode("Datagram", data)["remaining"] == 0
    disagree = differential(java_codec, seeds, DIFFERENTIAL_CASES, random.Random(66))
    assert not disagree, f"{len(disagree)} datagrams decoded differently by jgpy and Java: {disagree[:3]}"
