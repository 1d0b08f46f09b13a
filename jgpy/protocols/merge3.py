"""MERGE3: merging by coordinator announcements (``org.jgroups.protocols.MERGE3`` of 2.12).

Every coordinator multicasts its view (a CoordAnnouncement header, no payload) every ``min_interval`` to
``max_interval`` ms, at random. A coordinator that hears an announcement of a view other than its own (another
id or another coordinator: ``Util.sameViewId``) sends a MERGE event up with both views, and GMS merges them as it
merges MERGE2's findings. Non-coordinators ignore announcements.

jgpy bounds what announcements can make it do (2.12 acts on each one): an announcement is only believed from
the coordinator of the view it names, at most one MERGE leaves per ``min_interval``, and an announcement without
a view or with an empty one is counted and dropped.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from jgpy._core.headers import CoordAnnouncement
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol


def same_view_id(a, b) -> bool:
    """2.12's ``Util.sameViewId``: same id and same coordinator."""
    return a is not None and b is not None and a.id == b.id and a.coord_addr == b.coord_addr


class MERGE3(Protocol):
    NAME = "MERGE3"

    min_interval = Property(to_int, 5000, "ms, at least, between two announcements of a coordinator")
    max_interval = Property(to_int, 20000, "ms, at most, between two announcements of a coordinator")
    DEPRECATED_PROPERTIES = ("use_separate_thread",)

    def __init__(self) -> None:
        super().__init__()
        self.view = None
        self.is_coord = False
        self._task: Any = None
        self._lock = threading.Lock()
        self._last_merge = 0.0
        self.counters = {"announcements_sent": 0, "announcements_received": 0, "merge_events": 0,
                         "merges_suppressed": 0, "dropped_bad": 0}
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a MERGE3 announcement", self._rl)

    def init(self) -> None:
        if self.min_interval <= 0 or self.max_interval <= 0:
            raise ConfigError("MERGE3: min_interval and max_interval have to be > 0")
        if self.max_interval <= self.min_interval:
            raise ConfigError("MERGE3: max_interval has to be greater than min_interval")

    def stop(self) -> None:
        self._stop_announcer()

    # ---- announcing ----

    def _interval_ms(self) -> float:
        return self.min_interval + random.uniform(0, self.max_interval - self.min_interval)

    def _start_announcer(self) -> None:
        with self._lock:
            if self._task is None and self.stack is not None and self.stack.timer is not None:
                self._task = self.timer.schedule(self._interval_ms(), self._announce, "MERGE3 announcer")

    def _stop_announcer(self) -> None:
        with self._lock:
            task, self._task = self._task, None
        if task is not None:
            task.cancel()

    def _announce(self) -> None:
        with self._lock:
            if self._task is None:
                return
            self._task = None
        if not self.is_coord:
            return
        try:
            self.send_view()
        finally:
            if self.is_coord:
                self._start_announcer()

    def send_view(self) -> None:
        """2.12's sendView: our view to everybody."""
        view = self.view
        if view is None:
            return
        m = Message(None, None, None)
        m.put_header(self.id, CoordAnnouncement(view))
        self.counters["announcements_sent"] += 1
        self.down_prot.down_msg(m)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            ret = self.down_prot.down(evt)
            self.view = evt.arg
            mbrs = list(evt.arg.members or ())
            coord = bool(mbrs) and mbrs[0] == self.local_addr
            if coord and not self.is_coord:
                self.is_coord = True
                self._start_announcer()
            elif not coord and self.is_coord:
                self.is_coord = False
                self._stop_announcer()
            return ret
        return self.down_prot.down(evt)

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self._handle)

    def _handle(self, msg: Message) -> None:
        self.counters["announcements_received"] += 1
        other = msg.get_header(self.id).view
        if other is None or not other.members or other.vid is None or msg.src is None \
                or other.vid.coord_addr != msg.src:
            self.counters["dropped_bad"] += 1
            self._rl.warning("bad", "%s: dropped an announcement from %s that does not name it as the coordinator "
                             "of the view it announces", self.local_addr, msg.src)
            return
        view = self.view
        if not self.is_coord or view is None or same_view_id(other.vid, view.vid):
            return
        now = time.monotonic()
        if now - self._last_merge < self.min_interval / 1000.0:
            self.counters["merges_suppressed"] += 1
            return
        self._last_merge = now
        self.counters["merge_events"] += 1
        self.log.debug("%s: detected different views (%s, %s), sending up MERGE", self.local_addr, view.vid,
                       other.vid)
        self.up_prot.up(Event(EventType.MERGE, {self.local_addr: view, msg.src: other}))

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, is_coord=self.is_coord, failed_msgs=self._guard.failed)
