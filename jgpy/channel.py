"""The channel: a member of a group (``org.jgroups.JChannel``).

>>> class Printer(Receiver):
...     def receive(self, msg): print(msg.src, msg.buffer)
...     def view_accepted(self, view): print("view", view)
>>> with Channel("udp.xml", name="P1") as ch:      # the jar's udp.xml, unchanged
...     ch.receiver = Printer()
...     ch.connect("demo-cluster")
...     ch.send(None, b"hello")                     # to everyone
...     ch.send(ch.view.members[0], "hi coordinator")  # a str travels as Java's setObject(String)

Receiver callbacks run on the channel's delivery thread (regular messages in per-sender order, views and
suspicions in order with them) or on its OOB thread (OOB messages); never on a socket thread.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from typing import Any, Callable, Mapping

from jgpy._core.address import UUID, set_logical_name
from jgpy._core.message import Message
from jgpy._core.jg212 import object_to_buffer
from jgpy.errors import JgpyError
from jgpy.stack.events import Event, EventType
from jgpy.stack.protocol import Protocol
from jgpy.stack.stack import ProtocolStack

log = logging.getLogger("jgpy.channel")


class ChannelError(JgpyError):
    """An operation the channel cannot do in its current state (e.g. send before connect)."""


class Receiver:
    """Callbacks of a channel; override what you need (all are optional)."""

    def receive(self, msg: Message) -> None:
        """A message for the application."""

    def view_accepted(self, view) -> None:
        """A new view (membership) was installed."""

    def suspect(self, addr) -> None:
        """A member is suspected to have crashed."""

    def block(self) -> None:
        """FLUSH: stop sending until unblock()."""

    def unblock(self) -> None:
        """FLUSH is over."""

    def get_state(self) -> bytes | None:
        """State transfer: return the application state (bytes)."""
        return None

    def set_state(self, state: bytes) -> None:
        """State transfer: install the state received from another member."""


def generate_name() -> str:
    """A logical name like JGroups' ``Util.generateLocalName()``: ``hostname-12345``."""
    return f"{socket.gethostname().split('.')[0]}-{random.randrange(1, 65536)}"


class Channel(Protocol):
    """A group member speaking JGroups 2.12 on the wire.

    ``config`` is a JGroups XML stack file: a path, or a name in the Java jar such as ``"udp.xml"``.
    ``props`` are system properties for this channel's config (``{"jgroups.udp.mcast_port": "45600"}``),
    like ``-D`` options of a Java node.
    """

    NAME = "Channel"

    def __init__(self, config: str = "udp.xml", name: str | None = None, props: Mapping[str, str] | None = None,
                 receiver: Receiver | None = None):
        super().__init__()
        self.name = name
        self.receiver = receiver or Receiver()
        self.view = None
        self.address: UUID | None = None
        self.cluster_name: str | None = None
        #: called on connect for this member's address (JChannel.setAddressGenerator); default: a random UUID
        self.address_generator: Callable[[], UUID] | None = None
        self._state = "open"
        self._lock = threading.RLock()
        self.stack = ProtocolStack(config, self, props)
        self.stack.init()

    # ---- life cycle ----

    @property
    def is_connected(self) -> bool:
        return self._state == "connected"

    @property
    def is_open(self) -> bool:
        return self._state != "closed"

    def connect(self, cluster_name: str) -> "Channel":
        """Join ``cluster_name`` (or found it): returns once a view with this member is installed."""
        with self._lock:
            if self._state == "closed":
                raise ChannelError("the channel is closed; create a new one")
            if self._state == "connected":
                if cluster_name != self.cluster_name:
                    raise ChannelError(f"already connected to {self.cluster_name!r}; disconnect first")
                return self
            self.cluster_name = cluster_name
            self.address = self.address_generator() if self.address_generator is not None else UUID.random()
            set_logical_name(self.address, self.name or generate_name())
            if self.name is None:
                self.name = str(self.address)
            self.stack.cluster_name = cluster_name
            self.stack.local_addr = self.address
            self.stack.start(self.name)
            try:
                self.stack.down(Event(EventType.SET_LOCAL_ADDRESS, self.address))
                result = self.stack.down(Event(EventType.CONNECT, cluster_name))
                if isinstance(result, BaseException):
                    raise result
            except BaseException:
                self.stack.stop()
                raise
            self._state = "connected"
            return self

    def disconnect(self) -> None:
        """Leave the group (gracefully: the coordinator installs a view without us)."""
        with self._lock:
            if self._state != "connected":
                return
            try:
                self.stack.down(Event(EventType.DISCONNECT, self.address))
            finally:
                self.stack.stop()
                self._state = "open"
                self.view = None

    def close(self) -> None:
        with self._lock:
            if self._state == "closed":
                return
            self.disconnect()
            self.stack.destroy()
            self._state = "closed"

    def __enter__(self) -> "Channel":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sending ----

    def send(self, dest_or_msg: Any, payload: Any = None, *, oob: bool = False, flags: int = 0) -> None:
        """Send ``payload`` to ``dest`` (None: to the whole group), or send a prepared :class:`Message`.

        bytes-like payloads travel as raw bytes (Java: ``byte[]``); a ``str`` travels the way Java's
        ``setObject(String)`` writes it, so Java's ``getObject()`` returns it (Latin-1 only: Java keeps the
        low 8 bits of each char, so other text raises ValueError — send ``text.encode()`` instead).
        """
        if isinstance(dest_or_msg, Message):
            msg = dest_or_msg
            if payload is not None:
                raise TypeError("send(msg) takes no payload; put it in the message")
        else:
            msg = Message(dest_or_msg)
            if isinstance(payload, str):
                try:
                    payload.encode("latin-1")
                except UnicodeEncodeError:
                    raise ValueError("a str payload travels as a Java String, which keeps only the low 8 bits of "
                                     "each char: this text is not Latin-1; send bytes (text.encode()) instead") from None
                msg.set_buffer(object_to_buffer(payload))
            elif payload is not None:
                msg.set_buffer(payload)
        if oob:
            msg.flags |= Message.OOB
        if flags:
            msg.flags |= flags
        if self._state != "connected":
            raise ChannelError("the channel is not connected: call connect() first")
        msg.src = self.address
        self.stack.down_msg(msg)

    # ---- the top of the stack ----

    def up(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.VIEW_CHANGE:
            self.view = evt.arg
            self._callback(self.receiver.view_accepted, evt.arg)
        elif t == EventType.SUSPECT:
            self._callback(self.receiver.suspect, evt.arg)
        elif t == EventType.BLOCK:
            self._callback(self.receiver.block)
        elif t == EventType.UNBLOCK:
            self._callback(self.receiver.unblock)
        elif t == EventType.GET_STATE:
            return self.receiver.get_state()
        return None

    def up_batch(self, msgs: list) -> None:
        stack = self.stack
        regular = []
        for m in msgs:
            if m.flags & Message.OOB:
                if stack.oob_delivery is not None:
                    if stack.oob_delivery.in_thread():
                        self._deliver(m)
                    else:
                        stack.oob_delivery.submit(self._deliver, m)
            else:
                regular.append(m)
        if regular and stack.delivery is not None:
            if stack.delivery.in_thread():
                for m in regular:
                    self._deliver(m)
            else:
                stack.delivery.submit(self._deliver_all, regular)

    def _deliver_all(self, msgs: list) -> None:
        for m in msgs:
            self._deliver(m)

    def _deliver(self, msg: Message) -> None:
        try:
            self.receiver.receive(msg)
        except Exception:  # noqa: BLE001 - an application error must not stop delivery
            log.exception("%s: receiver.receive() failed for %r", self.name, msg)

    def _callback(self, fn, *args) -> None:
        ex = self.stack.delivery
        if ex is None or ex.in_thread():
            self._safe(fn, *args)
        else:
            ex.submit(self._safe, fn, *args)

    def _safe(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            log.exception("%s: receiver callback %s failed", self.name, getattr(fn, "__name__", fn))

    # ---- diagnostics ----

    def dump_stats(self) -> dict:
        return self.stack.dump_stats()

    def __repr__(self) -> str:
        return f"Channel(name={self.name!r}, cluster={self.cluster_name!r}, state={self._state}, view={self.view})"
