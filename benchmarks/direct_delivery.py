#!/usr/bin/env python3
"""Round trips with the transport's thread pools on (the jar's ``udp.xml``) and off, Java and jgpy.

``thread_pool.enabled="false"`` and ``oob_thread_pool.enabled="false"`` make the receive threads deliver
themselves (Java: its ``DirectExecutor``; jgpy: ``SerialExecutor(caller_runs=True)``, while the delivery
thread is idle), which saves one thread switch per message on each side. This runs the 100 B request/response workload of
``make bench`` for each cluster kind with both configs, alternating (pooled, direct, pooled, ...), so the
machine's drift hits both alike, and prints the medians of the repetitions and the ratios.

    python benchmarks/direct_delivery.py [--kinds PP,JJ] [--reps 3] [--count 8000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def direct_config(path: Path) -> Path:
    """The jar's udp.xml with both thread pools disabled, written to ``path``."""
    from jgpy.stack.config import load_config

    cfg = load_config("udp.xml").with_properties("UDP", **{"thread_pool.enabled": "false",
                                                           "oob_thread_pool.enabled": "false"})
    path.write_text(cfg.to_xml(), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    from jgpy.tools.perf import Cluster, Workload, directions, receiver_for

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="PP,JJ", help="comma-separated clusters (P: jgpy, J: Java)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=8000, help="measured round trips per run")
    args = ap.parse_args(argv)
    w = Workload("rtt_100", "100 B request/response round trip", "rtt", 100, args.count, 1000)
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"pooled": "udp.xml", "direct": str(direct_config(Path(tmp) / "udp-direct.xml"))}
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for rep in range(args.reps):
            for kinds in args.kinds.split(","):
                for label, config in configs.items():
                    with Cluster(kinds, config=config) as c:
                        _, sender = directions(c.kinds, w)[0]
                        m = c.measure(w, sender, receiver_for(c.kinds, sender))
                    rtt = m.rtt or {}
                    runs.setdefault((kinds, label), []).append((rtt.get("median_us"), rtt.get("p99_us")))
                    print(f"[{rep + 1}/{args.reps}] {kinds} {label}: median {rtt.get('median_us', 0):.0f} us, "
                          f"p99 {rtt.get('p99_us', 0):.0f} us", flush=True)
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
    print("\n| cluster | pools | median us | p99 us | direct / pooled (median) |")
    print("|---|---|---:|---:|---:|")
    for (kinds, label), (m50, m99) in med.items():
        ratio = m50 / med[(kinds, "pooled")][0] if label == "direct" else 1.0
        print(f"| {kinds} | {label} | {m50:.0f} | {m99:.0f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
