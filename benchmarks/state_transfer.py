#!/usr/bin/env python3
"""State transfer benchmark: a 1 GB state over pbcast.STREAMING_STATE_TRANSFER (and a byte-array state over
pbcast.STATE_TRANSFER), jgpy and Java members side by side.

Every member is its own process (``python -m jgpy node`` or the Java harness), so each one's peak RSS is
measured (``VmHWM`` from ``/proc``, reset just before the transfer). The provider generates the state in
64 KiB blocks (``set_state_provider {"generate": ...}``) and the requester hashes it as it reads, so neither
side should hold the state: the RSS growth shows whether a member streams with bounded memory.

``main()`` returns a dict of results (and prints progress); run directly it also prints them as JSON::

    python benchmarks/state_transfer.py [--size 1000000000] [--pairs PP,JP,PJ,JJ] [--array-size 100000000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.stack.config import load_config  # noqa: E402
from jgpy.testing.java import JavaNode, PyNode, java_unavailable_reason, udp_props, unique_group  # noqa: E402
from jgpy.testing.node import generated_sha256, proc_memory, reset_peak_rss  # noqa: E402

SEED = 20240


def progress(msg: str) -> None:
    print(f"[state-transfer {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _node(kind: str, name: str):
    return JavaNode(name=name) if kind == "J" else PyNode(name=name)


def _member(kind: str) -> str:
    return "java" if kind == "J" else "jgpy"


def transfer(kinds: str, config: str, size: int, expected_sha: str, timeout_s: float = 600.0) -> dict:
    """One provider (kinds[0]) and one requester (kinds[1]) on a private group: fetch a generated state."""
    props = udp_props(*unique_group())
    cluster = f"bench-state-{uuid.uuid4().hex[:8]}"
    prov = _node(kinds[0], "Prov")
    req = None
    try:
        req = _node(kinds[1], "Req")
        for n in (prov, req):
            n.call("connect", timeout=90, config=config, cluster=cluster, name=n.name, props=props)
        prov.call("set_state_provider", generate={"size": size, "seed": SEED})
        time.sleep(0.3)
        nodes = {"provider": prov, "requester": req}
        before = {k: proc_memory(n.proc.pid).get("rss", 0) for k, n in nodes.items()}
        peak_reset = all(reset_peak_rss(n.proc.pid) for n in nodes.values())
        t0 = time.monotonic()
        rep = req.call("get_state", timeout=timeout_s + 10, target=None, timeout_ms=int(timeout_s * 1000),
                       report_max=0)
        seconds = time.monotonic() - t0
        ev = req.wait_event(lambda e: e.get("event") == "set_state", 60)
        out = {"pair": kinds, "provider": _member(kinds[0]), "requester": _member(kinds[1]), "size": size,
               "ok": bool(rep.get("result")) and ev.get("size") == size and ev.get("sha256") == expected_sha,
               "seconds": seconds, "mb_per_s": size / 1e6 / seconds if seconds > 0 else None,
               "requester_seconds": ev.get("seconds")}
        for k, n in nodes.items():
            mem = proc_memory(n.proc.pid)
            peak = mem.get("hwm", 0) if peak_reset else mem.get("rss", 0)
            out[f"{k}_rss_before_mb"] = before[k] / 1e6
            out[f"{k}_peak_rss_mb"] = peak / 1e6
            out[f"{k}_rss_growth_mb"] = (peak - before[k]) / 1e6
        return out
    finally:
        for n in (req, prov):
            if n is not None:
                n.close()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=int(os.environ.get("JGPY_BENCH_STATE_SIZE", 1_000_000_000)),
                    help="streaming state size in bytes (default 1 GB)")
    ap.add_argument("--array-size", type=int, default=100_000_000,
                    help="byte-array (pbcast.STATE_TRANSFER) state size in bytes (0: skip)")
    ap.add_argument("--pairs", default="PP,JP,PJ,JJ", help="provider+requester kinds: P jgpy, J Java")
    args = ap.parse_args(argv)

    pairs = [p.strip().upper() for p in args.pairs.split(",") if p.strip()]
    no_java = java_unavailable_reason()
    if no_java:
        progress(f"no Java peer ({no_java}): jgpy-only pairs")
        pairs = [p for p in pairs if "J" not in p]
    results: dict = {"streaming": [], "byte_array": [], "size": args.size, "array_size": args.array_size,
                     "config": "the jar's udp.xml; streaming: pbcast.STREAMING_STATE_TRANSFER (defaults: "
                               "socket_buffer_size 8192) instead of pbcast.STATE_TRANSFER"}
    cfg = load_config("udp.xml").replace("pbcast.STATE_TRANSFER", "pbcast.STREAMING_STATE_TRANSFER")
    f = tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-bench-streaming-", delete=False)
    f.write(cfg.to_xml())
    f.close()
    try:
        progress(f"expected SHA-256 of the {args.size / 1e6:.0f} MB generated state ...")
        sha = generated_sha256(args.size, SEED)
        for pair in pairs:
            progress(f"streaming {args.size / 1e6:.0f} MB, provider {_member(pair[0])}, requester "
                     f"{_member(pair[1])} ...")
            r = transfer(pair, f.name, args.size, sha)
            results["streaming"].append(r)
            progress(f"  {'ok' if r['ok'] else 'FAILED'}: {r['seconds']:.2f} s, {r['mb_per_s']:.0f} MB/s, peak RSS "
                     f"growth provider {r['provider_rss_growth_mb']:.1f} MB, requester "
                     f"{r['requester_rss_growth_mb']:.1f} MB")
        if args.array_size > 0:
            asha = generated_sha256(args.array_size, SEED)
            for pair in pairs:
                progress(f"byte array {args.array_size / 1e6:.0f} MB (pbcast.STATE_TRANSFER), provider "
                         f"{_member(pair[0])}, requester {_member(pair[1])} ...")
                r = transfer(pair, "udp.xml", args.array_size, asha)
                results["byte_array"].append(r)
                progress(f"  {'ok' if r['ok'] else 'FAILED'}: {r['seconds']:.2f} s, {r['mb_per_s']:.0f} MB/s, "
                         f"peak RSS growth provider {r['provider_rss_growth_mb']:.1f} MB, requester "
                         f"{r['requester_rss_growth_mb']:.1f} MB")
    finally:
        os.unlink(f.name)
    results["ok"] = all(r["ok"] for r in results["streaming"] + results["byte_array"])
    return results


if __name__ == "__main__":
    res = main()
    print(json.dumps(res, indent=1))
    sys.exit(0 if res["ok"] else 1)
