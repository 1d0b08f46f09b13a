"""MERGE2: find subgroups left by a healed partition and ask GMS to merge them (``org.jgroups.protocols.MERGE2``).

A coordinator periodically (every ``min_interval``..``max_interval`` ms, drawn once per coordinatorship, as
Java does) sends a discovery round asking for *views* (``FIND_ALL_VIEWS``: a GET_MBRS_REQ carrying our view
id; members with the same view id stay silent). When the answers show more than one view, a MERGE event
with ``{member: view}`` goes up to GMS, whose merge leader runs the merge (seed 000, "MERGE2"). With
``merge_fast``, a multicast from a non-member (the first heartbeat of a healed partition, say) triggers a
discovery round after ``merge_fast_delay`` ms instead of waiting for the next period.

Discovery blocks for PING's ``timeout``, so the rounds run on a thread of their own, never on the shared
timer. Only coordinators run rounds; a member whose view differs from a coordinator's only because it sees
itself as coordinator of a 1-member group counts as "inconsistent" and must be seen
``inconsistent_view_threshold`` times in a row before a merge is asked for.

Differences from Java: Java lets every member run merge_fast rounds, but only a coordinator acts on the
MERGE event; jgpy runs merge_fast rounds on coordinators only (same merges, less discovery traffic). A
round collects answers for PING's ``timeout``; an answer given before one of our own view changes names
a view we have replaced since: one of ours (we were its coordinator), or a subgroup view that a merge made
part of ours. Java takes such a view at face value: a member we excluded meanwhile, still listed in an old
view of ours, looks like an orphan and is merged alone, without its actual coordinator, and a second merge
must follow; a round that straddled a merge sees the merged subgroups again and merges one and the same
members a second time (a redundant merge, whose digest resets the windows of messages in flight: they
are lost without FLUSH). jgpy replaces the stale view of a member that is in our current view by that view
(:func:`drop_stale_views`): the orphan is found by its own answer, and a merged subgroup is not merged again.
Made-up senders of multicasts cost little: the non-members already seen (``merge_candidates``) are capped
(:data:`MAX_MERGE_CANDIDATES`, the oldest are forgotten), and merge_fast keeps at most one round pending, so
a flood of them triggers at most one discovery round per ``merge_fast_delay``.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from typing import Any

from jgpy._core.batch import unknown_multicast_sources
from jgpy._core.types import MergeView, PingData, View
from jgpy.stack.events import Event, EventType
from jgpy.errors import ConfigError
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_MULTICASTS, Protocol
from jgpy.stack.timer import now_ms

#: non-members whose multicasts triggered a merge_fast round, remembered at most (the oldest are forgotten)
MAX_MERGE_CANDIDATES = 1024


def views_of(responses: list[PingData]) -> dict[Any, View]:
    """``{member: view}`` from discovery answers of servers that sent a view."""
    views = {}
    for r in responses:
        if r.is_server and r.own_addr is not None and r.view is not None:
            views[r.own_addr] = r.view
    return views


def drop_stale_views(views: dict[Any, View], me, current: View | None, superseded=()) -> int:
    """Replace the views of members of ``current`` (our view, we coordinate it) that were replaced by our
    views since, answers given before one of our view changes: views naming us as coordinator of another
    view, and the views in ``superseded`` (the subgroups merged into our recent views). Returns how many
    were replaced."""
    if current is None or current.vid is None or current.vid.coord_addr != me:
        return 0
    mine = set(current.members or ())
    replaced = 0
    for member, v in views.items():
        if member in mine and v.vid is not None and v.vid != current.vid and (
                v.vid.coord_addr == me or v.vid in superseded):
            views[member] = current
            replaced += 1
    return replaced


def different_views(views: dict[Any, View]) -> list[View]:
    """One view per distinct view id (``Util.containsViewId``: same id *and* coordinator)."""
    out: list[View] = []
    for v in views.values():
        if v is not None and not any(o.vid == v.vid for o in out):
            out.append(v)
    return out


def merge_coords(views: dict[Any, View]) -> set:
    """The creators (coordinators) of the views: who can lead or take part as a subgroup coordinator."""
    return {v.vid.coord_addr for v in views.values() if v.vid.coord_addr is not None}


def merge_participants(views: dict[Any, View]) -> set:
    """Coordinators plus members that no coordinator's view contains (``Util.determineMergeParticipants``)."""
    coords = merge_coords(views)
    everybody = {m for v in views.values() for m in (v.members or ())}
    for c in coords:
        v = views.get(c)
        if v is not None:
            everybody -= set(v.members or ())
    return coords | everybody


class MERGE2(Protocol):
    NAME = "MERGE2"

    min_interval = Property(to_int, 5000, "min ms between merge discoveries")
    max_interval = Property(to_int, 20000, "max ms between merge discoveries")
    inconsistent_view_threshold = Property(to_int, 1, "times a 1-coordinator inconsistency is seen before a "
                                           "MERGE is sent up")
    merge_fast = Property(to_bool, True, "a multicast from a non-member triggers a discovery round")
    merge_fast_delay = Property(to_int, 1000, "ms between such a multicast and the discovery round")
    use_separate_thread = Property(to_bool, False, "", deprecated="ignored, as in 2.12")

    #: the first round never comes earlier than this after becoming coordinator (Java: max(5000, interval))
    MIN_INITIAL_DELAY_MS = 5000
    #: how many merged subgroup view ids are remembered (a round's answers are at most PING's timeout old)
    MERGED_VIEWS_KEPT = 64

    def __init__(self) -> None:
        super().__init__()
        self.view: View | None = None
        self.members: set = set()
        self.merge_candidates: dict = {}             # non-member -> None, oldest first
        self.is_coord = False
        self.num_inconsistent_views = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = True
        self._interval = 0.0
        self._next_round: float | None = None      # due time of the periodic round (None: task stopped)
        self._fast_rounds: list[float] = []        # due times of merge_fast rounds
        self._round_lock = threading.Lock()
        self.merged_views: deque = deque(maxlen=self.MERGED_VIEWS_KEPT)   # ids of subgroups merged into our views
        self.counters = {"discovery_rounds": 0, "merge_events": 0, "fast_triggers": 0, "stale_views_replaced": 0}

    def init(self) -> None:
        if self.min_interval <= 0 or self.max_interval <= 0:
            raise ConfigError("MERGE2: min_interval and max_interval have to be > 0")
        if self.max_interval <= self.min_interval:
            raise ConfigError("MERGE2: max_interval has to be greater than min_interval")

    def start(self) -> None:
        with self._cond:
            self._closed = False
            self._next_round = None
            self._fast_rounds.clear()
        self._thread = threading.Thread(target=self._loop, name="jgpy-MERGE2", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._closed = True
            self.is_coord = False
            self._next_round = None
            self.merge_candidates.clear()
            self._cond.notify_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(2.0)
        self._thread = None

    # ---- the rounds (one thread: discovery blocks for PING's timeout) ----

    def compute_interval(self) -> float:
        return self.min_interval + random.uniform(0, self.max_interval - self.min_interval)

    def start_merge_task(self) -> None:
        """Start the periodic rounds (no-op when they run already)."""
        with self._cond:
            if self._next_round is None and not self._closed:
                self._interval = self.compute_interval()
                self._next_round = now_ms() + max(self.MIN_INITIAL_DELAY_MS, self._interval)
                self._cond.notify_all()

    def stop_merge_task(self) -> None:
        with self._cond:
            self._next_round = None
            self._cond.notify_all()

    @property
    def is_merge_task_running(self) -> bool:
        return self._next_round is not None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        return
                    now = now_ms()
                    if self._fast_rounds and min(self._fast_rounds) <= now:
                        self._fast_rounds = [t for t in self._fast_rounds if t > now]
                        break
                    if self._next_round is not None and self._next_round <= now:
                        self._next_round = now + self._interval
                        break
                    due = self._fast_rounds + ([self._next_round] if self._next_round is not None else [])
                    self._cond.wait(max(0.001, (min(due) - now) / 1000.0) if due else None)
            try:
                self.find_and_notify()
            except Exception:  # noqa: BLE001 - a failed round must not end the task
                self.log.exception("%s: merge discovery round failed", self.local_addr)

    def send_merge_solicitation(self) -> None:
        """Run one discovery round now, in the caller's thread (Java's ``sendMergeSolicitation``)."""
        self.find_and_notify()

    def find_and_notify(self) -> None:
        if not self._round_lock.acquire(blocking=False):
            return                           # a round is running already
        try:
            self._find_and_notify()
        finally:
            self._round_lock.release()

    def _find_and_notify(self) -> None:
        self.counters["discovery_rounds"] += 1
        responses = list(self.down_prot.down(Event(EventType.FIND_ALL_VIEWS)) or [])
        me, view = self.local_addr, self.view
        if self.is_coord and me is not None and view is not None:
            if not any(r.own_addr == me for r in responses):
                responses.append(PingData(me, view, None, True, None, None))
        views = views_of(responses)
        if self.is_coord:
            merged = tuple(self.merged_views)          # (a copy: views change on another thread)
            self.counters["stale_views_replaced"] += drop_stale_views(views, me, view, merged)
        different = different_views(views)
        if len(different) <= 1:
            self.num_inconsistent_views = 0
            return
        participants = merge_participants(views)
        if len(participants) == 1 and self.num_inconsistent_views < self.inconsistent_view_threshold:
            self.log.debug("%s: dropping MERGE for inconsistent views %s: threshold (%d) not reached (%d)",
                           me, [str(v.vid) for v in different], self.inconsistent_view_threshold,
                           self.num_inconsistent_views)
            self.num_inconsistent_views += 1
            return
        self.num_inconsistent_views = 0
        self.log.debug("%s found different views %s; sending up MERGE with participants %s", me,
                       [str(v.vid) for v in different], sorted(map(str, participants)))
        self.counters["merge_events"] += 1
        self.up_prot.up(Event(EventType.MERGE, views))

    # ---- events ----

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            ret = self.down_prot.down(evt)
            view = evt.arg
            if isinstance(view, MergeView):           # (before the view: a round reads them in that order)
                self.merged_views.extend(v.vid for v in view.subgroups or () if v.vid is not None)
            self.view = view
            mbrs = list(view.members or ())
            if not mbrs or self.local_addr is None:
                self.stop_merge_task()
                return ret
            self.members = set(mbrs)
            self.merge_candidates = {c: None for c in self.merge_candidates if c not in self.members}
            self.is_coord = mbrs[0] == self.local_addr
            if self.is_coord:
                self.start_merge_task()
            else:
                self.stop_merge_task()
            return ret
        return self.down_prot.down(evt)

    def up_needs(self) -> int:
        return UP_MULTICASTS                     # merge_fast looks at the senders of multicasts

    def up_batch(self, msgs: list) -> None:
        if self.merge_fast and self.is_coord:
            new = unknown_multicast_sources(msgs, self.members, self.merge_candidates)
            if new:
                candidates = self.merge_candidates
                for src in new:
                    candidates[src] = None
                while len(candidates) > MAX_MERGE_CANDIDATES:
                    del candidates[next(iter(candidates))]
                self.counters["fast_triggers"] += len(new)
                with self._cond:
                    if not self._fast_rounds:        # one pending round covers every sender seen meanwhile
                        self._fast_rounds.append(now_ms() + self.merge_fast_delay)
                        self._cond.notify_all()
        self.up_prot.up_batch(msgs)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["merge_task_running"] = self.is_merge_task_running
        d["num_inconsistent_views"] = self.num_inconsistent_views
        return d
