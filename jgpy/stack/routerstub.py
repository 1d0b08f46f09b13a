"""Client stubs of GossipRouters (2.12's ``RouterStub`` and ``RouterStubManager``), used by TUNNEL and TCPGOSSIP.

A :class:`RouterStub` is one TCP connection to one router: CONNECT registers the member (logical address, name,
physical address) under its cluster; TUNNEL then sends every datagram as a MESSAGE over it and a receiver thread
passes what the router forwards up (MESSAGE) or reports a member whose router connection broke (SUSPECT);
TCPGOSSIP asks GOSSIP_GET for the registered members. :class:`RouterStubs` holds a member's stubs, one per router,
and one thread that reconnects a broken stub right away and then every ``reconnect_interval`` (2.12's reconnector),
and pings a connected one as often (2.12's pinger), so a restarted router gets the member back.

What a router sends is bounded as a member's own sockets are: a MESSAGE longer than ``Limits.max_buffer`` or a
malformed answer breaks that connection (it is counted, logged at most once per interval, and reconnected).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable

from jgpy.errors import WireFormatError
from jgpy.stack import gossip
from jgpy.stack.gossip import GossipData, Limits, NeedMore
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.netutil import refuse_self_connection

log = logging.getLogger("jgpy.stack.routerstub")

INITIAL, CONNECTED, BROKEN, DISCONNECTED = "INITIAL", "CONNECTED", "BROKEN", "DISCONNECTED"


class RouterStub:
    """One connection to the router at ``host:port`` (``on_message(datagram, multicast)`` and ``on_suspect(addr)``
    make it a TUNNEL stub with a receiver thread; without them it only answers GOSSIP_GET, as TCPGOSSIP's)."""

    def __init__(self, host: str, port: int, dialect, *, bind_addr: str | None = None, tcp_nodelay: bool = True,
                 conn_timeout_ms: int = 3000, read_timeout_ms: int = 3000, limits: Limits = Limits(),
                 on_message: Callable[[bytes, bool], None] | None = None,
                 on_suspect: Callable[[Any], None] | None = None,
                 on_broken: Callable[["RouterStub"], None] | None = None) -> None:
        self.host, self.port = host, port
        self.dialect = dialect
        self.bind_addr = bind_addr
        self.tcp_nodelay = tcp_nodelay
        self.conn_timeout = max(0.001, conn_timeout_ms / 1000.0)
        self.read_timeout = read_timeout_ms / 1000.0 if read_timeout_ms > 0 else None
        self.limits = limits
        self.on_message, self.on_suspect, self.on_broken = on_message, on_suspect, on_broken
        self.state = INITIAL
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._receiver: threading.Thread | None = None
        self._rl = RateLimitedLog(log)
        self.counters = {"connects": 0, "connect_failures": 0, "breaks": 0, "msgs_sent": 0, "msgs_received": 0,
                         "suspects_received": 0, "bad_answers": 0}

    def __repr__(self) -> str:
        return f"RouterStub({self.host}:{self.port}, {self.state})"

    @property
    def connected(self) -> bool:
        return self.state == CONNECTED

    # ---- connecting ----

    def connect(self, group: str, addr, logical_name: str | None, physical_addrs: list | None) -> None:
        """Open the connection and register ``addr`` under ``group``; raises OSError when the router cannot be
        reached or refuses (OP_FAIL)."""
        self._close_socket()
        try:
            source = (self.bind_addr, 0) if self.bind_addr else None
            sock = socket.create_connection((self.host, self.port), self.conn_timeout, source_address=source)
            try:
                refuse_self_connection(sock)
            except OSError:
                sock.close()
                raise
        except OSError:
            self.counters["connect_failures"] += 1
            self.state = BROKEN
            raise
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if self.tcp_nodelay else 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.settimeout(self.read_timeout if self.read_timeout else self.conn_timeout * 3)
            sock.sendall(gossip.encode(self.dialect, GossipData(gossip.CONNECT, group, addr, logical_name, None,
                                                                physical_addrs)))
            status = sock.recv(1)
            if status != bytes([gossip.CONNECT_OK]):
                raise ConnectionRefusedError(f"router {self.host}:{self.port} answered CONNECT with "
                                             f"{status.hex() or 'EOF'}")
            sock.settimeout(self.read_timeout)
        except OSError:
            sock.close()
            self.counters["connect_failures"] += 1
            self.state = BROKEN
            raise
        self._sock = sock
        self.state = CONNECTED
        self.counters["connects"] += 1
        if self.on_message is not None:
            self._receiver = threading.Thread(target=self._receive_loop, args=(sock,), daemon=True,
                                              name=f"jgpy-tunnel-{self.host}:{self.port}")
            self._receiver.start()

    def _broken(self, sock: socket.socket | None, why: str) -> None:
        """The connection ``sock`` failed: once per connection, mark the stub broken and tell the owner."""
        with self._send_lock:
            if sock is None or sock is not self._sock or self.state != CONNECTED:
                return
            self.state = BROKEN
            self._sock = None
        self.counters["breaks"] += 1
        self._rl.warning("broken", "connection to GossipRouter %s:%d broken: %s", self.host, self.port, why)
        _close(sock)
        if self.on_broken is not None:
            self.on_broken(self)

    # ---- requests ----

    def _send(self, data: bytes, *more: bytes) -> None:
        sock = self._sock
        if sock is None or self.state != CONNECTED:
            raise ConnectionError(f"not connected to GossipRouter {self.host}:{self.port}")
        try:
            with self._send_lock:
                if more:
                    _sendmsg_all(sock, [data, *more])
                else:
                    sock.sendall(data)
        except OSError as e:
            self._broken(sock, f"send failed: {e}")
            raise

    def send_to_member(self, group: str, dest, datagram: bytes) -> None:
        """A MESSAGE: ``datagram`` to ``dest`` (None: every member of ``group``)."""
        self._send(gossip.message_prefix(self.dialect, group, dest, len(datagram)), datagram)
        self.counters["msgs_sent"] += 1

    def ping(self) -> None:
        """PING (2.12's checkConnection): a broken connection shows up here."""
        try:
            self._send(gossip.encode(self.dialect, GossipData(gossip.PING)))
        except OSError:
            pass

    def disconnect(self, group: str, addr) -> None:
        try:
            self._send(gossip.encode(self.dialect, GossipData(gossip.DISCONNECT, group, addr)))
        except OSError:
            pass
        self.state = DISCONNECTED

    def destroy(self) -> None:
        """CLOSE and close the connection; the receiver thread ends."""
        sock = self._sock
        if sock is not None:
            try:
                with self._send_lock:
                    sock.sendall(gossip.encode(self.dialect, GossipData(gossip.CLOSE)))
            except OSError:
                pass
        self.state = DISCONNECTED
        self._close_socket()
        t = self._receiver
        if t is not None and t is not threading.current_thread():
            t.join(2.0)
        self._receiver = None

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            _close(sock)

    def get_members(self, group: str) -> list:
        """GOSSIP_GET: the PingData of every member registered under ``group`` (whatever else the router sent
        first, e.g. a SUSPECT nobody reads on a TCPGOSSIP connection, is skipped, as 2.12 does)."""
        sock = self._sock
        if sock is None or self.state != CONNECTED:
            raise ConnectionError(f"not connected to GossipRouter {self.host}:{self.port}")
        try:
            with self._send_lock:
                _drain(sock)
                sock.sendall(gossip.encode(self.dialect, GossipData(gossip.GOSSIP_GET, group)))
                deadline = time.monotonic() + (self.read_timeout or 30.0)
                buf = bytearray()
                while True:
                    try:
                        rsps, _ = gossip.decode_members(self.dialect, bytes(buf), self.limits)
                        return rsps
                    except NeedMore:
                        pass
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError("no complete GOSSIP_GET answer in time")
                    if len(buf) > self.limits.max_buffer:
                        raise WireFormatError(f"GOSSIP_GET answer longer than {self.limits.max_buffer} bytes")
                    sock.settimeout(left)
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise ConnectionResetError("router closed the connection")
                    buf += chunk
        except (OSError, WireFormatError) as e:
            if isinstance(e, WireFormatError):
                self.counters["bad_answers"] += 1
            self._broken(sock, f"GOSSIP_GET failed: {e}")
            raise ConnectionError(str(e)) from e
        finally:
            try:
                sock.settimeout(self.read_timeout)
            except OSError:
                pass

    # ---- receiving (TUNNEL) ----

    def _receive_loop(self, sock: socket.socket) -> None:
        buf = bytearray()
        need = 0
        dialect, limits = self.dialect, self.limits
        while self._sock is sock:
            try:
                chunk = sock.recv(262144)
            except socket.timeout:
                continue
            except OSError as e:
                self._broken(sock, f"receive failed: {e}")
                return
            if not chunk:
                self._broken(sock, "closed by the router")
                return
            buf += chunk
            if len(buf) < need:
                continue
            data = bytes(buf)
            pos = 0
            while pos < len(data):
                try:
                    gd, end = gossip.decode_request(dialect, data, limits, True, pos)
                except NeedMore as e:
                    need = e.need - pos
                    break
                except WireFormatError as e:
                    self.counters["bad_answers"] += 1
                    self._broken(sock, f"malformed data from the router: {e}")
                    return
                pos, need = end, 0
                if gd.type == gossip.DISCONNECT_OK:
                    return                    # 2.12: the receiver ends; the stub is closed by destroy()
                self._dispatch(gd)
            del buf[:pos]

    def _dispatch(self, gd: GossipData) -> None:
        try:
            if gd.type == gossip.MESSAGE and gd.buffer:
                self.counters["msgs_received"] += 1
                if self.on_message is not None:
                    self.on_message(gd.buffer, gd.addr is None)
            elif gd.type == gossip.SUSPECT and gd.suspect is not None:
                self.counters["suspects_received"] += 1
                if self.on_suspect is not None:
                    self.on_suspect(gd.suspect)
        except Exception:  # noqa: BLE001 - the receiver thread never dies of what is above it
            self._rl.exception("dispatch", "passing a %s from GossipRouter %s:%d up failed",
                               gossip.TYPE_NAMES.get(gd.type, gd.type), self.host, self.port)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _drain(sock: socket.socket) -> None:
    """Skip what the router sent unasked (2.12's ``input.skipBytes(input.available())``)."""
    sock.setblocking(False)
    try:
        for _ in range(64):
            try:
                if not sock.recv(65536):
                    raise ConnectionResetError("router closed the connection")
            except BlockingIOError:
                return
    finally:
        sock.setblocking(True)


def _sendmsg_all(sock: socket.socket, parts: list[bytes]) -> None:
    total = sum(len(p) for p in parts)
    sent = sock.sendmsg(parts)
    if sent < total:
        sock.sendall(b"".join(parts)[sent:])


class RouterStubs:
    """A member's stubs, one per router, and the thread that keeps them connected (2.12's RouterStubManager):
    a broken stub is reconnected at once and then every ``interval_ms``; a connected one is pinged as often."""

    def __init__(self, hosts: list[tuple[str, int]], make_stub: Callable[[str, int], RouterStub],
                 registration: Callable[[], tuple[str, Any, str | None, list | None]], interval_ms: int,
                 name: str) -> None:
        self.stubs = [make_stub(h, p) for h, p in hosts]
        self._registration = registration
        self.interval = max(0.05, interval_ms / 1000.0)
        self._wake = threading.Event()
        self._running = True
        self._rl = RateLimitedLog(log)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def connect_all(self) -> None:
        """Connect every stub now (2.12: a failure starts its reconnector), then start the keeper thread."""
        for stub in self.stubs:
            self._try_connect(stub)
        self._thread.start()

    def _try_connect(self, stub: RouterStub) -> bool:
        group, addr, name, physical = self._registration()
        try:
            stub.connect(group, addr, name, physical)
            return True
        except OSError as e:
            self._rl.warning(f"connect-{stub.host}:{stub.port}", "failed connecting to GossipRouter %s:%d: %s",
                             stub.host, stub.port, e)
            return False

    def broken(self, stub: RouterStub) -> None:
        """A stub's connection broke: reconnect now."""
        self._wake.set()

    def _run(self) -> None:
        next_ping = time.monotonic() + self.interval
        while self._running:
            self._wake.wait(self.interval)
            self._wake.clear()
            if not self._running:
                return
            now = time.monotonic()
            for stub in list(self.stubs):
                if not self._running:
                    return
                if stub.state == BROKEN or stub.state == INITIAL:
                    self._try_connect(stub)
                elif stub.connected and now >= next_ping:
                    stub.ping()
            if now >= next_ping:
                next_ping = now + self.interval

    def connected(self) -> list[RouterStub]:
        return [s for s in self.stubs if s.connected]

    def disconnect_all(self, group: str, addr) -> None:
        for s in self.stubs:
            if s.connected:
                s.disconnect(group, addr)

    def destroy(self) -> None:
        self._running = False
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        for s in self.stubs:
            s.destroy()

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in self.stubs:
            for k, v in s.counters.items():
                out[k] = out.get(k, 0) + v
        out["routers_connected"] = len(self.connected())
        return out
