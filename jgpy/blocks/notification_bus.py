"""``org.jgroups.blocks.NotificationBus`` (2.12): notifications multicast to every member, and the coordinator's
cache for a joiner.

Every message carries ``Util.objectToByteBuffer(NotificationBus$Info)`` (tag 2, a Serializable with ``int type``
and ``Serializable data``): NOTIFICATION (1) with the notification, GET_CACHE_REQ (2) to a member, GET_CACHE_RSP
(3) with its consumer's cache. The bus is the channel's receiver, as Java's is; it connects the channel to the
cluster named after the bus (:meth:`start`), so Java's ``NotificationBusDemo -bus_name X`` is a peer.

The consumer (Java's ``NotificationBus.Consumer``) has ``handle_notification(n)``, ``get_cache()``,
``member_joined(addr)`` and ``member_left(addr)``, each optional; they run on the delivery thread. A message
that is not an Info is counted and dropped (Java logs it), and so is one from a sender outside the view (Java
handles it: answers a stranger's cache request with the cache).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.blocks.correlator import marshal_value, unmarshal_value
from jgpy.channel import Channel, Receiver
from jgpy.javaser import JavaObject as ReadObject
from jgpy.javaser_values import to_python
from jgpy.javaser_write import JavaClassDesc
from jgpy.stack.logutil import RateLimitedLog

log = logging.getLogger(__name__)

NOTIFICATION, GET_CACHE_REQ, GET_CACHE_RSP = 1, 2, 3
INFO_CLASS = "org.jgroups.blocks.NotificationBus$Info"
_INFO_DESC = JavaClassDesc(INFO_CLASS, -7198723001828406107, fields=(
    ("I", "type", None), ("L", "data", "Ljava/io/Serializable;")))


class Info:
    """``NotificationBus$Info``: a type and its data."""

    JAVA_DESC = _INFO_DESC

    def __init__(self, type_: int, data: Any = None) -> None:
        self.type = type_
        self.data = data

    def serial_fields(self) -> tuple[Any, ...]:
        return (self.type, self.data)


def _info_of(value: Any) -> Info | None:
    if not isinstance(value, ReadObject) or value.class_name != INFO_CLASS:
        return None
    fields = value.fields.get(INFO_CLASS, {})
    t = fields.get("type")
    return Info(t, to_python(fields.get("data"))) if isinstance(t, int) else None


class NotificationBus(Receiver):
    """Java's NotificationBus over ``channel`` (not connected yet: :meth:`start` joins ``bus_name``)."""

    def __init__(self, channel: Channel, bus_name: str = "notification_bus", consumer: Any = None) -> None:
        self.channel = channel
        self.bus_name = bus_name
        self.consumer = consumer
        self.members: list[Address] = []
        self._cache_lock = threading.Condition()
        self._cache: tuple[Any] | None = None          # (cache,) once a GET_CACHE_RSP came
        self._rl = RateLimitedLog(log)
        #: messages that were not a NotificationBus$Info, or came from outside the view (counted and dropped)
        self.dropped = 0
        channel.receiver = self

    def start(self) -> None:
        self.channel.connect(self.bus_name)

    def stop(self) -> None:
        self.channel.close()

    @property
    def local_address(self) -> Address | None:
        return self.channel.address

    def is_coordinator(self) -> bool:
        return not self.members or self.members[0] == self.channel.address

    # ---- sending

    def _send(self, dest: Address | None, info: Info) -> None:
        self.channel.send(Message(dest, marshal_value(info, self.channel.stack.dialect)))

    def send_notification(self, notification: Any, dest: Address | None = None) -> None:
        """Multicast ``notification`` (to ``dest`` only, if given); None is not sent (as Java)."""
        if notification is not None:
            self._send(dest, Info(NOTIFICATION, notification))

    def get_cache_from_coordinator(self, timeout: int = 5000, max_tries: int = 1) -> Any:
        return self.get_cache_from_member(None, timeout, max_tries)

    def get_cache_from_member(self, member: Address | None, timeout: int = 5000, max_tries: int = 1) -> Any:
        """The consumer cache of ``member`` (None: the coordinator; None back when this member is it); Java's
        tries: up to ``max_tries`` + 1 requests, ``timeout`` ms each, 500 ms apart."""
        for attempt in range(max(1, max_tries) + 1):
            dst = member
            if dst is None:
                view = self.channel.view
                dst = view.members[0] if view is not None and view.members else None
                if dst is None or dst == self.channel.address:
                    return None
            with self._cache_lock:
                self._cache = None
            self._send(dst, Info(GET_CACHE_REQ))
            deadline = time.monotonic() + timeout / 1000.0
            with self._cache_lock:
                while self._cache is None and time.monotonic() < deadline:
                    self._cache_lock.wait(deadline - time.monotonic())
                got = cast("tuple[Any] | None", self._cache)      # set by the receive thread meanwhile
            if got is not None and got[0] is not None:
                return got[0]
            if attempt < max(1, max_tries):
                time.sleep(0.5)
        return None

    # ---- receiving (the delivery thread)

    def receive(self, msg: Message) -> None:
        if self.members and msg.src not in self.members:
            self.dropped += 1                      # jgpy: Java serves anyone (even its cache to a stranger)
            return
        payload = msg.payload
        if payload is None or len(payload) == 0:
            return
        try:
            info = _info_of(unmarshal_value(payload, self.channel.stack.dialect))
        except Exception as e:  # noqa: BLE001 - a stranger's bytes: counted and dropped
            info = None
            self._rl.warning("bad-info", "dropped a message that is not a NotificationBus$Info: %s", e)
        if info is None:
            self.dropped += 1
            return
        if info.type == NOTIFICATION:
            self._consumer("handle_notification", info.data)
        elif info.type == GET_CACHE_REQ:
            cache = self._consumer("get_cache")
            if msg.src is not None:
                try:
                    self._send(msg.src, Info(GET_CACHE_RSP, cache))
                except Exception as e:  # noqa: BLE001 - a cache Java cannot read: none sent, as Java
                    self._rl.warning("cache", "the cache cannot be sent: %s", e)
        elif info.type == GET_CACHE_RSP:
            with self._cache_lock:
                self._cache = (info.data,)
                self._cache_lock.notify_all()

    def view_accepted(self, view: View) -> None:
        new = list(view.members or ())
        joined = [m for m in new if m not in self.members]
        left = [m for m in self.members if m not in new]
        self.members = new
        for m in joined:
            self._consumer("member_joined", m)
        for m in left:
            self._consumer("member_left", m)

    def _consumer(self, name: str, *args: Any) -> Any:
        fn = getattr(self.consumer, name, None) if self.consumer is not None else None
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a consumer's error must not stop delivery
            log.exception("NotificationBus consumer %s failed", name)
            return None


__all__ = ["GET_CACHE_REQ", "GET_CACHE_RSP", "Info", "NOTIFICATION", "NotificationBus"]
