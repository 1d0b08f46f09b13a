"""PING over a datagram socket of its own: the base of MPING (a multicast group) and BPING (broadcast ports).

As in 2.12, the discovery request is the message itself (``Message.writeTo``: no transport framing, our own
address as its src) sent to the socket's destinations; a thread of the protocol reads the socket and hands each
request to the usual discovery logic, which answers with a unicast through the transport. Responses come back
through the transport, as with PING.

jgpy deviates where 2.12 trusts the socket: 2.12 passes any message read from it up the stack (whatever its
headers: anyone who can reach the port can inject a message above the transport's checks); jgpy accepts only a
message that carries this protocol's discovery header and no other, is for this cluster (answered as PING
answers) and fits one datagram. Everything else is counted (``datagrams_dropped``) and dropped.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from jgpy._core.headers import PingHeader
from jgpy._core.wire import Reader, Writer
from jgpy.protocols.ping import PING

#: the biggest datagram read (as 2.12's 65535-byte receive buffer)
MAX_DATAGRAM = 65535


class DatagramDiscovery(PING):
    """A subclass opens the socket (:meth:`open_socket`) and names where requests go (:meth:`destinations`)."""

    def __init__(self) -> None:
        super().__init__()
        self.sock: socket.socket | None = None
        self._receiver: threading.Thread | None = None
        self.counters.update({"datagrams_received": 0, "datagrams_dropped": 0, "send_errors": 0})

    def open_socket(self) -> socket.socket:
        raise NotImplementedError

    def destinations(self) -> list[tuple[str, int]]:
        raise NotImplementedError

    # ---- life cycle ----

    def start(self) -> None:
        self.sock = self.open_socket()
        self._receiver = threading.Thread(target=self._receive_loop, args=(self.sock,),
                                          name=f"jgpy-{self.NAME.lower()}-{self.sock.getsockname()[1]}", daemon=True)
        self._receiver.start()
        super().start()

    def stop(self) -> None:
        super().stop()
        sock, self.sock = self.sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)      # wakes the receiver in recvfrom
            except OSError:
                pass
            sock.close()
        t, self._receiver = self._receiver, None
        if t is not None and t is not threading.current_thread():
            t.join(2.0)

    # ---- sending ----

    def send_get_members_request(self, cluster, view_id) -> None:
        msg = self.get_members_request(cluster, view_id)
        msg.src = self.local_addr
        w = Writer()
        self.stack.dialect.write_message_to(w, msg)
        data = w.getvalue()
        sock = self.sock
        if sock is None:
            return
        for dest in self.destinations():
            try:
                sock.sendto(data, dest)
            except OSError as e:
                self.counters["send_errors"] += 1
                self._rl.warning("send", "%s: failed sending a discovery request to %s:%d: %s", self.local_addr,
                                 dest[0], dest[1], e)

    # ---- receiving ----

    def _receive_loop(self, sock: socket.socket) -> None:
        while self.sock is sock:
            try:
                data, peer = sock.recvfrom(MAX_DATAGRAM)
            except OSError as e:
                if self.sock is not sock:
                    break
                self._rl.warning("recv", "%s: receiving on the discovery socket failed: %s", self.local_addr, e)
                continue
            if not data:                      # shutdown (stop) or an empty datagram
                continue
            self.counters["datagrams_received"] += 1
            try:
                self._handle_datagram(data, peer)
            except Exception as e:  # noqa: BLE001 - a stranger's datagram must not end the receiver
                self._drop(peer, f"{type(e).__name__}: {e}")

    def _handle_datagram(self, data: bytes, peer: Any) -> None:
        msg = self.stack.dialect.read_message_from(Reader(data))
        if msg.header_ids() != [self.id] or msg.src is None:
            self._drop(peer, "not a discovery request of this protocol")
            return
        hdr = msg.get_header(self.id)
        if not isinstance(hdr, PingHeader):
            self._drop(peer, "not a discovery request of this protocol")
            return
        if hdr.type != PingHeader.GET_MBRS_REQ:
            self._drop(peer, "a discovery response (responses travel through the transport)")
            return
        self.handle(msg, hdr)

    def _drop(self, peer: Any, why: str) -> None:
        self.counters["datagrams_dropped"] += 1
        self._rl.warning("dropped", "%s: dropped a datagram from %s on the %s socket: %s (%d so far)",
                         self.local_addr, peer, self.NAME, why, self.counters["datagrams_dropped"])
