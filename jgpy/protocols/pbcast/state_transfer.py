"""pbcast.STATE_TRANSFER: byte-array state transfer (``org.jgroups.protocols.pbcast.STATE_TRANSFER``).

The requester (``Channel.get_state``) suspends STABLE and unicasts a STATE_REQ to the provider (the
coordinator unless a target is given). The provider closes the BARRIER, takes its NAKACK digest and the
application state, opens the BARRIER and unicasts a STATE_RSP: the digest in the header, the state as the raw
payload. The requester closes its BARRIER, overwrites its NAKACK windows with the digest, resumes STABLE,
hands the state to the application and opens the BARRIER. Both messages are regular (not OOB) unicasts.

**Digest and state agree in jgpy.** NAKACK hands deliverable messages to the delivery thread; "delivered"
in a NAKACK window means "queued there", not "seen by the application". So:

* Provider: the STATE_REQ is a regular unicast, so it is handled *on the delivery thread*, between two
  deliveries; nothing is delivered to the application while its ``get_state`` runs. The digest sent is
  NAKACK's GET_DELIVERED_DIGEST: per sender, the highest seqno whose batch the layers above NAKACK (the
  application included) have finished processing, not the highest one handed over. Messages handed over but
  still queued are therefore neither in the state nor in the digest: the requester gets them afterwards.
* Requester: the STATE_RSP is handled on the delivery thread too. With the BARRIER closed, the NAKACK windows
  are replaced (OVERWRITE_DIGEST, under NAKACK's delivery lock), then a marker is queued on the delivery thread.
  Batches handed over by the old windows are queued before the marker: the multicasts among them (messages
  from before the state, whose effect the state contains or which the new windows deliver again) are not
  passed to the application; everything after the marker comes from the new windows. ``set_state`` runs
  right away on the delivery thread, so every message delivered afterwards comes after the state.

OOB messages are not ordered with respect to the state (as in JGroups). Without FLUSH, a message that FRAG2
fragmented and whose fragments straddle the provider's cut is lost for the requester (as in JGroups).

Unlike 2.12, a STATE_REQ is answered only when the requester is a member of the view (a stranger must not
make us close the BARRIER and send our whole state anywhere), and a STATE_RSP is taken only while we wait for
one, from the provider we asked (a stranger must not overwrite our NAKACK windows or our application's state);
the others are dropped and counted.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from jgpy._core.headers import StateHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType, StateTransferInfo
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, UP_MULTICASTS, Protocol

OOB = Message.OOB
NO_RELIABILITY = Message.NO_RELIABILITY


class StateTransferBase(Protocol):
    """What pbcast.STATE_TRANSFER and pbcast.STREAMING_STATE_TRANSFER share: membership, the requester's
    GET_STATE, the digests, the CONFIG handshake with the channel and the requester's stale-batch filter."""

    JAVA_CLASS = ""
    HEADER: Any = StateHeader

    def __init__(self) -> None:
        super().__init__()
        self.members: list = []
        self.flush_in_stack = False
        self._waiting = False                    # requester: a STATE_REQ is outstanding
        self._provider = None                    # requester: whom we asked
        self._start = 0.0
        self._stale = 0                          # requester: markers queued on the delivery thread
        self._lock = threading.Lock()
        self.counters: dict[str, Any] = {"num_state_reqs": 0, "num_bytes_sent": 0, "avg_state_size": 0.0,
                                         "stale_msgs_dropped": 0, "last_transfer_ms": 0.0,
                                         "last_digest_lag": 0, "rewind_xmit_reqs": 0}

    # ---- life cycle ----

    def start(self) -> None:
        self.up_prot.up(Event(EventType.CONFIG, {"state_transfer": True, "protocol_class": self.JAVA_CLASS}))

    def stop(self) -> None:
        self._waiting = False
        self._provider = None

    # ---- events ----

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t in (EventType.VIEW_CHANGE, EventType.TMP_VIEW):
            self._handle_view(evt.arg)
        elif t == EventType.CONFIG:
            self._handle_config_up(evt.arg)
        return self.up_prot.up(evt)

    def _handle_config_up(self, cfg: Any) -> None:
        if isinstance(cfg, dict) and "state_transfer" in cfg:
            self.log.error("Protocol stack cannot contain two state transfer protocols. Remove either one of them")

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t in (EventType.VIEW_CHANGE, EventType.TMP_VIEW):
            self._handle_view(evt.arg)
        elif t == EventType.GET_STATE:
            self._get_state(evt.arg)
            return None                          # not passed further down, as in JGroups
        elif t == EventType.CONFIG:
            if isinstance(evt.arg, dict) and evt.arg.get("flush_supported"):
                self.flush_in_stack = True
        return self.down_prot.down(evt)

    @property
    def digest_needed(self) -> bool:
        """With FLUSH in the stack no digest travels (JGroups' isDigestNeeded)."""
        return not self.flush_in_stack

    # ---- requester ----

    def _determine_coordinator(self):
        me = self.local_addr
        for m in list(self.members):
            if m != me:
                return m
        return None

    def _get_state(self, info: StateTransferInfo) -> None:
        target = info.target
        if target is None:
            target = self._determine_coordinator()
        elif target == self.local_addr:
            self.log.error("GET_STATE: cannot fetch state from myself !")
            target = None
        if target is None:
            self.log.debug("GET_STATE: first member (no state)")
            self.up_prot.up(Event(EventType.GET_STATE_OK, StateTransferInfo()))
            return
        self.log.debug("%s: GET_STATE: asking %s for state (state_id=%s), passing down a SUSPEND_STABLE event",
                       self.local_addr, target, info.state_id)
        self.down_prot.down(Event(EventType.SUSPEND_STABLE, int(info.timeout or 0)))
        self._waiting = True
        self._provider = target
        self._start = time.monotonic()
        self.down_prot.down_msg(self._state_request(target, info.state_id))

    def _state_request(self, target, state_id: str | None) -> Message:
        raise NotImplementedError

    def _handle_view(self, view) -> None:
        members = list(view.members or ()) if view is not None else []
        self.members = members
        provider = self._provider
        if self._waiting and provider is not None and provider not in members:
            # the provider left or crashed during the transfer (JGRP-148): answer the application now
            self.log.warning("%s: discovered that the state provider (%s) left; will return null state to "
                             "the application", self.local_addr, provider)
            self._waiting = False
            self._provider = None
            self.down_prot.down(Event(EventType.RESUME_STABLE))
            self.up_prot.up(Event(EventType.GET_STATE_OK, StateTransferInfo(provider)))

    def _install_digest(self, digest) -> None:
        """Requester: overwrite the NAKACK windows with the provider's digest and queue the marker that
        ends the stale batches (see the module doc). Called on the delivery thread, BARRIER closed."""
        before = self.down_prot.down(Event(EventType.GET_DIGEST))
        self.down_prot.down(Event(EventType.OVERWRITE_DIGEST, digest))
        ex = self.stack.delivery
        if ex is not None:
            with self._lock:
                self._stale += 1
            ex.submit(self._end_stale)
        # The new windows start at the provider's highest delivered seqnos. What the old ones had received
        # beyond is needed again: ask the senders now (a later message would reveal the gap too, but a
        # sender that has gone quiet would leave it until STABLE's next round).
        nak = self.stack.find("pbcast.NAKACK") if before is not None else None
        if nak is not None and hasattr(nak, "retransmit"):
            me = self.local_addr
            for sender, _low, hd, _hr in digest.entries():
                old = before.get(sender)
                if sender is not None and sender != me and old is not None and old[2] > hd:
                    self.counters["rewind_xmit_reqs"] += old[2] - hd
                    nak.retransmit(hd + 1, old[2], sender)

    def _end_stale(self) -> None:
        with self._lock:
            self._stale -= 1

    def _drop_stale(self, msgs: list) -> list:
        """Batches queued before the marker: keep what is not an application multicast from a NAKACK window."""
        ex = self.stack.delivery
        if not self._stale or ex is None or not ex.in_thread():
            return msgs
        keep = [m for m in msgs if m.dest is not None or m.flags & (OOB | NO_RELIABILITY)]
        self.counters["stale_msgs_dropped"] += len(msgs) - len(keep)
        return keep

    # ---- provider ----

    def _provider_digest(self):
        """The digest that matches the application's state (see the module doc). The counter
        ``last_digest_lag`` says how many messages NAKACK had handed over but the application had not yet
        seen: the messages "in flight" that this digest leaves to the requester."""
        d = self.down_prot.down(Event(EventType.GET_DELIVERED_DIGEST))
        if d is None:                            # no jgpy NAKACK below: what the stack says
            return self.down_prot.down(Event(EventType.GET_DIGEST))
        handed = self.down_prot.down(Event(EventType.GET_DIGEST))
        if handed is not None:
            lag = 0
            for sender, _low, hd, _hr in d.entries():
                h = handed.highest_delivered(sender)
                if h is not None and h > hd:
                    lag += h - hd
            self.counters["last_digest_lag"] = lag
        return d

    def _on_delivery_thread(self, fn, *args) -> bool:
        """Run ``fn`` on the delivery thread: True if it was submitted there (we are elsewhere)."""
        ex = self.stack.delivery
        if ex is not None and not ex.in_thread():
            ex.submit(fn, *args)
            return True
        return False

    def _count_sent(self, nbytes: int) -> None:
        c = self.counters
        c["num_bytes_sent"] += nbytes
        if c["num_state_reqs"]:
            c["avg_state_size"] = c["num_bytes_sent"] / c["num_state_reqs"]

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["waiting_for_state_response"] = self._waiting
        return d


class STATE_TRANSFER(StateTransferBase):  # noqa: N801 - the JGroups name
    NAME = "pbcast.STATE_TRANSFER"
    JAVA_CLASS = "org.jgroups.protocols.pbcast.STATE_TRANSFER"
    HEADER = StateHeader

    use_flush = Property(to_bool, False, "run a flush around the transfer", deprecated="FLUSH decides by itself")
    flush_timeout = Property(to_int, 0, "timeout of the flush", deprecated="FLUSH decides by itself")

    def __init__(self) -> None:
        super().__init__()
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a STATE_TRANSFER message", self._rl)
        self.counters.update(state_reqs_dropped=0, state_rsps_dropped=0)

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_HEADER | UP_MULTICASTS         # _drop_stale only ever drops multicasts

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        if mine:
            self._guard.each(mine, self._handle_msg)
        if rest:
            rest = self._drop_stale(rest)
            if rest:
                self.up_prot.up_batch(rest)

    def _handle_msg(self, msg: Message) -> None:
        hdr = msg.get_header(self.id)
        if hdr.type == StateHeader.STATE_REQ:
            if hdr.sender is None or hdr.sender not in self.members:
                self.counters["state_reqs_dropped"] += 1
                self._rl.warning("req-non-member", "%s: dropped a STATE_REQ from %s for %s: not a member of %s",
                                 self.local_addr, msg.src, hdr.sender, self.members)
                return
            self._handle_state_req(hdr)
        elif hdr.type == StateHeader.STATE_RSP:
            provider = self._provider
            if not self._waiting or (provider is not None and msg.src != provider):
                self.counters["state_rsps_dropped"] += 1
                self._rl.warning("rsp-unexpected", "%s: dropped a STATE_RSP from %s: not waiting for one from it "
                                 "(provider: %s)", self.local_addr, msg.src, provider)
                return
            self._handle_state_rsp(hdr, msg.buffer)
        else:
            self._rl.error("bad-type", "type %s not known in StateHeader", hdr.type)

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        d["failed_msgs"] = self._guard.failed
        return d

    def _state_request(self, target, state_id: str | None) -> Message:
        req = Message(target)
        req.put_header(self.id, StateHeader(StateHeader.STATE_REQ, int(time.time() * 1000), self.local_addr, None,
                                            state_id))
        return req

    # ---- provider ----

    def _handle_state_req(self, hdr: StateHeader) -> None:
        requester = hdr.sender
        if requester is None:
            self.log.error("sender is null !")
            return
        if self._on_delivery_thread(self._handle_state_req, hdr):
            return
        digest_needed = self.digest_needed
        digest = None
        rsp = None
        if digest_needed:
            self.down_prot.down(Event(EventType.CLOSE_BARRIER))
        try:
            if digest_needed:
                digest = self._provider_digest()
            self.log.debug("%s: digest is %s, getting application state for %s", self.local_addr, digest, requester)
            rsp = self.up_prot.up(Event(EventType.GET_APPLSTATE, StateTransferInfo(requester, hdr.state_id)))
        finally:
            if digest_needed:
                self.down_prot.down(Event(EventType.OPEN_BARRIER))
        state = rsp.state if isinstance(rsp, StateTransferInfo) else None
        self.counters["num_state_reqs"] += 1
        self._count_sent(len(state) if state is not None else 0)
        msg = Message(requester, state)
        msg.put_header(self.id, StateHeader(StateHeader.STATE_RSP, 0, self.local_addr, digest, hdr.state_id))
        self.log.debug("%s: sending state for ID=%s to %s (%d bytes)", self.local_addr, hdr.state_id, requester,
                       len(state) if state is not None else 0)
        self.down_prot.down_msg(msg)

    # ---- requester ----

    def _handle_state_rsp(self, hdr: StateHeader, state: bytes | None) -> None:
        if self._on_delivery_thread(self._handle_state_rsp, hdr, state):
            return
        digest_needed = self.digest_needed
        if digest_needed:
            self.down_prot.down(Event(EventType.CLOSE_BARRIER))    # JGRP-1013
        try:
            self._waiting = False
            self._provider = None
            if digest_needed and hdr.my_digest is not None:
                self._install_digest(hdr.my_digest)
            self.counters["last_transfer_ms"] = (time.monotonic() - self._start) * 1000.0
            self.down_prot.down(Event(EventType.RESUME_STABLE))
            self.log.debug("%s: received state, size=%d bytes. Time=%.0f milliseconds", self.local_addr,
                           len(state) if state is not None else 0, self.counters["last_transfer_ms"])
            self.up_prot.up(Event(EventType.GET_STATE_OK, StateTransferInfo(hdr.sender, hdr.state_id, 0, state)))
        finally:
            if digest_needed:
                self.down_prot.down(Event(EventType.OPEN_BARRIER))


__all__ = ["STATE_TRANSFER", "StateTransferBase"]
