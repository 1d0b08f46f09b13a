"""VERIFY_SUSPECT: double-check a suspicion before GMS acts on it (``org.jgroups.protocols.VERIFY_SUSPECT``).

A ``SUSPECT(P)`` event coming up from a failure detector is not passed on at once: P is sent
``num_msgs`` ARE_YOU_DEAD probes (unicast, OOB, ``from`` = us). If P answers with I_AM_NOT_DEAD within
``timeout`` ms the suspicion is dropped and ``UNSUSPECT(P)`` goes down and up; otherwise ``SUSPECT(P)``
finally goes up. The other half keeps *us* alive in a cluster of Java nodes: every ARE_YOU_DEAD is
answered with ``num_msgs`` I_AM_NOT_DEAD messages (unicast, OOB, ``from`` = us) to the asker.

As in Java 2.12: a suspicion of ourselves is ignored, a member already being verified is not probed
again, and VERIFY_SUSPECT messages are never passed up. Unlike 2.12, once there is a view a suspect that
is not a member of it is not verified (GMS would ignore it anyway), so the pending checks are bounded by the
view. Confirmed suspicions are passed up by a
dedicated daemon thread (Java's ``VERIFY_SUSPECT.TimerThread``) that lives while suspicions are pending,
so a slow GMS never holds up the shared timer. ``use_icmp`` (``InetAddress.isReachable``) is not
implemented: it warns and verifies with messages.
"""

from __future__ import annotations

import threading
from typing import Any

from jgpy._core.headers import VerifyHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_str
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms


class VERIFY_SUSPECT(Protocol):  # noqa: N801 - the JGroups name
    NAME = "VERIFY_SUSPECT"

    timeout = Property(to_int, 2000, "ms to wait for an I_AM_NOT_DEAD from a suspected member")
    num_msgs = Property(to_int, 1, "ARE_YOU_DEAD messages sent to a suspected member (and I_AM_NOT_DEAD answers "
                        "sent back)")
    use_icmp = Property(to_bool, False, "verify with InetAddress.isReachable() (not implemented by jgpy: "
                        "messages are used)")
    bind_addr = Property(to_str, None, "interface for ICMP pings (only used with use_icmp); jgroups.bind_addr "
                         "overrides it", system_property=("jgroups.bind_addr", "bind.address"))

    IGNORED_PROPERTIES = {
        "bind_interface": ignored("use bind_addr"),
        "bind_interface_str": ignored("use bind_addr"),
    }

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self.suspects: dict[Any, float] = {}     # member -> deadline (monotonic ms)
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._addr = None
        self.num_verifications = 0
        self.num_confirmed = 0
        self.num_unsuspected = 0
        self.num_are_you_dead_received = 0
        self.num_non_member_suspects = 0
        self._members: frozenset = frozenset()
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a VERIFY_SUSPECT message", self._rl)

    # ---- life cycle ----

    def init(self) -> None:
        if self.use_icmp:
            self.log.warning("VERIFY_SUSPECT: use_icmp=true is not implemented by jgpy; suspects are verified "
                             "with ARE_YOU_DEAD messages instead")
            self.use_icmp = False
        if self.num_msgs < 1:
            self.num_msgs = 1

    def start(self) -> None:
        with self._cond:
            self._stopped = False

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self.suspects.clear()
            self._cond.notify_all()
            t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(2.0)

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    # ---- events ----

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
        elif evt.type == EventType.VIEW_CHANGE:
            self._members = frozenset(evt.arg.members or ()) if evt.arg is not None else frozenset()
            with self._cond:
                for m in [m for m in self.suspects if m not in self._members]:
                    del self.suspects[m]     # left the view: nothing to decide any more
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.SUSPECT:          # it all starts here ...
            mbr = evt.arg
            if mbr is None:
                self.log.error("VERIFY_SUSPECT: suspected member is null")
                return None
            me = self.me
            if me is not None and mbr == me:
                self.log.debug("%s: I was suspected; ignoring the SUSPECT event", me)
                return None
            if self._members and mbr not in self._members:
                self.num_non_member_suspects += 1
                self._rl.debug("non-member", "%s: ignoring a suspicion of %s: not a member", me, mbr)
                return None
            self.verify_suspect(mbr)
            return None                     # decided later (after verification)
        if t == EventType.CONFIG:
            if self.bind_addr is None and isinstance(evt.arg, dict) and evt.arg.get("bind_addr") is not None:
                self.bind_addr = str(evt.arg["bind_addr"])
        return self.up_prot.up(evt)

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self._handle_msg)

    def _handle_msg(self, msg: Message) -> None:
        self._handle(msg, msg.get_header(self.id))

    def _handle(self, msg: Message, hdr: VerifyHeader) -> None:
        if hdr.type == VerifyHeader.ARE_YOU_DEAD:
            self.num_are_you_dead_received += 1
            if hdr.from_ is None:
                self._rl.error("no-from", "VERIFY_SUSPECT: ARE_YOU_DEAD from %s: hdr.from is null", msg.src)
                return
            for _ in range(self.num_msgs):
                rsp = Message(hdr.from_, None, None, Message.OOB)
                rsp.put_header(self.id, VerifyHeader(VerifyHeader.I_AM_NOT_DEAD, self.me))
                self.down_prot.down_msg(rsp)
        elif hdr.type == VerifyHeader.I_AM_NOT_DEAD:
            if hdr.from_ is None:
                self._rl.error("no-from", "VERIFY_SUSPECT: I_AM_NOT_DEAD from %s: hdr.from is null", msg.src)
                return
            self.unsuspect(hdr.from_)
        # any other type: dropped, as in Java

    # ---- verification ----

    def verify_suspect(self, mbr) -> None:
        """Probe ``mbr`` with ARE_YOU_DEAD unless it is already being verified."""
        if mbr is None:
            return
        with self._cond:
            if self._stopped or mbr in self.suspects:
                return
            self.suspects[mbr] = now_ms() + self.timeout
            self.num_verifications += 1
            self._start_thread()            # start the timer before sending (as Java does)
            self._cond.notify_all()
        self.log.debug("%s: verifying that %s is dead", self.me, mbr)
        for _ in range(self.num_msgs):
            msg = Message(mbr, None, None, Message.OOB)
            msg.put_header(self.id, VerifyHeader(VerifyHeader.ARE_YOU_DEAD, self.me))
            self.down_prot.down_msg(msg)

    def unsuspect(self, mbr) -> None:
        if mbr is None:
            return
        with self._cond:
            removed = self.suspects.pop(mbr, None) is not None
            if removed:
                self._cond.notify_all()
        if removed:
            self.num_unsuspected += 1
            self.log.debug("%s: member %s is not dead", self.me, mbr)
            self.down_prot.down(Event(EventType.UNSUSPECT, mbr))
            self.up_prot.up(Event(EventType.UNSUSPECT, mbr))

    def _start_thread(self) -> None:
        """(with the lock held) The confirmation thread runs while suspects are pending."""
        if self._thread is not None and self._thread.is_alive():
            return
        t = threading.Thread(target=self._run, name=f"VERIFY_SUSPECT.TimerThread-{self.me}", daemon=True)
        self._thread = t
        t.start()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                if self._thread is not me or self._stopped:
                    return
                if not self.suspects:
                    self._thread = None
                    return
                now = now_ms()
                confirmed = [m for m, deadline in self.suspects.items() if deadline <= now]
                for m in confirmed:
                    del self.suspects[m]
                if not confirmed:
                    wait = min(self.suspects.values()) - now
                    self._cond.wait(max(0.001, wait / 1000.0))
                    continue
            for m in confirmed:
                self.num_confirmed += 1
                self.log.debug("%s: %s did not answer within %d ms: passing up SUSPECT", self.me, m, self.timeout)
                try:
                    self.up_prot.up(Event(EventType.SUSPECT, m))
                except Exception:  # noqa: BLE001
                    self.log.exception("%s: passing up SUSPECT(%s) failed", self.me, m)

    def dump_stats(self) -> dict[str, Any]:
        with self._cond:
            pending = [str(m) for m in self.suspects]
        return {"num_verifications": self.num_verifications, "num_confirmed": self.num_confirmed,
                "num_unsuspected": self.num_unsuspected, "num_are_you_dead_received": self.num_are_you_dead_received,
                "num_non_member_suspects": self.num_non_member_suspects, "failed_msgs": self._guard.failed,
                "pending": pending}
