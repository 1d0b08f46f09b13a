#!/usr/bin/env python3
"""``make bench``: jgpy's and Java's benchmarks side by side in one invocation, and the results written.

Sections (each can be skipped): the wire codec against Java's CodecBench, the micro benchmarks
(pytest-benchmark: seqno tables, FRAG2, UDP core), the end-to-end suite (``benchmarks/e2e.py``: Java-only,
jgpy-only and mixed clusters of member processes, and the raw C limit), the state transfer benchmark
(``benchmarks/state_transfer.py``), round trips with the thread pools disabled (``benchmarks/direct_delivery.py``)
and the checker scale run (``benchmarks/checker_scale.py``, when present).

Writes ``benchmarks/results/<stamp>.json`` (every figure), ``benchmarks/RESULTS.md`` (the tables, the ratios
jgpy/Java and the command that produced them) and ``benchmarks/plots/*.png``. Progress goes to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.testing.java import JGROUPS_JAR, ensure_compiled, java_unavailable_reason  # noqa: E402

RESULTS_DIR = ROOT / "benchmarks" / "results"
PLOTS_DIR = ROOT / "benchmarks" / "plots"

#: (label, jgpy benchmark, Java CodecBench key, messages per operation)
CODEC_ROWS = [
    ("encode 1 KB message (reused buffer)", "test_encode_1k_reuse", "encode_1k", 1),
    ("encode 1 KB message (new bytes)", "test_encode_1k", "encode_1k", 1),
    ("decode 1 KB message (headers located, built on access)", "test_decode_1k_lazy", "decode_1k", 1),
    ("decode 1 KB message (all header objects built)", "test_decode_1k_full", "decode_1k", 1),
    ("encode 64-message bundle (reused buffer)", "test_encode_bundle64_reuse", "encode_bundle64", 64),
    ("decode 64-message bundle (headers on access)", "test_decode_bundle64_lazy", "decode_bundle64", 64),
    ("decode 64-message bundle (all header objects built)", "test_decode_bundle64_full", "decode_bundle64", 64),
]
MICRO_FILES = ["test_tables.py", "test_frag2.py", "test_udp_core.py"]


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- micro

def run_pytest_bench(name: str, extra: list[str] = ()) -> dict[str, dict]:
    """Run one pytest-benchmark file; {benchmark name: median/min/mean ns, rounds, extra_info}."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "benchmarks" / name),
               f"--benchmark-json={out}", *extra]
        res = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        if res.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{res.stdout[-3000:]}")
        data = json.loads(Path(out).read_text())
    finally:
        os.unlink(out)
    return {b["name"]: {"median_ns": b["stats"]["median"] * 1e9, "min_ns": b["stats"]["min"] * 1e9,
                        "mean_ns": b["stats"]["mean"] * 1e9, "rounds": b["stats"]["rounds"],
                        "extra_info": b.get("extra_info") or {}}
            for b in data["benchmarks"]}


def run_jgpy_codec() -> dict[str, dict]:
    progress("jgpy codec benchmarks (pytest-benchmark) ...")
    return run_pytest_bench("test_codec.py", ["--benchmark-min-rounds=2000", "--benchmark-max-time=2"])


def run_java_codec(seconds: float) -> dict:
    progress(f"Java CodecBench ({seconds:g} s per case after warm-up) ...")
    classes = ensure_compiled()
    cp = f"{classes}{os.pathsep}{JGROUPS_JAR}"
    base = ["java", "-Djava.net.preferIPv4Stack=true", "-cp", cp, "org.jgpy.interop.CodecBench"]
    hexes = json.loads(subprocess.run(base + ["--hex"], capture_output=True, text=True, check=True).stdout)
    from benchmarks import workloads as W
    same = (bytes.fromhex(hexes["single_hex"]) == W.single_datagram()
            and bytes.fromhex(hexes["bundle_hex"]) == W.bundle_datagram(64))
    if not same:
        raise SystemExit("jgpy and CodecBench do not build identical datagrams: the comparison would be unfair")
    res = subprocess.run(base + ["--seconds", str(seconds)], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_micro() -> dict[str, dict]:
    out = {}
    for name in MICRO_FILES:
        progress(f"micro benchmarks {name} ...")
        out[name] = run_pytest_bench(name)
    return out


def codec_table(jg: dict, java: dict) -> list[str]:
    jr = java["results"]
    lines = ["| operation | Java 2.12.2 ns/op | jgpy ns/op (median) | jgpy ns/message | jgpy / Java |",
             "|---|---:|---:|---:|---:|"]
    for label, name, key, per in CODEC_ROWS:
        if name not in jg or key not in jr:
            continue
        j, p = jr[key], jg[name]["median_ns"]
        lines.append(f"| {label} | {j:,.0f} | {p:,.0f} | {p / per:,.0f} | {p / j:.2f} |")
    return lines


def micro_tables(micro: dict) -> list[str]:
    md = []
    tables = micro.get("test_tables.py")
    if tables:
        md += ["### Seqno tables (NAKACK, UNICAST): 1,000,000 seqnos per round", "",
               "`benchmarks/test_tables.py`: `late_1pct` delays 1 % of the seqnos by 100 positions (a gap, "
               "registered for retransmission, filled later).", "",
               "| benchmark | median ms per round of 1M (= ns per seqno) |", "|---|---:|"]
        for name, b in sorted(tables.items(), key=lambda kv: kv[1]["median_ns"]):
            md.append(f"| {name} | {b['median_ns'] / 1e6:,.1f} |")
    frag = micro.get("test_frag2.py")
    if frag:
        md += ["", "### FRAG2: a 10 MB message", "", "`benchmarks/test_frag2.py` (frag_size in brackets).", "",
               "| benchmark | median ms | MB/s |", "|---|---:|---:|"]
        for name, b in frag.items():
            md.append(f"| {name} | {b['median_ns'] / 1e6:,.2f} | {10_000_000 / (b['median_ns'] / 1e9) / 1e6:,.0f} |")
    udp = micro.get("test_udp_core.py")
    if udp:
        md += ["", "### UDP core (bundler, receive loop), 1 KB entries on loopback", "",
               "`benchmarks/test_udp_core.py`.", "", "| benchmark | figures |", "|---|---|"]
        for name, b in udp.items():
            figs = ", ".join(f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in b["extra_info"].items())
            md.append(f"| {name} | {figs} |")
    return md


# ---------------------------------------------------------------------------------------------- optional sections

def call_main(module: str) -> dict:
    """``benchmarks.<module>.main()`` (with an empty argv if it takes one)."""
    mod = importlib.import_module(f"benchmarks.{module}")
    fn = mod.main
    params = inspect.signature(fn).parameters
    return fn([]) if params else fn()


def state_tables(st: dict) -> list[str]:
    md = []
    for kind, title in (("streaming", "pbcast.STREAMING_STATE_TRANSFER"), ("byte_array", "pbcast.STATE_TRANSFER")):
        rows = st.get(kind) or []
        if not rows:
            continue
        size = rows[0].get("size", 0)
        md += ["", f"### State transfer: {size / 1e6:,.0f} MB with {title}", "",
               "| provider -> requester | ok | seconds | MB/s | peak RSS growth provider MB | "
               "peak RSS growth requester MB |", "|---|---|---:|---:|---:|---:|"]
        for r in rows:
            def f(k, d=1):
                v = r.get(k)
                return f"{v:,.{d}f}" if isinstance(v, (int, float)) else "-"
            md.append(f"| {r.get('provider', '?')} -> {r.get('requester', '?')} | {'yes' if r.get('ok') else 'NO'} | "
                      f"{f('seconds', 2)} | {f('mb_per_s', 0)} | {f('provider_rss_growth_mb')} | "
                      f"{f('requester_rss_growth_mb')} |")
    return md


def generic_table(d: dict) -> list[str]:
    """Top-level scalar figures of a section we know nothing about."""
    rows = [(k, v) for k, v in d.items() if isinstance(v, (int, float, str, bool))]
    if not rows:
        return ["(see the JSON file)"]
    md = ["| figure | value |", "|---|---:|"]
    for k, v in rows:
        md.append(f"| {k} | {v:,.3f} |" if isinstance(v, float) else f"| {k} | {v} |")
    return md


# ---------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--java-seconds", type=float, default=3.0, help="seconds per CodecBench case")
    ap.add_argument("--e2e-scale", type=float, default=float(os.environ.get("JGPY_BENCH_E2E_SCALE", 1.0)),
                    help="multiply the end-to-end message counts by this (default 1)")
    ap.add_argument("--reps", type=int, default=3, help="end-to-end repetitions (default 3)")
    ap.add_argument("--skip-codec", action="store_true")
    ap.add_argument("--skip-micro", action="store_true")
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--skip-state", action="store_true", help="skip benchmarks/state_transfer.py")
    ap.add_argument("--skip-checker", action="store_true", help="skip benchmarks/checker_scale.py")
    ap.add_argument("--skip-direct", action="store_true", help="skip benchmarks/direct_delivery.py")
    ap.add_argument("--skip-rpc", action="store_true", help="skip benchmarks/rpc.py")
    ap.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md and plots/")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))        # finally blocks reap every member process
    reason = java_unavailable_reason()
    if reason:
        progress(f"the Java side cannot run: {reason}")
        return 2
    command = "make bench" if os.environ.get("MAKELEVEL") else "python benchmarks/run.py"
    command += "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    started = time.time()
    env = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": os.cpu_count(),
           "kernel": platform.release(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "load_avg_at_start": os.getloadavg()}
    record: dict = {"env": env, "command": command}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    md_sections: list[str] = []
    failures: list[str] = []

    def section(name: str, fn):
        t0 = time.time()
        try:
            out = fn()
            progress(f"{name}: done in {time.time() - t0:.0f} s")
            return out
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - one failed section must not lose the others
            failures.append(f"{name}: {type(e).__name__}: {e}")
            progress(f"{name} FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
            return None

    if not args.skip_codec:
        jg = section("codec (jgpy)", run_jgpy_codec)
        java = section("codec (Java)", lambda: run_java_codec(args.java_seconds))
        if jg and java:
            env["java"] = java.get("java")
            record["codec"] = {"jgpy": jg, "java": java}
            md_sections += ["## Wire codec", "",
                            "The same datagrams on both sides (checked byte for byte before timing): a 1 KB multicast "
                            "data message (NAKACK + UDP TpHeader + 1024-byte payload) sent singly, and a bundle of 64 "
                            "of them. Java: `interop/.../CodecBench.java` (JIT-warmed, reused buffers). jgpy: "
                            "`benchmarks/test_codec.py` (pytest-benchmark medians, each call including the Python "
                            "call overhead).", "", *codec_table(jg, java), ""]
    if not args.skip_micro:
        micro = section("micro benchmarks", run_micro)
        if micro:
            record["micro"] = micro
            md_sections += ["## Micro benchmarks (jgpy)", "", *micro_tables(micro), ""]
    if not args.skip_e2e:
        from benchmarks import e2e
        progress("end-to-end suite ...")
        res = section("end-to-end", lambda: e2e.run(args.e2e_scale, args.reps))
        if res:
            record["e2e"] = res
            plots_dir = RESULTS_DIR if args.no_write else PLOTS_DIR
            written = e2e.plots(res, plots_dir, prefix=f"{stamp}-" if args.no_write else "")
            if not args.no_write:
                RESULTS_DIR.mkdir(parents=True, exist_ok=True)
                for p in written:
                    shutil.copy(p, RESULTS_DIR / f"{stamp}-{p.name}")
            md_sections += ["## End to end: Java, jgpy and mixed clusters", "",
                            f"Members are separate processes on loopback, the jar's `{res['config']}` on a private "
                            f"multicast group per cluster, {res['reps']} repetitions (kinds interleaved), message "
                            f"counts x{res['scale']:g}; the raw limit (`benchmarks/rawlimit.c`) ran in the same "
                            f"invocation. Suite: `benchmarks/e2e.py` ({res['seconds'] / 60:.1f} min). "
                            "What every figure means: `benchmarks/README.md`.", ""]
            if written and not args.no_write:
                md_sections += [f"![throughput by message size](plots/{written[0].name})", ""]
                if len(written) > 1:
                    md_sections += [f"![round-trip CDF](plots/{written[1].name})", ""]
            md_sections += [*e2e.markdown(res), ""]
    if not args.skip_state:
        progress("state transfer benchmark (benchmarks/state_transfer.py) ...")
        st = section("state transfer", lambda: call_main("state_transfer"))
        if st:
            record["state_transfer"] = st
            md_sections += ["## State transfer (`benchmarks/state_transfer.py`)", *state_tables(st), ""]
    if not args.skip_direct:
        progress("round trips with the thread pools disabled (benchmarks/direct_delivery.py) ...")
        dd = section("direct delivery", lambda: call_main("direct_delivery"))
        if dd:
            record["direct_delivery"] = {k: v for k, v in dd.items() if k != "markdown"}
            md_sections += ["## Round trip with the thread pools disabled (`benchmarks/direct_delivery.py`)", "",
                            *dd["markdown"], ""]
    if not args.skip_rpc:
        progress("RpcDispatcher calls (benchmarks/rpc.py) ...")
        rpc = section("rpc", lambda: call_main("rpc"))
        if rpc:
            record["rpc"] = {k: v for k, v in rpc.items() if k != "markdown"}
            md_sections += ["## RpcDispatcher calls (`benchmarks/rpc.py`)", "", *rpc["markdown"], ""]
    if not args.skip_checker:
        if (ROOT / "benchmarks" / "checker_scale.py").is_file():
            progress("checker scale run (benchmarks/checker_scale.py) ...")
            ck = section("checker scale", lambda: call_main("checker_scale"))
            if ck:
                record["checker_scale"] = ck
                md_sections += ["## Checker scale run (`benchmarks/checker_scale.py`)", "", *generic_table(ck), ""]
        else:
            progress("benchmarks/checker_scale.py does not exist yet: skipped")
    soak = importlib.import_module("benchmarks.soak").soak_section()
    if soak:                                   # the latest `make soak` runs (benchmarks/SOAK.md), not re-run here
        md_sections += [soak]
    env["seconds"] = time.time() - started
    record["failures"] = failures
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{stamp}.json").write_text(json.dumps(record, indent=1))
    md = ["# Benchmark results", "",
          f"Produced by `{command}` on {env['date']} in {env['seconds'] / 60:.1f} min: Python {env['python']}, "
          f"Java {env.get('java', '?')}, {env['cpus']} cores ({env['machine']}, Linux {env['kernel']}), load "
          f"average {env['load_avg_at_start'][0]:.1f} at the start (the machine is shared). Both sides ran in the "
          "same invocation on the same machine.", "",
          *([f"Failed sections: {'; '.join(failures)}", ""] if failures else []),
          *md_sections, f"Raw figures: `benchmarks/results/{stamp}.json`.", ""]
    if not args.no_write:
        (ROOT / "benchmarks" / "RESULTS.md").write_text("\n".join(md))
        progress("wrote benchmarks/RESULTS.md")
    else:
        print("\n".join(md))
    progress(f"done in {(time.time() - started) / 60:.1f} min; raw figures in benchmarks/results/{stamp}.json")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
