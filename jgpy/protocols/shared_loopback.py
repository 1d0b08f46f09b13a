"""SHARED_LOOPBACK: the members of a cluster in one process, without sockets
(``org.jgroups.protocols.SHARED_LOOPBACK`` of 2.12).

Every channel of the process that connects to a cluster through SHARED_LOOPBACK registers under the cluster's
name with a made-up physical address (127.0.0.1 and a port counted up from 10000, as 2.12, never a socket). A
multicast goes to every registered member of the cluster (us too: the transport drops its own copy when
``loopback`` delivered it already), a unicast to the member with that physical address. The datagrams are the
usual encoded ones; each member has an inbox that a thread of its own passes up in batches, as a socket's
receive thread would (2.12 calls the receiver on the sender's thread: jgpy does not, so a send never runs
another member's stack while holding its own locks). Nothing leaves the process: use it for fast,
deterministic in-process clusters (tests, demos). Bundling is not needed and not done.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any

from jgpy._core.address import IpAddress
from jgpy._core.message import Message
from jgpy.protocols.tp import TP
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import Wakeup

#: cluster name -> physical address -> the member's transport
_ROUTES: dict[str, dict[IpAddress, "SHARED_LOOPBACK"]] = {}
_ROUTES_LOCK = threading.Lock()
_PORTS = itertools.count(10000)


class Inbox:
    """Datagrams for one member, passed up by one thread in batches of the same kind (multicast or unicast),
    in the order they were put."""

    def __init__(self, tp: TP, name: str) -> None:
        self.tp = tp
        self._items: deque = deque()
        self._wakeup = Wakeup()
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, data: bytes, src: IpAddress | None, multicast: bool) -> None:
        self._items.append((data, src, multicast))
        if self._wakeup.sleeping:
            self._wakeup.wake()

    def _has_work(self) -> bool:
        return bool(self._items) or not self._running

    def _run(self) -> None:
        items = self._items
        while self._running:
            if not items:
                self._wakeup.sleep_unless(self._has_work)
                continue
            batch, sources, kind = [], [], items[0][2]
            while items and items[0][2] == kind and len(batch) < 256:
                data, src, _ = items.popleft()
                batch.append(data)
                sources.append(src)
            self._taken(batch)
            try:
                self.tp.receive_datagrams(batch, sources, kind)
            except Exception:  # noqa: BLE001 - one failed batch must not end the member's receiving
                self.tp.counters["up_errors"] += 1
                self.tp._rl.exception("inbox", "%s: passing %d datagram(s) up failed", self.tp.local_addr, len(batch))

    def _taken(self, batch: list) -> None:
        """Hook: ``batch`` left the inbox (a bounded inbox of a subclass releases their room)."""

    def stop(self, timeout: float = 2.0) -> None:
        self._running = False
        self._wakeup.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


class InboxTransport(TP):
    """A transport without sockets (SHARED_LOOPBACK, JMS): a subclass sets ``physical_addr`` before ``start``, makes
    its inbox (:meth:`make_inbox`) and joins and leaves its cluster's routes on CONNECT and DISCONNECT (and stop)."""

    def __init__(self) -> None:
        super().__init__()
        self._inbox: Inbox | None = None

    def make_inbox(self) -> Inbox:
        return Inbox(self, f"jgpy-{self.NAME.lower()}-{self.physical_addr.port}")

    def join_cluster(self, cluster: str) -> None:
        raise NotImplementedError

    def leave_cluster(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        super().start()
        self._inbox = self.make_inbox()

    def stop(self) -> None:
        self.leave_cluster()
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            inbox.stop()
        super().stop()

    def down(self, evt: Event) -> Any:
        ret = super().down(evt)
        if evt.type == EventType.CONNECT:
            self.join_cluster(str(evt.arg))
        elif evt.type == EventType.DISCONNECT:
            self.leave_cluster()
        return ret


class SHARED_LOOPBACK(InboxTransport):
    NAME = "SHARED_LOOPBACK"

    def __init__(self) -> None:
        super().__init__()
        self._cluster: str | None = None

    def start(self) -> None:
        self.physical_addr = IpAddress("127.0.0.1", next(_PORTS))
        super().start()

    def join_cluster(self, cluster: str) -> None:
        self.leave_cluster()
        with _ROUTES_LOCK:
            _ROUTES.setdefault(cluster, {})[self.physical_addr] = self
        self._cluster = cluster

    def leave_cluster(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is None:
            return
        with _ROUTES_LOCK:
            members = _ROUTES.get(cluster)
            if members is not None and members.get(self.physical_addr) is self:
                del members[self.physical_addr]
                if not members:
                    del _ROUTES[cluster]

    def _peers(self) -> list["SHARED_LOOPBACK"]:
        with _ROUTES_LOCK:
            return list(_ROUTES.get(self._cluster, {}).values()) if self._cluster is not None else []

    # ---- sending: into the members' inboxes ----

    def _deliver(self, target: "SHARED_LOOPBACK", data: bytes, multicast: bool) -> None:
        inbox = target._inbox
        if inbox is not None:
            inbox.put(data, self.physical_addr, multicast)

    def send_multicast_datagram(self, data: bytes) -> None:
        for target in self._peers():
            self._deliver(target, data, True)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        with _ROUTES_LOCK:
            target = _ROUTES.get(self._cluster, {}).get(dest) if self._cluster is not None else None
        if target is None:
            self.counters["dropped_no_physical_addr"] += 1
            self._rl.warning("no-member", "%s: no member at %s in cluster %s", self.local_addr, dest, self._cluster)
            return
        self._deliver(target, data, False)

    def _send_single(self, msg: Message, dest, multicast: bool) -> None:
        data = self.stack.dialect.encode_message(msg, multicast)      # no bundling: nothing to save
        if multicast:
            self.send_multicast_datagram(data)
            return
        physical = dest if isinstance(dest, IpAddress) else self.physical_for(dest)
        if physical is None:
            self.counters["dropped_no_physical_addr"] += 1
            return
        self.send_unicast_datagram(data, physical)

    def bundle(self, entry: bytes) -> None:
        raise AssertionError("SHARED_LOOPBACK does not bundle")


class LOOPBACK(SHARED_LOOPBACK):
    """``org.jgroups.protocols.LOOPBACK``: a cluster of one. Every message, to the group or to anybody, comes back
    up to this member (2.12: a copy of each message goes up at once)."""

    NAME = "LOOPBACK"

    def join_cluster(self, cluster: str) -> None:
        self._cluster = cluster                     # never in the shared table: nobody else hears us

    def leave_cluster(self) -> None:
        self._cluster = None

    def send_multicast_datagram(self, data: bytes) -> None:
        self._deliver(self, data, True)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        self._deliver(self, data, False)

    def _send_single(self, msg: Message, dest, multicast: bool) -> None:
        data = self.stack.dialect.encode_message(msg, multicast)
        self._deliver(self, data, multicast)
