"""MERGEFAST: merging on the first message from another coordinator (``org.jgroups.protocols.MERGEFAST``).

A coordinator attaches its view (a MergefastHeader) to every multicast it sends. A coordinator that receives
a message carrying a view other than its own (another id or another creator: ``Util.sameViewId``) passes the
message up, then sends a MERGE event up with both views (``{us: our view, sender: its view}``), and GMS
merges them as it merges MERGE2's findings. Non-coordinators pass everything up and act on nothing. MERGEFAST
has no properties in 2.12 and sends nothing of its own: a healed partition merges at the next multicast of
either coordinator (an application message, an FD_ALL heartbeat, a STABLE gossip).

Differences from Java (2.12 acts on every such message it receives), so that what reaches this protocol
from outside stays bounded:

* a header is believed only from the member it names as coordinator (the first member of its view: the
  only one that attaches it) and never from ourselves (a multicast of ours sent before a view change and
  looped back after it would make Java merge us with our own old view); a header without a view, a view id
  or members is counted and dropped (Java fails on it with a NullPointerException);
* a view we replaced since (one we created, or a subgroup merged into our view, carried by a message sent
  or retransmitted before the merge by a member now in our view) is stale, as MERGE2's
  :func:`~jgpy.protocols.merge2.drop_stale_views` decides, and starts no merge;
* at most one MERGE goes up per ``min_merge_interval`` ms, however many messages or senders show other views
  (GMS merges one at a time, and 2.12's own flood of MERGE events is rejected by its merge-in-progress check).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from jgpy._core.headers import MergefastHeader
from jgpy._core.types import MergeView
from jgpy.protocols.guard import MessageGuard
from jgpy.protocols.merge2 import different_views, drop_stale_views
from jgpy.protocols.merge3 import same_view_id
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.timer import now_ms


class MERGEFAST(Protocol):
    NAME = "MERGEFAST"

    min_merge_interval = Property(to_int, 2000, "jgpy: ms, at least, between two MERGE events this protocol "
                                  "sends up (2.12 sends one for every message from another coordinator)")

    #: how many merged subgroup view ids are remembered (messages sent before a merge may still arrive)
    MERGED_VIEWS_KEPT = 64

    def __init__(self) -> None:
        super().__init__()
        self.view = None
        self.is_coord = False
        self._header: MergefastHeader | None = None     # our view's header, shared by every multicast we send
        self._lock = threading.Lock()
        self._last_merge: float | None = None
        self.merged_views: deque = deque(maxlen=self.MERGED_VIEWS_KEPT)
        self.counters = {"headers_sent": 0, "headers_received": 0, "merge_events": 0, "merges_suppressed": 0,
                         "stale_views": 0, "dropped_bad": 0}
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a MERGEFAST header", self._rl)

    def stop(self) -> None:
        self.is_coord = False
        self._header = None

    # ---- down: our view on every multicast while we coordinate ----

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self._view_change(evt.arg)
        return self.down_prot.down(evt)

    def _view_change(self, view) -> None:
        if isinstance(view, MergeView):
            self.merged_views.extend(v.vid for v in view.subgroups or () if v.vid is not None)
        mbrs = view.members or ()
        me = self.local_addr
        self.view = view
        self.is_coord = bool(mbrs) and me is not None and mbrs[0] == me
        self._header = MergefastHeader(view) if self.is_coord else None

    def down_msg(self, msg) -> Any:
        hdr = self._header
        if hdr is not None and msg.dest is None:
            msg.put_header(self.id, hdr)
            self.counters["headers_sent"] += 1
        return self.down_prot.down_msg(msg)

    # ---- up: another coordinator's view ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        found: list = []
        if self.is_coord:
            mine, _ = self.split_mine(msgs)
            self._guard.each(mine, lambda m: found.append((m.src, m.get_header(self.id).view)))
        self.up_prot.up_batch(msgs)                     # as Java: the message first, then the MERGE
        for src, other in found:
            try:
                self._check(src, other)
            except Exception:  # noqa: BLE001 - one bad header must not hurt the others
                self._guard.failed += 1
                self._rl.exception("check-failed", "%s: failed handling a MERGEFAST header from %s",
                                   self.local_addr, src)

    def _check(self, src, other) -> None:
        self.counters["headers_received"] += 1
        me = self.local_addr
        if src is None or src == me:
            return
        if other is None or other.vid is None or not other.members or other.members[0] != src:
            self.counters["dropped_bad"] += 1
            self._rl.warning("bad", "%s: dropped a MERGEFAST header from %s that does not name it as the "
                             "coordinator of the view it carries", me, src)
            return
        view = self.view
        if not self.is_coord or view is None or same_view_id(other.vid, view.vid):
            return
        views = {me: view, src: other}
        drop_stale_views(views, me, view, tuple(self.merged_views))
        if len(different_views(views)) <= 1:
            self.counters["stale_views"] += 1
            return
        now = now_ms()
        with self._lock:
            if self._last_merge is not None and now - self._last_merge < self.min_merge_interval:
                self.counters["merges_suppressed"] += 1
                return
            self._last_merge = now
        self.counters["merge_events"] += 1
        self.log.debug("%s: detected different views (%s, %s), sending up MERGE", me, view.vid, other.vid)
        self.up_prot.up(Event(EventType.MERGE, views))

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, is_coord=self.is_coord, failed_msgs=self._guard.failed)
