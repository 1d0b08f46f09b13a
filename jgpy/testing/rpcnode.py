"""A Java 2.12.2 RpcDispatcher member (``interop/src/org/jgpy/interop/RpcNode.java``) driven by JSON lines, for
the RPC interop tests and benchmarks."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Sequence

from jgpy.testing.java import JGROUPS_JAR, REPO_ROOT, HarnessNode, ensure_compiled, interop_classes_dir, java_debug_args


class JavaRpcNode(HarnessNode):
    """One JVM with a ``TypedServer`` behind an RpcDispatcher; ``props`` become -D options (the group)."""

    KIND = "java-rpc"

    def __init__(self, name: str, props: Mapping[str, str], start_timeout: float = 30.0) -> None:
        self.props = dict(props)
        ensure_compiled()
        super().__init__(name, start_timeout)

    def command(self) -> list[str]:
        cp = os.pathsep.join([str(interop_classes_dir()), str(JGROUPS_JAR)])
        return ["java", "-Djava.net.preferIPv4Stack=true", "-Djgroups.bind_addr=127.0.0.1", "-Xss512k",
                *java_debug_args(), *(f"-D{k}={v}" for k, v in self.props.items()), "-cp", cp,
                "org.jgpy.interop.RpcNode"]

    def connect(self, cluster: str, config: str = "udp.xml", timeout: float = 60.0) -> str:
        self.address = self.call("connect", timeout=timeout, config=config, cluster=cluster, name=self.name)["address"]
        return self.address

    def call_methods(self, method: str, args: Sequence[tuple[str, Any]] = (), dests: Sequence[str] | None = None,
                     mode: str = "TYPES", rsp: str = "GET_ALL", timeout_ms: int = 5000, method_id: int = 0,
                     oob: bool = False) -> dict[str, dict]:
        """Java's callRemoteMethods; per member name: received, suspected, value (SerGolden.describe)."""
        rep = self.call("call", timeout=timeout_ms / 1000.0 + 30, method=method, args=[list(a) for a in args],
                        dests=list(dests) if dests is not None else None, mode=mode, rsp=rsp, timeout_ms=timeout_ms,
                        method_id=method_id, oob=oob)
        return {r["member"]: r for r in rep["results"]}


class PyRpcNode(JavaRpcNode):
    """The jgpy twin (``python -m jgpy.tools.rpc_member``): the same commands, its own process."""

    KIND = "jgpy-rpc"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jgpy.tools.rpc_member", *(f"--prop={k}={v}" for k, v in self.props.items())]

    def environment(self) -> dict[str, str] | None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
        return env


class JavaMapNode(JavaRpcNode):
    """A JVM sharing a ReplicatedHashMap (``interop/src/org/jgpy/interop/MapNode.java``)."""

    KIND = "java-map"

    def command(self) -> list[str]:
        return [*super().command()[:-1], "org.jgpy.interop.MapNode"]

    def connect_map(self, cluster: str, blocking: bool = False, config: str = "udp.xml",
                    state_timeout: int = 10000) -> str:
        self.address = self.call("connect", timeout=60, config=config, cluster=cluster, name=self.name,
                                 blocking=blocking, state_timeout=state_timeout)["address"]
        return self.address

    def entries(self) -> list[str]:
        """The map's entries, ``describe(key)=describe(value)``, sorted."""
        return self.call("dump")["entries"]


class JavaQueueNode(JavaRpcNode):
    """A JVM sharing a DistributedQueue (``interop/src/org/jgpy/interop/QueueNode.java``)."""

    KIND = "java-queue"

    def command(self) -> list[str]:
        return [*super().command()[:-1], "org.jgpy.interop.QueueNode"]

    def connect_queue(self, cluster: str, config: str = "udp.xml", state_timeout: int = 10000) -> str:
        self.address = self.call("connect", timeout=60, config=config, cluster=cluster, name=self.name,
                                 state_timeout=state_timeout)["address"]
        return self.address

    def elements(self) -> list[str]:
        """The queue's elements, each ``describe(value)``, head first."""
        return self.call("dump")["elements"]


class JavaTreeNode(JavaRpcNode):
    """A JVM sharing a ReplicatedTree (``interop/src/org/jgpy/interop/TreeNode.java``)."""

    KIND = "java-tree"

    def command(self) -> list[str]:
        return [*super().command()[:-1], "org.jgpy.interop.TreeNode"]

    def connect_tree(self, cluster: str, config: str = "udp.xml") -> str:
        self.address = self.call("connect", timeout=60, config=config, cluster=cluster, name=self.name)["address"]
        return self.address

    def nodes(self) -> list[str]:
        """Every node below the root, ``fqn{describe(key)=describe(value),...}``, depth first in name order."""
        return self.call("dump")["nodes"]


__all__ = ["JavaMapNode", "JavaQueueNode", "JavaRpcNode", "JavaTreeNode", "PyRpcNode"]
