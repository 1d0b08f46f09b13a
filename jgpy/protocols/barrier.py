"""BARRIER: hold back multicast messages while closed (``org.jgroups.protocols.BARRIER``).

State transfer and flush close the barrier so that no multicast is delivered while a digest and the
application state are taken, then open it. Java blocks the threads that carry messages; jgpy never
blocks a receive thread, so while closed it keeps the multicast messages (in arrival order) and passes
them up when the barrier opens (NAKACK restores per-sender order anyway). Unicasts always pass. No
header, nothing on the wire. What a closed barrier holds is bounded (``max_held_bytes``): BARRIER sits below
NAKACK, so a multicast dropped here is one NAKACK has retransmitted, as if the network had lost it (a
stranger's multicasts, which NAKACK would drop anyway, cannot fill memory while the barrier is closed).
"""

from __future__ import annotations

import threading
from threading import get_ident
from typing import Any

from jgpy.protocols.guard import retained_bytes
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int, to_size
from jgpy.stack.protocol import UP_MULTICASTS, Protocol


class BARRIER(Protocol):
    NAME = "BARRIER"

    max_close_time = Property(to_int, 60000, "ms after which a closed barrier opens by itself (0: never)")
    max_held_bytes = Property(to_size, 64 << 20, "jgpy: bytes (of the datagrams they keep alive) of the multicasts "
                              "a closed barrier holds; later ones are dropped and retransmitted by NAKACK "
                              "(0: no limit)")

    def __init__(self) -> None:
        super().__init__()
        self._closed = False
        self._held: list = []
        self._held_bytes = 0
        self.dropped = 0                       # multicasts dropped while closed: max_held_bytes held already
        self._rl = RateLimitedLog(self.log)
        self._in_flight: dict[int, int] = {}   # thread id -> batches it is passing up right now
        self._lock = threading.Lock()          # a plain lock: taken twice per batch
        self._cond = threading.Condition(self._lock)
        self._opener = None

    @property
    def closed(self) -> bool:
        return self._closed

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.CLOSE_BARRIER:
            self.close_barrier()
            return None
        if evt.type == EventType.OPEN_BARRIER:
            self.open_barrier()
            return None
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.CLOSE_BARRIER:
            self.close_barrier()
            return None
        if evt.type == EventType.OPEN_BARRIER:
            self.open_barrier()
            return None
        return self.up_prot.up(evt)

    def up_needs(self) -> int:
        return UP_MULTICASTS                     # unicasts pass, uncounted, as in Java (JGRP-1341)

    def up_batch(self, msgs: list) -> None:
        me = get_ident()
        in_flight = self._in_flight
        with self._lock:
            if self._closed:
                passing = [m for m in msgs if m.dest is not None]     # unicasts pass (JGRP-1341)
                self._hold([m for m in msgs if m.dest is None])
                if not passing:
                    return
                msgs = passing
            in_flight[me] = in_flight.get(me, 0) + 1
        try:
            self.up_prot.up_batch(msgs)
        finally:
            with self._lock:
                n = in_flight.pop(me) - 1
                if n:
                    in_flight[me] = n
                elif self._closed:                               # close_barrier() may be waiting
                    self._cond.notify_all()

    def _hold(self, mcasts: list) -> None:
        """(lock held) Keep the multicasts of a batch until the barrier opens, within max_held_bytes."""
        if not mcasts:
            return
        size = retained_bytes(mcasts)
        if 0 < self.max_held_bytes < self._held_bytes + size:
            self.dropped += len(mcasts)
            self._rl.warning("held-full", "%s: the closed barrier holds %d bytes already: dropped %d multicast(s) "
                             "(NAKACK has them retransmitted)", self.local_addr, self._held_bytes, len(mcasts))
            return
        self._held_bytes += size
        self._held.extend(mcasts)

    def close_barrier(self, timeout: float = 5.0) -> None:
        """Close, then wait (bounded) until no batch is passing through any more, except in the calling thread
        (as Java's, which takes itself out of the in-flight threads): a thread that delivers a multicast batch
        it is itself passing up, and closes the barrier in the course of it, would wait for itself."""
        me = get_ident()
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.wait_for(lambda: not self._in_flight.keys() - {me}, timeout)
        if self.max_close_time > 0 and self.stack.timer is not None:
            self._opener = self.timer.schedule(self.max_close_time, self._auto_open, "barrier opener")

    def _auto_open(self) -> None:
        if self._closed:
            self.log.warning("%s: the barrier was closed for %d ms: opening it", self.local_addr, self.max_close_time)
            self.open_barrier()

    def open_barrier(self) -> None:
        with self._cond:
            if not self._closed:
                return
            self._closed = False
            held, self._held = self._held, []
            self._held_bytes = 0
        if self._opener is not None:
            self._opener.cancel()
            self._opener = None
        if held:
            self.up_prot.up_batch(held)

    def stop(self) -> None:
        self.open_barrier()

    def dump_stats(self) -> dict[str, Any]:
        return {"closed": self._closed, "held": len(self._held), "held_bytes": self._held_bytes,
                "dropped": self.dropped}
