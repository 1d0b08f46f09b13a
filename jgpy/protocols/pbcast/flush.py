"""pbcast.FLUSH: quiet the group before a view change or a state transfer (``org.jgroups.protocols.pbcast.FLUSH``).

A flush makes every participant deliver what was multicast before it and stop multicasting until it ends, so
that what was sent in view V is delivered in V everywhere (virtual synchrony; seed 004). The phases, as 2.12:

1. The flush coordinator (GMS's coordinator before a view change, the requester before a state transfer, or the
   application: ``Channel.start_flush``) multicasts START_FLUSH with the participants (the members of its view
   it flushes). SUSPEND (an event, up from GMS or down from the channel) starts it and returns True once it has
   completed, False after ``start_flush_timeout`` ms or when a participant is in another flush.
2. A participant calls the application's ``block()``, then blocks multicasts going down (unicasts pass: virtual
   synchrony is about multicasts) and answers FLUSH_COMPLETED with its NAKACK digest. A participant that is
   already in a flush answers FLUSH_NOT_COMPLETED: the coordinator fails this attempt (and sends ABORT_FLUSH if
   some had completed); GMS tries again (4 attempts, 1-5 s apart), as does a state transfer.
3. With all FLUSH_COMPLETEDs in and the digests not all equal (``enable_reconciliation``), the coordinator
   multicasts FLUSH_RECONCILE with the highest seqno seen per sender; each participant fetches what it lacks
   (NAKACK's REBROADCAST) and answers FLUSH_RECONCILE_OK. Then the flush is complete.
4. RESUME (after the view is installed or the state transferred) multicasts STOP_FLUSH (or unicasts it to a
   subset): participants unblock and call the application's ``unblock()``.

A crashed participant is left out; if the flush coordinator crashes, the next participant in the list sends
STOP_FLUSH for it; a view whose coordinator left ends a flush everywhere. SUSPEND_BUT_FAIL (an event down, as
2.12's, for testing exactly that) starts a flush of the view and returns at once, never ending it. A member
starts blocked (as 2.12): its first view as a singleton, or the STOP_FLUSH of the flush around its join,
unblocks it.

Threads: START_FLUSH and STOP_FLUSH are regular multicasts, so they are handled on the delivery thread, in order
with the messages; ``block()`` runs there before FLUSH_COMPLETED is sent, as in Java. Work that waits
(reconciliation, rejecting a flush) runs on this protocol's own thread (``jgpy-FLUSH-*``), never on a receive
thread.

Where jgpy differs from 2.12 (none of it changes what goes on the wire):

* A multicast sent by the delivery thread itself while the flush blocks (the application's ``receive`` or
  ``block`` sending) cannot wait: the STOP_FLUSH that ends the flush is delivered on that thread. It is queued
  and sent, in order, when the flush ends (2.12 blocks a pool thread there). Other threads block, as in 2.12.
* A sender that passed the check just before the flush began is waited for (up to ``INFLIGHT_WAIT_MS``) before
  the digest of FLUSH_COMPLETED is taken: 2.12 can let such a message out after its FLUSH_COMPLETED.
* A participant blocks multicasts on every START_FLUSH; 2.12 does not after an aborted flush (whose ABORT_FLUSH
  unblocks without calling ``unblock()``, so the next flush sends no BLOCK and forgets to block).
* The reconciliation waits until the missing messages are handed over in order, and asks for the last one too
  (2.12's range leaves it out when it is the only one missing); see ``NAKACK.rebroadcast``.
* ``timeout`` <= 0 makes a blocked sender wait for the end of the flush (2.12 spins).
* When the flush coordinator crashes and it was the last participant, the first one takes over (2.12's
  wrap-around test can never be true).
* Hostile input: FLUSH messages from non-members are dropped and counted, START_FLUSH with more than
  ``MAX_PARTICIPANTS`` participants too; a rejection is sent to the members of our view only; the state a
  member keeps (completed digests, reconcile answers) is per member of the view.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Iterable, Sequence

from jgpy._core.headers import FlushHeader
from jgpy._core.message import Message
from jgpy._core.types import Digest, View
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.promise import Promise
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol

H = FlushHeader
OOB = Message.OOB

#: a START_FLUSH listing more participants than this is dropped (2.12 clusters are far smaller)
MAX_PARTICIPANTS = 4096
#: how long the START_FLUSH handler waits for multicasts that were already past the check when blocking began
INFLIGHT_WAIT_MS = 500
#: jobs (reconciliations, rejections) waiting for the FLUSH thread at most; more are dropped and counted
MAX_PENDING_JOBS = 64


def highest_sequences(digests: Sequence[Digest]) -> Digest:
    """2.12's ``findHighestSequences``: per sender the highest highest-delivered seqno of ``digests`` (an entry
    known to only one digest is copied whole; a common one is ``(0, highest, 0)``, as Java writes it)."""
    result = digests[0]
    for other in digests[1:]:
        if result == other:
            continue
        merged = Digest()
        for addr, low, hd, hr in result.entries():
            o = other.get(addr)
            if o is None:
                merged.set(addr, low, hd, hr)
            else:
                merged.set(addr, 0, max(hd, o[1]), 0)
        for addr, low, hd, hr in other.entries():
            if addr not in result:
                merged.set(addr, low, hd, hr)
        result = merged
    return result


def start_flush_with_retries(start: Any, attempts: int = 4, floor_ms: int = 1000, ceiling_ms: int = 5000,
                             stop: threading.Event | None = None) -> bool:
    """``start()`` until it returns True, at most ``attempts`` times, sleeping a random ``floor_ms`` ..
    ``ceiling_ms`` between attempts (2.12's ``Util.startFlush`` and ``GMS._startFlush``)."""
    for i in range(attempts):
        if start():
            return True
        if i + 1 < attempts:
            pause = random.uniform(floor_ms, ceiling_ms) / 1000.0
            if stop is not None:
                if stop.wait(pause):
                    return False
            else:
                time.sleep(pause)
    return False


class FLUSH(Protocol):
    NAME = "pbcast.FLUSH"

    timeout = Property(to_int, 8000, "max ms a multicast waits for a flush to end, after which the sender unblocks "
                       "by itself (<= 0: until the flush ends)")
    start_flush_timeout = Property(to_int, 2000, "ms (per attempt) to quiet the cluster during the first flush phase")
    end_flush_timeout = Property(to_int, 2000, "ms to wait for UNBLOCK after STOP_FLUSH is issued")
    retry_timeout = Property(to_int, 2000, "retry timeout after an unsuccessful attempt to quiet the cluster "
                             "(declared, not used, by 2.12: GMS and state transfer sleep 1-5 s between attempts)")
    enable_reconciliation = Property(to_bool, True, "reconciliation phase: when the participants' digests differ, "
                                     "they fetch what others have before the flush completes")
    auto_flush_conf = Property(to_bool, False, "", deprecated="ignored, as in 2.12")

    def __init__(self) -> None:
        super().__init__()
        self._shared = threading.Lock()             # 2.12's sharedLock: the flush's bookkeeping
        self._flags = threading.Lock()              # flushInProgress, sentBlock, sentUnblock (Java's atomics)
        self._gate = threading.Lock()               # blocking, in-flight multicasts, deferred multicasts
        self._unblocked = threading.Condition(self._gate)
        self._reset_state()
        self._blocking = True
        self._inflight = 0
        self._draining = False
        self._deferred: list[Message] = []
        self._in_progress = False
        self._sent_block = False
        self._sent_unblock = False
        self._view_counter = 0
        self._flush_promise = Promise()
        self._unblock_promise = Promise()
        self._worker: SerialExecutor | None = None
        self._start_ms = 0.0
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a FLUSH message", self._rl)
        self.counters: dict[str, Any] = dict.fromkeys(
            ("number_of_flushes", "flushes_started", "flushes_completed", "flushes_failed", "reconciliations",
             "blocked_sends", "deferred_sends", "self_unblocks", "inflight_wait_timeouts", "dropped_non_member",
             "dropped_absurd", "dropped_jobs", "unblock_timeouts"), 0)
        self.counters.update(total_time_in_flush_ms=0.0, average_flush_duration_ms=0.0)

    def _reset_state(self) -> None:
        self._view: View | None = None
        self._view_id = 0                           # 2.12: the id of an empty ViewId until the first view
        self._members: list = []
        self._member_set: frozenset = frozenset()
        self._creator = None
        self._coordinator = None                    # flushCoordinator
        self._flush_members: list = []
        self._completed: dict = {}                  # member -> Digest (flushCompletedMap)
        self._not_completed: set = set()
        self._suspected: set = set()
        self._reconcile_oks: set = set()

    # ---- life cycle ----

    def start(self) -> None:
        cfg = {"flush_supported": True}
        self.up_prot.up(Event(EventType.CONFIG, dict(cfg)))
        self.down_prot.down(Event(EventType.CONFIG, dict(cfg)))
        self._view_counter = 0
        self._flush_promise.reset()
        self._unblock_promise.reset()
        with self._gate:
            self._blocking = True
        self._worker = SerialExecutor(f"jgpy-FLUSH-{self.local_addr}")

    def stop(self) -> None:
        """Unlike 2.12, a sender still waiting for a flush to end is let go (into a stopped stack)."""
        with self._shared:
            self._reset_state()
        with self._flags:
            self._in_progress = self._sent_block = self._sent_unblock = False
        with self._gate:
            self._blocking = False
            self._deferred.clear()
            self._unblocked.notify_all()
        self._flush_promise.set(False)
        self._unblock_promise.set(True)
        w, self._worker = self._worker, None
        if w is not None:
            w.stop()

    def _cas(self, name: str, expect: bool, new: bool) -> bool:
        with self._flags:
            if getattr(self, name) != expect:
                return False
            setattr(self, name, new)
            return True

    # ---- the flush coordinator ----

    def start_flush(self, participants: Iterable | None = None) -> bool:
        """Flush ``participants`` (None: the whole view); True once all completed (2.12's ``startFlush``)."""
        sent_to = self._begin_flush(participants)
        if sent_to is None:
            return False
        result = self._flush_promise.get(self.start_flush_timeout)
        if result is None:
            self.log.debug("%s: timed out waiting for flush responses after %d ms: rejecting the flush to %s",
                           self.local_addr, self.start_flush_timeout, sent_to)
            self._reject_flush(sent_to, self._view_id)
            result = False
        if not result:
            self.counters["flushes_failed"] += 1
        return bool(result)

    def _on_suspend(self, members: list) -> list:
        me = self.local_addr
        with self._shared:
            self._coordinator = me
            participants = [m for m in members if m in self._member_set]
            self._flush_members = [m for m in participants if m not in self._suspected]
            view_id = self._view_id
        if not participants:
            self._flush_promise.set(True)
            return participants
        msg = Message(None, None, me)               # regular, not OOB: two flushes must stay in FIFO order
        msg.put_header(self.id, FlushHeader(H.START_FLUSH, view_id, participants))
        self.log.debug("%s: flush coordinator is starting FLUSH with participants %s", me, participants)
        self.down_prot.down_msg(msg)
        return participants

    def _on_resume(self, members: Sequence | None) -> None:
        """RESUME: STOP_FLUSH to everybody (multicast) or to ``members``; a participant waits for its UNBLOCK."""
        me = self.local_addr
        view_id = self._view_id
        with self._shared:
            participant = me in self._flush_members or (members is not None and me in members)
        if not members:
            msg = Message(None, None, me)           # not OOB: FIFO with START_FLUSH
            msg.put_header(self.id, FlushHeader(H.STOP_FLUSH, view_id))
            self.down_prot.down_msg(msg)
        else:
            for a in members:
                msg = Message(a, None, me)
                msg.put_header(self.id, FlushHeader(H.STOP_FLUSH, view_id))
                self.down_prot.down_msg(msg)
        if participant and not self._on_delivery_thread():
            self._wait_for_unblock()

    def _reject_flush(self, participants: Iterable, view_id: int) -> None:
        """ABORT_FLUSH to the participants (2.12); jgpy: only to those in our view, so a peer's list cannot make
        us send to anybody else."""
        plist = list(participants or ())
        with self._shared:
            targets = [m for m in plist if m in self._member_set or m == self.local_addr]
        for m in targets:
            msg = Message(m, None, self.local_addr, OOB)
            msg.put_header(self.id, FlushHeader(H.ABORT_FLUSH, view_id, plist))
            self.down_prot.down_msg(msg)

    def _on_flush_completed(self, sender, hdr: FlushHeader) -> None:
        reconcile = completed = collision = False
        rmsg = None
        with self._shared:
            self._completed[sender] = hdr.digest if hdr.digest is not None else Digest()
            fm = self._flush_members
            completed = bool(fm) and all(m in self._completed for m in fm)
            collision = bool(self._not_completed)
            reconcile = self.enable_reconciliation and completed and self._has_gaps()
            if reconcile:
                digest = highest_sequences(list(self._completed.values()))
                rmsg = Message(None, None, self.local_addr, OOB)
                rmsg.put_header(self.id, FlushHeader(H.FLUSH_RECONCILE, self._view_id, list(fm), digest))
                self._reconcile_oks.clear()
                self._completed.clear()
            elif completed:
                self._completed.clear()
            elif collision:
                self._not_completed.clear()
                self._completed.clear()
        self.log.debug("%s: FLUSH_COMPLETED from %s, completed %s", self.local_addr, sender, completed)
        if reconcile:
            self.counters["reconciliations"] += 1
            self.down_prot.down_msg(rmsg)
        elif completed:
            self._flush_promise.set(True)
        elif collision:
            self._submit(self._reject_flush, hdr.flush_participants, hdr.view_id)

    def _has_gaps(self) -> bool:
        """2.12's ``hasVirtualSynchronyGaps``: any digest not equal to the first (low, delivered, received)."""
        digests = list(self._completed.values())
        return any(d != digests[0] for d in digests[1:])

    def _on_not_completed(self, sender, hdr: FlushHeader) -> None:
        with self._shared:
            self._not_completed.add(sender)
            collision = bool(self._completed)
            if collision:
                self._not_completed.clear()
                self._completed.clear()
        self.log.debug("%s: FLUSH_NOT_COMPLETED from %s, collision=%s", self.local_addr, sender, collision)
        if collision:
            self._submit(self._reject_flush, hdr.flush_participants, hdr.view_id)
        self._flush_promise.set(False)             # fail (GMS retries) as soon as one participant says no

    def _on_reconcile_ok(self, sender) -> None:
        with self._shared:
            self._reconcile_oks.add(sender)
            done = self._reconciled()
        if done:
            self._flush_promise.set(True)

    def _reconciled(self) -> bool:
        fm = self._flush_members
        return bool(self._reconcile_oks) and len(self._reconcile_oks) >= len(fm) and \
            all(m in self._reconcile_oks for m in fm)

    # ---- a participant ----

    def _handle_start_flush(self, requester, hdr: FlushHeader) -> None:
        if self._cas("_in_progress", False, True):
            with self._shared:
                self._coordinator = requester
            self._on_start_flush(requester, hdr)
            return
        reply = Message(requester)
        reply.put_header(self.id, FlushHeader(H.FLUSH_NOT_COMPLETED, hdr.view_id, hdr.flush_participants))
        self.down_prot.down_msg(reply)
        self.log.debug("%s: received START_FLUSH, responded with FLUSH_NOT_COMPLETED to %s", self.local_addr,
                       requester)

    def _on_start_flush(self, starter, hdr: FlushHeader) -> None:
        me = self.local_addr
        self._start_ms = time.monotonic() * 1000.0
        self.counters["number_of_flushes"] += 1
        with self._shared:
            if starter != me:
                self._coordinator = starter
                self._flush_members = [m for m in (hdr.flush_participants or ()) if m not in self._suspected]
            proceed = me in self._flush_members
        if not proceed:
            return
        if self._cas("_sent_block", False, True):
            self._send_block_up()
        self._block_down()
        digest = self.down_prot.down(Event(EventType.GET_DIGEST))
        reply = Message(starter)
        reply.put_header(self.id, FlushHeader(H.FLUSH_COMPLETED, hdr.view_id, hdr.flush_participants, digest))
        self.down_prot.down_msg(reply)
        self.log.debug("%s: received START_FLUSH, responded with FLUSH_COMPLETED to %s", me, starter)

    def _handle_reconcile(self, requester, hdr: FlushHeader) -> None:
        """On the FLUSH thread: NAKACK fetches what the digest says we lack, then FLUSH_RECONCILE_OK."""
        if hdr.digest is not None:
            self.down_prot.down(Event(EventType.REBROADCAST, hdr.digest))
        ok = Message(requester, None, self.local_addr, OOB)
        ok.put_header(self.id, FlushHeader(H.FLUSH_RECONCILE_OK))
        self.down_prot.down_msg(ok)

    def _on_stop_flush(self) -> None:
        if self._start_ms > 0:
            c = self.counters
            c["total_time_in_flush_ms"] += time.monotonic() * 1000.0 - self._start_ms
            if c["number_of_flushes"]:
                c["average_flush_duration_ms"] = c["total_time_in_flush_ms"] / c["number_of_flushes"]
            self._start_ms = 0.0
        self.counters["flushes_completed"] += 1
        self._reset_for_next_flush()
        if self._cas("_sent_unblock", False, True):
            self._send_unblock_up()

    def _reset_for_next_flush(self) -> None:
        with self._shared:
            self._completed.clear()
            self._not_completed.clear()
            self._flush_members = []
            self._suspected.clear()
            self._coordinator = None
        self._unblock_down()
        with self._flags:
            self._in_progress = False

    def _send_block_up(self) -> None:
        self.up(Event(EventType.BLOCK))
        with self._flags:
            self._sent_unblock = False

    def _send_unblock_up(self) -> None:
        with self._flags:
            self._sent_block = False
        self.up(Event(EventType.UNBLOCK))

    def _wait_for_unblock(self) -> None:
        if self._unblock_promise.get(self.end_flush_timeout) is None:
            self.counters["unblock_timeouts"] += 1
            self._rl.warning("unblock-timeout", "%s: waiting for UNBLOCK timed out after %d ms", self.local_addr,
                             self.end_flush_timeout)

    def _on_suspect(self, addr) -> None:
        me = self.local_addr
        takeover = None
        with self._shared:
            fm = self._flush_members
            if addr is not None and addr == self._coordinator:
                ci = fm.index(addr) if addr in fm else -1
                mi = fm.index(me) if me in fm else -1
                if mi - ci == 1 or (mi == 0 and len(fm) > 1 and ci == len(fm) - 1):
                    takeover = list(fm)
        if takeover is not None:
            self.log.debug("%s: flush coordinator %s suspected, I am the neighbor, completing the flush", me, addr)
            self._on_resume(takeover)
        with self._shared:
            if addr is not None and (addr in self._member_set or addr in self._flush_members):
                self._suspected.add(addr)
            self._flush_members = [m for m in self._flush_members if m not in self._suspected]
            view_id = self._view_id
            coord = self._coordinator
            flush_ok = bool(self._completed) and all(m in self._completed for m in self._flush_members)
            reconciled = bool(self._reconcile_oks) and self._reconciled()
        if flush_ok and coord is not None:
            digest = self.down_prot.down(Event(EventType.GET_DIGEST))
            msg = Message(coord, None, me)
            msg.put_header(self.id, FlushHeader(H.FLUSH_COMPLETED, view_id, None, digest))
            self.down_prot.down_msg(msg)
        elif reconciled:                           # jgpy: the suspect was the last answer missing
            self._flush_promise.set(True)

    # ---- blocking multicasts ----

    def down_msg(self, msg: Message) -> Any:
        if msg.dest is not None:                    # unicasts are irrelevant to virtual synchrony
            return self.down_prot.down_msg(msg)
        gate = self._gate
        gate.acquire()
        try:
            if (self._blocking or self._deferred) and self._hold(msg):
                return None
            self._inflight += 1
        finally:
            gate.release()
        try:
            return self.down_prot.down_msg(msg)
        finally:
            with gate:
                self._inflight -= 1
                if self._draining and not self._inflight:
                    self._unblocked.notify_all()

    def _hold(self, msg: Message) -> bool:
        """Called with the gate held while a flush blocks (or multicasts queued by the delivery thread wait): True
        if ``msg`` was queued (the delivery thread), else returns once it may go."""
        hdr = msg.get_header(self.id)
        if hdr is not None and hdr.type == H.FLUSH_BYPASS:
            return False
        if self._on_delivery_thread():
            if self._blocking or self._deferred:
                self._deferred.append(msg)
                self.counters["deferred_sends"] += 1
                return True
            return False
        if not self._blocking:
            return False
        self.counters["blocked_sends"] += 1
        t = self.timeout
        deadline = time.monotonic() + t / 1000.0 if t > 0 else None
        while self._blocking:
            if deadline is None:
                self._unblocked.wait()
                continue
            left = deadline - time.monotonic()
            if left > 0:
                self._unblocked.wait(left)
                continue
            self._blocking = False                 # 2.12: the sender unblocks by itself after `timeout`
            self.counters["self_unblocks"] += 1
            self._rl.warning("self-unblock", "%s: unblocking after %d ms", self.local_addr, t)
            self._unblocked.notify_all()
            self._flush_promise.set(True)
            self._schedule_deferred()
        return False

    def _block_down(self) -> None:
        """Block multicasts, then wait (bounded) for those already past the check to be sent."""
        with self._gate:
            self._blocking = True
            if self._inflight:
                self._draining = True
                try:
                    if not self._unblocked.wait_for(lambda: not self._inflight, INFLIGHT_WAIT_MS / 1000.0):
                        self.counters["inflight_wait_timeouts"] += 1
                        self._rl.warning("inflight", "%s: %d multicast(s) still being sent %d ms after the flush "
                                         "blocked sending", self.local_addr, self._inflight, INFLIGHT_WAIT_MS)
                finally:
                    self._draining = False

    def _unblock_down(self) -> None:
        with self._gate:
            self._blocking = False
            self._unblocked.notify_all()
        self._schedule_deferred()

    def _schedule_deferred(self) -> None:
        if not self._deferred:
            return
        if self._on_delivery_thread():
            self._send_deferred()
            return
        ex = self.stack.delivery if self.stack is not None else None
        if ex is not None:
            ex.submit(self._send_deferred)

    def _send_deferred(self) -> None:
        """On the delivery thread: the multicasts it sent during the flush, in order (until a new flush blocks)."""
        while True:
            with self._gate:
                if self._blocking or not self._deferred:
                    return
                msg = self._deferred.pop(0)
                self._inflight += 1
            try:
                self.down_prot.down_msg(msg)
            except Exception:  # noqa: BLE001 - the rest still goes out
                self._rl.exception("deferred", "%s: sending a multicast held during the flush failed",
                                   self.local_addr)
            finally:
                with self._gate:
                    self._inflight -= 1
                    if self._draining and not self._inflight:
                        self._unblocked.notify_all()

    def _on_delivery_thread(self) -> bool:
        ex = self.stack.delivery if self.stack is not None else None
        return ex is not None and ex.in_thread()

    def _submit(self, fn, *args) -> None:
        w = self._worker
        if w is None:
            return
        if w.pending >= MAX_PENDING_JOBS:
            self.counters["dropped_jobs"] += 1
            self._rl.warning("jobs", "%s: %d FLUSH jobs are waiting: one dropped", self.local_addr, MAX_PENDING_JOBS)
            return
        w.submit(fn, *args)

    @property
    def blocking(self) -> bool:
        """True while multicasts going down wait for a flush to end."""
        return self._blocking

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.CONNECT:
            return self._handle_connect(evt)
        if t == EventType.SUSPEND:
            return self.start_flush(evt.arg)
        if t == EventType.RESUME:
            self._on_resume(evt.arg)
            return None
        if t == EventType.SUSPEND_BUT_FAIL:
            self.suspend_but_fail()
        return self.down_prot.down(evt)

    def suspend_but_fail(self) -> None:
        """2.12's SUSPEND_BUT_FAIL (used by its FlushTest to crash a flush coordinator mid-flush): unless a flush
        is in progress here, START_FLUSH goes to every member of the view and this returns at once, neither
        waiting for the answers nor ever ending the flush. The members stay blocked until the flush is ended
        for us: our crash makes the next participant send STOP_FLUSH (``_on_suspect``) and the view without us
        ends it everywhere."""
        self._begin_flush(None)

    def _begin_flush(self, participants: Iterable | None) -> list | None:
        """START_FLUSH to ``participants`` (None: the view) unless a flush is in progress here (then None)."""
        with self._flags:
            busy = self._in_progress
        if busy:
            return None
        self._flush_promise.reset()
        with self._shared:
            wanted = list(self._members) if participants is None else list(participants)
        self.counters["flushes_started"] += 1
        return self._on_suspend(wanted)

    def _handle_connect(self, evt: Event) -> Any:
        """BLOCK up first; the join's flush (or our first view) unblocks us. Connecting with a state transfer
        does not wait for UNBLOCK: the joiner itself ends that flush after the transfer."""
        if self._cas("_sent_block", False, True):
            self._send_block_up()
        result = self.down_prot.down(evt)
        if isinstance(result, BaseException):
            with self._flags:
                self._sent_block = False
        elif not getattr(evt.arg, "state_transfer", False):
            self._wait_for_unblock()
        return result

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self.up_prot.up(evt)                    # JGRP-618: the application sees the view before UNBLOCK
            view = evt.arg
            coordinator_left = self._on_view_change(view)
            me = self.local_addr
            singleton = len(view.members or ()) == 1 and me in (view.members or ())
            self._view_counter += 1
            if (self._view_counter == 1 and singleton) or coordinator_left:
                self._on_stop_flush()
            return None
        if t == EventType.TMP_VIEW:
            if self.local_addr not in (evt.arg.members or ()):
                self._on_view_change(evt.arg)
        elif t == EventType.SUSPECT:
            self._on_suspect(evt.arg)
        elif t == EventType.SUSPEND:
            return self.start_flush(evt.arg)
        elif t == EventType.RESUME:
            self._on_resume(evt.arg)
            return None
        elif t == EventType.UNBLOCK:
            self._unblock_promise.set(True)
        return self.up_prot.up(evt)

    def _on_view_change(self, view: View) -> bool:
        """The new view; True if the creator of the previous one is not in it (its flush ends everywhere)."""
        members = list(view.members or ())
        with self._shared:
            old_members, old_creator = self._members, self._creator
            self._view = view
            self._view_id = view.vid.id if view.vid is not None else 0
            self._members = members
            self._member_set = frozenset(members)
            self._creator = view.vid.coord_addr if view.vid is not None else None
            self._suspected &= self._member_set
        return bool(old_members) and bool(members) and old_creator not in self._member_set

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        """FLUSH messages are handled where they stand in the batch: the messages before them go up first."""
        pid = self.id
        run: list = []
        for m in msgs:
            hdr = m.get_header(pid)
            if hdr is None or hdr.type == H.FLUSH_BYPASS:
                run.append(m)
                continue
            if run:
                self.up_prot.up_batch(run)
                run = []
            try:
                self._handle(m, hdr)
            except Exception:  # noqa: BLE001 - one bad message must not hurt the rest of the batch
                self._guard.failure(m)
        if run:
            self.up_prot.up_batch(run)

    def _handle(self, msg: Message, hdr: FlushHeader) -> None:
        src = msg.src
        me = self.local_addr
        if src != me and src not in self._member_set:
            self.counters["dropped_non_member"] += 1
            self._rl.warning("non-member", "%s: dropped a FLUSH message (type %s) from %s: not a member of the view",
                             me, hdr.type, src)
            return
        t = hdr.type
        fp = hdr.flush_participants
        if fp is not None and len(fp) > MAX_PARTICIPANTS:
            self.counters["dropped_absurd"] += 1
            self._rl.warning("absurd", "%s: dropped a FLUSH message from %s listing %d participants", me, src,
                             len(fp))
            return
        if t == H.START_FLUSH:
            if (fp is not None and me in fp) or src == me:
                self._handle_start_flush(src, hdr)
            else:
                self.log.debug("%s: received START_FLUSH but I am not a flush participant, not responding", me)
        elif t == H.FLUSH_COMPLETED:
            if hdr.view_id == self._view_id:
                self._on_flush_completed(src, hdr)
        elif t == H.FLUSH_NOT_COMPLETED:
            self._on_not_completed(src, hdr)
        elif t == H.FLUSH_RECONCILE:
            self._submit(self._handle_reconcile, src, hdr)
        elif t == H.FLUSH_RECONCILE_OK:
            self._on_reconcile_ok(src)
        elif t == H.STOP_FLUSH:
            self._on_stop_flush()
        elif t == H.ABORT_FLUSH:
            if fp is not None and me in fp:
                self._reset_for_next_flush()
        else:
            self._rl.warning("unknown-type", "%s: FLUSH header of unknown type %s from %s", me, t, src)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["blocking"] = self._blocking
        d["flush_in_progress"] = self._in_progress
        d["deferred_pending"] = len(self._deferred)
        d["failed_msgs"] = self._guard.failed
        return d


__all__ = ["FLUSH", "highest_sequences", "start_flush_with_retries"]
