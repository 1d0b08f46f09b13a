"""Throughput on loopback: jgpy and Java members as separate processes, side by side in one run.

``python -m jgpy perf`` runs one sender multicasting ``count`` messages of ``size`` bytes to a 2-member
cluster for each pairing (Java->Java, jgpy->jgpy, jgpy->Java, Java->jgpy) on the jar's udp.xml and
prints the receiver's rate. Each member is its own process: a jgpy member is ``python -m jgpy perf
--member``; a Java member is the interop harness in count mode.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass

from jgpy.testing.java import JavaNode, java_unavailable_reason, udp_props, unique_group


# ---------------------------------------------------------------------------------------------
# one jgpy member (a child process)
# ---------------------------------------------------------------------------------------------

def run_member(args: argparse.Namespace) -> int:
    """Join, wait for the cluster, then send and/or count; print one JSON line with the result."""
    import logging

    from jgpy import Channel, Receiver

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    addr, _, port = args.group.rpartition(":")
    props = udp_props(addr, int(port))
    done = threading.Event()
    state = {"n": 0, "first": 0, "last": 0, "bytes": 0}

    class Counter(Receiver):
        def receive(self, msg):
            if msg.src == ch.address or msg.length != args.size:
                return
            now = time.perf_counter_ns()
            n = state["n"] = state["n"] + 1
            if n == 1:
                state["first"] = now
            state["last"] = now
            state["bytes"] += msg.length
            if n >= args.expect:
                done.set()

    ch = Channel(args.config, args.name, props, Counter())
    ch.connect(args.cluster)
    print(json.dumps({"event": "joined", "view": len(ch.view.members)}), flush=True)
    deadline = time.monotonic() + args.timeout
    while len(ch.view.members) < args.members and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"event": "ready", "view": len(ch.view.members)}), flush=True)
    result: dict = {"name": args.name}
    if args.count:
        if args.start_delay:
            time.sleep(args.start_delay)
        payload = bytes(args.size)
        t0 = time.perf_counter()
        send = ch.send
        for _ in range(args.count):
            send(None, payload)
        result["send_seconds"] = time.perf_counter() - t0
        result["sent"] = args.count
    if args.expect:
        done.wait(max(0.1, deadline - time.monotonic()))
        secs = (state["last"] - state["first"]) / 1e9
        result.update(received=state["n"], seconds=secs,
                      msgs_per_s=(state["n"] - 1) / secs if secs > 0 else 0.0,
                      mb_per_s=state["bytes"] / secs / 1e6 if secs > 0 else 0.0)
    try:
        import psutil
        p = psutil.Process()
        result["rss_mb"] = p.memory_info().rss / 1e6
        result["cpu_seconds"] = sum(p.cpu_times()[:2])
    except Exception:  # noqa: BLE001 - psutil is optional here
        pass
    print(json.dumps({"event": "result", **result}), flush=True)
    ch.close()
    return 0


# ---------------------------------------------------------------------------------------------
# the orchestrator
# ---------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    label: str
    msgs_per_s: float
    mb_per_s: float
    received: int
    expected: int
    send_seconds: float | None = None

    @property
    def complete(self) -> bool:
        return self.received >= self.expected


class _JgpyProc:
    def __init__(self, name: str, group: str, cluster: str, members: int, count: int, size: int, expect: int,
                 timeout: float, config: str, start_delay: float = 0.0):
        cmd = [sys.executable, "-m", "jgpy", "perf", "--member", "--name", name, "--group", group,
               "--cluster", cluster, "--members", str(members), "--count", str(count), "--size", str(size),
               "--expect", str(expect), "--timeout", str(timeout), "--config", config,
               "--start-delay", str(start_delay)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[dict] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self.lines.append(json.loads(line))
                except ValueError:
                    pass

    def wait_event(self, name: str, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.lines:
                if ev.get("event") == name:
                    return ev
            if self.proc.poll() is not None and not any(e.get("event") == name for e in self.lines):
                self._t.join(1)
                return next((e for e in self.lines if e.get("event") == name), None)
            time.sleep(0.05)
        return None

    def close(self) -> None:
        """The result is in: stop the member (a graceful leave would only wait for a gone coordinator)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def run_pair(sender_kind: str, receiver_kind: str, count: int, size: int, config: str = "udp.xml",
             timeout: float = 120.0) -> Outcome:
    """One sender, one receiver (2 members); the receiver's message rate."""
    addr, port = unique_group()
    group = f"{addr}:{port}"
    props = udp_props(addr, port)
    cluster = f"perf-{uuid.uuid4().hex[:8]}"
    label = f"{'Java' if sender_kind == 'J' else 'jgpy'} -> {'Java' if receiver_kind == 'J' else 'jgpy'}"
    procs: list = []
    try:
        # the receiver joins first (it coordinates), then the sender
        if receiver_kind == "J":
            recv = JavaNode(name="R", jvm_args=("-Xmx1g",))
            procs.append(recv)
            recv.connect(config, cluster, props, receive="count")
        else:
            recv = _JgpyProc("R", group, cluster, 2, 0, size, count, timeout, config)
            procs.append(recv)
            if recv.wait_event("joined", 60) is None:
                raise RuntimeError("the jgpy receiver did not start")
        if sender_kind == "J":
            send = JavaNode(name="S", jvm_args=("-Xmx1g",))
            procs.append(send)
            send.connect(config, cluster, props, receive="count")
            time.sleep(0.5)
            rep = send.call("send", timeout=timeout, dest=None, payload=bytes(size).hex(), count=count)
            send_seconds = rep.get("seconds")
        else:
            send = _JgpyProc("S", group, cluster, 2, count, size, 0, timeout, config, start_delay=0.5)
            procs.append(send)
            res = send.wait_event("result", timeout)
            send_seconds = res.get("send_seconds") if res else None
        if receiver_kind == "J":
            deadline = time.monotonic() + timeout
            st = recv.call("stats")
            while st["received"] < count and time.monotonic() < deadline:
                time.sleep(0.2)
                st = recv.call("stats")
            secs = (st["last_recv_ns"] - st["first_recv_ns"]) / 1e9
            n = st["received"]
            return Outcome(label, (n - 1) / secs if secs > 0 else 0.0, st["received_bytes"] / secs / 1e6 if secs else 0,
                           n, count, send_seconds)
        res = recv.wait_event("result", timeout)
        if res is None:
            return Outcome(label, 0.0, 0.0, 0, count, send_seconds)
        return Outcome(label, res["msgs_per_s"], res["mb_per_s"], res["received"], count, send_seconds)
    finally:
        for p in procs:
            try:
                p.close()
            except Exception:  # noqa: BLE001
                pass


def run_matrix(count: int = 100_000, size: int = 1000, pairs=("JJ", "PP", "PJ", "JP"), progress=print) -> list[Outcome]:
    out = []
    for pair in pairs:
        s, r = pair[0], pair[1]
        progress(f"{'Java' if s == 'J' else 'jgpy'} -> {'Java' if r == 'J' else 'jgpy'}: {count} x {size} B ...")
        o = run_pair(s, r, count, size)
        progress(f"   {o.msgs_per_s:,.0f} msgs/s ({o.mb_per_s:.1f} MB/s), received {o.received}/{o.expected}")
        out.append(o)
    return out


def main(args: argparse.Namespace) -> int:
    if args.member:
        return run_member(args)
    reason = java_unavailable_reason()
    pairs = args.pairs.split(",") if args.pairs else (["JJ", "PP", "PJ", "JP"] if reason is None else ["PP"])
    if reason and any("J" in p for p in pairs):
        print(f"Java members are not available ({reason}): running jgpy only")
        pairs = [p for p in pairs if "J" not in p]
    results = run_matrix(args.count or 100_000, args.size, pairs)
    print()
    print("| sender -> receiver | msgs/s | MB/s | received |")
    print("|---|---:|---:|---:|")
    for o in results:
        print(f"| {o.label} | {o.msgs_per_s:,.0f} | {o.mb_per_s:.1f} | {o.received}/{o.expected} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([o.__dict__ for o in results], f, indent=2)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=int, default=0, help="messages to send (default 100000)")
    p.add_argument("--size", type=int, default=1000, help="payload bytes (default 1000)")
    p.add_argument("--pairs", default="", help="sender/receiver kinds, e.g. JJ,PP,PJ,JP (J=Java, P=jgpy)")
    p.add_argument("--json", default="", help="write the results to this file")
    # a child member process (used by the orchestrator)
    p.add_argument("--member", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--name", default="P", help=argparse.SUPPRESS)
    p.add_argument("--group", default="", help=argparse.SUPPRESS)
    p.add_argument("--cluster", default="perf", help=argparse.SUPPRESS)
    p.add_argument("--members", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("--expect", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=120.0, help=argparse.SUPPRESS)
    p.add_argument("--config", default="udp.xml", help=argparse.SUPPRESS)
    p.add_argument("--start-delay", type=float, default=0.0, help=argparse.SUPPRESS)
