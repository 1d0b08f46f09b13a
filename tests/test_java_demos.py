"""The jar's own demos as real peers of jgpy members: ``org.jgroups.demos.LockServiceDemo`` (CENTRAL_LOCK) and
``org.jgroups.demos.ExecutionServiceDemo`` (CENTRAL_EXECUTOR), typed into on stdin as a user would.

Both demos load the config given with ``-props`` (without it: the jar's udp.xml, which has neither protocol)
and join a fixed cluster ("lock-cluster", "executing-cluster"), so each test has a multicast group of its own
(the udp.xml's system properties). The demo runs one command at a time on its main thread; after each lock
command it prints its printLocks() (the server table, then "my locks: ..."), which the test reads."""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from jgpy import Channel
from jgpy.blocks import LockNotification, LockService
from jgpy.stack.config import load_config
from jgpy.testing.java import JGROUPS_JAR, interop_classes_dir
from tests.chat_driver import LineProcess
from tests.conftest import require_java
from tests.fakestack import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.processes]

LOCK_DEMO = "org.jgroups.demos.LockServiceDemo"
EXECUTION_DEMO = "org.jgroups.demos.ExecutionServiceDemo"


@pytest.fixture(autouse=True)
def _java_peer():
    require_java()


def demo_command(main: str, config: Path, props: dict[str, str], name: str) -> list[str]:
    """The demo ``main`` of the jar, run through the harness's PipedStdin (its stdin is a pipe: see there)."""
    cp = os.pathsep.join([str(interop_classes_dir()), str(JGROUPS_JAR)])
    return ["java", "-Djava.net.preferIPv4Stack=true", *(f"-D{k}={v}" for k, v in props.items()), "-cp", cp,
            "org.jgpy.interop.PipedStdin", main, "-props", str(config), "-name", name]


class Demo(LineProcess):
    """A demo process: ``view()`` types "view" and returns the view it prints."""

    def view(self) -> str:
        self.type("view")
        return self.expect(r"View: (.*)$", 90).group(1)


class LockDemo(Demo):
    """A LockServiceDemo: ``run(line)`` types a command and returns its output, up to its "my locks:" line."""

    def run(self, line: str, timeout: float = 30.0) -> list[str]:
        start = len(self.lines)
        self.type(line)
        self.expect(r"my locks:", timeout)
        return self.lines[start:self._next]

    def view(self) -> str:
        """Its view as printed ("view" changes nothing and prints the view, then the locks: read up to them)."""
        return next(x for x in self.run("view", 90) if "View: " in x).split("View: ", 1)[1]

    @staticmethod
    def my_locks(out: list[str]) -> str:
        return out[-1].split("my locks:", 1)[1].strip()

    def server_locks(self) -> dict[str, str]:
        """Its server table ("view" is a command that changes nothing and prints the locks)."""
        out = self.run("view")
        table = out[out.index(next(x for x in out if x.endswith("server locks:"))) + 1:-1]
        return dict(line.split(": ", 1) for line in table if ": " in line)


class Recorder(LockNotification):
    """The jgpy server's lock events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def locked(self, lock_name: str, owner) -> None:
        self.events.append(("locked", lock_name, str(owner)))

    def unlocked(self, lock_name: str, owner) -> None:
        self.events.append(("unlocked", lock_name, str(owner)))


@contextmanager
def demo_and_jgpy_member(tmp_path: Path, props: dict[str, str], protocol: str, cluster: str, demo_cls: type[Demo],
                         main: str, demo_first: bool) -> Iterator[tuple[Channel, Demo]]:
    """The demo ``main`` ("J") and a jgpy member ("P") on the jar's udp.xml with ``protocol`` on top, the one
    started first the coordinator; both closed at the end."""
    cfg = load_config("udp.xml").insert(protocol)
    config = tmp_path / f"{protocol.lower()}.xml"
    config.write_text(cfg.to_xml())
    ch = Channel(cfg, name="P", props=props)
    members = ["J", "P"] if demo_first else ["P", "J"]
    demo = None
    try:
        if not demo_first:
            ch.connect(cluster)
        demo = demo_cls(demo_command(main, config, props, "J"))
        if demo_first:
            assert re.fullmatch(r"\[J\|0\] \[J\]", demo.view())          # answered once connected
            ch.connect(cluster)
        wait_until(lambda: ch.view is not None and [str(m) for m in ch.view.members] == members, 60,
                   msg=f"view {members}")
        assert re.fullmatch(rf"\[{members[0]}\|\d+\] \[{', '.join(members)}\]", demo.view())
        yield ch, demo
    finally:
        if demo is not None:
            demo.close()
        ch.close()


def quit_demo(demo: Demo, ch: Channel) -> None:
    demo.type("quit")
    assert demo.finish(60) == 0, demo.transcript
    wait_until(lambda: [str(m) for m in ch.view.members] == ["P"], 60, msg="the demo left")


def held_by_demo(out: list[str], name: str) -> bool:
    return re.fullmatch(rf"{name} \(J::\d+\)", LockDemo.my_locks(out)) is not None


@pytest.mark.timeout(240)
@pytest.mark.parametrize("demo_first", [True, False], ids=["demo-coordinator", "jgpy-coordinator"])
def test_lock_service_demo_and_a_jgpy_member_contend(tmp_path, udp_group, demo_first):
    with demo_and_jgpy_member(tmp_path, udp_group[0], "CENTRAL_LOCK", "lock-cluster", LockDemo, LOCK_DEMO,
                              demo_first) as (ch, demo):
        assert isinstance(demo, LockDemo)
        recorder = Recorder()
        service = LockService(ch)
        service.add_lock_listener(recorder)
        lock = service.get_lock("L")

        def released_at_the_server() -> None:
            """With the demo as server: its table shows the last release handled before the next request
            (2.12's handleLockRequest race, see test_lock_interop)."""
            if demo_first:
                wait_until(lambda: "L" not in demo.server_locks(), 10, msg="the demo's server released L")

        def cancelled_at_the_server() -> None:
            """After a timed-out try of ours, with the demo as server: its server drops our request from the
            lock's queue on a protocol thread while the demo's command loop prints the locks, and 2.12's
            ServerLock.toString iterates that queue unguarded (a ConcurrentModificationException ended the demo
            in CI). Nothing tells when the cancel was handled: give it time before the next command."""
            if demo_first:
                time.sleep(0.5)

        assert held_by_demo(demo.run("lock L"), "L")                       # the demo takes L
        assert lock.try_lock(0.5) is False                                  # jgpy waits for it in vain
        cancelled_at_the_server()
        assert LockDemo.my_locks(demo.run("unlock L")) == ""
        released_at_the_server()
        assert lock.try_lock(10.0)                                          # now jgpy holds it
        if demo_first:
            demo.expect(r'"L" locked by P::\d+', 30)                        # the demo's server granted it
        else:
            # our server granted and released the demo's, then ours (between them the timed-out try may be
            # granted and released: its cancel reached our server after the demo's release)
            ev = recorder.events
            assert [e[0] for e in ev[:2]] == ["locked", "unlocked"] and ev[-1][0] == "locked"
            assert re.fullmatch(r"J::\d+", ev[0][2]) and ev[1][2] == ev[0][2] and ev[-1][2].startswith("P::")
            assert [e[0] for e in ev] == ["locked", "unlocked"] * ((len(ev) - 1) // 2) + ["locked"]
        if not demo_first:
            # the demo's own failing tries, against our server. (With the demo as server, its server drops its
            # own denied request from the lock's queue on a protocol thread after it answered, while the demo's
            # command loop prints the locks at once: 2.12's unguarded ServerLock.toString then ended the demo
            # with a ConcurrentModificationException in CI, a Java-only race no pause of ours can avoid.)
            out = demo.run("trylock L")                                     # tryLock(): no
            assert any(x.endswith('Failed locking "L"') for x in out) and not held_by_demo(out, "L")
            out = demo.run("trylock L 300")                                 # tryLock(300 ms): no
            assert any(x.endswith('Failed locking "L"') for x in out) and not held_by_demo(out, "L")

        demo.type("lock L L2")                                              # blocks on L while jgpy holds it
        with pytest.raises(AssertionError):
            demo.expect(r"my locks:", 1.0)
        lock.unlock()
        demo.expect(r"my locks:", 30)
        assert re.search(r"L \(J::\d+\)", demo.lines[demo._next - 1])
        assert re.search(r"L2 \(J::\d+\)", demo.lines[demo._next - 1])
        assert lock.try_lock(0.3) is False
        lock2 = service.get_lock("L2")
        assert lock2.try_lock(0.3) is False
        cancelled_at_the_server()
        assert LockDemo.my_locks(demo.run("unlock all")) == ""
        released_at_the_server()
        assert lock.try_lock(10.0) and lock2.try_lock(10.0)
        lock.unlock()
        lock2.unlock()

        quit_demo(demo, ch)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("demo_first", [True, False], ids=["demo-coordinator", "jgpy-coordinator"])
def test_execution_service_demo_with_a_jgpy_member(tmp_path, udp_group, demo_first):
    """The demo's distributed sort (its tasks run by its own consumers: Java tasks only a JVM runs) paired by
    a jgpy coordinator, or by the demo with the jgpy member as its backup; the demo's consumers as the jgpy
    member's table shows them (the backup's copy arrives before the joiner's view: held until it)."""
    with demo_and_jgpy_member(tmp_path, udp_group[0], "CENTRAL_EXECUTOR", "executing-cluster", Demo,
                              EXECUTION_DEMO, demo_first) as (ch, demo):
        prot = ch.stack.find("CENTRAL_EXECUTOR")
        assert prot.is_coord is not demo_first
        consumers = lambda: prot.dump_stats()["consumers"]               # noqa: E731 - the coordinator's or the copy
        wait_until(lambda: consumers() == 1, 30, msg="the demo's consumer in P's table")

        for count in (3000, 2500):                                          # 3 sorts + 2 merges; 3 + 2
            demo.type(f"submit {count}")
            demo.expect(r"Distributed Sort Took: ", 120)
            demo.expect(r"Local Sort Took: ", 30)
        if demo_first:
            # P is the demo's backup. 2.12 sends the backups' CREATE_ and DELETE_CONSUMER_READY after its lock,
            # from different threads (the consumer's offer, the submitter's take), and a consumer offers itself
            # again under the same id (its thread's): a take's DELETE can overtake the next offer's CREATE, and
            # then Java's own backup holds no consumer either. The copy holds at most the one consumer.
            time.sleep(1.0)
            offered = consumers()
            assert offered in (0, 1), offered
        else:
            wait_until(lambda: consumers() == 1, 30, msg="the demo's consumer offered again")
            # (a Java coordinator's backup may keep a run request taken long ago: 2.12 sends the backups'
            # CREATE_RUN_REQUEST and DELETE_RUN_REQUEST after its lock, from different threads, in either order)
            assert prot.dump_stats()["run_requests"] == 0
            offered = 1

        demo.type("consumer start")
        demo.expect(r"Started Consumer - running 2 consumers$", 30)
        wait_until(lambda: consumers() == offered + 1, 30, msg="the demo's second consumer in P's table")
        demo.type("submit 4000")
        demo.expect(r"Distributed Sort Took: ", 120)
        demo.expect(r"Local Sort Took: ", 30)
        # (whether both consumers offer themselves again afterwards is up to 2.12's ExecutionRunner: mostly one
        # does, with a Java coordinator as with jgpy's)

        quit_demo(demo, ch)
        wait_until(lambda: consumers() == 0, 30, msg="the demo's consumers gone with it")
