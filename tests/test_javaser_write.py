"""jgpy.javaser_write against the live JVM: our bytes equal ObjectOutputStream's for the same values
(interop/src/org/jgpy/interop/SerGolden.java), the JVM reads what we write, and we read back what both wrote."""

from __future__ import annotations

import struct
import subprocess

import pytest

from jgpy import JavaObject
from jgpy.blocks.methodcall import MethodCall, decode_method_call
from jgpy.blocks.notification_bus import Info
from jgpy.javaser import JavaArray, JavaSerializationError
from jgpy.javaser_values import JavaException, deserialize
from jgpy.javaser_write import (JavaClass, JavaCollection, JavaMap, JavaThrowable, JavaWriteError, StackFrame,
                                serialize)
from jgpy.testing.java import JGROUPS_JAR
from tests.conftest import require_java

_LONG = "".join(chr(ord("a") + i % 26) for i in range(70000))
_TRACE = [StackFrame("pkg.Mod", "fn", "mod.py", 12), StackFrame("pkg.Other", "<module>", None, -1)]

#: the Python value for each golden case of SerGolden.java
CASES = {
    "null": None,
    "string": "hello",
    "string_unicode": "h\u00e9llo \u20ac \U0001f600 \x00",
    "string_long": _LONG,
    "integer": 42,
    "integer_neg": -100000,
    "long": 1234567890123,
    "short": JavaObject("Short", -7),
    "byte": JavaObject("Byte", 5),
    "float": JavaObject("Float", 1.5),
    "double": -2.25,
    "boolean": True,
    "character": JavaObject("Character", "\u00e9"),
    "bytes": b"\x01\x02\xfd",
    "ints": JavaArray("[I", [1, -2, 300000]),
    "longs": JavaArray("[J", [1, -2]),
    "objects": (1, "a", None, 1, "a"),
    "strings": JavaArray("[Ljava.lang.String;", ["a", "b", "a"]),
    "arraylist": [1, "x", JavaObject("Long", 2)],
    "arraylist_empty": [],
    "hashmap": {"k": 7},
    "hashtable": JavaMap("java.util.Hashtable", {"k": 7}),
    "linkedlist": JavaCollection("java.util.LinkedList", [1, 2]),
    "vector": JavaCollection("java.util.Vector", [1, "x"]),
    "vector_empty": JavaCollection("java.util.Vector", []),
    "hashset": {"s"},
    "treemap": JavaMap("java.util.TreeMap", {"b": 2, "a": 1}),
    "exception": JavaThrowable("java.lang.RuntimeException", "boom", _TRACE,
                               JavaThrowable("java.lang.IllegalStateException", "inner")),
    "exception_nocause": JavaThrowable("java.lang.Exception", "plain"),
    "mc_old": MethodCall.old("ping", [1, "a"]),
    "mc_types": MethodCall.with_types("add", [1, 2], ["int", "java.lang.Long"]),
    "mc_signature": MethodCall.with_signature("echo", ["x"], ["java.lang.String"]),
    "mc_id": MethodCall.with_id(3, []),
    "mc_echo_bytes": MethodCall.with_types("echoBytes", [bytes(100)], ["[B"]),
    "mc_mixed": MethodCall.with_types("mix", [5, "s", 5, "s", 100000, 7, True, 0.5, None, b"\x01", (5, "s")],
                                      ["int", "String", "Integer", "String", "int", "long", "boolean", "double",
                                       "String", "[B", "[Ljava.lang.Object;"]),
    "mc_signature_ids": MethodCall.with_signature("put", ["k", b"\x07", 3], ["java.lang.String", "[B", "int"]),
    "mc_method": MethodCall.with_method("sample", ["s", 4], ["java.lang.String", "int"],
                                        "org.jgpy.interop.SerGolden"),
}
CASES["notification_info"] = Info(1, "hi")
_SHARED_MAP = {"k": 7}
CASES["nested"] = [["in", 1000], _SHARED_MAP, b"\x09"]

#: what Python reads back from each case (where it is not the value itself)
READ_BACK = {
    "short": -7, "byte": 5, "float": 1.5, "character": "\u00e9", "ints": [1, -2, 300000], "longs": [1, -2],
    "objects": [1, "a", None, 1, "a"], "strings": ["a", "b", "a"], "arraylist": [1, "x", 2],
    "mc_mixed": [5, "s", 5, "s", 100000, 7, True, 0.5, None, b"\x01", [5, "s"]],
    "hashtable": {"k": 7}, "linkedlist": [1, 2], "vector": [1, "x"],
    "vector_empty": [], "treemap": {"a": 1, "b": 2}, "nested": [["in", 1000], {"k": 7},
                                                                                          b"\x09"],
}


@pytest.fixture(scope="module")
def jvm():
    """The golden program: its goldens, and a function asking it to read bytes (one line per request)."""
    require_java()
    from jgpy.testing.java import ensure_compiled
    classes = ensure_compiled()
    proc = subprocess.Popen(["java", "-cp", f"{classes}:{JGROUPS_JAR}", "org.jgpy.interop.SerGolden"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    goldens = {}
    try:
        for _ in range(200):
            line = proc.stdout.readline().strip()
            if line == "end" or not line:
                break
            name, hexed = line.split(" ")
            goldens[name] = bytes.fromhex(hexed)

        def java_reads(data: bytes) -> str:
            proc.stdin.write(data.hex() + "\n")
            proc.stdin.flush()
            return proc.stdout.readline().strip()
        yield goldens, java_reads
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)


pytestmark = [pytest.mark.interop]


def test_every_case_has_a_golden(jvm):
    goldens, _ = jvm
    assert set(goldens) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bytes_equal_the_jvms(jvm, name):
    goldens, _ = jvm
    ours = serialize(CASES[name])
    assert ours.hex() == goldens[name].hex()


@pytest.mark.parametrize("name", sorted(CASES))
def test_we_read_what_the_jvm_wrote(jvm, name):
    goldens, _ = jvm
    value = deserialize(goldens[name])
    if name.startswith("mc_"):
        mc = decode_method_call(goldens[name])
        want = CASES[name]
        assert (mc.mode, mc.name, mc.method_id, mc.args, mc.types) == (want.mode, want.name, want.method_id,
                                                                       READ_BACK.get(name, want.args), want.types)
    elif name == "notification_info":
        from jgpy.blocks.notification_bus import _info_of
        from jgpy.javaser import ObjectInput
        info = _info_of(ObjectInput.from_bytes(goldens[name]).read_object())
        assert (info.type, info.data) == (1, "hi")
    elif name.startswith("exception"):
        assert isinstance(value, JavaException)
        want = CASES[name]
        assert (value.java_class, value.message, value.stack_trace) == (want.class_name, want.message,
                                                                        want.stack_trace)
        assert (value.cause.java_class if value.cause else None) == (want.cause.class_name if want.cause else None)
    else:
        assert value == READ_BACK.get(name, CASES[name])


def test_java_reads_what_we_wrote(jvm):
    """Values whose bytes cannot equal a golden (several map entries, cycles, Python exceptions) still read
    in Java as the same values."""
    _, java_reads = jvm
    many = {f"key{i}": i for i in range(40)}
    assert java_reads(serialize(many)) == "ok java.util.HashMap{" + ",".join(
        sorted(f"String(key{i})=Integer({i})" for i in range(40))) + "}"
    assert java_reads(serialize(JavaMap("java.util.Hashtable", many))).startswith("ok java.util.Hashtable{String(")
    assert java_reads(serialize({1, 2, 3})) == "ok java.util.HashSet{Integer(1),Integer(2),Integer(3)}"
    cyclic: list = [1]
    cyclic.append(cyclic)
    assert java_reads(serialize(cyclic)).startswith("err java.lang.StackOverflowError") or \
        java_reads(serialize(cyclic)).startswith("ok java.util.ArrayList")
    try:
        raise KeyError("missing") from ValueError("bad value")
    except KeyError as e:
        got = java_reads(serialize(e))
    assert got.startswith("ok java.util.NoSuchElementException(KeyError: 'missing';trace=test_javaser_write.")
    assert got.endswith(";cause=java.lang.IllegalArgumentException(ValueError: bad value;trace=;cause=null))")
    assert java_reads(serialize(JavaArray("[D", [1.5, -0.0]))) == "ok [D[Double(1.5),Double(-0.0)]"
    assert java_reads(serialize(JavaArray("[C", ["a", "\u20ac"]))) == "ok [C[Character(97),Character(8364)]"
    text = "\u20ac" * 30000                    # 90000 bytes of modified UTF-8: a long string
    assert java_reads(serialize(text)) == "ok String(" + "\\u20ac" * 30000 + ")"
    big_call = MethodCall.with_types("put", ["k" * 3000, b"\x00" * 5000], ["java.lang.String", "[B"])
    assert java_reads(big_call.to_stream()).startswith("ok MethodCall(mode=3,name=put,")


@pytest.mark.parametrize("bad", [object(), {1: object()}, [1, 2 ** 70], JavaObject("Short", 1 << 20),
                                 JavaArray("[I", [1 << 40]), JavaArray("[Lfoo.Bar;", []),
                                 JavaCollection("java.util.Stack", []), JavaObject("Character", "ab"),
                                 JavaMap("java.util.TreeMap", {1: 1, "a": 2})])
def test_what_cannot_be_written_is_a_type_error(bad):
    with pytest.raises(TypeError):
        serialize(bad)
    with pytest.raises(JavaWriteError):
        serialize(bad)


def test_deep_nesting_is_an_error_not_a_crash():
    v: list = []
    for _ in range(2000):
        v = [v]
    with pytest.raises(JavaWriteError):
        serialize(v)


def test_class_objects():
    assert deserialize(serialize(JavaClass("int"))).name == "int"


def test_remembered_class_descriptors_are_bounded_and_read_as_before():
    """ObjectInput over bytes does not read a descriptor it read before again (javaser._DESC_SPANS): strangers'
    descriptors fill the table but never grow it past its bound, and what is read is what a full read gives."""
    from jgpy import javaser
    for i in range(javaser._MAX_SPANS + 300):
        assert deserialize(serialize(JavaClass(f"org.example.C{i}"))).name == f"org.example.C{i}"
    assert len(javaser._DESC_SPANS) <= javaser._MAX_SPANS
    # descriptors with back-references inside (StackTraceElement's String fields) are read in full every time
    exc = JavaThrowable("java.lang.RuntimeException", "x", _TRACE)
    for _ in range(3):
        got = deserialize(serialize(exc))
        assert (got.java_class, got.message, got.stack_trace) == ("java.lang.RuntimeException", "x", _TRACE)
    # the same descriptor bytes: the second read takes the remembered one and gives the same values
    call = MethodCall.with_types("add", [1, 2], ["int", "long"])
    first, second = decode_method_call(call.to_buffer()), decode_method_call(call.to_buffer())
    assert (first.args, first.types) == (second.args, second.types) == ([1, 2], ["int", "long"])


def test_a_remembered_descriptor_still_counts_towards_the_nesting_bound():
    from jgpy.javaser import MAX_DEPTH, ObjectInput
    inner = serialize(JavaObject("Short", 1))[4:]                 # an object with a descriptor and its super's
    assert ObjectInput.from_bytes(b"\xac\xed\x00\x05" + inner).read_object() is not None    # remembered now
    nested = b"\xac\xed\x00\x05" + b"\x75\x72\x00\x13[Ljava.lang.Object;" + struct.pack(
        ">qBH", -8012369246846506644, 2, 0) + b"\x78\x70" + struct.pack(">i", 1)
    # arrays of one element nested MAX_DEPTH - 1 deep around the object: its descriptor chain goes past the bound
    stream = b"\xac\xed\x00\x05" + nested[4:] * (MAX_DEPTH - 1) + inner
    with pytest.raises(JavaSerializationError, match="nested"):
        ObjectInput.from_bytes(stream).read_object()


def test_the_jvms_method_calls_take_the_fast_reader(jvm):
    """The MethodCalls the JVM writes are read by jgpy.blocks.methodcall_read (not handed to the general reader)
    and give what the general reader gives."""
    from jgpy.blocks.methodcall import METHOD_CALL_CLASS, method_call_from_object
    from jgpy.blocks.methodcall_read import method_call_parts
    from jgpy.javaser import ObjectInput
    goldens, _ = jvm
    for name in ("mc_old", "mc_types", "mc_signature", "mc_id", "mc_method", "mc_echo_bytes", "mc_mixed",
                 "mc_signature_ids"):
        data = goldens[name]
        fast, general = decode_method_call(data), method_call_from_object(ObjectInput.from_bytes(data).read_object())
        assert vars(fast) == vars(general), name
        if name != "mc_mixed":                  # its Object[] argument is one the fast reader hands over
            assert method_call_parts(data, METHOD_CALL_CLASS) is not None, name
