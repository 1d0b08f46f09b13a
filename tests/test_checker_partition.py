"""The checker across a partition and merge: numbers sent on the other side of a partition were never owed.

Three views of A, B, C; in view 2, B is cut off: A and C install ``A|2`` = [A, C], B installs ``B|2`` = [B],
and neither side delivers what the other side sent then; view 3 merges them. The holes this leaves in each
stream (B misses A's and C's view-2 numbers, A and C miss B's) are not gaps: the missing messages were sent
in views the member never installed. A message that WAS owed (sent in view 1) and is missing still is a gap.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from jgpy.analysis import Options, check_run, synth
from jgpy.journal import COLUMNS, SCHEMA

SPEC = dict(views=[["A", "B", "C"], ["A", "B", "C"], ["A", "B", "C"]], msgs_per_view=30)


def _partitioned_tables():
    spec = synth.Spec(**SPEC)
    tables = {m: (t.to_pandas(), c) for m, t, c in synth.generate(spec)}
    for m, (df, _c) in tables.items():
        in_v2 = df.view_id == 2
        if m == "B":
            drop = in_v2 & (df.kind == "deliver") & (df.sender != "B")
            df.loc[in_v2, "view_coord"] = "B"
            view_row = in_v2 & (df.kind == "view")
            df.loc[view_row, "members"] = df.loc[view_row, "members"].map(lambda _: ["B"])
        else:
            # A and C: B is not in their view 2, and B's view-2 messages (sent in B|2) never reach them
            drop = in_v2 & (df.kind == "deliver") & (df.sender == "B")
            view_row = in_v2 & (df.kind == "view")
            df.loc[view_row, "members"] = df.loc[view_row, "members"].map(lambda _: ["A", "C"])
        df.drop(index=df[drop].index, inplace=True)
        df.loc[(df.view_id == 3) & (df.kind == "view"), "merge"] = True
    return spec, tables


def _write(tmp_path, spec, tables, name):
    out = {}
    for m, (df, closed) in tables.items():
        df = df.reset_index(drop=True)
        df["idx"] = range(len(df))
        out[m] = (pa.Table.from_pandas(df[list(COLUMNS)], schema=SCHEMA, preserve_index=False), closed)
    d = tmp_path / f"run={name}"
    synth.write_run(d, spec, out)
    return d


def test_holes_from_the_other_side_of_a_partition_are_not_gaps(spark, tmp_path):
    spec, tables = _partitioned_tables()
    res = check_run(_write(tmp_path, spec, tables, "partition"), spark=spark, options=Options())
    errors = [str(f) for f in res.findings if f.severity == "error"]
    assert errors == [], errors
    # B missed A's and C's 30 view-2 numbers each; A and C each missed B's 30
    assert res.stats["holes_not_owed"] == 4 * 30


def test_an_owed_number_missing_across_a_partition_is_still_a_gap(spark, tmp_path):
    spec, tables = _partitioned_tables()
    df, closed = tables["B"]
    owed = df[(df.kind == "deliver") & (df.sender == "A") & (df.view_id == 1) & (df.seq == 7)]
    assert len(owed) == 1
    df.drop(index=owed.index, inplace=True)
    res = check_run(_write(tmp_path, spec, tables, "owed"), spark=spark, options=Options())
    errors = [(f.check, f.kind, f.count) for f in res.findings if f.severity == "error"]
    assert errors == [("reliability", "gap", 1)], [str(f) for f in res.findings]
    gap = next(f for f in res.findings if f.kind == "gap")
    assert gap.examples[0].startswith("at B, stream A->*: missing A:7 ")


def test_what_was_in_flight_when_the_partition_came_is_a_same_view_finding(spark, tmp_path):
    """B misses A's last four view-1 multicasts (in flight when B was cut off) and delivers A's view-3 ones
    after the merge: without FLUSH that is a same-view warning, not a gap."""
    spec, tables = _partitioned_tables()
    df, closed = tables["B"]
    from_a = df[(df.kind == "deliver") & (df.sender == "A") & (df.view_id == 1)]
    last = int(from_a.seq.max())
    df.drop(index=from_a[from_a.seq > last - 4].index, inplace=True)
    res = check_run(_write(tmp_path, spec, tables, "in-flight"), spark=spark, options=Options())
    found = [(f.check, f.kind, f.severity, f.count) for f in res.findings]
    assert found == [("same_view", "lost_at_view_change", "warning", 4)], [str(f) for f in res.findings]


def test_a_partition_seen_one_view_late_is_a_view_change_not_a_loss(spark, tmp_path):
    """Failure detection takes seconds: B is cut off in view 2, but A and C install view 3 (still listing B)
    before view 4 without it. What B sent from then on never reached them; after the merge (view 5) their
    streams from B have a hole: lost with the view change (view 4), not a gap, although B was still in the
    view right after the send view."""
    spec = synth.Spec(views=[["A", "B", "C"]] * 5, msgs_per_view=30)
    tables = {m: (t.to_pandas(), c) for m, t, c in synth.generate(spec)}
    last_b2 = None
    for m, (df, _c) in tables.items():
        if m == "B":              # B's view 4 is its own [B]: it gets nothing from A and C from view 3 on
            v4 = df.view_id == 4
            drop = (df.view_id.isin([3, 4])) & (df.kind == "deliver") & (df.sender != "B")
            df.loc[v4, "view_coord"] = "B"
            row = v4 & (df.kind == "view")
            df.loc[row, "members"] = df.loc[row, "members"].map(lambda _: ["B"])
        else:
            row = (df.view_id == 4) & (df.kind == "view")
            df.loc[row, "members"] = df.loc[row, "members"].map(lambda _: ["A", "C"])
            from_b = (df.kind == "deliver") & (df.sender == "B")
            last_b2 = df[from_b & (df.view_id == 2)].seq.max()
            # B's last 10 multicasts of view 2 and all of view 3 never reached them; B's view 4 was its own
            drop = from_b & (((df.view_id == 2) & (df.seq > last_b2 - 10)) | df.view_id.isin([3, 4]))
        df.drop(index=df[drop].index, inplace=True)
        df.loc[(df.view_id == 5) & (df.kind == "view"), "merge"] = True
    res = check_run(_write(tmp_path, spec, tables, "late"), spark=spark, options=Options())
    found = [(f.check, f.kind, f.severity, f.count) for f in res.findings if f.kind != "skipped_view"]
    # A and C: B's last 10 of view 2 and its 30 of view 3; B: A's and C's 30 of view 3 (B left them out in its
    # view 4 as they left it out in theirs)
    assert found == [("same_view", "lost_at_view_change", "warning", 2 * (10 + 30) + 2 * 30)], \
        [str(f) for f in res.findings]
    assert res.stats["holes_not_owed"] == 2 * 30 + 2 * 30        # B's view 4 at A, C; A's and C's view 4 at B


def test_with_flush_what_a_partition_kept_from_the_other_side_was_not_owed(spark, tmp_path):
    """The in-flight case above and the late partition below, with FLUSH in the stack: virtual synchrony binds
    the members that go on together, so what each side lost of the other's multicasts when the partition came
    was not owed: no finding, counted in ``not_owed_across_partition``. A number owed to members that went on
    together is still a gap."""
    spec, tables = _partitioned_tables()
    df, closed = tables["B"]
    from_a = df[(df.kind == "deliver") & (df.sender == "A") & (df.view_id == 1)]
    df.drop(index=from_a[from_a.seq > int(from_a.seq.max()) - 4].index, inplace=True)
    res = check_run(_write(tmp_path, spec, tables, "flush-in-flight"), spark=spark, options=Options(flush=True))
    assert res.flush and res.findings == [], [str(f) for f in res.findings]
    assert res.stats["not_owed_across_partition"] == 4
    df, closed = tables["C"]                         # C went on with A: A's view-1 number 7 was owed to it
    owed = df[(df.kind == "deliver") & (df.sender == "A") & (df.view_id == 1) & (df.seq == 7)]
    df.drop(index=owed.index, inplace=True)
    res = check_run(_write(tmp_path, spec, tables, "flush-owed"), spark=spark, options=Options(flush=True))
    assert [(f.kind, f.severity, f.count) for f in res.findings] == [("gap", "error", 1)], \
        [str(f) for f in res.findings]


def _merged_tables(merge: bool = True):
    """A, B, C in every view; view 3 is a merge view (another subgroup's merge, say), unless not ``merge``:
    nobody parted."""
    spec = synth.Spec(views=[["A", "B", "C"]] * 3, msgs_per_view=30)
    tables = {m: (t.to_pandas(), c) for m, t, c in synth.generate(spec)}
    for df, _c in tables.values():
        df.loc[(df.view_id == 3) & (df.kind == "view"), "merge"] = merge
    return spec, tables


def _drop_from(tables, member: str, sender: str, view: int, which) -> None:
    df, _c = tables[member]
    rows = df[(df.kind == "deliver") & (df.sender == sender) & (df.view_id == view)]
    df.drop(index=rows[which(rows.seq)].index, inplace=True)


@pytest.mark.parametrize("flush", [False, True], ids=["no-flush", "flush"])
def test_a_hole_across_a_merge_view_between_members_that_stayed_together_is_lost_at_merge(spark, tmp_path, flush):
    """B misses A's last four view-2 multicasts and delivers A's view-3 ones after the merge view, A and B in
    every view (the soak of 2026-11-27: 2.12's NAKACK starts a window afresh at a merge digest ahead of it):
    a same-view finding, a warning without FLUSH and an error with it, not a gap."""
    spec, tables = _merged_tables()
    _drop_from(tables, "B", "A", 2, lambda seq: seq > seq.max() - 4)
    res = check_run(_write(tmp_path, spec, tables, f"merge-{flush}"), spark=spark, options=Options(flush=flush))
    found = [(f.check, f.kind, f.severity, f.count) for f in res.findings]
    assert found == [("same_view", "lost_at_merge", "error" if flush else "warning", 4)], \
        [str(f) for f in res.findings]
    assert "across a merge view" in res.findings[0].examples[0]


def test_a_hole_filled_before_the_merge_view_or_without_one_is_still_a_gap(spark, tmp_path):
    """The merge view excuses only a hole that spans it: A:7 of view 2 missing at B, whose next number came
    in view 2, is a gap; so is the same hole across view 3 when view 3 is no merge view."""
    spec, tables = _merged_tables()
    _drop_from(tables, "B", "A", 2, lambda seq: seq == seq.min() + 7)
    res = check_run(_write(tmp_path, spec, tables, "before-merge"), spark=spark, options=Options())
    assert [(f.kind, f.severity, f.count) for f in res.findings] == [("gap", "error", 1)], \
        [str(f) for f in res.findings]
    spec, tables = _merged_tables(merge=False)
    _drop_from(tables, "B", "A", 2, lambda seq: seq > seq.max() - 4)
    res = check_run(_write(tmp_path, spec, tables, "no-merge"), spark=spark, options=Options())
    assert [(f.kind, f.severity, f.count) for f in res.findings] == [("gap", "error", 1)], \
        [str(f) for f in res.findings]


def test_parted_both_ways_is_a_partition_not_a_leave():
    """``both``: each side installed a view without the other (a partition); a sender that left cleanly
    installs no view without the member, so with FLUSH its messages stay owed."""
    from types import SimpleNamespace as V

    from jgpy.analysis.checks import Checker, SendRange

    ck = object.__new__(Checker)
    ck.opt = Options(loss_window_s=60.0)
    ck.flush = True
    s = 1_000_000_000
    ck.views = {"B": [V(vc="A", vi=1, idx=1, ts_ns=1 * s, members=["A", "B", "C"]),
                      V(vc="B", vi=2, idx=50, ts_ns=10 * s, members=["B"])],
                "A": [V(vc="A", vi=1, idx=1, ts_ns=1 * s, members=["A", "B", "C"])]}
    r = SendRange(0, "A", "A", None, "A", 1, 100, 199, 100, 2 * s, 3 * s)
    assert ck._parted("B", r) and not ck._parted("B", r, both=True)   # A left (no view without B): not a cut
    assert not ck._partitioned("B", r)
    ck.views["A"].append(V(vc="A", vi=2, idx=70, ts_ns=10 * s, members=["A", "C"]))
    assert ck._parted("B", r, both=True) and ck._partitioned("B", r)
    ck.flush = False
    assert not ck._partitioned("B", r)                          # without FLUSH: the same-view warning as before


def test_parted_when_either_side_leaves_the_other_out():
    """The rule without Spark: member and sender part when the member leaves the sender out of a later view,
    or the sender the member (a unicast sender drops its connection, with what was not acked, as 2.12 does);
    only within loss_window_s of the sends, and for a hole only before the number after it was delivered."""
    from types import SimpleNamespace as V

    from jgpy.analysis.checks import Checker, SendRange

    ck = object.__new__(Checker)
    ck.opt = Options(loss_window_s=60.0)
    s = 1_000_000_000
    ck.views = {"B": [V(vc="A", vi=1, idx=1, ts_ns=1 * s, members=["A", "B", "C"]),
                      V(vc="A", vi=2, idx=50, ts_ns=10 * s, members=["A", "B", "C"])],
                "A": [V(vc="A", vi=1, idx=1, ts_ns=1 * s, members=["A", "B", "C"]),
                      V(vc="A", vi=9, idx=70, ts_ns=12 * s, members=["A", "C"])]}
    r = SendRange(0, "A", "A", "B", "A", 1, 100, 199, 100, 2 * s, 3 * s)
    assert ck._parted("B", r)                                   # A left B out 9 s after the sends
    assert not ck._parted("B", r, before_idx=60, before_ts=9 * s)   # ... but 3 s after B got the next one
    # A's journal has its view when A's application saw it: A's UNICAST may have dropped the connection to B
    # (and sent the next number on a new one) a moment before that (view_skew_s)
    assert ck._parted("B", r, before_idx=60, before_ts=11 * s)
    ck.opt = Options(loss_window_s=60.0, view_skew_s=0.0)
    assert not ck._parted("B", r, before_idx=60, before_ts=11 * s)
    ck.opt = Options(loss_window_s=5.0)
    assert not ck._parted("B", r)                               # too late to be the cause
    ck.opt = Options(loss_window_s=60.0)
    ck.views["A"][1] = V(vc="A", vi=9, idx=70, ts_ns=12 * s, members=["A", "B", "C"])
    assert not ck._parted("B", r)                               # they never parted: a loss
    ck.views["B"][1] = V(vc="C", vi=2, idx=50, ts_ns=10 * s, members=["B", "C"])
    assert ck._parted("B", r)                                   # B left A out


def test_a_member_listed_by_its_uuid_agrees_with_its_name_but_a_different_member_does_not(spark, tmp_path):
    """A journal that never learned a member's logical name lists it by its UUID: that view agrees with the
    others (a warning says so); a view that lists another member in its place disagrees."""
    spec = synth.Spec(**SPEC)
    unnamed = "6e71cda1-c603-5bfa-512b-4da76f585a4e"
    for who, name, expect_error in (("unresolved", unnamed, False), ("different", "D", True)):
        tables = {m: (t.to_pandas(), c) for m, t, c in synth.generate(spec)}
        df = tables["C"][0]
        row = (df.view_id == 2) & (df.kind == "view")
        df.loc[row, "members"] = df.loc[row, "members"].map(lambda ms: [name if x == "B" else x for x in ms])
        res = check_run(_write(tmp_path, spec, tables, who), spark=spark, options=Options())
        kinds = {(f.kind, f.severity) for f in res.findings}
        assert (("disagreeing_view", "error") in kinds) == expect_error, res.findings
        assert (("unresolved_name", "warning") in kinds) == (not expect_error), res.findings


def test_a_sender_view_recorded_right_after_its_last_send_excuses_a_hole_inside_the_range():
    """The journal files a send under the view the application saw; the sender's UNICAST may already have
    dropped its connection to a member it left out, so the numbers after a hole can carry the old view too.
    Only a next view recorded within view_skew_s of the range's last send, and without the member, counts."""
    from types import SimpleNamespace as V

    from jgpy.analysis.checks import Checker, SendRange

    ck = object.__new__(Checker)
    ck.opt = Options()
    s = 1_000_000_000
    ck.views = {"A": [V(vc="A", vi=1, idx=1, ts_ns=1 * s, members=["A", "B"]),
                      V(vc="A", vi=2, idx=70, ts_ns=3 * s + s // 10, members=["A"])]}
    r = SendRange(0, "A", "A", "B", "A", 1, 100, 199, 100, 2 * s, 3 * s)
    later = 8 * s                                               # B delivered the number after the hole then
    assert ck._sender_left_at_end("B", r, later)                # A|2 without B, 100 ms after the last send
    assert not ck._sender_left_at_end("B", r, 3 * s)            # B had it before A's view: one connection
    ck.views["A"][1] = V(vc="A", vi=2, idx=70, ts_ns=6 * s, members=["A"])
    assert not ck._sender_left_at_end("B", r, later)            # 3 s after the last send: the range was on one
    ck.views["A"][1] = V(vc="A", vi=2, idx=70, ts_ns=3 * s + s // 10, members=["A", "B"])
    assert not ck._sender_left_at_end("B", r, later)            # B still listed


def _takeover_tables(b_view3: list[str]):
    """The soak's J2r3 case in small: B is cut off from A and C in view 2. A and C install A|2 = [A, C]; B takes
    over as coordinator but removes only C first, so its first view is also named A|2 (2.12 names a view after
    its first member), = [A, B]; its view 3 is ``b_view3`` (B|3 = [B] when the takeover goes on to remove A).
    View 4 merges them."""
    spec = synth.Spec(views=[["A", "B", "C"]] * 4, msgs_per_view=30)
    tables = {m: (t.to_pandas(), c) for m, t, c in synth.generate(spec)}
    for m, (df, _c) in tables.items():
        cut = df.view_id.isin([2, 3])
        if m == "B":
            drop = cut & (df.kind == "deliver") & (df.sender != "B")
            v2, v3 = (df.view_id == 2) & (df.kind == "view"), (df.view_id == 3) & (df.kind == "view")
            df.loc[v2, "members"] = df.loc[v2, "members"].map(lambda _: ["A", "B"])
            df.loc[df.view_id == 3, "view_coord"] = b_view3[0]
            df.loc[v3, "members"] = df.loc[v3, "members"].map(lambda _: list(b_view3))
        else:
            drop = cut & (df.kind == "deliver") & (df.sender == "B")
            row = cut & (df.kind == "view")
            df.loc[row, "members"] = df.loc[row, "members"].map(lambda _: ["A", "C"])
        df.drop(index=df[drop].index, inplace=True)
        df.loc[(df.view_id == 4) & (df.kind == "view"), "merge"] = True
    return spec, tables


def test_a_view_id_minted_by_a_coordinator_takeover_is_checked_as_a_view_of_its_own(spark, tmp_path):
    spec, tables = _takeover_tables(["B"])
    res = check_run(_write(tmp_path, spec, tables, "takeover"), spark=spark, options=Options())
    errors = [str(f) for f in res.findings if f.severity == "error"]
    assert errors == [], [str(f) for f in res.findings]
    minted = [f for f in res.findings if f.kind == "minted_view_id"]
    assert len(minted) == 1 and minted[0].count == 1 and minted[0].severity == "warning", res.findings
    assert "view A|2 as installed by B" in minted[0].examples[0] and "A~B|2" in minted[0].examples[0]
    # B missed A's and C's numbers of views 2 and 3, A and C missed B's: none was owed
    assert res.stats["holes_not_owed"] == 4 * 2 * 30


def test_one_view_id_with_two_member_lists_is_still_an_error_without_a_takeover(spark, tmp_path):
    """B's A|2 is followed by a view that still has A: nothing took over from A; the lists disagree."""
    spec, tables = _takeover_tables(["A", "B"])
    res = check_run(_write(tmp_path, spec, tables, "no-takeover"), spark=spark, options=Options())
    kinds = {(f.kind, f.severity) for f in res.findings}
    assert ("disagreeing_view", "error") in kinds, [str(f) for f in res.findings]
    assert not any(f.kind == "minted_view_id" for f in res.findings)


def test_minted_versions_without_spark():
    from types import SimpleNamespace as V

    from jgpy.analysis.takeover import minted_versions
    rows = [V(member="A", idx=1, vc="A", vi=1, members=["A", "B", "C"]),
            V(member="A", idx=2, vc="A", vi=2, members=["A", "C"]),
            V(member="B", idx=1, vc="A", vi=1, members=["A", "B", "C"]),
            V(member="B", idx=2, vc="A", vi=2, members=["A", "B"]),
            V(member="B", idx=3, vc="B", vi=3, members=["B"])]
    assert [(r.member, r.vc, r.vi, r.new_vc) for r in minted_versions(rows)] == [("B", "A", 2, "A~B")]
    assert minted_versions(rows[:4]) == []          # B's journal ends there: nothing shows a takeover
