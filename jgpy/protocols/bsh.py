"""BSH (``org.jgroups.protocols.BSH`` of 2.12), loaded from the jar's ``bsh.xml`` without its danger.

2.12's BSH opens a TCP server socket (``bind_port``, on all interfaces) and runs every line anybody sends to it
in a BeanShell interpreter with the protocol at hand: remote code execution for whoever reaches the port. jgpy's
BSH passes every message and event through and opens nothing: it never runs code sent over the network unless
``allow_remote_eval`` is set (jgpy). Then it listens on ``bind_addr`` (loopback unless told otherwise) and
evaluates each line as a Python expression with ``bsh_prot`` (this protocol) in scope, answering with the
result's ``repr``; lines are bounded (``MAX_LINE``), so are connections (``MAX_CONNECTIONS``). A log line at
start says which of the two it is.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from jgpy.stack.netutil import resolve_bind_addr
from jgpy.stack.properties import Property, to_bool, to_int, to_str
from jgpy.stack.protocol import Protocol

MAX_LINE = 64 * 1024
MAX_CONNECTIONS = 4


class BSH(Protocol):
    NAME = "BSH"

    bind_port = Property(to_int, 0, "port of the interpreter's server socket (0: ephemeral); jgpy opens it only "
                         "with allow_remote_eval")
    allow_remote_eval = Property(to_bool, False, "jgpy: run what is sent to bind_port (Python expressions, "
                                 "bsh_prot in scope): remote code execution for whoever reaches the port")
    bind_addr = Property(to_str, "127.0.0.1", "jgpy: interface of the interpreter's server socket")

    def __init__(self) -> None:
        super().__init__()
        self.srv_sock: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.counters = {"connections": 0, "connections_refused": 0, "lines_evaluated": 0}

    def start(self) -> None:
        if not self.allow_remote_eval:
            self.log.info("BSH: loaded without an interpreter: jgpy never runs code sent over the network "
                          "(2.12's BSH runs every line sent to its port); allow_remote_eval=\"true\" turns it on")
            return
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((resolve_bind_addr(self.bind_addr), self.bind_port))
        s.listen(MAX_CONNECTIONS)
        self.srv_sock = s
        self.log.warning("BSH: allow_remote_eval is on: every line sent to %s:%d is evaluated as Python",
                         *s.getsockname()[:2])
        threading.Thread(target=self._accept, args=(s,), name="jgpy-bsh-acceptor", daemon=True).start()

    def stop(self) -> None:
        s, self.srv_sock = self.srv_sock, None
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    @property
    def port(self) -> int | None:
        return self.srv_sock.getsockname()[1] if self.srv_sock is not None else None

    def _accept(self, srv: socket.socket) -> None:
        while self.srv_sock is srv:
            try:
                conn, _ = srv.accept()
            except OSError:
                if self.srv_sock is not srv:
                    return
                continue
            with self._lock:
                if len(self._conns) >= MAX_CONNECTIONS:
                    self.counters["connections_refused"] += 1
                    conn.close()
                    continue
                self._conns.add(conn)
            self.counters["connections"] += 1
            threading.Thread(target=self._serve, args=(conn,), name="jgpy-bsh-connection", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        scope: dict[str, Any] = {"bsh_prot": self}
        try:
            with conn, conn.makefile("rb") as lines:
                while True:
                    line = lines.readline(MAX_LINE + 1)
                    if not line or len(line) > MAX_LINE:
                        return
                    text = line.decode("utf-8", "replace").strip()
                    if not text:
                        continue
                    self.counters["lines_evaluated"] += 1
                    try:
                        result = repr(eval(text, scope))  # noqa: S307 - what allow_remote_eval asks for
                    except Exception as e:  # noqa: BLE001 - the error is the answer
                        result = f"{type(e).__name__}: {e}"
                    conn.sendall(result.encode() + b"\n")
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
