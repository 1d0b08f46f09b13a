"""Merging subgroups into one group (``org.jgroups.protocols.pbcast.Merger``), run by GMS.

The seed-000 algorithm, as JGroups 2.12 runs it:

1. MERGE2 sends up ``{member: view}``; every coordinator among them computes the *merge leader*, the lowest
   coordinator address (Java's ``compareTo`` order). Only the leader goes on.
2. The leader picks a new merge id and sends MERGE_REQ (with the members it saw in that subgroup's view) to
   every subgroup coordinator, itself included.
3. A subgroup coordinator that is not busy with another merge takes the merge id, suspends its view handler
   (no joins or leaves while merging) and STABLE, fetches the digest entries of its subgroup's members
   (GET_DIGEST_REQ / GET_DIGEST_RSP, at most ``merge_timeout``/2 ms) and answers MERGE_RSP with its view
   and that digest. A coordinator busy with another merge answers ``merge_rejected``.
4. With all answers in (``merge_timeout``), the leader consolidates: the members of all views, sorted (the
   first one is the new coordinator); view id = highest view id + 1; digest = per sender the lowest
   ``low`` and the highest ``highest_delivered``/``highest_received`` of all answers. It sends
   INSTALL_MERGE_VIEW (MergeView + digest) to every subgroup coordinator, which multicasts it to its
   subgroup as a normal VIEW; members install the MergeView and *merge* the digest (NAKACK creates windows
   for the senders of the other subgroups).
5. Anything going wrong makes the leader send CANCEL_MERGE; a merge id that is still set after
   1.5 × ``merge_timeout`` cancels itself (the leader died), and a view handler suspended for
   ``resume_task_timeout`` ms resumes by itself.

MERGE_REQ handling waits for digests and INSTALL_MERGE_VIEW waits for VIEW_ACKs, so both run on the
merger's own thread: never on a receive thread (the answers they wait for arrive there) nor on the delivery
thread (it delivers our own VIEW).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from jgpy._core.headers import GmsHeader
from jgpy._core.message import Message
from jgpy._core.types import Digest, MergeId, MergeView, View, ViewId
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.timer import now_ms

H = GmsHeader
T = TypeVar("T")

_merge_ids = itertools.count(1)
_merge_ids_lock = threading.Lock()


def new_merge_id(addr) -> MergeId:
    """A merge id unique in this process (``MergeId.create``: the address plus a process-wide counter)."""
    with _merge_ids_lock:
        return MergeId(addr, next(_merge_ids))


@dataclass
class MergeData:
    """One subgroup's answer to a MERGE_REQ."""

    sender: Any
    view: View | None
    digest: Digest | None
    merge_rejected: bool = False


class ResponseCollector(Generic[T]):
    """Answers expected from a set of members (``org.jgroups.util.ResponseCollector``)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.responses: dict[Any, T | None] = {}

    def reset(self, members=()) -> None:
        with self._cond:
            self.responses = dict.fromkeys(members or ())
            self._cond.notify_all()

    def add(self, member, data: T) -> None:
        with self._cond:
            if member is not None and member in self.responses:
                self.responses[member] = data
                self._cond.notify_all()

    def remove(self, member) -> None:
        with self._cond:
            self.responses.pop(member, None)
            self._cond.notify_all()

    def has_all_responses(self) -> bool:
        with self._cond:
            return all(v is not None for v in self.responses.values())

    def wait_for_all(self, timeout_ms: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: all(v is not None for v in self.responses.values()),
                                       (timeout_ms if timeout_ms > 0 else 2000) / 1000.0)

    def results(self) -> dict[Any, T | None]:
        with self._cond:
            return dict(self.responses)

    def __len__(self) -> int:
        with self._cond:
            return len(self.responses)


def sanitize_views(views: dict[Any, View]) -> None:
    """Remove from each view the members that don't have its owner in their own view (JGRP-1061)."""
    for owner, view in list(views.items()):
        mbrs = list(view.members or ())
        kept = [m for m in mbrs if m == owner or views.get(m) is None or owner in (views[m].members or ())]
        if len(kept) != len(mbrs):
            views[owner] = View(view.vid, kept)


def consolidate(responses: list[MergeData]) -> tuple[MergeView, Digest] | None:
    """The merged view and digest of the subgroups' answers (``consolidateMergeData``)."""
    logical_time = 0
    members: list = []
    subgroups: list[View] = []
    for data in responses:
        v = data.view
        if v is None:
            continue
        if v.vid is not None:
            logical_time = max(logical_time, v.vid.id)
        for m in v.members or ():
            if m not in members:
                members.append(m)
        subgroups.append(v)
    if not members:
        return None
    members.sort()
    view = MergeView(ViewId(members[0], logical_time + 1), members, subgroups)
    digest = Digest()
    for data in responses:
        if data.digest is None:
            continue
        for addr, low, hd, hr in data.digest.entries():
            old = digest.get(addr)
            if old is None:
                digest.set(addr, low, hd, hr)
            else:
                digest.set(addr, min(old[0], low), max(old[1], hd), max(old[2], hr))
    return view, digest


class Merger:
    """Merge state and logic of one GMS (every role shares it, as in Java)."""

    MAX_COMPLETION_MS = 10000

    def __init__(self, gms) -> None:
        self.gms = gms
        self.log = gms.log
        self.merge_id: MergeId | None = None
        self._lock = threading.Lock()
        self._canceller = None
        self.merge_rsps: ResponseCollector[MergeData] = ResponseCollector()
        self.digest_collector: ResponseCollector[Digest] = ResponseCollector()
        self._task: threading.Thread | None = None
        self._task_lock = threading.Lock()
        self._worker: SerialExecutor | None = None
        self._worker_lock = threading.Lock()
        self.counters = dict.fromkeys(("merges_led", "merges_completed", "merges_cancelled", "merge_requests",
                                       "merge_requests_rejected", "merge_views_installed", "merge_ids_mismatched"), 0)
        self.last_merge_ms: float | None = None

    # ---- merge id ----

    def set_merge_id(self, expected: MergeId | None, new_value: MergeId | None) -> bool:
        """Compare-and-set of the merge id; (re)arms the canceller when a new id is set."""
        with self._lock:
            if self.merge_id != expected:
                return False
            self.merge_id = new_value
            if self._canceller is not None:
                self._canceller.cancel()
                self._canceller = None
            if new_value is not None and self.gms.timer is not None:
                mid = new_value
                self._canceller = self.gms.timer.schedule(self.gms.merge_timeout * 1.5,
                                                          lambda: self._cancel_by_timeout(mid), "merge canceller")
            return True

    def match_merge_id(self, mid: MergeId | None) -> bool:
        with self._lock:
            return self.merge_id == mid

    @property
    def merge_in_progress(self) -> bool:
        with self._lock:
            return self.merge_id is not None

    def _cancel_by_timeout(self, mid: MergeId) -> None:
        if self.match_merge_id(mid):
            self.log.warning("%s: merge %s did not complete within %d ms: cancelled", self.gms.local_addr, mid,
                             int(self.gms.merge_timeout * 1.5))
        self.cancel_merge(mid)

    def cancel_merge(self, mid: MergeId | None) -> None:
        if self.set_merge_id(mid, None):
            self.merge_rsps.reset()
            self.gms.view_handler.resume(mid)

    # ---- the merge worker (never a receive or delivery thread) ----

    def _submit(self, fn, *args) -> None:
        with self._worker_lock:
            if self._worker is None:
                self._worker = SerialExecutor(f"jgpy-Merger-{self.gms.local_addr}")
            self._worker.submit(fn, *args)

    def stop(self) -> None:
        with self._worker_lock:
            w, self._worker = self._worker, None
        if w is not None:
            w.stop(timeout=1.0)
        self.cancel_merge(self.merge_id)

    # ---- leader: MERGE event from MERGE2 (view handler thread, coordinators only) ----

    def merge(self, views: dict[Any, View]) -> None:
        gms = self.gms
        if self.merge_in_progress:
            self.log.debug("%s: merge is already running (merge_id=%s)", gms.local_addr, self.merge_id)
            return
        coords = sorted({v.vid.coord_addr for v in views.values() if v.vid.coord_addr is not None})
        if not coords:
            return
        leader = coords[0]
        if leader != gms.local_addr:
            self.log.debug("%s: I am not the merge leader; waiting for %s to start the merge", gms.local_addr, leader)
            return
        with self._task_lock:
            if self._task is not None and self._task.is_alive():
                return
            views = dict(views)
            sanitize_views(views)
            subgroups: dict[Any, list] = {}
            for c in {v.vid.coord_addr for v in views.values() if v.vid.coord_addr is not None}:
                v = views.get(c)
                if v is not None:
                    subgroups[c] = list(v.members or ())
            from jgpy.protocols.merge2 import merge_participants
            for p in merge_participants(views):
                subgroups.setdefault(p, [p])
            self.log.debug("%s: I am the merge leader; merging %s", gms.local_addr,
                           {str(k): [str(m) for m in v] for k, v in subgroups.items()})
            self._task = threading.Thread(target=self._run_merge, args=(subgroups,),
                                          name=f"jgpy-MergeTask-{gms.local_addr}", daemon=True)
            self._task.start()

    def _run_merge(self, subgroups: dict[Any, list]) -> None:
        gms = self.gms
        me = gms.local_addr
        mid = new_merge_id(me)
        coords_copy = list(subgroups)
        started = now_ms()
        try:
            if not self.set_merge_id(None, mid):
                self.log.warning("%s: failed to set my own merge_id (%s) to %s", me, self.merge_id, mid)
                return
            self.counters["merges_led"] += 1
            self.merge_rsps.reset(subgroups)
            for coord, mbrs in subgroups.items():
                msg = Message(coord, None, None, Message.OOB)
                msg.put_header(gms.id, GmsHeader(H.MERGE_REQ, mbr=me, mbrs=mbrs, merge_id=mid))
                gms.down_prot.down_msg(msg)
            if not self.merge_rsps.wait_for_all(gms.merge_timeout):
                missing = [str(a) for a, v in self.merge_rsps.results().items() if v is None]
                raise MergeFailed(f"merge leader did not get data from all partition coordinators (missing {missing})")
            coords = set(subgroups)
            answers = []
            for member, data in self.merge_rsps.results().items():
                if data is not None and data.merge_rejected:
                    coords.discard(data.sender)
                elif data is not None:
                    answers.append(data)
            if not answers:
                raise MergeFailed("did not get any merge responses from partition coordinators")
            if me not in coords:
                raise MergeFailed("merge leader rejected merge request")
            merged = consolidate(answers)
            if merged is None:
                raise MergeFailed("could not consolidate merge")
            view, digest = merged
            self.log.debug("%s: merge leader: consolidated view %s, digest %s", me, view, digest)
            gms.merge_ack_collector.reset(coords)
            for coord in coords:
                msg = Message(coord)
                msg.put_header(gms.id, GmsHeader(H.INSTALL_MERGE_VIEW, view=view, my_digest=digest, merge_id=mid))
                gms.down_prot.down_msg(msg)
            if gms.flush_in_stack and not gms.merge_ack_collector.wait_for_all(gms.view_ack_collection_timeout):
                # JGRP-700: with FLUSH the flush spans the merge; the subgroups acknowledge their merge views
                self.log.warning("%s: failed to collect all ACKs (%d) for merge view %s after %d ms, missing ACKs "
                                 "from %s", me, len(coords), view.vid, gms.view_ack_collection_timeout,
                                 sorted(map(str, gms.merge_ack_collector.missing)))
            self.last_merge_ms = now_ms() - started
        except MergeFailed as e:
            self.counters["merges_cancelled"] += 1
            self.log.warning("%s: %s; merge is cancelled", me, e)
            self._send_cancel(coords_copy, mid)
        except Exception:  # noqa: BLE001 - any failure cancels the merge
            self.counters["merges_cancelled"] += 1
            self.log.exception("%s: merge %s failed; cancelled", me, mid)
            self._send_cancel(coords_copy, mid)
        finally:
            gms.view_handler.resume(mid)
            gms.stop_flush()                        # JGRP-700: the flush of every subgroup ends with the merge
            with self._task_lock:
                self._task = None

    def _send_cancel(self, coords, mid: MergeId) -> None:
        for coord in coords or ():
            msg = Message(coord)
            msg.put_header(self.gms.id, GmsHeader(H.CANCEL_MERGE, merge_id=mid))
            self.gms.down_prot.down_msg(msg)

    # ---- subgroup coordinators and merge participants ----

    def handle_merge_request(self, sender, mid: MergeId, mbrs) -> None:
        self._submit(self._handle_merge_request, sender, mid, mbrs)

    def _handle_merge_request(self, sender, mid: MergeId, mbrs) -> None:
        gms = self.gms
        self.counters["merge_requests"] += 1
        if not (self.match_merge_id(mid) or self.set_merge_id(None, mid)):
            gms._rl.warning("merge-busy", "%s: merge is already in progress (%s): rejecting MERGE_REQ %s from %s",
                            gms.local_addr, self.merge_id, mid, sender)
            self._send_rejected(sender, mid)
            return
        gms.view_handler.suspend(mid)
        members = list(dict.fromkeys(mbrs or ()))
        if gms.view_id is None:
            gms._rl.warning("merge-no-view", "%s: view id is null; cannot return a merge response", gms.local_addr)
            self._send_rejected(sender, mid)
            return
        view = View(gms.view_id, members)
        if not gms.start_flush(view):               # JGRP-700: with FLUSH, quiet our subgroup for the merge
            gms._rl.warning("merge-flush-failed", "%s: flush failed; sending merge rejected message to %s, merge_id=%s",
                            gms.local_addr, sender, mid)
            self._send_rejected(sender, mid)
            self.cancel_merge(mid)
            return
        digest = self.fetch_digests(members)
        if digest is None or len(digest) == 0:
            gms._rl.error("merge-no-digests", "%s: failed fetching digests from subpartition members; dropping merge "
                          "response", gms.local_addr)
            return
        msg = Message(sender, None, None, Message.OOB)
        msg.put_header(gms.id, GmsHeader(H.MERGE_RSP, view=view, my_digest=digest, merge_id=mid))
        gms.down_prot.down_msg(msg)

    def _send_rejected(self, sender, mid: MergeId) -> None:
        self.counters["merge_requests_rejected"] += 1
        msg = Message(sender, None, None, Message.OOB)
        msg.put_header(self.gms.id, GmsHeader(H.MERGE_RSP, merge_id=mid, merge_rejected=True))
        self.gms.down_prot.down_msg(msg)

    def fetch_digests(self, members: list) -> Digest:
        """Our digest, overlaid with each subgroup member's own entry (GET_DIGEST_REQ to all, ≤ merge_timeout/2)."""
        gms = self.gms
        self.digest_collector.reset(members)
        own = gms.get_digest()
        if own is not None:
            self.digest_collector.add(gms.local_addr, own)
        req = Message(None, None, None, Message.OOB)
        req.put_header(gms.id, GmsHeader(H.GET_DIGEST_REQ))
        gms.down_prot.down_msg(req)
        wait = gms.merge_timeout / 2 if gms.merge_timeout > 0 else 2000
        if not self.digest_collector.wait_for_all(wait):
            self.log.debug("%s: fetched incomplete digests (after %d ms) for %s", gms.local_addr, wait,
                           [str(m) for m in members])
        results = self.digest_collector.results()
        out = Digest()
        if own is not None:                        # ours first: the members' own entries are authoritative
            for addr, low, hd, hr in own.entries():
                out.set(addr, low, hd, hr)
        for member, d in results.items():
            if d is not None and member != gms.local_addr:
                for addr, low, hd, hr in d.entries():
                    out.set(addr, low, hd, hr)
        return out

    def handle_merge_response(self, data: MergeData, mid: MergeId) -> None:
        if not self.match_merge_id(mid):
            self.counters["merge_ids_mismatched"] += 1
            self.gms._rl.error("merge-rsp-id", "%s: this.merge_id (%s) is different from merge_id (%s) of MERGE_RSP "
                               "from %s", self.gms.local_addr, self.merge_id, mid, data.sender)
            return
        self.merge_rsps.add(data.sender, data)

    def handle_merge_view(self, data: MergeData, mid: MergeId) -> None:
        self._submit(self._handle_merge_view, data, mid)

    def _handle_merge_view(self, data: MergeData, mid: MergeId) -> None:
        gms = self.gms
        try:
            if not self.match_merge_id(mid):
                self.counters["merge_ids_mismatched"] += 1
                gms._rl.error("merge-view-id", "%s: merge ids don't match (ours %s, INSTALL_MERGE_VIEW's %s); merge view "
                              "discarded", gms.local_addr, self.merge_id, mid)
                return
            view = data.view
            if view is None:
                return
            current = set(gms.members)
            new_mbrs = [m for m in view.members if m not in current]   # no VIEW_ACKs from the other subgroups
            self.counters["merge_views_installed"] += 1
            gms.cast_view_change(view, data.digest, None, new_mbrs)
            if gms.flush_in_stack:                  # JGRP-700: the leader waits for this before it ends the flush
                ack = Message(data.sender, None, None, Message.OOB)
                ack.put_header(gms.id, GmsHeader(H.INSTALL_MERGE_VIEW_OK))
                gms.down_prot.down_msg(ack)
            self.counters["merges_completed"] += 1
            self.cancel_merge(mid)
        finally:
            gms.down_prot.down(Event(EventType.RESUME_STABLE))

    def handle_merge_cancelled(self, mid: MergeId) -> None:
        self._submit(self._handle_merge_cancelled, mid)

    def _handle_merge_cancelled(self, mid: MergeId) -> None:
        try:
            self.gms.stop_flush()                   # JGRP-524: the flush around our part of the merge ends
            if self.match_merge_id(mid):
                self.log.debug("%s: merge %s is cancelled", self.gms.local_addr, mid)
                self.cancel_merge(mid)
        finally:
            self.gms.down_prot.down(Event(EventType.RESUME_STABLE))

    def handle_digest_response(self, sender, digest: Digest) -> None:
        self.digest_collector.add(sender, digest)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["merge_id"] = str(self.merge_id) if self.merge_id is not None else None
        if self.last_merge_ms is not None:
            d["last_merge_ms"] = round(self.last_merge_ms, 1)
        return d


class MergeFailed(Exception):
    """A merge that the leader cancels (the reason is logged)."""
