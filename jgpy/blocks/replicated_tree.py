"""``org.jgroups.blocks.ReplicatedTree`` (2.12): a tree of named nodes, each with a map of data, replicated to
every member.

Wire-compatible with the Java class, so Java and jgpy members share one tree. Nodes are named by their fully
qualified name (``"/a/b/c"``; empty path elements are skipped, as Java's StringTokenizer does). A change is
multicast as ``Util.objectToByteBuffer`` of a ``ReplicatedTree$Request`` (Java serialization: ``int type``
(PUT 1, REMOVE 2), ``String fqn``, ``String key``, ``Object value``, ``HashMap data``) and applied by every
member when it is delivered, the sender too; a member alone applies it at once, as Java's does. The tree is
the channel's receiver (Java's is). A joiner gets the tree with the channel's state transfer (made when the
tree is, as Java's constructor does, or with :meth:`fetch_state`): the state is the root ``ReplicatedTree$Node``
(``name``, ``fqn``, ``parent``, ``TreeMap children``, ``Map data``), so data keys are strings and values what
:mod:`jgpy.javaser_write` can write (and a Java member load).

Listeners (Java's ``ReplicatedTreeListener``): objects with ``node_added(fqn)``, ``node_removed(fqn)``,
``node_modified(fqn)`` and ``view_change(view)``, each optional, called on the delivery thread.

Where jgpy deviates: the tree knows the channel's view when it is made (2.12's ``ReplicatedTree(JChannel)``
becomes the receiver after the view came, so until the next view it believes it is alone and keeps its changes
to itself); a message from a sender outside the view, or one that is not a Request, is counted and
dropped (Java applies anything from anybody; a stranger could grow every member's tree); a state whose nodes
repeat (a cycle) takes each node once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.blocks.correlator import marshal_value, unmarshal_value
from jgpy.blocks.replicated_hashmap import Notifiers, StateReceiver, decode_state, encode_state
from jgpy.channel import Channel, Receiver
from jgpy.javaser import JavaObject as ReadObject
from jgpy.javaser_values import to_python
from jgpy.javaser_write import JavaClassDesc, JavaMap
from jgpy.stack.logutil import RateLimitedLog

log = logging.getLogger(__name__)

SEPARATOR = "/"
PUT, REMOVE = 1, 2
REQUEST_CLASS = "org.jgroups.blocks.ReplicatedTree$Request"
NODE_CLASS = "org.jgroups.blocks.ReplicatedTree$Node"
_REQUEST_DESC = JavaClassDesc(REQUEST_CLASS, 7772753222127676782, fields=(
    ("I", "type", None), ("L", "data", "Ljava/util/HashMap;"), ("L", "fqn", "Ljava/lang/String;"),
    ("L", "key", "Ljava/lang/String;"), ("L", "value", "Ljava/lang/Object;")))
_NODE_DESC = JavaClassDesc(NODE_CLASS, -3077676554440038890, fields=(
    ("L", "children", "Ljava/util/TreeMap;"), ("L", "data", "Ljava/util/Map;"), ("L", "fqn", "Ljava/lang/String;"),
    ("L", "name", "Ljava/lang/String;"), ("L", "parent", "Lorg/jgroups/blocks/ReplicatedTree$Node;")))


class TreeRequest:
    """``ReplicatedTree$Request``: one change."""

    JAVA_DESC = _REQUEST_DESC

    def __init__(self, type_: int, fqn: str | None, key: str | None = None, value: Any = None,
                 data: dict[str, Any] | None = None) -> None:
        self.type, self.fqn, self.key, self.value, self.data = type_, fqn, key, value, data

    def serial_fields(self) -> tuple[Any, ...]:
        return (self.type, self.data, self.fqn, self.key, self.value)


class Node:
    """``ReplicatedTree$Node``: a name, its fully qualified name, its children by name, its data (None until
    some is set, as Java's)."""

    JAVA_DESC = _NODE_DESC

    def __init__(self, name: str, fqn: str, parent: Node | None = None, data: dict[str, Any] | None = None) -> None:
        self.name = name
        self.fqn = fqn
        self.parent = parent
        self.children: dict[str, Node] | None = None
        self.data: dict[str, Any] | None = dict(data) if data is not None else None

    def serial_fields(self) -> tuple[Any, ...]:
        children = JavaMap("java.util.TreeMap", self.children) if self.children is not None else None
        return (children, self.data, self.fqn, self.name, self.parent)

    def set_data(self, data: dict[str, Any] | None) -> None:
        if data is not None:
            self.data = {**(self.data or {}), **data}

    def set_value(self, key: str, value: Any) -> None:
        if self.data is None:
            self.data = {}
        self.data[key] = value

    def child(self, name: str) -> Node | None:
        return self.children.get(name) if self.children is not None else None

    def create_child(self, name: str, fqn: str, parent: Node | None, data: dict[str, Any] | None) -> Node:
        """Java's createChild: an existing child gets ``data`` merged in."""
        if self.children is None:
            self.children = {}
        child = self.children.get(name)
        if child is not None:
            child.set_data(data)
        else:
            child = self.children[name] = Node(name, fqn, parent, data)
        return child

    def print(self, out: list[str], indent: int) -> None:
        out.append(" " * indent + SEPARATOR + self.name)
        for name in sorted(self.children or ()):
            self.children[name].print(out, indent + 4)    # type: ignore[index]


def _path(fqn: str) -> list[str]:
    return [p for p in fqn.split(SEPARATOR) if p]


class _TreeReceiver(StateReceiver):
    def receive(self, msg: Any) -> None:
        self.owner._receive(msg)


class ReplicatedTree:
    """A replicated tree over the connected ``channel``: fetches the tree from the coordinator at once (Java's
    ``ReplicatedTree(JChannel)``), ``state_timeout`` ms at most."""

    def __init__(self, channel: Channel, receiver: Receiver | None = None, state_timeout: int = 10000) -> None:
        self.channel = channel
        self.root = Node(SEPARATOR, SEPARATOR)
        self._lock = threading.RLock()
        self._listeners = Notifiers("ReplicatedTree")
        self.members: list[Address] = list(channel.view.members or ()) if channel.view is not None else []
        self._rl = RateLimitedLog(log)
        #: messages dropped: not a Request, or from a sender outside the view
        self.dropped = 0
        self._receiver = _TreeReceiver(self, receiver if receiver is not None else channel.receiver)
        channel.receiver = self._receiver
        self.fetch_state(state_timeout)

    def fetch_state(self, timeout: int = 10000) -> bool:
        """The tree from the coordinator (state transfer); False when this member is the first."""
        return self._receiver.fetch_state(self.channel, timeout)

    def add_listener(self, listener: Any) -> None:
        self._listeners.add(listener)

    def remove_listener(self, listener: Any) -> None:
        self._listeners.remove(listener)

    # ---- changes

    def _replicated(self) -> bool:
        return len(self.members) > 1

    def _send(self, req: TreeRequest) -> None:
        self.channel.send(Message(None, marshal_value(req, self.channel.stack.dialect)))

    def put(self, fqn: str, data: dict[str, Any] | None = None) -> None:
        """Create the node ``fqn`` (and its parents) where missing, and merge ``data`` into its data."""
        if self._replicated():
            self._send(TreeRequest(PUT, fqn, data=dict(data) if data is not None else None))
        else:
            self._put(fqn, data)

    def put_value(self, fqn: str, key: str, value: Any) -> None:
        """Set ``key`` to ``value`` in the data of node ``fqn`` (created where missing)."""
        if self._replicated():
            self._send(TreeRequest(PUT, fqn, key, value))
        else:
            self._put_value(fqn, key, value)

    def remove(self, fqn: str, key: str | None = None) -> None:
        """Remove the node ``fqn`` and its subtree ("/": every node), or only ``key`` from its data."""
        if self._replicated():
            self._send(TreeRequest(REMOVE, fqn, key))
        elif key is not None:
            self._remove_key(fqn, key)
        else:
            self._remove(fqn)

    # ---- reads (local)

    def exists(self, fqn: str) -> bool:
        return fqn is not None and self._find(fqn) is not None

    def get(self, fqn: str, key: str) -> Any:
        with self._lock:
            n = self._find(fqn)
            return n.data.get(key) if n is not None and n.data is not None else None

    def get_data(self, fqn: str) -> dict[str, Any] | None:
        """A copy of the node's data (None: no such node, or no data yet)."""
        with self._lock:
            n = self._find(fqn)
            return dict(n.data) if n is not None and n.data is not None else None

    def get_keys(self, fqn: str) -> set[str] | None:
        data = self.get_data(fqn)
        return set(data) if data is not None else None

    def get_children_names(self, fqn: str) -> set[str] | None:
        with self._lock:
            n = self._find(fqn)
            return set(n.children) if n is not None and n.children is not None else None

    def __str__(self) -> str:
        with self._lock:
            if not self.root.children:
                return SEPARATOR
            out: list[str] = []
            for name in sorted(self.root.children):
                self.root.children[name].print(out, 0)
            return "\n".join(out) + "\n"

    # ---- navigation

    def _find_parent(self, fqn: str, create: bool) -> tuple[Node | None, str | None]:
        """Java's findParentNode: the node above ``fqn`` and the last name (None for the root)."""
        parts = _path(fqn) if fqn else []
        curr = self.root
        for i, name in enumerate(parts[:-1]):
            node = curr.child(name)
            if node is None and create:
                node = curr.create_child(name, SEPARATOR + SEPARATOR.join(parts[:i + 1]), None, None)
            if node is None:
                return None, None
            curr = node
        return curr, (parts[-1] if parts else None)

    def _find(self, fqn: str) -> Node | None:
        parent, name = self._find_parent(fqn, False)
        if name is None:
            return self.root if fqn in (SEPARATOR, "") else None
        return parent.child(name) if parent is not None else None

    # ---- what a change does on every member (Java's _put, _remove, ...)

    def _put(self, fqn: str | None, data: dict[str, Any] | None) -> None:
        if fqn is not None:
            self._apply_put(fqn, lambda n: n.set_data(data))

    def _put_value(self, fqn: str | None, key: str | None, value: Any) -> None:
        if fqn is not None and key is not None and value is not None:
            self._apply_put(fqn, lambda n: n.set_value(key, value))

    def _apply_put(self, fqn: str, change: Callable[[Node], None]) -> None:
        """The node ``fqn`` made where missing (its parents too), then ``change``d; the listeners told."""
        with self._lock:
            n, name = self._find_parent(fqn, True)
            assert n is not None
            existed = name is None or n.child(name) is not None
            change(n.create_child(name, fqn, n, None) if name is not None else n)
        self._listeners.notify("node_modified" if existed else "node_added", fqn)

    def _remove(self, fqn: str | None) -> None:
        if fqn is None:
            return
        with self._lock:
            if fqn == SEPARATOR:
                if self.root.children is not None:
                    self.root.children.clear()
            else:
                n, name = self._find_parent(fqn, False)
                if n is None:
                    return
                if name is not None and n.children is not None:
                    n.children.pop(name, None)
        self._listeners.notify("node_removed", fqn)

    def _remove_key(self, fqn: str | None, key: str | None) -> None:
        if fqn is None or key is None:
            return
        with self._lock:
            n = self._find(fqn)
            if n is not None and n.data is not None:
                n.data.pop(key, None)

    # ---- the receiver's callbacks

    def _drop(self, why: str) -> None:
        self.dropped += 1
        self._rl.warning(why, "ReplicatedTree: dropped a message (%s; %d so far)", why, self.dropped)

    def _receive(self, msg: Message) -> None:
        if msg.payload is None or len(msg.payload) == 0:
            return
        if msg.src not in self.members:
            self._drop("sender not in the view")
            return
        try:
            obj = unmarshal_value(memoryview(msg.payload), self.channel.stack.dialect)
        except Exception:  # noqa: BLE001 - anything unreadable is dropped alone
            self._drop("unreadable")
            return
        if not isinstance(obj, ReadObject) or obj.class_name != REQUEST_CLASS:
            self._drop("not a ReplicatedTree$Request")
            return
        f = obj.fields.get(REQUEST_CLASS, {})
        fqn, key = f.get("fqn"), f.get("key")
        if not isinstance(fqn, (str, type(None))) or not isinstance(key, (str, type(None))):
            self._drop("not a ReplicatedTree$Request")
            return
        value, data = to_python(f.get("value")), to_python(f.get("data"))
        if f.get("type") == PUT:
            if key is not None and value is not None:
                self._put_value(fqn, key, value)
            else:
                self._put(fqn, data if isinstance(data, dict) else None)
        elif f.get("type") == REMOVE:
            if key is not None:
                self._remove_key(fqn, key)
            else:
                self._remove(fqn)

    def _view(self, view: View) -> None:
        if view.members:
            self._listeners.notify("view_change", view)
            self.members = list(view.members)

    def _get_state(self) -> bytes | None:
        with self._lock:
            return encode_state(self.root, self.channel, "ReplicatedTree's tree")

    def _set_state(self, state: bytes) -> None:
        root = _node_of(decode_state(state, self.channel, "ReplicatedTree"), None, set())
        if root is None:
            return
        with self._lock:
            self.root = root
        self._notify_all_added(root)

    def _notify_all_added(self, node: Node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            self._listeners.notify("node_added", n.fqn)
            stack.extend(n.children[k] for k in sorted(n.children or (), reverse=True))  # type: ignore[index]


def _node_of(obj: Any, parent: Node | None, seen: set[int]) -> Node | None:
    """Our Node from a read ``ReplicatedTree$Node`` (its subtree; each node once)."""
    if not isinstance(obj, ReadObject) or obj.class_name != NODE_CLASS or id(obj) in seen:
        return None
    seen.add(id(obj))
    f = obj.fields.get(NODE_CLASS, {})
    name, fqn = f.get("name"), f.get("fqn")
    data = to_python(f.get("data"))
    node = Node(name if isinstance(name, str) else "", fqn if isinstance(fqn, str) else "", parent,
                data if isinstance(data, dict) else None)
    children = to_python(f.get("children"))
    if isinstance(children, dict):
        node.children = {}
        for k, v in children.items():
            child = _node_of(v, node, seen)
            if isinstance(k, str) and child is not None:
                node.children[k] = child
    return node


__all__ = ["Node", "ReplicatedTree", "TreeRequest"]
