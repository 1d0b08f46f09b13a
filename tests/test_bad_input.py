"""Malformed input: a WireFormatError naming the field and offset, never a crash, a hang or a huge allocation."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

import pytest

from jgpy import DIALECT, Digest, IncompatibleVersionError, Message, UUID, UnknownMagicError, WireFormatError
from jgpy._core import jg212
from jgpy._core.wire import Reader, utf_decode
from jgpy.headers import GmsHeader, NakAckHeader, PingHeader, TpHeader, UnicastHeader
from tests.support import shared_file

A = UUID(1, 2)


def _seed_datagrams() -> list[bytes]:
    """Real datagrams: the captures, plus a few built by jgpy (bundle, digest, fragment-like payload)."""
    import re

    seeds = []
    path = shared_file("docs/jgroups-2.12-captures.md")
    if path is not None:
        for h in re.findall(r"```\n([0-9a-f]+)\n```", path.read_text()):
            if not h.startswith("62656c61"):
                seeds.append(bytes.fromhex(h))
    msgs = []
    for i in range(4):
        m = Message(None, bytes([i]) * 50, A)
        m.put_header(15, NakAckHeader.msg(i + 1)).put_header(21, TpHeader("fuzz"))
        msgs.append(m)
    seeds.append(DIALECT.encode_bundle(msgs))
    m = Message(A, None, UUID(3, 4))
    m.put_header(14, GmsHeader(5, my_digest=Digest([(A, 0, 5, 5), (UUID(3, 4), 1, 2, -1)])))
    m.put_header(12, UnicastHeader(0, 1, 0, True)).put_header(21, TpHeader("fuzz"))
    seeds.append(DIALECT.encode_message(m))
    return seeds


SEEDS = _seed_datagrams()


def _decode_fully(data: bytes) -> None:
    dg = DIALECT.decode_datagram(data)
    for m in dg.messages:
        m.headers          # materialise every lazily kept header
        m.buffer


def test_every_truncation_is_a_wire_format_error():
    for data in SEEDS:
        for cut in range(len(data)):
            with pytest.raises(WireFormatError) as ei:
                _decode_fully(data[:cut])
            assert ei.value.offset is not None and 0 <= ei.value.offset <= cut
            assert ei.value.field


def test_error_names_field_and_offset():
    data = bytearray(SEEDS[-1])
    # corrupt the UNICAST header type to DATA but cut inside its seqno
    with pytest.raises(WireFormatError) as ei:
        _decode_fully(bytes(data[:-20]))
    assert "field" in str(ei.value) and "offset" in str(ei.value)


def _msg_bytes(**kw) -> bytes:
    m = Message(None, b"x", A)
    m.put_header(21, TpHeader("c"))
    return DIALECT.encode_message(m)


def test_huge_lengths_do_not_allocate():
    base = DIALECT.encode_message(Message(None, b"abcd", A))
    # leading=6 (src+buf): the int length follows the src address (3+2+18 bytes in)
    off = 3 + 2 + 18
    assert struct.unpack_from(">i", base, off)[0] == 4
    cases = {
        "payload 2^31-1": base[:off] + struct.pack(">i", 0x7FFFFFFF) + base[off + 4:],
        "payload negative": base[:off] + struct.pack(">i", -5) + base[off + 4:],
    }
    hdr_off = len(base) - 2
    cases["32767 headers"] = base[:hdr_off] + struct.pack(">h", 32767)
    tracemalloc.start()
    try:
        for name, data in cases.items():
            tracemalloc.reset_peak()
            with pytest.raises(WireFormatError):
                _decode_fully(data)
            assert tracemalloc.get_traced_memory()[1] < 256 * 1024, name
    finally:
        tracemalloc.stop()


def test_negative_header_count_reads_no_headers_like_java():
    base = DIALECT.encode_message(Message(None, b"abcd", A))
    m = DIALECT.decode_datagram(base[:-2] + struct.pack(">h", -7)).messages[0]
    assert m.num_headers == 0 and m.buffer == b"abcd"


def test_huge_counts_in_bodies():
    for kind, body in [
        (Digest, struct.pack(">h", 32767)),
        (Digest, struct.pack(">h", -3)),
        (GmsHeader, b"\x05\x00\x00\x01" + struct.pack(">h", 32767)),
    ]:
        with pytest.raises(WireFormatError):
            DIALECT.decode(kind, body)
    with pytest.raises(WireFormatError):
        DIALECT.decode_addresses(struct.pack(">h", 30000) + b"\x01" * 10)


def test_unknown_magic_is_named():
    m = Message(None, None, A)
    m.put_header(21, TpHeader("c"))
    data = bytearray(DIALECT.encode_message(m))
    i = data.rfind(b"\x00\x15\x00\x38")          # id 21, magic 56
    data[i + 2:i + 4] = struct.pack(">h", 999)
    with pytest.raises(UnknownMagicError) as ei:
        DIALECT.decode_datagram(bytes(data))
    assert "999" in str(ei.value) and ei.value.offset == i + 2


def test_address_rules_follow_java():
    # IpAddress lengths other than 4/16 (including 0, which Java itself writes but cannot read)
    for n in (0, 5, -1):
        with pytest.raises(WireFormatError):
            DIALECT.decode_address(bytes([4, n & 0xFF]) + b"\x7f\x00\x00\x01" + b"\x00\x01\x00")
    # "other" path with a magic that is not an address class
    with pytest.raises(WireFormatError, match="not an address"):
        DIALECT.decode_address(b"\x00\x00\x1f" + b"\x00" * 20)
    # flag bits are tested in Java's order: NULL wins over UUID
    assert DIALECT.decode_address(b"\x03") is None
    # a digest entry with low > highest_delivered, and one without an address, are rejected like Java does
    w = struct.pack(">h", 1) + DIALECT.encode_address(A) + struct.pack(">qqq", 5, 4, 4)
    with pytest.raises(WireFormatError, match="low"):
        DIALECT.decode(Digest, w)
    with pytest.raises(WireFormatError, match="without a member"):
        DIALECT.decode(Digest, struct.pack(">h", 1) + b"\x01" + struct.pack(">qqq", 0, 0, 0))


def test_malformed_modified_utf8():
    for bad in (b"\x00\x01\x80", b"\x00\x02\xc0\x00", b"\x00\x03\xe0\x80\x00", b"\x00\x01\xf0", b"\x00\x02\xc0"):
        with pytest.raises(WireFormatError):
            utf_decode(bad)
    # what Java accepts: raw NUL, C0 80, overlong forms, surrogate pairs
    assert utf_decode(b"\x00\x01\x00") == "\x00"
    assert utf_decode(b"\x00\x02\xc0\x80") == "\x00"
    assert utf_decode(b"\x00\x06\xed\xa0\xbd\xed\xb8\x80") == "\U0001F600"


def test_incompatible_version():
    data = bytearray(SEEDS[0])
    data[0:2] = struct.pack(">H", (3 << 11) + (0 << 6) + 1)        # 3.0.1
    with pytest.raises(IncompatibleVersionError, match="3.0.1"):
        DIALECT.decode_datagram(bytes(data))
    DIALECT.decode_datagram(bytes(data), check_version=False)         # discard_incompatible_packets=false
    data[0:2] = struct.pack(">H", (2 << 11) + (12 << 6) + 9)       # 2.12.9: micro is ignored
    DIALECT.decode_datagram(bytes(data))
    with pytest.raises(WireFormatError):
        DIALECT.decode_datagram(b"\x13")


def test_bad_list_discards_the_whole_bundle():
    good = SEEDS[-2]
    out = []
    with pytest.raises(WireFormatError):
        DIALECT.decode_messages(good[:-1], out)    # terminator missing
    assert out == []


def test_tcp_framing_guards():
    dec = jg212.TcpFrameDecoder(max_frame=1000)
    assert dec.feed(jg212.frame(b"abc") + b"\x00\x00") == [b"abc"]
    assert dec.feed(b"\x00\x01z") == [b"z"]
    with pytest.raises(WireFormatError):
        dec.feed(struct.pack(">i", 5000))
    with pytest.raises(WireFormatError):
        jg212.TcpFrameDecoder().feed(struct.pack(">i", -1))
    with pytest.raises(WireFormatError, match="cookie"):
        jg212.decode_tcp_handshake(b"BELA\x13\x02\x04\x7f\x00\x00\x01\x00\x01\x00")


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.choice((1, 1, 1, 2, 3, 8))):
        op = rnd.randrange(7)
        if not b:
            b.append(rnd.randrange(256))
            continue
        i = rnd.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rnd.randrange(8)
        elif op == 1:
            b[i] = rnd.choice((0, 1, 2, 4, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
        elif op == 2:
            del b[i:i + rnd.randrange(1, 8)]
        elif op == 3:
            b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 8)))
        elif op == 4:
            v = rnd.choice((0, -1, 1, 0x7FFF, -0x8000, 0x7FFFFFFF, 255, 32767))
            b[i:i + 2] = struct.pack(">h", max(-0x8000, min(0x7FFF, v)))
        elif op == 5:
            del b[i:]
        else:
            other = rnd.choice(SEEDS)
            j = rnd.randrange(len(other))
            b[i:] = other[j:]
    return bytes(b)


FUZZ_CASES = 100_000


def test_fuzz_mutated_datagrams():
    """≥100,000 mutated real datagrams: only success or WireFormatError, and quickly."""
    rnd = random.Random(20261121)
    ok = bad = 0
    start = time.monotonic()
    for i in range(FUZZ_CASES):
        data = _mutate(rnd, rnd.choice(SEEDS))
        try:
            _decode_fully(data)
            ok += 1
        except WireFormatError:
            bad += 1
        except Exception as e:  # noqa: BLE001 - anything else is the bug this test looks for
            pytest.fail(f"case {i}: {type(e).__name__}: {e} for {data.hex()}")
        assert time.monotonic() - start < 240, "fuzzing is far slower than expected"
    assert ok + bad == FUZZ_CASES
    assert ok > 1000 and bad > 1000     # the mutations exercise both outcomes


DIFFERENTIAL_CASES = 600


def _normalized_message_json(m: dict) -> dict:
    """Java's JSON of a message with every value passed through jgpy (same text forms); raw header ids kept."""
    from jgpy.testing.javajson import from_json, to_json

    out = {k: to_json(from_json(v)) if isinstance(v, dict) else v for k, v in m.items()}
    out["headers"] = [[pid, to_json(from_json(h))] for pid, h in m["headers"]]
    return out


def test_differential_fuzz_against_java(java_codec):
    """Mutated datagrams: jgpy accepts exactly those the Java 2.12.2 classes accept (same fields when both do)."""
    from jgpy.testing.java import JavaError
    from jgpy.testing.javajson import from_json, to_json

    rnd = random.Random(99)
    disagree = []
    for _ in range(DIFFERENTIAL_CASES):
        data = _mutate(rnd, rnd.choice(SEEDS))
        try:
            dg = DIALECT.decode_datagram(data, check_version=False)   # the harness does not check versions
            for m in dg.messages:
                m.headers
            mine = dg
        except WireFormatError:
            mine = None
        try:
            java = java_codec.decode("Datagram", data)
        except JavaError:
            java = None
        if (mine is None) != (java is None):
            disagree.append(data.hex())
        elif mine is not None:
            got = [to_json(m) for m in mine.messages]
            want = [_normalized_message_json(m) for m in java["value"]["messages"]]
            if got != want:
                disagree.append(("fields", data.hex()))
    assert not disagree, f"{len(disagree)} datagrams decoded differently by jgpy and Java: {disagree[:3]}"
