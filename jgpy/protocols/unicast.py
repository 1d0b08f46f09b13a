"""UNICAST: reliable, FIFO unicast with positive acknowledgements (``org.jgroups.protocols.UNICAST``).

Per peer, the sender numbers messages from 1 on a connection (``conn_id``); the first message says so
(``first``). The receiver creates its window on a first message only; a message for a connection it does
not know makes it ask for the first one (SEND_FIRST_SEQNO). Receivers ACK cumulatively; unacked messages
are retransmitted on the ``timeout`` schedule.

Delayed and piggybacked acknowledgements (jgpy's ``ack_delay``, ``ack_threshold``): 2.12 acks every
message the moment it arrives; jgpy with ``ack_delay="0"`` does too. By default jgpy acks a sender once
``ack_threshold`` of its messages are unacknowledged, or else ``ack_delay`` ms after the first of them
(at most a tenth of the first retransmission timeout: 30 ms with the stock udp.xml), with one cumulative
ACK; 2.12's ACK(n) acknowledges every seqno up to n, so the wire and the senders' windows work unchanged
(UNICAST3 in later JGroups does the same). A regular message we send to that member meanwhile takes the
pending ACK along: the transport sends both in one LIST datagram, the ACK first, which 2.12 reads like any
bundle. A request/response exchange then sends no ACK datagram at all. A duplicate (the sender is
retransmitting) is acked at once.

Windows are the Cython ``AckSenderWindow`` and ``AckReceiverWindow``; the per-message work of both
directions, the ACK policy and the connection tables are the C core this class derives from (``UnicastCore``,
``jgpy/_core/unicast.pyx``): this module keeps the connections' life cycle, the ACKs to send, the
first-seqno handshake, retransmission and logging. Deliverable messages go to the delivery thread in order,
OOB ones right away.

Peers that are not in the view (a joiner's JOIN_REQ travels over UNICAST; so do merge messages between
partitions) get connections too, but, unlike 2.12, bounded ones (a stranger's made-up ``first`` messages
used to open a window each, kept until the next view change): at most ``max_nonmember_connections`` receive
windows (the least recently used goes) and as many send windows (the oldest goes); a non-member's receive
window takes only seqnos less than ``nonmember_window`` ahead of the next one to deliver (later ones are
dropped unacknowledged, so a real sender retransmits them); idle ones expire after ``max_retransmit_time``.
Their pending ACKs go with them.
"""

from __future__ import annotations

import time
from typing import Any

from jgpy._core.headers import UnicastHeader
from jgpy._core.message import Message
from jgpy._core.tables import AckSenderWindow
from jgpy._core.unicast import UnicastConnection, UnicastCore
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, ignored, to_bool, to_int, to_longs
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms

DATA, ACK, SEND_FIRST_SEQNO = UnicastHeader.DATA, UnicastHeader.ACK, UnicastHeader.SEND_FIRST_SEQNO
OOB = Message.OOB


class UNICAST(UnicastCore, Protocol):
    NAME = "UNICAST"

    timeout = Property(to_longs, [400, 800, 1600, 3200], "retransmission schedule of unacked messages (ms); "
                       "the last value repeats")
    max_msg_batch_size = CoreProperty(to_int, 500, "max messages removed from a receive window in one go")
    max_retransmit_time = Property(to_int, 60000, "ms after which a connection to a non-member is dropped "
                                   "(0: never)")
    immediate_ack = Property(to_bool, False, "ack as soon as a message is in the receive window (jgpy acks on "
                             "receipt, never waiting for the application; ack_delay sets how soon)",
                             deprecated="deprecated in 2.12; jgpy acks on receipt anyway (see ack_delay)")
    xmit_tick = Property(to_int, 0, "jgpy: ms between checks for due retransmissions (0: a quarter of the "
                         "first timeout)")
    ack_delay = Property(to_int, 40, "jgpy: ms an ACK may wait to cover the messages that follow it, or to "
                         "travel with a message we send to its sender (0: ack every received batch at once, as "
                         "2.12); at most a tenth of the first timeout")
    ack_threshold = CoreProperty(to_int, 64, "jgpy: unacknowledged messages from one sender that are acked at "
                                 "once, without waiting for ack_delay")
    max_nonmember_connections = CoreProperty(to_int, 64, "jgpy: receive windows, and send windows, kept for peers "
                                             "that are not in the view (joiners, other partitions, strangers): the "
                                             "least recently used goes beyond (0: no limit)")
    nonmember_window = CoreProperty(to_int, 8, "jgpy: seqnos ahead of the next one to deliver that the receive "
                                    "window of a peer not in the view takes (later ones are dropped unacked, so the "
                                    "sender retransmits them)")

    IGNORED_PROPERTIES = {
        "segment_capacity": ignored("jgpy's receive window grows as needed"),
        "loopback": ignored("deprecated in 2.12 (JGRP-1092): the transport loops messages to self back"),
        "use_gms": ignored("deprecated in 2.12"),
        "enabled_mbrs_timeout": ignored("deprecated in 2.12"),
        "eager_lock_release": ignored("deprecated in 2.12"),
    }

    # the core's fields (jgpy/_core/unicast.pxd), guarded by `lock`: send_table (dest -> UnicastConnection),
    # recv_table (sender -> UnicastReceiver), pending_acks (sender -> [highest seqno to ack, messages it covers]; a
    # regular message to that sender takes it along), nonmembers, member_set; started, ack_delay_ms (the effective
    # ack_delay), ack_task (the timer task that sends the delayed ACKs), counters

    def __init__(self) -> None:
        super().__init__()
        self.members: list = []
        self.disconnected = False
        self._last_conn_id = 0
        self._xmit_task = None
        self._rl = RateLimitedLog(self.log)
        self.counters = dict.fromkeys(("acks_sent", "xmits", "first_seqno_requests_sent",
                                       "first_seqno_requests_received", "acks_delayed", "nonmember_sends_evicted",
                                       "nonmembers_expired", "events_failed"), 0)
        self._nonmember_sends: dict = {}           # dest -> None: send connections to non-members, oldest first

    def start(self) -> None:
        self.started = True
        self.delivery = self.stack.delivery
        self.disconnected = False
        tick = self.xmit_tick or max(20, min(self.timeout) // 4)
        self._xmit_task = self.timer.schedule_with_fixed_delay(tick, tick, self._retransmit_due, "UNICAST xmit")
        self.ack_delay_ms = max(0, min(self.ack_delay, self.timeout[0] // 10 if self.timeout else 0))

    def stop(self) -> None:
        self.started = False
        self.delivery = None
        if self._xmit_task is not None:
            self._xmit_task.cancel()
            self._xmit_task = None
        with self.lock:
            self.pending_acks.clear()
            if self.ack_task is not None:
                self.ack_task.cancel()
                self.ack_task = None
            self.send_table.clear()
            self.recv_table.clear()
            self._nonmember_sends.clear()
            self.set_members(())

    def _new_conn_id(self) -> int:
        cid = self._last_conn_id
        self._last_conn_id = 0 if cid >= 32767 else cid + 1
        return cid

    # ---- sending ----
    # down_msg: the core numbers the message on its connection, adds the header and keeps it until acked

    def _new_connection(self, dest) -> UnicastConnection:
        """(the core, lock held) The first message to ``dest``: a new connection. Connections to
        non-members are capped (``max_nonmember_connections``): the oldest goes, with its unacked messages
        (2.12 keeps them all until max_retransmit_time; made-up senders we answer must not pile them up)."""
        if dest not in self.member_set:
            cap = self.max_nonmember_connections
            while 0 < cap <= len(self._nonmember_sends):
                old = next(iter(self._nonmember_sends))
                del self._nonmember_sends[old]
                self.send_table.pop(old, None)
                self.counters["nonmember_sends_evicted"] += 1
            self._nonmember_sends[dest] = None
        conn = self.send_table[dest] = UnicastConnection(self._new_conn_id(), AckSenderWindow(list(self.timeout)),
                                                         time.monotonic())
        return conn

    def _not_started(self, msg: Message) -> None:
        # e.g. a VIEW_ACK still being sent while we leave (Java: trace level)
        self.log.debug("%s: dropped a unicast to %s: UNICAST is not started", self.local_addr, msg.dest)

    def _retransmit_due(self) -> None:
        now = now_ms()
        expired = []
        with self.lock:
            due = [(dest, e.win.due(now)) for dest, e in self.send_table.items()]
            if self.max_retransmit_time > 0:
                t = time.monotonic()
                expired = [d for d in self._nonmember_sends
                           if (t - self.send_table[d].created) * 1000 >= self.max_retransmit_time]
                for d in expired:
                    del self.send_table[d]
                    del self._nonmember_sends[d]
                    self.forget(d)
                idle = self.expire_nonmembers(self.max_retransmit_time / 1000)
                self.counters["nonmembers_expired"] += len(idle)
        for dest, msgs in due:
            for _seq, msg in msgs:
                self.counters["xmits"] += 1
                self.down_prot.down_msg(msg)
        if expired:
            self.log.debug("%s: removed the connections to %d non-member(s)", self.local_addr, len(expired))

    # ---- receiving ----

    def up_needs(self) -> int:
        return UP_HEADER

    # up_batch: the core fills the windows, applies the ACKs, decides which ACKs go now and hands the deliverable
    # runs over in order; these are its calls back:

    def _schedule_delayed_acks(self) -> None:
        """(the core, lock held) ACKs wait in pending_acks: send them in ack_delay_ms."""
        self.ack_task = self.timer.schedule(self.ack_delay_ms, self._send_delayed_acks, "UNICAST delayed acks")

    def _handle_events(self, events: list) -> None:
        """What the receive core left to the protocol: unknown connections, first-seqno requests, bad
        messages."""
        asked = set()
        for what, sender, detail in events:
            try:
                if what == "no_connection":
                    if sender not in asked:          # once per batch: the sender resends its first message
                        asked.add(sender)
                        self._send_first_seqno_request(sender)
                elif what == "send_first_seqno":
                    self._resend_first(sender)
                elif what == "bad_seqno":
                    self._rl.warning("bad-seqno", "%s: dropped a unicast from %s: %s", self.local_addr, sender,
                                     detail)
                else:
                    self._rl.error("bad-type", "UnicastHeader type %s not known", detail)
            except Exception:  # noqa: BLE001 - one failure must not hurt the rest of the batch
                self.counters["events_failed"] += 1
                self._rl.exception("event-failed", "%s: failed handling %s from %s", self.local_addr, what, sender)

    def _send_delayed_acks(self) -> None:
        with self.lock:
            due = list(self.pending_acks.items())
            self.pending_acks.clear()
            self.ack_task = None
        self.counters["acks_delayed"] += len(due)
        for sender, (seq, _count) in due:
            self._send_ack(sender, seq)

    def _resend_first(self, sender) -> None:
        self.counters["first_seqno_requests_received"] += 1
        with self.lock:
            entry = self.send_table.get(sender)
            lowest = entry.win.lowest() if entry is not None else None
        if lowest is None:
            if entry is None and self.started and not self.disconnected:
                self._rl.error("no-sender", "%s: sender window for %s not found", self.local_addr, sender)
            return
        _seq, msg = lowest
        copy = msg.copy()
        hdr = msg.get_header(self.id)
        copy.put_header(self.id, UnicastHeader(DATA, hdr.seqno, hdr.conn_id, True))
        self.down_prot.down_msg(copy)

    def _send_first_seqno_request(self, dest) -> None:
        self.counters["first_seqno_requests_sent"] += 1
        req = Message(dest, None, None, OOB)
        req.put_header(self.id, UnicastHeader(SEND_FIRST_SEQNO))
        self.down_prot.down_msg(req)

    def _send_ack(self, dest, seq: int) -> None:
        if self.disconnected:
            return
        ack = Message(dest)
        ack.put_header(self.id, UnicastHeader(ACK, seq))
        self.counters["acks_sent"] += 1
        self.down_prot.down_msg(ack)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self.members = list(evt.arg.members or ())
            keep = frozenset(self.members)
            with self.lock:
                # what we delivered from a member that left is acked before its window goes (2.12 acks at once,
                # so its sender never waits for an ACK that went with the window and retransmits to us)
                owed = [(a, p[0]) for a, p in self.pending_acks.items() if a not in keep]
                for table in (self.send_table, self.recv_table, self.pending_acks):
                    for addr in [a for a in table if a not in keep]:
                        del table[addr]
                self._nonmember_sends.clear()
                self.set_members(keep)
            for sender, seq in owed:
                self._send_ack(sender, seq)
        elif t == EventType.CONNECT:
            self.disconnected = False
        elif t == EventType.DISCONNECT:
            self._send_delayed_acks()            # the senders need not retransmit to us
            self.disconnected = True
        return self.down_prot.down(evt)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        for k in ("msgs_sent", "acks_piggybacked", "msgs_received", "acks_received", "duplicates",
                  "dropped_unknown_conn", "dropped_bad_seqno", "dropped_nonmember_window", "nonmembers_evicted"):
            d[k] = getattr(self, k)
        with self.lock:
            d["unacked"] = sum(e.win.size for e in self.send_table.values())
            d["in_recv_windows"] = sum(r.win.size for r in self.recv_table.values())
            d["connections"] = sorted({str(a) for a in self.send_table} | {str(a) for a in self.recv_table})
            d["nonmember_recv_windows"] = len(self.nonmembers)
            d["nonmember_send_windows"] = len(self._nonmember_sends)
        return d
