"""A GossipRouter (``org.jgroups.stack.GossipRouter`` of 2.12): ``python -m jgpy gossip-router --port 12001``.

TUNNEL members (Java's and jgpy's) register with it under their cluster and send every datagram through it: a
MESSAGE to a member goes to that member's connection, one without a destination to every member of the cluster.
TCPGOSSIP members register and ask it for the registered members (GOSSIP_GET). When a member's connection breaks
(not after CLOSE), the members of its clusters get a SUSPECT for it, as 2.12's FailureDetectionListener does. The
wire is :mod:`jgpy.stack.gossip`.

One thread serves every connection (non-blocking sockets, ``selectors``). Anybody can connect, so everything a
connection can make the router hold is bounded and a bad connection ends alone:

- at most ``max_connections`` connections; more are closed on accept (counted). An accept error (EMFILE, ...)
  pauses accepting briefly; the loop goes on.
- the first request (CONNECT or GOSSIP_GET) must be complete within ``handshake_timeout`` of the accept, and
  every later request within ``request_timeout`` of its first byte;
- a request's counts and lengths are checked against the limits before its bytes are waited for (a MESSAGE at
  most ``max_message`` bytes, at most 64 addresses in a list); a malformed request closes its connection only;
- each connection queues at most ``max_queued_bytes`` for sending: a MESSAGE for a member that does not read is
  dropped (counted), as a datagram would be (its sender's NAKACK/UNICAST retransmit);
- a connection registers at most ``max_addrs_per_connection`` members.

As in 2.12, nothing is authenticated: a CONNECT for an address registered by another connection replaces that
connection (a member reconnecting after its old connection hung), so anybody who can reach the router can
register, send into a cluster or displace a member (run it where only the members reach it). Deviations from
2.12, for safety: a MESSAGE is routed only from a connection that registered under its cluster
(2.12 routes anybody's), DISCONNECT removes only the connection's own registration (2.12 anybody's), and a
multicast is not sent back to the connection it came from (its sender drops its own multicasts: 2.12 TUNNEL
forces loopback on; 2.12's router has this as ``discard_loopbacks``).
"""

from __future__ import annotations

import argparse
import errno
import logging
import selectors
import signal
import socket
import threading
import time
from collections import deque
from itertools import islice
from typing import Any

from jgpy._core.address import UUID, remove_logical_name, set_logical_name
from jgpy._core.jg212 import DIALECT
from jgpy._core.types import PingData
from jgpy.errors import WireFormatError
from jgpy.stack import gossip
from jgpy.stack.gossip import GossipData, Limits, NeedMore
from jgpy.stack.logutil import RateLimitedLog

log = logging.getLogger("jgpy.gossip_router")

ACCEPT_BACKOFF = 0.1              # seconds without accepting after an accept() error (EMFILE, ENFILE, ENOBUFS ...)
MAX_PHYSICAL_PER_MEMBER = 16


class _Conn:
    """One client connection: its buffers, deadlines and registrations."""

    __slots__ = ("sock", "peer", "inbuf", "need", "out", "out_bytes", "addrs", "groups", "accepted", "partial_since",
                 "handshaken", "closed", "want_write")

    def __init__(self, sock: socket.socket, peer: Any, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.inbuf = bytearray()
        self.need = 0
        self.out: deque = deque()
        self.out_bytes = 0
        self.addrs: list[tuple[str, Any]] = []        # (group, addr) registered over this connection
        self.groups: set[str] = set()
        self.accepted = now
        self.partial_since = 0.0
        self.handshaken = False
        self.closed = False
        self.want_write = False

    def label(self) -> str:
        try:
            return f"{self.peer[0]}:{self.peer[1]}"
        except Exception:  # noqa: BLE001
            return "?"


class GossipRouter:
    """The router. :meth:`start` runs it on a thread of its own (tests, embedding); :meth:`serve_forever` on the
    calling one (the command line); :meth:`stop` closes everything."""

    def __init__(self, port: int = 12001, bind_addr: str = "127.0.0.1", *, max_connections: int = 512,
                 handshake_timeout: float = 10.0, request_timeout: float = 30.0, max_message: int = 1 << 20,
                 max_queued_bytes: int = 4 << 20, max_addrs_per_connection: int = 8, backlog: int = 1000,
                 dialect=DIALECT) -> None:
        self.port = port
        self.bind_addr = bind_addr
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.request_timeout = request_timeout
        self.limits = Limits(max_buffer=max_message)
        self.max_queued_bytes = max_queued_bytes
        self.max_addrs_per_connection = max_addrs_per_connection
        self.backlog = backlog
        self.dialect = dialect
        self.routing: dict[str, dict[Any, _Conn]] = {}       # group -> member address -> its connection
        self.physical: dict[Any, set] = {}                   # member address -> physical addresses
        self.names: dict[Any, str] = {}                      # member address -> logical name
        self.conns: set[_Conn] = set()
        self.stats: dict[str, int] = dict.fromkeys((
            "connections_accepted", "connections_refused", "connections_closed", "handshake_timeouts",
            "request_timeouts", "malformed_requests", "unexpected_requests", "accept_errors", "requests",
            "connects", "connects_refused", "disconnects", "gossip_gets", "pings", "closes", "messages_routed",
            "bytes_routed", "multicasts_routed", "unicasts_routed", "dropped_no_member", "dropped_not_registered",
            "dropped_queue_full", "suspects_sent"), 0)
        self._rl = RateLimitedLog(log)
        self._sel: selectors.BaseSelector | None = None
        self._server: socket.socket | None = None
        self._running = False
        self._thread: threading.Thread | None = None
        self._accept_paused_until = 0.0
        self._wake_r, self._wake_w = socket.socketpair()

    # ---- life cycle ----

    def open(self) -> None:
        """Bind and listen (port 0: an ephemeral port, then in :attr:`port`)."""
        family = socket.AF_INET6 if ":" in self.bind_addr else socket.AF_INET
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((self.bind_addr, self.port))
        srv.listen(self.backlog)
        srv.setblocking(False)
        self.port = srv.getsockname()[1]
        self._server = srv
        self._sel = selectors.DefaultSelector()
        self._sel.register(srv, selectors.EVENT_READ, None)
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._running = True
        log.info("GossipRouter listening on %s:%d (max_connections=%d)", self.bind_addr, self.port,
                 self.max_connections)

    def start(self) -> "GossipRouter":
        self.open()
        self._thread = threading.Thread(target=self._loop, name=f"jgpy-gossip-router-{self.port}", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        if self._server is None:
            self.open()
        self._loop()

    def stop(self) -> None:
        self._running = False
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(10.0)
            self._thread = None

    def _shutdown(self) -> None:
        for c in list(self.conns):
            self._close(c, "router stopping", tear=False)
        if self._sel is not None:
            self._sel.close()
        if self._server is not None:
            self._server.close()
            self._server = None
        self._wake_r.close()
        self._wake_w.close()
        log.info("GossipRouter on port %d stopped: %s", self.port, self.stats_line())

    def stats_line(self) -> str:
        s = self.stats
        return (f"{len(self.conns)} connections, {sum(len(m) for m in self.routing.values())} members in "
                f"{len(self.routing)} clusters; accepted {s['connections_accepted']}, refused "
                f"{s['connections_refused']}, routed {s['messages_routed']} ({s['bytes_routed']} bytes), dropped "
                f"queue-full {s['dropped_queue_full']} no-member {s['dropped_no_member']}, malformed "
                f"{s['malformed_requests']}, timeouts {s['handshake_timeouts'] + s['request_timeouts']}")

    # ---- the loop ----

    def _loop(self) -> None:
        sel = self._sel
        assert sel is not None
        last_sweep = time.monotonic()
        try:
            while self._running:
                try:
                    events = sel.select(0.5)
                except InterruptedError:
                    continue
                for key, mask in events:
                    if key.data is None:
                        self._accept()
                    elif key.data == "wake":
                        try:
                            self._wake_r.recv(64)
                        except OSError:
                            pass
                    else:
                        c = key.data
                        try:
                            if mask & selectors.EVENT_WRITE and not c.closed:
                                self._flush(c)
                            if mask & selectors.EVENT_READ and not c.closed:
                                self._read(c)
                        except Exception:  # noqa: BLE001 - one connection's failure never ends the loop
                            self._rl.exception("conn-failed", "GossipRouter: handling a connection failed")
                            self._close(c, "internal error", tear=True)
                now = time.monotonic()
                if self._accept_paused_until and now >= self._accept_paused_until:
                    self._accept_paused_until = 0.0
                    sel.register(self._server, selectors.EVENT_READ, None)
                if now - last_sweep >= 0.5:
                    last_sweep = now
                    self._sweep(now)
        finally:
            self._shutdown()

    def _accept(self) -> None:
        srv = self._server
        assert srv is not None and self._sel is not None
        for _ in range(64):
            try:
                sock, peer = srv.accept()
            except BlockingIOError:
                return
            except OSError as e:
                self.stats["accept_errors"] += 1
                self._rl.warning("accept", "GossipRouter: accept failed (%s): pausing %.1f s", e, ACCEPT_BACKOFF)
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._accept_paused_until = time.monotonic() + ACCEPT_BACKOFF
                    self._sel.unregister(srv)        # registered again by the loop after the pause
                return
            if len(self.conns) >= self.max_connections:
                self.stats["connections_refused"] += 1
                self._rl.warning("refused", "GossipRouter: %d connections open (max_connections): refused one",
                                 len(self.conns))
                sock.close()
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            c = _Conn(sock, peer, time.monotonic())
            self.conns.add(c)
            self.stats["connections_accepted"] += 1
            self._sel.register(sock, selectors.EVENT_READ, c)

    # ---- reading ----

    def _read(self, c: _Conn) -> None:
        try:
            chunk = c.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._close(c, f"receive failed: {e}", tear=True)
            return
        if not chunk:
            self._close(c, "closed by the peer", tear=True)
            return
        if not c.inbuf:
            c.partial_since = time.monotonic()
        c.inbuf += chunk
        if len(c.inbuf) < c.need:
            return
        data = bytes(c.inbuf)
        pos = 0
        while pos < len(data) and not c.closed:
            try:
                req, end = gossip.decode_request(self.dialect, data, self._limits_for(c), False, pos)
            except NeedMore as e:
                c.need = e.need - pos
                if c.need > self.limits.max_buffer + 65536:
                    self._malformed(c, f"a request of more than {c.need} bytes")
                    return
                break
            except WireFormatError as e:
                self._malformed(c, str(e))
                return
            pos, c.need = end, 0
            self.stats["requests"] += 1
            self._handle(c, req)
        if c.closed:
            return
        del c.inbuf[:pos]
        if c.inbuf:
            if pos:
                c.partial_since = time.monotonic()
        else:
            c.partial_since = 0.0

    def _limits_for(self, c: _Conn) -> Limits:
        return self.limits if c.handshaken else Limits(max_buffer=0, max_addresses=self.limits.max_addresses)

    def _malformed(self, c: _Conn, why: str) -> None:
        self.stats["malformed_requests"] += 1
        self._rl.warning("malformed", "GossipRouter: malformed request from %s, closing its connection: %s",
                         c.label(), why)
        self._close(c, "malformed request", tear=True)

    # ---- requests ----

    def _handle(self, c: _Conn, req: GossipData) -> None:
        t = req.type
        if not c.handshaken:
            if t not in (gossip.CONNECT, gossip.GOSSIP_GET):
                self.stats["unexpected_requests"] += 1
                self._malformed(c, f"first request is {gossip.TYPE_NAMES.get(t, t)}, not CONNECT or GOSSIP_GET")
                return
            c.handshaken = True
        if t == gossip.MESSAGE:
            self._route(c, req)
        elif t == gossip.CONNECT:
            self._connect(c, req)
        elif t == gossip.GOSSIP_GET:
            self._gossip_get(c, req)
        elif t == gossip.PING:
            self.stats["pings"] += 1
        elif t == gossip.DISCONNECT:
            self._disconnect(c, req)
        elif t == gossip.CLOSE:
            self.stats["closes"] += 1
            self._close(c, "CLOSE", tear=False)
        else:
            self.stats["unexpected_requests"] += 1         # 2.12 ignores other types

    def _connect(self, c: _Conn, req: GossipData) -> None:
        group, addr = req.group, req.addr
        if group is None or addr is None or (len(c.addrs) >= self.max_addrs_per_connection
                                            and (group, addr) not in c.addrs):
            self.stats["connects_refused"] += 1
            self._send(c, bytes([gossip.OP_FAIL]), force=True)
            self._close(c, "CONNECT refused", tear=False)
            return
        members = self.routing.setdefault(group, {})
        old = members.get(addr)
        if old is not None and old is not c:
            self._close(old, "replaced by a new connection of the same member", tear=False)   # 2.12 too
            members = self.routing.setdefault(group, {})
        members[addr] = c
        if (group, addr) not in c.addrs:
            c.addrs.append((group, addr))
        c.groups.add(group)
        if req.logical_name is not None and isinstance(addr, UUID):
            self.names[addr] = req.logical_name
            set_logical_name(addr, req.logical_name)
        if req.physical_addrs:
            known = self.physical.setdefault(addr, set())
            for p in req.physical_addrs:
                if p is not None and len(known) < MAX_PHYSICAL_PER_MEMBER:
                    known.add(p)
        self.stats["connects"] += 1
        self._send(c, bytes([gossip.CONNECT_OK]), force=True)
        log.debug("GossipRouter: %s registered %s (%s) under %s", c.label(), addr, req.logical_name, group)

    def _gossip_get(self, c: _Conn, req: GossipData) -> None:
        self.stats["gossip_gets"] += 1
        rsps = []
        for addr in list(self.routing.get(req.group, {}))[:32767]:
            physical = self.physical.get(addr)
            rsps.append(PingData(addr, None, None, True, self.names.get(addr), list(physical) if physical else None))
        self._send(c, gossip.encode_members(self.dialect, rsps), force=True)

    def _disconnect(self, c: _Conn, req: GossipData) -> None:
        self.stats["disconnects"] += 1
        if (req.group, req.addr) in c.addrs:
            self._remove(req.group, req.addr, c)
            c.addrs.remove((req.group, req.addr))
        self._send(c, gossip.encode(self.dialect, GossipData(gossip.DISCONNECT_OK)), force=True)

    def _route(self, c: _Conn, req: GossipData) -> None:
        group, buf = req.group, req.buffer
        if not buf:
            self._rl.warning("null-msg", "GossipRouter: %s sent a MESSAGE without a buffer", c.label())
            return
        if group is None or group not in c.groups:
            self.stats["dropped_not_registered"] += 1
            self._rl.warning("not-registered", "GossipRouter: dropped a MESSAGE from %s for a cluster it did not "
                             "register under", c.label())
            return
        members = self.routing.get(group)
        if req.addr is None:
            prefix = gossip.message_prefix(self.dialect, None, None, len(buf))
            self.stats["multicasts_routed"] += 1
            for target in list(members.values()) if members else ():
                if target is not c:
                    self._forward(target, prefix, buf)
            return
        target = members.get(req.addr) if members else None
        if target is None:
            self.stats["dropped_no_member"] += 1
            return
        self.stats["unicasts_routed"] += 1
        self._forward(target, gossip.message_prefix(self.dialect, None, req.addr, len(buf)), buf)

    def _forward(self, target: _Conn, prefix: bytes, buf: bytes) -> None:
        if self._send(target, prefix, buf):
            self.stats["messages_routed"] += 1
            self.stats["bytes_routed"] += len(buf)

    # ---- writing ----

    def _send(self, c: _Conn, data: bytes, more: bytes | None = None, force: bool = False) -> bool:
        """Queue ``data`` (+ ``more``) on ``c`` and write what the socket takes; False when the queue is full
        (nothing queued: ``force`` queues answers anyway, they are small and one per request)."""
        if c.closed:
            return False
        size = len(data) + (len(more) if more else 0)
        if not force and c.out_bytes + size > self.max_queued_bytes:
            self.stats["dropped_queue_full"] += 1
            self._rl.warning("queue-full", "GossipRouter: the send queue of %s is full: dropped a message",
                             c.label())
            return False
        c.out.append(memoryview(data))
        if more:
            c.out.append(memoryview(more))
        c.out_bytes += size
        if not c.want_write:
            self._flush(c)
        return True

    def _flush(self, c: _Conn) -> None:
        while c.out and not c.closed:
            try:
                n = c.sock.sendmsg(list(islice(c.out, 64)))
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self._close(c, f"send failed: {e}", tear=True)
                return
            c.out_bytes -= n
            while n and c.out:
                head = c.out[0]
                if len(head) <= n:
                    n -= len(head)
                    c.out.popleft()
                else:
                    c.out[0] = head[n:]
                    n = 0
            if c.out and n == 0:
                break
        want = bool(c.out)
        if want != c.want_write and not c.closed and self._sel is not None:
            c.want_write = want
            self._sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if want else 0), c)

    # ---- closing ----

    def _remove(self, group: str, addr, c: _Conn) -> None:
        members = self.routing.get(group)
        if members is not None and members.get(addr) is c:
            del members[addr]
            if not members:
                del self.routing[group]
        if not any(addr in m for m in self.routing.values()):
            self.physical.pop(addr, None)
            self.names.pop(addr, None)
            if isinstance(addr, UUID):
                remove_logical_name(addr)

    def _close(self, c: _Conn, why: str, tear: bool) -> None:
        """Close ``c`` and drop its registrations; ``tear`` (the connection broke, not CLOSE): its clusters'
        other members get a SUSPECT for each member it registered."""
        if c.closed:
            return
        c.closed = True
        self.conns.discard(c)
        self.stats["connections_closed"] += 1
        log.debug("GossipRouter: closing %s: %s", c.label(), why)
        if self._sel is not None:
            try:
                self._sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
        try:
            c.sock.close()
        except OSError:
            pass
        registered = [(g, a) for g, a in c.addrs if self.routing.get(g, {}).get(a) is c]
        for g, a in registered:
            self._remove(g, a, c)
        if tear and registered:
            targets = {other for g in c.groups for other in self.routing.get(g, {}).values()}
            for a in dict.fromkeys(a for _, a in registered):
                data = gossip.encode(self.dialect, GossipData(gossip.SUSPECT, suspect=a))
                for other in targets:
                    if self._send(other, data, force=True):
                        self.stats["suspects_sent"] += 1
        c.inbuf = bytearray()
        c.out.clear()

    def _sweep(self, now: float) -> None:
        for c in list(self.conns):
            if not c.handshaken and now - c.accepted > self.handshake_timeout:
                self.stats["handshake_timeouts"] += 1
                self._rl.warning("handshake-timeout", "GossipRouter: %s sent no complete first request in %.1f s: "
                                 "closed", c.label(), self.handshake_timeout)
                self._close(c, "handshake timeout", tear=False)
            elif c.handshaken and c.partial_since and now - c.partial_since > self.request_timeout:
                self.stats["request_timeouts"] += 1
                self._rl.warning("request-timeout", "GossipRouter: %s left a request incomplete for %.1f s: closed",
                                 c.label(), self.request_timeout)
                self._close(c, "request timeout", tear=True)


def main(argv: list[str] | None = None) -> int:
    """The ``gossip-router`` command."""
    p = argparse.ArgumentParser(prog="python -m jgpy gossip-router", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run(p.parse_args(argv))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", "-port", type=int, default=12001, help="port to listen on (default 12001, as 2.12)")
    p.add_argument("--bind-addr", "-bindaddress", "-bind_addr", default="127.0.0.1", dest="bind_addr",
                   help="address to bind to (default 127.0.0.1)")
    p.add_argument("--max-connections", type=int, default=512, help="connections at most (default 512)")
    p.add_argument("--handshake-timeout", type=float, default=10.0,
                   help="seconds a new connection has for its first request (default 10)")
    p.add_argument("--request-timeout", type=float, default=30.0,
                   help="seconds a started request has to arrive whole (default 30)")
    p.add_argument("--max-message", type=int, default=1 << 20, help="longest MESSAGE in bytes (default 1 MiB)")
    p.add_argument("--max-queued-bytes", type=int, default=4 << 20,
                   help="bytes queued per connection at most (default 4 MiB)")
    p.add_argument("--stats-interval", type=float, default=60.0,
                   help="seconds between statistics log lines (0: none; default 60)")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")


def run(args: argparse.Namespace) -> int:
    level = getattr(logging, str(args.log_level).upper(), logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)          # also when `python -m jgpy` configured logging first
    router = GossipRouter(args.port, args.bind_addr, max_connections=args.max_connections,
                          handshake_timeout=args.handshake_timeout, request_timeout=args.request_timeout,
                          max_message=args.max_message, max_queued_bytes=args.max_queued_bytes)
    try:
        router.open()
    except OSError as e:
        log.error("GossipRouter: cannot listen on %s:%d: %s", args.bind_addr, args.port, e)
        return 1

    def on_signal(signum, frame) -> None:
        log.info("GossipRouter: %s received, stopping", signal.Signals(signum).name)
        router._running = False
        try:
            router._wake_w.send(b"x")
        except OSError:
            pass
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stats_stop = threading.Event()
    if args.stats_interval > 0:
        def stats() -> None:
            while not stats_stop.wait(args.stats_interval):
                log.info("GossipRouter stats: %s", router.stats_line())
        threading.Thread(target=stats, name="jgpy-gossip-router-stats", daemon=True).start()
    print(f"GossipRouter listening on {args.bind_addr}:{router.port}", flush=True)
    try:
        router.serve_forever()
    finally:
        stats_stop.set()
    return 0
