"""Discovery: find the members (and the coordinator) of a cluster (``org.jgroups.protocols.Discovery``).

A joiner sends GET_MBRS_REQ (OOB) with its PingData; every member answers with a unicast GET_MBRS_RSP
carrying its own PingData. Both sides learn logical name and physical address of the other, which is how
the transport knows where to send unicasts. MERGE2's FIND_ALL_VIEWS asks with a view id and gets views.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from jgpy._core.address import logical_name, set_logical_name
from jgpy._core.headers import PingHeader
from jgpy._core.message import Message
from jgpy._core.types import PingData, ViewId
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol


#: responses one discovery round keeps at most (made-up senders must not grow it without limit; 2.12: no limit)
MAX_RESPONSES = 4096


class Responses:
    """Collects discovery responses until enough arrived, a coordinator answered, or time ran out. One
    response per address (a later one from the address itself replaces it); at most ``max(MAX_RESPONSES,
    num_expected)`` addresses, the others are dropped and counted (``dropped``)."""

    def __init__(self, num_expected: int, num_expected_srv: int, break_on_coord: bool, promise=None):
        self.num_expected = num_expected
        self.num_expected_srv = num_expected_srv
        self.break_on_coord = break_on_coord
        self.promise = promise            # the join promise: a JOIN_RSP arriving ends discovery too
        self._rsps: dict = {}             # own_addr -> PingData, in arrival order
        self.max_rsps = max(MAX_RESPONSES, num_expected)
        self.dropped = 0
        self.cond = threading.Condition()

    @property
    def rsps(self) -> list[PingData]:
        with self.cond:
            return list(self._rsps.values())

    def add(self, rsp: PingData, overwrite: bool) -> None:
        key = rsp.own_addr
        with self.cond:
            old = self._rsps.get(key)
            if old is not None:
                if overwrite:
                    del self._rsps[key]           # the address itself answered: its answer goes last, as 2.12
                elif not (rsp.is_coord and not old.is_coord):
                    return
            elif len(self._rsps) >= self.max_rsps:
                self.dropped += 1
                return
            self._rsps[key] = rsp
            self.cond.notify_all()

    def _done(self) -> bool:
        if self.promise is not None and self.promise.has_result():
            return True
        rsps = self._rsps.values()
        if len(rsps) >= self.num_expected > 0:
            return True
        if self.num_expected_srv > 0 and sum(1 for r in rsps if r.is_server) >= self.num_expected_srv:
            return True
        return self.break_on_coord and any(r.is_coord for r in rsps)

    def get(self, timeout_ms: float) -> list[PingData]:
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self.cond:
            while not self._done():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 0.05))
            return list(self._rsps.values())


class Discovery(Protocol):
    DYNAMIC_DISCOVERY = True          # finds members without knowing where they are (TCPPING: False)

    timeout = Property(to_int, 3000, "ms to wait for discovery responses")
    num_initial_members = Property(to_int, 2, "responses to wait for at most")
    num_initial_srv_members = Property(to_int, 0, "responses from servers (joined members) to wait for")
    break_on_coord_rsp = Property(to_bool, True, "stop waiting as soon as a coordinator answered")
    num_ping_requests = Property(to_int, 2, "discovery requests sent during timeout")
    return_entire_cache = Property(to_bool, False, "answer with the whole logical->physical cache")
    stagger_timeout = Property(to_int, 0, "spread responses over this many ms (0: answer at once)")
    max_rank = Property(to_int, 0, "only members whose rank (1: the coordinator) is at most this answer discovery "
                        "requests; 0: all answer (with ergonomics, set from the view size as in 2.12)")
    #: 2.12's Global.SMALL_CLUSTER_SIZE and NORMAL_CLUSTER_SIZE, for the ergonomics of max_rank
    SMALL_CLUSTER_SIZE, NORMAL_CLUSTER_SIZE = 10, 20
    DEPRECATED_PROPERTIES = ("gossip_host", "gossip_port", "gossip_refresh", "socket_conn_timeout",
                             "socket_read_timeout")

    def __init__(self) -> None:
        super().__init__()
        self.is_server = False
        self.view = None
        self.members: list = []
        self.cluster: str | None = None
        self._responses: set[Responses] = set()
        self._lock = threading.Lock()
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a discovery message", self._rl)
        self.counters = {"requests_sent": 0, "requests_received": 0, "responses_sent": 0, "responses_received": 0,
                         "responses_dropped": 0, "requests_not_answered_rank": 0}

    def init(self) -> None:
        if self.num_ping_requests < 1:
            self.num_ping_requests = 1
        if self.stagger_timeout > self.timeout // self.num_ping_requests:
            self.stagger_timeout = self.timeout // self.num_ping_requests

    def send_get_members_request(self, cluster: str, view_id: ViewId | None) -> None:
        raise NotImplementedError

    # ---- finding members ----

    def find_members(self, promise, num_expected: int, break_on_coord: bool, view_id: ViewId | None) -> list[PingData]:
        self.counters["requests_sent"] += 1
        rsps = Responses(num_expected, self.num_initial_srv_members, break_on_coord, promise)
        with self._lock:
            self._responses.add(rsps)
        interval = self.timeout / self.num_ping_requests
        task = self.timer.schedule_with_fixed_delay(0, interval, lambda: self._send_request(view_id), "discovery")
        try:
            return rsps.get(self.timeout)
        finally:
            task.cancel()
            with self._lock:
                self._responses.discard(rsps)
            self.counters["responses_dropped"] += rsps.dropped

    def _send_request(self, view_id) -> None:
        try:
            self.send_get_members_request(self.cluster, view_id)
        except Exception:  # noqa: BLE001
            self.log.exception("failed sending a discovery request")

    def find_initial_members(self, promise=None) -> list[PingData]:
        return self.find_members(promise, self.num_initial_members, self.break_on_coord_rsp, None)

    def find_all_views(self, promise=None) -> list[PingData]:
        expected = max(self.num_initial_members, len(self.view) if self.view is not None else 0)
        vid = self.view.vid if self.view is not None else None
        return self.find_members(promise, expected, False, vid)

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.FIND_INITIAL_MBRS:
            return self.find_initial_members(evt.arg)
        if t == EventType.FIND_ALL_VIEWS:
            return self.find_all_views(evt.arg)
        if t in (EventType.VIEW_CHANGE, EventType.TMP_VIEW):
            self.view = evt.arg
            self.members = list(evt.arg.members or ())
            if self.ergonomics:
                self._rank_ergonomics(len(self.members))
        elif t == EventType.BECOME_SERVER:
            self.is_server = True
        elif t == EventType.CONNECT:
            self.cluster = evt.arg
        elif t == EventType.DISCONNECT:
            self.is_server = False
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.GET_PHYSICAL_ADDRESS:      # the transport misses a mapping: ask everybody
            self._send_request(None)
            return None
        if evt.type == EventType.FIND_INITIAL_MBRS:
            return self.find_initial_members(None)
        return self.up_prot.up(evt)

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self._handle_msg)

    def _handle_msg(self, msg: Message) -> None:
        self.handle(msg, msg.get_header(self.id))

    def discovery_request_received(self, sender, name, physical_addrs) -> None:
        """Hook: a discovery request from ``sender`` arrived (TCPPING remembers its physical address)."""

    def _learn(self, msg: Message, data: PingData) -> Any:
        addr = data.own_addr if data.own_addr is not None else msg.src
        physical = data.physical_addrs[0] if data.physical_addrs else None
        if addr is not None and physical is not None:
            self.down_prot.down(Event(EventType.SET_PHYSICAL_ADDRESS, (addr, physical)))
        if addr is not None and data.logical_name is not None:
            set_logical_name(addr, data.logical_name)
        return addr

    def handle(self, msg: Message, hdr: PingHeader) -> None:
        data = hdr.data
        if hdr.type == PingHeader.GET_MBRS_REQ:
            self.counters["requests_received"] += 1
            if self.cluster is None or hdr.cluster_name is None:
                self._rl.warning("no-cluster", "discovery request from %s without a cluster name: answering anyway",
                                 msg.src)
            elif hdr.cluster_name != self.cluster:
                self._rl.warning("other-cluster", "discarding discovery request for cluster %r from %s; our cluster "
                                 "name is %r. Please separate your clusters cleanly.", hdr.cluster_name, msg.src,
                                 self.cluster)
                return
            if data is not None:
                self._learn(msg, data)
                self.discovery_request_received(msg.src, data.logical_name, data.physical_addrs)
            if msg.src == self.local_addr:
                return
            rank = self._rank()
            if 0 < self.max_rank < rank:          # JGRP-1181: only the first max_rank members answer
                self.counters["requests_not_answered_rank"] += 1
                return
            if self.return_entire_cache and hdr.view_id is None and rank != 0:
                cache = self.down_prot.down(Event(EventType.GET_LOGICAL_PHYSICAL_MAPPINGS)) or {}
                for addr, physical in cache.items():
                    self._respond(addr, [physical], False, logical_name(addr), msg.src)
                return
            if hdr.view_id is not None:
                my_vid = self.view.vid if self.view is not None else None
                if my_vid is not None and my_vid == hdr.view_id:   # Util.sameViewId: same id and coordinator
                    return
            physical = None if hdr.view_id is not None else \
                [self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, self.local_addr))]
            self._respond(self.local_addr, physical, hdr.view_id is not None, logical_name(self.local_addr), msg.src)
        elif hdr.type == PingHeader.GET_MBRS_RSP:
            if data is None:
                return
            self.counters["responses_received"] += 1
            addr = self._learn(msg, data)
            overwrite = addr is not None and addr == msg.src
            with self._lock:
                pending = list(self._responses)
            for r in pending:
                r.add(data, overwrite)

    def _rank(self) -> int:
        """2.12's ``Util.getRank``: 1 for the coordinator, 2 for the next member, ...; 0 when not a member."""
        try:
            return self.members.index(self.local_addr) + 1
        except ValueError:
            return 0

    def _rank_ergonomics(self, size: int) -> None:
        """2.12: in a small cluster everyone answers; in a bigger one only the first fifth (at most 10), with
        the whole address cache."""
        if size <= self.SMALL_CLUSTER_SIZE:
            self.max_rank, self.return_entire_cache = 0, False
        elif size <= self.NORMAL_CLUSTER_SIZE:
            self.max_rank, self.return_entire_cache = size // 5, True
        else:
            self.max_rank, self.return_entire_cache = min(size // 5, 10), True

    def _respond(self, addr, physical_addrs, view_only: bool, name, dest) -> None:
        if view_only:
            data = PingData(addr, self.view, None, self.is_server, None, None)
        else:
            vid = self.view.vid if self.view is not None else None
            data = PingData(addr, None, vid, self.is_server, name, [p for p in physical_addrs or () if p is not None])
        rsp = Message(dest, None, None, Message.OOB)
        rsp.put_header(self.id, PingHeader(PingHeader.GET_MBRS_RSP, data))
        self.counters["responses_sent"] += 1
        if self.stagger_timeout > 0:
            size = len(self.view) if self.view is not None else 10
            rank = self._rank()
            delay = random.uniform(0, self.stagger_timeout) if rank == 0 else \
                self.stagger_timeout * rank / size - self.stagger_timeout / size
            self.timer.schedule(delay, lambda: self.down_prot.down_msg(rsp), "stagger discovery response")
        else:
            self.down_prot.down_msg(rsp)

    def dump_stats(self) -> dict[str, Any]:
        return dict(self.counters, failed_msgs=self._guard.failed)
