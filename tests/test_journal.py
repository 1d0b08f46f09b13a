"""Delivery journals: the writer (rows, parts, crash safety), jgpy's JOURNAL protocol and the Java harness's
journal in real runs (Java only, mixed, with a crash) checked by the PySpark checker, the clock shared by Java
and Python, and the writer's cost at full rate.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import random
from pathlib import Path

import pytest

from tests.conftest import require_java, require_module, run_threads

pa = require_module("pyarrow", "pip install pyarrow (or make deps)")
import pyarrow.parquet as pq  # noqa: E402

from jgpy.journal import (CRASH_FILE, META_FILE, SCHEMA, JournalError, JournalWriter, mark_crash,  # noqa: E402
                          member_dir, parse_id)
ROOT = Path(__file__).resolve().parents[1]


def _read(mdir: Path):
    files = sorted(mdir.glob("part-*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else SCHEMA.empty_table(), files


def _crc32c_ref(data: bytes) -> int:
    """CRC-32C bit by bit (the definition), independent of the code under test."""
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def test_crc32c_hardware_and_table_agree_with_the_definition():
    from jgpy._core.journalbuf import crc32c
    assert crc32c(b"123456789") == crc32c(b"123456789", False) == 0xE3069283     # the standard check value
    rng = random.Random(7)
    for n in list(range(0, 40)) + [255, 256, 1000, 1023, 4099]:
        data = rng.randbytes(n)
        ref = _crc32c_ref(data)
        assert crc32c(data) == ref and crc32c(data, False) == ref, n
        assert crc32c(memoryview(bytearray(data))) == ref


def _wait(pred, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


# ---- message ids ---------------------------------------------------------------------------------

def test_crc32c_lanes_at_every_length_around_their_boundaries():
    """The hardware path runs three lanes of 256, then of 32 bytes, then 8-byte words: every length from 0 to 2000
    (and a few large ones) crosses each of those boundaries."""
    from jgpy._core.journalbuf import crc32c
    data = random.Random(11).randbytes(70_000)
    for n in list(range(0, 2001)) + [3 * 256 * 7 + 3 * 32 + 13, 65_536, 70_000]:
        assert crc32c(data[:n]) == crc32c(data[:n], False), n
    assert crc32c(memoryview(data)[5:1029]) == _crc32c_ref(data[5:1029])


def test_row_buffer_chunks_keep_every_row_in_order_across_threads():
    """Rows recorded from several threads into small chunks: every row taken exactly once, each thread's rows in
    its order, the rows that are not messages where their objects say, written chunks recorded into again."""
    from jgpy._core.journalbuf import ROW_DTYPE, RowBuffer
    from jgpy._core.message import Message
    buf = RowBuffer(7)
    buf.name_of = lambda a: None
    taken: list = []

    def producer(t: int) -> None:
        for i in range(3000):
            if i % 50 == 49:
                buf.record(3, (t, i))
            elif i % 2:
                buf.record(1, Message(None, b"T%d:%d" % (t, i)))
            else:
                buf.record_batch(1, [Message(None, b"T%d:%d" % (t, i))])
            if i % 700 == 0 and t == 0:
                taken.extend(buf.take(i % 1400 == 0))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                       # threads switch between (almost) any two rows
    try:
        run_threads(producer, 4)
    finally:
        sys.setswitchinterval(interval)
    taken.extend(buf.take())
    assert len(buf) == 0 and buf.take() == []
    rows, others = [], []
    for arr, specials in taken:
        assert arr.dtype == ROW_DTYPE and 0 < len(arr) <= 7
        for pos, obj in specials:
            assert arr["kind"][pos] == 3
            others.append(obj)
        rows += [(buf.names[r["sender"]], int(r["seq"])) for r in arr if r["kind"] == 1]
        buf.give_back(arr)
    assert len(rows) + len(others) == 4 * 3000
    for t in range(4):
        assert [s for n, s in rows if n == f"T{t}"] == [i for i in range(3000) if i % 50 != 49]
        assert [i for n, i in others if n == t] == list(range(49, 3000, 50))
    ns, timed = buf.timing()
    assert timed > 0 and ns > 0


def test_parse_ids_agree_with_the_harness():
    from jgpy._core.jg212 import object_to_buffer
    from jgpy.testing.cluster import parse_numbered
    payloads = [b"P1:0", b"P1:123456789012", b"a:b:7", b"x:", b":5", b"name:12a", b"", b"\x12", b"plain bytes",
                object_to_buffer("J1:42"), object_to_buffer("J 1:9"), b"line\nbreak:3", b"\xe9t\xe9:4"]
    for p in payloads:
        assert parse_id(p) == parse_numbered(p), p
    assert parse_id("Zoë:5".encode()) == ("Zoë", 5)                   # raw UTF-8 name
    assert parse_id(object_to_buffer("Zoë:5")) == ("Zoë", 5)          # Java String: Latin-1 low bytes
    assert parse_id(b"A:" + b"9" * 19) is None                         # beyond a long
    assert parse_id(b"A" * 300 + b":1") is None                        # longer than MAX_ID_PAYLOAD


# ---- the writer ----------------------------------------------------------------------------------

def _view(names, vid=1):
    from jgpy._core.address import UUID, set_logical_name
    from jgpy._core.types import View, ViewId
    addrs = []
    for n in names:
        a = UUID.random()
        set_logical_name(a, n)
        addrs.append(a)
    return View(ViewId(addrs[0], vid), addrs), addrs


def test_writer_rows_parts_and_meta(tmp_path):
    from jgpy._core.jg212 import object_to_buffer
    from jgpy._core.message import Message
    view, (a, b) = _view(["WA", "WB"], 7)
    w = JournalWriter(tmp_path, "WA", stack=["UDP", "JOURNAL"], row_group_size=100, flush_interval=0.2)
    w.view(view)
    big = bytes(range(256)) * 4
    expected = []
    for i in range(250):
        m = Message(None)
        m.src = a
        m.set_buffer(f"WA:{i}".encode())
        w.send(m)
        expected.append(("send", "WA", i, None, len(f"WA:{i}"), _crc32c_ref(f"WA:{i}".encode()), 0))
        d = Message(a)
        d.src = b
        raw = b"xx" + object_to_buffer(f"WB:{i}") + b"yy"           # a window into a bigger buffer
        d.set_buffer(raw, 2, len(raw) - 4)
        d.flags = 1 if i % 50 == 0 else 0
        w.deliver(d)
        expected.append(("deliver", "WB", i, "WA", len(raw) - 4, _crc32c_ref(raw[2:-2]), d.flags))
    u = Message(None)
    u.src = b
    u.set_buffer(big)
    w.deliver_batch([u])
    expected.append(("deliver", "WB", None, None, len(big), _crc32c_ref(big), 0))
    w.other("suspect", peer=b)
    assert _wait(lambda: w.stats()["parts"] >= 2, 10), w.stats()        # the background thread writes parts
    w.close()
    mdir = member_dir(tmp_path, "WA")
    t, files = _read(mdir)
    assert t.schema == SCHEMA
    assert len(files) == w.stats()["parts"] >= 6                          # 505 rows, at most 100 per part
    assert all(pq.read_metadata(f).num_rows <= 100 and pq.read_metadata(f).num_row_groups == 1 for f in files)
    assert not list(mdir.glob(".*"))                                      # no temp files left
    rows = t.to_pylist()
    assert [r["idx"] for r in rows] == list(range(len(rows)))
    assert [r["kind"] for r in rows[:2]] == ["open", "view"] and [r["kind"] for r in rows[-2:]] == ["suspect", "close"]
    assert json.loads(rows[0]["info"])["stack"] == ["UDP", "JOURNAL"]
    assert rows[1]["members"] == ["WA", "WB"] and (rows[1]["view_coord"], rows[1]["view_id"]) == ("WA", 7)
    msgs = [r for r in rows if r["kind"] in ("send", "deliver")]
    assert [(r["kind"], r["sender"], r["seq"], r["dest"], r["size"], r["hash"], r["flags"]) for r in msgs] == expected
    assert all((r["view_coord"], r["view_id"]) == ("WA", 7) for r in msgs)
    ts = [r["ts_ns"] for r in rows]
    assert ts == sorted(ts) and abs(ts[0] - time.monotonic_ns()) < 60e9
    assert rows[-2]["peer"] == "WB"
    meta = json.loads((mdir / META_FILE).read_text())
    assert meta["closed"] is True and meta["parts"] == len(files) and meta["clock"] == "CLOCK_MONOTONIC"


@pytest.mark.processes
def test_a_killed_writer_leaves_only_whole_parts(tmp_path):
    """SIGKILL while rows are buffered: the written parts are intact, the buffer is lost, no close row."""
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from jgpy.journal import JournalWriter
        w = JournalWriter({str(tmp_path)!r}, "K", row_group_size=1000, flush_interval=0.2)
        for i in range(3000):
            w.other("block")
        deadline = time.monotonic() + 20
        while w.stats()["parts"] < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        print(w.stats()["rows_written"], flush=True)
        w.flush_interval = 3600
        for i in range(500):
            w.other("unblock")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == -signal.SIGKILL, res.stderr
    written = int(res.stdout.split()[0])
    mdir = member_dir(tmp_path, "K")
    assert len(list(mdir.glob("part-*.rows"))) >= 4 and not list(mdir.glob("part-*.parquet"))   # killed: raw parts
    assert not list(mdir.glob(".*"))                                      # no temp files left
    from jgpy.analysis.load import discover
    run = discover(tmp_path)                                              # converts them to Parquet
    assert run.rows == written and run.members[0].name == "K"
    t, files = _read(mdir)
    assert t.num_rows == written == 3001                                 # open + 3000 blocks; the rest was lost
    assert "close" not in t.column("kind").to_pylist()
    assert json.loads((mdir / META_FILE).read_text())["closed"] is False and not list(mdir.glob("part-*.rows"))
    # a truncated raw part is named
    w = JournalWriter(tmp_path / "t", "T", row_group_size=10)
    w.other("block")
    w.flush()
    tdir = member_dir(tmp_path / "t", "T")
    data = (tdir / "part-00000.rows").read_bytes()
    w.close()                                                             # converted to Parquet at close
    assert (tdir / "part-00000.parquet").is_file() and not list(tdir.glob("part-*.rows"))
    (tdir / "part-00000.parquet").unlink()
    for cut in (data[:50], data[:-1]):                                   # in the header, in the rows
        (tdir / "part-00000.rows").write_bytes(cut)
        with pytest.raises(JournalError, match=r"part-00000\.rows: not a readable raw journal part"):
            discover(tmp_path / "t")


def test_journal_protocol_config():
    from jgpy.errors import ConfigError
    from jgpy.protocols.journal import with_journal
    from jgpy.stack.config import load_config
    cfg = with_journal("udp.xml", "/tmp/run1", flush_interval=0.5)
    assert cfg.names()[-1] == "JOURNAL" and cfg.get("JOURNAL").properties == {"dir": "/tmp/run1",
                                                                              "flush_interval": "0.5"}
    assert with_journal(cfg, "/tmp/run2").names().count("JOURNAL") == 1
    from jgpy.stack.stack import ProtocolStack
    from jgpy.stack.protocol import Protocol
    with pytest.raises(ConfigError, match="JOURNAL needs dir="):
        ProtocolStack(load_config("udp.xml").insert("JOURNAL"), Protocol()).init()


# ---- real runs -----------------------------------------------------------------------------------

def _connect(node, cluster, props, run_dir, config="udp.xml"):
    return node.call("connect", timeout=90, config=config, cluster=cluster, name=node.name, props=props,
                     receive="count", journal=str(run_dir))


def _received(node) -> int:
    return node.call("stats")["received"]


def _check(spark, run_dir):
    from jgpy.analysis import check_run
    return check_run(run_dir, spark=spark)


def test_java_only_run_passes(spark, java_nodes, udp_group, tmp_path):
    require_java()
    props, cluster, _ = udp_group
    run = tmp_path / "run=java"
    j1, j2 = java_nodes("J1"), java_nodes("J2")
    for n in (j1, j2):
        _connect(n, cluster, props, run)
    assert _wait(lambda: len(j2.call("view")["members"]) == 2, 30)
    j1.send(payload=b"J1", count=300, numbered=True)
    j2.send(java_string="J2", count=200, numbered=True)
    j1.send(payload=b"J1", dest="J2", count=20, numbered=True)
    assert _wait(lambda: _received(j1) == 500 and _received(j2) == 520, 60)
    j2.call("disconnect")
    j1.call("disconnect")
    res = _check(spark, run)
    assert res.findings == [], [str(f) for f in res.findings]
    st = res.stats
    assert {m["impl"] for m in st["members"].values()} == {"java"}
    assert st["numbered_deliveries"] == 1020 and st["self_deliveries_required"] == 500
    assert st["members"]["J2"]["deliveries"] == 520 and st["members"]["J1"]["sends"] == 320
    assert st["latency_overall"]["n"] == 1020 and 0 < st["latency_overall"]["p50_us"] < 5e6


def test_mixed_run_passes_and_clocks_agree(spark, java_nodes, udp_group, tmp_path, figures):
    """Java J1, jgpy P1 (own process) and P2 (in this process, JOURNAL in its config) send multicasts and
    unicasts and leave one after the other; the journals pass every check, and the latencies between Java and
    jgpy members are positive and small: the clocks are comparable."""
    require_java()
    from jgpy.protocols.journal import with_journal
    from jgpy.testing.cluster import JgpyMember
    from jgpy.testing.java import PyNode
    props, cluster, _ = udp_group
    run = tmp_path / "run=mixed"
    j1 = java_nodes("J1")
    p1 = PyNode(name="P1")
    p2 = None
    try:
        _connect(j1, cluster, props, run)
        _connect(p1, cluster, props, run)
        p2 = JgpyMember("P2", with_journal("udp.xml", run), props)
        p2.connect(cluster)
        assert _wait(lambda: p2.view_names() == ["J1", "P1", "P2"], 30), p2.view_names()
        assert _wait(lambda: len(j1.call("view")["members"]) == 3, 30)
        # the clock: a jgpy timestamp before a send, Java's System.nanoTime() at receipt, a jgpy one after
        j1.call("reset_stats")
        before = time.monotonic_ns()
        p2.channel.send(None, b"clock probe")
        assert _wait(lambda: _received(j1) >= 1, 10)
        after = time.monotonic_ns()
        java_ts = j1.call("stats")["first_recv_ns"]
        assert before < java_ts < after, (before, java_ts, after)
        figures("jgpy send -> Java receive, CLOCK_MONOTONIC", (java_ts - before) / 1e3, "us")
        n = 400
        j1.send(payload=b"J1", count=n, numbered=True)
        p1.send(payload=b"P1", count=n, numbered=True)
        p2.send_numbered(n // 2)
        p2.send_numbered(n - n // 2, java_string=True, start=n // 2)
        j1.send(java_string="J1", dest="P1", count=30, numbered=True)
        p1.send(payload=b"P1", dest="P2", count=30, numbered=True)
        p2.send_numbered(30, dest_name="J1")
        assert _wait(lambda: _received(j1) >= 3 * n + 31 and _received(p1) >= 3 * n + 30
                     and p2.received.count() >= 3 * n and p2.received.count(unicast=True) >= 30, 90)
        p2.close()
        assert _wait(lambda: len(j1.call("view")["members"]) == 2, 30)
        p1.call("disconnect")
        assert _wait(lambda: len(j1.call("view")["members"]) == 1, 30)
        j1.call("disconnect")
    finally:
        if p2 is not None:
            p2.close()
        p1.close()
    res = _check(spark, run)
    assert res.findings == [], [str(f) for f in res.findings]
    # the payload hashes agree across implementations: every row of a message id, sent or delivered, written by
    # Java (java.util.zip.CRC32C) or by jgpy (SSE4.2 or the table), has the same hash
    rows = pa.concat_tables([pq.read_table(f, columns=["kind", "sender", "dest", "seq", "hash"])
                             for f in sorted(run.glob("member=*/part-*.parquet"))]).to_pylist()
    hashes: dict = {}
    for r in rows:
        if r["kind"] in ("send", "deliver") and r["seq"] is not None:
            hashes.setdefault((r["sender"], r["dest"], r["seq"]), set()).add(r["hash"])   # unicasts: own numbers
    assert {k[0] for k in hashes} >= {"J1", "P1", "P2"}, sorted(hashes, key=str)[:5]
    assert all(len(h) == 1 for h in hashes.values()), {k: h for k, h in hashes.items() if len(h) > 1}
    st = res.stats
    assert {m["impl"] for m in st["members"].values()} == {"java", "jgpy"}
    assert all(m["closed"] for m in st["members"].values())
    assert st["numbered_deliveries"] == 9 * n + 90
    # every member delivered every multicast and its unicasts, each exactly once (no gaps/duplicates found)
    pairs = {(p["sender"], p["member"], p["dest"]): p for p in st["latency_pairs"]}
    for s in ("J1", "P1", "P2"):
        for r in ("J1", "P1", "P2"):
            p = pairs[(s, r, None)]
            assert p["n"] == n and 0 < p["p50_us"] < 2e6, (s, r, p)
    assert pairs[("J1", "P1", "P1")]["n"] == 30 and pairs[("P2", "J1", "J1")]["n"] == 30
    figures("mixed run p50 latency Java->jgpy", pairs[("J1", "P1", None)]["p50_us"], "us")
    figures("mixed run p50 latency jgpy->Java", pairs[("P1", "J1", None)]["p50_us"], "us")


def test_crash_run(spark, java_nodes, udp_group, tmp_path, figures):
    """P2 (a jgpy process) is killed with SIGKILL mid-run: its journal ends without a close row, the driver
    writes a crash marker, the survivors' journals pass every check, and the time from the crash to the view
    without P2 is reported."""
    require_java()
    from jgpy.testing.java import PyNode
    props, cluster, _ = udp_group
    run = tmp_path / "run=crash"
    j1 = java_nodes("J1")
    p1, p2 = PyNode(name="P1"), PyNode(name="P2")
    try:
        for node in (j1, p1, p2):
            _connect(node, cluster, props, run)
        assert _wait(lambda: len(j1.call("view")["members"]) == 3, 30)
        for node in (j1, p1, p2):
            node.send(payload=node.name.encode(), count=200, numbered=True)
        assert _wait(lambda: all(_received(x) >= 600 for x in (j1, p1, p2)), 60)
        time.sleep(1.5)                                    # P2's journal parts are on disk
        crash_ns = time.monotonic_ns()
        p2.kill()
        mark_crash(run, "P2", crash_ns)
        assert _wait(lambda: len(j1.call("view")["members"]) == 2, 60)
        j1.send(payload=b"J1", count=100, numbered=True, start=200)
        p1.send(payload=b"P1", count=100, numbered=True, start=200)
        assert _wait(lambda: _received(j1) >= 800 and _received(p1) >= 800, 60)
        p1.call("disconnect")
        j1.call("disconnect")
    finally:
        p1.close()
        p2.close()
    assert (member_dir(run, "P2") / CRASH_FILE).is_file()
    res = _check(spark, run)
    assert res.ok, [str(f) for f in res.findings]
    assert res.stats["abrupt_ends"] == ["P2"]
    (c,) = res.stats["crashes"]
    assert set(c["by"]) == {"J1", "P1"} and 0 < c["first_s"] <= c["all_s"] < 30
    figures("crash of P2 (kill -9) -> view without it, all survivors", c["all_s"], "s")
    assert res.stats["members"]["P2"]["deliveries"] >= 600


# ---- the writer's cost at full rate ----------------------------------------------------------------

def _rate(cluster: str, props: dict, run_dir: Path | None, count: int) -> tuple[float, float, dict, dict]:
    """A jgpy sender process multicasting ``count`` numbered messages to a jgpy receiver process: the
    receiver's msgs/s, the sender's send loop msgs/s, the journals' costs per node (``flush`` and ``record``: ns
    per row, ``rows``: rows per message) and the CPU time (all threads) per message of sender and receiver (us),
    the writers' included."""
    from jgpy.testing.java import PyNode
    r, s = PyNode(name="R"), PyNode(name="S")
    try:
        for node in (r, s):
            node.call("connect", timeout=90, config="udp.xml", cluster=cluster, name=node.name, props=props,
                      receive="count", **({"journal": str(run_dir)} if run_dir else {}))
        assert _wait(lambda: len(r.call("view")["members"]) == 2, 30)
        cpu0 = {node.name: node.call("stats")["cpu_seconds"] for node in (s, r)}
        rep = s.send(payload=b"S", count=count, numbered=True, timeout=300)
        assert _wait(lambda: _received(r) >= count, 120), _received(r)
        st = r.call("stats")
        time.sleep(1.5)                                  # a periodic flush has written the rows
        cpu = {node.name: (node.call("stats")["cpu_seconds"] - cpu0[node.name]) / count * 1e6 for node in (s, r)}
        flush = {}
        if run_dir is not None:
            for node in (s, r):
                js = node.call("dump_stats")["stats"]["JOURNAL"]
                flush[node.name] = {"flush": js["flush_cpu_seconds"] / max(1, js["rows_written"]) * 1e9,
                                    "record": js["record_ns_per_row"], "rows": js["rows_written"] / count}
        for node in (s, r):
            node.call("disconnect", timeout=60)
        return ((st["received"] - 1) / ((st["last_recv_ns"] - st["first_recv_ns"]) / 1e9), count / rep["seconds"],
                flush, cpu)
    finally:
        s.close()
        r.close()


@pytest.mark.processes
@pytest.mark.slow
def test_writer_overhead_at_full_rate(tmp_path, figures):
    """Receiver and sender throughput with and without journals (one run each: every row reaches the journal at
    full rate; ``make bench`` measures the cost over more runs)."""
    from jgpy.testing.java import udp_props, unique_group
    count = 60_000
    base, jour = [], []
    for i in range(1):
        for with_journal, out in ((False, base), (True, jour)):
            props = udp_props(*unique_group())
            run = tmp_path / f"run={i}" if with_journal else None
            out.append(_rate(f"ovh-{os.getpid()}-{i}-{int(with_journal)}", props, run, count))
            if run is not None:
                t, _ = _read(member_dir(run, "R"))
                kinds = t.column("kind").to_pylist()
                assert kinds.count("deliver") == count and kinds[-1] == "close"
    b_recv, j_recv = max(x[0] for x in base), max(x[0] for x in jour)
    b_send, j_send = max(x[1] for x in base), max(x[1] for x in jour)
    figures("receiver msgs/s without journal", b_recv, "msgs/s")
    figures("receiver msgs/s with journal", j_recv, "msgs/s")
    figures("receiver slowdown by the journal", 100 * (1 - j_recv / b_recv), "%")
    figures("sender msgs/s without journal", b_send, "msgs/s")
    figures("sender msgs/s with journal", j_send, "msgs/s")
    figures("sender slowdown by the journal", 100 * (1 - j_send / b_send), "%")
    for name, who in (("S", "sender"), ("R", "receiver")):
        b_cpu, j_cpu = min(x[3][name] for x in base), min(x[3][name] for x in jour)
        figures(f"{who} CPU per message without journal (all threads)", b_cpu, "us")
        figures(f"{who} CPU per message with journal (all threads)", j_cpu, "us")
        figures(f"{who} CPU per message added by the journal", 100 * (j_cpu / b_cpu - 1), "%")
    for name, who in (("R", "receiver"), ("S", "sender: sends and self-deliveries")):
        figures(f"journal flush CPU per row ({who})", min(x[2][name]["flush"] for x in jour), "ns")
        figures(f"journal recording time per row, sampled ({who})", min(x[2][name]["record"] for x in jour), "ns")
    # no speed assertion (a noisy 2-core machine): the figures are what to look at; `make bench` measures the cost
    # over more runs (benchmarks/checker_scale.py). What is checked above: every row reached the journal.
