#!/usr/bin/env python3
"""``make bench``: run jgpy's and Java's benchmarks side by side in one invocation and write the results.

Writes ``benchmarks/results/<stamp>.json`` (raw figures of both sides) and ``benchmarks/RESULTS.md``
(the table with jgpy/Java ratios and the command that produced it). Progress goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.testing.java import JGROUPS_JAR, ensure_compiled, java_unavailable_reason  # noqa: E402

RESULTS_DIR = ROOT / "benchmarks" / "results"

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


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_jgpy_codec() -> dict[str, dict]:
    progress("jgpy codec benchmarks (pytest-benchmark) ...")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "benchmarks" / "test_codec.py"),
           f"--benchmark-json={out}", "--benchmark-min-rounds=2000", "--benchmark-max-time=2"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    data = json.loads(Path(out).read_text())
    os.unlink(out)
    return {b["name"]: {"median_ns": b["stats"]["median"] * 1e9, "min_ns": b["stats"]["min"] * 1e9,
                        "mean_ns": b["stats"]["mean"] * 1e9, "rounds": b["stats"]["rounds"]}
            for b in data["benchmarks"]}


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--java-seconds", type=float, default=3.0)
    ap.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = ap.parse_args()
    reason = java_unavailable_reason()
    if reason:
        progress(f"the Java side cannot run: {reason}")
        return 2
    started = time.time()
    jg = run_jgpy_codec()
    java = run_java_codec(args.java_seconds)
    env = {"python": sys.version.split()[0], "java": java.get("java"), "machine": platform.machine(),
           "cpus": os.cpu_count(), "kernel": platform.release(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    record = {"env": env, "codec": {"jgpy": jg, "java": java}}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS_DIR / f"{stamp}.json").write_text(json.dumps(record, indent=2))
    table = codec_table(jg, java)
    md = ["# Benchmark results", "",
          f"Produced by `make bench` (`python benchmarks/run.py`) on {env['date']}: Python {env['python']}, "
          f"Java {env['java']}, {env['cpus']} cores ({env['machine']}, Linux {env['kernel']}). "
          "Both sides ran in the same invocation on the same (noisy, 2-core) machine; ratios below 1 mean "
          "jgpy is faster.", "",
          "## Wire codec", "",
          "The same datagrams on both sides (checked byte for byte before timing): a 1 KB multicast data "
          "message (NAKACK + UDP TpHeader + 1024-byte payload) sent singly, and a bundle of 64 of them. "
          "Java: `interop/.../CodecBench.java` (JIT-warmed, reused buffers). jgpy: `benchmarks/test_codec.py` "
          "(pytest-benchmark medians, each call including the Python call overhead).", "",
          *table, "",
          f"Raw figures: `benchmarks/results/{stamp}.json`.", ""]
    for line in table:
        print("  " + line)
    if not args.no_write:
        (ROOT / "benchmarks" / "RESULTS.md").write_text("\n".join(md))
        progress("wrote benchmarks/RESULTS.md")
    progress(f"done in {time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
