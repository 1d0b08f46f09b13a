"""Flow control with slow receivers (issue 4, item 3): MFC (multicast) and UFC (unicast).

A sender multicasts (or unicasts) as fast as it can to a receiver that sleeps in ``receive()`` for every
message (the harness' ``receive_sleep_ms``), on the jar's unchanged udp.xml (MFC/UFC max_credits=2M,
min_threshold=0.4). Both run in their own processes: a jgpy sender to a Java receiver, a Java sender to a
jgpy receiver, and jgpy to jgpy. Checked: nothing is lost (the receiver counts every message and byte),
the sender blocked on credits and resumed (blocking counters and times of the sender's MFC/UFC), its
throughput followed the receiver's pace, and the memory of both processes stayed bounded (peak RSS,
``VmHWM``, far below what was sent). Measured: peak RSS of sender and receiver, time blocked, throughput.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from jgpy.testing.java import JavaNode, PyNode, udp_props, unique_group
from tests.conftest import require_java

pytestmark = [pytest.mark.timeout(180), pytest.mark.interop, pytest.mark.processes, pytest.mark.slow]

MSG_SIZE = 50_000          # below FRAG2's 60K: one datagram per message
SLEEP_MS = 5               # the receiver's pace: at most 200 messages (10 MB) per second
COUNT = 1600               # 80 MB sent: 40 times max_credits
MAX_CREDITS = 2_000_000


def vm_kb(pid: int, field: str) -> int:
    """``VmHWM`` (peak resident set) or ``VmRSS`` of a process, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@pytest.fixture
def nodes():
    require_java()
    started: list = []

    def start(kind: str, name: str):
        node = (JavaNode if kind == "J" else PyNode)(name=name)
        started.append(node)
        return node
    yield start
    for n in started:
        n.close()


def fc_stats(node, proto: str) -> tuple[int, float]:
    """(blockings, ms blocked) of the node's MFC/UFC."""
    st = node.protocol_stats()[proto]
    if node.KIND == "java":
        return int(st["number_of_blockings"]), float(st["total_time_blocked"])
    return int(st["blockings"]), float(st["time_blocked_ms"])


@pytest.mark.parametrize("mode", ["multicast", "unicast"])
@pytest.mark.parametrize("sender_kind,receiver_kind", [("P", "J"), ("J", "P"), ("P", "P")],
                         ids=["jgpy-to-java", "java-to-jgpy", "jgpy-to-jgpy"])
def test_fast_sender_slow_receiver(nodes, figures, sender_kind, receiver_kind, mode):
    props = udp_props(*unique_group())
    cluster = f"fc-{uuid.uuid4().hex[:8]}"
    sender = nodes(sender_kind, "S")
    receiver = nodes(receiver_kind, "R")
    sender.call("connect", config="udp.xml", cluster=cluster, name="S", props=props, receive="count", timeout=60)
    receiver.call("connect", config="udp.xml", cluster=cluster, name="R", props=props, receive="count",
                  receive_sleep_ms=SLEEP_MS, timeout=60)
    deadline = time.monotonic() + 30
    while len(sender.view()["names"]) != 2 or len(receiver.view()["names"]) != 2:
        assert time.monotonic() < deadline, "the two members did not form a cluster"
        time.sleep(0.1)
    proto = "MFC" if mode == "multicast" else "UFC"
    hwm0 = {n.name: vm_kb(n.proc.pid, "VmHWM") for n in (sender, receiver)}
    total = sum(MSG_SIZE + len(f":{i}") for i in range(COUNT))

    result: dict = {}

    def send():
        try:
            result["rep"] = sender.send(payload=b"\x5a" * MSG_SIZE, numbered=True, count=COUNT,
                                        dest="R" if mode == "unicast" else None, timeout=150)
        except Exception as e:  # noqa: BLE001
            result["error"] = e
    t0 = time.monotonic()
    th = threading.Thread(target=send, daemon=True)
    th.start()
    # the receiver's progress while the sender runs: it must advance steadily, never all at once
    samples = []            # (seconds, messages received, peak RSS of S and R in kB)
    deadline = t0 + 150
    while time.monotonic() < deadline:
        st = receiver.call("stats")
        samples.append((time.monotonic() - t0, st["received"], vm_kb(sender.proc.pid, "VmHWM"),
                        vm_kb(receiver.proc.pid, "VmHWM")))
        if not th.is_alive():
            if st["received"] >= COUNT or "error" in result:
                break
            deadline = min(deadline, result.setdefault("done_at", time.monotonic()) + 30)
        time.sleep(0.25)
    th.join(5)
    elapsed = time.monotonic() - t0
    assert "error" not in result, result.get("error")
    assert "rep" in result, "the sender did not finish"
    st = receiver.call("stats")
    # no loss (own multicasts are delivered to the sender too; the receiver counts only S's messages)
    assert st["received"] == COUNT, f"receiver got {st['received']} of {COUNT}"
    assert st["received_bytes"] == total
    send_seconds = result["rep"]["seconds"]
    blockings, blocked_ms = fc_stats(sender, proto)
    hwm = {n.name: vm_kb(n.proc.pid, "VmHWM") for n in (sender, receiver)}
    label = f"{mode} {sender.KIND} sender -> {receiver.KIND} receiver sleeping {SLEEP_MS} ms"
    figures(f"{label}: peak RSS of the {sender.KIND} sender (VmHWM)", hwm["S"] / 1024, "MB")
    figures(f"{label}: peak RSS growth of the sender while sending {total / 1e6:.0f} MB",
            (hwm["S"] - hwm0["S"]) / 1024, "MB")
    figures(f"{label}: peak RSS growth of the receiver", (hwm["R"] - hwm0["R"]) / 1024, "MB")
    figures(f"{label}: peak RSS of the {receiver.KIND} receiver (VmHWM)", hwm["R"] / 1024, "MB")
    figures(f"{label}: sender blocked", blocked_ms / 1000, f"s ({blockings} blockings)")
    figures(f"{label}: throughput", total / 1e6 / send_seconds, "MB/s")
    # the sender blocked on credits and resumed: blocked for most of the run, its pace was the receiver's
    min_receive_time = COUNT * SLEEP_MS / 1000
    assert blockings > 0 and blocked_ms > 0, (blockings, blocked_ms)
    assert send_seconds >= 0.5 * min_receive_time, \
        f"the sender finished in {send_seconds:.2f}s: it cannot have waited for a receiver needing " \
        f">= {min_receive_time:.1f}s"
    assert blocked_ms / 1000 >= 0.3 * min_receive_time, (blocked_ms, min_receive_time)
    # the sender was never more than the credits (plus what is in flight) ahead of the receiver
    halfway = [n for t, n, _, _ in samples if 0.4 * elapsed <= t <= 0.6 * elapsed]
    assert halfway and max(halfway) < COUNT, f"receiver progress {samples}: not paced"
    # bounded memory of the jgpy processes: the peak RSS levels off (what a multicast sender keeps is bounded
    # by credits and STABLE's max_bytes/stability_delay, not by what it sends); a JVM's heap grows lazily,
    # so Java's figures are only reported
    half = next(x for x in samples if x[1] >= COUNT // 2)
    for name, node, idx in (("S", sender, 2), ("R", receiver, 3)):
        if node.KIND != "jgpy":
            continue
        growth_mb = (hwm[name] - hwm0[name]) / 1024
        second_half_mb = (hwm[name] - half[idx]) / 1024
        figures(f"{label}: peak RSS growth of the jgpy {'sender' if name == 'S' else 'receiver'} "
                f"during the second half", second_half_mb, "MB")
        assert growth_mb < 0.6 * total / 1e6, \
            f"{name}: peak RSS grew by {growth_mb:.1f} MB while {total / 1e6:.0f} MB were sent"
        assert second_half_mb < 12, f"{name}: peak RSS still grew by {second_half_mb:.1f} MB in the second half"
