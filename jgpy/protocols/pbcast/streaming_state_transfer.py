"""pbcast.STREAMING_STATE_TRANSFER: the state as a stream (``protocols.pbcast.STREAMING_STATE_TRANSFER``).

The state never has to fit in memory: the provider's application writes it to an output stream
(``Receiver.get_state_stream(out, state_id)``) and the requester's application reads it from an input stream
(``Receiver.set_state_stream(inp, state_id)``), chunk by chunk.

Messages: the requester suspends STABLE and unicasts STATE_REQ (id 0, sender, state_id) to the provider. The
provider closes its BARRIER, takes the digest, answers STATE_RSP (sender, digest, ``bind_addr`` = the address
of its state server socket, or null with ``use_default_transport``), opens the BARRIER. The requester installs
the digest as pbcast.STATE_TRANSFER does (see there: the stale batches of the old NAKACK windows never reach
the application), then:

* socket mode (default): it connects to ``bind_addr`` and writes a Java ``ObjectOutputStream``:
  ``writeObject(state_id)``, ``writeObject(local_addr)`` (:mod:`jgpy.javaser`); the provider's acceptor hands
  the socket to a pool thread (``max_pool`` threads, idle ones leave after ``pool_thread_keep_alive`` ms), which
  reads both and passes the socket (buffered by ``socket_buffer_size``, which is also its SO_SNDBUF, as Java
  sets it) to ``get_state_stream``; the raw state bytes follow, and closing the socket ends the state. The
  requester's ``set_state_stream`` runs on its delivery thread: messages delivered after it come after the state.
* ``use_default_transport``: the provider's ``get_state_stream`` runs right away (on its delivery thread, so
  the state agrees with the digest) and every ``socket_buffer_size`` bytes go as a STATE_PART unicast through
  the channel. The requester reads them on a separate thread from a queue of ``buffer_queue_size /
  socket_buffer_size`` chunks; its application messages are held back (in order) until the state is read.

Deliberate differences from JGroups 2.12 (which has no end-of-state marker in default-transport mode, copies a
whole STATE_PART into the reader's buffer whatever its size, and stops accepting state connections when the
pool is full): jgpy marks the last STATE_PART of a default-transport state with ``id`` 1 (Java writes 0
there and never reads it; an empty state is one empty STATE_PART), so a jgpy requester sees the end of the
stream (from a Java provider it does not: the application must know where the state ends, as in Java); jgpy
never sends a STATE_PART larger than ``socket_buffer_size``, queues up to ``max_pool`` connections beyond
``max_pool``, ends the requester's wait when a default-transport provider leaves, and reports a failed
connection to the provider at once (Java lets getState time out).

As in JGroups, in socket mode the provider's application writes the state after the digest was sent, while
messages are being delivered: without FLUSH the two are not taken atomically (the default-transport mode is
atomic). 2.12 has no ``port_range`` here: a busy ``bind_port`` is skipped upwards.

What a stranger can do (jgpy; JGroups 2.12 answers any STATE_REQ, serves any connection to the state socket
with no time limit, accepts any STATE_RSP and STATE_PART): a STATE_REQ is answered only when its sender is a
member and sent it itself; the state socket serves only a connection whose object stream names a requester
(and state id) that was answered in the last ``EXPECT_TIMEOUT`` s, once, and closes every connection at once
while no such answer is outstanding; the object stream must arrive within ``HANDSHAKE_TIMEOUT`` s of the
accept in all, and is read 64 KiB at a time, 1 MiB at most; connections wait for a pool thread in a queue of
``max_pool`` at most (more are closed); ``accept()`` errors (EMFILE ...) back off and the acceptor goes on. A
requester takes a STATE_RSP only from the member it asked while it waits, and STATE_PARTs only from that
member.
"""

from __future__ import annotations

import functools
import io
import queue
import socket
import struct
import threading
import time
from typing import Any

from jgpy._core.address import IpAddress
from jgpy._core.headers import StreamingStateHeader
from jgpy._core.message import Message
from jgpy.javaser import read_state_request, state_request_bytes
from jgpy.protocols.pbcast.state_transfer import StateTransferBase
from jgpy.stack.events import Event, EventType, StateTransferInfo
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.netutil import ACCEPT_CONNECTION_ERRORS, Backoff, deadline_reader, refuse_self_connection
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_str

STATE_REQ, STATE_RSP, STATE_PART = (StreamingStateHeader.STATE_REQ, StreamingStateHeader.STATE_RSP,
                                    StreamingStateHeader.STATE_PART)
OOB = Message.OOB
CONNECT_TIMEOUT = 60.0        # s a requester waits for its connection to the provider (without a get_state timeout)
HANDSHAKE_TIMEOUT = 10.0      # s the requester's object stream may take in all, from the accept on
EXPECT_TIMEOUT = 60.0         # s an answered requester may take to connect
MAX_EXPECTED = 64             # answered requesters remembered at most (the oldest go first)
LAST_PART = 1                 # jgpy: StateHeader.id of the last STATE_PART of a state (Java: always 0)


class _Pool:
    """Threads serving state connections: at most ``max_threads``, idle ones exit after ``keep_alive`` s
    (``ThreadPoolExecutor(0, max_pool, pool_thread_keep_alive)``); up to ``max_queued`` more tasks wait for a
    thread, beyond that submit() refuses."""

    def __init__(self, name: str, max_threads: int, keep_alive: float, max_queued: int = 0):
        self.name = name
        self.max_threads = max(1, max_threads)
        self.keep_alive = max(0.01, keep_alive)
        self.max_queued = max(0, max_queued)
        self._busy = 0
        self._q: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._threads: set = set()
        self._idle = 0
        self._n = 0
        self._running = True

    def submit(self, fn, *args) -> bool:
        with self._lock:
            if not self._running or self._busy >= self.max_threads + self.max_queued:
                return False
            self._busy += 1
            self._q.put((fn, args))
            if self._q.qsize() > self._idle and len(self._threads) < self.max_threads:
                self._n += 1
                t = threading.Thread(target=self._work, name=f"{self.name}-{self._n}", daemon=True)
                self._threads.add(t)
                t.start()
            return True

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                self._idle += 1
            try:
                task = self._q.get(timeout=self.keep_alive)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    if not self._q.empty() and self._running:
                        continue
                    self._threads.discard(me)
                    return
            with self._lock:
                self._idle -= 1
            if task is None:
                with self._lock:
                    self._threads.discard(me)
                return
            fn, args = task
            try:
                fn(*args)
            except Exception:  # noqa: BLE001
                import logging
                logging.getLogger("jgpy.protocols.pbcast.STREAMING_STATE_TRANSFER").exception("%s: task failed",
                                                                                            self.name)
            finally:
                with self._lock:
                    self._busy -= 1

    @property
    def size(self) -> int:
        return len(self._threads)

    def shutdown(self) -> None:
        with self._lock:
            self._running = False
            n = len(self._threads)
        for _ in range(n):
            self._q.put(None)


class _SocketOutput(io.RawIOBase):
    """The provider's side of a state socket (wrapped in a BufferedWriter of socket_buffer_size)."""

    def __init__(self, sock: socket.socket, on_close):
        self._sock = sock
        self._on_close = on_close
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        if self.closed:
            raise ValueError("the state output stream is closed")
        self._sock.sendall(b)
        n = memoryview(b).nbytes
        self.count += n
        return n

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._on_close(self)


class _SocketInput(io.RawIOBase):
    """The requester's side of a state socket (wrapped in a BufferedReader of socket_buffer_size).

    jgpy: a provider whose state server is full (strangers holding its connections: max_pool) resets a new
    connection before reading it, and the reset may reach us in connect(), in sending the request or in the
    first read. Before any state byte arrived, ``connect`` (a new socket with the request sent, in place of
    the old one) is tried again after 0.25, 0.5, 1 ... s, ``RETRIES`` times (2.12 gives up at once)."""

    RETRIES = 6
    _RESET = (ConnectionResetError, BrokenPipeError)

    def __init__(self, on_close, connect):
        self._on_close = on_close
        self._connect = connect
        self.count = 0
        self.reconnects = 0
        self._sock: socket.socket | None = None
        self._open()

    def _open(self) -> None:
        """Connect (again), with the backoff above while the provider resets us; raises OSError."""
        while True:
            try:
                self._sock = self._connect(self._sock)
                return
            except self._RESET as e:
                self._backoff(e)

    def _backoff(self, reset: OSError) -> None:
        if self.reconnects >= self.RETRIES:
            raise reset
        time.sleep(0.25 * 2 ** self.reconnects)
        self.reconnects += 1

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.closed:
            raise ValueError("the state input stream is closed")
        while True:
            try:
                n = self._sock.recv_into(b)
                break
            except self._RESET as e:
                if self.count:
                    raise
                self._backoff(e)
                self._open()
        self.count += n
        return n

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._on_close(self)


class _PartOutput(io.RawIOBase):
    """use_default_transport, provider: every write becomes STATE_PART unicasts of at most ``chunk`` bytes.
    The last chunk is held back until close, which sends it with ``id`` LAST_PART (an empty one for an empty
    state): the end of the state for a jgpy requester. Java writes 0 there and never reads it."""

    def __init__(self, prot: "STREAMING_STATE_TRANSFER", requester, state_id: str | None, on_close):
        self._prot = prot
        self._requester = requester
        self._state_id = state_id
        self._on_close = on_close
        self._chunk = max(1, prot.socket_buffer_size)
        self._pending: bytes | None = None
        self.count = 0

    def writable(self) -> bool:
        return True

    def _part(self, data: bytes, last: bool = False) -> None:
        p = self._prot
        m = Message(self._requester, data)
        m.put_header(p.id, StreamingStateHeader(STATE_PART, LAST_PART if last else 0, p.local_addr, None, None,
                                                self._state_id))
        p.down_prot.down_msg(m)

    def write(self, b) -> int:
        if self.closed:
            raise ValueError("the state output stream is closed")
        mv = memoryview(b).cast("B")
        n = len(mv)
        for off in range(0, n, self._chunk):
            if self._pending is not None:
                self._part(self._pending)
            self._pending = bytes(mv[off:off + self._chunk])      # a copy: the writer reuses its buffer
        self.count += n
        return n

    def close(self) -> None:
        if not self.closed:
            try:
                pending, self._pending = self._pending, None
                self._part(pending if pending is not None else b"", last=True)
            finally:
                super().close()
                self._on_close(self)


class _PartInput(io.RawIOBase):
    """use_default_transport, requester: reads the STATE_PART payloads queued by the delivery thread."""

    def __init__(self, q: queue.Queue, on_close):
        self._q = q
        self._on_close = on_close
        self._cur = memoryview(b"")
        self._eof = False
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.closed:
            raise ValueError("the state input stream is closed")
        while not len(self._cur):
            if self._eof:
                return 0
            item = self._q.get()
            if item is None:                      # after the last STATE_PART, or a stop
                self._eof = True
                return 0
            self._cur = memoryview(item)
        out = memoryview(b).cast("B")
        n = min(len(out), len(self._cur))
        out[:n] = self._cur[:n]
        self._cur = self._cur[n:]
        self.count += n
        return n

    def close(self) -> None:
        if not self.closed:
            super().close()
            self._on_close(self)


class STREAMING_STATE_TRANSFER(StateTransferBase):  # noqa: N801 - the JGroups name
    NAME = "pbcast.STREAMING_STATE_TRANSFER"
    JAVA_CLASS = "org.jgroups.protocols.pbcast.STREAMING_STATE_TRANSFER"
    HEADER = StreamingStateHeader

    bind_addr = Property(to_str, None, "interface of the state server socket (IP, host name, or LOOPBACK/SITE_LOCAL/"
                         "GLOBAL/NON_LOOPBACK; default: the transport's bind_addr); jgroups.bind_addr overrides it",
                         system_property=("jgroups.bind_addr", "bind.address"))
    bind_port = Property(to_int, 0, "port of the state server socket (0: ephemeral; a busy port is skipped upwards)")
    max_pool = Property(to_int, 5, "max threads serving state requests (jgpy: as many connections more may wait "
                        "for one; further ones are closed)")
    pool_thread_keep_alive = Property(to_int, 20000, "ms an idle pool thread waits for work before it exits")
    socket_buffer_size = Property(to_int, 8 * 1024, "chunk size of the state: stream buffers, SO_SNDBUF/SO_RCVBUF of "
                                  "the state socket, STATE_PART size")
    buffer_queue_size = Property(to_int, 81920, "use_default_transport: bytes of STATE_PARTs queued at the requester "
                                 "before the delivery thread waits for the reader")
    use_default_transport = Property(to_bool, False, "send the state as STATE_PART messages through the channel "
                                     "instead of a TCP socket")
    use_flush = Property(to_bool, False, "run a flush around the transfer", deprecated="FLUSH decides by itself")
    flush_timeout = Property(to_int, 0, "timeout of the flush", deprecated="FLUSH decides by itself")
    use_reading_thread = Property(to_bool, False, "read the state on a separate thread",
                                  deprecated="no effect since 2.6")

    IGNORED_PROPERTIES = {"bind_interface": ignored("use bind_addr"), "bind_interface_str": ignored("use bind_addr")}

    def __init__(self) -> None:
        super().__init__()
        self._config_bind_addr: str | None = None
        self._host: str | None = None
        self._srv: socket.socket | None = None
        self._srv_addr: IpAddress | None = None
        self._acceptor: threading.Thread | None = None
        self._pool: _Pool | None = None
        self._srv_lock = threading.Lock()
        self._active: set = set()                # sockets being served / read (closed on stop)
        self._active_lock = threading.Lock()
        self._parts: queue.Queue | None = None   # use_default_transport requester: STATE_PART payloads
        self._parts_from = None                  # ... and who sends them
        self._timeout = 0                        # requester: ms of the pending get_state (0: none)
        self._deferred: list | None = None       # use_default_transport requester: messages held back
        self._expected: dict = {}                # provider: (requester, state_id) answered -> until when
        self.handshake_timeout = HANDSHAKE_TIMEOUT
        self._rl = RateLimitedLog(self.log)
        self.counters.update({"state_reconnects": 0, "state_connections": 0, "state_bytes_received": 0,
                              "state_connections_refused": 0,
                              "state_requests_refused": 0, "state_responses_ignored": 0, "accept_errors": 0})

    # ---- life cycle ----

    def stop(self) -> None:
        super().stop()
        with self._srv_lock:
            srv, self._srv = self._srv, None
            acceptor, self._acceptor = self._acceptor, None
            pool, self._pool = self._pool, None
            self._srv_addr = None
            self._expected.clear()
        if srv is not None:
            try:
                srv.close()
            except OSError:
                pass
        with self._active_lock:
            active = list(self._active)
        for s in active:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if pool is not None:
            pool.shutdown()
        if acceptor is not None and acceptor is not threading.current_thread():
            acceptor.join(2.0)
        parts, self._parts = self._parts, None
        if parts is not None:
            parts.put(None)
        self._deferred = None

    def _handle_config_up(self, cfg: Any) -> None:
        super()._handle_config_up(cfg)
        if isinstance(cfg, dict) and cfg.get("bind_addr") is not None:
            self._config_bind_addr = str(cfg["bind_addr"])

    def down(self, evt: Event) -> Any:
        if evt.type == EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED:
            self.down_prot.down(Event(EventType.RESUME_STABLE))
            return None
        if evt.type == EventType.GET_STATE and evt.arg is not None:
            self._timeout = int(evt.arg.timeout or 0)
        return super().down(evt)

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._active_lock:
            if add:
                self._active.add(sock)
            else:
                self._active.discard(sock)

    def _handle_view(self, view) -> None:
        super()._handle_view(view)
        q, sender = self._parts, self._parts_from
        if q is not None and sender is not None and view is not None and sender not in (view.members or ()):
            self.log.warning("%s: the state provider %s left during the transfer: the state ends here",
                             self.local_addr, sender)
            self._parts = None
            q.put(None)

    # ---- messages ----

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        for msg in mine:
            hdr = msg.get_header(self.id)
            try:
                t = hdr.type
                if t == STATE_REQ:
                    if self._may_request(msg, hdr):
                        self._handle_state_req(hdr)
                elif t == STATE_RSP:
                    self._handle_state_rsp(hdr)
                elif t == STATE_PART:
                    if msg.src == self._parts_from:
                        self._handle_state_part(msg, hdr.id == LAST_PART)
                else:
                    self.log.error("type %s not known in StateHeader", t)
            except Exception:  # noqa: BLE001 - a failed transfer must not stop delivery
                self.log.exception("%s: failed handling %r from %s", self.local_addr, hdr, msg.src)
        if rest:
            rest = self._drop_stale(rest)
            if rest and self._deferred is not None and self._is_delivery_thread():
                self._deferred.extend(rest)
                return
            if rest:
                self.up_prot.up_batch(rest)

    def _is_delivery_thread(self) -> bool:
        ex = self.stack.delivery
        return ex is not None and ex.in_thread()

    def _state_request(self, target, state_id: str | None) -> Message:
        req = Message(target)
        req.put_header(self.id, StreamingStateHeader(STATE_REQ, 0, self.local_addr, None, None, state_id))
        return req

    # ---- provider ----

    def _may_request(self, msg: Message, hdr: StreamingStateHeader) -> bool:
        """A STATE_REQ is answered when it comes from a member, sent by that member (Java answers anybody)."""
        requester = hdr.sender
        if requester is not None and requester in self.members and msg.src in (None, requester):
            return True
        self.counters["state_requests_refused"] += 1
        self._rl.warning("state-req", "%s: refused a state request from %s (sent by %s): not a member",
                         self.local_addr, requester, msg.src)
        return False

    def _expect(self, requester, state_id: str | None) -> None:
        """The state socket may serve ``requester`` (for ``state_id``) once, within EXPECT_TIMEOUT."""
        with self._srv_lock:
            key = (requester, state_id)
            self._expected.pop(key, None)
            self._expected[key] = time.monotonic() + EXPECT_TIMEOUT
            while len(self._expected) > MAX_EXPECTED:
                del self._expected[next(iter(self._expected))]

    def _expecting(self) -> bool:
        """Whether an answered requester may still connect (expired answers are forgotten)."""
        now = time.monotonic()
        with self._srv_lock:
            for key in [k for k, until in self._expected.items() if until <= now]:
                del self._expected[key]
            return bool(self._expected)

    def _take_expected(self, requester, state_id: str | None) -> bool:
        with self._srv_lock:
            until = self._expected.pop((requester, state_id), None)
        return until is not None and until > time.monotonic()

    def _bind_host(self) -> str:
        from jgpy.stack.netutil import resolve_bind_addr
        return resolve_bind_addr(self.bind_addr if self.bind_addr is not None else self._config_bind_addr)

    def _ensure_server(self) -> IpAddress:
        with self._srv_lock:
            if self._srv is not None:
                return self._srv_addr
            host = self._bind_host()
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            port = max(0, self.bind_port)
            while True:
                srv = socket.socket(family, socket.SOCK_STREAM)
                try:
                    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    srv.bind((host, port))
                    srv.listen(50)
                    break
                except OSError:
                    srv.close()
                    if port == 0 or port >= 0xFFFF:
                        raise
                    port += 1                    # Util.createServerSocket: try the next port
            self._srv = srv
            self._host = host
            self._srv_addr = IpAddress(host, srv.getsockname()[1])
            self._pool = _Pool(f"STREAMING_STATE_TRANSFER-sender-{self.local_addr}", self.max_pool,
                               self.pool_thread_keep_alive / 1000.0, max_queued=self.max_pool)
            self._acceptor = threading.Thread(target=self._accept_loop, args=(srv, self._pool),
                                              name=f"STREAMING_STATE_TRANSFER server socket acceptor-{self.local_addr}",
                                              daemon=True)
            self._acceptor.start()
            self.log.debug("%s: state server socket listening at %s", self.local_addr, self._srv_addr)
            return self._srv_addr

    def _accept_loop(self, srv: socket.socket, pool: _Pool) -> None:
        backoff = Backoff()
        while True:
            try:
                conn, peer = srv.accept()
            except OSError as e:
                if self._srv is not srv:
                    return                               # stopped
                if e.errno in ACCEPT_CONNECTION_ERRORS:
                    continue
                self.counters["accept_errors"] += 1
                delay = backoff.failed()
                self._rl.warning("accept", "%s: accept() on the state server socket failed: %s; accepting again in "
                                 "%.0f ms", self.local_addr, e, delay * 1000)
                time.sleep(delay)
                continue
            backoff.succeeded()
            self.counters["state_connections"] += 1
            if not self._expecting():
                self._refuse(conn, peer, "no state request is being answered")
            elif not pool.submit(self._serve, conn, peer, time.monotonic() + self.handshake_timeout):
                self._refuse(conn, peer, f"{2 * pool.max_threads} state connections are open (max_pool)")

    def _refuse(self, conn: socket.socket, peer, why: str) -> None:
        """Close a state connection unserved, with a reset (SO_LINGER 0): a requester tells a refusal from the
        end of an empty state, and connects again (:class:`_SocketInput`)."""
        self.counters["state_connections_refused"] += 1
        self._rl.warning("state-conn", "%s: closed the state connection from %s:%s: %s", self.local_addr, peer[0],
                         peer[1], why)
        try:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _serve(self, conn: socket.socket, peer, deadline: float) -> None:
        """A pool thread: read the requester's object stream (by ``deadline``: handshake_timeout after the
        accept, time in the queue included); if we answered that requester, let the application write the
        state."""
        self._track(conn, True)
        out = None
        try:
            try:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, max(1, self.socket_buffer_size))
            except OSError:
                pass
            state_id, requester = read_state_request(deadline_reader(conn, deadline))
            conn.settimeout(None)
            if not self._take_expected(requester, state_id):
                self._refuse(conn, peer, f"{requester} (state_id={state_id}) was not answered")
                return
            self.log.debug("%s: state request from %s (%s:%s), state_id=%s", self.local_addr, requester, *peer[:2],
                           state_id)
            raw = _SocketOutput(conn, self._output_closed)
            out = io.BufferedWriter(raw, buffer_size=max(1, self.socket_buffer_size))
            self.up_prot.up(Event(EventType.STATE_TRANSFER_OUTPUTSTREAM,
                                  StateTransferInfo(requester, state_id, output_stream=out)))
        except Exception as e:  # noqa: BLE001
            self._rl.warning("state-writer", "%s: state writer socket thread spawned abnormaly: %s", self.local_addr,
                             e)
        finally:
            if out is not None:
                try:
                    out.close()
                except Exception:  # noqa: BLE001 - the requester went away
                    pass
            self._track(conn, False)
            try:
                conn.close()
            except OSError:
                pass

    def _output_closed(self, raw) -> None:
        self._count_sent(raw.count)
        self.up_prot.up(Event(EventType.STATE_TRANSFER_OUTPUTSTREAM_CLOSED))
        self.down_prot.down(Event(EventType.STATE_TRANSFER_OUTPUTSTREAM_CLOSED))

    def _handle_state_req(self, hdr: StreamingStateHeader) -> None:
        requester = hdr.sender
        if requester is None:
            self.log.error("sender is null !")
            return
        if self._on_delivery_thread(self._handle_state_req, hdr):
            return
        digest_needed = self.digest_needed
        if digest_needed:
            self.down_prot.down(Event(EventType.CLOSE_BARRIER))
        try:
            srv_addr = None if self.use_default_transport else self._ensure_server()
            if srv_addr is not None:
                self._expect(requester, hdr.state_id)
            digest = self._provider_digest() if digest_needed else None
            rsp = Message(requester)
            rsp.put_header(self.id, StreamingStateHeader(STATE_RSP, 0, self.local_addr, digest, srv_addr, hdr.state_id))
            self.log.debug("%s: responding to state requester %s with address %s and digest %s", self.local_addr,
                           requester, srv_addr, digest)
            self.down_prot.down_msg(rsp)
            self.counters["num_state_reqs"] += 1
        finally:
            if digest_needed:
                self.down_prot.down(Event(EventType.OPEN_BARRIER))
        if self.use_default_transport:
            # right here on the delivery thread: the state is the one the digest describes
            out = io.BufferedWriter(_PartOutput(self, requester, hdr.state_id, self._output_closed),
                                    buffer_size=max(1, self.socket_buffer_size))
            try:
                self.up_prot.up(Event(EventType.STATE_TRANSFER_OUTPUTSTREAM,
                                      StateTransferInfo(requester, hdr.state_id, output_stream=out)))
            finally:
                try:
                    out.close()
                except Exception:  # noqa: BLE001
                    self.log.warning("%s: closing the state stream to %s failed", self.local_addr, requester)

    # ---- requester ----

    def _handle_state_rsp(self, hdr: StreamingStateHeader) -> None:
        if self._on_delivery_thread(self._handle_state_rsp, hdr):
            return
        if not self._waiting or hdr.sender is None or hdr.sender != self._provider:
            self.counters["state_responses_ignored"] += 1
            self._rl.warning("state-rsp", "%s: ignored a state response from %s: %s", self.local_addr, hdr.sender,
                             "we asked " + str(self._provider) if self._waiting else "no state request is pending")
            return
        digest_needed = self.digest_needed
        self._waiting = False
        self._provider = None
        if digest_needed:
            self.down_prot.down(Event(EventType.CLOSE_BARRIER))    # JGRP-1013
        try:
            if digest_needed:
                if hdr.my_digest is None:
                    self.log.warning("digest received from %s is null, skipping setting digest !", hdr.sender)
                else:
                    self._install_digest(hdr.my_digest)
            if self.use_default_transport:
                self._deferred = []              # application messages wait until the state is read
        finally:
            if digest_needed:
                self.down_prot.down(Event(EventType.OPEN_BARRIER))
        if self.use_default_transport:
            self._read_state_parts(hdr)
        else:
            self._connect_to_provider(hdr)

    def _input_closed(self, raw) -> None:
        self.counters["state_bytes_received"] += raw.count
        self.counters["last_transfer_ms"] = (time.monotonic() - self._start) * 1000.0
        sock = getattr(raw, "_sock", None)
        if sock is not None:
            self._track(sock, False)
            try:
                sock.close()
            except OSError:
                pass
        self.up_prot.up(Event(EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED))
        self.down(Event(EventType.STATE_TRANSFER_INPUTSTREAM_CLOSED))

    def _connect_to_provider(self, hdr: StreamingStateHeader) -> None:
        """Socket mode, on the delivery thread: connect, send the object stream, let the application read."""
        addr = hdr.bind_addr
        inp = None
        try:
            if addr is None or addr.host is None:
                raise OSError(f"the state response of {hdr.sender} has no state socket address")
            reconnect = functools.partial(self._open_state_socket, addr, hdr)
            inp = io.BufferedReader(_SocketInput(self._input_closed, reconnect),
                                    buffer_size=max(1, self.socket_buffer_size))
        except Exception as e:  # noqa: BLE001 - the application learns it from get_state() returning False
            self.log.warning("%s: could not connect to state provider %s at %s: %s", self.local_addr, hdr.sender,
                             addr, e)
            self.up_prot.up(Event(EventType.STATE_TRANSFER_INPUTSTREAM,
                                  StateTransferInfo(hdr.sender, hdr.state_id, input_stream=None)))
            return
        try:
            self.up_prot.up(Event(EventType.STATE_TRANSFER_INPUTSTREAM,
                                  StateTransferInfo(hdr.sender, hdr.state_id, input_stream=inp)))
        finally:
            inp.close()

    def _open_state_socket(self, addr, hdr: StreamingStateHeader, old: socket.socket | None) -> socket.socket:
        """A connection to the provider's state server with our request sent, in place of ``old`` (closed
        here); raises OSError."""
        if old is not None:
            self.counters["state_reconnects"] += 1
            self._track(old, False)
            old.close()
        sock = None
        try:
            family = socket.AF_INET6 if addr.is_ipv6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            self._track(sock, True)
            try:
                host = self._bind_host()
                if (":" in host) == (family == socket.AF_INET6):
                    sock.bind((host, 0))
            except OSError:
                pass
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, max(1, self.socket_buffer_size))
            except OSError:
                pass
            self.log.debug("%s: connecting to state provider %s", self.local_addr, addr)
            # bounded by the get_state timeout (Java connects without one); the state is read without
            sock.settimeout(self._timeout / 1000.0 if self._timeout > 0 else CONNECT_TIMEOUT)
            sock.connect((addr.host, addr.port))
            refuse_self_connection(sock)
            sock.sendall(state_request_bytes(hdr.state_id, self.local_addr))
            sock.settimeout(None)
            return sock
        except BaseException:
            if sock is not None:
                self._track(sock, False)
                sock.close()
            raise

    def _read_state_parts(self, hdr: StreamingStateHeader) -> None:
        """use_default_transport: the application reads on its own thread while the delivery thread queues
        the STATE_PARTs it is handed; the held-back messages go up once the state is read."""
        size = self.buffer_queue_size // max(1, self.socket_buffer_size)
        q: queue.Queue = queue.Queue(maxsize=size if size > 1 else 10)
        self._parts = q
        self._parts_from = hdr.sender

        def closed(raw) -> None:
            if self._parts is q:
                self._parts = None
            self._input_closed(raw)

        def reader() -> None:
            inp = io.BufferedReader(_PartInput(q, closed), buffer_size=max(1, self.socket_buffer_size))
            try:
                self.up_prot.up(Event(EventType.STATE_TRANSFER_INPUTSTREAM,
                                      StateTransferInfo(hdr.sender, hdr.state_id, input_stream=inp)))
            except Exception:  # noqa: BLE001
                self.log.exception("%s: reading the state failed", self.local_addr)
            finally:
                inp.close()
                ex = self.stack.delivery if self.stack is not None else None
                if ex is not None:
                    ex.submit(self._release_deferred)
                else:
                    self._deferred = None

        threading.Thread(target=reader, name=f"STREAMING_STATE_TRANSFER state reader-{self.local_addr}",
                         daemon=True).start()

    def _handle_state_part(self, msg: Message, last: bool) -> None:
        q = self._parts
        if q is None:
            return                               # nobody reads (any more): drop it
        items = ([msg.buffer] if msg.length else []) + ([None] if last else [])
        for item in items:
            while True:
                if self._parts is not q:
                    return
                try:
                    q.put(item, timeout=0.2)     # blocks the delivery thread while the reader is behind
                    break
                except queue.Full:
                    continue

    def _release_deferred(self) -> None:
        held, self._deferred = self._deferred, None
        if held:
            self.up_prot.up_batch(held)

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        d["server_socket"] = str(self._srv_addr) if self._srv_addr is not None else None
        d["pool_threads"] = self._pool.size if self._pool is not None else 0
        return d


__all__ = ["STREAMING_STATE_TRANSFER"]
