"""NotificationBus: jgpy members, and the jar's own NotificationBusDemo (driven over stdin) as a Java peer."""

from __future__ import annotations

import queue
import subprocess
import threading
import uuid

import pytest

from jgpy import Channel, Message
from jgpy.blocks.notification_bus import NotificationBus
from jgpy.testing.cluster import wait_all
from jgpy.testing.java import JGROUPS_JAR, udp_props, unique_group
from tests.conftest import require_java

pytestmark = pytest.mark.timeout(180)


class Consumer:
    def __init__(self, cache=None):
        self.cache = cache
        self.got, self.joined, self.left = [], [], []

    def handle_notification(self, n):
        self.got.append(n)

    def get_cache(self):
        return self.cache

    def member_joined(self, m):
        self.joined.append(str(m))

    def member_left(self, m):
        self.left.append(str(m))


def test_notifications_cache_and_membership_between_jgpy_members():
    props = udp_props(*unique_group())
    bus_name = f"bus-{uuid.uuid4().hex[:8]}"
    ca, cb = Consumer(cache={"items": [1, 2]}), Consumer()
    with Channel("udp.xml", "A", props) as a, Channel("udp.xml", "B", props) as b:
        ba, bb = NotificationBus(a, bus_name, ca), NotificationBus(b, bus_name, cb)
        ba.start()
        assert ba.get_cache_from_coordinator(1000) is None            # the first member
        bb.start()
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        assert bb.get_cache_from_coordinator(5000) == {"items": [1, 2]}
        ba.send_notification({"event": "x", "n": 3})
        bb.send_notification("to A only", dest=a.address)
        assert wait_all(lambda: {"event": "x", "n": 3} in cb.got and "to A only" in ca.got, 10)
        assert "to A only" not in cb.got and ca.joined == ["A", "B"] and cb.joined == ["A", "B"]
        a.send(b.address, b"not an Info")                             # counted and dropped
        assert wait_all(lambda: bb.dropped == 1, 10)
        b.send(Message(a.address, b"\x02\xac\xed\x00\x05\x73\x72\xff"))  # a broken stream
        assert wait_all(lambda: ba.dropped == 1, 10)
        from jgpy import UUID
        from jgpy.blocks.correlator import marshal_value
        from jgpy.blocks.notification_bus import GET_CACHE_REQ, Info
        asks = Message(a.address, marshal_value(Info(GET_CACHE_REQ), a.stack.dialect), UUID(5, 6))
        ba.receive(asks)                                               # a stranger asking for the cache
        assert ba.dropped == 2
        bb.stop()
        assert wait_all(lambda: ca.left == ["B"], 20)


@pytest.mark.interop
def test_the_jars_notification_bus_demo_is_a_peer():
    require_java()
    props = udp_props(*unique_group())
    bus_name = f"busx-{uuid.uuid4().hex[:8]}"
    cmd = ["java", "-Djava.net.preferIPv4Stack=true", *(f"-D{k}={v}" for k, v in props.items()), "-cp",
           str(JGROUPS_JAR), "org.jgroups.demos.NotificationBusDemo", "-bus_name", bus_name, "-props", "udp.xml"]
    demo = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: "queue.Queue[str]" = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=lambda: [lines.put(x) for x in demo.stdout], daemon=True).start()

    def saw(text: str) -> bool:
        while not lines.empty():
            seen.append(lines.get())
        return any(text in x for x in seen)
    consumer = Consumer()
    try:
        assert wait_all(lambda: saw("** Member joined"), 30)               # the demo is up (alone)
        with Channel("udp.xml", "P", props) as ch:
            bus = NotificationBus(ch, bus_name, consumer)
            bus.start()
            assert wait_all(lambda: len(ch.view) == 2, 30)
            assert wait_all(lambda: saw("** Member joined: P"), 10)
            demo.stdin.write("hello from java\n")
            demo.stdin.flush()
            assert wait_all(lambda: "hello from java" in consumer.got, 10)
            bus.send_notification("hello from jgpy")
            assert wait_all(lambda: saw("** Received notification: hello from jgpy"), 10)
            assert bus.get_cache_from_coordinator(1000, max_tries=1) is None   # the demo's cache is null
            assert consumer.joined[-1] == "P"
        assert wait_all(lambda: saw("** Member left: P"), 30)
    finally:
        try:
            demo.stdin.write("quit\n")
            demo.stdin.flush()
            demo.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            demo.kill()
            demo.wait(10)
