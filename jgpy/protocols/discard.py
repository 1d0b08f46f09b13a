"""DISCARD: drop messages on purpose, for tests (``org.jgroups.protocols.DISCARD``).

``up``/``down`` are loss probabilities (0..1) for received/sent messages, sparing our own unless
``excludeItself=false`` (as in Java, where every sent message is our own: ``down`` only drops with
``excludeItself=false``); ``discard_all`` drops everything received from others and sends nothing to the
network (our own multicasts and unicasts to ourselves are still looped back, as in Java); messages received
from ``ignored`` members are always dropped (partitions). As in Java, a view change forgets ignored members that
are not in the new view. Counters say how much was dropped. Place it right above the transport.
"""

from __future__ import annotations

import random
import threading
from typing import Any

from jgpy.stack.properties import Property, to_bool, to_float, to_int
from jgpy.stack.events import EventType
from jgpy.stack.protocol import Protocol


class DISCARD(Protocol):
    NAME = "DISCARD"

    up_loss = Property(to_float, 0.0, "probability of dropping a received message", name="up")
    down_loss = Property(to_float, 0.0, "probability of dropping a sent message", name="down")
    excludeItself = Property(to_bool, True, "never drop our own messages")   # noqa: N815 - the JGroups name
    discard_all = Property(to_bool, False, "drop every message received from another member")
    drop_down_unicasts = Property(to_int, 0, "drop the next N unicasts sent")
    drop_down_multicasts = Property(to_int, 0, "drop the next N multicasts sent")
    use_gui = Property(to_bool, False, "(Java's Swing dialog; jgpy has none: ignored)", name="gui",
                       aliases=("use_gui",))

    def __init__(self) -> None:
        super().__init__()
        self.ignored: set = set()
        self._rnd = random.Random()
        self._lock = threading.Lock()
        self.num_up = 0
        self.num_down = 0

    def set_ignored(self, members) -> None:
        """Drop everything from these members (a partition)."""
        with self._lock:
            self.ignored = set(members)

    def up_batch(self, msgs: list) -> None:
        me = self.local_addr
        keep = []
        rate = self.up_loss
        for m in msgs:
            src = m.src
            if src != me or not self.excludeItself:
                if self.discard_all and src != me:
                    self.num_up += 1
                    continue
                if src in self.ignored or (rate > 0 and self._rnd.random() < rate):
                    self.num_up += 1
                    continue
            keep.append(m)
        if keep:
            self.up_prot.up_batch(keep)

    def down(self, evt) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            members = set(evt.arg.members or ())
            with self._lock:
                self.ignored = {m for m in self.ignored if m in members}
        return self.down_prot.down(evt)

    def down_msg(self, msg) -> Any:
        if self.discard_all:
            dest, me = msg.dest, self.local_addr
            if dest is None or dest == me:
                copy = msg.copy()
                if copy.src is None:
                    copy.src = me
                self.up_prot.up_batch([copy])
            self.num_down += 1
            return None
        rate = self.down_loss
        if msg.dest is None and self.drop_down_multicasts > 0:
            self.drop_down_multicasts -= 1
            self.num_down += 1
            return None
        if msg.dest is not None and self.drop_down_unicasts > 0:
            self.drop_down_unicasts -= 1
            self.num_down += 1
            return None
        # as in Java, the down loss spares our own messages while excludeItself is set: everything sent here is
        # ours, so a lossy sender needs excludeItself=false
        if rate > 0 and not self.excludeItself and self._rnd.random() < rate:
            self.num_down += 1
            return None
        return self.down_prot.down_msg(msg)

    def dump_stats(self) -> dict[str, Any]:
        return {"num_up": self.num_up, "num_down": self.num_down}

