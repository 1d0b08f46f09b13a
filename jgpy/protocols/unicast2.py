"""UNICAST2: reliable, FIFO unicast with negative acknowledgements (``org.jgroups.protocols.UNICAST2``, 2.12).

Per peer, the sender numbers messages from 1 on a connection (``conn_id``; the first message says ``first``)
and keeps them until the receiver declares them stable. The receiver creates its window on a first message
only; a message on a connection it does not know makes it ask for the first one (SEND_FIRST_SEQNO, carrying the
seqno received: the sender resends its lowest kept message marked ``first`` and what follows up to that seqno).
The receiver asks for gaps (XMIT_REQ low..high, on the ``timeout`` schedule of each missing range) and, every
``stable_interval`` ms and after ``max_bytes`` received from a sender, sends that sender a STABLE (highest
delivered, highest received): the sender drops what was delivered and resends what follows the highest received
(how a lost last message is found; at most ``max_stable_msgs`` STABLEs go out for the same highest received).
A member that leaves the view gets a last STABLE and its connections go.

The per-message work of both directions is the C core this class derives from (``Unicast2Core``,
``jgpy/_core/unicast2.pyx``; the windows are ``AckSenderWindow`` and ``NakReceiverWindow`` of
``jgpy/_core/tables.pyx``): this module keeps the connections' life cycle, the answers to XMIT_REQ, STABLE and
SEND_FIRST_SEQNO, the retransmission and stability timers and logging.

Where jgpy deviates from 2.12, and why:

* ``timeout`` is the receive windows' XMIT_REQ schedule. 2.12 accepts it but its windows always use their
  retransmitter's default (300, 600, 1200, 2400 ms); udp-largecluster.xml sets 300,600,1200.
* Answers are bounded: an XMIT_REQ or SEND_FIRST_SEQNO is answered with what the send window holds in the range
  asked for, at most ``max_xmit_req_size`` messages (2.12 walks every seqno of the range, absurd or not), and we
  ask for at most as many seqnos per sender and round. A STABLE cannot purge beyond the highest seqno we sent,
  and its resend starts after the highest seqno the receiver has (2.12 resends that one too).
* Non-members (a joiner's JOIN_REQ travels over UNICAST2, and so do merge messages) are bounded as in UNICAST:
  at most ``max_nonmember_connections`` receive windows (least recently used goes), each taking seqnos less
  than ``nonmember_window`` ahead of the next one to deliver; a later one is dropped and answered with a
  STABLE, so the sender resends what follows what we hold. Idle ones expire after ``max_retransmit_time``;
  send windows to non-members are capped likewise (2.12 keeps them ``max_retransmit_time`` ms, unbounded in
  number).
* A receiver asks a sender for its first message at most once per first ``timeout`` (2.12: for every message
  that arrives on a connection it does not know, each answered with everything from the first message on).
* XMIT_REQ, STABLE and SEND_FIRST_SEQNO from peers we have no send connection to are counted and dropped
  (2.12 ignores the first two and logs an error for the third).
"""

from __future__ import annotations

import time
from typing import Any

from jgpy._core.headers import Unicast2Header
from jgpy._core.message import Message
from jgpy._core.tables import AckSenderWindow
from jgpy._core.unicast2 import Unicast2Core, Unicast2Sender
from jgpy.errors import ConfigError
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, ignored, to_int, to_longs, to_size
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms

DATA, XMIT_REQ = Unicast2Header.DATA, Unicast2Header.XMIT_REQ
SEND_FIRST_SEQNO, STABLE = Unicast2Header.SEND_FIRST_SEQNO, Unicast2Header.STABLE
OOB = Message.OOB
_EXPERT = "jgpy's windows grow and shrink by pages of seqnos (jgpy/_core/tables.pyx)"
MAX_FIRST_ASKS = 1024      # senders with an unanswered SEND_FIRST_SEQNO we remember (the oldest go first)
FIRST_ASK_TRIES = 8        # times one is sent again when neither the sender's messages nor its answer arrive


class _FirstAsk:
    """A SEND_FIRST_SEQNO not yet answered: the unknown connection, the highest seqno seen on it, when it was
    last sent and how often since the sender's last message."""

    __slots__ = ("conn_id", "seqno", "last", "tries")

    def __init__(self, conn_id: int) -> None:
        self.conn_id = conn_id
        self.seqno = 0
        self.last: float | None = None
        self.tries = 0


class UNICAST2(Unicast2Core, Protocol):
    NAME = "UNICAST2"

    timeout = Property(to_longs, [400, 800, 1600, 3200], "retransmission schedule (ms) of a missing range: when "
                       "XMIT_REQs for it go to its sender (the last value repeats; 2.12 declares it, its windows use "
                       "300,600,1200,2400)")
    max_msg_batch_size = CoreProperty(to_int, 50000, "max messages removed from a receive window in one go")
    max_bytes = CoreProperty(to_size, 10000000, "bytes received from a sender after which it is sent a STABLE")
    stable_interval = Property(to_int, 60000, "ms between the STABLE messages to every sender (0: none)")
    max_stable_msgs = Property(to_int, 5, "STABLE messages sent for the same highest received seqno (>= 1)")
    max_retransmit_time = Property(to_int, 60000, "ms after which a connection to a non-member is removed "
                                   "(0: never)")
    xmit_tick = Property(to_int, 0, "jgpy: ms between checks for due XMIT_REQs (0: a quarter of the first "
                         "timeout)")
    max_xmit_req_size = Property(to_int, 8192, "jgpy: seqnos asked for per sender and round, and messages one "
                                 "XMIT_REQ, SEND_FIRST_SEQNO or STABLE is answered with at most (0: no limit)")
    max_nonmember_connections = CoreProperty(to_int, 64, "jgpy: receive windows, and send windows, kept for peers "
                                             "that are not in the view (joiners, other partitions, strangers): the "
                                             "least recently used goes beyond (0: no limit)")
    nonmember_window = CoreProperty(to_int, 8, "jgpy: seqnos ahead of the next one to deliver that the receive "
                                    "window of a peer not in the view takes (later ones are dropped and answered "
                                    "with a STABLE, so the sender resends them)")

    IGNORED_PROPERTIES = {
        "xmit_table_num_rows": ignored(_EXPERT),
        "xmit_table_msgs_per_row": ignored(_EXPERT),
        "xmit_table_resize_factor": ignored(_EXPERT),
        "xmit_table_max_compaction_time": ignored(_EXPERT),
        "xmit_table_automatic_purging": ignored(_EXPERT),
        "use_range_based_retransmitter": ignored("jgpy's retransmitter is range based"),
    }

    # the core's fields (jgpy/_core/unicast2.pxd), guarded by `lock`: send_table (dest -> Unicast2Sender),
    # recv_table (sender -> Unicast2Receiver), nonmembers, member_set; started, xmit_timeouts, counters

    def __init__(self) -> None:
        super().__init__()
        self.members: list = []
        self._last_conn_id = 0
        self._tasks: list = []
        self._rl = RateLimitedLog(self.log)
        self._nonmember_sends: dict = {}           # dest -> None: send connections to non-members, oldest first
        self._first_asked: dict = {}               # sender -> _FirstAsk: SEND_FIRST_SEQNOs not yet answered
        self.counters = dict.fromkeys((
            "xmit_reqs_sent", "xmit_reqs_received", "xmit_reqs_unknown", "xmits", "xmit_not_found",
            "stables_sent", "stables_received", "stables_unknown", "first_seqno_requests_sent",
            "first_seqno_requests_suppressed", "first_seqno_requests_received", "first_seqno_requests_unknown",
            "first_seqno_requests_abandoned", "nonmember_sends_evicted",
            "nonmembers_expired", "events_failed"), 0)

    def init(self) -> None:
        super().init()
        if self.max_stable_msgs < 1:
            raise ConfigError(f"UNICAST2: max_stable_msgs must be > 0 (is {self.max_stable_msgs})")
        if self.max_bytes <= 0:
            raise ConfigError(f"UNICAST2: max_bytes must be > 0 (is {self.max_bytes})")

    def start(self) -> None:
        self.xmit_timeouts = list(self.timeout)
        self.delivery = self.stack.delivery
        self.started = True
        tick = self.xmit_tick or max(20, min(self.timeout) // 4)
        self._tasks = [self.timer.schedule_with_fixed_delay(tick, tick, self._tick, "UNICAST2 xmit")]
        if self.stable_interval > 0:
            self._tasks.append(self.timer.schedule_with_fixed_delay(
                self.stable_interval, self.stable_interval, self.send_stable_messages, "UNICAST2 stable"))

    def stop(self) -> None:
        self.started = False
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        self.remove_all_connections()
        self.delivery = None
        with self.lock:
            self.set_members(())

    def _new_conn_id(self) -> int:
        cid = self._last_conn_id
        self._last_conn_id = 0 if cid >= 32767 else cid + 1
        return cid

    # ---- sending ----
    # down_msg: the core numbers the message on its connection, adds the header and keeps it until stable

    def _new_connection(self, dest) -> Unicast2Sender:
        """(the core, lock held) The first message to ``dest``: a new connection; those to non-members are
        capped (``max_nonmember_connections``: the oldest goes)."""
        if dest not in self.member_set:
            while 0 < self.max_nonmember_connections <= len(self._nonmember_sends):
                old = next(iter(self._nonmember_sends))
                del self._nonmember_sends[old]
                self.send_table.pop(old, None)
                self.counters["nonmember_sends_evicted"] += 1
            self._nonmember_sends[dest] = None
        conn = self.send_table[dest] = Unicast2Sender(self._new_conn_id(), AckSenderWindow(), time.monotonic())
        return conn

    def _not_started(self, msg: Message) -> None:
        self.log.debug("%s: dropped a unicast to %s: UNICAST2 is not started", self.local_addr, msg.dest)

    def _send(self, dest, hdr: Unicast2Header, flags: int = 0) -> None:
        msg = Message(dest, None, None, flags)
        msg.put_header(self.id, hdr)
        self.down_prot.down_msg(msg)

    def _resend(self, msgs: list) -> None:
        self.counters["xmits"] += len(msgs)
        for msg in msgs:
            self.down_prot.down_msg(msg)

    def _kept(self, win: AckSenderWindow, first: int, last: int, count_missing: bool = False) -> list:
        """(lock held) The messages of win in [first, last], at most max_xmit_req_size of them (with
        count_missing, those of the seqnos looked at that are not there are counted: xmit_not_found)."""
        first = max(first, win.lowest_seqno)
        last = min(last, win.highest)
        if self.max_xmit_req_size > 0:
            last = min(last, first + self.max_xmit_req_size - 1)
        found = [m for m in (win.get(s) for s in range(first, last + 1)) if m is not None]
        if count_missing and last >= first:
            self.counters["xmit_not_found"] += last - first + 1 - len(found)
        return found

    # ---- receiving ----

    def up_needs(self) -> int:
        return UP_HEADER

    # up_batch: the core fills the windows and hands the deliverable runs over in order; the rest comes here:

    def _handle_events(self, events: list) -> None:
        asked: dict = {}
        nudge: dict = {}
        for what, sender, x, y in events:
            try:
                if what == "no_connection":          # once per batch: the sender resends up to the highest
                    asked[sender] = (max(x, asked[sender][0]) if sender in asked else x, y)
                elif what == "xmit_req":
                    self._handle_xmit_req(sender, x, y)
                elif what == "stable":
                    self._handle_stable(sender, x, y)
                elif what == "send_first_seqno":
                    self._resend_first(sender, x)
                elif what in ("stable_due", "window_full"):
                    nudge[sender] = None
                elif what == "bad_seqno":
                    self._rl.warning("bad-seqno", "%s: dropped a unicast from %s: %s", self.local_addr, sender, x)
                else:
                    self._rl.error("bad-type", "Unicast2Header type %s not known", x)
            except Exception:  # noqa: BLE001 - one failure must not hurt the rest of the batch
                self.counters["events_failed"] += 1
                self._rl.exception("event-failed", "%s: failed handling %s from %s", self.local_addr, what, sender)
        for sender, (seqno, conn_id) in asked.items():
            self._ask_first(sender, seqno, conn_id)
        for sender in nudge:
            self._send_stable_to(sender)

    def _ask_first(self, sender, seqno: int, conn_id: int) -> None:
        """SEND_FIRST_SEQNO to sender, at most once per first timeout: every request makes it resend everything
        from its first kept message on (2.12 asks for every message received on an unknown connection, a
        storm that grows with the square of the messages in flight). The request is remembered until the
        connection opens: `_tick` asks again if neither it nor its answer's first message arrived."""
        now = time.monotonic()
        with self.lock:
            asked = self._first_asked
            ask = asked.pop(sender, None)
            if ask is None or ask.conn_id != conn_id:
                ask = _FirstAsk(conn_id)
            asked[sender] = ask                      # newest last: the oldest go first when it is full
            while len(asked) > MAX_FIRST_ASKS:
                del asked[next(iter(asked))]
            ask.seqno = max(ask.seqno, seqno)
            ask.tries = 0                            # the sender is alive: it keeps sending
            if ask.last is not None and (now - ask.last) * 1000 < self.timeout[0]:
                self.counters["first_seqno_requests_suppressed"] += 1
                return
            ask.last = now
        self.counters["first_seqno_requests_sent"] += 1
        self._send(sender, Unicast2Header(SEND_FIRST_SEQNO, ask.seqno), OOB)

    def _first_asks_due(self, now: float) -> list:
        """(sender, seqno) of the SEND_FIRST_SEQNOs to send again (the caller holds ``lock``): for connections
        still unknown, one per timeout (backing off along ``timeout``), at most FIRST_ASK_TRIES times after the
        sender's last message; answered ones (the connection is open) are forgotten."""
        due, done = [], []
        for sender, ask in self._first_asked.items():
            r = self.recv_table.get(sender)
            if r is not None and r.conn_id == ask.conn_id:
                done.append(sender)
            elif (now - ask.last) * 1000 >= self.timeout[min(ask.tries, len(self.timeout) - 1)]:
                if ask.tries >= FIRST_ASK_TRIES:
                    done.append(sender)
                    self.counters["first_seqno_requests_abandoned"] += 1
                else:
                    ask.tries += 1
                    ask.last = now
                    due.append((sender, ask.seqno))
        for sender in done:
            del self._first_asked[sender]
        return due

    def _handle_xmit_req(self, sender, low: int, high: int) -> None:
        self.counters["xmit_reqs_received"] += 1
        with self.lock:
            conn = self.send_table.get(sender)
            if conn is None:
                self.counters["xmit_reqs_unknown"] += 1
                return
            found = self._kept(conn.win, low, high, count_missing=True)
        self._resend(found)

    def _handle_stable(self, sender, highest_delivered: int, highest_received: int) -> None:
        """Purge what the receiver delivered; resend what follows the highest it received."""
        self.counters["stables_received"] += 1
        with self.lock:
            conn = self.send_table.get(sender)
            if conn is None:
                self.counters["stables_unknown"] += 1
                return
            win = conn.win
            win.ack(min(highest_delivered, win.highest))
            lost = self._kept(win, highest_received + 1, win.highest) if win.highest > highest_received else []
        self._resend(lost)

    def _resend_first(self, sender, seqno: int) -> None:
        """SEND_FIRST_SEQNO: our lowest kept message to sender again, marked first, then what follows up to
        seqno."""
        self.counters["first_seqno_requests_received"] += 1
        with self.lock:
            conn = self.send_table.get(sender)
            lowest = conn.win.lowest() if conn is not None else None
            rest = self._kept(conn.win, lowest[0] + 1, seqno) if lowest is not None else []
        if lowest is None:
            if conn is None:
                self.counters["first_seqno_requests_unknown"] += 1
                self._rl.warning("no-sender", "%s: SEND_FIRST_SEQNO from %s: no connection to it", self.local_addr,
                                 sender)
            return
        seq, msg = lowest
        copy = msg.copy()
        hdr = msg.get_header(self.id)
        copy.put_header(self.id, Unicast2Header(DATA, seq, 0, hdr.conn_id, True))
        self._resend([copy] + rest)

    # ---- retransmission and stability ----

    def _tick(self) -> None:
        """Ask for the missing ranges that are due; expire connections to non-members."""
        now = now_ms()
        reqs = []
        expired = []
        with self.lock:
            for sender, r in self.recv_table.items():
                reqs += [(sender, first, last) for first, last in r.win.xmit_due(now, self.max_xmit_req_size)]
            firsts = self._first_asks_due(time.monotonic()) if self._first_asked else []
            if self.max_retransmit_time > 0:
                t = time.monotonic()
                expired = [d for d in self._nonmember_sends
                           if (t - self.send_table[d].created) * 1000 >= self.max_retransmit_time]
                for d in expired:
                    del self.send_table[d]
                    del self._nonmember_sends[d]
                self.counters["nonmembers_expired"] += len(self.expire_nonmembers(self.max_retransmit_time / 1000))
        for sender, first, last in reqs:
            self.counters["xmit_reqs_sent"] += 1
            self._send(sender, Unicast2Header(XMIT_REQ, first, last))
        for sender, seqno in firsts:
            self.counters["first_seqno_requests_sent"] += 1
            self._send(sender, Unicast2Header(SEND_FIRST_SEQNO, seqno), OOB)
        for d in expired:
            self.remove_connection(d)

    def send_stable_messages(self) -> None:
        """A STABLE to every sender (at most max_stable_msgs for the same highest received seqno)."""
        out = []
        with self.lock:
            for sender, r in self.recv_table.items():
                hd, hr = r.win.highest_delivered, r.win.highest_received
                if r.last_highest == hr:
                    if r.num_stable_msgs >= self.max_stable_msgs:
                        continue
                    r.num_stable_msgs += 1
                else:
                    r.last_highest, r.num_stable_msgs = hr, 1
                r.win.stable(hd)
                out.append((sender, hd, hr))
        for sender, hd, hr in out:
            self._send_stable(sender, hd, hr)

    def _send_stable_to(self, sender) -> None:
        with self.lock:
            r = self.recv_table.get(sender)
            if r is None:
                return
            hd, hr = r.win.highest_delivered, r.win.highest_received
            r.win.stable(hd)
        self._send_stable(sender, hd, hr)

    def _send_stable(self, dest, highest_delivered: int, highest_received: int) -> None:
        self.counters["stables_sent"] += 1
        self._send(dest, Unicast2Header(STABLE, highest_delivered, highest_received))

    def remove_connection(self, peer) -> None:
        """Drop both connections with peer; it gets a last STABLE for what we received from it."""
        with self.lock:
            self.send_table.pop(peer, None)
            self._nonmember_sends.pop(peer, None)
            r = self.drop_receiver(peer)
        if r is not None and self.started:
            self._send_stable(peer, r.win.highest_delivered, r.win.highest_received)

    def remove_all_connections(self) -> None:
        """Drop every connection; the senders get a last STABLE (as 2.12 does when it stops)."""
        try:
            self.send_stable_messages()
        except Exception:  # noqa: BLE001 - the transport may be gone already; the connections go anyway
            self.log.debug("%s: no last STABLE messages", self.local_addr, exc_info=True)
        with self.lock:
            self.send_table.clear()
            self.recv_table.clear()
            self.nonmembers.clear()
            self._nonmember_sends.clear()

    # ---- events ----

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.members = list(evt.arg.members or ())
            keep = frozenset(self.members)
            with self.lock:
                gone = [a for a in {*self.send_table, *self.recv_table} if a not in keep]
                for a in [a for a in self._nonmember_sends if a in keep]:
                    del self._nonmember_sends[a]
            for peer in gone:
                self.remove_connection(peer)
            with self.lock:
                self.set_members(keep)
        return self.down_prot.down(evt)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        for k in ("msgs_sent", "msgs_received", "bytes_received", "duplicates", "dropped_unknown_conn",
                  "dropped_bad_seqno", "dropped_nonmember_window", "nonmembers_evicted"):
            d[k] = getattr(self, k)
        with self.lock:
            d["in_send_windows"] = sum(c.win.size for c in self.send_table.values())
            d["in_recv_windows"] = sum(r.win.size for r in self.recv_table.values())
            d["missing"] = sum(r.win.pending_xmits for r in self.recv_table.values())
            d["connections"] = sorted({str(a) for a in self.send_table} | {str(a) for a in self.recv_table})
            d["nonmember_recv_windows"] = len(self.nonmembers)
            d["nonmember_send_windows"] = len(self._nonmember_sends)
        return d
