"""The generated Cython codecs against the spec's pure-Python twin (jgpy/_core/twin.py), as aiokafka tests its C
record builder against its Python one: the same bytes for random values, the same accept/reject decisions and
values for mutated bytes, and a lazy skip (the receive path) that accepts exactly what reading accepts.

The values come from the spec itself (``strategies.spec_header``), so a header class added to spec212.py is covered
without touching this file.
"""

from __future__ import annotations

import random
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jgpy import DIALECT, Message, WireFormatError
from jgpy._core import codegen
from jgpy._core.twin import Twin
from jgpy.testing.javajson import to_json
from tests import strategies as S

TWIN = Twin(DIALECT.spec, DIALECT)
DATA_VALUES = st.one_of(S.addresses, S.view_ids, S.views, S.digests(), S.join_rsps, S.merge_ids, S.ping_datas,
                        S.ranges)


def _collect(strategy, n: int) -> list:
    """``n`` values of ``strategy``, the same on every run."""
    out: list = []

    @settings(max_examples=n, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(v):
        out.append(v)
    collect()
    return out


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rnd.choice((1, 1, 2, 4))):
        if not b:
            b.append(rnd.randrange(256))
            continue
        i = rnd.randrange(len(b))
        op = rnd.randrange(6)
        if op == 0:
            b[i] ^= 1 << rnd.randrange(8)
        elif op == 1:
            b[i] = rnd.choice((0, 1, 2, 3, 4, 0x7F, 0x80, 0xC0, 0xE0, 0xFF))
        elif op == 2:
            del b[i:i + rnd.randrange(1, 6)]
        elif op == 3:
            b[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 6)))
        elif op == 4:
            b[i:i + 2] = struct.pack(">h", rnd.choice((-1, 0, 1, 2, 0x7FFF, -0x8000)))
        else:
            del b[i:]
    return bytes(b)


def _c_decode(magic: int, data: bytes):
    try:
        return DIALECT.decode_header(magic, data)
    except WireFormatError:
        return None


def _twin_decode(magic: int, data: bytes, exact: bool = True):
    try:
        return TWIN.decode_header(magic, data, exact)
    except WireFormatError:
        return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.spec_headers())
def test_headers_same_bytes_and_values(hdr):
    data = DIALECT.encode_header(hdr)
    assert TWIN.encode_header(hdr) == data
    magic = DIALECT.magic_of(hdr)
    got, used = TWIN.decode_header(magic, data)
    assert used == len(data)
    assert to_json(got) == to_json(DIALECT.decode_header(magic, data)) == to_json(hdr)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DATA_VALUES)
def test_data_classes_same_bytes_and_values(value):
    data = DIALECT.encode(value)
    assert TWIN.encode(value) == data
    got, used = TWIN.decode(type(value), data)
    assert used == len(data)
    assert to_json(got) == to_json(DIALECT.decode(type(value), data)) == to_json(value)


def _every_header(per_class: int) -> list:
    """``per_class`` headers of every header class of the spec."""
    return [h for spec in DIALECT.spec.HEADERS for h in _collect(S.spec_header(spec), per_class)]


def test_every_spec_header_is_generated():
    headers = _every_header(3)
    assert {type(h).__name__ for h in headers} == {h.name for h in DIALECT.spec.HEADERS}
    assert {DIALECT.magic_of(h) for h in headers} == {h.magic for h in DIALECT.spec.HEADERS}
    assert {DIALECT.java_class(h) for h in headers} == {h.java for h in DIALECT.spec.HEADERS}


def test_mutated_bodies_decode_alike():
    """Mutated header bodies: the generated reader and the twin accept the same ones and read the same values."""
    rnd = random.Random(19)
    agree = accepted = rejected = 0
    for hdr in _every_header(25):
        magic = DIALECT.magic_of(hdr)
        body = DIALECT.encode_header(hdr)
        for _ in range(12):
            data = _mutate(rnd, body)
            mine, twin = _c_decode(magic, data), _twin_decode(magic, data)
            assert (mine is None) == (twin is None), (type(hdr).__name__, data.hex())
            if mine is not None:
                assert to_json(mine) == to_json(twin[0]), data.hex()
                accepted += 1
            else:
                rejected += 1
            agree += 1
    assert accepted > 1000 and rejected > 1000, (accepted, rejected)


def test_lazy_skip_accepts_what_reading_accepts():
    """The receive path only skips a header body (validating it); the header is built later, on first access. For
    mutated bodies at the end of a datagram, a message is accepted exactly when the twin can read a header from the
    body, the skip ends where the twin's read ends, and the header built later is the twin's."""
    rnd = random.Random(1919)
    accepted = rejected = 0
    for hdr in _every_header(20):
        magic = DIALECT.magic_of(hdr)
        spec = DIALECT.header_spec(hdr)
        pid = DIALECT.protocol_id(spec.protocols[0])
        msg = Message(None, None, None)
        msg.put_header(pid, hdr)
        datagram = DIALECT.encode_message(msg)          # a single message: its header body comes last
        body = DIALECT.encode_header(hdr)
        assert datagram.endswith(body)
        prefix = datagram[:len(datagram) - len(body)]
        for _ in range(8):
            data = _mutate(rnd, body)
            twin = _twin_decode(magic, data, exact=False)
            try:
                dg = DIALECT.decode_datagram(prefix + data)
            except WireFormatError:
                dg = None
            assert (dg is None) == (twin is None), (type(hdr).__name__, data.hex())
            if dg is None:
                rejected += 1
                continue
            accepted += 1
            assert len(data) - dg.trailing == twin[1]
            assert to_json(dg.messages[0].get_header(pid)) == to_json(twin[0])
    assert accepted > 500 and rejected > 500, (accepted, rejected)


def test_generated_files_match_the_spec(tmp_path):
    """The core was generated from the spec next to it (the import checks a digest; this checks the text)."""
    from pathlib import Path
    core = Path(codegen.__file__).parent
    codegen.generate(tmp_path)
    for name in codegen.GENERATED:
        assert (tmp_path / name).read_text() == (core / name).read_text(), f"{name} is stale: rebuild"


def test_java_sizes_of_the_spec_are_those_of_2_12():
    """Spot checks of the twin's Java sizes where they are not the encoded length (tests/test_java_size.py compares
    thousands of messages with the jar itself)."""
    from jgpy import UUID
    from jgpy.headers import FdSockHeader, StateHeader, UnicastHeader, Unicast2Header
    a, b = UUID(1, 2), UUID(3, 4)
    assert DIALECT.header_size(UnicastHeader(UnicastHeader.DATA, 5, 1, True)) == 12
    assert DIALECT.header_size(UnicastHeader(9)) == 0 != len(DIALECT.encode_header(UnicastHeader(9)))
    assert DIALECT.header_size(Unicast2Header(Unicast2Header.SEND_FIRST_SEQNO, 7)) == 1
    assert DIALECT.header_size(StateHeader(1, 5, a, None, "\u00e9\U0001F600")) == 1 + 8 + 18 + 1 + 1 + 3 + 2
    # a HashMap and a HashSet in Java: a duplicate counts once, a null key counts nothing
    dup = FdSockHeader(10, None, None, [(a, None), (a, None), (None, None)], [b, b])
    assert DIALECT.header_size(dup) == 1 + 1 + 1 + 4 + (18 + 1) + 1 + 4 + 18
