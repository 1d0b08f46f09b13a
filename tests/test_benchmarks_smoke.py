"""The benchmark code itself stays runnable (each benchmark body runs once; no timing, no speed asserted)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require


ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.processes
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


# ---------------------------------------------------------------------------------------------------------------
# the rest of the suite (make bench): micro benchmarks, the raw limit, the end-to-end runs, rendering
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.processes
def test_micro_benchmarks_run_once():
    """Seqno tables, FRAG2 and the UDP core benchmarks run (once each, untimed) and their checks pass."""
    files = [str(ROOT / "benchmarks" / f) for f in ("test_tables.py", "test_frag2.py", "test_udp_core.py")]
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
                          *files], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]


@pytest.mark.processes
def test_rawlimit_stream_and_rtt():
    """build/rawlimit builds and reports a stream (unicast and multicast) and a ping-pong as one JSON line each."""
    import json
    import shutil

    require(None if shutil.which("cc") or shutil.which("gcc") else
            "no C compiler to build build/rawlimit (apt-get install -y gcc)")
    from benchmarks import e2e
    from jgpy.testing.java import unique_group

    exe = str(e2e.ensure_rawlimit())
    addr, port = unique_group()
    for extra in ([], ["--mcast", f"{addr}:{port}"]):
        out = subprocess.run([exe, "stream", "--size", "1000", "--count", "5000", *extra], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        r = json.loads(out)
        assert r["sent"] == 5000 and 0 < r["received"] <= 5000 and r["datagrams_per_s"] > 0
        assert r["transport"] == ("multicast" if extra else "unicast")
    r = json.loads(subprocess.run([exe, "rtt", "--size", "100", "--count", "500", "--warmup", "50"],
                                  capture_output=True, text=True, timeout=60, check=True).stdout)
    assert r["n"] == 500 and 0 < r["min_us"] <= r["median_us"] <= r["p99_us"] <= r["max_us"]
    assert len(r["cdf_us"]) == 1001 and r["cdf_us"] == sorted(r["cdf_us"])
    bad = subprocess.run([exe, "stream", "--size", "70000"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--size" in bad.stderr


def test_rtt_stats_nearest_rank():
    """The jgpy member's percentiles use the nearest-rank rule (the one PerfNode.java and rawlimit use)."""
    from jgpy.tools.perf_member import rtt_stats

    s = rtt_stats([i * 1000 for i in range(1, 1001)])          # 1..1000 us
    assert (s["n"], s["min_us"], s["median_us"], s["p99_us"], s["p999_us"], s["max_us"]) == (1000, 1, 500, 990, 999, 1000)
    assert s["cdf_us"][0] == 1 and s["cdf_us"][500] == 500 and s["cdf_us"][1000] == 1000
    assert rtt_stats([]) == {"n": 0}


@pytest.mark.processes
@pytest.mark.interop
def test_members_reject_bad_commands():
    """Both kinds of benchmark member answer a bad command with an error and keep serving."""
    from jgpy.testing.java import java_unavailable_reason
    from jgpy.tools.perf import MemberProcess, PerfError
    import pytest

    kinds = ["P"] + ([] if java_unavailable_reason() else ["J"])
    for kind in kinds:
        m = MemberProcess(kind, f"{kind}x", "perf-bad", "udp.xml", {})
        try:
            assert m.wait_event(lambda e: e.get("event") == "started", 60) is not None, m.log_tail()
            for cmd, args in (("nonsense", {}), ("go", {"run": 1}), ("arm", {"role": "juggler", "size": 100}),
                              ("connect", {"use_flush": "no"})):
                with pytest.raises(PerfError):
                    m.call(cmd, wait=30, **args)
            m.call("stop", wait=30, run=7)                     # nothing armed: a no-op, answered
        finally:
            m.close()
        assert m.proc.returncode is not None


@pytest.mark.processes
@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.timeout(600)                      # ~200 s on a quiet machine: every row set starts its clusters
def test_e2e_suite_tiny(tmp_path):
    """The whole end-to-end suite at a few hundred messages per run, 1 repetition: every cluster (Java-only,
    jgpy-only, mixed; 2 and 3 members; udp.xml, tcp.xml, sequencer.xml, compress.xml, tunnel.xml, smack_tunnel.xml ...)
    completes every workload, and the tables and plots render."""
    import json

    from benchmarks import e2e
    from jgpy.tools.perf import RTT_PATTERNS
    from tests.conftest import require_java

    require_java()
    res = e2e.run(scale=0.002, reps=1)
    bad = [(r["workload"], r["column"], [x["errors"] for x in r["runs"]]) for r in res["records"] if not r["complete"]]
    assert not bad, bad
    cols = {(r["workload"], r["column"]) for r in res["records"]}
    for w in e2e.TWO + e2e.TCP_TWO:
        assert {(w.key, c) for c in ("java", "jgpy", "mixed_j", "mixed_p")} <= cols
    assert {("all_1k_3", c) for c in ("java", "jgpy", "mixed")} <= cols
    for w in e2e.FLUSH_TWO + e2e.FLUSH_THREE:                  # flush-udp.xml rows and the flush latency
        assert {(w.key, c) for c in ("java", "jgpy", "mixed_j", "mixed_p")} <= cols
    assert len(res["flush_latency"]) == 8 and all(r["flushes"] > 0 for r in res["flush_latency"])
    for w in e2e.SEQ_TWO + e2e.SEQ_THREE:                       # sequencer.xml: every member sends
        assert {(w.key, c) for c in ("java", "jgpy", "mixed")} <= cols
    for w in e2e.ENC_TWO + e2e.COMPRESS_TWO + e2e.LC_TWO + e2e.TCPNIO_TWO + e2e.SMACK_TWO:   # ENCRYPT; compress;
        # UNICAST2; TCP_NIO; SMACK
        assert {(w.key, c) for c in ("java", "jgpy", "mixed_j", "mixed_p")} <= cols
    for router in e2e.TUNNEL_ROUTERS:                          # tunnel.xml through Java's and jgpy's router
        assert {(e2e.tunnel_workload(router).key, c) for c in ("java", "jgpy", "mixed_j", "mixed_p")} <= cols
    assert {(e2e.own_workload(name).key, "jgpy") for name in e2e.OWN_CONFIGS} <= cols     # PBCAST, TOTAL: jgpy only
    for r in res["records"]:
        if r["pattern"] in RTT_PATTERNS:
            assert r["rtt_p99_us"]["median"] > 0
        else:
            assert r["recv_msgs_per_s"]["median"] > 0 and r["send_msgs_per_s"]["median"] > 0
        for run in r["runs"]:
            assert all(m.get("peak_rss_mb", 0) > 0 for m in run["members"])
    md = "\n".join(e2e.markdown(res))
    assert "| throughput jgpy / Java, 1 KB multicast, 1 sender, 2 members |" in md and "INCOMPLETE" not in md
    assert "### Round trip: 100 B multicast request, unicast response, 2 members" in md
    assert "| tcp.xml: throughput jgpy / Java, 1 KB unicast |" in md
    assert "### Flush latency (flush-udp.xml)" in md
    assert "| sequencer.xml: throughput jgpy / Java, 1 KB multicast, all 3 send |" in md
    assert "| ENCRYPT (udp.xml + encrypt.xml's ENCRYPT): throughput jgpy / Java, 1 KB multicast |" in md
    assert "| compress.xml: throughput jgpy / Java, 1 KB multicast |" in md
    assert "| tunnel.xml through jgpy's GossipRouter: throughput jgpy / Java, 1 KB multicast |" in md
    assert "| udp-largecluster.xml (UNICAST2): throughput jgpy / Java, 1 KB unicast |" in md
    assert "| tcp-nio.xml: throughput jgpy / Java, 1 KB multicast |" in md
    assert "| smack_tunnel.xml through jgpy's GossipRouter: throughput jgpy / Java, 1 KB multicast |" in md
    assert "| pbcast-udp.xml (PBCAST, jgpy's own) / udp.xml (NAKACK), jgpy, 1 KB multicast |" in md
    json.dumps(res)                                            # the JSON file can be written
    pngs = e2e.plots(res, tmp_path)
    if importlib.util.find_spec("matplotlib") is None:
        assert pngs == []                                    # the report is written without plots
        require("matplotlib is not installed: no plots (pip install matplotlib, or make deps)")
    assert sorted(p.name for p in pngs) == ["latency_cdf.png", "throughput_by_size.png"]
    assert all(p.stat().st_size > 10_000 for p in pngs)


@pytest.mark.processes
@pytest.mark.interop
def test_smack_rows_tiny():
    """The smack_tunnel.xml row set alone (``--only smack``) at a few dozen messages: Java (connected with
    connect(cluster, false)), jgpy and mixed clusters without discovery form, each member's first multicast goes
    alone, and the 1 KB multicasts arrive, whoever sends; the row renders."""
    from benchmarks import e2e
    from tests.conftest import require_java

    require_java()
    recs, ws = e2e.run_smack_rows(0.002, 1)
    assert [w.key for w in ws] == ["smack_mcast_1k_2"]
    bad = [(r["column"], [x["errors"] for x in r["runs"]]) for r in recs if not r["complete"]]
    assert not bad, bad
    assert {r["column"] for r in recs} == {"java", "jgpy", "mixed_j", "mixed_p"}
    assert all(r["recv_msgs_per_s"]["median"] > 0 for r in recs)
    md = "\n".join(e2e.markdown({"records": recs, "raw": {}, "flush_latency": [], "jvm": ""}))
    assert "| smack_tunnel.xml through jgpy's GossipRouter: throughput jgpy / Java, 1 KB multicast |" in md


@pytest.mark.processes
@pytest.mark.interop
def test_direct_delivery_tiny():
    """benchmarks/direct_delivery.py with a few hundred round trips: jgpy and Java clusters both run with the
    jar's udp.xml and with the thread pools disabled, and the table renders."""
    from benchmarks import direct_delivery
    from tests.conftest import require_java

    require_java()
    out = direct_delivery.main(["--kinds", "PP,JJ", "--reps", "1", "--count", "300"])
    assert set(out["medians"]) == {"PP pooled", "PP direct", "JJ pooled", "JJ direct"}
    assert all(m["median_us"] > 0 for m in out["medians"].values())
    md = "\n".join(out["markdown"])
    assert "| PP | direct |" in md and "jgpy direct / Java direct" in md


def test_soak_summaries_reach_soak_md_and_results_md(tmp_path, monkeypatch):
    """A soak run's summary goes on top of SOAK.md (at most ``keep`` runs) and replaces RESULTS.md's soak
    section, which stays before the raw-figures line; make bench's section is the same text."""
    from benchmarks import soak
    results = tmp_path / "benchmarks" / "RESULTS.md"
    results.parent.mkdir()
    results.write_text("# Benchmark results\n\n## Wire codec\n\n| a |\n\nRaw figures: `x.json`.\n")
    monkeypatch.setattr(soak, "ROOT", tmp_path)
    monkeypatch.setattr(soak, "SOAK_MD", tmp_path / "benchmarks" / "SOAK.md")
    for i in range(4):
        soak.publish(f"### run {i}\n\n- verdict: **PASS**\n", keep=3)
    runs = soak.SOAK_MD.read_text().split(soak.RUN_SEP)[1:]
    assert [r.splitlines()[0] for r in runs] == ["run 3", "run 2", "run 1"]
    md = results.read_text()
    assert md.count(soak.SECTION_TITLE) == 1 and md.count("## Wire codec") == 1
    assert md.index("## Wire codec") < md.index(soak.SECTION_TITLE) < md.index("### run 3") < md.index("### run 1")
    assert md.rstrip().endswith("Raw figures: `x.json`.") and "run 0" not in md
    assert soak.soak_section() in md


@pytest.mark.interop
def test_rpc_benchmark_runs_once():
    """benchmarks/rpc.py end to end with tiny counts, both mixed directions (no speed asserted)."""
    from tests.conftest import require_java
    require_java()
    from benchmarks import rpc
    out = rpc.main(["--count", "20", "--async-count", "50", "--reps", "1", "--warmup-reps", "1",
                    "--kinds", "PJ,JP"])
    for kind in ("PJ", "JP"):
        for workload, recs in out["results"][kind].items():
            assert len(recs) == 1 and recs[0]["missing"] == 0, (kind, workload, recs)
    assert len(out["markdown"]) == 4 + 2          # intro, blank, header, rule, one row per kind
