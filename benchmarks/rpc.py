#!/usr/bin/env python3
"""RpcDispatcher benchmark: synchronous call round trips and asynchronous call throughput, Java, jgpy and mixed.

Every member is its own process on loopback (the jar's ``udp.xml``, a private group per cluster): a caller
and two servers of ``echoBytes(byte[])`` (``interop/.../RpcNode.java`` for Java, ``jgpy/tools/rpc_member.py``
for jgpy, the same commands). Clusters: Java caller + Java servers, jgpy + jgpy, jgpy caller + Java servers,
Java caller + jgpy servers, one at a time. First ``warmup_reps`` unrecorded repetitions of every workload (a
Java member's JIT keeps compiling through the first ~10,000 calls: without them its first repetition is half as
fast as its third, and a median of three would compare jgpy with a Java that is still warming up). Then per
cluster, ``reps`` times (kinds interleaved per repetition):

* ``sync_1``: ``count`` calls one after the other, 100 B argument, GET_ALL, one server answering (anycast);
* ``sync_2``: the same with both servers answering (anycast to two);
* ``async_1``: ``async_count`` calls with futures to one server, then all answers awaited (calls/s).

Both sides marshal the MethodCall for every call (Java's callRemoteMethods does). ``main()`` returns a dict
with the figures and ``markdown`` (the table of ``make bench``); run directly it prints them::

    python benchmarks/rpc.py [--count 2000] [--async-count 5000] [--reps 3] [--warmup-reps 2] [--kinds JJ,PP,PJ,JP]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.testing.java import java_unavailable_reason, udp_props, unique_group  # noqa: E402
from jgpy.testing.rpcnode import JavaRpcNode, PyRpcNode  # noqa: E402

KINDS = {"JJ": "Java -> Java", "PP": "jgpy -> jgpy", "PJ": "jgpy -> Java", "JP": "Java -> jgpy"}


def progress(msg: str) -> None:
    print(f"[rpc {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _node(kind: str, name: str, props: dict):
    return (JavaRpcNode if kind == "J" else PyRpcNode)(name, props)


def start_cluster(kind: str) -> list:
    """Caller C (kind[0]) and servers S1, S2 (kind[1]), connected; the caller sees all three."""
    props = udp_props(*unique_group())
    cluster = f"rpcbench-{kind}-{uuid.uuid4().hex[:6]}"
    nodes = []
    try:
        for name, k in (("C", kind[0]), ("S1", kind[1]), ("S2", kind[1])):
            n = _node(k, name, props)
            nodes.append(n)
            n.connect(cluster)
        caller = nodes[0]
        caller.wait_event(lambda e: e.get("event") == "view" and len(e.get("members", ())) == 3, 30) \
            if kind[0] == "J" else _await_members(caller)
        return nodes
    except BaseException:
        for n in nodes:
            n.close()
        raise


def _await_members(node, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            node.call("bench", dests=["S1", "S2"], count=1, size=10, timeout=10)
            return
        except Exception:  # noqa: BLE001 - not in the view yet
            time.sleep(0.2)
    raise TimeoutError("the jgpy caller never saw both servers")


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def measure(caller, workload: str, count: int, async_count: int, size: int = 100) -> dict:
    dests = ["S1"] if workload.endswith("_1") else ["S1", "S2"]
    if workload.startswith("sync"):
        rep = caller.call("bench", timeout=600, dests=dests, count=count, size=size, warmup=min(500, count // 4),
                          anycast=True)
        us = [n / 1000 for n in rep["ns"]]
        return {"median_us": statistics.median(us), "p99_us": _pct(us, 0.99), "calls": count,
                "calls_per_s": count / (rep["total_ns"] / 1e9), "missing": rep["missing"]}
    rep = caller.call("bench", timeout=600, dests=dests, count=async_count, size=size, warmup=1000, anycast=True,
                      **{"async": True})
    return {"calls_per_s": async_count / (rep["total_ns"] / 1e9), "calls": async_count, "missing": rep["missing"]}


def run(kinds: list[str], count: int, async_count: int, reps: int, warmup_reps: int = 0) -> dict:
    clusters = {}
    results: dict = {k: {w: [] for w in ("sync_1", "sync_2", "async_1")} for k in kinds}
    try:
        for k in kinds:
            progress(f"starting cluster {KINDS[k]} ...")
            clusters[k] = start_cluster(k)
        for rep in range(-warmup_reps, reps):
            label = f"rep {rep + 1}" if rep >= 0 else f"warm-up {rep + warmup_reps + 1}"
            for w in ("sync_1", "sync_2", "async_1"):
                for k in kinds:
                    r = measure(clusters[k][0], w, count, async_count)
                    if rep >= 0:
                        results[k][w].append(r)
                    progress(f"{label} {w} {KINDS[k]}: " + ", ".join(f"{a}={b:,.0f}" for a, b in r.items()))
    finally:
        for nodes in clusters.values():
            for n in nodes:
                n.close()
    return results


def _med(recs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in recs if key in r]
    return statistics.median(vals) if vals else None


def markdown(results: dict, count: int, async_count: int, reps: int, warmup_reps: int = 0) -> list[str]:
    md = [f"Caller -> servers, each its own process; 100 B `byte[]` argument echoed back; medians of {reps} "
          f"repetitions ({count} sync calls, {async_count} async calls each) after {warmup_reps} unrecorded "
          "warm-up repetitions of the same. Suite: `benchmarks/rpc.py`.", "",
          "| caller -> servers | sync, 1 answering: median us | p99 us | sync, 2 answering: median us | p99 us | "
          "async to 1: calls/s | missing |", "|---|---:|---:|---:|---:|---:|---:|"]
    for k, res in results.items():
        def f(w, key, d=0):
            v = _med(res[w], key)
            return f"{v:,.{d}f}" if v is not None else "-"
        missing = sum(r.get("missing", 0) for w in res.values() for r in w)
        md.append(f"| {KINDS[k]} | {f('sync_1', 'median_us')} | {f('sync_1', 'p99_us')} | "
                  f"{f('sync_2', 'median_us')} | {f('sync_2', 'p99_us')} | {f('async_1', 'calls_per_s')} | "
                  f"{missing} |")
    return md


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000, help="sync calls per measurement")
    ap.add_argument("--async-count", type=int, default=5000, help="async calls per measurement")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup-reps", type=int, default=2, help="unrecorded repetitions first (JIT warm-up)")
    ap.add_argument("--kinds", default="JJ,PP,PJ,JP", help="caller+servers: J Java, P jgpy")
    args = ap.parse_args(argv)
    kinds = [k.strip().upper() for k in args.kinds.split(",") if k.strip()]
    if java_unavailable_reason():
        kinds = [k for k in kinds if "J" not in k]
    t0 = time.time()
    results = run(kinds, args.count, args.async_count, args.reps, args.warmup_reps)
    return {"results": results, "seconds": time.time() - t0,
            "markdown": markdown(results, args.count, args.async_count, args.reps, args.warmup_reps)}


if __name__ == "__main__":
    out = main()
    print("\n".join(out["markdown"]))
    print(json.dumps({k: v for k, v in out.items() if k != "markdown"})[:2000])
