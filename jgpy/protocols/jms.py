"""JMS: a transport whose datagrams travel through a message broker (seed 002's JMS; jgpy/conf/jms.xml).

For sites where only a broker connects the members: every member keeps STOMP connections to the broker (ActiveMQ,
or any broker that speaks STOMP 1.2 with topics; the client is ``stomp.py``, the "jms" extra) and nothing else. 2.12 no longer ships a JMS transport, so there is no Java peer: this is a jgpy-only transport (its
protocol id, 514, is in jgpy's custom range; docs/ARCHITECTURE.md), carrying the usual encoded 2.12 datagrams.

Design:

- **Multicasts** go to one topic per cluster, ``/topic/<topic_name>`` (default ``jgpy.<cluster>``, the name
  reduced to the characters ActiveMQ allows outside wildcards plus a CRC of the full name when it had to be
  reduced: clusters that share a topic anyway are still kept apart by the transport header's cluster name).
  Our own multicasts come back from the broker and are dropped by the transport, as on UDP.
- **Unicasts** go to a topic of the receiver's own, ``/topic/<topic_name>.to.<its physical address>``, which only
  that member subscribes to. A topic, not a queue: a non-persistent message to a topic nobody subscribes to is
  dropped by the broker at once, so a crashed or departed member leaves nothing behind (a queue would hold
  every message sent to it until the broker's memory limit, and then block the senders through producer flow
  control); what a member misses while it reconnects is lost, like a datagram, and retransmitted by UNICAST.
  Not the cluster topic with a destination header that the others filter (older JGroups' JMS published
  everything on one topic): that sends every unicast to every member, and a broker-side selector per member
  costs the broker the same matching for each message.
- **The physical address** is made up, as SHARED_LOOPBACK's: an IpAddress in 240.0.0.0/5 (reserved, never
  routed: nobody can take it for a real host) with a random port, 43 random bits from the OS's random source (a
  forked process does not repeat its parent's). Two members of a cluster of n collide with a probability
  below n^2 / 2^44 (1e-7 for 1000 members); discovery and the unicast topic name are keyed by it.
- **Bodies** are binary and sent with ``content-length`` (the broker keeps them as bytes messages; NULs
  survive). A frame is one encoded message: nothing is bundled (``enable_bundling`` is ignored).
- **Two connections** per member, one that publishes and one that subscribes (ActiveMQ's advice): when the broker
  holds a producer back (producer flow control, a topic at its memory limit) it stops reading that connection,
  and a subscription on the same connection could then not drain the very messages whose room it waits for.
- **Threads and bounds**: the stack's sends only append to a bounded outbox (``send_queue_max_bytes``; a full
  outbox makes the sender wait ``send_queue_timeout`` ms, then the datagram is dropped and counted) that the link
  thread writes to the broker; frames from the broker are checked on stomp.py's receive thread and appended to a
  bounded inbox (``recv_queue_max_bytes``; full: dropped and counted) that the inbox thread passes up in batches,
  as SHARED_LOOPBACK's.
- **Broker connection loss**: the link thread reconnects with exponential backoff (``reconnect_interval`` up to
  ``max_reconnect_interval``, with jitter) and subscribes again; the member stays in the cluster (it is
  suspected only if the outage outlasts FD_ALL's timeout, and merged back by MERGE2 then). Datagrams sent while
  the link is down, or queued when it went down, are dropped and counted; NAKACK and UNICAST retransmit them.
  STOMP heart-beats (``heartbeat``) find a connection that died silently. ``connect()`` fails if the broker cannot
  be reached within ``connect_timeout``.
- **Hostile frames** (anyone allowed to publish on the topics can send them): a frame of another subscription, an
  empty body or one above ``max_frame_size`` is counted (``dropped_bad_frames``) and dropped; any other body goes
  to the transport's decoder, which counts and drops what is not a datagram of our version and cluster.
"""

from __future__ import annotations

import collections
import re
import secrets
import threading
import time
import zlib
from typing import Any, Callable
from urllib.parse import urlsplit

from jgpy._core.address import IpAddress
from jgpy.errors import ConfigError
from jgpy.protocols.shared_loopback import Inbox, InboxTransport
from jgpy.protocols.tp import TP
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int, to_size, to_str

MULTICAST_SUB = "m"          # subscription ids: which of our subscriptions a frame came through
UNICAST_SUB = "u"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def default_topic(cluster: str) -> str:
    """The cluster's topic name: ``jgpy.<cluster>``, reduced to characters that are not ActiveMQ wildcards or
    separators (``[A-Za-z0-9_-]``, at most 100 of them), with a CRC-32 of the full name when it was reduced."""
    safe = _UNSAFE.sub("_", cluster)[:100]
    if safe != cluster:
        safe += f"-{zlib.crc32(cluster.encode('utf-8')):08x}"
    return f"jgpy.{safe}"


def unicast_topic(topic: str, physical: IpAddress) -> str:
    """The topic of the member at ``physical``: only that member subscribes to it."""
    return f"{topic}.to.{_UNSAFE.sub('-', str(physical.host))}-{physical.port}"


def made_up_address() -> IpAddress:
    """A physical address for a member that has no socket: 240.0.0.0/5 and a port, 43 random bits."""
    bits = secrets.randbits(43)
    host = bits >> 16
    return IpAddress(f"{240 + (host >> 24)}.{(host >> 16) & 255}.{(host >> 8) & 255}.{host & 255}",
                     (bits & 0xFFFF) or 1)


def parse_broker_url(url: str) -> list[tuple[str, int]]:
    """``stomp://host:port`` (or ``tcp://``, or plain ``host:port``), comma-separated for failover."""
    out = []
    for part in (p.strip() for p in url.split(",")):
        if not part:
            continue
        split = urlsplit(part if "://" in part else "stomp://" + part)
        if split.scheme not in ("stomp", "tcp") or not split.hostname:
            raise ConfigError(f"JMS: broker_url {part!r} is not stomp://host:port")
        out.append((split.hostname, split.port or 61613))
    if not out:
        raise ConfigError("JMS: broker_url names no broker")
    return out


class BoundedInbox(Inbox):
    """The transport's inbox, bounded by the bytes it holds: ``offer`` refuses a datagram that does not fit."""

    def __init__(self, tp: TP, name: str, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._room = threading.Lock()
        super().__init__(tp, name)

    def offer(self, data: bytes, multicast: bool) -> bool:
        with self._room:
            if self.bytes + len(data) > self.max_bytes:
                return False
            self.bytes += len(data)
        self.put(data, None, multicast)
        return True

    def _taken(self, batch: list[bytes]) -> None:
        n = sum(len(d) for d in batch)
        with self._room:
            self.bytes -= n


class Outbox:
    """Frames waiting for the link thread, bounded by their bytes; cleared when the link goes down."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.deque[tuple[str, bytes]] = collections.deque()
        self.in_flight = 0                        # taken by the link thread, not written yet
        self.cond = threading.Condition()

    def put(self, destination: str, body: bytes, timeout: float, open_: Callable[[], bool]) -> bool:
        """Queue a frame while ``open_()``; waits up to ``timeout`` s for room. False: not queued."""
        n = len(body)
        deadline = None
        with self.cond:
            while open_() and self.bytes + n > self.max_bytes and self._items:
                deadline = deadline or time.monotonic() + timeout
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            if not open_():
                return False
            self._items.append((destination, body))
            self.bytes += n
            self.cond.notify_all()
            return True

    def take(self, timeout: float) -> list[tuple[str, bytes]]:
        """Everything queued (waits up to ``timeout`` s for something); the taker resets ``in_flight`` to 0 once
        it has written them."""
        with self.cond:
            if not self._items:
                self.cond.wait(timeout)
            items = list(self._items)
            self.in_flight = len(items)
            self._items.clear()
            self.bytes = 0
            self.cond.notify_all()
            return items

    def clear(self) -> int:
        with self.cond:
            n = len(self._items)
            self._items.clear()
            self.bytes = 0
            self.cond.notify_all()
            return n

    def pending(self) -> int:
        """Frames queued or being written."""
        return len(self._items) + self.in_flight


class _Session:
    """stomp.py's listener of one connection attempt (stomp.py calls ``on_<frame>`` by name); callbacks of a
    connection the link has given up are ignored."""

    def __init__(self, link: "BrokerLink") -> None:
        self.link = link
        self.connected = threading.Event()         # CONNECTED, or an ERROR before it (``refused``)
        self.refused = False
        self.receipts: set[str] = set()
        self.receipt = threading.Condition()

    def current(self) -> bool:
        return self in self.link._sessions

    def on_connected(self, frame: Any) -> None:
        self.connected.set()

    def on_receipt(self, frame: Any) -> None:
        with self.receipt:
            self.receipts.add(str(frame.headers.get("receipt-id")))
            self.receipt.notify_all()

    def on_message(self, frame: Any) -> None:
        if self.current():
            self.link.frame_received(frame.headers.get("subscription"), frame.body)

    def on_error(self, frame: Any) -> None:
        if not self.connected.is_set():
            self.refused = True                        # e.g. a rejected login: connect() fails now
            self.connected.set()
        self.link.counters["broker_errors"] += 1
        self.link.rl.warning("broker-error", "%s: the broker sent an ERROR frame: %s", self.link.name,
                             str(frame.headers.get("message", ""))[:200])

    def on_disconnected(self) -> None:
        if self.current():
            self.link.lost()

    def on_heartbeat_timeout(self) -> None:             # stomp.py closes the connection: on_disconnected follows
        self.link.counters["broker_heartbeat_timeouts"] += 1


class BrokerLink:
    """The member's two STOMP connections to the broker (one publishes, one subscribes), kept up by a thread of
    its own: it connects and subscribes, writes the outbox, and reconnects both with exponential backoff when
    either is lost."""

    def __init__(self, tp: "JMS", name: str, subscriptions: list[tuple[str, str, dict[str, str]]],
                 deliver: Callable[[str, bytes], None]) -> None:
        self.tp = tp
        self.name = name
        self.counters = tp.counters
        self.rl: RateLimitedLog = tp._rl
        self.subscriptions = subscriptions
        self.deliver = deliver
        self.outbox = Outbox(tp.send_queue_max_bytes)
        self.up = threading.Event()                # connected and subscribed
        self._opened: list[Any] = []              # the stomp.py connections of the current attempt
        self._sessions: tuple[_Session, ...] = ()
        self._producer: Any = None                # stomp.py connections: publishes
        self._consumer: Any = None                # subscribes
        self._running = True
        self._thread = threading.Thread(target=self._run, name=f"jgpy-jms-link-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # ---- used by the transport ----

    def send(self, destination: str, body: bytes) -> None:
        if self.outbox.put(destination, body, self.tp.send_queue_timeout / 1000, self.up.is_set):
            return
        if self.up.is_set():
            self.counters["dropped_send_queue_full"] += 1
            self.rl.warning("outbox-full", "%s: the send queue to the broker is full, dropped a datagram", self.name)
        else:
            self.counters["dropped_disconnected"] += 1

    def frame_received(self, subscription: str | None, body: Any) -> None:
        """stomp.py's receive thread: a MESSAGE frame (never raises: the thread must go on)."""
        try:
            self.deliver(str(subscription), body)
        except Exception:  # noqa: BLE001
            self.counters["dropped_bad_frames"] += 1
            self.rl.exception("frame", "%s: a frame from the broker could not be handled", self.name)

    def lost(self) -> None:
        """The connection went down (stomp.py's thread, or ours after a failed write)."""
        if self.up.is_set():
            self.up.clear()
            self.counters["broker_disconnects"] += 1
            self.rl.warning("lost", "%s: lost the connection to the broker; reconnecting", self.name)
        with self.outbox.cond:
            self.outbox.cond.notify_all()

    def stop(self, drain: float = 1.0) -> None:
        """Stop after writing what is queued (for up to ``drain`` s), then disconnect."""
        deadline = time.monotonic() + drain
        while self.up.is_set() and self.outbox.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        self._running = False
        self.up.clear()
        with self.outbox.cond:
            self.outbox.cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        self._close()

    # ---- the link thread ----

    def _run(self) -> None:
        delay = self.tp.reconnect_interval / 1000
        while self._running:
            try:
                if not self.up.is_set():
                    self._close()
                    if self._open():
                        delay = self.tp.reconnect_interval / 1000
                        continue
                    self.counters["broker_connect_failures"] += 1
                    self._pause(delay * (0.75 + secrets.randbelow(500) / 1000))
                    delay = min(delay * 2, self.tp.max_reconnect_interval / 1000)
                    continue
                try:
                    self._write(self.outbox.take(0.5))
                finally:
                    self.outbox.in_flight = 0
            except Exception:  # noqa: BLE001 - the link thread never dies
                self.rl.exception("link", "%s: the broker link failed; reconnecting", self.name)
                self.lost()
                self._pause(delay)

    def _pause(self, seconds: float) -> None:
        with self.outbox.cond:
            if self._running:
                self.outbox.cond.wait(seconds)

    def _write(self, frames: list[tuple[str, bytes]]) -> None:
        conn = self._producer
        for i, (destination, body) in enumerate(frames):
            if not self.up.is_set():
                self.counters["dropped_disconnected"] += len(frames) - i
                return
            try:
                conn.send(destination, body, headers={"content-length": str(len(body))})
            except Exception as e:  # noqa: BLE001
                self.counters["send_failures"] += 1
                self.counters["dropped_disconnected"] += len(frames) - i - 1
                self.rl.warning("send", "%s: writing to the broker failed: %s", self.name, e)
                self.lost()
                return

    def _connection(self) -> tuple[Any, _Session]:
        """A STOMP 1.2 connection to the broker, CONNECTED (raises when it is not within connect_timeout)."""
        import stomp                                  # the "jms" extra; checked when the transport starts

        tp = self.tp
        session = _Session(self)
        heartbeat = max(0, tp.heartbeat)
        conn = stomp.Connection12(tp.broker_addresses(), reconnect_attempts_max=1, reconnect_sleep_initial=0,
                                  heartbeats=(heartbeat, heartbeat),
                                  auto_decode=False, try_loopback_connect=False, keepalive=True)
        conn.set_listener("jgpy", session)
        self._sessions += (session,)
        self._opened.append(conn)
        conn.connect(tp.login, tp.passcode, wait=False)
        if not session.connected.wait(tp.connect_timeout / 1000):
            raise TimeoutError(f"no CONNECTED frame within {tp.connect_timeout} ms")
        if session.refused:
            raise ConnectionRefusedError("the broker answered CONNECT with an ERROR frame")
        return conn, session

    def _open(self) -> bool:
        """Connect both connections and subscribe; False (everything closed again) when that fails."""
        tp = self.tp
        timeout = tp.connect_timeout / 1000
        try:
            self._producer, _ = self._connection()
            self._consumer, session = self._connection()
            receipt = f"jgpy-sub-{secrets.token_hex(8)}"
            for i, (sub_id, destination, headers) in enumerate(self.subscriptions):
                extra = dict(headers)
                if i == len(self.subscriptions) - 1:
                    extra["receipt"] = receipt           # the broker answers once every subscription is in place
                self._consumer.subscribe(destination, id=sub_id, ack="auto", headers=extra)
            with session.receipt:
                if not session.receipt.wait_for(lambda: receipt in session.receipts, timeout):
                    raise TimeoutError(f"the broker did not confirm the subscriptions within {tp.connect_timeout} ms")
            if not (self._producer.is_connected() and self._consumer.is_connected()):
                raise ConnectionError("the broker closed the connection")
        except Exception as e:  # noqa: BLE001 - refused, timed out, rejected login: retried with backoff
            self.rl.warning("connect", "%s: cannot connect to the broker at %s: %s", self.name,
                            tp.broker_addresses(), str(e) or type(e).__name__)
            self._close()
            return False
        self.counters["broker_connects"] += 1
        dropped = self.outbox.clear()                   # queued while down: stale, the layers above resend
        self.counters["dropped_disconnected"] += dropped
        self.up.set()
        return True

    def _close(self) -> None:
        self.up.clear()
        opened, self._opened = self._opened, []
        self._sessions, self._producer, self._consumer = (), None, None
        for conn in opened:
            _close_connection(conn)


def _close_connection(conn: Any) -> None:
    """DISCONNECT if still connected, close the socket, wait (bounded) for stomp.py's receive thread."""
    try:
        if conn.is_connected():
            conn.disconnect()
    except Exception:  # noqa: BLE001 - the connection is going away anyway
        pass
    transport = conn.transport
    try:
        transport.disconnect_socket()
    except Exception:  # noqa: BLE001
        pass
    io_thread = getattr(transport, "io_thread", None)
    if io_thread is not None and io_thread is not threading.current_thread():
        io_thread.join(2.0)


class JMS(InboxTransport):
    NAME = "JMS"

    broker_url = Property(to_str, None, "jgpy: the broker's STOMP address, stomp://host:port (comma-separated: "
                          "tried in turn); overrides broker_host and broker_port",
                          system_property=("jgpy.jms.broker_url",))
    broker_host = Property(to_str, "127.0.0.1", "jgpy: the broker's host (when broker_url is not set)")
    broker_port = Property(to_int, 61613, "jgpy: the broker's STOMP port (when broker_url is not set)")
    topic_name = Property(to_str, None, "jgpy: the topic of the cluster's multicasts (default: jgpy.<cluster>, "
                          "see jms.default_topic); unicasts go to <topic_name>.to.<member's physical address>")
    login = Property(to_str, None, "jgpy: the STOMP login (none: connect without)")
    passcode = Property(to_str, None, "jgpy: the STOMP passcode")
    connect_timeout = Property(to_int, 5000, "jgpy: ms connect() waits for the broker (connection, CONNECTED, "
                               "subscriptions confirmed) before it fails")
    reconnect_interval = Property(to_int, 100, "jgpy: ms before the first reconnection attempt after a failed one "
                                  "(doubled after each failure, with jitter)")
    max_reconnect_interval = Property(to_int, 5000, "jgpy: the longest ms between reconnection attempts")
    heartbeat = Property(to_int, 10000, "jgpy: STOMP heart-beat interval in ms, both ways (0: none); a connection "
                         "silent for longer is taken as lost")
    send_queue_max_bytes = Property(to_size, 16_000_000, "jgpy: bytes of datagrams waiting to be written to the "
                                    "broker, at most")
    send_queue_timeout = Property(to_int, 1000, "jgpy: ms a sender waits for room in a full send queue before its "
                                  "datagram is dropped")
    recv_queue_max_bytes = Property(to_size, 16_000_000, "jgpy: bytes of received datagrams waiting to be passed "
                                    "up, at most (more are dropped)")
    max_frame_size = Property(to_size, 1_000_000, "jgpy: a frame body above this many bytes is dropped (keep "
                              "FRAG2's frag_size below it)")

    def __init__(self) -> None:
        super().__init__()
        self._link: BrokerLink | None = None
        self._inbox: BoundedInbox | None = None       # (made by make_inbox)
        self._topic: str | None = None
        self._mcast_dest = ""
        self.counters.update(dict.fromkeys(
            ("broker_connects", "broker_connect_failures", "broker_disconnects", "broker_errors", "send_failures",
             "broker_heartbeat_timeouts",
             "dropped_disconnected", "dropped_send_queue_full", "dropped_recv_queue_full", "dropped_bad_frames"), 0))

    def broker_addresses(self) -> list[tuple[str, int]]:
        if self.broker_url:
            return parse_broker_url(self.broker_url)
        return [(self.broker_host, self.broker_port)]

    def start(self) -> None:
        try:
            import stomp  # noqa: F401
        except ImportError as e:
            raise ConfigError(f"JMS needs stomp.py: pip install 'jgpy[jms]' ({e})") from e
        self.broker_addresses()                           # a bad broker_url fails here, not in the link thread
        self.enable_bundling = False                      # a frame is one message (see the module docstring)
        self.physical_addr = made_up_address()
        super().start()

    def make_inbox(self) -> Inbox:
        return BoundedInbox(self, f"jgpy-jms-inbox-{self.physical_addr.port}", self.recv_queue_max_bytes)

    def join_cluster(self, cluster: str) -> None:
        self._connect_broker(cluster)

    def leave_cluster(self) -> None:
        self._disconnect_broker()

    # ---- the broker link ----

    def _connect_broker(self, cluster: str) -> None:
        self._disconnect_broker()
        topic = self.topic_name or default_topic(cluster)
        self._topic = topic
        self._mcast_dest = f"/topic/{topic}"
        physical = self.physical_addr
        assert physical is not None, "JMS: CONNECT before start"
        subs: list[tuple[str, str, dict[str, str]]] = [
            (MULTICAST_SUB, self._mcast_dest, {}), (UNICAST_SUB, f"/topic/{unicast_topic(topic, physical)}", {})]
        link = BrokerLink(self, f"{physical.host}:{physical.port}", subs, self._frame)
        self._link = link
        link.start()
        if not link.up.wait(self.connect_timeout / 1000):
            self._disconnect_broker()
            raise ConnectionError(f"JMS: cannot reach the broker at {self.broker_addresses()} within "
                                  f"{self.connect_timeout} ms (connect_timeout)")

    def _disconnect_broker(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.stop()

    def _frame(self, subscription: str, body: Any) -> None:
        """A MESSAGE frame of one of our subscriptions (stomp.py's receive thread): checked, then queued."""
        multicast = subscription == MULTICAST_SUB
        if not (multicast or subscription == UNICAST_SUB) or not isinstance(body, (bytes, bytearray)) \
                or not body or len(body) > self.max_frame_size:
            self.counters["dropped_bad_frames"] += 1
            self._rl.warning("bad-frame", "%s: dropped a frame from the broker that cannot be a datagram "
                             "(subscription %r, %s bytes)", self.local_addr, subscription[:20],
                             len(body) if isinstance(body, (bytes, bytearray)) else "no")
            return
        inbox = self._inbox
        if inbox is None or not inbox.offer(bytes(body), multicast):
            self.counters["dropped_recv_queue_full"] += 1
            self._rl.warning("inbox-full", "%s: the receive queue is full, dropped a datagram", self.local_addr)

    # ---- sending ----

    def send_multicast_datagram(self, data: bytes) -> None:
        link = self._link
        if link is None:
            self.counters["dropped_disconnected"] += 1
            return
        link.send(self._mcast_dest, data)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        link = self._link
        if link is None or self._topic is None:
            self.counters["dropped_disconnected"] += 1
            return
        link.send(f"/topic/{unicast_topic(self._topic, dest)}", data)

    def bundle(self, entry: bytes) -> None:
        raise AssertionError("JMS does not bundle")
