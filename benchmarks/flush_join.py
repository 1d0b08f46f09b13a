#!/usr/bin/env python3
"""A join with pbcast.FLUSH under traffic: how long the third member's ``connect`` takes on the jar's
``flush-udp.xml`` while the two members already in the cluster multicast, Java-only, jgpy-only and mixed.

Per round and kind (``JJJ``: Java, ``PPP``: jgpy, ``JPP``/``PJJ``: mixed, the first letter the coordinator) a
fresh cluster: two members connect, both start multicasting ``count`` numbered 1 KB messages, after ``lead``
seconds the third connects, timed from the driver (the ``connect`` call: discovery, the coordinator's flush of
the two members, the view, the flush's end and the joiner's UNBLOCK). The kinds are interleaved per round so the
noise of a shared machine hits them alike; also reported: a join without traffic, per kind, the same way::

    python benchmarks/flush_join.py [--rounds 5] [--count 20000] [--kinds JJJ,PPP,JPP,PJJ] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.testing.java import JavaNode, PyNode, ensure_compiled, udp_props, unique_group  # noqa: E402

CONFIG = "flush-udp.xml"


def _node(kind: str, name: str):
    return JavaNode(name=name) if kind == "J" else PyNode(name=name)


def join_once(kinds: str, count: int, lead: float) -> dict:
    """One cluster of ``kinds``: the third member's connect time (s) while the first two send ``count``
    multicasts each (``count`` 0: no traffic), and how many they had delivered when it began and ended."""
    props = udp_props(*unique_group())
    cluster = f"fjoin-{uuid.uuid4().hex[:8]}"
    nodes = []
    try:
        for i, k in enumerate(kinds):
            nodes.append(_node(k, f"{k}{i + 1}"))
        a, b, c = nodes
        for n in (a, b):
            n.connect(CONFIG, cluster, props, receive="count", timeout=120)
        senders = [threading.Thread(target=n.send, kwargs=dict(payload=b"x" * 1000, count=count, timeout=600),
                                    daemon=True) for n in (a, b) if count]
        for t in senders:
            t.start()
        time.sleep(lead)
        t0 = time.monotonic()
        c.connect(CONFIG, cluster, props, receive="count", timeout=120)
        took = time.monotonic() - t0
        sending = any(t.is_alive() for t in senders)
        for t in senders:
            t.join(600)
        return {"kinds": kinds, "seconds": took, "traffic": bool(count), "still_sending_after": sending}
    finally:
        for n in nodes:
            n.close()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=20000, help="multicasts per sender during the join")
    ap.add_argument("--lead", type=float, default=0.5, help="seconds of traffic before the join")
    ap.add_argument("--kinds", default="JJJ,PPP,JPP,PJJ")
    ap.add_argument("--json", help="write the records here")
    args = ap.parse_args(argv)
    ensure_compiled()
    kinds = args.kinds.split(",")
    records = []
    for r in range(args.rounds):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]          # a different kind first each round
        for k in order:
            for count in (args.count, 0):
                rec = join_once(k, count, args.lead)
                rec["round"] = r
                records.append(rec)
                print(f"[flush_join] round {r} {k} {'traffic' if count else 'idle   '}: {rec['seconds']:.3f} s"
                      + ("" if not count or rec["still_sending_after"] else " (traffic ended before the join did)"),
                      flush=True)
    summary = {}
    for k in kinds:
        for traffic in (True, False):
            xs = [x["seconds"] for x in records if x["kinds"] == k and x["traffic"] == traffic]
            summary[f"{k}/{'traffic' if traffic else 'idle'}"] = {
                "median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}
    for key, s in summary.items():
        print(f"{key:14s} median {s['median']:.3f} s  (min {s['min']:.3f}, max {s['max']:.3f}, n={s['n']})")
    out = {"config": CONFIG, "count": args.count, "lead": args.lead, "records": records, "summary": summary}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
