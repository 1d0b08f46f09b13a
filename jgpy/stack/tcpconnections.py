"""The TCP connections of a member (``org.jgroups.blocks.TCPConnectionMap`` of 2.12).

One server socket (the member's physical address) accepts connections; a send to a peer without a
connection opens one. The connecting side sends the handshake (``bela``, the version, its physical
address); the acceptor reads it and from then on both sides use the one socket in both directions, each
direction a stream of frames (int length + datagram). When both sides connect at the same time, the
connection the greater address opened stays, as in Java, so both end up on the same socket. What a
stranger can hold (handshakes, connections, buffers) is bounded: see :class:`ConnectionTable`.

Every connection has a reader thread (:class:`jgpy._core.tcp.StreamReader`, GIL released while it waits)
and, with ``use_send_queues``, a sender thread that writes whatever was queued in one call, so a sender
never waits for a slow peer's socket (until ``send_queue_size`` frames are queued).
"""

from __future__ import annotations

import collections
import logging
import selectors
import socket
import struct
import threading
import time
from typing import Callable

from jgpy._core.address import IpAddress
from jgpy._core.tcp import SameSource, StreamReader, StreamWriter
from jgpy.errors import WireFormatError, version_string
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.netutil import ACCEPT_CONNECTION_ERRORS, Backoff, refuse_self_connection, same_host

log = logging.getLogger("jgpy.tcp")


class SocketOptions:
    """What every connection's socket gets (TCP's properties)."""

    def __init__(self, send_buf_size: int = 150000, recv_buf_size: int = 150000, tcp_nodelay: bool = True,
                 linger: int = -1, sock_conn_timeout_ms: int = 2000, peer_addr_read_timeout_ms: int = 2000,
                 use_send_queues: bool = True, send_queue_size: int = 10000, max_frame: int = 1 << 20,
                 max_bundle_size: int = 64000, stream_gap_us: int = 20, max_linger_ms: float = 20.0,
                 max_connections: int = 256):
        self.send_buf_size = send_buf_size
        self.recv_buf_size = recv_buf_size
        self.tcp_nodelay = tcp_nodelay
        self.linger = linger
        self.sock_conn_timeout_ms = sock_conn_timeout_ms
        self.peer_addr_read_timeout_ms = peer_addr_read_timeout_ms
        self.use_send_queues = use_send_queues and send_queue_size > 0
        self.send_queue_size = send_queue_size
        self.max_frame = max_frame
        self.max_bundle_size = max_bundle_size
        self.stream_gap_us = stream_gap_us
        self.max_linger_ms = max_linger_ms
        self.max_connections = max(2, max_connections)

    def apply(self, sock: socket.socket) -> None:
        for opt, size in ((socket.SO_SNDBUF, self.send_buf_size), (socket.SO_RCVBUF, self.recv_buf_size)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
            except OSError:
                pass
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if self.tcp_nodelay else 0)
        if self.linger > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, self.linger))   # seconds, as Java


#: the key of a queued item that is a whole datagram (the other items are bundle entries, keyed by their
#: bundle's destination: None for multicast, else the member's logical address)
FRAME = object()


class SendQueue:
    """What waits for a connection's sender thread, which writes all of it with one call.

    Items are whole datagrams, or regular messages as bundle entries: the sender turns each run of entries
    for the same destination into LIST datagrams of up to ``max_bundle_size`` bytes, as Java's bundler does
    (a Java receiver then hands one LIST, not every message, to its thread pool). Nothing waits for a timer:
    a bundle holds what was queued while the previous write was in progress, and after a write the sender
    dozes ``DOZE`` seconds before it waits to be woken, so a stream's next messages collect meanwhile; while
    messages keep coming (``STREAM_ITEMS`` or more queued), it lets the bundle fill up to max_bundle_size
    (at most ``max_linger_ms``). A message is part of a stream when it follows ``STREAM_AFTER`` or more
    messages each less than ``stream_gap_us`` after the previous one; any other, while nothing is queued and
    nobody writes, is written by the caller itself (no thread hand-over for a request, or for an ACK and
    the response that follows it)."""

    DOZE = 0.0001
    STREAM_ITEMS = 8                    # this many queued at a wake-up: a stream (a request and its ACK are not)
    STREAM_AFTER = 2                    # a put following this many close ones is part of a stream

    def __init__(self, writer: StreamWriter, capacity: int, name: str, on_failure: Callable[[OSError], None],
                 list_prefix: Callable[[object], bytes], max_bundle_size: int = 64000, stream_gap_us: int = 20,
                 max_linger_ms: float = 20.0):
        self._writer = writer
        self._capacity = capacity
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition(threading.Lock())
        self._busy = threading.Lock()           # held while a batch is taken and written (keeps the order)
        self._idle = False
        self._running = True
        self._on_failure = on_failure
        self._list_prefix = list_prefix
        self._prefixes: dict = {}
        self.max_bundle_size = max_bundle_size
        self._gap_ns = stream_gap_us * 1000 if stream_gap_us >= 0 else -1
        self.max_linger_ms = max_linger_ms
        self._last_put = 0
        self._close_puts = 0                    # puts in a row, each less than the stream gap after the previous
        self.bundles = 0
        self.inline_writes = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, data: bytes, key=FRAME, timeout: float = 60.0) -> bool:
        """Queue a datagram (``key`` FRAME) or a bundle entry for destination ``key`` (waits while the
        queue is full); False if the connection is closing."""
        items = self._items
        now = time.monotonic_ns()
        if 0 <= self._gap_ns <= now - self._last_put:
            self._close_puts = 0
        else:
            self._close_puts += 1
        self._last_put = now
        sparse = self._close_puts < self.STREAM_AFTER
        if sparse and not items and self._running and self._busy.acquire(False):
            try:                                # nothing queued, nobody writing: write it now, from here
                if not items:
                    self.inline_writes += 1
                    self._writer.send_many(self._frames([(key, data)]))
                    return True
            except OSError as e:
                self._running = False
                self._on_failure(e)
                return False
            finally:
                self._busy.release()
        if len(items) >= self._capacity:
            with self._cond:
                deadline = time.monotonic() + timeout
                while self._running and len(items) >= self._capacity:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise OSError(f"send queue full ({self._capacity} items) for {timeout:.0f} s")
                    self._cond.wait(min(left, 0.5))
        if not self._running:
            return False
        items.append((key, data))
        if self._idle:
            with self._cond:
                self._cond.notify_all()
        return True

    def _prefix(self, key) -> bytes:
        p = self._prefixes.get(key)
        if p is None:
            if len(self._prefixes) > 64:
                self._prefixes.clear()
            p = self._prefixes[key] = self._list_prefix(key)
        return p

    def _frames(self, batch: list) -> list:
        """The datagrams of a batch: whole ones as they are, runs of entries as LIST bundles."""
        out: list = []
        parts: list = []
        size = 0
        run_key = FRAME
        limit = self.max_bundle_size - 1
        for key, data in batch:
            if key is FRAME:
                if parts:
                    parts.append(b"\x00")
                    out.append(b"".join(parts))
                    parts, run_key = [], FRAME
                out.append(data)
                continue
            if parts and (key != run_key or size + len(data) > limit):
                parts.append(b"\x00")
                out.append(b"".join(parts))
                parts = []
            if not parts:
                prefix = self._prefix(key)
                parts, size, run_key = [prefix], len(prefix), key
                self.bundles += 1
            parts.append(data)
            size += len(data)
        if parts:
            parts.append(b"\x00")
            out.append(b"".join(parts))
        return out

    def _run(self) -> None:
        items, cond = self._items, self._cond
        while True:
            if not items:
                time.sleep(self.DOZE)                   # unannounced: a stream's next messages collect
            if not items:
                with cond:
                    self._idle = True
                    while not items and self._running:
                        cond.wait(1.0)
                    self._idle = False
                if not items:
                    return                              # stopped and drained
            if len(items) >= self.STREAM_ITEMS:
                self._linger(items)
            with self._busy:
                batch = [items.popleft() for _ in range(len(items))]
                if len(batch) >= self._capacity // 2:
                    with cond:
                        cond.notify_all()               # room again for waiting senders
                try:
                    self._writer.send_many(self._frames(batch))
                except OSError as e:
                    self._running = False
                    self._on_failure(e)
                    return

    def _linger(self, items: collections.deque) -> None:
        """While a stream goes on (a put less than DOZE ago), let its bundle fill up to max_bundle_size, for at
        most max_linger_ms: full bundles, as Java's bundler sends (a Java receiver's thread pool takes a task
        per datagram and discards when all its threads are busy)."""
        doze_ns = int(self.DOZE * 1e9)
        deadline = time.monotonic_ns() + int(self.max_linger_ms * 1e6)
        while self._running and time.monotonic_ns() - self._last_put < doze_ns:
            if sum(len(d) for _, d in list(items)) >= self.max_bundle_size or time.monotonic_ns() >= deadline:
                return
            time.sleep(self.DOZE)

    def stop(self) -> None:
        self._running = False
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout: float) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def __len__(self) -> int:
        return len(self._items)


class Connection:
    """One TCP connection to a peer (by its physical address), with its reader and maybe sender thread."""

    def __init__(self, table: "ConnectionTable", sock: socket.socket, peer: IpAddress, initiated: bool,
                 verified: bool = True):
        self.table = table
        self.sock = sock
        self.peer = peer
        self.initiated = initiated
        self.verified = verified        # we opened it, or it came from the host of the address it claims
        self.created = time.monotonic()
        self.closed = False
        self.writer = StreamWriter(sock)
        self.reader = StreamReader(sock, table.handler, SameSource(peer.sockaddr()),
                                   bufsize=256 * 1024, max_frame=table.options.max_frame)
        self.reader.on_error = table.handler_failed
        local = sock.getsockname()
        self.label = f"{local[0]}:{local[1]}->{peer}"
        self.queue = SendQueue(self.writer, table.options.send_queue_size, f"jgpy-tcp-send-{self.label}",
                               self._send_failed, lambda key: table.list_prefix(key),
                               table.options.max_bundle_size, table.options.stream_gap_us,
                               table.options.max_linger_ms) \
            if table.options.use_send_queues else None
        self._thread = threading.Thread(target=self._read, name=f"jgpy-tcp-recv-{self.label}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def send(self, data: bytes, key=FRAME) -> None:
        """Send a datagram (``key`` FRAME), or a bundle entry for destination ``key`` (see SendQueue)."""
        if self.queue is not None:
            if not self.queue.put(data, key):
                raise OSError(f"connection to {self.peer} is closing")
        elif key is FRAME:
            self.writer.send(data)
        else:                                   # no sender thread, no bundles: a LIST of one
            self.writer.send(self.table.list_prefix(key) + data + b"\x00")

    def _send_failed(self, e: OSError) -> None:
        self.table.connection_ended(self, f"send failed: {e}")

    def _read(self) -> None:
        why = "closed"
        try:
            why = self.reader.run()
        except Exception as e:  # noqa: BLE001 - the reader returns its reasons; anything else is a bug to log
            why = f"reader failed: {e!r}"
            log.exception("%s: TCP reader of %s failed", self.table.local_addr, self.label)
        self.table.connection_ended(self, why)

    @property
    def is_open(self) -> bool:
        return not self.closed

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.queue is not None:
            self.queue.stop()
            self.queue.join(0.5)        # let it write what is queued (a leave's last messages)
        _close(self.sock, shutdown=True)        # the shutdown wakes the reader blocked in recv()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def stats(self) -> dict:
        r, w = self.reader, self.writer
        return {"peer": str(self.peer), "initiated": self.initiated, "verified": self.verified,
                "buffer": r.capacity, "frames_received": r.frames_received,
                "bytes_received": r.bytes_received, "reads": r.reads, "frames_sent": w.frames_sent,
                "bytes_sent": w.bytes_sent, "writes": w.writes, "queued": len(self.queue) if self.queue is not None else 0,
                "bundles": self.queue.bundles if self.queue is not None else 0,
                "inline_writes": self.queue.inline_writes if self.queue is not None else 0}


class _Pending:
    """An accepted connection still in its handshake: the bytes so far, and until when the rest may take."""

    __slots__ = ("sock", "src", "buf", "deadline")

    def __init__(self, sock: socket.socket, src, deadline: float):
        self.sock = sock
        self.src = src
        self.buf = bytearray()
        self.deadline = deadline


class ConnectionTable:
    """All TCP connections of one member, keyed by the peer's physical address.

    ``handler(frames, sources, multicast)`` receives the frames of every connection (on its reader
    thread); ``handler_failed(exc)`` is told when it raised. ``dialect``: the wire dialect (the stack's), whose
    handshake the connections send and expect. ``list_prefix(dest)``: the start of a LIST
    datagram to ``dest`` (None: multicast), for bundles; set by the transport once it knows its address.

    What a stranger can hold (jgpy; Java 2.12 has no limits here):

    * Handshakes are read by the acceptor thread from non-blocking sockets, all at once: a peer that sends
      its handshake a byte at a time delays nobody, and is closed when ``peer_addr_read_timeout`` has
      passed since its connection was accepted (one deadline for the whole handshake, not per read).
    * ``max_connections`` bounds the connections, those still in their handshake included: an eighth of
      it (at least 1) is kept for handshakes (when they are all taken, the oldest handshake is closed), the
      rest for established connections. When those are all taken, a new one takes the place of the oldest
      connection to a peer that is not a member (``retain_all`` says who is); if all are members', the new
      connection is closed. A member's connection is never closed for a stranger's.
    * The frame reader allocates only as far as a frame's bytes really arrive, never past ``max_frame``.

    Two connections that claim the same peer (Java's ``ConnectionAcceptor``): Java keeps the new one only
    when the peer's address is greater than ours, so after a simultaneous connect both sides keep the
    connection the greater address opened; that also lets anybody who claims a greater member's address
    take that member's connection over. jgpy applies Java's rule while the existing connection is young
    (``sock_conn_timeout + peer_addr_read_timeout``: a crossing connect); later a connection that comes
    from the host of the address it claims wins over one that does not, and one that does not never
    replaces one that does (ours, opened to that address, or a peer's from its own host)."""

    list_prefix: Callable[[object], bytes] | None = None

    def __init__(self, server_sock: socket.socket, local_addr: IpAddress, bind_host: str,
                 handler: Callable, handler_failed: Callable[[BaseException], None], options: SocketOptions,
                 name: str = "jgpy-tcp", *, dialect):
        self.dialect = dialect
        self.server_sock = server_sock
        self.local_addr = local_addr
        self.bind_host = bind_host
        self.handler = handler
        self.handler_failed = handler_failed
        self.options = options
        self.name = name
        self.conns: dict[IpAddress, Connection] = {}
        self._members: frozenset = frozenset()          # the members' physical addresses (retain_all)
        self._connecting: dict[IpAddress, threading.Event] = {}     # connects in progress, by destination
        self._pending: dict[socket.socket, _Pending] = {}           # handshakes (the acceptor's), oldest first
        self._lock = threading.RLock()
        self._running = False
        self._acceptor: threading.Thread | None = None
        self._rl = RateLimitedLog(log)
        self.handshake_slots = max(1, options.max_connections // 8)
        self.max_established = max(1, options.max_connections - self.handshake_slots)
        self._race_window = (options.sock_conn_timeout_ms + options.peer_addr_read_timeout_ms) / 1000.0
        self.counters = {"connections_accepted": 0, "connections_opened": 0, "connections_rejected": 0,
                         "connections_replaced": 0, "connect_failures": 0, "connections_closed": 0,
                         "send_failures": 0, "bad_streams": 0, "handshake_timeouts": 0, "handshakes_evicted": 0,
                         "connections_evicted": 0, "connections_refused": 0, "accept_errors": 0}

    # ---- life cycle ----

    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"{self.name}-acceptor-{self.local_addr}",
                                          daemon=True)
        self._acceptor.start()

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        _close(self.server_sock, shutdown=True)         # the shutdown wakes the acceptor in select()
        if self._acceptor is not None and threading.current_thread() is not self._acceptor:
            self._acceptor.join(3.0)
        with self._lock:
            conns = list(self.conns.values())
            self.conns.clear()
        for c in conns:
            c.close()
        for c in conns:
            c.join(2.0)

    # ---- sending ----

    def send(self, dest: IpAddress, data: bytes, key=FRAME) -> None:
        """Send one datagram (or a bundle entry for the member ``key``, see SendQueue) to ``dest``,
        connecting first if needed. Failures are counted and logged (the reliable protocols above
        retransmit); nothing is raised."""
        if not self._running:
            return
        conn = self._connection_to(dest)
        if conn is None:
            return
        try:
            conn.send(data, key)
        except OSError as e:
            self.counters["send_failures"] += 1
            self._rl.warning("send", "%s: sending %d bytes to %s failed: %s", self.local_addr, len(data), dest, e)
            self.connection_ended(conn, f"send failed: {e}")

    def _connection_to(self, dest: IpAddress) -> Connection | None:
        """The open connection to ``dest``, made now if there is none. One thread connects to a destination
        at a time (the others wait for it, at most sock_conn_timeout); nobody holds the table meanwhile
        (Java does, for sock_conn_timeout at most: jgpy's acceptor never waits for a connect)."""
        conn = self.conns.get(dest)
        if conn is not None and conn.is_open:
            return conn
        with self._lock:
            conn = self.conns.get(dest)
            if conn is not None and conn.is_open:
                return conn
            if not self._running:
                return None
            busy = self._connecting.get(dest)
            if busy is None:
                done = self._connecting[dest] = threading.Event()
        if busy is not None:
            busy.wait(self.options.sock_conn_timeout_ms / 1000.0 + 1.0)
            conn = self.conns.get(dest)
            return conn if conn is not None and conn.is_open else None
        try:
            try:
                sock = self._connect(dest)
            except OSError as e:
                self.counters["connect_failures"] += 1
                log.debug("%s: cannot connect to %s: %s", self.local_addr, dest, e)   # Java: trace (TCPPING probes)
                return None
            return self._install_opened(dest, sock)
        finally:
            with self._lock:
                self._connecting.pop(dest, None)
            done.set()

    def _connect(self, dest: IpAddress) -> socket.socket:
        family = socket.AF_INET6 if dest.is_ipv6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.bind((self.bind_host, 0))
            self.options.apply(sock)
            sock.settimeout(max(0.001, self.options.sock_conn_timeout_ms / 1000.0))
            sock.connect(dest.sockaddr())
            refuse_self_connection(sock)
            sock.settimeout(None)
            sock.sendall(self.dialect.encode_tcp_handshake(self.local_addr))
            return sock
        except BaseException:
            sock.close()
            raise

    def _install_opened(self, dest: IpAddress, sock: socket.socket) -> Connection | None:
        """Enter the connection we opened to ``dest``. If the peer's own connection came in meanwhile, the
        one the greater address opened stays (what the peer's acceptor decides too)."""
        with self._lock:
            if not self._running:
                _close(sock)
                return None
            old = self.conns.get(dest)
            if old is not None and old.is_open:
                if self.local_addr.compare_to(dest) <= 0:
                    _close(sock)
                    return old
                self.counters["connections_replaced"] += 1
                drop = old
            else:
                room, drop = self._make_room()
                if not room:
                    self.counters["connections_refused"] += 1
                    self._rl.warning("full", "%s: %d connections, all to members (max_connections=%d): not "
                                     "connecting to %s", self.local_addr, len(self.conns),
                                     self.options.max_connections, dest)
                    _close(sock)
                    return None
            conn = Connection(self, sock, dest, initiated=True, verified=True)
            self.conns[dest] = conn
            self.counters["connections_opened"] += 1
        if drop is not None:
            drop.close()
        conn.start()
        return conn

    def _make_room(self) -> tuple[bool, Connection | None]:
        """Room for one more established connection (called with the lock held): (True, None) if there is,
        (True, the connection to close) if the oldest connection to a non-member made room, else (False, None)."""
        if len(self.conns) < self.max_established:
            return True, None
        members = self._members
        victim = min((c for c in self.conns.values() if c.peer not in members), key=lambda c: c.created,
                     default=None)
        if victim is None:
            return False, None
        del self.conns[victim.peer]
        self.counters["connections_evicted"] += 1
        return True, victim

    # ---- accepting: one thread, handshakes read from non-blocking sockets ----

    def _accept_loop(self) -> None:
        srv = self.server_sock
        pending = self._pending
        backoff = Backoff()
        sel = selectors.DefaultSelector()
        resume_at = 0.0                     # accept() failed (EMFILE ...): the server socket rests until then
        try:
            srv.setblocking(False)
            sel.register(srv, selectors.EVENT_READ)
            listening = True
            while self._running:
                now = time.monotonic()
                if not listening and now >= resume_at:
                    sel.register(srv, selectors.EVENT_READ)
                    listening = True
                timeout = 0.5
                if pending:
                    timeout = min(timeout, next(iter(pending.values())).deadline - now)
                if not listening:
                    timeout = min(timeout, resume_at - now)
                for key, _ in sel.select(max(0.0, timeout)):
                    if key.fileobj is srv:
                        delay = self._accept_some(srv, sel, backoff)
                        if delay:
                            sel.unregister(srv)
                            listening = False
                            resume_at = time.monotonic() + delay
                    elif key.fileobj in pending:
                        self._read_handshake(sel, key.data)
                now = time.monotonic()
                while pending:
                    p = next(iter(pending.values()))
                    if p.deadline > now:
                        break
                    self.counters["handshake_timeouts"] += 1
                    self._refuse(sel, p, f"no handshake within {self.options.peer_addr_read_timeout_ms} ms "
                                         f"({len(p.buf)} bytes came)")
        except Exception:  # noqa: BLE001 - a bug; log it loudly (the member cannot accept any more)
            if self._running:
                log.exception("%s: the TCP acceptor failed", self.local_addr)
        finally:
            for p in list(pending.values()):
                self._drop_pending(sel, p)
            sel.close()

    def _accept_some(self, srv: socket.socket, sel, backoff: Backoff) -> float:
        """Accept what waits (at most 64 at a time); 0, or how long to rest after accept() failed."""
        for _ in range(64):
            try:
                sock, src = srv.accept()
            except (BlockingIOError, InterruptedError):
                return 0.0
            except OSError as e:
                if not self._running:
                    return 0.0
                if e.errno in ACCEPT_CONNECTION_ERRORS:
                    continue
                self.counters["accept_errors"] += 1
                delay = backoff.failed()
                self._rl.warning("accept", "%s: accept() failed: %s; accepting again in %.0f ms", self.local_addr, e,
                                 delay * 1000)
                return delay
            backoff.succeeded()
            self._admit(sel, sock, src)
        return 0.0

    def _admit(self, sel, sock: socket.socket, src) -> None:
        pending = self._pending
        if len(pending) >= self.handshake_slots:        # the oldest handshake makes room (unless it is done now)
            oldest = next(iter(pending.values()))
            self._read_handshake(sel, oldest)
            if oldest.sock in pending:
                self.counters["handshakes_evicted"] += 1
                self._refuse(sel, oldest, "handshake not done when all handshake slots were taken")
        try:
            sock.setblocking(False)
            self.options.apply(sock)
        except OSError:
            _close(sock)
            return
        p = _Pending(sock, src, time.monotonic() + max(0.001, self.options.peer_addr_read_timeout_ms / 1000.0))
        pending[sock] = p
        sel.register(sock, selectors.EVENT_READ, p)
        self._read_handshake(sel, p)                    # a connector sends its handshake with the connect

    def _read_handshake(self, sel, p: _Pending) -> None:
        """Read what the handshake still needs (never past it: the frames are the reader thread's)."""
        try:
            while True:
                need, whole = self.dialect.tcp_handshake_need(p.buf)
                if whole and len(p.buf) >= need:
                    break
                try:
                    chunk = p.sock.recv(need - len(p.buf))
                except (BlockingIOError, InterruptedError):
                    return
                if not chunk:
                    raise OSError(f"the peer closed the connection after {len(p.buf)} handshake bytes")
                p.buf += chunk
            version, peer, _ = self.dialect.decode_tcp_handshake(bytes(p.buf))
        except (OSError, WireFormatError) as e:
            self._refuse(sel, p, str(e))
            return
        self._drop_pending(sel, p, close=False)
        if not self.dialect.is_binary_compatible(version):
            self._rl.warning("version", "%s: the peer at %s:%s has version %s, ours is %s: this may cause problems",
                             self.local_addr, p.src[0], p.src[1], version_string(version),
                             version_string(self.dialect.version))
        try:
            self._accepted(p.sock, p.src, peer)
        except Exception:  # noqa: BLE001 - one bad peer must not end the acceptor
            self._rl.exception("accepted", "%s: handling the connection from %s failed", self.local_addr, p.src)
            _close(p.sock)

    def _refuse(self, sel, p: _Pending, why: str) -> None:
        self.counters["connections_rejected"] += 1
        self._rl.warning("handshake", "%s: closed the connection from %s:%s: %s", self.local_addr, p.src[0], p.src[1],
                         why)
        self._drop_pending(sel, p)

    def _drop_pending(self, sel, p: _Pending, close: bool = True) -> None:
        self._pending.pop(p.sock, None)
        try:
            sel.unregister(p.sock)
        except (KeyError, ValueError):
            pass
        if close:
            _close(p.sock)

    def _accepted(self, sock: socket.socket, src, peer: IpAddress) -> None:
        sock.setblocking(True)
        verified = same_host(src[0], peer)
        with self._lock:
            if not self._running:
                _close(sock)
                return
            old = self.conns.get(peer)
            if old is not None and old.is_open:
                if not self._new_wins(old, peer, verified):
                    self.counters["connections_rejected"] += 1
                    _close(sock)
                    return
                self.counters["connections_replaced"] += 1
                drop = old
            else:
                room, drop = self._make_room()
                if not room:
                    self.counters["connections_refused"] += 1
                    self._rl.warning("full", "%s: %d connections, all to members (max_connections=%d): closed "
                                     "the connection from %s:%s", self.local_addr, len(self.conns),
                                     self.options.max_connections, src[0], src[1])
                    _close(sock)
                    return
            conn = Connection(self, sock, peer, initiated=False, verified=verified)
            self.conns[peer] = conn
            self.counters["connections_accepted"] += 1
        if drop is not None:
            drop.close()
        conn.start()

    def _new_wins(self, old: Connection, peer: IpAddress, verified: bool) -> bool:
        """Whether a new connection from ``peer`` replaces the open one we have (see the class docstring)."""
        java = peer.compare_to(self.local_addr) > 0
        if time.monotonic() - old.created < self._race_window or verified == old.verified:
            return java
        return verified

    # ---- connections ending ----

    def connection_ended(self, conn: Connection, why: str) -> None:
        with self._lock:
            if self.conns.get(conn.peer) is conn:
                del self.conns[conn.peer]
            was_closed = conn.closed
        if not was_closed:
            self.counters["connections_closed"] += 1
            if why.startswith("frame length"):
                self.counters["bad_streams"] += 1
                self._rl.warning("bad-stream", "%s: closing the connection %s: %s", self.local_addr, conn.label, why)
            elif self._running:
                log.debug("%s: connection %s ended: %s", self.local_addr, conn.label, why)
        conn.close()

    def retain_all(self, peers: set) -> None:
        """Close the connections to peers not in ``peers`` (the members' physical addresses: former members,
        and peers that never became members)."""
        with self._lock:
            self._members = frozenset(peers)
            gone = [c for p, c in self.conns.items() if p not in peers]
            for c in gone:
                del self.conns[c.peer]
        for c in gone:
            c.close()

    # ---- diagnostics ----

    def connections(self) -> list[Connection]:
        with self._lock:
            return list(self.conns.values())

    def stats(self) -> dict:
        conns = self.connections()
        d = dict(self.counters)
        d["handshakes_pending"] = len(self._pending)
        d["connections"] = [c.stats() for c in conns]
        return d


def _close(sock: socket.socket, shutdown: bool = False) -> None:
    """Close ``sock``, ignoring errors; ``shutdown`` first wakes a thread blocked in its recv() or accept()
    (a close alone does not)."""
    if shutdown:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    try:
        sock.close()
    except OSError:
        pass
