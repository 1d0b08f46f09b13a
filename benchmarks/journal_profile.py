#!/usr/bin/env python3
"""The journal's share of a member's CPU at full rate, measured with ``perf`` where it runs.

A throughput A/B (runs with and without journals) cannot resolve a few percent on a shared 2-core VM whose
speed varies by +-25 % from one run to the next; this measures the cost directly instead. A jgpy sender
multicasts ``--messages`` small numbered messages to a jgpy receiver (separate processes, both with journals)
while ``perf record`` samples both processes. Per member it reports:

* the share of the samples in the journal's C code (``journalbuf``: recording a row, CRC-32C, names),
* the writer thread's CPU time (JOURNAL's ``flush_cpu_seconds``) as a share of the process's CPU time,
* their sum: what the journal costs the member, in % of its CPU.

The clock reads that stamp the rows land in the vDSO, shared with the rest of the stack: not counted here
(about 0.6 % at the sender, which reads it once per send). Needs ``perf`` (linux-perf) and permission to use it.

    python benchmarks/journal_profile.py [--messages 400000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def dso_shares(data: Path) -> dict[str, float]:
    """``perf report --sort dso``: percent of the samples per shared object."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso"],
                         capture_output=True, text=True, timeout=300).stdout
    shares: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith("%") and not line.lstrip().startswith("#"):
            shares[parts[1]] = shares.get(parts[1], 0.0) + float(parts[0].rstrip("%"))
    return shares


def measure(messages: int) -> dict:
    from jgpy.testing.java import PyNode, udp_props, unique_group
    tmp = Path(tempfile.mkdtemp(prefix="jgpy-journal-profile-"))
    r, s = PyNode(name="R"), PyNode(name="S")
    perfs: list[subprocess.Popen] = []
    try:
        props, cluster = udp_props(*unique_group()), f"jprof-{time.time_ns()}"
        for node in (r, s):
            node.call("connect", timeout=90, config="udp.xml", cluster=cluster, name=node.name,
                      props=props, receive="count", journal=str(tmp / "run=profile"))
        deadline = time.monotonic() + 30
        while len(r.call("view")["members"]) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the receiver and the sender did not form one view within 30 s")
            time.sleep(0.1)
        s.send(payload=b"S", count=20_000, numbered=True, timeout=120)          # warm-up (not profiled)
        time.sleep(1.5)
        before = {n.name: (n.call("stats")["cpu_seconds"], n.call("dump_stats")["stats"]["JOURNAL"])
                  for n in (s, r)}
        for n in (s, r):
            perfs.append(subprocess.Popen(["perf", "record", "-q", "-o", str(tmp / f"perf-{n.name}.data"), "-p",
                                           str(n.proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
        rep = s.send(payload=b"S", count=messages, numbered=True, timeout=600)
        time.sleep(1.5)                                         # the periodic flush writes the last rows
        for p in perfs:
            p.send_signal(2)
        for p in perfs:
            p.wait(120)
        out: dict = {"messages": messages, "send_seconds": rep["seconds"], "members": {}}
        for n in (s, r):
            cpu = n.call("stats")["cpu_seconds"] - before[n.name][0]
            j0, j1 = before[n.name][1], n.call("dump_stats")["stats"]["JOURNAL"]
            writer = j1["flush_cpu_seconds"] - j0["flush_cpu_seconds"]
            rows = j1["rows_written"] - j0["rows_written"]
            shares = dso_shares(tmp / f"perf-{n.name}.data")
            code = sum(v for k, v in shares.items() if "journalbuf" in k)
            out["members"][n.name] = {
                "role": "sender" if n is s else "receiver", "cpu_seconds": cpu, "rows": rows,
                "cpu_us_per_message": cpu / messages * 1e6, "journal_code_pct": code,
                "writer_cpu_seconds": writer, "writer_ns_per_row": writer / max(1, rows) * 1e9,
                "writer_pct": 100 * writer / cpu if cpu > 0 else None,
                "journal_pct": code + (100 * writer / cpu if cpu > 0 else 0.0)}
        for n in (s, r):
            n.call("disconnect", timeout=60)
        return out
    finally:
        for p in perfs:
            if p.poll() is None:
                p.kill()
        s.close()
        r.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=400_000)
    args = ap.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (apt-get install -y linux-perf)")
    res = measure(args.messages)
    for name, m in res["members"].items():
        print(f"{name} ({m['role']}): journal {m['journal_pct']:.1f} % of its CPU = its C code "
              f"{m['journal_code_pct']:.1f} % of the samples + writer thread {m['writer_pct']:.1f} % "
              f"({m['writer_ns_per_row']:.0f} ns a row, {m['rows']:,} rows); {m['cpu_us_per_message']:.2f} us "
              f"of CPU a message")
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
