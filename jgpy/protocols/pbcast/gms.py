"""pbcast.GMS: group membership (``org.jgroups.protocols.pbcast.GMS`` and its Client/Participant/Coord impls).

Joining (client): discovery finds the coordinator; JOIN_REQ goes to it; the JOIN_RSP carries the new
view and the join digest, whose coordinator entry is bumped by one because the VIEW multicast that
announces us is the coordinator's next seqno (seed 000, "Digest returned to client"); we install the
view, become a server and send VIEW_ACK. Nobody answers: become a singleton (unless
``disable_initial_coord``); only clients answer: the lowest address founds the group
(``handle_concurrent_startup``).

Coordinating: JOIN/LEAVE/SUSPECT requests queue up at a view handler thread that bundles them for up to
``max_bundling_time`` ms (``view_bundling``) and computes the next view from a *temporary* membership, so
that concurrent joins and leaves see each other (seed 000, "Membership Updating for JOIN/LEAVE
requests"). The new view is multicast (with the join digest when somebody joins), VIEW_ACKs are collected
(``view_ack_collection_timeout``), then joiners get their JOIN_RSP. A leaving coordinator hands over to the
next member by installing a view without itself; a participant whose predecessors are all suspected takes
over.

Merging: MERGE2's MERGE event reaches the view handler; the merge itself (MERGE_REQ, MERGE_RSP,
INSTALL_MERGE_VIEW, CANCEL_MERGE, digest fetching) is :mod:`jgpy.protocols.pbcast.merger`. While a merge
runs, the view handler is *suspended*: queued and new JOIN/LEAVE/SUSPECT requests are discarded (joiners
retry) until the merge ends, is cancelled, or ``resume_task_timeout`` ms have passed.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from jgpy._core.address import set_logical_name
from jgpy._core.headers import GmsHeader
from jgpy._core.message import Message
from jgpy._core.types import Digest, JoinRsp, MergeView, View, ViewId
from jgpy.protocols.guard import MessageGuard
from jgpy.protocols.pbcast.flush import start_flush_with_retries
from jgpy.protocols.pbcast.merger import MergeData, Merger
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.promise import Promise
from jgpy.stack.properties import Property, ignored, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol

H = GmsHeader
OOB = Message.OOB


class JoinRejectedError(PermissionError):
    """The coordinator refused our JOIN_REQ (e.g. AUTH, or reject_join_from_existing_member): ``reason`` is the
    JoinRsp's fail reason, ``coord`` the coordinator (2.12's joiner throws a SecurityException with the reason)."""

    def __init__(self, reason: str, coord: Any = None, what: str = "") -> None:
        self.reason, self.coord = reason, coord
        super().__init__(f"the coordinator {coord} refused our JOIN_REQ{what}: {reason}")

    @staticmethod
    def of(reason: str, coord: Any) -> "JoinRejectedError":
        """The error for a refused join: an :class:`AuthRejectedError` for 2.12's AUTH reasons."""
        if reason in AUTH_REASONS:
            return AuthRejectedError(reason, coord, " (AUTH: our token is missing or not accepted)")
        return JoinRejectedError(reason, coord)


class AuthRejectedError(JoinRejectedError):
    """The coordinator's AUTH refused our token (or we sent none)."""


#: the fail reasons of 2.12's AUTH (jgpy.protocols.auth sends the same)
AUTH_REASONS = ("Authentication failed", "Failed to find an AuthHeader in Message",
                "Failed to find valid AuthHeader in Message")


class AckCollector:
    """Who still has to ack the current view (``org.jgroups.util.AckCollector``)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.missing: set = set()
        self.suspected: set = set()
        self.expected = 0

    def reset(self, members) -> None:
        with self._cond:
            self.suspected.clear()
            self.missing = set(members or ())
            self.expected = len(self.missing)
            self.missing -= self.suspected
            self._cond.notify_all()

    def ack(self, member) -> None:
        with self._cond:
            self.missing.discard(member)
            if not self.missing:
                self._cond.notify_all()

    def suspect(self, member) -> None:
        with self._cond:
            self.suspected.add(member)
            self.missing.discard(member)
            if not self.missing:
                self._cond.notify_all()

    def handle_view(self, view) -> None:
        with self._cond:
            self.suspected &= set(view.members or ())

    def wait_for_all(self, timeout_ms: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self.missing, timeout_ms / 1000.0)


class Request:
    JOIN, LEAVE, SUSPECT, MERGE, JOIN_WITH_STATE_TRANSFER = 1, 2, 3, 4, 6
    _NAMES = {1: "JOIN", 2: "LEAVE", 3: "SUSPECT", 4: "MERGE", 6: "JOIN_WITH_STATE_TRANSFER"}

    __slots__ = ("type", "mbr", "suspected", "views", "use_flush")

    def __init__(self, type: int, mbr=None, suspected: bool = False, views=None, use_flush: bool = False):
        self.type, self.mbr, self.suspected, self.views, self.use_flush = type, mbr, suspected, views, use_flush

    def can_be_processed_together(self, other: "Request") -> bool:
        membership = (self.JOIN, self.LEAVE, self.SUSPECT, self.JOIN_WITH_STATE_TRANSFER)
        return other is not None and self.type in membership and other.type in membership

    def __repr__(self) -> str:
        return f"{self._NAMES.get(self.type, self.type)}({self.mbr}{', suspected' if self.suspected else ''})"


class ViewHandler:
    """The thread that turns JOIN/LEAVE/SUSPECT requests into views, bundling requests that arrive together.
    At most MAX_QUEUED requests wait (2.12: no limit); more are dropped and counted (``dropped``): a flood of
    JOIN_REQs from made-up senders must not grow the queue without limit (a real joiner asks again)."""

    MAX_COMPLETION_MS = 10000
    MAX_QUEUED = 10000

    def __init__(self, gms: "GMS") -> None:
        self.gms = gms
        self.q: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._suspended = False
        self._idle = threading.Condition(self._lock)
        self._processing = False
        self._resumers: dict = {}          # merge id -> timer task that resumes us if nobody else does
        self.dropped = 0

    @property
    def suspended(self) -> bool:
        return self._suspended

    def suspend(self, merge_id) -> None:
        """Discard queued and new requests until :meth:`resume` (a merge is running)."""
        with self._lock:
            if self._suspended:
                return
            self._suspended = True
            self._drain()
            if threading.current_thread() is not self._thread:
                self._idle.wait_for(lambda: not self._processing, self.MAX_COMPLETION_MS / 1000.0)
            timer = self.gms.timer
            if timer is not None:
                old = self._resumers.pop(merge_id, None)
                if old is not None:
                    old.cancel()
                self._resumers[merge_id] = timer.schedule(self.gms.resume_task_timeout,
                                                          lambda: self._resume_by_timer(merge_id), "view handler resumer")
        self.gms.log.debug("%s: view handler suspended for merge %s", self.gms.local_addr, merge_id)

    def _resume_by_timer(self, merge_id) -> None:
        with self._lock:
            if self._resumers.pop(merge_id, None) is None:
                return
        self.gms.log.warning("%s: view handler was still suspended for merge %s after %d ms: resuming it",
                             self.gms.local_addr, merge_id, self.gms.resume_task_timeout)
        self.resume_force()

    def resume(self, merge_id) -> None:
        with self._lock:
            if not self._suspended:
                return
            task = self._resumers.pop(merge_id, None)
        if task is not None:
            task.cancel()
        self.resume_force()

    def resume_force(self) -> None:
        with self._lock:
            self._suspended = False

    def _drain(self) -> None:
        while True:
            try:
                self.q.get_nowait()
            except queue.Empty:
                return

    def add(self, req: Request) -> None:
        with self._lock:
            if self._closed:
                return
            if self._suspended:
                self.gms.log.debug("%s: view handler is suspended (merging); %s discarded", self.gms.local_addr, req)
                return
            if self.q.qsize() >= self.MAX_QUEUED:
                self.dropped += 1
                self.gms._rl.warning("view-handler-full", "%s: %d view requests are waiting: %s dropped",
                                     self.gms.local_addr, self.MAX_QUEUED, req)
                return
            self.q.put(req)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"jgpy-ViewHandler-{self.gms.local_addr}",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        gms = self.gms
        while True:
            try:
                first = self.q.get(timeout=5.0)
            except queue.Empty:
                with self._lock:
                    if self.q.empty():
                        self._thread = None
                        return
                continue
            if first is None:               # stop marker
                return
            requests = [first]
            end = time.monotonic() + gms.max_bundling_time / 1000.0
            while gms.view_bundling:
                left = end - time.monotonic()
                if left <= 0:
                    break
                try:
                    nxt = self.q.get(timeout=left)
                except queue.Empty:
                    break
                if nxt is None:
                    self.q.put(None)
                    break
                if not first.can_be_processed_together(nxt):
                    self.q.put(nxt)            # handled in the next round (order among kinds is kept enough)
                    break
                requests.append(nxt)
            with self._lock:
                if self._suspended:
                    continue
                self._processing = True
            try:
                if first.type == Request.MERGE:
                    gms.impl.merge(first.views)
                else:
                    gms.impl.handle_requests(requests)
            except Exception:  # noqa: BLE001 - a failure must not stop view handling
                gms.log.exception("%s: failed processing %s", gms.local_addr, requests)
            finally:
                with self._lock:
                    self._processing = False
                    self._idle.notify_all()

    def stop(self, wait_ms: float = 0) -> None:
        """Process what is queued, then end (a leaving coordinator waits for its last view)."""
        with self._lock:
            self._closed = True
            self.q.put(None)
            t = self._thread
        if t is not None and wait_ms > 0 and t is not threading.current_thread():
            t.join(wait_ms / 1000.0)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False
            self._suspended = False
            for task in self._resumers.values():
                task.cancel()
            self._resumers.clear()
            self._drain()


# ---------------------------------------------------------------------------------------------
# roles
# ---------------------------------------------------------------------------------------------

class GmsImpl:
    def __init__(self, gms: "GMS") -> None:
        self.gms = gms
        self.leaving = False

    def join(self, mbr, use_flush: bool = True, state_transfer: bool = False) -> None:
        self.gms.log.warning("join() should not be called on a %s", type(self).__name__)

    def leave(self, mbr) -> None:
        self.gms.log.warning("leave() should not be called on a %s", type(self).__name__)

    def handle_join_response(self, rsp: JoinRsp) -> None:
        pass

    def handle_leave_response(self) -> None:
        pass

    def suspect(self, mbr) -> None:
        pass

    def unsuspect(self, mbr) -> None:
        pass

    def handle_requests(self, requests: list[Request]) -> None:
        pass

    def handle_view_change(self, view: View, digest: Digest | None) -> None:
        pass

    # merging: only servers (participants, coordinators) take part; a client ignores it all, as in Java
    def merge(self, views) -> None:
        pass

    def handle_merge_request(self, sender, merge_id, mbrs) -> bool:
        """Returns whether the request was taken (the caller resumes STABLE otherwise)."""
        return False

    def handle_merge_response(self, data: MergeData, merge_id) -> None:
        pass

    def handle_merge_view(self, data: MergeData, merge_id) -> bool:
        return False

    def handle_merge_cancelled(self, merge_id) -> bool:
        return False

    def handle_digest_response(self, sender, digest: Digest) -> None:
        pass


class ServerGmsImpl(GmsImpl):
    """What participants and coordinators share: answering merge requests and installing merge views."""

    def handle_merge_request(self, sender, merge_id, mbrs) -> bool:
        self.gms.merger.handle_merge_request(sender, merge_id, mbrs)
        return True

    def handle_merge_view(self, data: MergeData, merge_id) -> bool:
        self.gms.merger.handle_merge_view(data, merge_id)
        return True

    def handle_digest_response(self, sender, digest: Digest) -> None:
        self.gms.merger.handle_digest_response(sender, digest)


class ClientGmsImpl(GmsImpl):
    """Not a member yet: discovery and the join loop."""

    def __init__(self, gms: "GMS") -> None:
        super().__init__(gms)
        self.join_promise = Promise()
        self.use_flush = True
        self.state_transfer = False

    def join(self, mbr, use_flush: bool = True, state_transfer: bool = False) -> None:
        """``use_flush``: the coordinator flushes around our join (JOIN_REQ's flag); ``state_transfer``:
        JOIN_REQ_WITH_STATE_TRANSFER (with FLUSH the coordinator leaves the join's flush for us to end)."""
        gms = self.gms
        self.leaving = False
        self.use_flush, self.state_transfer = use_flush, state_transfer
        self.join_promise.reset()
        coord = None
        rsp: JoinRsp | None = None
        while not self.leaving:
            if rsp is None and not self.join_promise.has_result():
                responses = gms.down_prot.down(Event(EventType.FIND_INITIAL_MBRS, self.join_promise)) or []
                responses = [r for r in responses if r.own_addr != gms.local_addr]
                if not responses:
                    if gms.disable_initial_coord:
                        gms.log.debug("%s: no initial members, and disable_initial_coord is set: retrying", mbr)
                        continue
                    self.become_singleton(mbr)
                    return
                coord = self.determine_coord(responses)
                if coord is None:               # only clients answered
                    if not gms.handle_concurrent_startup:
                        self.become_singleton(mbr)
                        return
                    clients = sorted({mbr, *(r.own_addr for r in responses if r.own_addr is not None)})
                    if clients[0] == mbr:
                        self.become_singleton(mbr)
                        return
                    gms.log.debug("%s: waiting for %s to become coordinator", mbr, clients[0])
                    time.sleep(0.5)
                    continue
                self._send_join(coord, mbr)
            if rsp is None:
                rsp = self.join_promise.get(gms.join_timeout)
            if rsp is None:
                gms.log.warning("%s: join(%s) sent to %s timed out (after %d ms), retrying", gms.local_addr, mbr,
                                coord, gms.join_timeout)
                continue
            if rsp.fail_reason is not None:
                raise JoinRejectedError.of(rsp.fail_reason, coord)
            if rsp.digest is None or len(rsp.digest) == 0:
                gms._rl.warning("join-no-digest", "digest response has no senders: digest=%s", rsp.digest)
                rsp = None
                continue
            if rsp.view is None:
                gms._rl.error("join-no-view", "JoinRsp has a null view, skipping it")
                rsp = None
                continue
            digest = rsp.digest.copy()
            if gms.local_addr not in digest:
                raise RuntimeError(f"digest returned from {coord} with JOIN_RSP does not contain myself "
                                   f"({gms.local_addr}): {rsp}")
            coord = rsp.view.coordinator if coord is None else coord
            entry = digest.get(coord)
            if entry is not None:              # the VIEW multicast announcing us is the coordinator's next seqno
                low, hd, hr = entry
                digest.set(coord, low, hd + 1, max(hr, hd + 1))
            gms.set_digest(digest)
            if not self._install(rsp.view):
                gms._rl.error("join-install-failed", "view installation failed, retrying to join the group")
                rsp = None
                continue
            gms.send_view_ack(coord)
            return

    def _send_join(self, coord, mbr) -> None:
        msg = Message(coord, None, None, OOB)
        kind = H.JOIN_REQ_WITH_STATE_TRANSFER if self.state_transfer else H.JOIN_REQ
        msg.put_header(self.gms.id, GmsHeader(kind, mbr=mbr, use_flush_if_present=self.use_flush))
        self.gms.down_prot.down_msg(msg)

    @staticmethod
    def determine_coord(rsps) -> Any:
        votes: dict = {}
        for r in rsps:
            if r.has_coord:
                votes[r.coord_addr] = votes.get(r.coord_addr, 0) + 1
        for r in rsps:
            if r.own_addr in votes and not r.is_coord:
                del votes[r.own_addr]
        winner, most = None, 0
        for addr, n in votes.items():
            if n > most:
                winner, most = addr, n
        return winner

    def _install(self, view: View) -> bool:
        gms = self.gms
        if gms.local_addr is None or view.members is None or gms.local_addr not in view.members:
            gms._rl.error("not-in-view", "I (%s) am not member of %s, will not install view", gms.local_addr,
                          view.members)
            return False
        gms.install_view(view)
        gms.become_participant()
        gms.up_prot.up(Event(EventType.BECOME_SERVER))
        gms.down_prot.down(Event(EventType.BECOME_SERVER))
        return True

    def become_singleton(self, mbr) -> None:
        gms = self.gms
        gms.set_digest(Digest([(gms.local_addr, 0, 0, 0)]))
        view = View(ViewId(mbr, 0), [mbr])
        gms.up_prot.up(Event(EventType.PREPARE_VIEW, view))
        gms.down_prot.down(Event(EventType.PREPARE_VIEW, view))
        gms.install_view(view)
        gms.become_coordinator()
        gms.up_prot.up(Event(EventType.BECOME_SERVER))
        gms.down_prot.down(Event(EventType.BECOME_SERVER))
        gms.log.debug("%s: created group (first member)", mbr)

    def handle_join_response(self, rsp: JoinRsp) -> None:
        self.join_promise.set(rsp)

    def leave(self, mbr) -> None:
        self.leaving = True


class ParticipantGmsImpl(ServerGmsImpl):
    """A member that is not the coordinator."""

    def __init__(self, gms: "GMS") -> None:
        super().__init__(gms)
        self.suspected: list = []
        self.leave_promise = Promise()

    def leave(self, mbr) -> None:
        gms = self.gms
        self.leave_promise.reset()
        if mbr == gms.local_addr:
            self.leaving = True
        tries = 3
        while tries > 0:
            coord = gms.determine_coordinator()
            if coord is None:
                break
            tries -= 1
            if coord == gms.local_addr:         # I am the coordinator by now
                gms.become_coordinator()
                gms.impl.leave(mbr)
                return
            msg = Message(coord, None, None, OOB)
            msg.put_header(gms.id, GmsHeader(H.LEAVE_REQ, mbr=mbr, use_flush_if_present=True))
            gms.down_prot.down_msg(msg)
            if self.leave_promise.get(gms.leave_timeout) is not None:
                break
        gms.become_client()

    def handle_leave_response(self) -> None:
        self.leave_promise.set(True)

    def handle_join_response(self, rsp: JoinRsp) -> None:
        v = rsp.view
        gms = self.gms
        if v is not None and gms.view_id is not None and v.vid.compare_to(gms.view_id) > 0:
            gms.install_view(v)

    def suspect(self, mbr) -> None:
        self.handle_requests([Request(Request.SUSPECT, mbr, True)])

    def unsuspect(self, mbr) -> None:
        if mbr in self.suspected:
            self.suspected.remove(mbr)

    def handle_requests(self, requests: list[Request]) -> None:
        gms = self.gms
        suspects = [r.mbr for r in requests if r.type == Request.SUSPECT]
        if not suspects:
            return
        for m in suspects:
            if m not in self.suspected:
                self.suspected.append(m)
        remaining = [m for m in gms.members if m not in self.suspected]
        if remaining and remaining[0] == gms.local_addr:
            gms.log.info("%s: the coordinator %s is suspected: taking over", gms.local_addr, suspects)
            self.suspected.clear()
            gms.become_coordinator()
            for m in suspects:
                gms.view_handler.add(Request(Request.SUSPECT, m, True))
                gms.ack_collector.suspect(m)

    def handle_view_change(self, view: View, digest: Digest | None) -> None:
        self.suspected.clear()
        if self.leaving and self.gms.local_addr not in (view.members or ()):
            return
        self.gms.install_view(view, digest)


class CoordGmsImpl(ServerGmsImpl):
    """The coordinator: decides views."""

    MAX_SUSPEND_TIMEOUT = 30000

    def leave(self, mbr) -> None:
        gms = self.gms
        if mbr is None:
            return
        if mbr == gms.local_addr:
            self.leaving = True
        gms.view_handler.add(Request(Request.LEAVE, mbr, False))
        gms.view_handler.stop(wait_ms=gms.leave_timeout)

    def suspect(self, mbr) -> None:
        if mbr == self.gms.local_addr:
            self.gms._rl.warning("coord-suspected", "I (%s) am the coordinator and am suspected: ignoring it", mbr)
            return
        self.handle_requests([Request(Request.SUSPECT, mbr, True)])

    def merge(self, views) -> None:
        self.gms.merger.merge(views)

    def handle_merge_response(self, data: MergeData, merge_id) -> None:
        self.gms.merger.handle_merge_response(data, merge_id)

    def handle_merge_cancelled(self, merge_id) -> bool:
        self.gms.merger.handle_merge_cancelled(merge_id)
        return True

    def handle_requests(self, requests: list[Request]) -> None:
        gms = self.gms
        me = gms.local_addr
        new_mbrs: list = []
        suspected: list = []
        leaving: list = []
        use_flush = gms.use_flush_if_present
        join_and_state_transfer = False
        for req in requests:
            if req.type in (Request.JOIN, Request.JOIN_WITH_STATE_TRANSFER):
                if req.mbr not in new_mbrs:
                    new_mbrs.append(req.mbr)
                use_flush = req.use_flush            # 2.12: the last joiner's flag decides
                if req.type == Request.JOIN_WITH_STATE_TRANSFER:
                    join_and_state_transfer = True
            elif req.type == Request.LEAVE:
                (suspected if req.suspected else leaving).append(req.mbr)
            elif req.type == Request.SUSPECT:
                suspected.append(req.mbr)
        if me in new_mbrs:
            new_mbrs.remove(me)
        if gms.view_id is None:
            gms.log.debug("gms.view_id is null, I'm not the coordinator anymore (leaving=%s); the new coordinator "
                          "will handle the request", self.leaving)
            return
        current = list(gms.members)
        leaving = [m for m in dict.fromkeys(leaving) if m in current]
        if me in suspected:
            gms._rl.warning("coord-suspected", "I am the coordinator and I'm being suspected: ignoring it")
            suspected = [m for m in suspected if m != me]
        suspected = [m for m in dict.fromkeys(suspected) if m in current]
        for m in list(new_mbrs):
            if m in current:                          # already joined
                gms.counters["joins_from_existing_members"] += 1
                if gms.reject_join_from_existing_member:
                    gms._rl.warning("join-existing", "%s: %s is already a member: rejecting its JOIN_REQ", me, m)
                    gms.send_join_response(JoinRsp(None, None, f"{m} is already a member of {gms.view_id}"), m)
                else:
                    gms._rl.warning("join-existing", "%s: %s already present; returning existing view %s", me, m,
                                    gms.view)
                    gms.send_join_response(JoinRsp(View(gms.view_id, current), gms.get_digest()), m)
                new_mbrs.remove(m)
        if not new_mbrs and not leaving and not suspected:
            return
        # our own LEAVE in this batch, not the flag: leave() sets that at once, and a batch still finishing
        # (a join waiting for the joiner's VIEW_ACK) must not reset the state before our LEAVE is processed
        i_leave = me in leaving
        new_view = gms.get_next_view(new_mbrs, leaving, suspected)
        if not new_view.members and new_view.creator == me:
            if i_leave:
                gms.init_state()
            return
        gms.up_prot.up(Event(EventType.PREPARE_VIEW, new_view))
        gms.down_prot.down(Event(EventType.PREPARE_VIEW, new_view))
        join_rsp = None
        try:
            if use_flush and not gms.start_flush(new_view) and new_mbrs:
                # JGRP-759: no JOIN_RSP after a failed flush; the joiner asks again
                self._send_leave_responses(leaving)
                return
            if new_mbrs:
                gms.down_prot.down(Event(EventType.SUSPEND_STABLE, self.MAX_SUSPEND_TIMEOUT))
                existing = gms.get_digest()
                if existing is None:
                    gms.log.error("received a null digest from GET_DIGEST: the join will fail")
                else:
                    join_digest = existing.copy()
                    for m in new_mbrs:
                        join_digest.set(m, 0, 0, -1)    # the joiner's first seqno will be 1; -1: unknown
                    join_rsp = JoinRsp(new_view, join_digest)
            self._send_leave_responses(leaving)
            gms.cast_view_change(new_view, join_rsp.digest if join_rsp else None, join_rsp, new_mbrs)
        finally:
            if new_mbrs:
                gms.down_prot.down(Event(EventType.RESUME_STABLE))
            if use_flush and not join_and_state_transfer:
                gms.stop_flush()                    # a joiner that fetches the state ends the flush itself
            if i_leave:
                gms.init_state()

    def _send_leave_responses(self, leaving: list) -> None:
        for m in leaving:
            msg = Message(m, None, None, OOB)
            msg.put_header(self.gms.id, GmsHeader(H.LEAVE_RSP))
            self.gms.down_prot.down_msg(msg)

    def handle_view_change(self, view: View, digest: Digest | None) -> None:
        if self.leaving and self.gms.local_addr not in (view.members or ()):
            return
        self.gms.install_view(view, digest)


# ---------------------------------------------------------------------------------------------
# the protocol
# ---------------------------------------------------------------------------------------------

class GMS(Protocol):
    NAME = "pbcast.GMS"

    join_timeout = Property(to_int, 5000, "ms to wait for a JOIN_RSP before sending JOIN_REQ again")
    leave_timeout = Property(to_int, 5000, "ms to wait for a LEAVE_RSP (after that we leave anyway)")
    merge_timeout = Property(to_int, 5000, "ms the merge leader waits for MERGE_RSPs (a merge id older than "
                             "1.5 x this is cancelled)")
    print_local_addr = Property(to_bool, True, "print the 'GMS: address=...' banner on connect, as Java does")
    print_physical_addrs = Property(to_bool, True, "include the physical address in the banner")
    disable_initial_coord = Property(to_bool, False, "never become coordinator on startup (wait for one)")
    handle_concurrent_startup = Property(to_bool, True, "when only other clients answer, the lowest address "
                                         "founds the group")
    view_bundling = Property(to_bool, True, "bundle JOIN/LEAVE/SUSPECT requests that arrive together into one view")
    max_bundling_time = Property(to_int, 50, "ms to wait for more requests to bundle")
    num_prev_mbrs = Property(to_int, 50, "former members remembered")
    view_ack_collection_timeout = Property(to_int, 2000, "ms to wait for VIEW_ACKs")
    resume_task_timeout = Property(to_int, 10000, "ms after which a suspended view handler resumes (merges)")
    use_flush_if_present = Property(to_bool, True, "run FLUSH around view changes when FLUSH is in the stack")
    log_collect_msgs = Property(to_bool, True, "log missing VIEW_ACKs")
    reject_join_from_existing_member = Property(
        to_bool, False, "answer a JOIN_REQ from a member with a failed JoinRsp instead of the current view",
        deprecated="2.12 ignores it (always returns the current view); jgpy implements it")
    join_retry_timeout = Property(to_int, 0, "", deprecated="ignored, as in 2.12")
    digest_timeout = Property(to_int, 0, "", deprecated="ignored, as in 2.12")
    merge_leader = Property(to_bool, False, "", deprecated="ignored, as in 2.12")
    shun = Property(to_bool, False, "", deprecated="ignored, as in 2.12")
    use_flush = Property(to_bool, False, "", deprecated="ignored, as in 2.12")
    flush_timeout = Property(to_int, 0, "", deprecated="ignored, as in 2.12")

    IGNORED_PROPERTIES = {"flush_invoker_class": ignored("jgpy runs no custom flush invokers"),
                          "flushInvokerClass": ignored("jgpy runs no custom flush invokers")}

    def __init__(self) -> None:
        super().__init__()
        self.members: list = []
        self.tmp_members: list = []
        self.joining: list = []
        self.leaving_mbrs: list = []
        self.prev_members: list = []
        self.view: View | None = None
        self.view_id: ViewId | None = None
        self.ltime = 0
        self.ack_collector = AckCollector()
        self.view_handler = ViewHandler(self)
        self.merger = Merger(self)
        self._members_lock = threading.RLock()
        self._impls: dict[str, GmsImpl] = {}
        self.impl: GmsImpl = self._impl(ClientGmsImpl)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a GMS message", self._rl)
        self.num_views = 0
        self.flush_in_stack = False                 # FLUSH said so (CONFIG flush_supported)
        self.merge_ack_collector = AckCollector()   # INSTALL_MERGE_VIEW_OKs (with FLUSH)
        self.counters = dict.fromkeys(("views_installed", "views_discarded", "joins_from_existing_members",
                                       "view_acks_missing", "flushes_failed"), 0)

    # ---- roles ----

    def _impl(self, cls) -> GmsImpl:
        impl = self._impls.get(cls.__name__)
        if impl is None:
            impl = self._impls[cls.__name__] = cls(self)
        impl.leaving = False
        if isinstance(impl, ParticipantGmsImpl):
            impl.suspected.clear()
            impl.leave_promise.reset()
        return impl

    def become_coordinator(self) -> None:
        if not isinstance(self.impl, CoordGmsImpl):
            self.impl = self._impl(CoordGmsImpl)
            self.view_handler.reopen()

    def become_participant(self) -> None:
        if not isinstance(self.impl, ParticipantGmsImpl):
            self.impl = self._impl(ParticipantGmsImpl)

    def become_client(self) -> None:
        impl = self._impl(ClientGmsImpl)
        impl.join_promise.reset()
        self.impl = impl

    def init_state(self) -> None:
        self.become_client()
        self.view_id = None
        self.view = None

    @property
    def is_coordinator(self) -> bool:
        c = self.determine_coordinator()
        return c is not None and c == self.local_addr

    def determine_coordinator(self):
        with self._members_lock:
            return self.members[0] if self.members else None

    # ---- views ----

    def get_next_view(self, new_mbrs, old_mbrs, suspected) -> View:
        with self._members_lock:
            vid = max(self.view_id.id, self.ltime) + 1
            self.ltime = vid
            gone = set(old_mbrs) | set(suspected)
            mbrs = [m for m in self.tmp_members if m not in gone]
            for m in new_mbrs:
                if m not in mbrs:
                    mbrs.append(m)
            coord = mbrs[0] if mbrs else self.local_addr
            self.tmp_members = list(mbrs)
            for m in new_mbrs:
                if m not in self.joining:
                    self.joining.append(m)
            for m in gone:
                if m not in self.leaving_mbrs:
                    self.leaving_mbrs.append(m)
            return View(ViewId(coord, vid), mbrs)

    def cast_view_change(self, new_view: View, digest: Digest | None, join_rsp: JoinRsp | None, new_mbrs) -> None:
        msg = Message()
        msg.put_header(self.id, GmsHeader(H.VIEW, view=new_view, my_digest=digest))
        ack_mbrs = [m for m in new_view.members if m not in (new_mbrs or ())]
        self.ack_collector.reset(ack_mbrs)
        self.up_prot.up(Event(EventType.TMP_VIEW, new_view))
        self.down_prot.down(Event(EventType.TMP_VIEW, new_view))
        self.down_prot.down_msg(msg)
        if ack_mbrs and not self.ack_collector.wait_for_all(self.view_ack_collection_timeout):
            self.counters["view_acks_missing"] += 1
            if self.log_collect_msgs:
                self.log.warning("%s: failed to collect all ACKs (expected=%d) for view %s after %d ms, missing ACKs "
                                 "from %s", self.local_addr, self.ack_collector.expected, new_view.vid,
                                 self.view_ack_collection_timeout, sorted(map(str, self.ack_collector.missing)))
        if join_rsp is not None and new_mbrs:
            self.ack_collector.reset(new_mbrs)
            for joiner in new_mbrs:
                self.send_join_response(join_rsp, joiner)
            if not self.ack_collector.wait_for_all(self.view_ack_collection_timeout):
                self.counters["view_acks_missing"] += 1
                if self.log_collect_msgs:
                    self.log.warning("%s: failed to collect all ACKs (expected=%d) for unicast view %s after %d ms, "
                                     "missing ACKs from %s", self.local_addr, self.ack_collector.expected,
                                     new_view.vid, self.view_ack_collection_timeout,
                                     sorted(map(str, self.ack_collector.missing)))

    def send_join_response(self, rsp: JoinRsp, dest) -> None:
        msg = Message(dest)
        msg.put_header(self.id, GmsHeader(H.JOIN_RSP, join_rsp=rsp))
        self.down_prot.down_msg(msg)

    def send_view_ack(self, dest) -> None:
        msg = Message(dest, None, None, OOB)
        msg.put_header(self.id, GmsHeader(H.VIEW_ACK))
        self.down_prot.down_msg(msg)

    def install_view(self, new_view: View, digest: Digest | None = None) -> None:
        vid = new_view.vid
        mbrs = list(new_view.members or ())
        rc = vid.compare_to(self.view_id) if self.view_id is not None else 1
        if rc <= 0:
            self.counters["views_discarded"] += 1
            # as in 2.12, our current view again is discarded quietly: after a merge, every subgroup
            # coordinator multicasts the merge view to everybody
            if rc < 0:
                self._rl.warning("older-view", "%s: received view < current view; discarding it (current vid: %s, "
                                 "new vid: %s)", self.local_addr, self.view_id, vid)
            return
        if digest is not None:
            if isinstance(new_view, MergeView):
                self.down_prot.down(Event(EventType.MERGE_DIGEST, digest))
            else:
                self.set_digest(digest)
        self.ack_collector.handle_view(new_view)
        self.ltime = max(vid.id, self.ltime)
        if self.local_addr not in mbrs:
            return
        with self._members_lock:
            self.view = View(vid, mbrs) if isinstance(new_view, MergeView) else new_view
            self.view_id = vid
            self.members = mbrs
            self.joining = [m for m in self.joining if m not in mbrs]
            self.leaving_mbrs = [m for m in self.leaving_mbrs if m in mbrs]
            tmp = list(mbrs)
            for m in self.joining:
                if m not in tmp:
                    tmp.append(m)
            self.tmp_members = [m for m in tmp if m not in self.leaving_mbrs]
            for m in mbrs:
                if m not in self.prev_members:
                    self.prev_members.append(m)
            del self.prev_members[:-self.num_prev_mbrs or None]
            self.num_views += 1
            self.counters["views_installed"] += 1
            evt = Event(EventType.VIEW_CHANGE, new_view)
            self.down_prot.down(evt)
            self.up_prot.up(evt)
            coord = mbrs[0] if mbrs else None
            if coord == self.local_addr:
                self.become_coordinator()
            elif isinstance(self.impl, CoordGmsImpl):
                self.become_participant()

    def set_digest(self, digest: Digest) -> None:
        self.down_prot.down(Event(EventType.SET_DIGEST, digest))

    def get_digest(self) -> Digest | None:
        return self.down_prot.down(Event(EventType.GET_DIGEST))

    # ---- FLUSH ----

    def start_flush(self, view: View | None, attempts: int = 4, floor_ms: int = 1000,
                    ceiling_ms: int = 5000) -> bool:
        """With FLUSH in the stack, flush the members of ``view`` that are in ours (2.12's ``_startFlush``: up
        to ``attempts`` SUSPENDs, a random ``floor_ms`` .. ``ceiling_ms`` apart); True without FLUSH."""
        if view is None or not view.members or not self.flush_in_stack:
            return True
        members = list(view.members)
        ok = start_flush_with_retries(lambda: bool(self.up_prot.up(Event(EventType.SUSPEND, list(members)))),
                                      attempts, floor_ms, ceiling_ms)
        if not ok:
            self.counters["flushes_failed"] += 1
            self._rl.warning("flush-failed", "%s: GMS flush by coordinator failed", self.local_addr)
        return ok

    def stop_flush(self, members: list | None = None) -> None:
        """RESUME up to FLUSH: STOP_FLUSH to everybody (or to ``members``)."""
        if self.flush_in_stack:
            self.up_prot.up(Event(EventType.RESUME, members))

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.CONNECT:
            if self.print_local_addr:
                physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr)) \
                    if self.print_physical_addrs else None
                bar = "-" * 67
                print(f"\n{bar}\nGMS: address={self.local_addr}, cluster={evt.arg}"
                      f"{', physical address=' + str(physical) if physical is not None else ''}\n{bar}", flush=True)
            use_flush = getattr(evt.arg, "use_flush", True)
            state_transfer = getattr(evt.arg, "state_transfer", False)
            self.down_prot.down(Event(EventType.CONNECT, str(evt.arg)))   # below us the arg is the plain name
            self.view_handler.reopen()
            try:
                self.impl.join(self.local_addr, use_flush, state_transfer)
            except BaseException as e:  # noqa: BLE001 - returned to the channel, which raises it
                return e
            return None
        if t == EventType.DISCONNECT:
            self.impl.leave(evt.arg)
            if not isinstance(self.impl, CoordGmsImpl):
                self.init_state()
            self.view_handler.stop()
            self.down_prot.down(evt)
            self.init_state()
            return None
        if t == EventType.CONFIG and isinstance(evt.arg, dict) and evt.arg.get("flush_supported"):
            self.flush_in_stack = True
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.SUSPECT:
            ret = self.up_prot.up(evt)
            self.view_handler.add(Request(Request.SUSPECT, evt.arg, True))
            self.ack_collector.suspect(evt.arg)
            self.merge_ack_collector.suspect(evt.arg)
            return ret
        if t == EventType.UNSUSPECT:
            self.impl.unsuspect(evt.arg)
            return None
        if t == EventType.MERGE:
            self.view_handler.add(Request(Request.MERGE, None, False, evt.arg))
            return None
        return self.up_prot.up(evt)

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self._handle_msg)

    def _handle_msg(self, msg: Message) -> None:
        self._handle(msg, msg.get_header(self.id))

    def _handle(self, msg: Message, hdr: GmsHeader) -> None:
        t = hdr.type
        if t in (H.JOIN_REQ, H.JOIN_REQ_WITH_STATE_TRANSFER):
            if hdr.mbr is None:
                return
            self.view_handler.add(Request(Request.JOIN if t == H.JOIN_REQ else Request.JOIN_WITH_STATE_TRANSFER,
                                          hdr.mbr, False, None, hdr.use_flush_if_present))
        elif t == H.JOIN_RSP:
            if hdr.join_rsp is not None:
                self.impl.handle_join_response(hdr.join_rsp)
        elif t == H.LEAVE_REQ:
            if hdr.mbr is None:
                return
            self.view_handler.add(Request(Request.LEAVE, hdr.mbr, False))
        elif t == H.LEAVE_RSP:
            self.impl.handle_leave_response()
        elif t == H.VIEW:
            view = hdr.view
            if view is None:
                return
            coord = msg.src
            if coord not in (view.members or ()):
                self.send_view_ack(coord)       # ack first: otherwise the connection to coord is removed
                self.impl.handle_view_change(view, hdr.my_digest)
            else:
                self.impl.handle_view_change(view, hdr.my_digest)
                self.send_view_ack(coord)
        elif t == H.VIEW_ACK:
            self.ack_collector.ack(msg.src)
        elif t == H.MERGE_REQ:
            self.down_prot.down(Event(EventType.SUSPEND_STABLE, 20000))
            if not self.impl.handle_merge_request(msg.src, hdr.merge_id, hdr.mbrs):
                self.log.debug("%s: MERGE_REQ from %s ignored: not a member yet", self.local_addr, msg.src)
        elif t == H.MERGE_RSP:
            data = MergeData(msg.src, hdr.view, hdr.my_digest, hdr.merge_rejected)
            self.impl.handle_merge_response(data, hdr.merge_id)
        elif t == H.INSTALL_MERGE_VIEW:
            if not self.impl.handle_merge_view(MergeData(msg.src, hdr.view, hdr.my_digest), hdr.merge_id):
                self.down_prot.down(Event(EventType.RESUME_STABLE))
        elif t == H.CANCEL_MERGE:
            if not self.impl.handle_merge_cancelled(hdr.merge_id):
                self.down_prot.down(Event(EventType.RESUME_STABLE))
        elif t == H.INSTALL_MERGE_VIEW_OK:
            self.merge_ack_collector.ack(msg.src)   # with FLUSH: a subgroup coordinator installed the merge view
        elif t == H.GET_DIGEST_RSP:
            if hdr.my_digest is not None:
                self.impl.handle_digest_response(msg.src, hdr.my_digest)
        elif t == H.INSTALL_DIGEST:
            self.down_prot.down(Event(EventType.MERGE_DIGEST, hdr.my_digest))
        elif t == H.GET_DIGEST_REQ:
            digest = self.get_digest()
            entry = digest.get(self.local_addr) if digest is not None else None
            if entry is not None:
                rsp = Message(msg.src, None, None, OOB)
                rsp.put_header(self.id, GmsHeader(H.GET_DIGEST_RSP, my_digest=Digest([(self.local_addr, *entry)])))
                self.down_prot.down_msg(rsp)
        else:
            self._rl.warning("unknown-type", "%s: GmsHeader with type=%s from %s not known", self.local_addr, t,
                             msg.src)

    def stop(self) -> None:
        self.view_handler.stop()
        self.merger.stop()

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["view"] = str(self.view)
        d["role"] = type(self.impl).__name__
        d["view_handler_suspended"] = self.view_handler.suspended
        d["view_requests_dropped"] = self.view_handler.dropped
        d["failed_msgs"] = self._guard.failed
        d.update({f"merge.{k}": v for k, v in self.merger.dump_stats().items()})
        return d
