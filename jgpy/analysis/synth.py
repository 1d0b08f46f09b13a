"""Synthetic journals: a run of a virtually synchronous group, generated with numpy, plus planted violations.

:func:`generate` yields each member's journal table as a clean run would write it: a sequence of views, in
each view every member multicasts ``msgs_per_view`` numbered messages (and optionally unicasts to the next
member); every member of the view delivers every message of the view before the next view, per-sender FIFO
(and, with ``total_order``, in one global order), with random latencies. A member may crash in a view (its
journal stops early and has no close row; a crash marker is written) and the next view excludes it.

:func:`plant` changes clean tables to contain exactly one kind of violation, for the checker's tests. Sizes
scale: ``members=10, msgs_per_view=10**6`` is a run with 10**8 deliveries, generated member by member.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jgpy.journal import COLUMNS, SCHEMA, mark_crash, write_parts

STACK = ["UDP", "PING", "MERGE2", "FD_SOCK", "FD_ALL", "VERIFY_SUSPECT", "BARRIER", "pbcast.NAKACK", "UNICAST",
         "pbcast.STABLE", "pbcast.GMS", "UFC", "MFC", "FRAG2", "JOURNAL"]

KIND_CODES = {"open": 0, "view": 1, "send": 2, "deliver": 3, "close": 4, "suspect": 5}
_KINDS = pa.array(["open", "view", "send", "deliver", "close", "suspect"], pa.string())


@dataclass
class Spec:
    views: list[list[str]]                  # the successive views (coordinator first); view ids 1, 2, ...
    msgs_per_view: int = 100                # multicasts per member per view
    unicasts_per_view: int = 0              # unicasts per member per view, to the next member of the view
    rate: float = 50_000.0                  # multicasts per second of the whole group
    latency_us: float = 300.0               # mean latency above a 50 us floor (exponential)
    total_order: bool = False               # every member delivers the multicasts in one global order
    crash: str | None = None                # this member crashes in its last view (the next one excludes it)
    detect_s: float = 3.0                   # crash -> next view
    seed: int = 1
    stack: list[str] = field(default_factory=lambda: list(STACK))

    @property
    def members(self) -> list[str]:
        out: list[str] = []
        for v in self.views:
            out += [m for m in v if m not in out]
        return out


@dataclass
class _View:
    pos: int
    members: list[str]
    start: int                  # ns: install time
    send_end: int               # ns: sends happen in [start + 1 ms, send_end)
    end: int                    # ns: every delivery of the view is before this
    crash_ts: int | None = None  # the crashing member's crash time in this view


T_BASE = 1_000_000_000_000     # 1000 s of CLOCK_MONOTONIC: an arbitrary origin


def _timeline(spec: Spec) -> list[_View]:
    out = []
    t = T_BASE
    for p, mem in enumerate(spec.views):
        n_msgs = spec.msgs_per_view * len(mem)
        dur = int(n_msgs / spec.rate * 1e9) + 1_000_000
        v = _View(p, list(mem), t, t + 1_000_000 + dur, 0)
        v.end = v.send_end + int((50 + 40 * spec.latency_us) * 1e3) + 5_000_000
        if spec.crash in mem and (p + 1 == len(spec.views) or spec.crash not in spec.views[p + 1]):
            v.crash_ts = v.start + 1_000_000 + dur // 2
            v.end = max(v.end, v.crash_ts + int(spec.detect_s * 1e9))
        out.append(v)
        t = v.end + 2_000_000
    return out


def _send_times(spec: Spec, v: _View, sender: str) -> np.ndarray:
    k = spec.msgs_per_view
    n = len(v.members)
    dt = (v.send_end - v.start - 1_000_000) / max(1, k * n)
    i = np.arange(k, dtype=np.int64)
    ts = v.start + 1_000_000 + ((i * n + v.members.index(sender)) * dt).astype(np.int64)
    if v.crash_ts is not None and sender == spec.crash:
        ts = ts[ts < v.crash_ts]
    return ts


def _uni_times(spec: Spec, v: _View, sender: str) -> np.ndarray:
    k = spec.unicasts_per_view
    if not k:
        return np.zeros(0, np.int64)
    dt = (v.send_end - v.start - 1_000_000) / k
    ts = v.start + 1_500_000 + (np.arange(k) * dt).astype(np.int64) + v.members.index(sender) * 997
    if v.crash_ts is not None and sender == spec.crash:
        ts = ts[ts < v.crash_ts]
    return ts


def _lat(rng: np.random.Generator, n: int, spec: Spec) -> np.ndarray:
    return (50_000 + rng.exponential(spec.latency_us * 1e3, n)).astype(np.int64)


def _seq_base(spec: Spec, timeline: list[_View], upto: int, sender: str, uni: bool) -> int:
    """The first number of ``sender``'s stream in view ``upto`` (numbers continue across views)."""
    total = 0
    for v in timeline[:upto]:
        if sender in v.members:
            total += len(_uni_times(spec, v, sender) if uni else _send_times(spec, v, sender))
    return total


def _fifo(ts: np.ndarray) -> np.ndarray:
    """Strictly increasing (1 ns apart at least), keeping each value or raising it."""
    if len(ts) == 0:
        return ts
    return np.maximum.accumulate(ts - np.arange(len(ts))) + np.arange(len(ts))


def _names(idx: np.ndarray, names: list[str]) -> pa.Array:
    return pc.take(pa.array(names, pa.string()), pa.array(idx, pa.int32()))


def member_table(spec: Spec, member: str, timeline: list[_View] | None = None) -> tuple[pa.Table, bool]:
    """``(journal table of member, closed)``, sorted by event index."""
    tl = timeline or _timeline(spec)
    names = spec.members
    nid = {n: i for i, n in enumerate(names)}
    parts: dict[str, list] = {c: [] for c in ("kind", "ts", "vc", "vi", "sender", "seq", "dest", "prio")}
    views_rows = []            # (ts, prio, view pos)
    crashed_at = None
    first = None
    last_view = None
    for v in tl:
        if member not in v.members:
            continue
        first = v if first is None else first
        last_view = v
        install = v.start + 10_000 * v.members.index(member)
        views_rows.append((install, v.pos))
        vc, vi = nid[v.members[0]], v.pos + 1
        for s in v.members:
            # multicasts of s, delivered here
            sts = _send_times(spec, v, s)
            base = _seq_base(spec, tl, v.pos, s, False)
            seq = base + np.arange(len(sts), dtype=np.int64)
            if spec.total_order:
                lat = _lat(np.random.default_rng([spec.seed, v.pos, nid[s]]), len(sts), spec)
                dts = _fifo(sts + lat) + 1000 * v.members.index(member)
            else:
                lat = _lat(np.random.default_rng([spec.seed, v.pos, nid[s], nid[member]]), len(sts), spec)
                dts = _fifo(sts + lat)
            _add(parts, 3, dts, vc, vi, nid[s], seq, -1, 3)
            if s == member:
                _add(parts, 2, sts, vc, vi, nid[s], seq, -1, 2)
            # unicasts of s to the next member
            nxt = v.members[(v.members.index(s) + 1) % len(v.members)]
            if spec.unicasts_per_view and len(v.members) > 1 and member in (s, nxt):
                uts = _uni_times(spec, v, s)
                ubase = _seq_base(spec, tl, v.pos, s, True)
                useq = ubase + np.arange(len(uts), dtype=np.int64)
                if member == s:
                    _add(parts, 2, uts, vc, vi, nid[s], useq, nid[nxt], 2)
                if member == nxt:
                    ulat = _lat(np.random.default_rng([spec.seed, v.pos, nid[s], nid[member], 7]), len(uts), spec)
                    _add(parts, 3, _fifo(uts + ulat), vc, vi, nid[s], useq, nid[member], 3)
        if v.crash_ts is not None and member == spec.crash:
            crashed_at = v.crash_ts
            break
    kind = np.concatenate(parts["kind"]) if parts["kind"] else np.zeros(0, np.int8)
    ts = np.concatenate(parts["ts"]) if parts["ts"] else np.zeros(0, np.int64)
    prio = np.concatenate(parts["prio"]) if parts["prio"] else np.zeros(0, np.int8)
    cols = {c: np.concatenate(parts[c]) if parts[c] else np.zeros(0, np.int64) for c in ("vc", "vi", "sender", "seq", "dest")}
    if crashed_at is not None:                       # the crash, and the rows that never reached the disk
        keep = ts < crashed_at - 300_000_000
        kind, ts, prio = kind[keep], ts[keep], prio[keep]
        cols = {c: a[keep] for c, a in cols.items()}
    n = len(ts)
    members_tail = [(t, p) for t, p in views_rows if crashed_at is None or t < crashed_at - 300_000_000]
    extra_ts = [first.start - 1_000_000] + [t for t, _ in members_tail]
    extra_kind = [0] + [1] * len(members_tail)
    closed = crashed_at is None
    if closed:
        extra_ts.append(last_view.end + 1_000_000 + 10_000 * names.index(member))
        extra_kind.append(4)
    order = np.lexsort((np.concatenate([prio, np.array([0] + [1] * len(members_tail) + ([9] if closed else []), np.int8)]),
                        np.concatenate([ts, np.array(extra_ts, np.int64)])))
    m = len(extra_ts)
    # message rows
    msg = pa.table({
        "kind": pc.take(_KINDS, pa.array(kind.astype(np.int32))),
        "ts_ns": pa.array(ts, pa.int64()),
        "view_coord": _names(cols["vc"], names), "view_id": pa.array(cols["vi"], pa.int64()),
        "members": pa.nulls(n, pa.list_(pa.string())), "merge": pa.nulls(n, pa.bool_()),
        "sender": _names(cols["sender"], names), "seq": pa.array(cols["seq"], pa.int64()),
        "dest": pc.if_else(pa.array(cols["dest"] < 0), pa.nulls(n, pa.string()),
                           _names(np.maximum(cols["dest"], 0), names)),
        "size": pa.array(_sizes(cols["sender"], cols["seq"], names), pa.int32()),
        "hash": pa.array((cols["sender"] * 2654435761 + cols["seq"] * 40503) & 0xFFFFFFFF, pa.int64()),
        "flags": pa.array(np.zeros(n, np.int32)), "peer": pa.nulls(n, pa.string()), "info": pa.nulls(n, pa.string()),
    })
    extra_rows = []
    vr = iter(members_tail)
    for k, t in zip(extra_kind, extra_ts):
        row = {"kind": ["open", "view", "send", "deliver", "close"][k], "ts_ns": t}
        if k == 1:
            _, p = next(vr)
            v = tl[p]
            row.update(view_coord=v.members[0], view_id=p + 1, members=list(v.members), merge=False)
        elif k == 0:
            row["info"] = '{"impl": "synthetic"}'
        extra_rows.append(row)
    ext = pa.Table.from_pylist([{c: r.get(c) for c in COLUMNS if c != "idx"} for r in extra_rows],
                               schema=pa.schema([f for f in SCHEMA if f.name != "idx"]))
    # view coordinates of the non-view rows are already set; view rows carry their own
    t = pa.concat_tables([msg.select(ext.column_names).cast(ext.schema), ext]).take(pa.array(order))
    t = t.add_column(1, "idx", pa.array(np.arange(n + m, dtype=np.int64)))
    return t.select(list(COLUMNS)).cast(SCHEMA), closed


def _add(parts, kind, ts, vc, vi, sender, seq, dest, prio) -> None:
    n = len(ts)
    parts["kind"].append(np.full(n, kind, np.int8))
    parts["ts"].append(np.asarray(ts, np.int64))
    parts["vc"].append(np.full(n, vc, np.int64))
    parts["vi"].append(np.full(n, vi, np.int64))
    parts["sender"].append(np.full(n, sender, np.int64))
    parts["seq"].append(np.asarray(seq, np.int64))
    parts["dest"].append(np.full(n, dest, np.int64))
    parts["prio"].append(np.full(n, prio, np.int8))


def _sizes(sender: np.ndarray, seq: np.ndarray, names: list[str]) -> np.ndarray:
    lens = np.array([len(n) for n in names], np.int32)
    digits = np.floor(np.log10(np.maximum(seq, 1))).astype(np.int32) + 1
    return lens[sender] + 1 + digits


def generate(spec: Spec) -> Iterator[tuple[str, pa.Table, bool]]:
    """``(member, journal table, closed)`` for every member, one at a time."""
    tl = _timeline(spec)
    for m in spec.members:
        t, closed = member_table(spec, m, tl)
        yield m, t, closed


def crash_time(spec: Spec) -> int | None:
    return next((v.crash_ts for v in _timeline(spec) if v.crash_ts is not None), None)


def write_run(run_dir: str | os.PathLike, spec: Spec, tables: dict[str, tuple[pa.Table, bool]] | None = None,
              part_rows: int = 1 << 20) -> Path:
    """Write ``spec``'s journals (or the given, possibly planted, tables) into ``run_dir``."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    items = tables.items() if tables is not None else ((m, (t, c)) for m, t, c in generate(spec))
    for m, (t, closed) in items:
        parts = (t.slice(i, part_rows) for i in range(0, max(1, t.num_rows), part_rows))
        write_parts(run_dir, m, parts, stack=spec.stack, closed=closed)
    ct = crash_time(spec)
    if spec.crash and ct is not None:
        mark_crash(run_dir, spec.crash, ct)
    return run_dir


# ---------------------------------------------------------------------------------------------
# planted violations
# ---------------------------------------------------------------------------------------------

PLANTS = ("gap", "duplicate", "reorder", "total_order_inversion", "disagreeing_view", "missing_self_delivery",
          "same_view_break")


def plant(tables: dict[str, tuple[pa.Table, bool]], what: str, victim: str, sender: str) -> dict:
    """Plant one violation ``what`` at member ``victim`` (about messages of ``sender``); returns what was done.

    The runs the tests use have at least two views, ``sender`` != ``victim`` for message plants (except
    ``missing_self_delivery``, where victim = sender) and no crash.
    """
    t, closed = tables[victim]
    df = t.to_pandas()
    info: dict = {"what": what, "member": victim, "sender": sender}
    d = df[(df.kind == "deliver") & (df.sender == sender) & df.dest.isna()]
    views = df[df.kind == "view"]
    first_view = views.iloc[0]
    in_first = d[d.view_id == first_view.view_id]
    if what == "gap":
        row = in_first.iloc[len(in_first) // 2]
        df = df.drop(index=row.name)
        info["seq"] = int(row.seq)
    elif what == "duplicate":
        row = in_first.iloc[len(in_first) // 3]
        later = in_first.iloc[len(in_first) // 3 + 3]
        dup = row.copy()
        dup["ts_ns"] = later.ts_ns + 1
        df.loc[len(df) + 10**9] = dup
        info["seq"] = int(row.seq)
    elif what == "reorder":
        a, b = in_first.iloc[len(in_first) // 2], in_first.iloc[len(in_first) // 2 + 1]
        df.loc[a.name, "ts_ns"], df.loc[b.name, "ts_ns"] = b.ts_ns, a.ts_ns
        df.loc[a.name, "idx"], df.loc[b.name, "idx"] = b.idx, a.idx
        info["seq"] = int(b.seq)
    elif what == "total_order_inversion":
        dm = df[(df.kind == "deliver") & df.dest.isna() & (df.view_id == first_view.view_id)].sort_values("idx")
        for i in range(len(dm) // 2, len(dm) - 1):
            a, b = dm.iloc[i], dm.iloc[i + 1]
            if a.sender != b.sender:
                break
        df.loc[a.name, "ts_ns"], df.loc[b.name, "ts_ns"] = b.ts_ns, a.ts_ns
        df.loc[a.name, "idx"], df.loc[b.name, "idx"] = b.idx, a.idx
        info["msgs"] = (f"{a.sender}:{a.seq}", f"{b.sender}:{b.seq}")
    elif what == "disagreeing_view":
        v = views.iloc[-1]
        df.at[v.name, "members"] = list(v.members)[:-1]
        info["view"] = (v.view_coord, int(v.view_id))
    elif what == "missing_self_delivery":
        own = df[(df.kind == "deliver") & (df.sender == victim) & df.dest.isna()]
        row = own.iloc[-1]
        df = df.drop(index=row.name)
        info["seq"] = int(row.seq)
    elif what == "same_view_break":
        row = in_first.iloc[-1]                          # the sender's last message of the first view ...
        nxt = views.iloc[1]                              # ... delivered right after the next view
        df.loc[row.name, ["ts_ns", "view_coord", "view_id"]] = [nxt.ts_ns + 1, nxt.view_coord, nxt.view_id]
        info["seq"] = int(row.seq)
        info["view"] = (nxt.view_coord, int(nxt.view_id))
    else:
        raise ValueError(f"unknown plant {what!r}; one of {PLANTS}")
    df = df.sort_values(["ts_ns", "idx"], kind="stable").reset_index(drop=True)
    df["idx"] = np.arange(len(df), dtype=np.int64)
    tables[victim] = (pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False), closed)
    return info
