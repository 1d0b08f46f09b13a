"""The guarantee checks, as PySpark DataFrame jobs over all journals of a run.

Only small results reach the driver: per-second counts per member, the views, per-view send ranges, per-stream
aggregates (member x sender x destination x send view) and the first counterexamples of each finding.

Terms: a *stream* is the messages of one sender to one destination (dest null: its multicasts), numbered by
the application ("<sender>:<n>", consecutive numbers). The *send view* of a message is the sender's view when it
was sent; the numbers a sender sent in one view form its *send range* there. A member *survives* a view if it
installs a later one; a sender also survives it by closing cleanly (leaving). A crashed member's journal is
evidence only up to ``grace`` seconds before its last row (rows still in its buffer were lost).

Jobs: (1) one scan: events per member and second (member summary, throughput); (2) the views (small);
(3) one scan of the sends: send ranges per (sender, dest, send view); (4) the stream job: the distinct streams
(member x sender x destination) are numbered, deliveries get their stream number and send view from broadcast
joins, then ONE shuffle and sort by (stream number, message number) for window functions (gaps, duplicates,
FIFO, delivery outside the send view), aggregated per stream; (5) latency: deliveries joined with the sends of
every k-th message number (broadcast), percentiles per pair; (6) total order (if enabled): a pairwise
self-join of the multicast deliveries.

Findings:

1. reliability: ``gap`` (numbers missing between two delivered ones that the member was owed: not sent on the
   other side of a partition, see ``Checker._weigh_holes``), ``duplicate``, ``lost`` (a message the member had
   to deliver -- it installed the send view and survived it, as did the sender -- is not delivered, and neither
   left the other out of a later view within ``loss_window_s`` of the send: an error), ``lost_unicast`` (a
   unicast whose sender and destination parted so), ``duplicate_id`` (a number sent twice in a stream);
   same-view delivery: ``other_view`` (a required multicast delivered in another view than its send view),
   ``lost_at_view_change`` (a required multicast never delivered, or a hole, where member and sender parted
   soon after), ``lost_at_merge`` (a hole between members that went on together, across a merge view the
   member installed before it delivered the number after the hole: 2.12's NAKACK starts a window afresh at a
   merge digest ahead of it) -- errors with FLUSH in the stack, warnings without; with FLUSH, what a partition kept from
   the other side (each installed a view without the other) was not owed (virtual synchrony binds the members
   that go on together), counted in ``stats["not_owed_across_partition"]``;
2. fifo: ``reorder`` (a regular, non-OOB message delivered after a higher-numbered one of its stream);
3. total_order (SEQUENCER/TOTAL in a stack, or forced): ``inversion`` of two multicasts between two members;
4. views: ``disagreeing_view`` (one view id, different member lists; a member written as its UUID, its name
   never learned, agrees with any name at its place: ``unresolved_name``, a warning; a version made by a
   coordinator takeover under the old coordinator's name is checked under a name of its own: ``minted_view_id``,
   a warning, see :mod:`jgpy.analysis.takeover`), ``view_id_order`` (ids not increasing at
   a member), ``view_order`` (two members install common views in different orders), ``skipped_view``
   (warning: a member listed in a view it never installed although it installed views before and after);
5. self_delivery: ``missing_self_delivery`` (a multicast never delivered to its sender, which stayed alive);
   a number missing in the middle of a member's own stream is also reported as a ``gap``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from jgpy.analysis import takeover
from jgpy.analysis.load import Run
from jgpy.journal import UUID_NAME

#: the journal columns as Spark reads them (plus ``member``, from the directory)
SPARK_SCHEMA = ("kind string, idx bigint, ts_ns bigint, view_coord string, view_id bigint, members array<string>, "
                "merge boolean, sender string, seq bigint, dest string, size int, hash bigint, flags int, "
                "peer string, info string")

#: latency quantiles kept per pair (the CDF plot and the percentiles)
CDF_POINTS = [i / 100 for i in range(100)] + [0.995, 0.999, 0.9999, 1.0]
PCTS = [0.5, 0.99, 0.999]
#: latency: at most about this many sampled sends (broadcast to every task)
LATENCY_SAMPLE_SENDS = 200_000
#: holes of one stream brought to the driver to be weighed against the send views (the rest count as gaps)
MAX_HOLES = 10_000


@dataclass
class Finding:
    check: str            # reliability | same_view | fifo | total_order | views | self_delivery
    kind: str             # gap, duplicate, lost, ...
    severity: str         # error | warning
    count: int
    examples: list[str] = field(default_factory=list)
    note: str = ""

    def __str__(self) -> str:
        return f"{self.severity.upper()} {self.check}/{self.kind}: {self.count}" + \
            (f" (first: {self.examples[0]})" if self.examples else "")


@dataclass
class Options:
    grace_s: float = 2.0                   # a crashed member's journal must reach this far past the sends
    flush: bool | None = None              # same-view breaks are errors (None: FLUSH in any member's stack)
    total_order: bool | None = None        # check total order (None: SEQUENCER/TOTAL in any member's stack)
    max_examples: int = 5
    latency_sample_sends: int = LATENCY_SAMPLE_SENDS
    # a message a member did not get is put down to a view change (lost_at_view_change: a warning without
    # FLUSH) only if the member installed a view without its sender within this long after it was sent;
    # a sender that stayed in the member's views longer was reachable for retransmission: an error
    loss_window_s: float = 60.0
    # a journal records a view when the application sees it, after the protocols below GMS acted on it (a
    # unicast sender drops its connection to a member it leaves out, and the next numbers go on a new one):
    # a hole the member saw filled from a new connection may come from a sender's view this much later
    view_skew_s: float = 2.0


def load_events(spark, run: Run):
    """All rows of the run: the journal columns plus ``member``."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    dfs = [spark.read.schema(SPARK_SCHEMA).parquet(*[str(f) for f in m.files]).withColumn("member", F.lit(m.name))
           for m in run.members]
    return reduce(DataFrame.unionByName, dfs)


def _hole_example(member: str, sender: str, a: int, b: int, r: Any, h: dict, what: str) -> str:
    """A same-view hole ``a..b`` of ``sender``'s stream at ``member``, sent in ``r``'s view, for a finding."""
    return (f"at {member}: {sender}:{a}..{b} sent in view {_vs(r.vc, r.vi)} ({what}: delivered {sender}:"
            f"{h['p_seq']}, then {sender}:{h['seq']})")


def _fmt(r: Any) -> str:
    d = r.asDict(recursive=True) if hasattr(r, "asDict") else dict(r)
    return ", ".join(f"{k}={v}" for k, v in d.items() if v is not None)


def _vs(vc: Any, vi: Any) -> str:
    return f"{vc}|{vi}"


@dataclass
class SendRange:
    """The numbers ``lo..hi`` a sender sent in one stream in one view (``n`` sends)."""

    rid: int
    origin: str
    sender: str
    dest: str | None
    vc: str
    vi: int
    lo: int
    hi: int
    n: int
    ts_lo: int
    ts_hi: int


class Checker:
    """Runs every check of one run; :meth:`run` fills ``findings``, ``stats`` and the small plot tables."""

    def __init__(self, spark, run: Run, options: Options | None = None):
        self.spark = spark
        self.run_ = run
        self.opt = options or Options()
        self.findings: list[Finding] = []
        self.stats: dict[str, Any] = {}
        self.flush = self.opt.flush if self.opt.flush is not None else run.stack_has("FLUSH")
        self.total_order = (self.opt.total_order if self.opt.total_order is not None
                            else run.stack_has("SEQUENCER", "TOTAL", "TOA", "TOTAL_ORDER_ANYCAST"))
        self.throughput: list = []
        self.view_marks: list = []

    def add(self, check: str, kind: str, severity: str, count: int, examples: list[str], note: str = "") -> None:
        if count:
            self.findings.append(Finding(check, kind, severity, int(count), examples[:self.opt.max_examples], note))

    def run(self) -> "Checker":
        ev = load_events(self.spark, self.run_)
        phases = self.stats["phase_seconds"] = {}

        def phase(name: str, fn, *args) -> None:
            t0 = time.perf_counter()
            fn(*args)
            phases[name] = round(time.perf_counter() - t0, 3)

        phase("summary", self._summary, ev)
        ev = self._rename_minted_views(ev)
        phase("views", self._views, ev)
        phase("send_ranges", self._ranges, ev)
        phase("streams", self._streams, ev)
        phase("latency", self._latency, ev)
        if self.total_order:
            phase("total_order", self._total_order, ev)
        self._crashes()
        return self

    # ---- (1) member summary and throughput: one scan ------------------------------------------

    def _summary(self, ev) -> None:
        from pyspark.sql import functions as F
        k = F.col("kind")
        rows = (ev.groupBy("member", F.floor(F.col("ts_ns") / F.lit(1_000_000_000)).cast("long").alias("sec"))
                .agg(F.min("ts_ns").alias("first_ts"), F.max("ts_ns").alias("last_ts"),
                     F.max((k == "close").cast("int")).alias("closed"), F.count(F.lit(1)).alias("rows"),
                     F.sum((k == "deliver").cast("long")).alias("deliveries"),
                     F.sum((k == "send").cast("long")).alias("sends"),
                     F.sum(((k == "deliver") & F.col("seq").isNull()).cast("long")).alias("unnumbered"),
                     F.sum((k == "view").cast("long")).alias("views"))
                .collect())
        members: dict[str, dict] = {}
        for r in rows:
            m = members.setdefault(r.member, {"member": r.member, "first_ts": r.first_ts, "last_ts": r.last_ts,
                                              "closed": False, "rows": 0, "deliveries": 0, "sends": 0,
                                              "unnumbered": 0, "views": 0})
            m["first_ts"] = min(m["first_ts"], r.first_ts)
            m["last_ts"] = max(m["last_ts"], r.last_ts)
            m["closed"] = m["closed"] or bool(r.closed)
            for c in ("rows", "deliveries", "sends", "unnumbered", "views"):
                m[c] += int(r[c] or 0)
        for mj in self.run_.members:
            if mj.name in members:
                members[mj.name].update(impl=mj.impl, crash_ts=(mj.crash or {}).get("ts_ns"))
        self.members = members
        self.t0 = min(m["first_ts"] for m in members.values())
        t0s = self.t0 // 1_000_000_000
        self.throughput = sorted((r.member, int(r.sec) - t0s, int(r.deliveries), int(r.sends)) for r in rows
                                 if r.deliveries or r.sends)
        per_sec: dict[int, int] = {}
        for _, s, d, _ in self.throughput:
            per_sec[s] = per_sec.get(s, 0) + d
        if per_sec:
            vals = [per_sec.get(s, 0) for s in range(min(per_sec), max(per_sec) + 1)]
            self.stats["throughput"] = {"seconds": len(vals), "peak_per_s": max(vals),
                                        "mean_per_s": sum(vals) / len(vals), "total_deliveries": sum(vals)}
        self.stats["members"] = members
        self.stats["t0_ns"] = self.t0
        self.stats["t0_s"] = t0s                  # the throughput windows are seconds since t0_s (whole seconds)
        self.stats["abrupt_ends"] = sorted(n for n, v in members.items() if not v["closed"])

    # ---- (2) views ------------------------------------------------------------------------------

    def _rename_minted_views(self, ev):
        """``ev`` with every minted version of a view id (a coordinator takeover of 2.12 that named its first
        view after the old coordinator: :mod:`jgpy.analysis.takeover`) under a name of its own."""
        from pyspark.sql import functions as F
        rows = (ev.where(F.col("kind") == "view")
                .select("member", "idx", F.col("view_coord").alias("vc"), F.col("view_id").alias("vi"), "members")
                .collect())
        renames = takeover.minted_versions(rows)
        seen: dict[tuple[str, int], list[str]] = {}
        for r in renames:
            seen.setdefault((r.vc, r.vi), []).append(r.member)
        self.add("views", "minted_view_id", "warning", len(seen),
                 [f"view {_vs(vc, vi)} as installed by {', '.join(sorted(ms))} was made by a member that took over "
                  f"as coordinator (checked as {_vs(f'{vc}~{min(ms)}', vi)})" for (vc, vi), ms in sorted(seen.items())],
                 "2.12 names a view after its first member: a takeover that removes the suspects in more than one "
                 "step names its first view after the old coordinator, whose id it may repeat")
        return takeover.apply(ev, renames)

    def _views(self, ev) -> None:
        from pyspark.sql import Window as W
        from pyspark.sql import functions as F
        views = (ev.where(F.col("kind") == "view")
                 .select("member", "idx", "ts_ns", F.col("view_coord").alias("vc"), F.col("view_id").alias("vi"),
                         "members", "merge").cache())
        n = self.opt.max_examples

        def report(kind: str, sev: str, df, fmt, order: list[str]) -> None:
            # count and the first examples in one job
            agg = df.agg(F.count(F.lit(1)).alias("n"),
                         F.slice(F.sort_array(F.collect_list(F.struct(*order, *[c for c in df.columns
                                                                                if c not in order]))), 1, n).alias("x"))
            r = agg.collect()[0]
            self.add("views", kind, sev, r.n, [fmt(x) for x in r.x])

        v = views.withColumn("mlist", F.concat_ws(",", "members"))
        # A member whose logical name a journal never learned is written as its UUID (a member that joined after
        # it crashed, say): such an entry agrees with any name at its place in the list (the order of a view's
        # members is the same everywhere); the lengths and every named place must agree
        named = (views.select("vc", "vi", F.posexplode("members").alias("pos", "m"))
                 .where(~F.col("m").rlike(UUID_NAME)).groupBy("vc", "vi", "pos")
                 .agg(F.countDistinct("m").alias("k")).where(F.col("k") > 1).select("vc", "vi"))
        sizes = (views.groupBy("vc", "vi").agg(F.countDistinct(F.size("members")).alias("k"))
                 .where(F.col("k") > 1).select("vc", "vi"))
        agree = (v.join(named.union(sizes).distinct(), ["vc", "vi"], "left_semi").groupBy("vc", "vi")
                 .agg(F.min_by(F.struct("member", "mlist"), "mlist").alias("a"),
                      F.max_by(F.struct("member", "mlist"), "mlist").alias("b")))
        report("disagreeing_view", "error", agree,
               lambda r: f"view {_vs(r.vc, r.vi)}: {r.a.member} has [{r.a.mlist}], {r.b.member} has [{r.b.mlist}]",
               ["vi", "vc"])
        unnamed = v.where(F.exists("members", lambda m: m.rlike(UUID_NAME))).select("member", "idx", "vc", "vi",
                                                                                   "mlist")
        report("unresolved_name", "warning", unnamed,
               lambda r: f"{r.member} lists a member of view {_vs(r.vc, r.vi)} by its address: [{r.mlist}]",
               ["member", "idx"])
        w = W.partitionBy("member").orderBy("idx")
        order = (views.select("member", "idx", "vc", "vi", F.lag("vc").over(w).alias("pvc"),
                              F.lag("vi").over(w).alias("pvi"))
                 .where(F.col("vi") <= F.col("pvi")))
        report("view_id_order", "error", order,
               lambda r: f"{r.member} installed {_vs(r.vc, r.vi)} after {_vs(r.pvc, r.pvi)} (event {r.idx})",
               ["member", "idx"])
        a, b = views.alias("a"), views.alias("b")
        pairs = (a.join(b, (F.col("a.vc") == F.col("b.vc")) & (F.col("a.vi") == F.col("b.vi"))
                        & (F.col("a.member") < F.col("b.member")))
                 .select(F.col("a.member").alias("ma"), F.col("b.member").alias("mb"), F.col("a.idx").alias("ia"),
                         F.col("b.idx").alias("ib"), F.concat_ws("|", "a.vc", "a.vi").alias("v")))
        wp = W.partitionBy("ma", "mb").orderBy("ia")
        inv = (pairs.select("*", F.lag("ib").over(wp).alias("pib"), F.lag("v").over(wp).alias("pv"))
               .where(F.col("ib") < F.col("pib")))
        report("view_order", "error", inv,
               lambda r: f"{r.ma} installed {r.pv} before {r.v}, {r.mb} the other way round", ["ma", "mb", "ia"])
        listed = views.select("vc", "vi", F.explode("members").alias("m")).distinct()
        span = views.groupBy("member").agg(F.min("vi").alias("lo"), F.max("vi").alias("hi"))
        own = views.select(F.col("member").alias("m"), "vc", "vi")
        skipped = (listed.join(span, listed.m == span.member)
                   .where((F.col("vi") > F.col("lo")) & (F.col("vi") < F.col("hi")))
                   .join(own, ["m", "vc", "vi"], "left_anti").select("vi", "vc", "m", "lo", "hi"))
        report("skipped_view", "warning", skipped,
               lambda r: f"{r.m} is listed in view {_vs(r.vc, r.vi)} but never installed it (its views span ids "
                         f"{r.lo}..{r.hi})", ["vi", "m"])
        rows = views.orderBy("member", "idx").collect()
        views.unpersist()
        # per member, its views in order: survival of each view and the next view's members
        self.views: dict[str, list] = {}
        for r in rows:
            self.views.setdefault(r.member, []).append(r)
        self.next_of: dict[tuple[str, str, int], list[str] | None] = {}
        for m, vs in self.views.items():
            for i, r in enumerate(vs):
                self.next_of[(m, r.vc, r.vi)] = list(vs[i + 1].members) if i + 1 < len(vs) else None
        first: dict[tuple, int] = {}
        for r in rows:
            key = (r.vc, r.vi)
            first[key] = min(first.get(key, r.ts_ns), r.ts_ns)
        self.view_marks = sorted((ts, vc, vi) for (vc, vi), ts in first.items())
        self.stats["views"] = len(first)

    # ---- (3) send ranges ------------------------------------------------------------------------

    def _ranges(self, ev) -> None:
        from pyspark.sql import functions as F
        rows = (ev.where((F.col("kind") == "send") & F.col("seq").isNotNull())
                .groupBy(F.col("member").alias("origin"), "sender", "dest", "view_coord", "view_id")
                .agg(F.min("seq").alias("lo"), F.max("seq").alias("hi"), F.count(F.lit(1)).alias("n"),
                     F.min("ts_ns").alias("ts_lo"), F.max("ts_ns").alias("ts_hi"))
                .collect())
        by_stream: dict[tuple, list[SendRange]] = {}
        for i, r in enumerate(sorted(rows, key=lambda r: (r.sender, r.dest or "", r.lo, r.origin))):
            sr = SendRange(i, r.origin, r.sender, r.dest, r.view_coord, r.view_id, r.lo, r.hi, r.n, r.ts_lo, r.ts_hi)
            by_stream.setdefault((sr.sender, sr.dest), []).append(sr)
        self.ranges: list[SendRange] = []
        dup_ex, dup_n, amb_ex = [], 0, []
        for (sender, dest), rs in sorted(by_stream.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            overlap = [(a, b) for a, b in zip(rs, rs[1:]) if b.lo <= a.hi]
            extra = sum(max(0, r.n - (r.hi - r.lo + 1)) for r in rs)
            if extra:
                dup_n += extra
                dup_ex.append(f"stream {sender}->{dest or '*'}: {extra} numbers sent more than once in "
                              f"{', '.join(f'{r.lo}..{r.hi} ({r.n} sends, view {_vs(r.vc, r.vi)})' for r in rs if r.n > r.hi - r.lo + 1)}")
            if overlap:
                a, b = overlap[0]
                amb_ex.append(f"stream {sender}->{dest or '*'}: numbers {a.lo}..{a.hi} sent in view {_vs(a.vc, a.vi)}"
                              f"{' by ' + a.origin if a.origin != b.origin else ''} overlap {b.lo}..{b.hi} sent in "
                              f"{_vs(b.vc, b.vi)}{' by ' + b.origin if a.origin != b.origin else ''}")
                continue                       # no send views for this stream: the same-view check skips it
            self.ranges += rs
        self.add("reliability", "duplicate_id", "error", dup_n, dup_ex)
        self.add("same_view", "ambiguous_send_view", "warning", len(amb_ex), amb_ex,
                 "numbers of these streams are not increasing across views: their send views are unknown and "
                 "they are not checked for completeness and same-view delivery")
        self.stats["sends_numbered"] = sum(r.n for r in self.ranges)

    # ---- (4) the stream job ---------------------------------------------------------------------

    def _targets(self):
        """``(range, member, role)`` for every member that has to deliver a send range: role ``self`` (the
        sender's own multicasts, if its journal reaches past them), ``other`` (it installed the send view and
        survived it, as did the sender, and its journal reaches past the sends)."""
        grace = int(self.opt.grace_s * 1e9)
        for r in self.ranges:
            o = self.members.get(r.origin)
            if o is None:
                continue
            o_alive = self.next_of.get((r.origin, r.vc, r.vi)) is not None or o["closed"]
            for m in ([r.dest] if r.dest is not None else self._listed(r)):
                mm = self.members.get(m)
                if mm is None:
                    continue
                reaches = mm["closed"] or mm["last_ts"] >= r.ts_hi + grace
                if m == r.origin:
                    if r.dest is None and reaches:
                        yield r, m, "self"
                elif reaches and o_alive and self.next_of.get((m, r.vc, r.vi)) is not None:
                    yield r, m, "other"

    def _streams(self, ev) -> None:
        from pyspark.sql import Window as W
        from pyspark.sql import functions as F
        d = (ev.where((F.col("kind") == "deliver") & F.col("seq").isNotNull())
             .select("member", "sender", "dest", "seq", "idx", "ts_ns", F.col("view_coord").alias("vc"),
                     F.col("view_id").alias("vi"), (F.col("flags").bitwiseAND(1) != 0).alias("oob")))
        # Streams are few (members x senders x destinations): numbered, the shuffle and the sort carry and
        # compare one int per row instead of three strings.
        names = [(r["member"], r["sender"], r["dest"])
                 for r in d.select("member", "sender", "dest").distinct().collect()]
        sid_of = {k: i for i, k in enumerate(names)}
        ids = self.spark.createDataFrame([(i, *k) for i, k in enumerate(names)],
                                         "sid int, k_member string, k_sender string, k_dest string")
        d = d.join(F.broadcast(ids), (d.member == ids.k_member) & (d.sender == ids.k_sender)
                   & d.dest.eqNullSafe(ids.k_dest)).drop("member", "sender", "dest", "k_member", "k_sender", "k_dest")
        targets = [(sid_of[k], r.lo, r.hi, r.vc, r.vi) for r, m, role in self._targets()
                   if role == "other" and r.dest is None and (k := (m, r.sender, r.dest)) in sid_of]
        if targets:
            # the send view of each delivery that had to be in it: a broadcast range join, no shuffle
            rng = self.spark.createDataFrame(targets, "r_sid int, lo bigint, hi bigint, svc string, svi bigint")
            d = d.join(F.broadcast(rng), (d.sid == rng.r_sid) & (d.seq >= rng.lo) & (d.seq <= rng.hi), "left")
            off = (F.col("vc") != F.col("svc")) | (F.col("vi") != F.col("svi"))
            d = d.select("sid", "seq", "idx", "ts_ns", "oob", off.alias("other"),
                         F.when(off, F.concat_ws("|", "svc", "svi")).alias("sent_in"),
                         F.when(off, F.concat_ws("|", "vc", "vi")).alias("delivered_in"))
        else:
            d = d.select("sid", "seq", "idx", "ts_ns", "oob", F.lit(None).cast("boolean").alias("other"),
                         F.lit(None).cast("string").alias("sent_in"), F.lit(None).cast("string").alias("delivered_in"))
        w = W.partitionBy("sid").orderBy("seq", "idx")
        # one shuffle and one sort; both window levels and the aggregation reuse that order
        d = d.repartition("sid").select("*", F.lag("seq").over(w).alias("p_seq"))
        d = d.withColumn("dup", F.coalesce(F.col("seq") == F.col("p_seq"), F.lit(False)))
        regular = ~F.col("dup") & ~F.col("oob")
        before = w.rowsBetween(W.unboundedPreceding, -1)
        d = d.select("*", F.last(F.when(regular, F.col("idx")), ignorenulls=True).over(before).alias("p_idx"),
                     F.last(F.when(regular, F.col("seq")), ignorenulls=True).over(before).alias("p_rseq"))
        first = ~F.col("dup")
        gap = first & (F.col("seq") > F.col("p_seq") + 1)
        fifo = first & ~F.col("oob") & (F.col("p_idx") > F.col("idx"))
        other = first & F.coalesce(F.col("other"), F.lit(False))
        cnt = lambda c: F.sum(c.cast("long"))  # noqa: E731
        agg = d.groupBy("sid").agg(
            F.count(F.lit(1)).alias("n"),
            F.min(F.when(first, F.col("seq"))).alias("lo"), F.max(F.when(first, F.col("seq"))).alias("hi"),
            cnt(F.col("dup")).alias("n_duplicate"), cnt(gap).alias("n_gap"),
            F.sum(F.when(gap, F.col("seq") - F.col("p_seq") - 1)).alias("missing"),
            cnt(fifo).alias("n_reorder"), cnt(other).alias("n_other_view"),
            # the first counterexample of each kind: a struct is built only where the condition holds
            F.min(F.when(gap, F.struct("seq", "p_seq", "idx"))).alias("x_gap"),
            F.slice(F.collect_list(F.when(gap, F.struct("seq", "p_seq", "idx", "ts_ns"))), 1, MAX_HOLES).alias("holes"),
            F.min(F.when(F.col("dup"), F.struct("seq", "idx"))).alias("x_duplicate"),
            F.min(F.when(fifo, F.struct("seq", "idx", F.col("p_rseq").alias("after_seq"),
                                        F.col("p_idx").alias("after_idx")))).alias("x_reorder"),
            F.min(F.when(other, F.struct("seq", "idx", "sent_in", "delivered_in"))).alias("x_other_view"))
        rows = []
        for r in agg.collect():
            row = r.asDict(recursive=True)
            row["member"], row["sender"], row["dest"] = names[row.pop("sid")]
            rows.append(row)
        self._stream_findings(rows)

    def _weigh_holes(self, rows: list[dict]) -> dict[str, tuple[int, list[str]]]:
        """Holes (numbers missing between two delivered ones) are gaps only where the member was owed them.

        A number sent in a view the member never installed was not owed (the other side of a partition: it is
        counted in ``stats["holes_not_owed"]``); one sent in a view it installed, followed by a delivered number
        of a later view, where member and sender parted in between (:meth:`_parted`), is a
        same-view finding (``lost_at_view_change``: without FLUSH, what is in flight when a view changes may be
        lost), unless with FLUSH a partition parted them (:meth:`_partitioned`: not owed, counted in
        ``stats["not_owed_across_partition"]``); one that member and sender were both owed but that spans a
        merge view the member installed (:meth:`_merged_in_between`) is ``lost_at_merge``; any other missing
        number (one a later number of its own send view was delivered after, unless
        the sender's next view left the member out right at the end of that range: :meth:`_sender_left_at_end`;
        one whose sender stayed in the member's views, one whose send view is unknown) is a gap. Rewrites each
        stream's gap fields accordingly; returns the count and examples of each same-view kind of hole."""
        by_stream: dict[tuple, list[SendRange]] = {}
        for r in self.ranges:
            by_stream.setdefault((r.sender, r.dest), []).append(r)
        not_owed = at_change = across = at_merge = 0
        at_change_ex: list[str] = []
        at_merge_ex: list[str] = []
        for s in rows:
            holes = s.pop("holes", None) or []
            if not s["n_gap"]:
                continue
            m, ranges = s["member"], by_stream.get((s["sender"], s["dest"]), [])
            installed = {(v.vc, v.vi) for v in self.views.get(m, [])}
            # holes beyond MAX_HOLES were not brought here: they stay gaps, whole
            n_gap = s["n_gap"] - len(holes)
            missing = s["missing"] - sum(h["seq"] - h["p_seq"] - 1 for h in holes)
            first = None
            for h in holes:
                lo, hi = h["p_seq"] + 1, h["seq"] - 1
                owed, covered = 0, 0
                for r in ranges:
                    a, b = max(lo, r.lo), min(hi, r.hi)
                    if a > b:
                        continue
                    covered += b - a + 1
                    if (r.vc, r.vi) not in installed:
                        not_owed += b - a + 1
                    elif ((r.lo <= h["seq"] <= r.hi and not self._sender_left_at_end(m, r, h["ts_ns"]))
                          or not self._parted(m, r, h["idx"], h["ts_ns"])):
                        if self._merged_in_between(m, r, h["idx"]):     # ... but a merge digest came between
                            at_merge += b - a + 1
                            if len(at_merge_ex) < self.opt.max_examples:
                                at_merge_ex.append(_hole_example(m, s["sender"], a, b, r, h,
                                                                 "a hole across a merge view"))
                        else:
                            owed += b - a + 1       # a later number of the same view came, or both went on
                    elif self._partitioned(m, r, h["idx"], h["ts_ns"]):
                        across += b - a + 1
                    else:
                        at_change += b - a + 1
                        if len(at_change_ex) < self.opt.max_examples:
                            at_change_ex.append(_hole_example(m, s["sender"], a, b, r, h, "a hole"))
                owed += (hi - lo + 1) - covered            # send view unknown: owed
                if owed:
                    n_gap += 1
                    missing += owed
                    if first is None or h["seq"] < first["seq"]:
                        first = h
            s["n_gap"], s["missing"] = n_gap, missing
            s["x_gap"] = None if n_gap == 0 else first if first is not None else s["x_gap"]
        self.stats["holes_not_owed"] = not_owed
        self.stats["not_owed_across_partition"] = across
        return {"lost_at_view_change": (at_change, at_change_ex), "lost_at_merge": (at_merge, at_merge_ex)}

    def _merged_in_between(self, member: str, r: SendRange, before_idx: int) -> bool:
        """Did ``member`` install a merge view listing the sender of ``r`` after ``r``'s send view and before
        its event ``before_idx`` (the delivery after a hole)? A merge digest ahead of a member's window makes
        2.12's NAKACK (and jgpy's) start that window afresh at the digest: what was in flight is skipped."""
        return any(v.merge and v.idx < before_idx and r.origin in v.members for v in self._views_after(member, r))

    def _stream_findings(self, rows: list[dict]) -> None:
        n_ex = self.opt.max_examples
        same_view_holes = self._weigh_holes(rows)
        self.streams = {(r["member"], r["sender"], r["dest"]): r for r in rows}
        ordered = sorted(rows, key=lambda s: (s["member"], s["sender"], s["dest"] or ""))
        where = lambda s: f"at {s['member']}, stream {s['sender']}->{s['dest'] or '*'}"  # noqa: E731
        sev_sv = "error" if self.flush else "warning"
        for kind, check, sev in (("gap", "reliability", "error"), ("duplicate", "reliability", "error"),
                                 ("reorder", "fifo", "error"), ("other_view", "same_view", sev_sv)):
            bad = [s for s in ordered if s[f"n_{kind}"]]
            note = ""
            if kind == "gap":
                note = f"{sum(s['missing'] for s in bad):,} numbers missing in all"
            elif kind == "other_view" and not self.flush:
                note = "FLUSH is not in the stack: same-view delivery is not guaranteed"
            self.add(check, kind, sev, sum(s[f"n_{kind}"] for s in bad),
                     [f"{where(s)}: {_example(kind, s['sender'], s['x_' + kind])}" for s in bad[:n_ex]], note)
        # completeness and self delivery: required send ranges against what each member delivered
        out: dict[str, list] = {k: [0, []] for k in ("lost", "lost_unicast", "missing_self_delivery")}
        out.update({k: list(v) for k, v in same_view_holes.items()})
        required = self_required = 0
        for r, m, role in self._targets():
            lost = self._outside(m, r)
            if role == "self":
                self_required += r.n
                if lost:
                    out["missing_self_delivery"][0] += lost[0]
                    out["missing_self_delivery"][1].append(f"at {m}: {lost[0]} of {r.sender}:{r.lo}..{r.hi} "
                                                           f"(view {_vs(r.vc, r.vi)}), first {r.sender}:{lost[1]}")
                continue
            required += r.n
            if lost and r.dest is None and self._partitioned(m, r):
                self.stats["not_owed_across_partition"] += lost[0]
                continue
            if lost:
                kind = "lost" if not self._parted(m, r) else ("lost_unicast" if r.dest is not None else "lost_at_view_change")
                out[kind][0] += lost[0]
                out[kind][1].append(f"at {m}: {lost[0]} of {r.sender}->{r.dest or '*'} {r.lo}..{r.hi} sent in "
                                    f"view {_vs(r.vc, r.vi)}, first {r.sender}:{lost[1]}")
        sev = {"lost": ("reliability", "error"), "lost_unicast": ("reliability", "warning"),
               "lost_at_view_change": ("same_view", sev_sv), "missing_self_delivery": ("self_delivery", "error"),
               "lost_at_merge": ("same_view", sev_sv)}
        notes: dict[str, str] = {} if self.flush else {
            "lost_at_view_change": "FLUSH is not in the stack: messages of a leaving sender may be lost with the "
                                   "view change",
            "lost_at_merge": "FLUSH is not in the stack: a merge digest ahead of a window makes NAKACK skip what "
                             "was in flight"}
        for kind, (check, s) in sev.items():
            self.add(check, kind, s, out[kind][0], out[kind][1], notes.get(kind, ""))
        self.stats["streams"] = len(rows)
        self.stats["numbered_deliveries"] = sum(s["n"] for s in rows)
        self.stats["required_deliveries"] = required
        self.stats["self_deliveries_required"] = self_required

    def _parted(self, member: str, r: SendRange, before_idx: int | None = None, before_ts: int | None = None,
                both: bool = False) -> bool:
        """Did ``member`` and the sender of ``r`` part after ``r``'s send view, within ``loss_window_s`` of the
        sends (and, for a hole, before the member delivered the number after it: its event ``before_idx`` at
        ``before_ts``)? Parted: the member installed a view without the sender, or the sender one without the
        member (``both``: each one without the other, a partition, not a leave). Under a partition the next view
        may still list a sender that is already cut off (failure detection takes seconds), and views disagree
        for a while; what was in flight went with the view change (a unicast sender drops its connection to a
        member it leaves out, with what was not acked)."""
        window = r.ts_hi + int(self.opt.loss_window_s * 1e9)
        skew = int(self.opt.view_skew_s * 1e9)
        limits = (window if before_ts is None else min(window, before_ts),                 # the member's views
                  window if before_ts is None else min(window, before_ts + skew))          # the sender's
        sides = []
        for (who, other, stop_idx), limit in zip(((member, r.origin, before_idx), (r.origin, member, None)), limits):
            left_out = False
            for v in self._views_after(who, r):
                if (stop_idx is not None and v.idx > stop_idx) or v.ts_ns > limit:
                    break
                if other not in v.members:
                    left_out = True
                    break
            if left_out and not both:
                return True
            sides.append(left_out)
        return both and all(sides)

    def _partitioned(self, member: str, r: SendRange, before_idx: int | None = None,
                     before_ts: int | None = None) -> bool:
        """With FLUSH: did a partition part ``member`` and the sender of ``r`` (each installed a view without the
        other)? Virtual synchrony binds the members that go on together into the next view: what was sent in
        ``r``'s view on the other side of the cut was not owed (as without FLUSH, the merge does not bring it
        back). A sender that left cleanly installs no view without the member: its messages stay owed."""
        return bool(self.flush) and self._parted(member, r, before_idx, before_ts, both=True)

    def _sender_left_at_end(self, member: str, r: SendRange, delivered_ts: int) -> bool:
        """Did the sender of ``r`` leave ``member`` out of the view after ``r``'s, recorded within
        ``view_skew_s`` of ``r``'s last send and before the member delivered the number after a hole (at
        ``delivered_ts``)? Then that number, filed under ``r``'s view by the journal, may have gone out after
        the sender's protocols had installed the next view (on a new unicast connection): it does not show that
        nothing went with the view change."""
        after = self._views_after(r.origin, r)
        if not after:
            return False
        nxt = after[0]
        return (member not in nxt.members and nxt.ts_ns <= r.ts_hi + int(self.opt.view_skew_s * 1e9)
                and nxt.ts_ns <= delivered_ts)

    def _views_after(self, who: str, r: SendRange) -> list:
        """The views ``who`` installed after ``r``'s send view, in order (none if it never installed that view)."""
        vs = self.views.get(who, [])
        pos = next((i for i, v in enumerate(vs) if v.vc == r.vc and v.vi == r.vi), None)
        return [] if pos is None else vs[pos + 1:]

    def _listed(self, r: SendRange) -> list[str]:
        """The members of the sender's send view."""
        for v in self.views.get(r.origin, []):
            if v.vc == r.vc and v.vi == r.vi:
                return list(v.members)
        return []

    def _outside(self, member: str, r: SendRange) -> tuple[int, int] | None:
        """(how many, first) of the numbers r.lo..r.hi outside what ``member`` delivered of that stream (holes
        inside are gaps, reported as such)."""
        s = self.streams.get((member, r.sender, r.dest))
        if s is None or s["lo"] is None:
            return (r.hi - r.lo + 1, r.lo)
        below = max(0, min(r.hi, s["lo"] - 1) - r.lo + 1)
        above = max(0, r.hi - max(r.lo, s["hi"] + 1) + 1)
        if below + above == 0:
            return None
        return (below + above, r.lo if below else max(r.lo, s["hi"] + 1))

    # ---- (5) latency ----------------------------------------------------------------------------

    def _latency(self, ev) -> None:
        from pyspark.sql import functions as F
        total = sum(r.n for r in self.ranges)
        k = max(1, -(-total // max(1, self.opt.latency_sample_sends)))
        self.stats["latency_sample_every"] = k
        sample = (F.col("seq") % k) == 0
        s = (ev.where((F.col("kind") == "send") & F.col("seq").isNotNull() & sample)
             .select(F.col("sender").alias("s_sender"), F.col("dest").alias("s_dest"), F.col("seq").alias("s_seq"),
                     F.col("ts_ns").alias("s_ts")))
        d = ev.where((F.col("kind") == "deliver") & F.col("seq").isNotNull() & sample)
        j = (d.join(F.broadcast(s), (d.sender == s.s_sender) & d.dest.eqNullSafe(s.s_dest) & (d.seq == s.s_seq))
             .select("member", "sender", "dest", (F.col("ts_ns") - F.col("s_ts")).alias("lat")))
        pts = PCTS + CDF_POINTS
        rows = (j.groupingSets([["member", "sender", "dest"], []], "member", "sender", "dest")
                .agg(F.count("lat").alias("n"), F.avg("lat").alias("mean"), F.percentile_approx("lat", pts, 10000).alias("q"),
                     F.grouping_id().alias("gid"))
                .collect())
        self.stats["latency_pairs"] = sorted(
            ({"sender": r.sender, "member": r.member, "dest": r.dest, **_lat(r)} for r in rows if r.gid == 0 and r.n),
            key=lambda p: (p["sender"], p["member"], p["dest"] or ""))
        tot = next((r for r in rows if r.gid != 0 and r.n), None)
        self.stats["latency_overall"] = _lat(tot) if tot is not None else None

    # ---- (6) total order ------------------------------------------------------------------------

    def _total_order(self, ev) -> None:
        from pyspark.sql import Window as W
        from pyspark.sql import functions as F
        d = (ev.where((F.col("kind") == "deliver") & F.col("seq").isNotNull() & F.col("dest").isNull())
             .select("member", "sender", "seq", "idx"))
        a, b = d.alias("a"), d.alias("b")
        j = (a.join(b, (F.col("a.sender") == F.col("b.sender")) & (F.col("a.seq") == F.col("b.seq"))
                    & (F.col("a.member") < F.col("b.member")))
             .select(F.col("a.member").alias("ma"), F.col("b.member").alias("mb"), F.col("a.idx").alias("ia"),
                     F.col("b.idx").alias("ib"), F.concat_ws(":", "a.sender", "a.seq").alias("msg")))
        w = W.partitionBy("ma", "mb").orderBy("ia")
        inv = j.select("*", F.lag(F.struct("ib", "msg")).over(w).alias("p")).where(F.col("ib") < F.col("p.ib"))
        agg = inv.groupBy("ma", "mb").agg(F.count(F.lit(1)).alias("n"),
                                          F.min_by(F.struct("msg", F.col("p.msg").alias("pmsg")), "ia").alias("x"))
        rows = sorted(agg.collect(), key=lambda r: (r.ma, r.mb))
        ex = [f"{r.ma} delivered {r.x.pmsg} before {r.x.msg}, {r.mb} delivered {r.x.msg} first" for r in rows]
        self.add("total_order", "inversion", "error", sum(r.n for r in rows), ex)
        self.stats["total_order_checked"] = True

    # ---- crashes --------------------------------------------------------------------------------

    def _crashes(self) -> None:
        """Time from each crash marker to the first view without the member, at every other member."""
        self.stats["crashes"] = []
        for mj in self.run_.members:
            if not mj.crash:
                continue
            ts = int(mj.crash["ts_ns"])
            by = {}
            for m, vs in self.views.items():
                if m == mj.name:
                    continue
                t = next((v.ts_ns for v in vs if v.ts_ns > ts and mj.name not in v.members), None)
                if t is not None:
                    by[m] = (t - ts) / 1e9
            self.stats["crashes"].append({"member": mj.name, "crash_s": (ts - self.t0) / 1e9, "by": by,
                                          "first_s": min(by.values()) if by else None,
                                          "all_s": max(by.values()) if by else None})


def _example(kind: str, sender: str, x: dict) -> str:
    """A per-stream counterexample in words."""
    if kind == "gap":
        lo, hi = x["p_seq"] + 1, x["seq"] - 1
        return (f"missing {sender}:{lo}{f'..{hi}' if hi > lo else ''} (delivered {sender}:{x['p_seq']}, then "
                f"{sender}:{x['seq']} at event {x['idx']})")
    if kind == "duplicate":
        return f"{sender}:{x['seq']} delivered again at event {x['idx']}"
    if kind == "reorder":
        return (f"{sender}:{x['seq']} delivered at event {x['idx']}, after {sender}:{x['after_seq']} "
                f"(event {x['after_idx']})")
    if kind == "other_view":
        return f"{sender}:{x['seq']} sent in view {x['sent_in']}, delivered in {x['delivered_in']} (event {x['idx']})"
    return _fmt(x)


def _lat(r: Any) -> dict:
    q = list(r["q"] or [])
    p = q[:len(PCTS)] + [None] * (len(PCTS) - len(q[:len(PCTS)]))
    return {"n": r["n"] or 0, "mean_us": (r["mean"] / 1e3) if r["mean"] is not None else None,
            "p50_us": _us(p[0]), "p99_us": _us(p[1]), "p999_us": _us(p[2]),
            "cdf_us": [_us(x) for x in q[len(PCTS):]]}


def _us(ns: Any) -> float | None:
    return None if ns is None else ns / 1e3


__all__ = ["Checker", "Finding", "Options", "SendRange", "load_events"]
