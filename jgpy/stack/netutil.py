"""Network helpers shared by the protocols that open sockets (UDP, TCP, FD_SOCK, the state server)."""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from typing import Callable

from jgpy.errors import ConfigError


def resolve_bind_addr(spec: str | None) -> str:
    """``bind_addr`` to a numeric address: an IP, a host name, or JGroups' LOOPBACK/SITE_LOCAL/... keywords."""
    if spec is None or spec.upper() in ("", "NON_LOOPBACK", "SITE_LOCAL", "GLOBAL", "LINK_LOCAL"):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.connect(("192.0.2.1", 9))         # TEST-NET: no packet is sent, only a route lookup
                addr = s.getsockname()[0]
            finally:
                s.close()
            if not addr.startswith("127."):
                return addr
        except OSError:
            pass
        return "127.0.0.1"
    if spec.upper() == "LOOPBACK":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(spec.split("%")[0]))
    except ValueError:
        try:
            return socket.getaddrinfo(spec, None, socket.AF_INET)[0][4][0]
        except socket.gaierror as e:
            raise ConfigError(f"bind_addr {spec!r} cannot be resolved: {e}") from None


#: accept() errors about the one connection being accepted (Linux passes a connection's pending network
#: error to accept): the next connection can be accepted at once
ACCEPT_CONNECTION_ERRORS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENETDOWN,
                                      errno.ENOPROTOOPT, errno.EHOSTDOWN, errno.ENONET, errno.EHOSTUNREACH,
                                      errno.EOPNOTSUPP, errno.ENETUNREACH})


class Backoff:
    """The wait after each failure in a row (e.g. accept() failing with EMFILE, ENFILE, ENOBUFS): ``first``
    seconds, doubling up to ``most``; a success starts over. A server socket's acceptor backs off and goes
    on: the resource comes back when connections close."""

    def __init__(self, first: float = 0.01, most: float = 1.0):
        self.first = first
        self.most = most
        self._next = first

    def failed(self) -> float:
        """The delay to wait now (the next failure in a row waits twice as long)."""
        delay = self._next
        self._next = min(self.most, delay * 2)
        return delay

    def succeeded(self) -> None:
        self._next = self.first


def bind_first_free(bind: str, first_port: int, port_range: int, kind: int, backlog: int, what: str) -> socket.socket:
    """A socket of ``kind`` bound to the first port of first_port..first_port+port_range on ``bind`` that takes it
    (first_port <= 0: an ephemeral port); ``backlog`` > 0: SO_REUSEADDR and listening (a fresh socket per port:
    with SO_REUSEADDR a port can bind and still fail to listen). ConfigError naming ``what`` when none does."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    first = max(0, first_port)
    last = first + max(0, port_range) if first > 0 else 0
    for p in range(first, last + 1):
        sock = socket.socket(family, kind)
        try:
            if backlog > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((bind, p))
            if backlog > 0:
                sock.listen(backlog)
            return sock
        except OSError:
            sock.close()
    raise ConfigError(f"{what}: no free port in {first}-{last} on {bind}: raise port_range or choose another "
                      f"bind_port")


def deadline_reader(sock: socket.socket, deadline: float, limit: int = 1 << 20) -> Callable[[int], bytes]:
    """``read(n)`` (up to n bytes, b"" at EOF) on a blocking ``sock`` that raises ``socket.timeout`` once
    ``deadline`` (time.monotonic()) has passed, and OSError past ``limit`` bytes in all: one limit for a whole
    exchange, however the peer spreads its bytes (a timeout per recv lets a peer that sends a byte now and
    then hold the reader for ever), and a length the peer announces is never allocated before its bytes
    come (at most 64 KiB per recv)."""
    total = 0

    def read(n: int) -> bytes:
        nonlocal total
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the peer's data did not arrive in time")
        if total >= limit:
            raise OSError(f"the peer sent more than {limit} bytes")
        sock.settimeout(left)
        data = sock.recv(max(1, min(n, 65536, limit - total)))
        total += len(data)
        return data
    return read


def refuse_self_connection(sock: socket.socket) -> None:
    """Raise ConnectionRefusedError when a connected TCP socket is connected to itself. With nothing listening
    on a port of the ephemeral range, a connect from this host can be given that very port as its source and
    then, by TCP's simultaneous open, succeed: what the socket reads is what it wrote (a TCP peer's own
    handshake cookie, read as a frame length). Linux does this on loopback; 2.12's connection table does not
    check it (later JGroups versions do)."""
    local, peer = sock.getsockname()[:2], sock.getpeername()[:2]
    if local == peer:
        raise ConnectionRefusedError(errno.ECONNREFUSED, f"connected to itself ({local[0]}:{local[1]}): nothing "
                                     f"listens on that port")


def same_host(ip: str, addr) -> bool:
    """Whether a connection from ``ip`` comes from the host of the IpAddress ``addr`` (IPv4-mapped IPv6
    forms count as the IPv4 address)."""
    host = addr.host
    if host is None:
        return False
    try:
        a, b = ipaddress.ip_address(ip.split("%")[0]), ipaddress.ip_address(host)
    except ValueError:
        return False
    a = getattr(a, "ipv4_mapped", None) or a
    b = getattr(b, "ipv4_mapped", None) or b
    return a == b
