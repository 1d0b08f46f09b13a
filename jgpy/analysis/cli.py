"""``python -m jgpy check RUN_DIR [--master URL]``: check a run's delivery journals, print the verdict.

Exit status: 0 the guarantees hold (warnings allowed), 1 errors were found, 2 bad input, the ``analysis`` extra is
missing or the check failed (the message names the file, the extra to install or what Spark could not do; no Java
stack traces).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="the run directory (holding member=<name> journal directories)")
    p.add_argument("--master", default=os.environ.get("JGPY_SPARK_MASTER"),
                   help="Spark master URL (default local[*]; e.g. spark://host:7077 for a standalone cluster)")
    p.add_argument("--out", default=None, help="where to write report.md and the plots (default RUN_DIR/check)")
    p.add_argument("--grace", type=float, default=2.0,
                   help="seconds a crashed member's journal must reach past a send for it to be required (2)")
    p.add_argument("--total-order", choices=("auto", "on", "off"), default="auto",
                   help="check total order (auto: when a stack has SEQUENCER/TOTAL)")
    p.add_argument("--flush", choices=("auto", "on", "off"), default="auto",
                   help="same-view breaks are errors (auto: when a stack has FLUSH; else warnings)")
    p.add_argument("--examples", type=int, default=5, help="counterexamples per finding (5)")
    p.add_argument("--driver-memory", default=os.environ.get("JGPY_SPARK_DRIVER_MEMORY", "4g"),
                   help="Spark driver memory (local mode: all of Spark's memory; default 4g)")


#: what the checker imports (the ``analysis`` extra; of the rest of it, matplotlib draws the plots, pandas serves
#: PySpark)
REQUIRED_MODULES = ("pyspark", "pyarrow", "numpy")


def missing_extra() -> str | None:
    """None if the ``analysis`` extra is installed, else the message that says which modules miss and the fix."""
    missing = [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"python -m jgpy check needs the analysis extra (missing: {', '.join(missing)}): "
            f"pip install 'jgpy[analysis]'")


def _tri(v: str) -> bool | None:
    return None if v == "auto" else v == "on"


def main(args: argparse.Namespace) -> int:
    def out(line: str = "") -> None:
        print(line, flush=True)

    why = missing_extra()
    if why:
        out(f"error: {why}")
        return 2
    from jgpy.analysis import CheckError, JournalError, Options, check_run
    from jgpy.analysis.load import discover

    try:
        from jgpy.analysis.spark import get_session, spark_available, stop_session
        why = spark_available()
        if why:
            out(f"error: {why}")
            return 2
        opts = Options(grace_s=args.grace, flush=_tri(args.flush), total_order=_tri(args.total_order),
                       max_examples=args.examples)
        discover(args.run_dir)                      # bad input fails here, before Spark starts
        out(f"checking {args.run_dir} with Spark {args.master or 'local[*]'} ...")
        spark = get_session(args.master, driver_memory=args.driver_memory)
        try:
            res = check_run(args.run_dir, out_dir=args.out, options=opts, spark=spark)
        finally:
            stop_session(spark)
    except JournalError as e:
        out(f"error: {e}")
        return 2
    except CheckError as e:
        out(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        return 130
    out(f"{res.rows:,} journal rows of {len(res.stats['members'])} members checked in {res.seconds:.1f} s")
    for f in res.findings:
        out(f"  {f}")
    lat = res.stats.get("latency_overall")
    if lat and lat["n"]:
        out(f"  latency p50 {lat['p50_us']:,.0f} us, p99 {lat['p99_us']:,.0f} us, p99.9 {lat['p999_us']:,.0f} us "
            f"({lat['n']:,} deliveries)")
    out(f"verdict: {res.verdict}")
    out(f"report: {res.report}")
    return 0 if res.ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m jgpy.analysis.cli")
    add_arguments(p)
    sys.exit(main(p.parse_args()))
