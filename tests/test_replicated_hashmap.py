"""ReplicatedHashMap shared by jgpy and Java 2.12.2 members (interop/src/org/jgpy/interop/MapNode.java): every
change everywhere, state transfer to joiners, a leave and a crash."""

from __future__ import annotations

import uuid

import pytest

from jgpy import Channel
from jgpy.blocks.replicated_hashmap import ReplicatedHashMap
from jgpy.testing.cluster import IN_PROCESS, wait_all
from jgpy.testing.java import udp_props, unique_group
from jgpy.testing.rpcnode import JavaMapNode
from tests.conftest import require_java

pytestmark = pytest.mark.timeout(240)


class Events:
    def __init__(self):
        self.log = []

    def entry_set(self, k, v):
        self.log.append(("set", k, v))

    def entry_removed(self, k):
        self.log.append(("removed", k))

    def contents_cleared(self):
        self.log.append(("cleared",))

    def view_change(self, view, joined, left):
        self.log.append(("view", [str(m) for m in joined], [str(m) for m in left]))


def _described(m: dict) -> list[str]:
    """Our map as MapNode's dump describes Java's (String and Integer keys and values only)."""
    def d(v):
        return f"String({v})" if isinstance(v, str) else f"Integer({v})"
    return sorted(f"{d(k)}={d(v)}" for k, v in m.items())


def test_jgpy_members_replicate_and_a_joiner_gets_the_state():
    cluster = f"rhm-{uuid.uuid4().hex[:8]}"
    with Channel(IN_PROCESS, "A") as a, Channel(IN_PROCESS, "B") as b, Channel(IN_PROCESS, "C") as c:
        a.connect(cluster)
        ma = ReplicatedHashMap(a, blocking_updates=True)
        assert ma.start(3000) is False                             # the first member: no state
        ma["alone"] = 1                                            # applied locally
        b.connect(cluster)
        mb = ReplicatedHashMap(b, blocking_updates=True)
        assert mb.start(10000) and mb.snapshot() == {"alone": 1}
        assert wait_all(lambda: len(a.view) == 2 and len(ma._members) == 2, 10)
        ev = Events()
        mb.add_notifier(ev)
        ma.put("k", [1, {"x": 2.5}])
        ma.put_all({"p": 1, "q": 2})
        assert ma.put_if_absent("p", 9) == 1
        assert ma.replace("q", 2, 3) is True and ma.replace("zz", 1) is None
        assert ma.remove("alone") == 1
        assert ma.remove("p", 2) is False
        want = {"k": [1, {"x": 2.5}], "p": 1, "q": 3}
        assert wait_all(lambda: mb.snapshot() == want and ma.snapshot() == want, 10)
        assert ("removed", "alone") in ev.log and ("set", "q", 3) in ev.log
        c.connect(cluster)
        mc = ReplicatedHashMap(c)
        assert mc.start(10000) and mc.snapshot() == want
        assert wait_all(lambda: any(e[0] == "view" and e[1] == ["C"] for e in ev.log), 10)
        mc["from-c"] = "async"                                      # GET_NONE: returns at once
        assert wait_all(lambda: ma.get("from-c") == "async" and mb.get("from-c") == "async", 10)
        mb.clear()
        assert wait_all(lambda: not ma and not mb and not mc, 10)


@pytest.mark.interop
def test_mixed_java_and_jgpy_members_share_one_map_through_joins_a_leave_and_a_crash():
    require_java()
    props = udp_props(*unique_group())
    cluster = f"rhmx-{uuid.uuid4().hex[:8]}"
    j1 = JavaMapNode("J1", props)
    j2 = None
    p1 = Channel("udp.xml", "P1", props)
    p2 = None
    try:
        j1.connect_map(cluster, blocking=True)
        j1.call("put", key=["String", "from-java"], value=["int", 1])
        p1.connect(cluster)
        m1 = ReplicatedHashMap(p1, blocking_updates=True)
        assert m1.start(10000)                                     # the state of a Java member
        assert m1.snapshot() == {"from-java": 1}
        m1["from-jgpy"] = "x"
        m1.put("n", 2)
        assert wait_all(lambda: j1.entries() == _described(m1.snapshot()), 10), (j1.entries(), m1.snapshot())
        j1.call("remove", key=["String", "n"])
        j1.call("putAll", entries=[[["String", "a"], ["int", 10]], [["String", "b"], ["int", 11]]])
        assert wait_all(lambda: m1.snapshot() == {"from-java": 1, "from-jgpy": "x", "a": 10, "b": 11}, 10)
        # joiners of both kinds take the state from the coordinator (J1)
        j2 = JavaMapNode("J2", props)
        j2.connect_map(cluster, blocking=True)
        assert j2.entries() == _described(m1.snapshot())
        p2 = Channel("udp.xml", "P2", props)
        p2.connect(cluster)
        m2 = ReplicatedHashMap(p2, blocking_updates=True)
        assert m2.start(10000) and m2.snapshot() == m1.snapshot()
        # a leave (the Java coordinator): the jgpy member P1 becomes coordinator and serves the next joiner
        j1.close()
        assert wait_all(lambda: len(p1.view) == 3, 30)
        m2["after-leave"] = 5
        assert wait_all(lambda: m1.get("after-leave") == 5, 10)
        # a crash: kill -9 J2 in the middle of updates
        j2.kill()
        for i in range(20):
            m1[f"k{i}"] = i
        assert wait_all(lambda: len(p1.view) == 2, 60)
        assert wait_all(lambda: m1.snapshot() == m2.snapshot(), 10)
        j3 = JavaMapNode("J3", props)
        try:
            j3.connect_map(cluster, blocking=True)               # state from the jgpy coordinator P1
            assert j3.entries() == _described(m1.snapshot())
            j3.call("put", key=["String", "last"], value=["String", "word"])
            assert wait_all(lambda: m1.get("last") == "word" and m2.get("last") == "word", 10)
        finally:
            j3.close()
    finally:
        j1.close()
        if j2 is not None:
            j2.close()
        if p2 is not None:
            p2.close()
        p1.close()
