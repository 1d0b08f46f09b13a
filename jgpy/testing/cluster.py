"""Mixed Java/jgpy cluster scenarios for tests, benchmarks and the demo.

Members send numbered payloads ``"<name>:<n>"`` (raw bytes, or Java ``setObject(String)``); every member
records what it receives per sender, and :func:`check_fifo` proves per-sender FIFO order with no gaps and
no duplicates. A :class:`JgpyMember` wraps a :class:`jgpy.Channel`; a :class:`JavaMember` wraps a Java
harness node, so scenarios read the same for both kinds.
"""

from __future__ import annotations

import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from jgpy import Channel, Receiver
from jgpy._core.jg212 import object_from_buffer
from jgpy.stack.config import StackConfig, load_config
from jgpy.testing.java import JavaNode, PyNode
from jgpy.testing.javajson import from_json

_NUMBERED = re.compile(rb"^(.*):(\d+)$", re.S)


def parse_numbered(payload: bytes | None) -> tuple[str, int] | None:
    """``(name, n)`` of a numbered payload (raw ``b"A:12"`` or a Java String ``\\x12A:12``), else None."""
    if not payload:
        return None
    data = payload
    if data[0] == 0x12:                       # Java setObject(String)
        try:
            data = object_from_buffer(data).encode("latin-1")
        except Exception:  # noqa: BLE001
            return None
    m = _NUMBERED.match(data)
    if not m:
        return None
    return m.group(1).decode("latin-1"), int(m.group(2))


@dataclass
class Received:
    """What one member received, per sender name (in delivery order), plus its views."""

    by_sender: dict[str, list[int]] = field(default_factory=dict)
    unicast_by_sender: dict[str, list[int]] = field(default_factory=dict)
    other: int = 0
    views: list = field(default_factory=list)

    def add(self, payload: bytes | None, unicast: bool) -> None:
        p = parse_numbered(payload)
        if p is None:
            self.other += 1
            return
        (self.unicast_by_sender if unicast else self.by_sender).setdefault(p[0], []).append(p[1])

    def count(self, unicast: bool = False) -> int:
        return sum(len(v) for v in (self.unicast_by_sender if unicast else self.by_sender).values())


def check_fifo(received: dict[str, list[int]], expected: dict[str, int]) -> list[str]:
    """Problems with per-sender FIFO delivery: every sender's numbers must be exactly 0..n-1 in order."""
    problems = []
    for sender, n in expected.items():
        got = received.get(sender, [])
        if got != list(range(n)):
            dups = len(got) - len(set(got))
            missing = n - len(set(got) & set(range(n)))
            out_of_order = sum(1 for a, b in zip(got, got[1:]) if b <= a)
            problems.append(f"from {sender}: {len(got)} delivered of {n} (missing {missing}, duplicates {dups}, "
                            f"out of order {out_of_order}; first bad at {_first_bad(got)})")
    for sender in received:
        if sender not in expected:
            problems.append(f"unexpected sender {sender}")
    return problems


def _first_bad(got: list[int]) -> Any:
    for i, v in enumerate(got):
        if v != i:
            return f"index {i} = {v}"
    return "end"


class _Recorder(Receiver):
    def __init__(self, member: "JgpyMember"):
        self.member = member

    def receive(self, msg) -> None:
        m = self.member
        with m.cond:
            m.received.add(msg.buffer, msg.dest is not None)
            m.cond.notify_all()

    def view_accepted(self, view) -> None:
        m = self.member
        with m.cond:
            m.received.views.append(view)
            m.cond.notify_all()


class JgpyMember:
    kind = "jgpy"

    def __init__(self, name: str, config: str | StackConfig, props: dict[str, str]):
        self.name = name
        self.received = Received()
        self.cond = threading.Condition()
        self.channel = Channel(config, name, props, None)
        self.channel.receiver = _Recorder(self)

    def connect(self, cluster: str) -> None:
        self.channel.connect(cluster)

    def send_numbered(self, count: int, dest_name: str | None = None, java_string: bool = False,
                      start: int = 0, dest=None) -> None:
        ch = self.channel
        if dest is None and dest_name is not None:
            dest = self.address_of(dest_name)
        for i in range(start, start + count):
            text = f"{self.name}:{i}"
            ch.send(dest, text if java_string else text.encode())

    def address_of(self, name: str):
        for a in self.channel.view.members:
            if str(a) == name:
                return a
        raise KeyError(f"{name} is not in {self.channel.view}")

    def view_names(self) -> list[str]:
        v = self.channel.view
        return [str(a) for a in v.members] if v is not None else []

    def view_id(self) -> tuple[str, int] | None:
        v = self.channel.view
        return (str(v.vid.coord_addr), v.vid.id) if v is not None else None

    def wait_received(self, total: int, unicast: bool = False, timeout: float = 60.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.received.count(unicast) >= total, timeout)

    def wait_received_other(self, total: int, timeout: float = 60.0) -> bool:
        """Wait until ``total`` messages without a numbered payload have arrived."""
        with self.cond:
            return self.cond.wait_for(lambda: self.received.other >= total, timeout)

    def wait_view(self, names: list[str], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.view_names() == names:
                return True
            time.sleep(0.05)
        return False

    def stats(self) -> dict:
        return self.channel.dump_stats()

    def disconnect(self) -> None:
        self.channel.disconnect()

    def close(self) -> None:
        self.channel.close()


class JavaMember:
    kind = "java"
    node_class: type = JavaNode

    def __init__(self, name: str, config: str | StackConfig, props: dict[str, str]):
        self.name = name
        self.node = self.node_class(name=name)
        self.props = props
        self.received = Received()
        self._config_file = None
        if isinstance(config, StackConfig):
            f = tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-java-cfg-", delete=False)
            f.write(config.to_xml())
            f.close()
            self._config_file = f.name
            self.config = f.name
        else:
            self.config = config
        self._view: dict | None = None

    def connect(self, cluster: str, **extra: Any) -> None:
        """``extra``: more ``connect`` arguments of the harness (e.g. ``receive_sleep_ms``, ``address``)."""
        rep = self.node.connect(self.config, cluster, self.props, **extra)
        self._view = rep.get("view")

    def _pump(self, timeout: float = 0.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self.node.events.get(timeout=max(0.0, deadline - time.monotonic()) if timeout else 0.0)
            except Exception:  # noqa: BLE001 - queue.Empty
                return
            e = ev.get("event")
            if e == "msg":
                self.received.add(bytes.fromhex(ev["payload"]) if ev.get("payload") else None, ev.get("dest") is not None)
            elif e == "view":
                self._view = ev
                self.received.views.append(ev)
            elif e == "_eof":
                self.node.events.put(ev)
                return
            if timeout == 0.0 and self.node.events.empty():
                return

    def send_numbered(self, count: int, dest_name: str | None = None, java_string: bool = False,
                      start: int = 0, dest=None) -> None:
        target = dest_name
        if java_string:
            self.node.send(dest=target, java_string=self.name, count=count, numbered=True, start=start, timeout=300)
        else:
            self.node.send(dest=target, payload=self.name.encode(), count=count, numbered=True, start=start,
                           timeout=300)

    def view_names(self) -> list[str]:
        self._pump()
        return list(self._view["names"]) if self._view and self._view.get("names") else []

    def view_id(self) -> tuple[str, int] | None:
        self._pump()
        if not self._view or not self._view.get("view_id"):
            return None
        vid = self._view["view_id"]
        return (str(from_json(vid["coord_addr"])), vid["id"])

    def wait_received(self, total: int, unicast: bool = False, timeout: float = 60.0) -> bool:
        return self._wait(lambda: self.received.count(unicast) >= total, timeout)

    def wait_received_other(self, total: int, timeout: float = 60.0) -> bool:
        """Wait until ``total`` messages without a numbered payload have arrived."""
        return self._wait(lambda: self.received.other >= total, timeout)

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._pump(0.2)
            if done():
                return True
        return False

    def wait_view(self, names: list[str], timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.view_names() == names:
                return True
            self._pump(0.1)
        return False

    def stats(self) -> dict:
        return self.node.protocol_stats()

    def kill(self) -> float:
        """``kill -9`` the member's process; returns the monotonic time of the kill."""
        t = time.monotonic()
        self.node.proc.kill()
        self.node.proc.wait(timeout=10)
        return t

    def disconnect(self) -> None:
        self.node.call("disconnect", timeout=60)

    def close(self) -> None:
        self.node.close()
        if self._config_file:
            import os
            try:
                os.unlink(self._config_file)
            except OSError:
                pass


class ProcMember(JavaMember):
    """A jgpy member in its own process (``python -m jgpy node``), driven like a :class:`JavaMember`, so
    that it can be killed (crash tests) and its memory measured on its own."""

    kind = "jgpy"
    node_class = PyNode


def make_member(kind: str, name: str, config: str | StackConfig, props: dict[str, str]):
    """``J``: Java process, ``P``: jgpy in this process, ``p``: jgpy in its own process."""
    cls = JavaMember if kind in ("J", "java") else ProcMember if kind == "p" else JgpyMember
    return cls(name, config, props)


def wait_all(pred: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


#: jgpy-only clusters inside one process: the jar's udp.xml above SHARED_LOOPBACK (fast, deterministic, no sockets)
IN_PROCESS = "shared-loopback.xml"


def stock(name: str = "udp.xml") -> StackConfig:
    return load_config(name)


def kill_mid_stream(nodes: list, victim, run_dir, warmup: float = 2.0, after: float = 1.0,
                    view_timeout: float = 60.0, chunk: int = 20) -> tuple[dict[str, int], float]:
    """Every harness node of ``nodes`` multicasts numbered payloads (``"<name>:<n>"``) in chunks of ``chunk``; after
    ``warmup`` s ``victim`` is killed with SIGKILL (its crash marked in the journals of ``run_dir``), the others go
    on until ``after`` s past the view without it. Returns how many each node sent and the seconds from the kill
    to the survivors' view; raises AssertionError if the survivors' view does not come or a survivor's send
    fails."""
    from jgpy.journal import mark_crash
    survivors = [x for x in nodes if x is not victim]
    sent = {x.name: 0 for x in nodes}
    errors: list = []
    stop = threading.Event()

    def send(node) -> None:
        while not stop.is_set():
            try:
                node.send(payload=node.name.encode(), count=chunk, numbered=True, start=sent[node.name], timeout=120)
            except Exception as e:  # noqa: BLE001 - the victim's sends fail; the others' are reported
                if node is not victim:
                    errors.append((node.name, repr(e)))
                return
            sent[node.name] += chunk
            time.sleep(0.01)
    threads = [threading.Thread(target=send, args=(x,), daemon=True) for x in nodes]
    for t in threads:
        t.start()
    try:
        time.sleep(warmup)
        crash_ns = time.monotonic_ns()
        victim.kill()
        mark_crash(run_dir, victim.name, crash_ns)
        t_kill = time.monotonic()
        if not wait_all(lambda: all(len(x.call("view")["members"]) == len(survivors) for x in survivors),
                        view_timeout):
            raise AssertionError(f"no view without {victim.name} within {view_timeout} s; the survivors: "
                                 + "; ".join(diagnosis(x) for x in survivors))
        to_view = time.monotonic() - t_kill
        time.sleep(after)
    finally:
        stop.set()
        for t in threads:
            t.join(150)
    if errors:
        raise AssertionError(f"sends failed: {errors}")
    return sent, to_view


#: the protocols whose statistics :func:`diagnosis` reports: membership, delivery and ordering
_DIAGNOSED = ("UDP", "FD_SOCK", "VERIFY_SUSPECT", "BARRIER", "pbcast.NAKACK", "UNICAST", "pbcast.GMS", "TOTAL",
              "SEQUENCER", "UFC", "MFC", "pbcast.FLUSH")


def diagnosis(node, per_protocol: int = 700) -> str:
    """A harness node's view and the statistics of the protocols of ``_DIAGNOSED`` it has, each cut to
    ``per_protocol`` characters: what a failed wait puts in its message (a CI run keeps no node log)."""
    try:
        view = node.call("view", timeout=20)
        stats = node.call("dump_stats", timeout=20)["stats"]
    except Exception as e:  # noqa: BLE001 - the diagnosis of a failure must not hide it
        return f"{node.name}: no diagnosis ({e!r})"
    vid = view.get("view_id") or {}
    return f"{node.name} in view {vid.get('id')} {view.get('names')}: " + ", ".join(
        f"{name} {str(stats[name])[:per_protocol]}" for name in _DIAGNOSED if stats.get(name))


def start_lossy_journaled(nodes: list, names, run_dir, config: str, workdir, cluster: str, props: dict,
                          loss: float) -> list:
    """jgpy harness processes ``names`` on the stack config ``config`` with DISCARD right above the transport (the
    file is written to ``workdir``), journaling into ``run_dir``, joined one after the other; once all of them see
    the full view, each loses ``loss`` of what it receives (not before: a lost discovery answer would leave a member
    without another's logical name, and its journal naming it by address). Each process is appended to ``nodes``
    as it starts: the caller closes them."""
    from pathlib import Path
    path = Path(workdir) / (Path(config).stem + "-discard.xml")
    path.write_text(load_config(config).insert("DISCARD", {}, after="UDP").to_xml())
    started = []
    for n in names:
        node = PyNode(name=n)
        nodes.append(node)
        started.append(node)
        node.call("connect", timeout=90, config=str(path), cluster=cluster, name=n, props=props, receive="count",
                  journal=str(run_dir))
    if not wait_all(lambda: all(len(x.call("view")["members"]) == len(names) for x in started), 60):
        raise AssertionError(f"{names} did not all see one view of {len(names)} within 60 s")
    for node in started:
        node.call("discard", up=loss)
    return started


def lossy_journaled_members(config: str, workdir, udp_group: tuple, loss: float):
    """The body of a fixture (``yield from``): the test gets ``start(names, run_dir)``, which starts processes as
    :func:`start_lossy_journaled` does on ``config`` in the cluster and multicast group of ``udp_group`` (the
    ``udp_group`` fixture's value); every process started is closed after the test."""
    props, cluster, _ = udp_group
    nodes: list = []
    yield lambda names, run_dir: start_lossy_journaled(nodes, names, run_dir, config, workdir, cluster, props, loss)
    for node in nodes:
        node.close()


def multicast_all(nodes: list, count: int, timeout: float = 240.0) -> None:
    """Every harness node of ``nodes`` multicasts ``count`` numbered payloads (``"<name>:<n>"``), all at once, each
    from a thread of its own; returns when all are sent, raises AssertionError if a send fails."""
    errors: list = []

    def send(node) -> None:
        try:
            node.send(payload=node.name.encode(), count=count, numbered=True, timeout=timeout)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((node.name, repr(e)))
    threads = [threading.Thread(target=send, args=(x,), daemon=True) for x in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if errors:
        raise AssertionError(f"sends failed: {errors}")
