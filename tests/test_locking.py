"""CENTRAL_LOCK / PEER_LOCK and LockService: jgpy members, and the jar's own LockServiceDemo (driven over
stdin) locking the same names."""

from __future__ import annotations

import os
import queue
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from jgpy import Channel, Message
from jgpy.blocks.locking import LockService
from jgpy.protocols.locking import GRANT_LOCK, Owner, Request
from jgpy.stack.config import load_config
from jgpy.testing.cluster import wait_all
from jgpy.testing.java import JGROUPS_JAR, udp_props, unique_group
from tests.conftest import require_java

pytestmark = pytest.mark.timeout(180)


def _cluster(kind: str, names: str, props: dict):
    cfg = load_config("udp.xml").insert(kind)
    cluster = f"lk-{uuid.uuid4().hex[:8]}"
    chans = [Channel(cfg, n, props) for n in names]
    for c in chans:
        c.connect(cluster)
    assert wait_all(lambda: all(len(c.view) == len(chans) for c in chans), 30)
    return chans


def _in_thread(fn, *args):
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("kind", ["CENTRAL_LOCK", "PEER_LOCK"])
def test_locks_exclude_wait_and_are_released_when_the_holder_leaves(kind):
    props = udp_props(*unique_group())
    a, b, c = _cluster(kind, "ABC", props)
    try:
        la, lb, lc = LockService(a), LockService(b), LockService(c)
        la.get_lock("x").lock()
        assert lb.get_lock("x").try_lock() is False
        # another thread (another owner: late LOCK_DENIEDs of PEER_LOCK's other members to the first attempt
        # would deny a new attempt of the same thread at once, in Java too)
        t0 = time.monotonic()
        t, got = _in_thread(lambda: lb.get_lock("x").try_lock(300))
        t.join(10)
        assert got == [False] and 0.25 < time.monotonic() - t0 < 5
        t, got = _in_thread(lambda: (lc.get_lock("x").lock(), "C")[1])
        time.sleep(0.3)
        assert not got                                            # C waits for A
        la.get_lock("x").unlock()
        t.join(10)
        assert got == ["C"]
        with lb.get_lock("y"):                                     # another name is independent
            assert la.get_lock("y").try_lock() is False
        assert la.get_lock("y").try_lock(2000) is True
        # the holder leaves: its lock goes to the next in line
        t, got = _in_thread(lambda: (lb.get_lock("y").lock(), "B")[1])
        time.sleep(0.3)
        a.close()
        t.join(30)
        assert got == ["B"]
    finally:
        for ch in (a, b, c):
            ch.close()


def test_conditions_signal_a_waiter():
    props = udp_props(*unique_group())
    a, b = _cluster("CENTRAL_LOCK", "AB", props)
    try:
        la, lb = LockService(a), LockService(b)
        lock_b = lb.get_lock("cond")
        woke: list = []

        def waiter():
            lock_b.lock()
            woke.append(lock_b.new_condition().await_(20000))
            lock_b.unlock()
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        assert wait_all(lambda: a.stack.find("CENTRAL_LOCK").server_locks.get("cond") is not None and
                        a.stack.find("CENTRAL_LOCK").server_locks["cond"].condition.queue, 10)
        lock_a = la.get_lock("cond")
        lock_a.lock()                                              # free while B awaits
        lock_a.new_condition().signal()
        lock_a.unlock()
        t.join(20)
        assert woke == [True]
        lock_b.lock()
        assert lock_b.new_condition().await_(200) is False         # nobody signals: times out, lock held again
        lock_b.unlock()
    finally:
        a.close()
        b.close()


def test_strangers_and_malformed_requests_are_dropped():
    props = udp_props(*unique_group())
    a, b = _cluster("CENTRAL_LOCK", "AB", props)
    try:
        prot = a.stack.find("CENTRAL_LOCK")
        b.send(Message(a.address, b"garbage"))                     # no locking header: not for the protocol
        bad = Message(a.address, b"\x01\x01\x00")
        bad.put_header(prot.id, prot._header())
        b.send(bad)
        assert wait_all(lambda: prot.dropped_malformed == 1, 10)
        from jgpy import UUID
        stranger = UUID(123, 456)
        req = Request(GRANT_LOCK, "s", Owner(stranger, 1)).encode(a.stack.dialect)
        forged = Message(None, req, stranger)
        forged.put_header(prot.id, prot._header())
        prot.up_batch([forged])                                    # as if it came from a non-member
        assert prot.dropped_non_member == 1 and "s" not in prot.server_locks
        assert LockService(b).get_lock("ok").try_lock(2000)
    finally:
        a.close()
        b.close()


@pytest.mark.interop
@pytest.mark.parametrize("java_first", [True, False], ids=["java-coordinator", "jgpy-coordinator"])
def test_the_jars_lock_service_demo_shares_locks_with_jgpy(java_first):
    require_java()
    props = udp_props(*unique_group())
    cfg = load_config("udp.xml").insert("CENTRAL_LOCK")
    with tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-lock-", delete=False) as f:
        f.write(cfg.to_xml())
    lines: "queue.Queue[str]" = queue.Queue()
    seen: list[str] = []

    def saw(text: str) -> bool:
        while not lines.empty():
            seen.append(lines.get())
        return any(text in x for x in seen)

    def start_demo():
        cmd = ["java", "-Djava.net.preferIPv4Stack=true", *(f"-D{k}={v}" for k, v in props.items()), "-cp",
               str(JGROUPS_JAR), "org.jgroups.demos.LockServiceDemo", "-props", f.name, "-name", "J"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()
        return p

    said = [0]

    def say(p, line: str) -> None:
        """One command, once the demo waits at its prompt: its Util.readStringFromStdin skips what is pending
        on stdin, which fails on a pipe (Illegal seek) if a line is already there."""
        assert wait_all(lambda: saw("GMS: address=J") and
                        sum("my locks:" in x for x in seen) >= said[0], 30), f"the demo did not finish {said[0]}"
        time.sleep(0.5)                                            # from its last output to its prompt
        p.stdin.write(line + "\n")
        p.stdin.flush()
        said[0] += 1

    demo = None
    ch = Channel(cfg, "P", props)
    try:
        if java_first:
            demo = start_demo()
            assert wait_all(lambda: saw("GMS: address=J"), 30)
            time.sleep(1.0)                                        # the demo registers with JMX, then prompts
            ch.connect("lock-cluster")
        else:
            ch.connect("lock-cluster")
            demo = start_demo()
        assert wait_all(lambda: len(ch.view) == 2, 60)
        time.sleep(1.0)
        service = LockService(ch)
        prot = ch.stack.find("CENTRAL_LOCK")

        def java_holds(name: str) -> bool:
            """The demo's lock ``name`` was granted (by the Java coordinator, or by us)."""
            if java_first:
                return saw(f'"{name}" locked by J::')
            lk = prot.server_locks.get(name)
            return lk is not None and lk.current_owner is not None and str(lk.current_owner.address) == "J"

        say(demo, "lock a")
        assert wait_all(lambda: java_holds("a"), 20)
        assert service.get_lock("a").try_lock() is False
        assert service.get_lock("b").try_lock(5000) is True
        say(demo, "trylock b 200")
        assert wait_all(lambda: saw('Failed locking "b"'), 20)
        t, got = _in_thread(lambda: (service.get_lock("a").lock(), "P")[1])
        time.sleep(0.5)
        assert not got
        say(demo, "unlock a")
        t.join(20)
        assert got == ["P"]
        service.unlock_all()
        say(demo, "lock b")
        assert wait_all(lambda: java_holds("b"), 20)
        assert service.get_lock("b").try_lock() is False
        say(demo, "unlock all")
        assert service.get_lock("b").try_lock(5000) is True
    except AssertionError:
        print("demo output:\n" + "\n".join(seen[-60:]))
        print("jgpy:", ch.stack.find("CENTRAL_LOCK").print_locks(), ch.stack.find("CENTRAL_LOCK").dump_stats())
        raise
    finally:
        if demo is not None:
            try:
                say(demo, "quit")
                demo.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                demo.kill()
                demo.wait(10)
        ch.close()
        os.unlink(f.name)
