"""FD_SOCK: failure detection over a ring of TCP connections (``org.jgroups.protocols.FD_SOCK`` of 2.12).

Every member listens on a TCP server socket (``bind_addr``, ``start_port`` 0 = ephemeral) and connects
to the server socket of its right-hand neighbour in the view (the *ping destination*; the last member
monitors the first). Nothing is ever exchanged on these connections except the byte ``0x09``
(NORMAL_TERMINATION), written by a member that goes away on purpose: the server side to each connected
client when the server socket is closed gracefully, the client side when it stops monitoring. A
connection that ends (EOF or error) without a preceding 0x09 means the neighbour crashed: the
monitoring member multicasts ``SUSPECT(mbrs=[neighbour])``, re-sends it every ``suspect_msg_interval``
ms until a view without the neighbour arrives (Java's BroadcastTask), and moves on to the next
neighbour. A received SUSPECT is passed up (and down) as ``Event(SUSPECT)`` for each suspect only by
the first member of the view that is not suspected (the coordinator, or its successor); our own
multicast SUSPECT comes back to us through the transport's loopback, so a monitoring coordinator
suspects too.

Server socket addresses travel in FD_SOCK messages (all OOB, never passed up): the pinger thread, when
it first starts, multicasts I_HAVE_SOCK(mbr=self, sock_addr) and asks the coordinator for its cache
(GET_CACHE -> GET_CACHE_RSP, ``num_tries`` times, ``get_cache_timeout`` ms each). A missing address is
asked for with WHO_HAS_SOCK(mbr=X), first unicast to X then multicast (500 ms each, as in Java),
answered by X itself or by anybody who has X in the cache.

All socket work runs on dedicated daemon threads (the acceptor, one per accepted client, the pinger);
every blocking call wakes up at least every 0.5 s, so all of them end within about a second of
``stop()``, and the sockets are closed.

What a stranger can hold (jgpy; Java 2.12 accepts any number of clients, a thread each, and its acceptor
ends for good at the first failed ``accept()``): at most ``max_connections`` clients at once. When all are
taken, the oldest client from a host that is not a member's (the hosts of the members' cached server
sockets) makes room; if all come from members' hosts, the new one is closed (a member's monitor is never closed for a
stranger's). A failed ``accept()`` (EMFILE, ENFILE, ENOBUFS ...) is retried after a back-off (10 ms doubling
to 1 s). A client is not asked for anything within a deadline: a member's monitor sends nothing until it
leaves (0x09), so silence is what a legitimate client does. The cache keeps at most ``MAX_STRANGERS`` entries
for non-members (I_HAVE_SOCK and GET_CACHE_RSP can name anybody), and only members are recorded as
suspected.
"""

from __future__ import annotations

import collections
import errno
import os
import selectors
import socket
import struct
import threading
import time
from typing import Any

from jgpy._core.address import IpAddress
from jgpy._core.headers import FdSockHeader
from jgpy._core.message import Message
from jgpy.errors import ConfigError
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.netutil import ACCEPT_CONNECTION_ERRORS, Backoff, refuse_self_connection, resolve_bind_addr
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_str
from jgpy.stack.protocol import UP_HEADER, Protocol
from jgpy.stack.promise import Promise

NORMAL_TERMINATION = 9
ABNORMAL_TERMINATION = -1
_POLL = 0.5          # seconds: the longest any blocking socket call waits before looking at the stop flag
_JOIN = 2.0          # seconds: how long stop() waits for a thread
MAX_STRANGERS = 64   # cache entries for non-members at most (the oldest go first)


class _PingConn:
    """The client connection to the server socket of the member we monitor."""

    __slots__ = ("sock", "dest", "regular", "_lock")

    def __init__(self, sock: socket.socket, dest) -> None:
        self.sock = sock
        self.dest = dest
        self.regular = False         # closed on purpose (new ping destination, stop): not a suspicion
        self._lock = threading.Lock()

    def send_signal(self, signal: int) -> None:
        with self._lock:
            if self.sock is None:
                return
            try:
                self.sock.sendall(bytes([signal]))
            except OSError:
                pass

    def close(self) -> None:
        with self._lock:
            sock, self.sock = self.sock, None
        _close(sock)


class _ClientConnection:
    """Server side of one accepted connection: reads until 0x09 or EOF (Java's ClientConnectionHandler)."""

    def __init__(self, owner: "FD_SOCK", sock: socket.socket, peer) -> None:
        self.owner = owner
        self.sock = sock
        self.peer = peer
        self.since = time.monotonic()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"FD_SOCK client connection handler {peer[0]}:{peer[1]}")

    def start(self) -> None:
        self.thread.start()

    def stop(self, graceful: bool) -> None:
        with self._lock:
            sock, self.sock = self.sock, None
        if sock is None:
            return
        if graceful:
            try:
                sock.sendall(bytes([NORMAL_TERMINATION]))
            except OSError:
                pass
        _close(sock)

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    sock = self.sock
                if sock is None:
                    return
                try:
                    data = sock.recv(256)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data or NORMAL_TERMINATION in data:
                    return
        finally:
            self.stop(False)
            self.owner._client_done(self)


def _connect(sock: socket.socket, sockaddr, timeout_ms: int, stop: threading.Event) -> None:
    """``connect`` within ``timeout_ms`` (<= 0: no limit) that gives up within 0.1 s of ``stop`` being set."""
    sock.setblocking(False)
    err = sock.connect_ex(sockaddr)
    if err == 0:
        refuse_self_connection(sock)
        return
    if err not in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
        raise OSError(err, os.strerror(err))
    deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_WRITE)
        while True:
            if stop.is_set():
                raise OSError(errno.ECANCELED, "stopped")
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                raise socket.timeout("connect timed out")
            if sel.select(left):
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                refuse_self_connection(sock)
                return


def _close(sock: socket.socket | None) -> None:
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)      # wakes up a thread blocked on it
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Pinger:
    __slots__ = ("thread", "stop")

    def __init__(self, thread: threading.Thread, stop: threading.Event) -> None:
        self.thread = thread
        self.stop = stop


class FD_SOCK(Protocol):  # noqa: N801 - the JGroups name
    NAME = "FD_SOCK"

    bind_addr = Property(to_str, None, "interface of the server socket (IP, host name, or LOOPBACK/SITE_LOCAL/"
                         "GLOBAL/NON_LOOPBACK; default: a non-loopback address, as in JGroups); jgroups.bind_addr "
                         "overrides it", system_property=("jgroups.bind_addr", "bind.address"))
    get_cache_timeout = Property(to_int, 1000, "ms to wait for the coordinator's GET_CACHE_RSP")
    suspect_msg_interval = Property(to_int, 5000, "ms between re-broadcasts of outstanding SUSPECT messages")
    num_tries = Property(to_int, 3, "GET_CACHE attempts to the coordinator before giving up")
    start_port = Property(to_int, 0, "port of the server socket (0: ephemeral)")
    client_bind_port = Property(to_int, 0, "local port of the ping socket (0: ephemeral)")
    port_range = Property(to_int, 50, "ports to try above start_port / client_bind_port")
    keep_alive = Property(to_bool, True, "SO_KEEPALIVE on the ping socket")
    sock_conn_timeout = Property(to_int, 1000, "ms to wait for the ping socket to connect")
    max_connections = Property(to_int, 64, "jgpy: max client connections the server socket holds at once (a thread "
                               "each); when all are taken, the oldest from a host that is no member's makes room, "
                               "else the new one is closed")
    srv_sock_bind_addr = Property(to_str, None, "(no effect)", deprecated="use bind_addr; the property is ignored")

    IGNORED_PROPERTIES = {
        "bind_interface": ignored("use bind_addr"),
        "bind_interface_str": ignored("use bind_addr"),
    }

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()              # members, pingable, cache, suspected, bcast set
        self._pinger_lock = threading.RLock()       # starting/stopping the pinger thread
        self.members: list = []
        self.pingable_mbrs: list = []
        self.suspected_mbrs: set = set()
        self.cache: dict[Any, IpAddress] = {}       # member -> its server socket address
        self.ping_dest = None
        self._addr = None
        self._config_bind_addr: str | None = None
        self._host: str | None = None               # bind_addr resolved when the server socket starts
        # server side
        self.srv_sock: socket.socket | None = None
        self.srv_sock_addr: IpAddress | None = None
        self._acceptor: threading.Thread | None = None
        self._acceptor_stop: threading.Event | None = None
        self._clients: list[_ClientConnection] = []
        self._clients_lock = threading.Lock()
        # client side
        self._pinger: _Pinger | None = None
        self._ping_conn: _PingConn | None = None
        self._sock_mutex = threading.Lock()
        self._ping_addr_promise = Promise()
        self._get_cache_promise = Promise()
        self._srv_sock_sent = False
        self._got_cache_from_coord = False
        # broadcast task
        self._bcast_suspects: set = set()
        self._bcast_task = None
        self._rl = RateLimitedLog(self.log)
        self.counters = {"accept_errors": 0, "clients_refused": 0, "clients_evicted": 0}
        # stats
        self.num_suspect_events = 0
        self.suspect_history: collections.deque = collections.deque(maxlen=20)

    # ---- life cycle ----

    def init(self) -> None:
        if self.num_tries < 1:
            self.num_tries = 1
        if self.max_connections < 1:
            raise ConfigError(f"FD_SOCK max_connections={self.max_connections}: must be >= 1")

    def stop(self) -> None:
        self._stop_pinger_thread()
        self.stop_server_socket(graceful=True)
        self._bcast_remove_all()
        with self._lock:
            self.suspected_mbrs.clear()
        self._srv_sock_sent = False          # a reconnect announces its new server socket again
        self._got_cache_from_coord = False

    @property
    def me(self):
        return self._addr if self._addr is not None else self.local_addr

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.UNSUSPECT:
            self._bcast_remove(evt.arg)
        elif t == EventType.CONNECT:
            ret = self.down_prot.down(evt)
            try:
                self.start_server_socket()
            except OSError as e:
                raise ConfigError(f"FD_SOCK: failed to start the server socket on {self._bind_host()}: {e}") from e
            return ret
        elif t == EventType.DISCONNECT:
            self.stop_server_socket(graceful=True)
        elif t == EventType.SET_LOCAL_ADDRESS:
            self._addr = evt.arg
        elif t == EventType.VIEW_CHANGE:
            self._handle_view_change(evt.arg)
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.CONFIG and isinstance(evt.arg, dict) and evt.arg.get("bind_addr") is not None:
            self._config_bind_addr = str(evt.arg["bind_addr"])
        return self.up_prot.up(evt)

    def _handle_view_change(self, view) -> None:
        mbrs = list(view.members or ()) if view is not None else []
        keep = set(mbrs)
        interrupt = start = stop = False
        with self._pinger_lock:
            with self._lock:
                self.members = mbrs
                self.suspected_mbrs &= keep
                for a in [a for a in self.cache if a not in keep]:
                    del self.cache[a]
                if mbrs:
                    self._bcast_suspects &= keep
                    if not self._bcast_suspects:
                        self._stop_bcast_task()
                self.pingable_mbrs = list(mbrs)
                self.log.debug("%s: VIEW_CHANGE received: %s", self.me, [str(m) for m in mbrs])
                if len(mbrs) > 1:
                    if self._pinger_running():
                        tmp = self._determine_ping_dest()
                        if self.ping_dest is not None and tmp is not None and tmp != self.ping_dest:
                            interrupt = True
                    else:
                        start = True
                else:
                    self.ping_dest = None
                    stop = True
            if interrupt:
                self._interrupt_pinger_thread()
            elif start:
                self._start_pinger_thread()
            elif stop:
                self._stop_pinger_thread()

    # ---- messages ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        for m in mine:
            try:
                self._handle(m, m.get_header(self.id))
            except Exception:  # noqa: BLE001 - one bad message must not hurt the batch
                self.log.exception("%s: failed handling an FD_SOCK message from %s", self.me, m.src)
        if rest:
            self.up_prot.up_batch(rest)

    def _handle(self, msg: Message, hdr: FdSockHeader) -> None:
        t = hdr.type
        me = self.me
        if t == FdSockHeader.SUSPECT:
            if hdr.mbrs:
                self.log.debug("%s: received SUSPECT from %s: suspects=%s", me, msg.src, [str(m) for m in hdr.mbrs])
                self.suspect(list(hdr.mbrs))
        elif t == FdSockHeader.WHO_HAS_SOCK:
            if me is not None and msg.src == me:
                return                                  # don't answer our own multicasts
            if hdr.mbr is None:
                return
            if me is not None and hdr.mbr == me and self.srv_sock_addr is not None:
                self._send_i_have_sock(msg.src, me, self.srv_sock_addr)
                return
            with self._lock:
                addr = self.cache.get(hdr.mbr)
            if addr is not None:
                self._send_i_have_sock(msg.src, hdr.mbr, addr)
        elif t == FdSockHeader.I_HAVE_SOCK:
            if hdr.mbr is None or hdr.sock_addr is None:
                return
            with self._lock:
                self._cache_put(hdr.mbr, hdr.sock_addr)
                wanted = self.ping_dest is not None and hdr.mbr == self.ping_dest
            self.log.debug("%s: i-have-sock: %s --> %s", me, hdr.mbr, hdr.sock_addr)
            if wanted:
                self._ping_addr_promise.set(hdr.sock_addr)
        elif t == FdSockHeader.GET_CACHE:
            with self._lock:
                cache = dict(self.cache)
            rsp = Message(msg.src, None, None, Message.OOB)
            rsp.put_header(self.id, FdSockHeader(FdSockHeader.GET_CACHE_RSP, cached_addrs=cache))
            self.down_prot.down_msg(rsp)
        elif t == FdSockHeader.GET_CACHE_RSP:
            if hdr.cached_addrs is None:
                return
            self._get_cache_promise.set(dict(hdr.cached_addrs))

    def _cache_put(self, mbr, addr: IpAddress) -> None:
        """cache[mbr] = addr (lock held); at most MAX_STRANGERS entries for non-members, the oldest go first."""
        cache = self.cache
        cache.pop(mbr, None)
        cache[mbr] = addr
        if mbr in self.members or len(cache) <= len(self.members) + MAX_STRANGERS:
            return
        members = set(self.members)
        strangers = [m for m in cache if m not in members]
        for m in strangers[:len(strangers) - MAX_STRANGERS]:
            del cache[m]

    # ---- suspicion ----

    def suspect(self, suspects: list) -> None:
        """Record the suspects; the first member not suspected passes SUSPECT up and down (Java's rule)."""
        if not suspects:
            return
        with self._lock:
            for s in suspects:
                self.suspect_history.append(s)
                if s in self.members:               # nobody else counts for who is eligible: keep no others
                    self.suspected_mbrs.add(s)
            eligible = [m for m in self.members if m not in self.suspected_mbrs]
        me = self.me
        if me is not None and eligible and eligible[0] == me:
            self.log.debug("%s: suspecting %s", me, [str(s) for s in suspects])
            for s in suspects:
                self.up_prot.up(Event(EventType.SUSPECT, s))
                self.down_prot.down(Event(EventType.SUSPECT, s))

    def broadcast_suspect_message(self, mbr) -> None:
        """Multicast SUSPECT(mbr) now and keep re-sending it until a view without ``mbr`` arrives."""
        if mbr is None:
            return
        self.log.debug("%s: suspecting %s", self.me, mbr)
        msg = Message(None, None, None, Message.OOB)
        msg.put_header(self.id, FdSockHeader(FdSockHeader.SUSPECT, mbrs=[mbr]))
        self.down_prot.down_msg(msg)
        self._bcast_add(mbr)
        if self.stats:
            self.num_suspect_events += 1
            self.suspect_history.append(mbr)

    def _send_i_have_sock(self, dest, mbr, addr: IpAddress) -> None:
        msg = Message(dest, None, None, Message.OOB)
        msg.put_header(self.id, FdSockHeader(FdSockHeader.I_HAVE_SOCK, mbr=mbr, sock_addr=addr))
        self.down_prot.down_msg(msg)

    # ---- broadcast task (re-sends SUSPECT until the view no longer has the suspects) ----

    def _bcast_add(self, mbr) -> None:
        with self._lock:
            if mbr is None or mbr not in self.members:
                return
            if mbr not in self._bcast_suspects:
                self._bcast_suspects.add(mbr)
                if self._bcast_task is None or self._bcast_task.done:
                    timer = self.stack.timer if self.stack is not None else None
                    if timer is not None:
                        self._bcast_task = timer.schedule_with_fixed_delay(
                            self.suspect_msg_interval, self.suspect_msg_interval, self._bcast_run,
                            "FD_SOCK BroadcastTask")

    def _bcast_remove(self, mbr) -> None:
        if mbr is None:
            return
        with self._lock:
            self._bcast_suspects.discard(mbr)
            if not self._bcast_suspects:
                self._stop_bcast_task()

    def _bcast_remove_all(self) -> None:
        with self._lock:
            self._bcast_suspects.clear()
            self._stop_bcast_task()

    def _stop_bcast_task(self) -> None:
        task, self._bcast_task = self._bcast_task, None
        if task is not None:
            task.cancel()

    def _bcast_run(self) -> None:
        with self._lock:
            if not self._bcast_suspects:
                self._stop_bcast_task()
                return
            mbrs = list(self._bcast_suspects)
        msg = Message(None, None, None, Message.OOB)
        msg.put_header(self.id, FdSockHeader(FdSockHeader.SUSPECT, mbrs=mbrs))
        self.down_prot.down_msg(msg)

    # ---- server socket ----

    def _bind_host(self) -> str:
        spec = self.bind_addr if self.bind_addr is not None else self._config_bind_addr
        return resolve_bind_addr(spec)

    def start_server_socket(self) -> None:
        """Listen on bind_addr (start_port .. start_port+port_range; 0: ephemeral) and start the acceptor."""
        if self._acceptor is not None and self._acceptor.is_alive() and self.srv_sock is not None:
            return
        host = self._host = self._bind_host()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        port = max(0, self.start_port)
        end = port + max(0, self.port_range)
        while True:
            s = socket.socket(family, socket.SOCK_STREAM)
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # Java's ServerSocket default on Unix
                s.bind((host, port))
                s.listen(50)
                break
            except OSError:
                s.close()
                if port == 0 or port >= end:
                    raise
                port += 1
        s.settimeout(_POLL)
        self.srv_sock = s
        self.srv_sock_addr = IpAddress(host, s.getsockname()[1])
        stop = threading.Event()
        self._acceptor_stop = stop
        self._acceptor = threading.Thread(target=self._accept_loop, args=(s, stop), daemon=True,
                                          name=f"FD_SOCK server socket acceptor {self.srv_sock_addr}")
        self._acceptor.start()
        self.log.debug("%s: FD_SOCK server socket listening on %s", self.me, self.srv_sock_addr)

    def stop_server_socket(self, graceful: bool = True) -> None:
        """Close the server socket; with ``graceful`` every connected client first gets 0x09."""
        stop, acceptor, srv = self._acceptor_stop, self._acceptor, self.srv_sock
        self._acceptor_stop = self._acceptor = self.srv_sock = None
        if stop is not None:
            stop.set()
        _close(srv)
        with self._clients_lock:
            clients, self._clients = self._clients, []
        for c in clients:
            c.stop(graceful)
        cur = threading.current_thread()
        for t in [acceptor] + [c.thread for c in clients]:
            if t is not None and t is not cur and t.is_alive():
                t.join(_JOIN)

    def _accept_loop(self, srv: socket.socket, stop: threading.Event) -> None:
        backoff = Backoff()
        while not stop.is_set():
            try:
                sock, peer = srv.accept()
            except socket.timeout:
                continue
            except OSError as e:
                if stop.is_set():
                    break
                if e.errno in ACCEPT_CONNECTION_ERRORS:
                    continue
                self.counters["accept_errors"] += 1
                delay = backoff.failed()
                self._rl.warning("accept", "%s: accept() failed on the FD_SOCK server socket: %s; accepting again in "
                                 "%.0f ms", self.me, e, delay * 1000)
                stop.wait(delay)
                continue
            backoff.succeeded()
            try:
                sock.settimeout(_POLL)
            except OSError:
                _close(sock)
                continue
            conn = _ClientConnection(self, sock, peer)
            with self._clients_lock:
                if stop.is_set():
                    _close(sock)
                    break
                admitted, evicted = self._make_room(peer)
                if admitted:
                    self._clients.append(conn)
            if evicted is not None:
                evicted.stop(False)
            if not admitted:
                self.counters["clients_refused"] += 1
                self._rl.warning("full", "%s: %d FD_SOCK clients, all from members' hosts (max_connections=%d): "
                                 "closed the connection from %s:%s", self.me, len(self._clients),
                                 self.max_connections, peer[0], peer[1])
                _close(sock)
                continue
            conn.start()

    def _make_room(self, peer) -> tuple[bool, _ClientConnection | None]:
        """Room for a client from ``peer`` (clients lock held): (admitted, the client to close for it)."""
        clients = self._clients
        if len(clients) < self.max_connections:
            return True, None
        with self._lock:
            members_hosts = {a.host for m, a in self.cache.items() if m in self.members}
        victim = min((c for c in clients if c.peer[0] not in members_hosts), key=lambda c: c.since, default=None)
        if victim is None:
            return False, None
        clients.remove(victim)
        self.counters["clients_evicted"] += 1
        return True, victim

    def _client_done(self, conn: _ClientConnection) -> None:
        with self._clients_lock:
            try:
                self._clients.remove(conn)
            except ValueError:
                pass

    # ---- the pinger ----

    def _pinger_running(self) -> bool:
        p = self._pinger
        return p is not None and p.thread.is_alive() and not p.stop.is_set()

    def _start_pinger_thread(self) -> None:
        with self._pinger_lock:
            if self._pinger_running():
                return
            stop = threading.Event()
            t = threading.Thread(target=self._run_pinger, args=(stop,), daemon=True, name=f"FD_SOCK pinger {self.me}")
            self._pinger = _Pinger(t, stop)
            t.start()

    def _interrupt_pinger_thread(self) -> None:
        """Close the ping socket on purpose: the pinger moves on to the new ping destination, no suspicion."""
        if self._pinger_running():
            self._teardown_ping_socket(regular=True)

    def _stop_pinger_thread(self) -> None:
        with self._pinger_lock:
            p, self._pinger = self._pinger, None
            if p is not None:
                p.stop.set()
            self._ping_addr_promise.set(None)
            self._get_cache_promise.set(None)
            self._send_ping_signal(NORMAL_TERMINATION)
            self._teardown_ping_socket(regular=True)
            if p is not None and p.thread is not threading.current_thread():
                p.thread.join(_JOIN)

    def _send_ping_signal(self, signal: int) -> None:
        with self._sock_mutex:
            conn = self._ping_conn
        if conn is not None:
            conn.send_signal(signal)

    def _teardown_ping_socket(self, regular: bool = False, conn: _PingConn | None = None) -> None:
        with self._sock_mutex:
            if conn is None:
                conn = self._ping_conn
            if conn is not None and conn is self._ping_conn:
                self._ping_conn = None
        if conn is not None:
            if regular:
                conn.regular = True
            conn.close()

    def _determine_ping_dest(self):
        me = self.me
        with self._lock:
            pingable = self.pingable_mbrs
            if len(pingable) < 2 or me is None:
                return None
            for i, m in enumerate(pingable):
                if m == me:
                    return pingable[(i + 1) % len(pingable)]
        return None

    def _remove_pingable(self, mbr) -> None:
        with self._lock:
            try:
                self.pingable_mbrs.remove(mbr)
            except ValueError:
                pass

    def _run_pinger(self, stop: threading.Event) -> None:
        try:
            self._pinger_loop(stop)
        except Exception:  # noqa: BLE001 - log, never die silently
            self.log.exception("%s: FD_SOCK pinger failed", self.me)
        self.log.debug("%s: pinger thread terminated", self.me)

    def _pinger_loop(self, stop: threading.Event) -> None:
        # 1. multicast our own server socket address so everybody can update the cache
        if not self._srv_sock_sent and self.srv_sock_addr is not None:
            self._send_i_have_sock(None, self.me, self.srv_sock_addr)
            self._srv_sock_sent = True
        # 2. get the cache from the coordinator (once)
        if not self._got_cache_from_coord:
            self._get_cache_from_coordinator(stop)
            self._got_cache_from_coord = True
        while not stop.is_set():
            dest = self._determine_ping_dest()
            with self._lock:
                self.ping_dest = dest
            self.log.debug("%s: ping_dest is %s, pingable_mbrs=%s", self.me, dest,
                           [str(m) for m in self.pingable_mbrs])
            if dest is None or stop.is_set():
                break
            ping_addr = self._fetch_ping_address(dest, stop)
            if ping_addr is None:
                if stop.is_set():
                    break
                self.log.debug("%s: socket address of %s could not be fetched, retrying", self.me, dest)
                stop.wait(1.0)
                continue
            conn = self._setup_ping_socket(dest, ping_addr, stop)
            if conn is None:
                if stop.is_set():
                    break
                self.log.debug("%s: could not connect to %s at %s", self.me, dest, ping_addr)
                self.broadcast_suspect_message(dest)
                self._remove_pingable(dest)
                continue
            if stop.is_set():
                conn.send_signal(NORMAL_TERMINATION)
                self._teardown_ping_socket(True, conn)
                break
            if self._determine_ping_dest() != dest:      # the view changed while we connected
                self._teardown_ping_socket(True, conn)
                continue
            result = self._read(conn, stop)
            if stop.is_set():
                self._teardown_ping_socket(True, conn)
                break
            if result == NORMAL_TERMINATION:
                self.log.debug("%s: peer %s closed its socket gracefully", self.me, dest)
                self._remove_pingable(dest)
                self._teardown_ping_socket(True, conn)
            elif result == ABNORMAL_TERMINATION or isinstance(result, OSError):
                self._handle_socket_close(conn, result)
            else:                                           # any other byte: reconnect (as Java does)
                self._teardown_ping_socket(True, conn)

    def _read(self, conn: _PingConn, stop: threading.Event):
        """One byte from the ping socket: the byte, -1 on EOF, or the OSError."""
        while True:
            sock = conn.sock
            if sock is None:
                return ABNORMAL_TERMINATION
            try:
                data = sock.recv(1)
            except socket.timeout:
                if stop.is_set():
                    return ABNORMAL_TERMINATION
                continue
            except OSError as e:
                return e
            return data[0] if data else ABNORMAL_TERMINATION

    def _handle_socket_close(self, conn: _PingConn, why) -> None:
        regular = conn.regular
        self._teardown_ping_socket(False, conn)
        dest = conn.dest
        if not regular:
            self.log.debug("%s: peer %s closed the socket (%s)", self.me, dest,
                           type(why).__name__ if isinstance(why, BaseException) else "eof")
            self.broadcast_suspect_message(dest)
            self._remove_pingable(dest)
        else:
            self.log.debug("%s: socket to %s was closed gracefully", self.me, dest)

    def _setup_ping_socket(self, dest, addr: IpAddress, stop: threading.Event) -> _PingConn | None:
        """Connect to ``addr`` (bound to bind_addr:client_bind_port, SO_LINGER 1 s, keep_alive), within
        sock_conn_timeout; the connect gives up early when ``stop`` is set."""
        host = self._host or self._bind_host()
        family = socket.AF_INET6 if addr.is_ipv6 else socket.AF_INET
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            return None
        try:
            port = max(0, self.client_bind_port)
            attempts = 0
            bind_host = host if (":" in host) == addr.is_ipv6 else ("::" if addr.is_ipv6 else "0.0.0.0")
            while True:
                try:
                    s.bind((bind_host, port))
                    break
                except OSError:
                    attempts += 1
                    if attempts > self.port_range:
                        self.log.error("%s: failed binding the client socket to %s", self.me, dest)
                        raise
                    port += 1
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 1))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1 if self.keep_alive else 0)
            _connect(s, addr.sockaddr(), self.sock_conn_timeout, stop)
            s.settimeout(_POLL)
        except OSError:
            _close(s)
            return None
        conn = _PingConn(s, dest)
        with self._sock_mutex:
            old, self._ping_conn = self._ping_conn, conn
        if old is not None:
            old.regular = True
            old.close()
        return conn

    def _get_cache_from_coordinator(self, stop: threading.Event) -> None:
        self._get_cache_promise.reset()
        attempts = self.num_tries
        while attempts > 0 and not stop.is_set():
            with self._lock:
                coord = self.members[0] if self.members else None
            if coord is not None:
                if coord == self.me:          # we are the first member: nothing to fetch
                    return
                msg = Message(coord, None, None, Message.OOB)
                msg.put_header(self.id, FdSockHeader(FdSockHeader.GET_CACHE))
                self.down_prot.down_msg(msg)
                result = self._get_cache_promise.get(self.get_cache_timeout, reset=False, stop=stop)
                if result is not None:
                    with self._lock:
                        for mbr, addr in result.items():
                            self._cache_put(mbr, addr)
                    self.log.debug("%s: got the cache from %s", self.me, coord)
                    return
            attempts -= 1

    def _fetch_ping_address(self, mbr, stop: threading.Event) -> IpAddress | None:
        """From the cache, else ask ``mbr`` (unicast WHO_HAS_SOCK), else ask everybody (multicast)."""
        if mbr is None:
            return None
        with self._lock:
            ret = self.cache.get(mbr)
        if ret is not None:
            return ret
        if stop.is_set():
            return None
        self._ping_addr_promise.reset()
        for dest in (mbr, None):
            msg = Message(dest, None, None, Message.OOB)
            msg.put_header(self.id, FdSockHeader(FdSockHeader.WHO_HAS_SOCK, mbr=mbr))
            self.down_prot.down_msg(msg)
            ret = self._ping_addr_promise.get(500, reset=False, stop=stop)
            if ret is not None or stop.is_set():
                return ret
        return None

    # ---- diagnostics ----

    def print_cache(self) -> str:
        with self._lock:
            return "\n".join(f"{k} has server socket at {v}" for k, v in self.cache.items())

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {"num_suspect_events": self.num_suspect_events,
                    "members": [str(m) for m in self.members],
                    "pingable_mbrs": [str(m) for m in self.pingable_mbrs],
                    "ping_dest": str(self.ping_dest) if self.ping_dest is not None else None,
                    "server_socket": str(self.srv_sock_addr) if self.srv_sock_addr is not None else None,
                    "cache": {str(k): str(v) for k, v in self.cache.items()},
                    "suspected": [str(m) for m in self.suspected_mbrs],
                    "clients": len(self._clients), **self.counters}
