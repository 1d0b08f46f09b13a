"""JMS: jgpy clusters whose only connection is a message broker (a private ActiveMQ over STOMP, jgpy/conf/jms.xml).

Three jgpy members, each in its own process, join through the broker and keep per-sender FIFO order of multicasts
and unicasts; the broker is killed and started again while they are connected (traffic resumes, what was sent
meanwhile arrives once later traffic reveals the gaps); frames that are not datagrams, published on the cluster's
topic and on a member's own, are counted and dropped; a member killed with -9 is found by FD_ALL and leaves the
view; an outage longer than FD_ALL's timeout splits the members, and MERGE2 merges them back once the broker
returns. The tests run in order on one broker and one cluster (module scope)."""

from __future__ import annotations

import os
import random
import socket
import threading
import time
import types
import uuid

import pytest

from jgpy import DIALECT, UUID, Channel, Message
from jgpy._core.spec212 import PROTOCOL_IDS
from jgpy.headers import TpHeader
from jgpy.protocols.jms import BoundedInbox, Outbox, default_topic, made_up_address, unicast_topic
from jgpy.stack.config import load_config
from jgpy.testing.activemq import ActiveMQBroker, unavailable_reason
from jgpy.testing.children import listens_on
from jgpy.testing.cluster import check_fifo, make_member, wait_all
from jgpy.testing.java import free_port_block
from jgpy.testing.javajson import from_json
from tests.conftest import require, require_module
from tests.test_stack_interop import exchange

pytestmark = [pytest.mark.processes, pytest.mark.slow]

NAMES = ["A", "B", "C"]
JMS_ID = PROTOCOL_IDS["JMS"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    require(unavailable_reason())
    require_module("stomp", "pip install stomp.py (or jgpy[jms])")
    b = ActiveMQBroker(tmp_path_factory.mktemp("activemq"))
    b.start()
    try:
        yield b
    finally:
        b.stop()


def jms_config(url: str):
    # FD_ALL: a broker restart (a few seconds) must not look like a crash; reconnection attempts at least
    # every second; discovery shorter than jms.xml's
    return (load_config("jms.xml").with_properties("JMS", broker_url=url, max_reconnect_interval="1000")
            .with_properties("PING", timeout="1000").with_properties("FD_ALL", timeout="15000", interval="3000"))


@pytest.fixture(scope="module")
def cluster(broker):
    name = f"jms-{uuid.uuid4().hex[:8]}"
    members = []
    try:
        for n in NAMES:
            m = make_member("p", n, jms_config(broker.url), {})
            members.append(m)
            m.connect(name)
        c = types.SimpleNamespace(name=name, members=members, sent={n: 0 for n in NAMES},
                                  usent={n: 0 for n in NAMES})
        yield c
    finally:
        for m in members:
            m.close()


def jms_stats(member) -> dict:
    return member.stats()["JMS"]


def send_round(c, count: int, unicasts: int, members=None) -> None:
    """Every member multicasts ``count`` more numbered messages and sends ``unicasts`` more to the next one."""
    members = members or c.members
    for i, m in enumerate(members):
        m.send_numbered(count, start=c.sent[m.name])
        c.sent[m.name] += count
        if unicasts:
            m.send_numbered(unicasts, dest_name=members[(i + 1) % len(members)].name, start=c.usent[m.name])
            c.usent[m.name] += unicasts


def assert_all_delivered(c, members=None, timeout: float = 60.0) -> None:
    """Every member delivered everything sent so far exactly once, in per-sender order."""
    members = members or c.members
    total = sum(c.sent[m.name] for m in members)
    for i, m in enumerate(members):
        prev = members[(i - 1) % len(members)].name
        assert m.wait_received(total, timeout=timeout), f"{m.name}: {m.received.count()} of {total} multicasts"
        assert m.wait_received(c.usent[prev], unicast=True, timeout=timeout), \
            f"{m.name}: {m.received.count(True)} of {c.usent[prev]} unicasts"
        assert not check_fifo(m.received.by_sender, {x.name: c.sent[x.name] for x in members}), m.name
        assert not check_fifo(m.received.unicast_by_sender, {prev: c.usent[prev]}), m.name


def test_topic_names_and_made_up_addresses():
    assert default_topic("my-cluster_1") == "jgpy.my-cluster_1"
    odd = default_topic("a.b>*")                          # no separators or wildcards reach the broker
    assert odd.startswith("jgpy.a_b__-") and odd != default_topic("a_b__")
    addrs = {made_up_address() for _ in range(1000)}
    assert len(addrs) == 1000
    assert all(240 <= int(a.host.split(".")[0]) <= 247 and 0 < a.port < 65536 for a in addrs)
    a = made_up_address()
    assert unicast_topic("jgpy.x", a) == f"jgpy.x.to.{a.host.replace('.', '-')}-{a.port}"


def test_send_and_receive_queues_are_bounded():
    out = Outbox(100)
    up = lambda: True  # noqa: E731
    assert out.put("/topic/t", bytes(60), 0.05, up)
    t0 = time.monotonic()
    assert not out.put("/topic/t", bytes(60), 0.05, up)    # full: waits for room, then gives up
    assert time.monotonic() - t0 >= 0.04 and out.pending() == 1
    assert not out.put("/topic/t", b"x", 1.0, lambda: False)  # link down: dropped at once
    assert out.take(0.01) == [("/topic/t", bytes(60))] and out.pending() == 1    # in flight until written
    out.in_flight = 0
    assert out.put("/topic/t", bytes(100), 0.05, up) and out.pending() == 1

    got, done = [], threading.Event()

    class Sink:                                           # what the inbox passes datagrams up to
        counters: dict = {}

        def receive_datagrams(self, batch, sources, multicast):
            got.extend(batch)
            done.wait(5)
    inbox = BoundedInbox(Sink(), "test-inbox", 100)       # type: ignore[arg-type]
    try:
        assert inbox.offer(bytes(50), True)               # taken at once: the sink holds it
        assert wait_all(lambda: len(got) == 1 and inbox.bytes == 0, 5)
        assert inbox.offer(bytes(60), True) and not inbox.offer(bytes(60), True) and inbox.bytes == 60
        done.set()
        assert wait_all(lambda: len(got) == 2 and inbox.bytes == 0, 5)
        assert inbox.offer(bytes(100), False)
    finally:
        done.set()
        inbox.stop()


def test_connect_fails_when_no_broker_answers():
    require_module("stomp", "pip install stomp.py (or jgpy[jms])")
    port = free_port_block(1)
    config = jms_config(f"stomp://127.0.0.1:{port}").with_properties("JMS", connect_timeout="1500")
    ch = Channel(config, "lonely")
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match="cannot reach the broker"):
        ch.connect(f"jms-{uuid.uuid4().hex[:8]}")
    assert time.monotonic() - t0 < 10
    ch.close()
    assert wait_all(lambda: not [t for t in threading.enumerate() if t.name.startswith("jgpy-jms")], 5)


def test_in_process_members_leave_gracefully(broker):
    name = f"jms-{uuid.uuid4().hex[:8]}"
    members = [make_member("P", n, jms_config(broker.url), {}) for n in ("X", "Y")]
    try:
        for m in members:
            m.connect(name)
        assert all(m.wait_view(["X", "Y"], 20) for m in members)
        members[0].send_numbered(200)
        assert members[1].wait_received(200, timeout=30)
        assert not check_fifo(members[1].received.by_sender, {"X": 200})
        members[1].disconnect()                           # a leave through the broker: no suspicion needed
        assert members[0].wait_view(["X"], 10)
    finally:
        for m in members:
            m.close()
    assert wait_all(lambda: not [t for t in threading.enumerate() if t.name.startswith("jgpy-jms")], 10)


def test_three_members_join_and_keep_fifo(cluster):
    for m in cluster.members:
        assert m.wait_view(NAMES, 30), f"{m.name}: {m.view_names()}"
    exchange(cluster, 600, 100, timeout=90)
    for m in cluster.members:
        cluster.sent[m.name] = 600
        cluster.usent[m.name] = 100
        s = jms_stats(m)
        assert s["broker_connects"] == 1 and s["dropped_bad_frames"] == 0, s


def test_broker_restart_traffic_resumes_nothing_lost(cluster, broker):
    broker.kill()
    assert wait_all(lambda: all(jms_stats(m)["broker_disconnects"] >= 1 for m in cluster.members), 20)
    send_round(cluster, 50, 20)                           # into the void: dropped by the transports
    assert sum(jms_stats(m)["dropped_disconnected"] for m in cluster.members) > 0
    broker.start()
    assert wait_all(lambda: all(jms_stats(m)["broker_connects"] >= 2 for m in cluster.members), 30), \
        [jms_stats(m) for m in cluster.members]
    send_round(cluster, 50, 20)                           # reveals the gaps: NAKACK and UNICAST fill them
    assert_all_delivered(cluster)
    for m in cluster.members:
        assert m.view_names() == NAMES, f"{m.name}: {m.view_names()}"   # nobody was suspected


def _hostile_bodies(cluster_name: str) -> list[bytes]:
    good = Message(None, b"x", UUID.random())
    good.put_header(JMS_ID, TpHeader(cluster_name))
    data = DIALECT.encode_message(good)
    other = Message(None, b"y", UUID.random())
    other.put_header(JMS_ID, TpHeader("another-cluster"))
    rnd = random.Random(7)
    return ([bytes([0x1f, 0x02]) + data[2:],               # another version
             data[:-7],                                    # truncated
             DIALECT.encode_message(other),                # another cluster
             b"hello, not a datagram"]
            + [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 300))) for _ in range(10)])


def test_hostile_frames_are_counted_and_dropped(cluster, broker):
    import stomp
    drops = ("dropped_version", "dropped_malformed", "dropped_other_cluster", "dropped_bad_frames")
    before = {m.name: jms_stats(m) for m in cluster.members}
    topic = default_topic(cluster.name)
    target = cluster.members[0]
    bodies = _hostile_bodies(cluster.name)
    conn = stomp.Connection12([("127.0.0.1", broker.port)], auto_decode=False)
    conn.connect(wait=True)
    try:
        for dest in (f"/topic/{topic}", f"/topic/{unicast_topic(topic, from_json(target.node.physical))}"):
            for body in bodies:
                conn.send(dest, body, headers={"content-length": str(len(body))})
            conn.send(dest, b"")                              # no body
            conn.send(dest, b"\x13\x02" + bytes(1_100_000))   # above max_frame_size
    finally:
        conn.disconnect()
    per_topic = len(bodies) + 2

    def dropped(m) -> int:
        s = jms_stats(m)
        return sum(s[k] - before[m.name][k] for k in drops)
    # every hostile frame is counted once: the cluster's topic reaches everybody, the member's own only it
    assert wait_all(lambda: dropped(target) >= 2 * per_topic
                    and all(dropped(m) >= per_topic for m in cluster.members[1:]), 30), \
        {m.name: dropped(m) for m in cluster.members}
    for m in cluster.members:
        s, b = jms_stats(m), before[m.name]
        assert dropped(m) == (2 if m is target else 1) * per_topic, (m.name, s)
        assert s["dropped_bad_frames"] - b["dropped_bad_frames"] == (4 if m is target else 2), s
        assert s["dropped_other_cluster"] - b["dropped_other_cluster"] == (2 if m is target else 1), s
        assert s["dropped_version"] > b["dropped_version"] and s["dropped_malformed"] > b["dropped_malformed"], s
        assert s["up_errors"] == b["up_errors"], s
    send_round(cluster, 100, 20)                          # the cluster goes on as before
    assert_all_delivered(cluster)
    assert all(m.view_names() == NAMES for m in cluster.members)


def test_killed_member_is_detected_and_leaves_the_view(cluster):
    victim = cluster.members[2]
    victim.kill()
    rest = cluster.members[:2]
    for m in rest:
        assert m.wait_view(NAMES[:2], 45), f"{m.name}: {m.view_names()}"
    send_round(cluster, 100, 0, members=rest)            # the survivors go on: FIFO, nothing lost
    expected = {x.name: cluster.sent[x.name] for x in rest}
    for m in rest:
        m.view_names()                                    # takes in the member's events so far
        from_victim = len(m.received.by_sender.get(victim.name, []))
        assert m.wait_received(sum(expected.values()) + from_victim, timeout=60), m.received.count()
        assert not check_fifo({n: m.received.by_sender.get(n, []) for n in expected}, expected), m.name


def test_outage_longer_than_fd_all_splits_and_merges_back(broker):
    """Last (it kills the module's broker once more): an outage that outlasts FD_ALL's timeout makes every member
    a cluster of its own; once the broker is back the links reconnect and MERGE2 merges them into one view."""
    config = (jms_config(broker.url).with_properties("FD_ALL", timeout="2000", interval="500")
              .with_properties("VERIFY_SUSPECT", timeout="500")
              .with_properties("MERGE2", min_interval="1000", max_interval="3000"))
    name = f"jms-{uuid.uuid4().hex[:8]}"
    members = [make_member("P", n, config, {}) for n in ("X", "Y")]
    try:
        for m in members:
            m.connect(name)
        assert all(m.wait_view(["X", "Y"], 20) for m in members)
        broker.kill()
        assert members[0].wait_view(["X"], 20) and members[1].wait_view(["Y"], 20)
        broker.start()
        assert wait_all(lambda: all(sorted(m.view_names()) == ["X", "Y"] for m in members), 45), \
            [m.view_names() for m in members]
        for m in members:
            m.send_numbered(100)
        for m in members:
            assert m.wait_received(200, timeout=30), m.received.count()
            assert not check_fifo(m.received.by_sender, {"X": 100, "Y": 100}), m.name
    finally:
        for m in members:
            m.close()


def test_a_broker_whose_port_is_taken_before_it_binds_moves_to_another(tmp_path):
    """The broker is up once its own process listens on its port, not once anything accepts there: a CI run met a
    port chosen free and taken by another test before the broker bound it (the broker exited, the other listener
    answered, and every member then failed to reach the broker). Its first start moves to a fresh port."""
    require(unavailable_reason())
    b = ActiveMQBroker(tmp_path / "activemq")
    taken = b.port
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        assert listens_on(os.getpid(), taken)
        b.start()
        try:
            assert b.port != taken
            assert b.proc is not None and listens_on(b.proc.pid, b.port)
            assert not listens_on(b.proc.pid, taken)
            assert b.url == f"stomp://127.0.0.1:{b.port}"
        finally:
            b.stop()
