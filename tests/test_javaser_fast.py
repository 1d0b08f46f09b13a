"""The fast paths of the Java serialization code give exactly what the general code gives.

* writer: ``ObjectWriter()`` (exact-type dispatch, FAST_WRITERS) against ``ObjectWriter(fast=False)`` (the general
  isinstance route) over many values and MethodCalls, with repeats that make Java share strings, cached boxes
  and arrays (the goldens against the JVM are in test_javaser_write.py);
* reader: ``ObjectInput.from_bytes`` (short blocks and remembered descriptors read straight from the bytes)
  against ObjectInput over a stream (the general route), on valid streams and on damaged ones: the same value or
  both a JavaSerializationError.
"""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from jgpy import JavaObject
from jgpy.blocks.methodcall import MethodCall, decode_method_call, method_call_from_object
from jgpy.javaser import JavaArray, JavaSerializationError, ObjectInput
from jgpy.javaser_values import to_python
from jgpy.javaser_write import JavaClass, JavaWriteError, JByte, JFloat, JLong, JShort, ObjectWriter

#: a small pool, so values repeat in a stream (what Java writes as back-references)
_STRINGS = st.sampled_from(["", "a", "s", "echoBytes", "h\u00e9llo", "\u20ac\U0001f600", "nul\x00"])
_INTS = st.one_of(st.integers(-130, 130), st.sampled_from([-(1 << 31), (1 << 31) - 1, 1 << 31, -(1 << 63),
                                                           100000, -100000]))
_FLOATS = st.one_of(st.floats(allow_nan=True), st.sampled_from([0.0, -0.0, 0.5, math.inf]))
_BOXES = st.one_of(
    st.builds(JLong, st.integers(-(1 << 63), (1 << 63) - 1)), st.builds(JShort, st.integers(-200, 200)),
    st.builds(JByte, st.integers(-128, 127)), st.builds(JFloat, st.floats(width=32)),
    st.builds(JavaObject, st.sampled_from(["Integer", "Long", "Short", "Byte"]), st.integers(-128, 127)),
    st.builds(JavaObject, st.just("Character"), st.sampled_from(["a", "\u00e9", "\x00"])),
    st.builds(JavaObject, st.just("String"), _STRINGS), st.builds(JavaObject, st.just("null"), st.none()))
_ARRAYS = st.one_of(
    st.builds(JavaArray, st.just("[I"), st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=5)),
    st.builds(JavaArray, st.just("[J"), st.lists(st.integers(-5, 5), max_size=5)),
    st.builds(JavaArray, st.just("[Ljava.lang.String;"), st.lists(st.none() | _STRINGS, max_size=5)),
    st.builds(JavaArray, st.just("[Ljava.lang.Class;"), st.lists(st.sampled_from(
        [JavaClass("int"), JavaClass("[B"), JavaClass("java.lang.String"), JavaClass("java.lang.Long")]),
        max_size=4)))
_LEAVES = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _STRINGS, st.binary(max_size=40), _BOXES,
                    st.sampled_from([JavaClass("int"), JavaClass("[B"), JavaClass("org.example.Server")]),
                    _ARRAYS)
VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4).map(tuple), st.lists(inner, max_size=4),
    st.dictionaries(_STRINGS, inner, max_size=3)), max_leaves=12)

_TYPES = ["int", "long", "java.lang.String", "[B", "boolean", "double", "java.lang.Object"]


def _call_in_mode(draw, mode: str, name: str, args: list, types: list[str], declaring: str) -> MethodCall:
    if mode == "old":
        return MethodCall.old(name, args)
    if mode == "types":
        return MethodCall.with_types(name, args, types)
    if mode == "signature":
        return MethodCall.with_signature(name, args, types)
    if mode == "id":
        return MethodCall.with_id(draw(st.integers(-32768, 32767)), args)
    return MethodCall.with_method(name, args, types, declaring)


@st.composite
def method_calls(draw) -> MethodCall:
    args = draw(st.lists(VALUES, max_size=5))
    mode = draw(st.sampled_from(["old", "types", "signature", "id", "method"]))
    name = draw(_STRINGS | st.just("x" * 300))
    types = ["java.lang.Object"] * len(args) if draw(st.booleans()) else \
        [draw(st.sampled_from(_TYPES)) if isinstance(a, (type(None), str, bytes)) else "java.lang.Object"
         for a in args]
    return _call_in_mode(draw, mode, name, args, types, "org.example.Server")


def _write(values: list, fast: bool) -> bytes | str:
    w = ObjectWriter(fast=fast)
    try:
        for v in values:
            w.write_object(v)
    except (TypeError, ValueError) as e:       # a value a given type cannot hold (JavaWriteError): both alike
        return f"error {type(e).__name__}"
    return w.getvalue()


_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(st.lists(VALUES, min_size=1, max_size=4))
def test_fast_writer_gives_the_general_writers_bytes(values):
    values = values + values[:2]               # the same objects again: references by identity and by value
    assert _write(values, True) == _write(values, False)


@_SETTINGS
@given(st.lists(method_calls(), min_size=1, max_size=3))
def test_fast_writer_gives_the_general_writers_bytes_for_method_calls(calls):
    assert _write(calls, True) == _write(calls, False)


_ASCII = st.sampled_from(["", "a", "s", "echoBytes", "key", "java.lang.String", "x" * 250])
#: a small pool, so that values repeat (the JVM's cached boxes, -128..127, are shared by value; others are not)
_POOL_INTS = st.sampled_from([-(1 << 31) - 1, -(1 << 31), -129, -128, -127, -1, 0, 1, 127, 128, (1 << 31) - 1,
                              1 << 31])
_SIMPLE = st.one_of(st.none(), st.booleans(), _INTS, _POOL_INTS, _FLOATS, _ASCII, st.binary(max_size=40),
                    st.builds(JLong, st.integers(-(1 << 63), (1 << 63) - 1)),
                    st.builds(JavaObject, st.sampled_from(["Integer", "Long"]), _INTS | _POOL_INTS),
                    st.builds(JavaObject, st.just("Double"), _FLOATS),
                    st.builds(JavaObject, st.just("Boolean"), st.booleans()),
                    st.builds(JavaObject, st.just("String"), _ASCII))


@st.composite
def simple_method_calls(draw) -> MethodCall:
    """Calls of the shapes the C writer takes (it may still hand some to the general writer: long names ...)."""
    args = draw(st.lists(_SIMPLE, max_size=6))
    types = [draw(st.sampled_from(_TYPES + ["java.lang.Integer", "org.example.Thing"])) for _ in args]
    name = draw(_ASCII)
    mode = draw(st.sampled_from(["old", "types", "signature", "id", "method"]))
    return _call_in_mode(draw, mode, name, args, types, draw(st.sampled_from(["org.example.Server", ""])))


def _stream_outcome(call: MethodCall) -> bytes | str:
    try:
        return call.to_stream()
    except (TypeError, ValueError) as e:
        return f"error {type(e).__name__}"


@_SETTINGS
@given(st.one_of(simple_method_calls(), method_calls()))
def test_the_c_writer_gives_the_general_writers_bytes(call):
    """MethodCall.to_stream (C for the common shapes, else the general writer) gives the reference writer's bytes
    (ObjectWriter(fast=False)), or the same error."""
    assert _stream_outcome(call) == _write([call], False)


def test_the_common_shapes_take_the_c_writer():
    import jgpy._core.mcall as mcall
    calls = [MethodCall.with_types("echoBytes", [bytes(100)], ["[B"]),
             MethodCall.old("ping", [1, "a", None, 1, "a", 1 << 40, True, 0.5, b"", JLong(3), -100000,
                                     math.nan, -0.0, False, 200, -129]),
             MethodCall.with_signature("put", ["k", b"v", 3], ["java.lang.String", "[B", "int"]),
             MethodCall.with_types("put", ["key", 42, 3.5, True, 7],
                                   ["java.lang.String", "java.lang.Integer", "double", "boolean", "long"]),
             MethodCall.with_method("sample", ["s", 4], ["java.lang.String", "int"], "org.example.Server"),
             MethodCall.with_id(7, [False, None]),
             # more descriptors and Class objects than the writer keeps in C arrays (8), names repeated after that
             MethodCall.with_types("many", [1, 2, 3.0, True, "s", b"b", 5, 6, 7.5, False, 9, 10, 11.0],
                                   ["int", "long", "double", "boolean", "java.lang.String", "[B", "java.lang.Integer",
                                    "java.lang.Long", "java.lang.Double", "java.lang.Boolean", "int", "java.lang.Long",
                                    "java.lang.Double"]),
             MethodCall.old("edges", [-129, -128, 127, 128, -129, -128, 127, 128, JLong(-128), JLong(-128),
                                      JLong(-129), JLong(-129), True, False, True, "s", "s", b"", b""])]
    for call in calls:
        data = mcall.method_call_stream(call.mode, call.name, call.method_id, call.java_args(), call.types,
                                        call.declaring_class)
        assert data is not None and data == _write([call], False), call
    # what it leaves to the general writer: text beyond ASCII, values it does not write
    for call in (MethodCall.old("h\u00e9", []), MethodCall.old("f", ["nul\x00"]), MethodCall.old("f", [[1]])):
        assert mcall.method_call_stream(call.mode, call.name, call.method_id, call.java_args(), call.types,
                                        call.declaring_class) is None
        assert call.to_stream() == _write([call], False)


def _read_general(data: bytes):
    """The general route: ObjectInput over a stream (every byte through ``read``), bounded by ``len(data)``."""
    return ObjectInput(io.BytesIO(data).read, len(data)).read_object()


def _read_fast(data: bytes):
    return ObjectInput.from_bytes(data).read_object()


def _outcome(read, data: bytes) -> str:
    try:
        obj = read(data)
    except JavaSerializationError:
        return "error"
    try:
        return "call " + repr(vars(method_call_from_object(obj)))
    except JavaSerializationError:
        return "value " + repr(to_python(obj))


@_SETTINGS
@given(method_calls(), st.data())
def test_fast_reader_reads_what_the_general_reader_reads(call, data):
    try:
        stream = call.to_stream()
    except JavaWriteError:                      # an argument its type cannot hold: nothing to read
        reject()
    assert _outcome(_read_fast, stream) == _outcome(_read_general, stream)
    assert repr(vars(decode_method_call(call.to_buffer()))) == _outcome(_read_general, stream)[5:]
    # damaged: a byte changed, or the stream cut short: the same value or the same refusal
    pos = data.draw(st.integers(4, len(stream) - 1))
    damaged = stream[:pos] + bytes([data.draw(st.integers(0, 255))]) + stream[pos + 1:]
    cut = stream[:pos]
    for bad in (damaged, cut):
        assert _outcome(_read_fast, bad) == _outcome(_read_general, bad)
        assert _call_outcome(decode_method_call, bad) == _call_outcome(_decode_general, bad)


def _decode_general(data: bytes) -> MethodCall:
    """decode_method_call without methodcall_read: ObjectInput (over bytes, so errors have the same words)."""
    return method_call_from_object(_read_fast(data))


def _call_outcome(decode, data: bytes) -> str:
    try:
        return repr(vars(decode(data)))
    except JavaSerializationError as e:
        return f"error {e}"


@_SETTINGS
@given(method_calls(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_fast_method_call_reader_decides_as_the_general_one(call, changes):
    """methodcall_read on valid calls and on calls with bytes changed: the same MethodCall or the same error
    (words included) as the general reader."""
    try:
        stream = bytearray(call.to_stream())
    except JavaWriteError:
        reject()
    assert _call_outcome(decode_method_call, bytes(stream)) == _call_outcome(_decode_general, bytes(stream))
    for pos, b in changes:
        stream[4 + pos % (len(stream) - 4)] = b
    assert _call_outcome(decode_method_call, bytes(stream)) == _call_outcome(_decode_general, bytes(stream))


def test_the_benchmarks_call_reads_the_same_both_ways():
    call = MethodCall.with_types("echoBytes", [bytes(100)], ["[B"])
    for _ in range(3):                          # the second and later reads take remembered descriptors
        assert _outcome(_read_fast, call.to_stream()) == _outcome(_read_general, call.to_stream())
    assert decode_method_call(call.to_buffer()).args == [bytes(100)]


def test_the_common_shapes_take_the_fast_reader():
    """The shapes methodcall_read knows are read by it (not handed to the general reader), as the general reader
    reads them; an Integer array argument is not one of them and still decodes."""
    from jgpy.blocks.methodcall import METHOD_CALL_CLASS
    from jgpy.blocks.methodcall_read import method_call_parts
    calls = [MethodCall.with_types("echoBytes", [bytes(100)], ["[B"]),
             MethodCall.old("ping", [1, "a", None, 1, "a", 1 << 40, True, 0.5, b"", JLong(3), -100000]),
             MethodCall.with_signature("put", ["k", b"v", 3], ["java.lang.String", "[B", "int"]),
             MethodCall.with_types("add", [1, 2, "x"], ["int", "long", "java.lang.String"]),
             MethodCall.with_method("sample", ["s", 4], ["java.lang.String", "int"], "org.example.Server"),
             MethodCall.with_id(7, [False, None])]
    for call in calls:
        stream = call.to_stream()
        assert method_call_parts(stream, METHOD_CALL_CLASS) is not None, call
        assert _call_outcome(decode_method_call, stream) == _call_outcome(_decode_general, stream)
    nested = MethodCall.old("f", [JavaArray("[I", [1, 2])]).to_stream()
    assert method_call_parts(nested, METHOD_CALL_CLASS) is None
    assert decode_method_call(nested).args == [[1, 2]]



def test_descriptors_a_stranger_sends_cannot_grow_what_the_reader_remembers():
    """The reader remembers descriptors by their bytes (at most 256): 2,000 calls, each with a descriptor of a
    class name never seen before, leave it at that bound; the common calls still read as the general reader
    reads them."""
    from jgpy._core.mcall import spans_held
    from jgpy.blocks.methodcall import METHOD_CALL_CLASS
    from jgpy.blocks.methodcall_read import method_call_parts
    stream = MethodCall.old("f", [7]).to_stream()
    assert stream.count(b"java.lang.Integer") == 1
    for i in range(2000):
        strange = stream.replace(b"java.lang.Integer", f"x.Stranger{i:07d}".encode())
        assert method_call_parts(strange, METHOD_CALL_CLASS) is None       # not a boxed value: the general reader
        assert spans_held() <= 256
    assert spans_held() == 256
    for call in (MethodCall.old("f", [7, "s", b"b", 2.5, True, JLong(9)]),
                 MethodCall.with_types("echoBytes", [bytes(100)], ["[B"])):
        assert method_call_parts(call.to_stream(), METHOD_CALL_CLASS) is not None
        assert _call_outcome(decode_method_call, call.to_stream()) == _call_outcome(_decode_general, call.to_stream())

_LOOP_AND_CHAIN = r"""
import struct, sys
sys.path.insert(0, ".")
from jgpy.javaser import JavaSerializationError, ObjectInput
from jgpy.blocks.methodcall import decode_method_call

def desc(name, super_bytes):
    n = name.encode()
    return b"\x72" + struct.pack(">H", len(n)) + n + struct.pack(">qBH", 1, 2, 0) + b"\x78" + super_bytes

ref = lambda h: b"\x71" + struct.pack(">i", 0x7E0000 + h)
# a class that is its own super class
loop = b"\xac\xed\x00\x05\x73" + desc("A", ref(0))
# 70 classes, each the super class of the next by reference: a chain longer than MAX_DEPTH without nesting
arr = b"\xac\xed\x00\x05\x75" + desc("[Ljava.lang.Object;", b"\x70") + struct.pack(">i", 70)
for i in range(70):
    arr += b"\x76" + desc(f"C{i}", ref(2 + 2 * (i - 1)) if i else b"\x70")
for stream in (loop, arr):
    try:
        ObjectInput.from_bytes(stream).read_object()
        print("read")
    except JavaSerializationError as e:
        print("refused", "loop" in str(e))
    try:
        decode_method_call(stream)
    except JavaSerializationError:
        pass
"""


@pytest.mark.processes
def test_a_super_class_loop_or_a_long_chain_by_references_is_refused():
    """A descriptor whose super class is itself (by reference), or a chain of more than MAX_DEPTH classes built
    by references: refused at once (before: every walk over the chain, an object's fields and the address
    check, never ended). In a subprocess, so the old endless walk fails the test by its timeout."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run([sys.executable, "-c", _LOOP_AND_CHAIN], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.split("\n")[:2] == ["refused True", "refused True"], proc.stdout + proc.stderr[-2000:]
