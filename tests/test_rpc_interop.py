"""RpcDispatcher between jgpy and Java 2.12.2 (interop/src/org/jgpy/interop/RpcNode.java): jgpy calls the Java
TypedServer in every MethodCall mode and Java calls a jgpy server in every mode; values, exceptions, missing
methods, wrong types, unmarshallable values, timeouts and a callee killed mid-call."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from jgpy import Channel, JavaObject
from jgpy.blocks import (JavaException, MethodCall, RequestOptions, ResponseMode, RpcDispatcher, SuspectedError,
                         rpc_method)
from jgpy.javaser import JavaArray
from jgpy.javaser_write import JavaMap, JavaWriteError
from jgpy.testing.cluster import wait_all
from jgpy.testing.java import udp_props, unique_group
from jgpy.testing.rpcnode import JavaRpcNode
from tests.conftest import require_java

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]
TYPED_SERVER = "org.jgpy.interop.RpcNode$TypedServer"


class PyServer:
    def __init__(self, name: str) -> None:
        self.me = name
        self.calls = 0

    @rpc_method("add", ["int", "int"])
    def add(self, a, b):
        self.calls += 1
        return a + b

    @rpc_method("add", ["java.lang.String", "java.lang.String"])
    def concat(self, a, b):
        return a + b

    def name(self):
        return self.me

    def echo(self, x):
        return x

    def fail(self, text):
        try:
            raise KeyError("inner")
        except KeyError as e:
            raise ValueError(text) from e

    def unmarshallable(self):
        return object()

    def unicode(self):
        return "snowman \u2603"

    def mapping(self):
        return {"a": [1, 2.5, None], "b": b"\x01"}

    def slow(self, ms):
        time.sleep(ms / 1000)
        return ms


@pytest.fixture(scope="module")
def cluster():
    """A Java RpcNode J1 and a jgpy member P1 with an RpcDispatcher, in a group of their own."""
    require_java()
    props = udp_props(*unique_group())
    name = f"rpc-{uuid.uuid4().hex[:8]}"
    java = JavaRpcNode("J1", props)
    ch = Channel("udp.xml", "P1", props)
    try:
        java.connect(name)
        ch.connect(name)
        server = PyServer("P1")
        disp = RpcDispatcher(ch, server, method_lookup={1: server.add}.get)
        assert wait_all(lambda: ch.view is not None and len(ch.view) == 2, 30)
        j1 = next(m for m in ch.view.members if str(m) == "J1")
        yield {"java": java, "ch": ch, "disp": disp, "j1": j1, "props": props, "cluster": name, "server": server}
    finally:
        ch.close()
        java.close()


# ---- jgpy calls Java -------------------------------------------------------------------------------------

@pytest.mark.parametrize("method, args, types, want", [
    ("add", [2, 3], ["int", "int"], 5),
    ("addLong", [1 << 40, 5], ["long", "long"], (1 << 40) + 5),
    ("addBoxed", [7, 8], ["Integer", "Integer"], 15),
    ("echo", ["h\u00e9llo"], ["String"], "h\u00e9llo"),
    ("half", [1.5], ["float"], 0.75),
    ("twice", [1.25], ["double"], 2.5),
    ("not", [True], ["boolean"], False),
    ("negShort", [7], ["short"], -7),
    ("incByte", [5], ["byte"], 6),
    ("upper", ["q"], ["char"], "Q"),
    ("reverse", [b"\x01\x02\x03"], ["byte[]"], b"\x03\x02\x01"),
    ("listOf", [1, "a"], ["java.lang.Object", "java.lang.Object"], [1, "a"]),
    ("mapOf", ["k", [1, 2]], ["String", "java.lang.Object"], {"k": [1, 2]}),
    ("ints", [3], ["int"], [0, 1, 2]),
])
def test_typed_calls_to_java(cluster, method, args, types, want):
    assert cluster["disp"].call_remote_method(cluster["j1"], method, args, types=types, timeout=10000) == want


@pytest.mark.parametrize("value, described", [
    ({"k": 1}, "java.util.HashMap{String(k)=Integer(1)}"),
    (JavaMap("java.util.Hashtable", {"k": 1}), "java.util.Hashtable{String(k)=Integer(1)}"),
    ([1, [2.5, None]], "java.util.ArrayList[Integer(1),java.util.ArrayList[Double(2.5),null]]"),
    ({"x"}, "java.util.HashSet{String(x)}"),
    ((1, "a"), "[Ljava.lang.Object;[Integer(1),String(a)]"),
    (JavaArray("[J", [1, 2]), "[J[Long(1),Long(2)]"),
    (JavaObject("Long", 5), "Long(5)"),
    (None, "null"),
    ("\u20ac\U0001f600", "String(\\u20ac\\ud83d\\ude00)"),
])
def test_java_sees_our_values(cluster, value, described):
    got = cluster["disp"].call_remote_method(cluster["j1"], "describe", [value], types=["java.lang.Object"])
    assert got == described


@pytest.mark.parametrize("call", [
    MethodCall.old("add", [2, 3]),
    MethodCall.with_types("add", [2, 3], ["int", "int"]),
    MethodCall.with_signature("add", [2, 3], ["int", "int"]),
    MethodCall.with_method("add", [2, 3], ["int", "int"], TYPED_SERVER),
    MethodCall.with_id(1, [2, 3], types=["int", "int"]),
], ids=["OLD", "TYPES", "SIGNATURE", "METHOD", "ID"])
def test_every_mode_reaches_java(cluster, call):
    assert cluster["disp"].call_remote_method(cluster["j1"], call) == 5


def test_java_exception_reaches_us_with_class_message_trace_and_cause(cluster):
    with pytest.raises(JavaException) as info:
        cluster["disp"].call_remote_method(cluster["j1"], "fail", ["bad things"], types=["String"])
    e = info.value
    assert (e.java_class, e.message) == ("java.lang.IllegalStateException", "bad things")
    assert any(f.declaring_class == TYPED_SERVER and f.method_name == "fail" for f in e.stack_trace)
    assert isinstance(e.cause, JavaException) and e.cause.java_class == "java.lang.IllegalArgumentException"
    assert e.cause.message == "the cause"


@pytest.mark.parametrize("method, args, types", [
    ("noSuchMethod", [1], ["int"]),
    ("add", ["2", 3], ["String", "int"]),            # wrong argument types: Java finds no such method
])
def test_missing_method_and_wrong_types_are_java_errors(cluster, method, args, types):
    t0 = time.monotonic()
    with pytest.raises(JavaException) as info:
        cluster["disp"].call_remote_method(cluster["j1"], method, args, types=types, timeout=5000)
    assert info.value.java_class == "java.lang.NoSuchMethodException"
    assert time.monotonic() - t0 < 5


def test_a_value_java_cannot_send_is_an_exception_here(cluster):
    with pytest.raises(JavaException) as info:
        cluster["disp"].call_remote_method(cluster["j1"], "unserializable", [], types=[])
    assert info.value.java_class == "java.io.NotSerializableException"


def test_a_value_we_cannot_send_fails_before_sending(cluster):
    disp = cluster["disp"]
    sent = disp.corr.requests_sent
    with pytest.raises(TypeError):
        disp.call_remote_method(cluster["j1"], "describe", [object()], types=["java.lang.Object"])
    with pytest.raises(JavaWriteError):
        disp.call_remote_method(cluster["j1"], "add", ["x", 1], types=["int", "int"])
    assert disp.corr.requests_sent == sent
    assert disp.call_remote_method(cluster["j1"], "add", [1, 1], types=["int", "int"]) == 2


def test_timeout_then_the_late_answer_is_dropped_and_the_channel_works(cluster):
    disp = cluster["disp"]
    unknown = disp.corr.dropped_unknown_responses
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        disp.call_remote_method(cluster["j1"], "sleep", [1500], types=["long"], timeout=300)
    assert 0.25 < time.monotonic() - t0 < 1.5
    assert not disp.corr.requests                                   # nothing left waiting
    assert wait_all(lambda: disp.corr.dropped_unknown_responses > unknown, 10)
    assert disp.call_remote_method(cluster["j1"], "add", [2, 2], types=["int", "int"]) == 4


def test_group_calls_modes_and_anycast(cluster):
    disp, ch = cluster["disp"], cluster["ch"]
    rsps = disp.call_remote_methods(None, "name", [], types=[])
    assert {str(a): r.value for a, r in rsps.items()} == {"J1": "J1", "P1": "P1"}
    first = disp.call_remote_methods(None, "name", [], types=[], options=RequestOptions(ResponseMode.GET_FIRST, 5000))
    assert first.num_received >= 1 and first.get_first() in ("J1", "P1")
    anycast = disp.call_remote_methods([cluster["j1"]], "name", [], types=[],
                                       options=RequestOptions(anycasting=True))
    assert list(map(str, anycast)) == ["J1"] and anycast[cluster["j1"]].value == "J1"
    excluded = disp.call_remote_methods(None, "name", [], types=[],
                                        options=RequestOptions(exclusion_list=[ch.address]))
    assert [str(a) for a in excluded] == ["J1"]
    oob = disp.call_remote_methods(None, "name", [], types=[], options=RequestOptions(flags=0x01))
    assert oob.num_received == 2
    assert disp.call_remote_methods(None, "nothing", [], types=[],
                                    options=RequestOptions(ResponseMode.GET_NONE)).num_received == 0


def test_group_call_maps_each_member_to_value_or_exception(cluster):
    rsps = cluster["disp"].call_remote_methods(None, "echo", ["x"], types=["String"])
    assert {str(a): r.value for a, r in rsps.items()} == {"J1": "x", "P1": "x"}
    rsps = cluster["disp"].call_remote_methods(None, "fail", ["both"], types=["String"])
    by = {str(a): r for a, r in rsps.items()}
    assert by["J1"].exception.java_class == "java.lang.IllegalStateException"
    assert isinstance(by["P1"].exception, JavaException)            # our own answer went through the wire too
    assert by["P1"].exception.java_class == "java.lang.IllegalArgumentException"


# ---- Java calls jgpy -----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["OLD", "TYPES", "SIGNATURE", "METHOD", "ID"])
def test_java_calls_our_server_in_every_mode(cluster, mode):
    before = cluster["server"].calls
    res = cluster["java"].call_methods("add", [("int", 20), ("int", 22)], dests=["P1"], mode=mode, method_id=1)
    assert res["P1"]["received"] and res["P1"]["value"] == "Integer(42)"
    assert cluster["server"].calls == before + 1


def test_java_picks_our_overload_by_types(cluster):
    res = cluster["java"].call_methods("add", [("String", "ab"), ("String", "cd")], dests=["P1"])
    assert res["P1"]["value"] == "String(abcd)"


@pytest.mark.parametrize("method, args, want", [
    ("echo", [("list", [["int", 1], ["String", "z"]])], "java.util.ArrayList[Integer(1),String(z)]"),
    ("echo", [("map", {"k": ["long", 5]})], "java.util.HashMap{String(k)=Long(5)}"),
    ("echo", [("bytes", "0102")], "[B[Byte(1),Byte(2)]"),
    ("echo", [("double", 2.5)], "Double(2.5)"),
    ("echo", [("null", None)], "null"),
    ("unicode", [], "String(snowman \\u2603)"),
    ("mapping", [], "java.util.HashMap{String(a)=java.util.ArrayList[Integer(1),Double(2.5),null],"
                    "String(b)=[B[Byte(1)]}"),
])
def test_java_gets_our_values(cluster, method, args, want):
    res = cluster["java"].call_methods(method, args, dests=["P1"], mode="OLD")
    assert res["P1"]["value"] == want


def test_our_exceptions_reach_java_as_throwables(cluster):
    res = cluster["java"].call_methods("fail", [("String", "no")], dests=["P1"], mode="OLD")["P1"]
    assert res["value"].startswith("java.lang.IllegalArgumentException(ValueError: no;trace=test_rpc_interop.fail@")
    line = PyServer.fail.__code__.co_firstlineno + 2
    assert res["value"].endswith(";cause=java.util.NoSuchElementException(KeyError: 'inner';trace=test_rpc_interop."
                                 f"fail@test_rpc_interop.py:{line} ;cause=null))")
    missing = cluster["java"].call_methods("nothing_here", [], dests=["P1"], mode="OLD")["P1"]
    assert missing["value"].startswith("java.lang.NoSuchMethodException(found no method called nothing_here")
    bad = cluster["java"].call_methods("unmarshallable", [], dests=["P1"], mode="OLD")["P1"]
    assert bad["value"].startswith("java.lang.IllegalArgumentException(JavaWriteError: the result cannot be sent")
    wrong = cluster["java"].call_methods("add", [("double", 1.0), ("int", 1)], dests=["P1"])["P1"]
    assert wrong["value"].startswith("java.lang.NoSuchMethodException(")


def test_java_times_out_on_a_slow_jgpy_server_and_we_stay_usable(cluster):
    t0 = time.monotonic()
    res = cluster["java"].call_methods("slow", [("long", 1500)], dests=["P1"], mode="OLD", timeout_ms=300)["P1"]
    assert not res["received"] and time.monotonic() - t0 < 10
    assert cluster["java"].call_methods("echo", [("String", "ok")], dests=["P1"], mode="OLD")["P1"]["value"] == \
        "String(ok)"


# ---- a callee killed mid-call ------------------------------------------------------------------------

def test_callee_killed_mid_call_is_suspected_not_hung(cluster):
    ch, disp = cluster["ch"], cluster["disp"]
    victim = JavaRpcNode("J2", cluster["props"])
    try:
        victim.connect(cluster["cluster"])
        assert wait_all(lambda: len(ch.view) == 3, 30)
        j2 = next(m for m in ch.view.members if str(m) == "J2")
        outcome: dict = {}

        def call():
            t0 = time.monotonic()
            try:
                outcome["value"] = disp.call_remote_method(j2, "sleep", [60000], types=["long"], timeout=40000)
            except Exception as e:  # noqa: BLE001 - the test looks at it
                outcome["error"] = e
            outcome["took"] = time.monotonic() - t0
        t = threading.Thread(target=call)
        t.start()
        assert wait_all(lambda: disp.corr.requests, 10)
        victim.kill()
        t.join(40)
        assert not t.is_alive()
        assert isinstance(outcome.get("error"), SuspectedError), outcome
        assert outcome["took"] < 30
        assert not disp.corr.requests
        assert disp.call_remote_method(cluster["j1"], "add", [1, 2], types=["int", "int"]) == 3
    finally:
        victim.close()


def test_calls_both_ways_over_the_jars_tcp_xml():
    """The same calls on tcp.xml (responses are OOB|DONT_BUNDLE unicasts over TCP connections)."""
    import os
    import tempfile

    from jgpy.stack.config import load_config
    from jgpy.testing.java import private_tcp
    require_java()
    cfg, props, _ = private_tcp(load_config("tcp.xml"), 2)
    with tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-rpc-tcp-", delete=False) as f:
        f.write(cfg.to_xml())
    name = f"rpctcp-{uuid.uuid4().hex[:8]}"
    java = JavaRpcNode("J1", props)
    ch = Channel(cfg, "P1", props)
    try:
        java.connect(name, config=f.name)
        ch.connect(name)
        disp = RpcDispatcher(ch, PyServer("P1"))
        assert wait_all(lambda: len(ch.view) == 2, 30)
        j1 = next(m for m in ch.view.members if str(m) == "J1")
        assert disp.call_remote_method(j1, "add", [40, 2], types=["int", "int"]) == 42
        with pytest.raises(JavaException, match="IllegalStateException"):
            disp.call_remote_method(j1, "fail", ["x"], types=["String"])
        rsps = disp.call_remote_methods(None, "echo", ["both"], types=["String"])
        assert {str(a): r.value for a, r in rsps.items()} == {"J1": "both", "P1": "both"}
        res = java.call_methods("add", [("int", 1), ("int", 2)], dests=["P1"])
        assert res["P1"]["value"] == "Integer(3)"
    finally:
        ch.close()
        java.close()
        os.unlink(f.name)
