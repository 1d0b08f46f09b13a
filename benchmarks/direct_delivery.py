#!/usr/bin/env python3
"""Round trips with the transport's thread pools on (the jar's ``udp.xml``) and off, Java and jgpy.

``thread_pool.enabled="false"`` and ``oob_thread_pool.enabled="false"`` make the receive threads deliver
themselves (Java: its ``DirectExecutor``; jgpy: ``SerialExecutor(caller_runs=True)``, while the delivery
thread is idle), which saves one thread switch per message on each side. This runs the 100 B
request/response workload of ``make bench`` for each cluster kind with both configs, alternating (pooled,
direct, pooled, ...), so the machine's drift hits both alike, and prints the medians of the repetitions and
the ratios (``make bench`` runs it as a section of ``benchmarks/run.py``).

    python benchmarks/direct_delivery.py [--kinds PP,JJ] [--reps 3] [--count 8000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def progress(msg: str) -> None:
    print(f"[direct-delivery {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def direct_config(path: Path) -> Path:
    """The jar's udp.xml with both thread pools disabled, written to ``path``."""
    from jgpy.stack.config import load_config

    cfg = load_config("udp.xml").with_properties("UDP", **{"thread_pool.enabled": "false",
                                                           "oob_thread_pool.enabled": "false"})
    path.write_text(cfg.to_xml(), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> dict:
    """Run the comparison; returns {"runs": ..., "medians": ..., "markdown": [lines]} (``benchmarks/run.py``
    puts the markdown into RESULTS.md)."""
    from jgpy.tools.perf import Cluster, Workload, directions, receiver_for

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="PP,JJ", help="comma-separated clusters (P: jgpy, J: Java)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--count", type=int, default=8000, help="measured round trips per run")
    args = ap.parse_args(argv)
    w = Workload("rtt_100", "100 B request/response round trip", "rtt", 100, args.count, 1000)
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"pooled": "udp.xml", "direct": str(direct_config(Path(tmp) / "udp-direct.xml"))}
        for rep in range(args.reps):
            for kinds in args.kinds.split(","):
                for label, config in configs.items():
                    with Cluster(kinds, config=config) as c:
                        _, sender = directions(c.kinds, w)[0]
                        m = c.measure(w, sender, receiver_for(c.kinds, sender))
                    rtt = m.rtt or {}
                    runs.setdefault(f"{kinds} {label}", []).append(
                        {k: rtt.get(k) for k in ("median_us", "p99_us", "p999_us")})
                    progress(f"[{rep + 1}/{args.reps}] {kinds} {label}: median "
                             f"{rtt.get('median_us') or 0:.0f} us, p99 {rtt.get('p99_us') or 0:.0f} us")
    medians = {key: {q: statistics.median(r[q] for r in rs if r[q] is not None) for q in ("median_us", "p99_us")}
               for key, rs in runs.items()}
    md = [f"100 B request/response, {args.count:,} round trips after 1,000 warm-up, {args.reps} repetitions "
          "alternating; medians of the repetitions. pooled: the jar's `udp.xml`; direct: the same with "
          "`thread_pool.enabled=\"false\"` and `oob_thread_pool.enabled=\"false\"` (the receive threads "
          "deliver).", "",
          "| cluster | pools | median us | p99 us | median direct / pooled |", "|---|---|---:|---:|---:|"]
    for key, m in medians.items():
        kinds, label = key.split()
        base = medians.get(f"{kinds} pooled", {}).get("median_us")
        ratio = f"{m['median_us'] / base:.2f}" if label == "direct" and base else "-"
        md.append(f"| {kinds} | {label} | {m['median_us']:,.0f} | {m['p99_us']:,.0f} | {ratio} |")
    pd, jd, jp = (medians.get(k, {}).get("median_us") for k in ("PP direct", "JJ direct", "JJ pooled"))
    if pd and jd and jp:
        md += ["", f"jgpy direct / Java direct (median): {pd / jd:.2f}; jgpy direct / Java pooled: {pd / jp:.2f}."]
    return {"runs": runs, "medians": medians, "markdown": md}


if __name__ == "__main__":
    print("\n".join(main()["markdown"]))
