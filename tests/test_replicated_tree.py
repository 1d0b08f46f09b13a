"""ReplicatedTree shared by jgpy and Java 2.12.2 members (interop/src/org/jgpy/interop/TreeNode.java): changes
from either kind at every member, the tree (a graph of ReplicatedTree$Node) to joiners of either kind, a leave;
strangers' and unreadable messages dropped."""

from __future__ import annotations


import pytest

from jgpy import Channel
from jgpy._core.message import Message
from jgpy.blocks import ReplicatedTree
from jgpy.blocks.correlator import marshal_value
from jgpy.blocks.replicated_tree import PUT, TreeRequest
from jgpy.testing.cluster import IN_PROCESS, wait_all
from jgpy.testing.rpcnode import JavaTreeNode
from tests.conftest import require_java

pytestmark = pytest.mark.timeout(240)


class Events:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []

    def node_added(self, fqn):
        self.log.append(("added", fqn))

    def node_removed(self, fqn):
        self.log.append(("removed", fqn))

    def node_modified(self, fqn):
        self.log.append(("modified", fqn))


def nodes(tree: ReplicatedTree, fqn: str = "/") -> list[str]:
    """Our tree as TreeNode's dump describes Java's (String and Integer values only)."""
    def d(v):
        return f"String({v})" if isinstance(v, str) else f"Integer({v})"
    out: list[str] = []
    for name in sorted(tree.get_children_names(fqn) or ()):
        child = ("" if fqn == "/" else fqn) + "/" + name
        data = tree.get_data(child) or {}
        out.append(child + "{" + ",".join(sorted(f"{d(k)}={d(v)}" for k, v in data.items())) + "}")
        out.extend(nodes(tree, child))
    return out


def test_a_tree_alone_and_its_navigation(udp_group):
    _, cluster, _ = udp_group
    with Channel(IN_PROCESS, "A") as a:
        a.connect(cluster)
        t = ReplicatedTree(a, state_timeout=2000)
        ev = Events()
        t.add_listener(ev)
        t.put("/a/b/c")
        t.put("/a/b/c", {"name": "Bela", "age": 36})
        t.put_value("/a/b/c", "age", 37)
        t.put_value("//a//b1/", "k", "v")                       # empty path elements are skipped
        t.put("/", {"root": 1})
        assert str(t) == "/a\n    /b\n        /c\n    /b1\n"
        assert t.get_data("/a/b/c") == {"name": "Bela", "age": 37} and t.get("/a/b1", "k") == "v"
        assert t.get_keys("/a/b") is None and t.get_children_names("/a") == {"b", "b1"}
        assert t.exists("/a/b") and not t.exists("/x") and t.get_data("/") == {"root": 1}
        t.remove("/a/b/c", "name")
        assert t.get_data("/a/b/c") == {"age": 37}
        t.remove("/a/b")
        assert not t.exists("/a/b/c") and nodes(t) == ["/a{}", "/a/b1{String(k)=String(v)}"]
        t.remove("/")
        assert str(t) == "/"
        assert ev.log == [("added", "/a/b/c"), ("modified", "/a/b/c"), ("modified", "/a/b/c"),
                          ("added", "//a//b1/"), ("modified", "/"), ("removed", "/a/b"), ("removed", "/")]


def test_strangers_and_unreadable_messages_are_dropped(udp_group):
    _, cluster, _ = udp_group
    with Channel(IN_PROCESS, "A") as a, Channel(IN_PROCESS, "B") as b:
        a.connect(cluster)
        ta = ReplicatedTree(a, state_timeout=2000)
        b.connect(cluster)
        tb = ReplicatedTree(b)
        assert wait_all(lambda: len(ta.members) == 2, 10)
        b.send(Message(None, marshal_value("not a request", b.stack.dialect)))
        b.send(Message(None, b"\x02garbage"))
        tb.put_value("/ok", "k", 1)
        assert wait_all(lambda: ta.exists("/ok"), 10)
        assert ta.dropped == 2 and tb.dropped == 2
        stranger = Message(None, marshal_value(TreeRequest(PUT, "/evil", "k", 1), a.stack.dialect))
                                                                    # (no sender: not a member)
        ta._receive(stranger)
        assert ta.dropped == 3 and not ta.exists("/evil")


@pytest.mark.interop
def test_java_and_jgpy_members_share_a_tree_through_joins_state_and_a_leave(udp_group):
    require_java()
    props, cluster, _ = udp_group
    j1 = JavaTreeNode("J1", props)
    j2 = None
    try:
        j1.connect_tree(cluster)                                    # the coordinator: no state
        j1.call("putData", fqn="/a/b/c", data={"name": ["String", "Bela"], "age": ["Integer", 36]})
        j1.call("put", fqn="/a/b1", key="k", value=["String", "v"])
        j1.call("putData", fqn="/x")
        with Channel("udp.xml", "P1", props) as p1:
            p1.connect(cluster)
            t1 = ReplicatedTree(p1)                                 # Java's node graph, read here
            ev = Events()
            assert nodes(t1) == j1.nodes() == ["/a{}", "/a/b{}", "/a/b/c{String(age)=Integer(36),String(name)=String(Bela)}",
                                               "/a/b1{String(k)=String(v)}", "/x{}"]
            assert wait_all(lambda: len(t1.members) == 2, 10)
            t1.add_listener(ev)
            t1.put_value("/a/b/c", "age", 37)                       # ours, applied by Java and by us
            t1.put("/p/q", {"n": 1})
            t1.remove("/a/b1")
            assert wait_all(lambda: j1.nodes() == nodes(t1) == [
                "/a{}", "/a/b{}", "/a/b/c{String(age)=Integer(37),String(name)=String(Bela)}", "/p{}",
                "/p/q{String(n)=Integer(1)}", "/x{}"], 20)
            j1.call("remove", fqn="/a/b/c", key="name")            # Java's, applied here
            j1.call("put", fqn="/x", key="y", value=["Integer", 5])
            assert wait_all(lambda: t1.get_data("/a/b/c") == {"age": 37} and t1.get("/x", "y") == 5, 20)
            assert ("modified", "/a/b/c") in ev.log and ("removed", "/a/b1") in ev.log

            j2 = JavaTreeNode("J2", props)                          # a Java joiner: state from J1
            j2.connect_tree(cluster)
            assert wait_all(lambda: len(t1.members) == 3, 20)
            assert j2.nodes() == j1.nodes() == nodes(t1)
            t1.put_value("/p/q", "m", "py")
            assert wait_all(lambda: j2.nodes() == j1.nodes() == nodes(t1) and t1.get("/p/q", "m") == "py", 20)
        j2.call("remove", fqn="/p")                                 # P1 left: the Java members go on
        assert wait_all(lambda: j1.nodes() == j2.nodes() == ["/a{}", "/a/b{}", "/a/b/c{String(age)=Integer(37)}",
                                                             "/x{String(y)=Integer(5)}"], 20)
        with Channel("udp.xml", "P3", props) as p3:                 # a jgpy joiner after the leave
            p3.connect(cluster)
            t3 = ReplicatedTree(p3)
            assert nodes(t3) == j1.nodes()
    finally:
        if j2 is not None:
            j2.close()
        j1.close()


@pytest.mark.interop
def test_a_java_joiner_reads_a_jgpy_coordinators_tree(udp_group):
    require_java()
    props, cluster, _ = udp_group
    with Channel("udp.xml", "P0", props) as p0:
        p0.connect(cluster)
        t0 = ReplicatedTree(p0, state_timeout=3000)
        t0.put("/a/b", {"s": "x", "i": 3})
        t0.put_value("/a/c", "k", "v")
        t0.put("/z")
        j = JavaTreeNode("J1", props)
        try:
            j.connect_tree(cluster)                                 # our node graph, read by Java
            assert j.nodes() == nodes(t0) == ["/a{}", "/a/b{String(i)=Integer(3),String(s)=String(x)}",
                                              "/a/c{String(k)=String(v)}", "/z{}"]
            assert wait_all(lambda: len(t0.members) == 2, 10)
            j.call("putData", fqn="/a/b", data={"s": ["String", "java"]})
            assert wait_all(lambda: t0.get("/a/b", "s") == "java", 20)
        finally:
            j.close()
