"""DistributedQueue shared by jgpy and Java 2.12.2 members (interop/src/org/jgpy/interop/QueueNode.java): every
change at every member, remove() taking the head everywhere, state transfer (a java.util.Vector) to joiners of
either kind, a leave."""

from __future__ import annotations

import threading

import pytest

from jgpy import Channel
from jgpy.blocks import DistributedQueue
from jgpy.testing.cluster import IN_PROCESS, wait_all
from jgpy.testing.rpcnode import JavaQueueNode
from tests.conftest import require_java

pytestmark = pytest.mark.timeout(240)


class Events:
    def __init__(self) -> None:
        self.log: list[tuple] = []

    def entry_add(self, v):
        self.log.append(("add", v))

    def entry_removed(self, v):
        self.log.append(("removed", v))

    def contents_cleared(self):
        self.log.append(("cleared",))

    def contents_set(self, values):
        self.log.append(("set", list(values)))

    def view_change(self, joined, left):
        self.log.append(("view", [str(m) for m in joined], [str(m) for m in left]))


def described(values: list) -> list[str]:
    """Our elements as QueueNode's dump describes Java's (String and Integer only)."""
    return [f"String({v})" if isinstance(v, str) else f"Integer({v})" for v in values]


def test_jgpy_members_share_a_queue_and_a_joiner_gets_the_state(udp_group):
    _, cluster, _ = udp_group
    with Channel(IN_PROCESS, "A") as a, Channel(IN_PROCESS, "B") as b:
        a.connect(cluster)
        qa = DistributedQueue(a)
        assert qa.start(3000) is False                             # the first member: no state
        qa.add("one")
        qa.add_all([2, "three"])
        b.connect(cluster)
        qb = DistributedQueue(b)
        assert qb.start(10000) and qb.contents() == ["one", 2, "three"]
        assert wait_all(lambda: len(qa._members) == 2, 10)
        ev = Events()
        qb.add_notifier(ev)
        qa.add_at_head({"k": [1, 2.5]})
        assert qb.contents() == qa.contents() == [{"k": [1, 2.5]}, "one", 2, "three"]
        assert qb.peek() == {"k": [1, 2.5]} and qb.size() == 4
        assert qb.remove() == {"k": [1, 2.5]}                     # the head, taken at both
        assert qa.contents() == qb.contents() == ["one", 2, "three"]
        qa.reset()
        assert qa.contents() == qb.contents() == [] and qb.remove() is None
        assert qb.remove(0.3) is None                               # waited, nothing came

        got: list = []
        taker = threading.Thread(target=lambda: got.append(qb.remove(20.0)))
        taker.start()
        qa.add("late")                                              # wakes the waiting remove
        taker.join(30)
        assert not taker.is_alive() and got == ["late"] and qa.contents() == []
        assert ev.log[:4] == [("add", {"k": [1, 2.5]}), ("removed", {"k": [1, 2.5]}), ("cleared",), ("add", "late")]
        qb.stop()
        qa.stop()


@pytest.mark.interop
def test_java_and_jgpy_members_share_a_queue_through_joins_state_and_a_leave(udp_group):
    require_java()
    props, cluster, _ = udp_group
    j1 = JavaQueueNode("J1", props)
    j2 = None
    try:
        j1.connect_queue(cluster)                                   # the coordinator: no state
        j1.call("add", value=["String", "java-1"])
        j1.call("addAll", values=[["Integer", 2], ["String", "java-3"]])
        with Channel("udp.xml", "P1", props) as p1:
            p1.connect(cluster)
            q1 = DistributedQueue(p1)
            assert q1.start(10000)                                  # Java's Vector, read here
            assert q1.contents() == ["java-1", 2, "java-3"]
            q1.add("py-4")                                          # our calls, run by Java's queue
            q1.add_at_head(0)
            assert j1.elements() == described(q1.contents()) == described([0, "java-1", 2, "java-3", "py-4"])
            assert j1.call("remove")["value"] == "Integer(0)"       # Java's remove takes our head too
            assert q1.contents() == ["java-1", 2, "java-3", "py-4"]
            assert q1.remove() == "java-1"
            assert j1.elements() == described([2, "java-3", "py-4"])

            j2 = JavaQueueNode("J2", props)                         # a Java joiner: state from J1
            j2.connect_queue(cluster)
            assert wait_all(lambda: len(q1._members) == 3, 20)
            assert j2.elements() == described([2, "java-3", "py-4"])
            q1.add_all(["py-5", 6])
            assert j1.elements() == j2.elements() == described([2, "java-3", "py-4", "py-5", 6])
            q1.stop()
        assert j2.call("remove")["value"] == "Integer(2)"           # P1 left: the Java members go on
        assert j1.elements() == j2.elements() == described(["java-3", "py-4", "py-5", 6])

        with Channel("udp.xml", "P3", props) as p3:                 # a jgpy joiner after the leave
            p3.connect(cluster)
            q3 = DistributedQueue(p3)
            assert q3.start(10000) and q3.contents() == ["java-3", "py-4", "py-5", 6]
            q3.reset()
            assert j1.elements() == j2.elements() == [] and q3.contents() == []
            q3.stop()
    finally:
        if j2 is not None:
            j2.close()
        j1.close()


@pytest.mark.interop
def test_a_java_joiner_reads_a_jgpy_coordinators_state(udp_group):
    require_java()
    props, cluster, _ = udp_group
    with Channel("udp.xml", "P0", props) as p0:
        p0.connect(cluster)
        q0 = DistributedQueue(p0)
        assert q0.start(3000) is False
        q0.add_all(["a", 1, "b"])
        j = JavaQueueNode("J1", props)
        try:
            j.connect_queue(cluster)                                # our Vector, read by Java
            assert j.elements() == described(["a", 1, "b"])
            j.call("addAtHead", value=["String", "z"])
            assert q0.contents() == ["z", "a", 1, "b"]
        finally:
            j.close()
        assert wait_all(lambda: len(q0._members) == 1, 20)
        assert q0.remove() == "z" and q0.contents() == ["a", 1, "b"]
        q0.stop()
