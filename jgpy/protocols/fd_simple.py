"""FD_SIMPLE: failure detection by asking a random member (``org.jgroups.protocols.FD_SIMPLE`` of 2.12).

While the view has more than one member, a round runs every ``interval`` ms: an ``ARE_YOU_ALIVE`` (a unicast
``FdSimpleHeader``) goes to a member picked at random (not ourselves), and after its ``I_AM_ALIVE`` or ``timeout`` ms,
whichever comes first, that member's counter goes up by one (a counter that did not exist starts at 0). Any message
from a member sets its counter to 0. A counter that reaches ``max_missed_hbs`` makes a ``SUSPECT`` go up (again
every round the member is picked, until a view without it comes down). Everybody answers an ``ARE_YOU_ALIVE``.
As in 2.12 the next round starts ``interval`` ms after the previous one ended, and the counter goes up after an
answer too (so an answering member stays at 1).

Where jgpy deviates from 2.12, and why: 2.12 blocks a timer thread for up to ``timeout`` ms each round; jgpy
schedules the end of the round instead (same timing). 2.12 makes a counter for every sender of any message;
jgpy keeps counters for view members only, so strangers cannot grow the table.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from jgpy._core.headers import FdSimpleHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int
from jgpy.stack.protocol import UP_EVERY, Protocol

ARE_YOU_ALIVE, I_AM_ALIVE = FdSimpleHeader.ARE_YOU_ALIVE, FdSimpleHeader.I_AM_ALIVE


class FD_SIMPLE(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FD_SIMPLE"

    interval = Property(to_int, 3000, "ms between the end of a round and the next ARE_YOU_ALIVE")
    timeout = Property(to_int, 3000, "ms to wait for the I_AM_ALIVE answer to an ARE_YOU_ALIVE")
    max_missed_hbs = Property(to_int, 5, "a member whose counter of missed answers reaches this is suspected")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._addr = None
        self._members: tuple = ()
        self._member_set: frozenset = frozenset()
        self.counters: dict[Any, int] = {}           # member -> missed answers (view members only)
        self._task = None                            # the next round, or the end of the current one
        self._round = 0                              # generation: a stale task or answer changes nothing
        self._dest = None                            # whom the current round asked
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an FD_SIMPLE message", self._rl)
        self.num_are_you_alive_sent = 0
        self.num_are_you_alive_received = 0
        self.num_i_am_alive_received = 0
        self.num_suspect_events = 0
        self.dropped_unknown_type = 0

    def init(self) -> None:
        if self.interval <= 0 or self.timeout <= 0 or self.max_missed_hbs < 1:
            raise ConfigError("FD_SIMPLE: interval and timeout must be > 0, max_missed_hbs >= 1")

    def stop(self) -> None:
        self._stop_rounds()
        with self._lock:
            self.counters.clear()

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
        elif t == EventType.VIEW_CHANGE:
            self._view_change(evt.arg)
        return self.down_prot.down(evt)

    def _view_change(self, view) -> None:
        mbrs = tuple(view.members or ()) if view is not None else ()
        with self._lock:
            self._members = mbrs
            self._member_set = frozenset(mbrs)
            for a in [a for a in self.counters if a not in self._member_set]:
                del self.counters[a]
        if len(mbrs) > 1:
            self._start_rounds()
        else:
            self._stop_rounds()

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_EVERY

    def up_batch(self, msgs: list) -> None:
        seen = set()
        for m in msgs:
            src = m.src
            if src not in seen:
                seen.add(src)
                self._reset(src)
        self._guard.each_mine(msgs, self._handle)

    def _handle(self, msg: Message) -> None:
        kind = msg.get_header(self.id).type
        sender = msg.src
        if kind == ARE_YOU_ALIVE:
            self.num_are_you_alive_received += 1
            if sender is not None:
                rsp = Message(sender)
                rsp.put_header(self.id, FdSimpleHeader(I_AM_ALIVE))
                self.down_prot.down_msg(rsp)
        elif kind == I_AM_ALIVE:
            self.num_i_am_alive_received += 1
            self._answered(sender)
        else:
            self.dropped_unknown_type += 1
            self._rl.warning("bad-type", "%s: dropped an FD_SIMPLE header of unknown type from %s", self.me, sender)

    def _reset(self, mbr) -> None:
        if mbr in self._member_set:
            with self._lock:
                if mbr in self._member_set:
                    self.counters[mbr] = 0

    # ---- rounds ----

    def _start_rounds(self) -> None:
        with self._lock:
            if self._task is not None:
                return
            self._schedule(self.interval, self._send_round)

    def _stop_rounds(self) -> None:
        with self._lock:
            task, self._task = self._task, None
            self._round += 1
            self._dest = None
        if task is not None:
            task.cancel()

    def _schedule(self, delay: float, fn) -> None:
        """The next step of the rounds (under ``_lock``)."""
        timer = self.stack.timer if self.stack is not None else None
        if timer is None:
            self._task = None
            return
        gen = self._round
        self._task = timer.schedule(delay, lambda: fn(gen), "FD_SIMPLE round")

    def _send_round(self, gen: int) -> None:
        me = self.me
        with self._lock:
            if gen != self._round or self._task is None:
                return
            others = [m for m in self._members if m != me]
            if not others:
                self._schedule(self.interval, self._send_round)
                return
            dest = self._dest = random.choice(others)
            self._round += 1
            self._schedule(self.timeout, self._end_round)
        msg = Message(dest)
        msg.put_header(self.id, FdSimpleHeader(ARE_YOU_ALIVE))
        self.num_are_you_alive_sent += 1
        self.down_prot.down_msg(msg)

    def _answered(self, sender) -> None:
        with self._lock:
            if sender is None or sender != self._dest or self._task is None:
                return
            task, gen = self._task, self._round
        task.cancel()
        self._end_round(gen)

    def _end_round(self, gen: int) -> None:
        with self._lock:
            if gen != self._round or self._task is None:
                return
            dest, self._dest = self._dest, None
            self._round += 1
            missed = None
            if dest in self._member_set:
                cnt = self.counters.get(dest)
                missed = self.counters[dest] = 0 if cnt is None else cnt + 1
            self._schedule(self.interval, self._send_round)
        if missed is not None and missed >= self.max_missed_hbs:
            self.log.info("%s: missed %d answers from %s, suspecting it", self.me, missed, dest)
            self.num_suspect_events += 1
            self.up_prot.up(Event(EventType.SUSPECT, dest))

    # ---- diagnostics ----

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            counters = {str(a): n for a, n in self.counters.items()}
        return {"num_are_you_alive_sent": self.num_are_you_alive_sent,
                "num_are_you_alive_received": self.num_are_you_alive_received,
                "num_i_am_alive_received": self.num_i_am_alive_received,
                "num_suspect_events": self.num_suspect_events, "dropped_unknown_type": self.dropped_unknown_type,
                "failed_msgs": self._guard.failed, "counters": counters}
