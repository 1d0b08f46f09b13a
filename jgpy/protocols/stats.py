"""STATS: counts the messages and bytes passing it, sent and received, unicast and multicast, in all and per
peer (``org.jgroups.protocols.STATS`` of 2.12; ``dump_stats`` and :meth:`STATS.print_stats`). The per-peer
tables keep the view's members and the group; other peers (strangers too, where STATS sits low) share at most
``MAX_PEERS`` entries, the oldest dropped first (2.12 keeps one entry per sender until the next view)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from jgpy.stack.events import Event, EventType
from jgpy.stack.protocol import Protocol

MAX_PEERS = 1000
_NAMES = ("sent_msgs", "sent_bytes", "sent_ucasts", "sent_ucast_bytes", "sent_mcasts", "sent_mcast_bytes",
          "received_msgs", "received_bytes", "received_ucasts", "received_ucast_bytes", "received_mcasts",
          "received_mcast_bytes")


class STATS(Protocol):
    NAME = "STATS"

    def __init__(self) -> None:
        super().__init__()
        self.counters = dict.fromkeys(_NAMES, 0)
        self.sent: OrderedDict[Any, list[int]] = OrderedDict()      # dest (None: the group) -> [msgs, bytes]
        self.received: OrderedDict[Any, list[int]] = OrderedDict()  # src -> [msgs, bytes]
        self.members: frozenset = frozenset()

    def reset_stats(self) -> None:
        self.counters = dict.fromkeys(_NAMES, 0)
        self.sent.clear()
        self.received.clear()

    def _count(self, table: OrderedDict, key: Any, length: int) -> None:
        entry = table.get(key)
        if entry is None:
            if len(table) >= MAX_PEERS + len(self.members) + 1:
                for k in table:                         # the oldest one that is not a member (or the group)
                    if k is not None and k not in self.members:
                        del table[k]
                        break
            entry = table[key] = [0, 0]
        entry[0] += 1
        entry[1] += length

    def _update(self, msg, direction: str) -> None:
        c, n = self.counters, msg.length
        kind = "mcast" if msg.dest is None else "ucast"
        c[f"{direction}_msgs"] += 1
        c[f"{direction}_bytes"] += n
        c[f"{direction}_{kind}s"] += 1
        c[f"{direction}_{kind}_bytes"] += n
        if direction == "sent":
            self._count(self.sent, msg.dest, n)
        else:
            self._count(self.received, msg.src, n)

    def down_msg(self, msg) -> Any:
        self._update(msg, "sent")
        return self.down_prot.down_msg(msg)

    def up_batch(self, msgs: list) -> None:
        for msg in msgs:
            self._update(msg, "received")
        self.up_prot.up_batch(msgs)

    def _view(self, view) -> None:
        self.members = frozenset(view.members or ())
        keep = self.members | {None}
        for table in (self.sent, self.received):
            for k in [k for k in table if k not in keep]:
                del table[k]

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._view(evt.arg)
        return self.up_prot.up(evt)

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._view(evt.arg)
        return self.down_prot.down(evt)

    def print_stats(self) -> str:
        """2.12's printStats: per peer, what was sent to it and received from it."""
        lines = ["sent:"] + [f"{'<mcast dest>' if k is None else k}: {v[0]} msgs, {v[1]} bytes"
                             for k, v in self.sent.items()]
        lines += ["", "received:"] + [f"{k}: {v[0]} msgs, {v[1]} bytes" for k, v in self.received.items()]
        return "\n".join(lines)

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, peers_sent=len(self.sent), peers_received=len(self.received))
