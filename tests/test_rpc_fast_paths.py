"""The per-call shortcuts of the RPC path give what the general code gives: the request's bytes, its reading on
the server, an answer's bytes both ways, a message's payload copy."""

from __future__ import annotations

import pytest

from jgpy import DIALECT, Message
from jgpy._core.jg212 import JavaObject, object_from_buffer, object_to_buffer
from jgpy.blocks.correlator import marshal_value, unmarshal_value
from jgpy.blocks.methodcall import (MethodCall, decode_method_call, java_value, method_call_fields_of,
                                    typed_call_buffer)
from jgpy.javaser_write import JavaWriteError

CALLS = [
    ("echoBytes", [bytes(100)], ["[B"]),
    ("echoBytes", [b""], ["byte[]"]),
    ("concat", ["a", "b\u00e9"], ["String", "java.lang.String"]),
    ("mixed", [1, 2.5, True, None, "x", b"y"], ["int", "double", "boolean", "java.lang.Object", "java.lang.Object",
                                              "java.lang.Object"]),
    ("longs", [1 << 40, 7], ["long", "java.lang.Long"]),
    ("list", [[1, 2]], ["java.util.List"]),
    ("none", [], []),
]


@pytest.mark.parametrize("name,args,types", CALLS)
def test_a_typed_calls_bytes_and_reading_are_those_of_the_methodcall(name, args, types):
    buf = typed_call_buffer(name, args, types)
    assert buf == MethodCall.with_types(name, args, types).to_buffer()
    fields = method_call_fields_of(buf)
    mc = decode_method_call(buf)
    assert fields == (mc.mode, mc.name, mc.args, mc.types, mc.method_id, mc.declaring_class)
    assert decode_method_call(memoryview(buf)) == mc


def test_a_typed_call_that_cannot_be_written_fails_as_the_methodcall_does():
    for args, types in (([1, 2], ["int"]), (["x"], ["int"]), ([None], ["int"]), ([3], ["java.lang.String"])):
        with pytest.raises(JavaWriteError) as fast:
            typed_call_buffer("m", args, types)
        with pytest.raises(JavaWriteError) as general:
            MethodCall.with_types("m", args, types).to_buffer()
        assert str(fast.value) == str(general.value)


def test_values_passed_as_they_are_only_where_java_takes_them_so():
    assert java_value(b"x", "[B") == b"x" and java_value("s", "java.lang.String") == "s"
    assert java_value(5, "java.lang.Object") == 5
    assert java_value(5, "int") == JavaObject("Integer", 5)
    with pytest.raises(JavaWriteError):
        java_value(b"x", "java.lang.String")


@pytest.mark.parametrize("value", [b"", b"\x00" * 3, bytes(range(256)), None, True, 1.5, "text"])
def test_an_answers_bytes_both_ways_are_the_general_ones(value):
    general = object_to_buffer(JavaObject("byte[]", value)) if type(value) is bytes else None
    buf = marshal_value(value, DIALECT)
    assert buf == object_to_buffer(value) == DIALECT.object_to_buffer(value)
    if general is not None:
        assert buf == general == bytes([19]) + value
    assert unmarshal_value(buf, DIALECT) == object_from_buffer(buf) == value
    assert unmarshal_value(memoryview(buf), DIALECT) == value
    assert marshal_value(bytearray(b"ab"), DIALECT) == bytes([19]) + b"ab"


def test_a_messages_buffer_copies_only_its_window():
    data = b"0123456789"
    m = Message(None)
    m.set_buffer(data, 2, 5)
    assert m.buffer == b"23456" and type(m.buffer) is bytes
    m.set_buffer(data)
    assert m.buffer is data
    m.set_buffer(bytearray(data), 8, 2)
    assert m.buffer == b"89"
    m.set_buffer(data, 10, 0)
    assert m.buffer == b""
