"""TCP: the transport over TCP connections (``org.jgroups.protocols.TCP`` / ``BasicTCP`` of 2.12).

The member's physical address is its server socket (bind_addr:bind_port, the next free port up to
bind_port + port_range). A unicast goes as one frame over the connection to the destination (opened on
first use, see :mod:`jgpy.stack.tcpconnections`); a multicast is the same datagram, MULTICAST flag set,
sent as a frame to every physical address the transport knows (the members', and those discovery found
before the first view), except our own. The frames of a connection are read by one thread with the GIL
released and go up in batches, as UDP's datagrams do.

Bundling (``enable_bundling``, with or without ``use_send_queues``): regular messages are queued on the
connection as bundle entries, and its sender thread turns what was queued while it wrote the previous batch into
LIST datagrams of up to max_bundle_size, as Java's bundler does (a Java receiver hands a LIST, not every message,
to its thread pool, whose stock tcp.xml settings discard what it cannot take at once). No message waits for a
timer: one that follows the previous one on its connection by ``unicast_stream_gap_us`` or more, with nothing
queued, is written at once by the sending thread.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from jgpy._core.address import IpAddress
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.protocols.tp import TP
from jgpy.stack.events import Event, EventType
from jgpy.stack.netutil import bind_first_free, resolve_bind_addr
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_size, to_str
from jgpy.stack.tcpconnections import FRAME, ConnectionTable, SocketOptions

OOB_OR_DONT_BUNDLE = Message.OOB | Message.DONT_BUNDLE


class TCP(TP):
    NAME = "TCP"

    reaper_interval = Property(to_int, 0, "ms between checks for idle connections (0: none, unless "
                               "conn_expire_time is set: then 5000)")
    conn_expire_time = Property(to_int, 0, "ms a connection may be idle before it is closed (0: forever, unless "
                                "reaper_interval is set: then 300000)")
    use_send_queues = Property(to_bool, True, "give every connection a send queue and a sender thread (a sender "
                               "never waits for a slow peer's socket)")
    send_queue_size = Property(to_int, 10000, "max frames in a connection's send queue (senders wait when full)")
    recv_buf_size = Property(to_size, 150000, "SO_RCVBUF of every connection")
    send_buf_size = Property(to_size, 150000, "SO_SNDBUF of every connection")
    sock_conn_timeout = Property(to_int, 2000, "max ms to open a connection")
    peer_addr_read_timeout = Property(to_int, 1000, "max ms to wait for a connecting peer's handshake")
    tcp_nodelay = Property(to_bool, True, "TCP_NODELAY on every connection")
    linger = Property(to_int, -1, "SO_LINGER in seconds, as Java passes it to Socket.setSoLinger (-1: off)")
    external_addr = Property(to_str, None, "the address to announce instead of bind_addr (a port-forwarding "
                             "firewall's public address)")
    max_frame = Property(to_size, 0, "jgpy: a frame longer than this closes the connection before it is read (0: "
                         "the larger of 1 MiB, 2 x max_bundle_size and the stack's frag_size + 64 KiB: a bundle "
                         "never exceeds max_bundle_size, a fragment frag_size; only a GMS message of a cluster of "
                         "many thousands comes near 1 MiB)")
    max_connections = Property(to_int, 256, "jgpy: max TCP connections, those still in their handshake included (an "
                               "eighth for these); when all are taken, a new connection replaces the oldest one to a "
                               "non-member, and is closed if all are to members")

    IGNORED_PROPERTIES = {
        "suspect_on_send_failure": ignored("deprecated in 2.12"),
        "skip_suspected_members": ignored("deprecated in 2.12"),
    }

    def __init__(self) -> None:
        super().__init__()
        self.server_sock: socket.socket | None = None
        self._table: ConnectionTable | None = None
        self._last_discovery = 0.0
        self._reaper = None
        self._activity: dict[Any, tuple[int, float]] = {}   # connection -> (frames so far, when they changed)
        self.counters.update({"multicast_frames": 0, "discovery_requests": 0})

    def init(self) -> None:
        if self.send_queue_size < 0:
            raise ConfigError(f"TCP send_queue_size={self.send_queue_size}: must be >= 0")
        if self.max_connections < 2:
            raise ConfigError(f"TCP max_connections={self.max_connections}: must be >= 2 (one for a handshake)")
        if self.bind_port <= 0:
            discovery = [p for p in self.stack.protocols if getattr(p, "DYNAMIC_DISCOVERY", None) is not None]
            if any(not p.DYNAMIC_DISCOVERY for p in discovery):
                raise ConfigError("TCP bind_port must be set (> 0) with a static discovery protocol such as "
                                  "TCPPING: the others find us only at a port they know")
        if self.reaper_interval > 0 or self.conn_expire_time > 0:
            if self.reaper_interval <= 0:
                self.reaper_interval = 5000
                self.log.warning("reaper_interval was 0, set it to %d", self.reaper_interval)
            if self.conn_expire_time <= 0:
                self.conn_expire_time = 300000
                self.log.warning("conn_expire_time was 0, set it to %d", self.conn_expire_time)

    # ---- life cycle ----

    def start(self) -> None:
        bind = resolve_bind_addr(self.bind_addr)
        self.server_sock = self._server_socket(bind)
        port = self.server_sock.getsockname()[1]
        self.physical_addr = IpAddress(resolve_bind_addr(self.external_addr) if self.external_addr else bind, port)
        options = SocketOptions(self.send_buf_size, self.recv_buf_size, self.tcp_nodelay, self.linger,
                                self.sock_conn_timeout, self.peer_addr_read_timeout, self._sender_threads(),
                                self.send_queue_size, self.frame_limit(), self.max_bundle_size,
                                self.unicast_stream_gap_us, float(self.max_bundle_timeout), self.max_connections)
        self._table = ConnectionTable(self.server_sock, self.physical_addr, bind, self.receive_datagrams,
                                      self._frames_failed, options, name=f"jgpy-tcp-{port}",
                                      dialect=self.stack.dialect)
        self._table.start()
        if self.local_addr is not None:
            self.handle_local_address(self.local_addr)
        super().start()
        if self.reaper_interval > 0:
            self._reaper = self.timer.schedule_with_fixed_delay(self.reaper_interval, self.reaper_interval,
                                                                self._reap, "TCP connection reaper")
        self.up_prot.up(Event(EventType.CONFIG, {"bind_addr": bind}))

    def frame_limit(self) -> int:
        """The longest frame a connection may carry: max_frame, or (0) what the stack can send (see there)."""
        if self.max_frame > 0:
            return self.max_frame
        frag = max((getattr(p, "frag_size", 0) or 0 for p in self.stack.protocols), default=0) \
            if self.stack is not None else 0
        return max(1 << 20, 2 * self.max_bundle_size, frag + (64 << 10))

    def _server_socket(self, bind: str) -> socket.socket:
        """A listening socket on the first port of bind_port..bind_port+port_range that takes it."""
        return bind_first_free(bind, self.bind_port, self.port_range, socket.SOCK_STREAM, 128, "TCP")

    def stop(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        table, self._table = self._table, None
        if table is not None:
            table.stop()
        self.server_sock = None
        super().stop()

    def down(self, evt: Event) -> Any:
        ret = super().down(evt)
        if evt.type == EventType.VIEW_CHANGE and self._table is not None:
            with self._cache_lock:
                keep = {self.logical_addr_cache[m] for m in self.members if m in self.logical_addr_cache}
            self._table.retain_all(keep)          # connections to former members are closed
        return ret

    def handle_local_address(self, addr) -> None:
        if self._table is not None:
            dialect = self.stack.dialect
            self._table.list_prefix = lambda dest: dialect.list_prefix(dest, addr, dest is None)

    # ---- sending: regular messages as bundle entries, the others as datagrams of their own ----

    def _sender_threads(self) -> bool:
        """Whether connections get a send queue and a sender thread: with ``use_send_queues``, and with
        ``enable_bundling`` whatever ``use_send_queues`` says: in 2.12 the transport's bundler thread, not the
        sending one, writes bundles, and a receiver depends on them (one frame per message floods a Java
        TCP_NIO's processor queue, whose overflow kills its reader thread)."""
        return self.use_send_queues or self.enable_bundling

    def _send_single(self, msg, dest, multicast: bool) -> None:
        physical = None
        if not multicast:
            physical = dest if isinstance(dest, IpAddress) else self.physical_for(dest)
            if physical is None:
                self.counters["dropped_no_physical_addr"] += 1
                return
        dialect = self.stack.dialect
        if (self.enable_bundling and not (msg.flags & OOB_OR_DONT_BUNDLE)
                and not isinstance(dest, IpAddress) and self.local_addr is not None):
            entry = dialect.encode_list_entry(msg, self.local_addr)
            if multicast:
                self._send_to_all(entry, None)
            elif physical == self.physical_addr:
                self.receive_datagrams([dialect.encode_message(msg, False)], None, False)
            elif self._table is not None:
                self._table.send(physical, entry, dest)
            return
        data = dialect.encode_message(msg, multicast)
        if multicast:
            self.send_multicast_datagram(data)
        else:
            self.send_unicast_datagram(data, physical)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        if dest == self.physical_addr:
            self.receive_datagrams([data], None, False)
            return
        table = self._table
        if table is not None:
            table.send(dest, data)

    def send_multicast_datagram(self, data: bytes) -> None:
        self._send_to_all(data, FRAME)

    def _send_to_all(self, data: bytes, key) -> None:
        """To every physical address known (BasicTCP.sendMulticast), our own only without loopback (with
        loopback, our copy went up already). ``data``: a datagram (``key`` FRAME) or a multicast's bundle
        entry (``key`` None)."""
        table = self._table
        if table is None:
            return
        with self._cache_lock:
            dests = {p for a, p in self.logical_addr_cache.items() if a not in self._removal_times}
            missing = any(m not in self.logical_addr_cache for m in self.members)
        if missing:
            self._ask_discovery()
        self.counters["multicast_frames"] += 1
        for d in dests:
            if d == self.physical_addr:
                if not self.loopback:
                    own = data if key is FRAME else \
                        self.stack.dialect.list_prefix(None, self.local_addr, True) + data + b"\x00"   # a LIST of one
                    self.receive_datagrams([own], None, True)
                continue
            table.send(d, data, key)

    def bundle(self, entry: bytes) -> None:
        """Queue a multicast's bundle entry on every connection."""
        self._send_to_all(entry, None)

    def _ask_discovery(self) -> None:
        """Some member's physical address is unknown: ask discovery, at most every 10 s (as Java)."""
        now = time.monotonic()
        if now - self._last_discovery < 10.0:
            return
        self._last_discovery = now
        self.counters["discovery_requests"] += 1
        self.log.warning("%s: the address cache lacks a member's physical address: sending a discovery request",
                         self.local_addr)
        threading.Thread(target=self._find_members, name="jgpy-tcp-discovery", daemon=True).start()

    def _find_members(self) -> None:
        try:
            self.up_prot.up(Event(EventType.FIND_INITIAL_MBRS))
        except Exception:  # noqa: BLE001
            self.log.exception("%s: discovery request failed", self.local_addr)

    # ---- receiving ----

    def _frames_failed(self, error: BaseException) -> None:
        self.counters["up_errors"] += 1
        self.log.error("%s: passing received frames up failed", self.local_addr, exc_info=error)

    def _reap(self) -> None:
        """Close connections that carried nothing for conn_expire_time (checked every reaper_interval)."""
        table = self._table
        if table is None:
            return
        now = time.monotonic()
        conns = table.connections()
        for c in conns:
            s = c.stats()
            activity = s["frames_received"] + s["frames_sent"]
            seen = self._activity.get(c)
            if seen is None or seen[0] != activity:
                self._activity[c] = (activity, now)
            elif (now - seen[1]) * 1000 >= self.conn_expire_time:
                self.log.debug("%s: closing idle connection %s", self.local_addr, c.label)
                table.connection_ended(c, "idle")
        for c in [c for c in self._activity if c not in conns]:
            del self._activity[c]

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        if self._table is not None:
            d.update(self._table.stats())
        return d
