"""The channel: a member of a group (``org.jgroups.JChannel``).

>>> class Printer(Receiver):
...     def receive(self, msg): print(msg.src, msg.buffer)
...     def view_accepted(self, view): print("view", view)
>>> with Channel("udp.xml", name="P1") as ch:      # the jar's udp.xml, unchanged
...     ch.receiver = Printer()
...     ch.connect("demo-cluster")
...     ch.send(None, b"hello")                     # to everyone
...     ch.send(ch.view.members[0], "hi coordinator")  # a str travels as Java's setObject(String)

``receive(msg)`` gets one message per call; a receiver that overrides ``receive_batch(msgs)`` gets the
messages of a received batch in one call instead (faster for small messages).

Receiver callbacks run on the channel's delivery thread (regular messages in per-sender order, views and
suspicions in order with them) or on its OOB thread (OOB messages); never on a socket thread.

State transfer (a stack with pbcast.STATE_TRANSFER or pbcast.STREAMING_STATE_TRANSFER):

>>> class Counter(Receiver):
...     def __init__(self): self.n = 0
...     def receive(self, msg): self.n += 1
...     def get_state(self): return str(self.n).encode()        # provider: on the delivery thread
...     def set_state(self, state): self.n = int(state)         # requester: before later messages
>>> ch.get_state(None, timeout=5000)                # from the coordinator; True once set_state() ran

The byte state, a partial state (``get_partial_state(state_id)``/``set_partial_state(state_id, state)``) and
streams (``get_state_stream(out, state_id)``/``set_state_stream(inp, state_id)``, binary file-like objects)
mirror JGroups' ``MessageListener``/``ExtendedMessageListener``; see :class:`Receiver`.

Flushing (a stack with pbcast.FLUSH, e.g. the jar's ``flush-udp.xml``): views change and states are
transferred with the group quiet (virtual synchrony: a multicast sent in a view is delivered in that view).
The receiver's ``block()`` runs when a flush begins (send nothing more until ``unblock()``: a multicast sent
meanwhile waits until the flush ends); the application can flush too:

>>> if ch.start_flush():                            # everybody delivered what was sent, nobody sends
...     try: ...                                    # e.g. a consistent snapshot
...     finally: ch.stop_flush()
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from itertools import filterfalse
from typing import Any, BinaryIO, Callable, Mapping, Sequence

from jgpy._core.address import UUID, Address, set_logical_name
from jgpy._core.batch import split_by_flag
from jgpy._core.sendpath import ChannelSend
from jgpy._core.serial import GUEST, relays
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.errors import JgpyError
from jgpy.protocols.pbcast.flush import start_flush_with_retries
from jgpy.stack.config import StackConfig
from jgpy.stack.diagnostics import ChannelProbeHandler
from jgpy.stack.events import ConnectArg, Event, EventType, StateTransferInfo
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.promise import Promise
from jgpy.stack.protocol import Protocol
from jgpy.stack.stack import ProtocolStack

OOB = Message.OOB
log = logging.getLogger("jgpy.channel")


#: what :meth:`Channel.send` takes as a payload: bytes-like (Java ``byte[]``), a Latin-1 ``str`` (Java's
#: ``setObject(String)``) or None (no payload)
Payload = bytes | bytearray | memoryview | str | None


def _batch_receive(receiver: Receiver) -> Callable[[list[Message]], None] | None:
    """The receiver's ``receive_batch`` if its class overrides :meth:`Receiver.receive_batch`, else None (the
    channel then calls ``receive`` per message, catching each one's error)."""
    fn = getattr(type(receiver), "receive_batch", None)
    if fn is None or fn is Receiver.receive_batch:
        return None
    return receiver.receive_batch


def _jgpy_version() -> str:
    from jgpy import __version__
    return __version__


class ChannelError(JgpyError):
    """An operation the channel cannot do in its current state (e.g. send before connect)."""


class Receiver:
    """Callbacks of a channel; override what you need (all are optional)."""

    def receive(self, msg: Message) -> None:
        """A message for the application."""

    def receive_batch(self, msgs: list[Message]) -> None:
        """Messages for the application, in delivery order, in one call (JGroups 4's ``receive(MessageBatch)``).

        The channel calls this instead of :meth:`receive` when a subclass overrides it: one Python call per
        received batch instead of one per message, which matters for small messages. OOB messages come as
        batches of one. The list is the receiver's to keep. The default calls :meth:`receive` for each
        message."""
        for m in msgs:
            self.receive(m)

    def view_accepted(self, view: View) -> None:
        """A new view (membership) was installed (a :class:`~jgpy.MergeView` after a merge)."""

    def suspect(self, addr: Address) -> None:
        """A member is suspected to have crashed."""

    def block(self) -> None:
        """FLUSH: a flush begins; send what must still go out in this view, then nothing until
        :meth:`unblock` (a multicast sent meanwhile waits for the flush to end, or, sent from a receiver
        callback, goes out when it ends). Runs on the delivery thread before the flush goes on; the first
        one comes on connect (the join's flush)."""

    def unblock(self) -> None:
        """FLUSH: the flush is over; sending may go on."""

    # ---- state transfer (JGroups' MessageListener / ExtendedMessageListener) ----
    #
    # The provider's callbacks of pbcast.STATE_TRANSFER run on its delivery thread, between two deliveries:
    # the state returned is exactly the effect of the messages delivered so far, and the digest sent with
    # it says so. The requester's set_* callbacks run on its delivery thread too: every message delivered
    # after them comes after the state (messages the state already contains are not delivered again).

    def get_state(self) -> bytes | None:
        """Provider: the whole application state as bytes (None: no state; the requester's get_state()
        then returns False)."""
        return None

    def set_state(self, state: bytes) -> None:
        """Requester: install the state returned by the provider's get_state() (it replaces the state)."""

    def get_partial_state(self, state_id: str) -> bytes | None:
        """Provider: the partial state ``state_id`` (``ExtendedMessageListener.getState(String)``). The
        default returns the whole state, as JGroups does for a listener without partial states."""
        return self.get_state()

    def set_partial_state(self, state_id: str, state: bytes) -> None:
        """Requester: install the partial state ``state_id``. The default calls :meth:`set_state`."""
        self.set_state(state)

    def get_state_stream(self, out: BinaryIO, state_id: str | None) -> None:
        """Provider with pbcast.STREAMING_STATE_TRANSFER: write the state (``state_id`` None: the whole
        state) to ``out``, a binary file-like object (``write``, ``flush``, ``close``), in pieces of any size:
        nothing is kept in memory. The stack closes ``out`` afterwards. Runs on a state transfer thread. The
        default writes the byte state (:meth:`get_state` / :meth:`get_partial_state`)."""
        state = self.get_state() if state_id is None else self.get_partial_state(state_id)
        if state:
            out.write(state)

    def set_state_stream(self, inp: BinaryIO, state_id: str | None) -> None:
        """Requester with pbcast.STREAMING_STATE_TRANSFER: read the state from ``inp``, a binary file-like
        object (``read(n)``, ``readinto``, ``read1``; ``b""`` at the end), in pieces. The stack closes it
        afterwards. The default reads it all and calls :meth:`set_state` / :meth:`set_partial_state`."""
        data = inp.read()
        if state_id is None:
            self.set_state(data)
        else:
            self.set_partial_state(state_id, data)


_STATE_EVENTS = frozenset((EventType.GET_APPLSTATE, EventType.GET_STATE_OK, EventType.STATE_TRANSFER_OUTPUTSTREAM,
                           EventType.STATE_TRANSFER_INPUTSTREAM, EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED))


def generate_name() -> str:
    """A logical name like JGroups' ``Util.generateLocalName()``: ``hostname-12345``."""
    return f"{socket.gethostname().split('.')[0]}-{random.randrange(1, 65536)}"


class _StackTop(Protocol):
    """The top of a channel's stack (where ``JChannel`` sits in JGroups): the protocol below passes batches
    and events up to it, and the channel sends through its ``down_prot``. Private: the channel owns it, so
    the channel itself shows users no protocol methods.

    Delivery lives here (the hot path: one call per received batch from the protocol below): messages go to
    the receiver on the delivery executors; control events go to the channel (:meth:`Channel._on_event`)."""

    NAME = "Channel"

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self.channel = channel
        #: the member's address; ChannelSend (C) reads it as the source of every message it sends
        self.address: UUID | None = None
        #: (receiver, its receive_batch or None): one attribute, replaced whole, so a delivery sees the old
        #: pair or the new one; receive_batch is looked up when the receiver is set, not per batch
        self.delivery: tuple[Receiver, Callable[[list[Message]], None] | None] = (Receiver(), None)
        #: ``Channel.add_oob_interceptor``'s functions: replaced whole (a tuple), read once per batch
        self.interceptors: tuple[Callable[[Message], bool], ...] = ()
        self._rl = RateLimitedLog(log)

    def up(self, evt: Event) -> Any:
        return self.channel._on_event(evt)

    def up_batch(self, msgs: list[Message]) -> None:
        stack = self.stack
        assert stack is not None
        if len(msgs) == 1:                       # (a lone message, e.g. a request or its answer: no lists built)
            oob, regular = (msgs, None) if msgs[0].flags & OOB else (None, msgs)
        else:
            oob, regular = split_by_flag(msgs, OOB)
        if oob:
            consume = relays.consume                      # a waiting caller reading: its answers are its own
            if consume is not None:
                if len(oob) == 1:
                    oob = None if consume(oob[0]) else oob
                else:
                    oob = list(filterfalse(consume, oob))
            interceptors = self.interceptors
            if interceptors and oob:
                oob = [m for m in oob if not self._intercepted(interceptors, m)]
        if oob:
            ex = stack.oob_delivery
            if ex is not None:
                if ex.in_thread():
                    for m in oob:
                        self.deliver_all([m])
                else:                             # queued together: a receive thread relays them all at once
                    runs = False
                    for m in oob:
                        runs = ex.enqueue(self.deliver_all, [m]) or runs
                    if runs:
                        ex.run_pending()
        if regular:
            ex = stack.delivery
            if ex is not None:
                if ex.in_thread():
                    self.deliver_all(regular)
                else:
                    ex.submit(self.deliver_all, regular)

    def _intercepted(self, interceptors: tuple[Callable[[Message], bool], ...], msg: Message) -> bool:
        for fn in interceptors:
            try:
                if fn(msg):
                    return True
            except Exception:  # noqa: BLE001 - a receive thread never dies; the message is dropped alone
                self._rl.exception("intercept", "%s: an OOB interceptor failed on a message from %s: dropped",
                                   self.channel.name, msg.src)
                return True
        return False

    def deliver_all(self, msgs: list[Message]) -> None:
        receiver, batch = self.delivery
        if batch is not None:
            try:
                batch(msgs)
            except Exception:  # noqa: BLE001 - an application error must not stop delivery
                log.exception("%s: receiver.receive_batch() failed for a batch of %d message(s)", self.channel.name,
                              len(msgs))
            return
        receive = receiver.receive
        for m in msgs:
            try:
                receive(m)
            except Exception:  # noqa: BLE001 - an application error must not stop delivery
                log.exception("%s: receiver.receive() failed for %r", self.channel.name, m)

    def callback(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a receiver callback on the delivery thread (at once when this is it), in order with messages."""
        ex = self.stack.delivery if self.stack is not None else None
        if ex is None or ex.in_thread():
            self._safe(fn, *args)
        else:
            ex.submit(self._safe, fn, *args)

    def _safe(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001
            log.exception("%s: receiver callback %s failed", self.channel.name, getattr(fn, "__name__", fn))


class Channel:
    """A group member speaking JGroups 2.12 on the wire.

    ``config`` is a JGroups XML stack file: a path, or a name in the Java jar such as ``"udp.xml"`` (or a
    loaded :class:`~jgpy.stack.config.StackConfig`). ``props`` are system properties for this channel's
    config (``{"jgroups.udp.mcast_port": "45600"}``), like ``-D`` options of a Java node.
    """

    def __init__(self, config: str | StackConfig = "udp.xml", name: str | None = None,
                 props: Mapping[str, str] | None = None, receiver: Receiver | None = None) -> None:
        self.name = name
        #: the current view (None before connect and after disconnect)
        self.view: View | None = None
        self.cluster_name: str | None = None
        #: called on connect for this member's address (JChannel.setAddressGenerator); default: a random UUID
        self.address_generator: Callable[[], UUID] | None = None
        self._state = "open"
        self._lock = threading.RLock()
        self._state_transfer_supported = False      # set by the CONFIG event of a state transfer protocol
        self._flush_supported = False               # set by the CONFIG event of pbcast.FLUSH
        self._state_promise = Promise()
        self._state_lock = threading.Lock()         # one get_state() at a time (Java shares one promise too)
        self._top = _StackTop(self)
        self.receiver = receiver or Receiver()
        #: the protocols (diagnostics: ``stack.find("pbcast.NAKACK")``, ``stack.transport``)
        self.stack = ProtocolStack(config, self._top, props)
        self.stack.init()
        self._down_msg = self.stack.protocols[-1].down_msg       # the top protocol's send path
        self._read_while = self.stack.transport.read_while        # (the guest reader: read_while below)
        self._send_core = ChannelSend(self._top, self._send_general)
        if type(self).send is Channel.send:                      # not overridden: bytes payloads go straight to C
            self.send = self._send_core.send                     # type: ignore[method-assign]

    @property
    def receiver(self) -> Receiver:
        """The application's callbacks (may be replaced at any time)."""
        return self._top.delivery[0]

    @receiver.setter
    def receiver(self, receiver: Receiver) -> None:
        self._top.delivery = (receiver, _batch_receive(receiver))

    @property
    def address(self) -> UUID | None:
        """This member's address (None before the first connect)."""
        return self._top.address

    # ---- life cycle ----

    @property
    def is_connected(self) -> bool:
        return self._state == "connected"

    @property
    def is_open(self) -> bool:
        return self._state != "closed"

    def connect(self, cluster_name: str, *, use_flush: bool = True) -> Channel:
        """Join ``cluster_name`` (or found it): returns once a view with this member is installed. With FLUSH
        in the stack the coordinator flushes the group around the join unless ``use_flush`` is False
        (``JChannel.connect(cluster, useFlushIfPresent)``); ``block()`` is called first, ``unblock()`` when
        the join's flush ends."""
        self._connect(ConnectArg(cluster_name, use_flush) if not use_flush else cluster_name)
        return self

    def connect_with_state(self, cluster_name: str, target: Address | None = None, state_id: str | None = None,
                           timeout: int = 5000, *, use_flush: bool = True) -> bool:
        """Join ``cluster_name`` and fetch the state from ``target`` (None: the coordinator), as
        ``JChannel.connect(cluster, target, state_id, timeout)``: with FLUSH one flush spans both the join
        and the transfer (the coordinator leaves it for us to end). Returns False when there was no state to
        get (we are the first member); raises ChannelError when the transfer failed."""
        self._connect(ConnectArg(cluster_name, use_flush, state_transfer=True))
        can_fetch = self.view is not None and len(self.view.members or ()) > 1
        try:
            if not can_fetch:
                return False
            if not self._get_state(target, timeout, state_id, flush=False):
                raise ChannelError(f"{self.name} could not fetch state {state_id or '(full)'} from "
                                   f"{target or '(the coordinator)'}")
            return True
        finally:
            if self._flush_supported and use_flush and can_fetch:
                self.stop_flush()

    def _connect(self, cluster_name: str) -> None:
        with self._lock:
            if self._state == "closed":
                raise ChannelError("the channel is closed; create a new one")
            if self._state == "connected":
                if cluster_name != self.cluster_name:
                    raise ChannelError(f"already connected to {self.cluster_name!r}; disconnect first")
                return
            self.cluster_name = str(cluster_name)
            address = self.address_generator() if self.address_generator is not None else UUID.random()
            self._top.address = address
            set_logical_name(address, self.name or generate_name())
            if self.name is None:
                self.name = str(address)
            self.stack.cluster_name = str(cluster_name)
            self.stack.local_addr = address
            self.stack.start(self.name)
            register = getattr(self.stack.transport, "register_probe_handler", None)
            if register is not None:                               # answers probes: jmx, info, ...
                register(ChannelProbeHandler(self, f"jgpy {_jgpy_version()} (JGroups 2.12.2.Final dialect)"))
            self._down_msg = self.stack.protocols[-1].down_msg   # protocols may install C send paths at start
            self._send_core.relink()
            try:
                self.stack.down(Event(EventType.SET_LOCAL_ADDRESS, address))
                result = self.stack.down(Event(EventType.CONNECT, cluster_name))
                if isinstance(result, BaseException):
                    raise result
            except BaseException:
                self.stack.stop()
                raise
            self._state = "connected"
            self._send_core.connected = True

    def disconnect(self) -> None:
        """Leave the group (gracefully: the coordinator installs a view without us)."""
        with self._lock:
            if self._state != "connected":
                return
            self._send_core.connected = False
            try:
                self.stack.down(Event(EventType.DISCONNECT, self.address))
            finally:
                self.stack.stop()
                self._state = "open"
                self.view = None

    def close(self) -> None:
        """Disconnect and release the stack's resources; a closed channel cannot connect again."""
        with self._lock:
            if self._state == "closed":
                return
            self.disconnect()
            self.stack.destroy()
            self._state = "closed"

    def __enter__(self) -> Channel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sending ----

    def send(self, dest_or_msg: Address | Message | None, payload: Payload = None, *, oob: bool = False,
             flags: int = 0) -> None:
        """Send ``payload`` to ``dest`` (None: to the whole group), or send a prepared :class:`Message`.

        bytes-like payloads travel as raw bytes (Java: ``byte[]``); a ``str`` travels the way Java's
        ``setObject(String)`` writes it, so Java's ``getObject()`` returns it (Latin-1 only: Java keeps the
        low 8 bits of each char, so other text raises ValueError — send ``text.encode()`` instead).
        """
        self._send_general(dest_or_msg, payload, oob, flags)

    def _send_general(self, dest_or_msg: Address | Message | None, payload: Payload, oob: bool, flags: int) -> None:
        """send() for every case; a bytes payload or a prepared Message on a connected channel usually takes the
        C path instead (``ChannelSend``, same semantics)."""
        if self._state != "connected":
            raise ChannelError("the channel is not connected: call connect() first")
        if isinstance(dest_or_msg, Message):
            msg = dest_or_msg
            if payload is not None:
                raise TypeError("send(msg) takes no payload; put it in the message")
            msg.src = self.address
            if oob:
                msg.flags |= OOB
        elif type(payload) is bytes:
            msg = Message(dest_or_msg, payload, self.address, OOB if oob else 0)
        else:
            if isinstance(payload, str):
                try:
                    payload.encode("latin-1")
                except UnicodeEncodeError:
                    raise ValueError("a str payload travels as a Java String, which keeps only the low 8 bits of "
                                     "each char: this text is not Latin-1; send bytes (text.encode()) instead") from None
                data: bytes | bytearray | memoryview | None = self.stack.dialect.object_to_buffer(payload)
            else:
                data = payload
            msg = Message(dest_or_msg, data, self.address, OOB if oob else 0)
        if flags:
            msg.flags |= flags
        self._down_msg(msg)

    # ---- waiting for answers (the request/response blocks) ----

    def read_while(self, pending: Callable[[], bool], timeout: float, consume: Callable[[Message], bool]) -> bool:
        """For a thread that waits for answers sent to this member (``jgpy.blocks``' callers): while
        ``pending()``, for at most ``timeout`` seconds (< 0: no limit), the thread reads the unicast socket
        itself, and the OOB messages it reads go first to ``consume(msg)``: True means taken, the rest is
        delivered as usual (the OOB interceptors, then the delivery threads: this thread runs no application
        code but what ``consume`` runs, e.g. its own request's response filter). So an answer
        reaches its caller with no thread switch. False at once when the transport cannot (not UDP with relay
        delivery) or another thread does it now: then wait as usual. Whoever settles what the thread waits for
        on another thread calls :meth:`wake_reader`. A delivery thread may read too (a call made in a delivery):
        meanwhile no executor counts it as its own, so what it reads is queued behind the delivery that waits,
        never run nested in it (``jgpy._core.serial.GUEST``)."""
        if self._state != "connected":
            return False
        pair = relays.pair
        relays.pair, relays.consume = GUEST, consume
        try:
            return bool(self._read_while(pending, timeout))
        finally:
            relays.pair, relays.consume = pair, None

    def wake_reader(self) -> None:
        """Wake the thread in :meth:`read_while` (no-op from that thread, or when nobody reads)."""
        self.stack.transport.wake_reader()

    def add_oob_interceptor(self, fn: Callable[[Message], bool]) -> None:
        """Let ``fn(msg)`` see every OOB message on the receive thread that read it, before it is queued for
        OOB delivery; True means handled (not delivered). ``jgpy.blocks`` handles answers to its requests
        so: an answer must not wait in the OOB queue behind a handler that waits for it (a synchronous call
        made in an OOB request's handler; Java's OOB thread pool runs it on another thread). ``fn`` runs on
        receive threads: it must be short and must not block (a blocked receive thread reads nothing), so it
        must not run application code. An exception it raises drops the message."""
        top = self._top
        top.interceptors = (*top.interceptors, fn)

    def remove_oob_interceptor(self, fn: Callable[[Message], bool]) -> None:
        """Undo :meth:`add_oob_interceptor` (no-op if ``fn`` is not there)."""
        top = self._top
        top.interceptors = tuple(f for f in top.interceptors if f != fn)

    # ---- state transfer ----

    def get_state(self, target: Address | None = None, timeout: int = 5000, state_id: str | None = None, *,
                  use_flush: bool = True) -> bool:
        """Fetch the state from ``target`` (None: the coordinator) and install it with the receiver's
        ``set_state``/``set_partial_state``/``set_state_stream`` (``state_id`` None: the whole state, else
        that partial state), as ``JChannel.getState(target, state_id, timeout)``.

        Returns True once the state is installed; False when there is no state to get (this member is the
        coordinator, the provider returned none or left) or after ``timeout`` ms (0: wait for ever). Call it
        from an application thread: the state arrives on the delivery thread, so a receiver callback
        cannot wait for it. With FLUSH in the stack the group is flushed around the transfer (unless
        ``use_flush`` is False; 4 attempts 1-5 s apart, as 2.12's ``Util.startFlush``: ChannelError if all
        fail).
        """
        return self._get_state(target, timeout, state_id, use_flush)

    def _get_state(self, target: Address | None, timeout: int, state_id: str | None, flush: bool) -> bool:
        if self._state != "connected":
            raise ChannelError("the channel is not connected: call connect() first")
        if not self._state_transfer_supported:
            raise ChannelError("fetching state will fail as state transfer is not supported: add "
                               "pbcast.STATE_TRANSFER or pbcast.STREAMING_STATE_TRANSFER to the stack configuration")
        ex = self.stack.delivery
        if ex is not None and ex.in_thread():
            raise ChannelError("get_state() cannot be called on the delivery thread (from a receiver callback): "
                               "the state is delivered on that thread")
        if target is None:
            view = self.view
            target = view.members[0] if view is not None and view.members else None
        if target is not None and target == self.address:
            log.debug("%s: cannot get state from myself: probably the first member", self.name)
            return False
        flush = flush and self._flush_supported
        if flush and not start_flush_with_retries(lambda: self.start_flush()):
            raise ChannelError(f"{self.name} could not flush the cluster for state retrieval")
        try:
            with self._state_lock:
                self._state_promise.reset()
                self.stack.down(Event(EventType.GET_STATE, StateTransferInfo(target, state_id, int(timeout))))
                result = self._state_promise.get(timeout if timeout and timeout > 0 else None)
                ok = result is True
        finally:
            if flush:
                self.stop_flush()
        if not ok:
            self.stack.down(Event(EventType.RESUME_STABLE))
        return ok

    # ---- flushing (pbcast.FLUSH) ----

    @property
    def flush_supported(self) -> bool:
        """True when the stack has pbcast.FLUSH."""
        return self._flush_supported

    def start_flush(self, participants: Sequence[Address] | None = None, automatic_resume: bool = False) -> bool:
        """Flush the group (``participants`` None) or those members of the view: they deliver everything
        multicast so far and multicast nothing more until :meth:`stop_flush` (``JChannel.startFlush``).
        Returns True once the flush completed, False if it did not within FLUSH's ``start_flush_timeout``
        (e.g. another flush was running; 2.12 applications retry, as ``Util.startFlush`` does).
        ``automatic_resume``: stop the flush right away. Not from a receiver callback (the flush is
        delivered on that thread)."""
        self._check_flush("start_flush")
        if participants is not None:
            view = self.view
            members = set(view.members or ()) if view is not None else set()
            missing = [p for p in participants if p not in members]
            if missing:
                raise ValueError(f"current view {view} does not contain all flush participants {list(participants)}")
            participants = list(participants)
        ok = bool(self.stack.down(Event(EventType.SUSPEND, participants)))
        if automatic_resume:
            self.stop_flush(participants)
        return ok

    def stop_flush(self, participants: Sequence[Address] | None = None) -> None:
        """End the flush: STOP_FLUSH to everybody (or to ``participants``), who then call ``unblock()`` and
        may send again (``JChannel.stopFlush``). A participant waits (FLUSH's ``end_flush_timeout``) for its
        own ``unblock()``."""
        self._check_flush("stop_flush")
        self.stack.down(Event(EventType.RESUME, list(participants) if participants is not None else None))

    def _check_flush(self, what: str) -> None:
        if self._state != "connected":
            raise ChannelError("the channel is not connected: call connect() first")
        if not self._flush_supported:
            raise ChannelError("flush is not supported: add pbcast.FLUSH to the stack configuration")
        ex = self.stack.delivery
        if ex is not None and ex.in_thread():
            raise ChannelError(f"{what}() cannot be called on the delivery thread (from a receiver callback): the "
                               "flush is delivered on that thread")

    def _state_event(self, evt: Event) -> Any:
        """GET_APPLSTATE, GET_STATE_OK and the streams, as ``JChannel.up`` handles them."""
        t, info = evt.type, evt.arg
        recv = self.receiver
        if t == EventType.GET_APPLSTATE:
            provided: object = None                     # whatever an (untyped) receiver returns
            try:
                provided = recv.get_state() if info.state_id is None else recv.get_partial_state(info.state_id)
            except Exception:  # noqa: BLE001 - no state, as Java does
                log.exception("%s: receiver.get_state() failed", self.name)
            if provided is not None and not isinstance(provided, (bytes, bytearray, memoryview)):
                log.error("%s: receiver.get_state() returned a %s, not bytes: no state", self.name,
                          type(provided).__name__)
                provided = None
            return StateTransferInfo(None, info.state_id, 0, bytes(provided) if provided is not None else None)
        if t == EventType.GET_STATE_OK:
            state = info.state
            try:
                if state is not None:
                    if info.state_id is None:
                        recv.set_state(state)
                    else:
                        recv.set_partial_state(info.state_id, state)
            except Exception:  # noqa: BLE001
                log.exception("%s: receiver.set_state() failed", self.name)
            finally:
                self._state_promise.set(state is not None)
            return None
        if t == EventType.STATE_TRANSFER_OUTPUTSTREAM:
            if info.output_stream is not None:
                try:
                    recv.get_state_stream(info.output_stream, info.state_id)
                except Exception:  # noqa: BLE001
                    log.exception("%s: receiver.get_state_stream() failed", self.name)
            return None
        if t == EventType.STATE_TRANSFER_INPUTSTREAM:
            if info.input_stream is None:               # no connection to the provider: fail now (Java times out)
                self._state_promise.set(False)
                return None
            try:
                recv.set_state_stream(info.input_stream, info.state_id)
            except Exception:  # noqa: BLE001
                log.exception("%s: receiver.set_state_stream() failed", self.name)
            return None
        if t == EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED:
            self._state_promise.set(True)
        return None

    # ---- events from the stack (through _StackTop) ----

    def _on_event(self, evt: Event) -> Any:
        t = evt.type
        top = self._top
        if t == EventType.VIEW_CHANGE:
            self.view = evt.arg
            top.callback(self.receiver.view_accepted, evt.arg)
        elif t == EventType.SUSPECT:
            top.callback(self.receiver.suspect, evt.arg)
        elif t == EventType.BLOCK:
            top.callback(self.receiver.block)
        elif t == EventType.UNBLOCK:
            top.callback(self.receiver.unblock)
        elif t in _STATE_EVENTS:
            return self._state_event(evt)
        elif t == EventType.CONFIG:
            cfg = evt.arg
            if isinstance(cfg, dict) and cfg.get("state_transfer") is not None:
                self._state_transfer_supported = bool(cfg["state_transfer"])
            if isinstance(cfg, dict) and cfg.get("flush_supported") is not None:
                self._flush_supported = bool(cfg["flush_supported"])
        return None

    # ---- diagnostics ----

    def dump_stats(self) -> dict[str, dict[str, Any]]:
        """Every protocol's counters, by protocol name."""
        return self.stack.dump_stats()

    def __repr__(self) -> str:
        return f"Channel(name={self.name!r}, cluster={self.cluster_name!r}, state={self._state}, view={self.view})"
