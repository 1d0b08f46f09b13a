"""A small in-process stack for unit tests of one protocol: ``[FakeTransport, <protocol>, Collector]``.

* :class:`FakeTransport` records every message sent down together with the datagram bytes the 2.12
  dialect makes of it (after adding the transport header, as UDP does), loops multicasts back to its
  own stack right away (TP's ``loopback``), optionally forwards datagrams to the other stacks of a
  :class:`FakeNetwork` (delivered on a per-stack receive thread, decoded from the bytes), and lets a
  test inject received batches (objects or datagram bytes).
* :class:`Collector` sits on top and records every event and message batch coming up.
* :class:`FakeStack` provides what protocols reach through ``self.stack``: a real ``TimeScheduler``,
  the delivery executors, ``local_addr``, ``cluster_name``, ``dialect``, ``transport``.

Every wait here is bounded; :meth:`FakeStack.close` stops protocols, executors and the timer.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from jgpy import DIALECT, UUID, Message, View, ViewId
from jgpy._core import jg212
from jgpy.headers import TpHeader
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.protocol import Protocol
from jgpy.stack.timer import TimeScheduler

TP_ID = 21          # the transport's protocol id (UDP)


def wait_until(pred: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01, msg: str = "") -> Any:
    """Poll ``pred`` until it returns something truthy (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {msg or pred}")
        time.sleep(interval)


class Sent:
    """One message the transport was asked to send: the message, its datagram bytes, multicast or not."""

    __slots__ = ("msg", "data", "multicast", "time")

    def __init__(self, msg: Message, data: bytes, multicast: bool) -> None:
        self.msg = msg
        self.data = data
        self.multicast = multicast
        self.time = time.monotonic()

    def decoded(self):
        """The datagram decoded again (a :class:`jgpy.Datagram`)."""
        return DIALECT.decode_datagram(self.data)

    def header(self, pid: int):
        return self.decoded().messages[0].get_header(pid)

    def __repr__(self) -> str:
        return f"Sent({self.msg!r}, {len(self.data)} bytes)"


class FakeNetwork:
    """Connects fake transports: unicasts go to the destination's stack, multicasts to all the others."""

    def __init__(self) -> None:
        self.transports: dict[Any, "FakeTransport"] = {}
        self.blocked: set = set()         # members whose traffic is dropped (both directions)
        self._lock = threading.Lock()

    def attach(self, tp: "FakeTransport") -> None:
        with self._lock:
            self.transports[tp.stack.local_addr] = tp

    def detach(self, tp: "FakeTransport") -> None:
        with self._lock:
            if self.transports.get(tp.stack.local_addr) is tp:
                del self.transports[tp.stack.local_addr]

    def send(self, src, dest, data: bytes) -> None:
        with self._lock:
            if src in self.blocked:
                return
            if dest is None:
                targets = [tp for a, tp in self.transports.items() if a != src and a not in self.blocked]
            else:
                tp = self.transports.get(dest)
                targets = [tp] if tp is not None and dest not in self.blocked else []
        for tp in targets:
            tp.receive_datagram(data)


class FakeTransport(Protocol):
    NAME = "FAKE_TP"
    IS_TRANSPORT = True

    def __init__(self, network: FakeNetwork | None = None, loopback: bool = True) -> None:
        super().__init__()
        self.id = TP_ID
        self.network = network
        self.loopback = loopback
        self.sent: list[Sent] = []
        self.down_events: list[Event] = []
        self.received: list[bytes] = []
        self.enable_bundling = False
        self.max_bundle_size = 64000
        self._cond = threading.Condition()
        self._rx: SerialExecutor | None = None

    def start(self) -> None:
        if self.network is not None:
            self._rx = SerialExecutor(f"fake-rx-{self.stack.local_addr}")
            self.network.attach(self)

    def stop(self) -> None:
        if self.network is not None:
            self.network.detach(self)
        if self._rx is not None:
            self._rx.stop()
            self._rx = None

    # ---- down ----

    def down(self, evt: Event) -> Any:
        with self._cond:
            self.down_events.append(evt)
            self._cond.notify_all()
        if evt.type == EventType.CONNECT:
            self.stack.cluster_name = evt.arg
        return None

    def down_msg(self, msg: Message) -> Any:
        if not msg.has_header(self.id):
            msg.put_header(self.id, TpHeader(self.stack.cluster_name or ""))
        if msg.src is None:
            msg.src = self.stack.local_addr
        multicast = msg.dest is None
        data = DIALECT.encode_message(msg, multicast)
        with self._cond:
            self.sent.append(Sent(msg, data, multicast))
            self._cond.notify_all()
        if self.loopback and (multicast or msg.dest == self.stack.local_addr):
            self.up_prot.up_batch([msg.copy()])
            if not multicast:
                return None
        if self.network is not None:
            self.network.send(self.stack.local_addr, msg.dest, data)
        return None

    # ---- up ----

    def receive_datagram(self, data: bytes) -> None:
        """From the network: decoded and passed up on this stack's receive thread."""
        rx = self._rx
        if rx is not None:
            rx.submit(self.inject_datagrams, [data])

    def inject(self, msgs: list) -> None:
        """Pass a batch of received messages up (in the caller's thread)."""
        self.up_prot.up_batch(list(msgs))

    def inject_datagrams(self, datagrams: list) -> None:
        """Decode datagram bytes (as a transport would) and pass all their messages up as one batch."""
        msgs: list = []
        for data in datagrams:
            self.received.append(data)
            DIALECT.decode_messages(bytes(data), msgs, True)
        if msgs:
            self.up_prot.up_batch(msgs)

    # ---- inspection ----

    def sent_where(self, pred: Callable[[Sent], bool] = lambda s: True) -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if pred(s)]

    def wait_sent(self, pred: Callable[[Sent], bool], count: int = 1, timeout: float = 5.0) -> list[Sent]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [s for s in self.sent if pred(s)]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s: {len(got)} of {count} matching messages sent "
                                         f"(sent: {self.sent[-10:]})")
                self._cond.wait(min(left, 0.05))

    def events_of(self, etype: str) -> list[Event]:
        with self._cond:
            return [e for e in self.down_events if e.type == etype]

    def clear(self) -> None:
        with self._cond:
            self.sent.clear()
            self.down_events.clear()


class Collector(Protocol):
    """Top of a fake stack: records what comes up."""

    NAME = "COLLECTOR"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []
        self.batches: list[list] = []
        self._cond = threading.Condition()

    def up(self, evt: Event) -> Any:
        with self._cond:
            self.events.append(evt)
            self._cond.notify_all()
        return None

    def up_batch(self, msgs: list) -> None:
        with self._cond:
            self.batches.append(list(msgs))
            self._cond.notify_all()

    @property
    def messages(self) -> list:
        with self._cond:
            return [m for b in self.batches for m in b]

    def events_of(self, etype: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.type == etype]

    def wait_event(self, etype: str, pred: Callable[[Event], bool] = lambda e: True, timeout: float = 5.0) -> Event:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events:
                    if e.type == etype and pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for a {etype} event "
                                         f"(got {self.events[-10:]})")
                self._cond.wait(min(left, 0.05))

    def wait_messages(self, count: int, timeout: float = 5.0) -> list:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                msgs = [m for b in self.batches for m in b]
                if len(msgs) >= count:
                    return msgs
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s: {len(msgs)} of {count} messages came up")
                self._cond.wait(min(left, 0.05))

    def clear(self) -> None:
        with self._cond:
            self.events.clear()
            self.batches.clear()


class FakeStack:
    """``[FakeTransport, protocol, Collector]`` with the services a protocol expects from ``self.stack``."""

    def __init__(self, prot: Protocol, local_addr=None, network: FakeNetwork | None = None,
                 cluster_name: str = "fakecluster", loopback: bool = True, start: bool = True,
                 connect: bool = False) -> None:
        self.local_addr = local_addr if local_addr is not None else UUID.random()
        self.cluster_name = cluster_name
        self.dialect = DIALECT
        self.timer: TimeScheduler | None = None
        self.delivery: SerialExecutor | None = None
        self.oob_delivery: SerialExecutor | None = None
        self.tp = FakeTransport(network, loopback)
        self.prot = prot
        self.top = Collector()
        self.protocols = [self.tp, prot, self.top]
        if not prot.id:
            try:
                prot.id = jg212.protocol_id(prot.NAME)
            except KeyError:
                prot.id = 0
        self.tp.up_prot, prot.down_prot = prot, self.tp
        prot.up_prot, self.top.down_prot = self.top, prot
        for p in self.protocols:
            p.stack = self
        self._started = False
        self.init()
        if start:
            self.start()
        if connect:
            self.connect()

    @property
    def transport(self) -> FakeTransport:
        return self.tp

    def find(self, name: str):
        return next((p for p in self.protocols if p.NAME == name), None)

    def init(self) -> None:
        for p in self.protocols:
            p.init()

    def start(self) -> None:
        if self._started:
            return
        self.timer = TimeScheduler(f"fake-timer-{self.local_addr}")
        self.delivery = SerialExecutor(f"fake-deliver-{self.local_addr}")
        self.oob_delivery = SerialExecutor(f"fake-oob-{self.local_addr}")
        for p in reversed(self.protocols):
            p.start()
        self._started = True

    def connect(self) -> None:
        """SET_LOCAL_ADDRESS and CONNECT down, as the channel does."""
        self.prot.down(Event(EventType.SET_LOCAL_ADDRESS, self.local_addr))
        self.prot.down(Event(EventType.CONNECT, self.cluster_name))

    def install_view(self, members: list, view_id: int = 1, up: bool = False) -> View:
        """VIEW_CHANGE down through the protocol (as GMS sends it), and up too when ``up``."""
        view = View(ViewId(members[0], view_id), members)
        self.prot.down(Event(EventType.VIEW_CHANGE, view))
        if up:
            self.prot.up(Event(EventType.VIEW_CHANGE, view))
        return view

    def send(self, msg: Message) -> Any:
        """Send ``msg`` down from the top (as the layer above the protocol does)."""
        return self.prot.down_msg(msg)

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for p in reversed(self.protocols):
            try:
                p.stop()
            except Exception:  # noqa: BLE001
                pass
        for svc in (self.timer, self.delivery, self.oob_delivery):
            if svc is not None:
                svc.stop()

    close = stop


def view_of(members: list, view_id: int = 1) -> View:
    return View(ViewId(members[0], view_id), members)
