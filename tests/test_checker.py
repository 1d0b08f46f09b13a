"""The PySpark guarantee checker on synthetic journals: clean runs pass with zero findings, every planted
violation is found and named, bad input is a clear error naming the file (no Spark stack trace).

One local SparkSession (``local[2]``) serves the whole module; the journals are small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require, require_module

require_module("pyarrow", "pip install pyarrow (or make deps)")
require_module("pandas", "pip install 'pandas<3' (or make deps)")

from jgpy.analysis import synth  # noqa: E402
from jgpy.journal import JournalError, member_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: two views (D joins), multicasts and unicasts; view 1 is survived by A, B, C
BASE = dict(views=[["A", "B", "C"], ["A", "B", "C", "D"]], msgs_per_view=40, unicasts_per_view=4)


def _run(tmp_path: Path, spec: synth.Spec, plant: tuple[str, str, str] | None = None):
    tables = {m: (t, c) for m, t, c in synth.generate(spec)}
    info = synth.plant(tables, *plant) if plant else None
    d = tmp_path / "run=test"
    synth.write_run(d, spec, tables)
    return d, info


def _check(spark, run_dir, **opts):
    from jgpy.analysis import Options, check_run
    return check_run(run_dir, spark=spark, options=Options(**opts))


def test_clean_run_has_no_findings(spark, tmp_path):
    spec = synth.Spec(**BASE)
    d, _ = _run(tmp_path, spec)
    res = _check(spark, d)
    assert res.findings == [], [str(f) for f in res.findings]
    assert res.verdict == "PASS"
    st = res.stats
    # view 1 (A, B, C) is survived by all three: each delivers the other two's 40 multicasts, and the 4 unicasts
    # from its left neighbour; view 2 is the last one (nothing required but the self-deliveries)
    assert st["required_deliveries"] == 3 * 2 * 40 + 3 * 4
    assert st["self_deliveries_required"] == 3 * 40 + 4 * 40
    assert st["numbered_deliveries"] == 3 * 3 * 40 + 4 * 4 * 40 + 3 * 4 + 4 * 4
    assert st["latency_overall"]["n"] == st["numbered_deliveries"]
    assert 50 <= st["latency_overall"]["p50_us"] <= st["latency_overall"]["p99_us"] <= st["latency_overall"]["p999_us"]
    assert set(st["members"]) == {"A", "B", "C", "D"} and all(m["closed"] for m in st["members"].values())
    report = res.report.read_text()
    assert "**Verdict: PASS**" in report and "| **all** |" in report
    for png in ("latency_cdf.png", "throughput.png"):
        p = res.report.parent / png
        assert p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


@pytest.mark.parametrize("what,victim,sender,check,kind", [
    ("gap", "B", "A", "reliability", "gap"),
    ("duplicate", "B", "A", "reliability", "duplicate"),
    ("reorder", "B", "A", "fifo", "reorder"),
    ("disagreeing_view", "B", "A", "views", "disagreeing_view"),
    ("missing_self_delivery", "A", "A", "self_delivery", "missing_self_delivery"),
    ("same_view_break", "B", "A", "same_view", "other_view"),
])
def test_planted_violation_is_found_and_named(spark, tmp_path, what, victim, sender, check, kind):
    d, info = _run(tmp_path, synth.Spec(**BASE), (what, victim, sender))
    res = _check(spark, d)
    found = [f for f in res.findings if f.kind == kind]
    assert found, f"{what} not found: {[str(f) for f in res.findings]}"
    f = found[0]
    assert f.check == check and f.count == 1, str(f)
    if "seq" in info:
        assert f"{sender}:{info['seq']}" in f.examples[0] and f"at {victim}" in f.examples[0], (info, f.examples)
    else:
        assert f"{victim} has [" in f.examples[0], f.examples
    if what == "same_view_break":            # no FLUSH in the stack: a warning, the run passes
        assert f.severity == "warning" and res.ok and res.verdict == "PASS with warnings"
    else:
        assert f.severity == "error" and not res.ok and res.verdict == "FAIL"
    # nothing else is reported for a single planted violation
    assert {x.kind for x in res.findings} == {kind}, [str(x) for x in res.findings]
    assert kind in res.report.read_text()


def test_same_view_break_is_an_error_with_flush(spark, tmp_path):
    spec = synth.Spec(**BASE, stack=synth.STACK + ["pbcast.FLUSH"])
    d, info = _run(tmp_path, spec, ("same_view_break", "C", "B"))
    res = _check(spark, d)
    assert [(f.check, f.kind, f.severity) for f in res.findings] == [("same_view", "other_view", "error")]
    assert res.findings[0].examples[0].startswith(f"at C, stream B->*: B:{info['seq']} sent in view A|1, delivered in A|2")


def test_total_order(spark, tmp_path):
    spec = synth.Spec(**BASE, total_order=True, stack=synth.STACK + ["SEQUENCER"])
    d, _ = _run(tmp_path / "clean", spec)
    res = _check(spark, d)
    assert res.total_order and res.findings == [], [str(f) for f in res.findings]
    # the same journals with one swap at B (two messages of view 1): B disagrees with A and C (D joined later)
    d, info = _run(tmp_path / "planted", spec, ("total_order_inversion", "B", "A"))
    res = _check(spark, d)
    assert [f.kind for f in res.findings] == ["inversion"], [str(f) for f in res.findings]
    f = res.findings[0]
    assert f.check == "total_order" and f.severity == "error" and f.count == 2
    a, b = (m.split(":")[0] + ":" + str(int(float(m.split(":")[1]))) for m in info["msgs"])
    assert a in f.examples[0] and b in f.examples[0]
    # not a SEQUENCER stack: total order is not checked unless asked for
    res = _check(spark, _run(tmp_path / "nots", synth.Spec(**BASE), ("total_order_inversion", "B", "A"))[0])
    assert not res.total_order and "inversion" not in res.kinds()
    res = _check(spark, _run(tmp_path / "forced", synth.Spec(**BASE), ("total_order_inversion", "B", "A"))[0],
                 total_order=True)
    assert "inversion" in res.kinds()


def test_crashed_member(spark, tmp_path):
    """C crashes in view 1 (its journal ends early, no close row, a crash marker); view 2 excludes it."""
    spec = synth.Spec(views=[["A", "B", "C"], ["A", "B"]], msgs_per_view=40, unicasts_per_view=4, crash="C",
                      detect_s=2.5)
    d, _ = _run(tmp_path, spec)
    res = _check(spark, d)
    assert res.findings == [], [str(f) for f in res.findings]
    assert res.stats["abrupt_ends"] == ["C"]
    (c,) = res.stats["crashes"]
    assert c["member"] == "C" and set(c["by"]) == {"A", "B"}
    assert 2.5 <= c["first_s"] <= c["all_s"] < 2.6
    assert "| C |" in res.report.read_text()
    # a lost message of a survivor in the crash view is still found
    tables = {m: (t, cl) for m, t, cl in synth.generate(spec)}
    synth.plant(tables, "gap", "B", "A")
    d2 = tmp_path / "run=gap"
    synth.write_run(d2, spec, tables)
    assert "gap" in _check(spark, d2).kinds()


def test_lost_messages_at_the_end_of_a_view(spark, tmp_path):
    """B stops delivering A's multicasts 3 before the end of view 2, although both stay into view 3: lost
    (no later delivery from A shows a gap)."""
    spec = synth.Spec(views=BASE["views"] + [["A", "B", "C", "D", "E"]], msgs_per_view=40)
    tables = {m: (t, c) for m, t, c in synth.generate(spec)}
    t, closed = tables["B"]
    df = t.to_pandas()
    from_a = df[(df.kind == "deliver") & (df.sender == "A") & df.dest.isna()]
    first_lost = int(from_a[from_a.view_id == 2].seq.max()) - 2
    df = df.drop(index=from_a[from_a.seq >= first_lost].index)
    import pyarrow as pa

    from jgpy.journal import COLUMNS, SCHEMA
    df["idx"] = range(len(df))
    tables["B"] = (pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False), closed)
    d = tmp_path / "run=lost"
    synth.write_run(d, spec, tables)
    res = _check(spark, d)
    assert [(f.check, f.kind, f.severity, f.count) for f in res.findings] == [("reliability", "lost", "error", 3)], \
        [str(f) for f in res.findings]
    assert res.findings[0].examples[0] == f"at B: 3 of A->* {first_lost - 37}..{first_lost + 2} sent in view A|2, " \
                                          f"first A:{first_lost}"


def test_unnumbered_messages_and_reused_numbers(spark, tmp_path):
    """Payloads without ids are counted, not checked; a number a sender used twice is an ambiguous id."""
    import pyarrow as pa
    spec = synth.Spec(**BASE)
    tables = {m: (t.set_column(t.schema.get_field_index("seq"), "seq", pa.nulls(t.num_rows, pa.int64())), c)
              for m, t, c in synth.generate(spec)}
    d = tmp_path / "run=unnumbered"
    synth.write_run(d, spec, tables)
    res = _check(spark, d)
    assert res.findings == [] and res.stats["numbered_deliveries"] == 0
    assert sum(m["unnumbered"] for m in res.stats["members"].values()) == 3 * 3 * 40 + 4 * 4 * 40 + 3 * 4 + 4 * 4
    # C sends its number 5 again (a second send row with the same id)
    tables = {m: (t, c) for m, t, c in synth.generate(spec)}
    t, closed = tables["C"]
    df = t.to_pandas()
    again = df[(df.kind == "send") & (df.seq == 5) & df.dest.isna()].iloc[0].copy()
    again["ts_ns"] += 1
    df.loc[len(df) + 10**6] = again
    df = df.sort_values(["ts_ns", "idx"], kind="stable").reset_index(drop=True)
    df["idx"] = range(len(df))
    from jgpy.journal import COLUMNS, SCHEMA
    tables["C"] = (pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False), closed)
    d = tmp_path / "run=reused"
    synth.write_run(d, spec, tables)
    res = _check(spark, d)
    assert [(f.kind, f.severity, f.count) for f in res.findings] == [("duplicate_id", "error", 1)], \
        [str(f) for f in res.findings]
    assert "stream C->*" in res.findings[0].examples[0]


# ---- bad input: clear errors naming the file ----------------------------------------------------

def _clean(tmp_path) -> Path:
    return _run(tmp_path, synth.Spec(views=[["A", "B"]], msgs_per_view=5))[0]


def test_bad_input_errors_name_the_file(tmp_path):
    from jgpy.analysis.load import discover
    with pytest.raises(JournalError, match="no such run directory"):
        discover(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(JournalError, match=r"empty run directory: no member=<name>"):
        discover(empty)
    (empty / "run=a").mkdir()
    (empty / "run=b").mkdir()
    with pytest.raises(JournalError, match=r"holds several runs \(run=a, run=b\)"):
        discover(empty)
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(JournalError, match="is a file"):
        discover(f)

    d = _clean(tmp_path / "trunc")
    part = member_dir(d, "A") / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:len(part.read_bytes()) // 2])
    with pytest.raises(JournalError, match=r"part-00000\.parquet: not a readable Parquet file, truncated") as e:
        discover(d)
    assert str(part) in str(e.value)

    d = _clean(tmp_path / "missing")
    (member_dir(d, "B") / "part-00000.parquet").unlink()
    with pytest.raises(JournalError, match=r"member=B/part-00000\.parquet: missing journal file"):
        discover(d)

    d = _clean(tmp_path / "nometa")
    (member_dir(d, "B") / "_journal.json").unlink()
    with pytest.raises(JournalError, match=r"member=B/_journal\.json: missing journal meta data"):
        discover(d)

    d = _clean(tmp_path / "schema")
    import pyarrow as pa
    import pyarrow.parquet as pq
    p = member_dir(d, "A") / "part-00000.parquet"
    t = pq.read_table(p)
    pq.write_table(t.drop_columns(["hash"]).set_column(1, "idx", t.column("idx").cast(pa.int32())), p)
    with pytest.raises(JournalError, match=r"part-00000\.parquet: wrong journal schema: column 'idx' is int32, "
                                           r"expected int64; column 'hash' missing"):
        discover(d)


def test_java_json_lines_ingest_and_errors(spark, tmp_path):
    """The Java harness writes JSON lines; they are converted on ingest, and bad lines are named."""
    d = _clean(tmp_path / "java")
    mdir = member_dir(d, "B")
    import pyarrow.parquet as pq
    rows = pq.read_table(mdir / "part-00000.parquet").to_pylist()
    (mdir / "part-00000.parquet").unlink()
    with open(mdir / "part-00000.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n")
    meta = json.loads((mdir / "_journal.json").read_text())
    (mdir / "_journal.json").write_text(json.dumps({**meta, "impl": "java"}))
    res = _check(spark, d)
    assert res.findings == [] and res.stats["members"]["B"]["impl"] == "java"
    assert (mdir / "part-00000.parquet").is_file()

    (mdir / "part-00000.parquet").unlink()
    with open(mdir / "part-00000.jsonl", "a") as f:
        f.write('{"kind": "deliver", "idx": 99, "ts_ns": "soon"}\n')
    from jgpy.analysis.load import discover
    with pytest.raises(JournalError, match=r"part-00000\.jsonl: not valid journal JSON lines"):
        discover(d)


@pytest.mark.spark
@pytest.mark.processes
def test_cli(tmp_path):
    """``python -m jgpy check``: exit 1 and the finding for a planted gap; exit 2 and one line for bad input."""
    from jgpy.analysis.spark import spark_available
    require(spark_available())
    require_module("matplotlib", "pip install matplotlib (or make deps)")      # the report's plots
    d, info = _run(tmp_path, synth.Spec(**BASE), ("gap", "C", "B"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-m", "jgpy", "check", str(d), "--master", "local[2]", "--out",
                          str(tmp_path / "rep")], capture_output=True, text=True, timeout=240, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "ERROR reliability/gap: 1" in res.stdout and "verdict: FAIL" in res.stdout
    assert f"report: {tmp_path / 'rep' / 'report.md'}" in res.stdout and (tmp_path / "rep" / "latency_cdf.png").is_file()
    assert "Traceback" not in res.stderr and "at org.apache" not in res.stderr
    part = member_dir(d, "A") / "part-00000.parquet"
    part.write_bytes(b"PAR1 garbage")
    res = subprocess.run([sys.executable, "-m", "jgpy", "check", str(d)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 2
    assert res.stdout.startswith(f"error: {part}: not a readable Parquet file"), res.stdout
    assert "Traceback" not in res.stdout + res.stderr and "at org.apache" not in res.stdout + res.stderr
