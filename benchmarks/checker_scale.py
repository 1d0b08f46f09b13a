#!/usr/bin/env python3
"""The journal checker at scale, and the journal writer's cost.

1. Generate synthetic journals with 10^8 delivery events (10 members, a join half way: views of 9 then 10
   members, every member multicasting; ``jgpy.analysis.synth``) and check them with Spark in local mode
   (``local[*]``): wall time and events/s.
2. Check the same journals on a Spark standalone cluster (a master and one worker started on 127.0.0.1 from the
   pip pyspark package by this script, stopped afterwards): the path to a real cluster.
3. The writer's cost at full rate: a jgpy sender process multicasting numbered messages to a jgpy receiver
   process, with and without journals (alternating runs, medians).

``main()`` returns a dict (top-level scalars: the headline figures); run directly it prints it as JSON::

    python benchmarks/checker_scale.py [--events 100000000] [--no-cluster] [--no-overhead] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.analysis import Options, check_run, synth  # noqa: E402
from jgpy.analysis.spark import StandaloneCluster, get_session, spark_available, stop_session  # noqa: E402


def progress(msg: str) -> None:
    print(f"[checker-scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def scale_spec(events: int) -> synth.Spec:
    """10 members; view 1: 9 of them, view 2: all 10; each multicasts n per view: 181 n deliveries in all."""
    members = [f"M{i}" for i in range(10)]
    n = max(1, round(events / 181))
    return synth.Spec(views=[members[:9], members], msgs_per_view=n, unicasts_per_view=min(1000, n), rate=200_000,
                      latency_us=400.0, seed=7)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _check(run_dir: Path, master: str, **session) -> dict:
    t0 = time.perf_counter()
    spark = get_session(master, **session)
    t1 = time.perf_counter()
    try:
        res = check_run(run_dir, spark=spark, out_dir=run_dir.parent / f"check-{master.split(':')[0]}",
                        options=Options())
    finally:
        stop_session(spark)
    wall = time.perf_counter() - t0
    deliveries = sum(m["deliveries"] for m in res.stats["members"].values())
    return {"master": master, "verdict": res.verdict, "findings": [str(f) for f in res.findings],
            "rows": res.rows, "deliveries": deliveries, "session_start_s": t1 - t0, "check_s": res.seconds,
            "wall_s": wall, "delivery_events_per_s": deliveries / res.seconds, "rows_per_s": res.rows / res.seconds,
            "phases_s": res.stats.get("phase_seconds"), "latency_p50_us": res.stats["latency_overall"]["p50_us"],
            "latency_p99_us": res.stats["latency_overall"]["p99_us"],
            "latency_sample_every": res.stats.get("latency_sample_every"), "report": str(res.report)}


def overhead(count: int, reps: int) -> dict:
    """Receiver and sender rates without and with journals; alternating runs, medians."""
    from tests.test_journal import _rate                      # the same measurement the test makes
    from jgpy.testing.java import udp_props, unique_group
    tmp = Path(tempfile.mkdtemp(prefix="jgpy-bench-journal-"))
    base, jour = [], []
    try:
        for i in range(reps):
            for with_journal, out in ((False, base), (True, jour)):
                run = tmp / f"run={i}" if with_journal else None
                out.append(_rate(f"bench-ovh-{os.getpid()}-{i}-{int(with_journal)}", udp_props(*unique_group()),
                                 run, count))
                progress(f"  run {i + 1}/{reps} {'with' if with_journal else 'without'} journal: receiver "
                         f"{out[-1][0]:,.0f} msgs/s, sender {out[-1][1]:,.0f} msgs/s; CPU per message: sender "
                         f"{out[-1][3]['S']:.2f} us, receiver {out[-1][3]['R']:.2f} us")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    b_r, j_r = med([x[0] for x in base]), med([x[0] for x in jour])
    b_s, j_s = med([x[1] for x in base]), med([x[1] for x in jour])
    cpu = {k: (med([x[3][k] for x in base]), med([x[3][k] for x in jour])) for k in ("S", "R")}
    # the journal's own cost, measured where it runs: rows per message x (sampled recording wall time + writer
    # thread CPU); an upper bound (wall time on a shared VM includes stolen time): journal_profile.py uses perf
    own = {k: med([x[2][k]["rows"] * (x[2][k]["record"] + x[2][k]["flush"]) / 1e3 for x in jour]) for k in ("S", "R")}
    return {"messages": count, "reps": reps, "receiver_msgs_per_s": b_r, "receiver_msgs_per_s_journal": j_r,
            "receiver_slowdown_pct": 100 * (1 - j_r / b_r), "sender_msgs_per_s": b_s, "sender_msgs_per_s_journal": j_s,
            "sender_slowdown_pct": 100 * (1 - j_s / b_s),
            "flush_cpu_ns_per_row_receiver": med([x[2]["R"]["flush"] for x in jour]),
            "flush_cpu_ns_per_row_sender": med([x[2]["S"]["flush"] for x in jour]),
            "record_ns_per_row_receiver": med([x[2]["R"]["record"] for x in jour]),
            "record_ns_per_row_sender": med([x[2]["S"]["record"] for x in jour]),
            "journal_us_per_msg_receiver": own["R"], "journal_us_per_msg_sender": own["S"],
            "journal_cost_pct_receiver": 100 * own["R"] / cpu["R"][0],
            "journal_cost_pct_sender": 100 * own["S"] / cpu["S"][0],
            "sender_cpu_us_per_msg": cpu["S"][0], "sender_cpu_us_per_msg_journal": cpu["S"][1],
            "sender_cpu_added_pct": 100 * (cpu["S"][1] / cpu["S"][0] - 1),
            "receiver_cpu_us_per_msg": cpu["R"][0], "receiver_cpu_us_per_msg_journal": cpu["R"][1],
            "receiver_cpu_added_pct": 100 * (cpu["R"][1] / cpu["R"][0] - 1)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=int(os.environ.get("JGPY_BENCH_CHECKER_EVENTS", 100_000_000)),
                    help="delivery events to generate and check (default 10^8)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temporary directory, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the generated journals")
    ap.add_argument("--no-cluster", action="store_true", help="skip the standalone-cluster run")
    ap.add_argument("--no-overhead", action="store_true", help="skip the journal writer's cost")
    ap.add_argument("--overhead-messages", type=int, default=200_000)
    ap.add_argument("--overhead-reps", type=int, default=5)
    ap.add_argument("--driver-memory", default="8g", help="local mode: Spark's memory (default 8g)")
    args = ap.parse_args(argv)
    why = spark_available()
    if why:
        progress(f"cannot run: {why}")
        return {"skipped": why}
    out: dict = {}
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="jgpy-bench-checker-"))
    run_dir = root / "run=scale"
    try:
        spec = scale_spec(args.events)
        if not run_dir.is_dir():
            progress(f"generating about {args.events:,} delivery events (10 members, {spec.msgs_per_view:,} "
                     f"multicasts per member per view) in {run_dir} ...")
            t0 = time.perf_counter()
            synth.write_run(run_dir, spec, part_rows=2_000_000)
            out["generate_s"] = time.perf_counter() - t0
        out["journal_bytes"] = _du(run_dir)
        progress(f"  {out['journal_bytes'] / 1e9:.2f} GB of Parquet" +
                 (f" in {out['generate_s']:.0f} s" if "generate_s" in out else ""))
        progress("checking in local mode (local[*]) ...")
        local = _check(run_dir, "local[*]", driver_memory=args.driver_memory, shuffle_partitions=32)
        progress(f"  {local['verdict']}: {local['deliveries']:,} delivery events ({local['rows']:,} rows) in "
                 f"{local['check_s']:.0f} s: {local['delivery_events_per_s']:,.0f} delivery events/s; phases "
                 f"{local['phases_s']}")
        out.update(delivery_events=local["deliveries"], journal_rows=local["rows"], local_verdict=local["verdict"],
                   local_check_s=local["check_s"], local_delivery_events_per_s=local["delivery_events_per_s"])
        out["local"] = local
        if not args.no_cluster:
            progress("starting a Spark standalone master and worker on 127.0.0.1 ...")
            with StandaloneCluster(cores=os.cpu_count() or 2, memory="6g") as cluster:
                progress(f"  {cluster.url} up; checking the same journals there ...")
                cl = _check(run_dir, cluster.url, driver_memory="2g", executor_memory="5g", shuffle_partitions=32)
            progress(f"  {cl['verdict']}: {cl['check_s']:.0f} s, {cl['delivery_events_per_s']:,.0f} delivery "
                     f"events/s; master and worker stopped")
            out.update(cluster_verdict=cl["verdict"], cluster_check_s=cl["check_s"],
                       cluster_delivery_events_per_s=cl["delivery_events_per_s"])
            out["cluster"] = cl
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    if not args.no_overhead:
        progress(f"journal writer cost: {args.overhead_messages:,} messages, {args.overhead_reps} runs each ...")
        ov = overhead(args.overhead_messages, args.overhead_reps)
        progress(f"  receiver {ov['receiver_msgs_per_s']:,.0f} -> {ov['receiver_msgs_per_s_journal']:,.0f} msgs/s "
                 f"({ov['receiver_slowdown_pct']:+.1f} %), sender {ov['sender_msgs_per_s']:,.0f} -> "
                 f"{ov['sender_msgs_per_s_journal']:,.0f} msgs/s ({ov['sender_slowdown_pct']:+.1f} %); CPU per "
                 f"message: sender {ov['sender_cpu_us_per_msg']:.2f} -> {ov['sender_cpu_us_per_msg_journal']:.2f} us, "
                 f"receiver {ov['receiver_cpu_us_per_msg']:.2f} -> {ov['receiver_cpu_us_per_msg_journal']:.2f} us")
        progress(f"  the journal's own cost, upper bound (sampled recording wall time + writer thread): receiver "
                 f"{ov['journal_us_per_msg_receiver'] * 1e3:.0f} ns a message ({ov['journal_cost_pct_receiver']:.1f} % "
                 f"of its CPU), sender {ov['journal_us_per_msg_sender'] * 1e3:.0f} ns "
                 f"({ov['journal_cost_pct_sender']:.1f} %)")
        out.update(journal_receiver_slowdown_pct=ov["receiver_slowdown_pct"],
                   journal_sender_slowdown_pct=ov["sender_slowdown_pct"],
                   journal_flush_cpu_ns_per_row=ov["flush_cpu_ns_per_row_receiver"],
                   journal_sender_cpu_added_pct=ov["sender_cpu_added_pct"],
                   journal_receiver_cpu_added_pct=ov["receiver_cpu_added_pct"],
                   journal_cost_pct_receiver=ov["journal_cost_pct_receiver"],
                   journal_cost_pct_sender=ov["journal_cost_pct_sender"],
                   journal_record_ns_per_row=ov["record_ns_per_row_receiver"])
        out["overhead"] = ov
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1, default=str))
