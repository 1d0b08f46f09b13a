"""View ids that 2.12 gives twice: a coordinator takeover that names its first view after the old coordinator.

JGroups 2.12 names a new view after its first member, not after the member that makes it
(``GMS.getNextView``). A member that takes over as coordinator because every member before it is suspected
queues one SUSPECT request per suspect (``ParticipantGmsImpl.handleSuspect``); when the view handler's bundling
window (``max_bundling_time``) closes before the last one is queued, as it can on a loaded machine, the first
view it makes removes only some suspects and still starts with the old coordinator. That view carries the old
coordinator's name and the next id, an id the old coordinator may already have used for a view of its own on
the other side of a partition. Seen with Java 2.12.2 members in the soak runs.

Such a *minted* version of a view id is recognised by what its installers did: the named coordinator never
installed it, and every installer installed a next view that leaves the named coordinator out (the takeover
went on to remove it; a journal that ends first shows no takeover). Those versions are checked under their own name, ``<coord>~<first installer>|<id>``, so that the other
checks do not mix the two views; any other disagreement stays a ``disagreeing_view`` error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from jgpy.journal import UUID_NAME

_UUID = re.compile(UUID_NAME)


@dataclass(frozen=True)
class Rename:
    """Member ``member``'s view ``vc|vi`` is a minted version: check it as ``new_vc|vi``."""

    member: str
    vc: str
    vi: int
    new_vc: str


def same_list(a: list[str], b: list[str]) -> bool:
    """Two member lists of one view agree: same length, and every place names the same member (a member
    written as its UUID, its name never learned, agrees with any name at its place)."""
    return len(a) == len(b) and all(x == y or _UUID.match(x) or _UUID.match(y) for x, y in zip(a, b))


def minted_versions(views: Iterable[Any]) -> list[Rename]:
    """The renames for every minted version of a view id. ``views`` are the view rows of all members
    (``member``, ``idx``, ``vc``, ``vi``, ``members``), in any order."""
    by_member: dict[str, list[Any]] = {}
    for r in views:
        by_member.setdefault(r.member, []).append(r)
    next_members: dict[tuple[str, str, int], list[str] | None] = {}
    by_id: dict[tuple[str, int], list[Any]] = {}
    for m, vs in by_member.items():
        vs.sort(key=lambda r: r.idx)
        for i, r in enumerate(vs):
            next_members[(m, r.vc, r.vi)] = list(vs[i + 1].members) if i + 1 < len(vs) else None
            by_id.setdefault((r.vc, r.vi), []).append(r)
    renames: list[Rename] = []
    for (vc, vi), rows in by_id.items():
        versions: list[list[Any]] = []
        for r in rows:
            for v in versions:
                if same_list(list(v[0].members), list(r.members)):
                    v.append(r)
                    break
            else:
                versions.append([r])
        if len(versions) < 2:
            continue
        for v in versions:
            installers = [r.member for r in v]
            if vc in installers:
                continue
            nexts = [next_members[(m, vc, vi)] for m in installers]
            if all(n is not None and vc not in n for n in nexts):
                tag = f"{vc}~{min(installers)}"
                renames += [Rename(m, vc, vi, tag) for m in installers]
    return renames


def apply(ev, renames: list[Rename]):
    """``ev`` (the journal rows) with the view columns of minted versions renamed (rows of the member that
    installed the version, whatever their kind: its view, its sends and deliveries in that view)."""
    if not renames:
        return ev
    from pyspark.sql import functions as F
    spark = ev.sparkSession
    df = spark.createDataFrame([(r.member, r.vc, r.vi, r.new_vc) for r in renames],
                               "r_member string, r_vc string, r_vi bigint, new_vc string")
    cond = (ev.member == df.r_member) & (ev.view_coord == df.r_vc) & (ev.view_id == df.r_vi)
    out = ev.join(F.broadcast(df), cond, "left")
    return (out.withColumn("view_coord", F.coalesce(F.col("new_vc"), F.col("view_coord")))
            .drop("r_member", "r_vc", "r_vi", "new_vc"))
