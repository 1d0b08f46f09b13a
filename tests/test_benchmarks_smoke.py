"""The benchmark code itself stays runnable (each benchmark body runs once; no timing, no speed asserted)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_codec_benchmarks_run_once():
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
                          str(ROOT / "benchmarks" / "test_codec.py")], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def test_benchmark_workload_matches_java(java_codec):
    """The workload is byte-identical to what CodecBench.java times (else the ratios would compare apples and pears)."""
    import json
    import os

    from benchmarks import workloads as W
    from jgpy.testing.java import JGROUPS_JAR, ensure_compiled

    cp = f"{ensure_compiled()}{os.pathsep}{JGROUPS_JAR}"
    out = subprocess.run(["java", "-cp", cp, "org.jgpy.interop.CodecBench", "--hex"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    hexes = json.loads(out)
    assert bytes.fromhex(hexes["single_hex"]) == W.single_datagram()
    assert bytes.fromhex(hexes["bundle_hex"]) == W.bundle_datagram(64)
