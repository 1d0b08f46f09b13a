"""FD_ICMP: failure detection by ICMP echo (``org.jgroups.protocols.FD_ICMP`` of 2.12, which calls
``InetAddress.isReachable``): an echo request (``ttl``) to the neighbour's host, an answer within ``timeout`` ms.
See :mod:`jgpy.protocols.fd_probe`.

ICMP needs a raw socket (root, or CAP_NET_RAW) or Linux's unprivileged ICMP sockets (the process's group within
``net.ipv4.ping_group_range``); without either the stack does not start, and the error says so. Deviation: 2.12's
isReachable falls back to a TCP connection to port 7 (echo), which says nothing about a member.

A raw ICMP socket receives a copy of every ICMP packet that reaches the host, from anyone: each probe opens its own
socket (nothing is kept between probes), asks the kernel for echo replies only (ICMP_FILTER), reads until its
deadline, and accepts only a well-formed echo reply from the probed host carrying our identifier, sequence number
and random payload; anything else is dropped unparsed past the first mismatch and never raises.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time

from jgpy.errors import ConfigError
from jgpy.protocols.fd_probe import ProbeError, ProbingFD
from jgpy.stack.properties import Property, ignored, to_int, to_str

ECHO_REPLY, ECHO_REQUEST = 0, 8
SOL_RAW, ICMP_FILTER = 255, 1         # Linux <linux/icmp.h>: a bit set per ICMP type the raw socket drops
ONLY_ECHO_REPLIES = struct.pack("=I", ~(1 << ECHO_REPLY) & 0xFFFFFFFF)
NONCE_LEN = 16
RECV_BUF = 2048                        # ample for an echo reply to our request (a larger packet is not ours)

_sequence = itertools.count(1)         # process-wide: two stacks in one process never share a sequence number


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo_request(ident: int, seq: int, payload: bytes) -> bytes:
    """An ICMP echo request with a valid checksum."""
    header = struct.pack("!BBHHH", ECHO_REQUEST, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ECHO_REQUEST, 0, checksum(header + payload), ident, seq) + payload


def parse_echo_reply(packet: bytes, with_ip_header: bool) -> tuple[int, int, bytes] | None:
    """``(ident, seq, payload)`` of a well-formed ICMP echo reply (behind its IPv4 header when
    ``with_ip_header``, as a raw socket reads it); None for anything else, whatever the bytes."""
    if with_ip_header:
        if len(packet) < 20 or packet[0] >> 4 != 4:
            return None
        ihl = (packet[0] & 0x0F) * 4
        if ihl < 20 or len(packet) < ihl + 8:
            return None
        packet = packet[ihl:]
    if len(packet) < 8 or packet[0] != ECHO_REPLY or packet[1] != 0 or checksum(packet) != 0:
        return None
    _type, _code, _sum, ident, seq = struct.unpack_from("!BBHHH", packet)
    return ident, seq, packet[8:]


def open_icmp_socket() -> tuple[socket.socket, bool]:
    """``(socket, raw)``: a raw ICMP socket, else an unprivileged one; ConfigError when neither may be opened."""
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP), True
    except PermissionError:
        pass
    try:
        return socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP), False
    except OSError as e:
        raise ConfigError(f"FD_ICMP needs an ICMP socket: run as root (or give the process CAP_NET_RAW), or let this "
                          f"user's group open unprivileged ICMP sockets (sysctl net.ipv4.ping_group_range): {e}") \
            from None


class FD_ICMP(ProbingFD):  # noqa: N801 - the JGroups name
    NAME = "FD_ICMP"

    ttl = Property(to_int, 32, "time to live of the echo requests")
    bind_addr = Property(to_str, None, "(accepted; the echo goes out on the route to the host)",
                         system_property=("jgroups.bind_addr", "bind.address"))
    IGNORED_PROPERTIES = {"bind_interface": ignored("the echo goes out on the route to the host"),
                          "bind_interface_str": ignored("the echo goes out on the route to the host")}

    def __init__(self) -> None:
        super().__init__()
        self._ident = os.getpid() & 0xFFFF
        self.num_foreign_icmp = 0          # ICMP packets read by a probe that were not its answer

    def init(self) -> None:
        super().init()
        if not 1 <= self.ttl <= 255:
            raise ConfigError(f"FD_ICMP: ttl={self.ttl}: must be within 1..255")

    def start(self) -> None:
        sock, _ = open_icmp_socket()       # fail at start, with the reason, not at the first probe
        sock.close()
        super().start()

    def dump_stats(self) -> dict:
        return dict(super().dump_stats(), num_foreign_icmp=self.num_foreign_icmp)

    def probe(self, host: str) -> bool:
        if ":" in host:
            raise ProbeError(f"FD_ICMP probes IPv4 hosts only, not {host}")
        sock, raw = open_icmp_socket()
        with sock:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, self.ttl)
            if raw:
                sock.setsockopt(SOL_RAW, ICMP_FILTER, ONLY_ECHO_REPLIES)
            seq = next(_sequence) & 0xFFFF
            nonce = os.urandom(NONCE_LEN)
            deadline = time.monotonic() + self.timeout / 1000.0
            try:
                self._send_echo(sock, host, echo_request(self._ident, seq, nonce))
            except OSError as e:                # no route, host unreachable: no answer
                self.log.debug("%s: sending an echo request to %s: %s", self.me, host, e)
                return False
            return self._await_reply(sock, raw, host, seq, nonce, deadline)

    @staticmethod
    def _send_echo(sock: socket.socket, host: str, request: bytes) -> None:
        sock.sendto(request, (host, 0))

    def _await_reply(self, sock: socket.socket, raw: bool, host: str, seq: int, nonce: bytes,
                     deadline: float) -> bool:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock.settimeout(left)
            try:
                packet, src = sock.recvfrom(RECV_BUF)
            except (TimeoutError, socket.timeout):
                return False
            except OSError as e:                # an ICMP error queued on the socket: keep waiting
                self.log.debug("%s: reading the echo reply from %s: %s", self.me, host, e)
                continue
            reply = parse_echo_reply(packet, raw)
            # an unprivileged socket's kernel puts its own identifier in: only sequence and payload are ours there
            if (reply is not None and src[0] == host and reply[1] == seq and reply[2] == nonce
                    and (not raw or reply[0] == self._ident)):
                return True
            self.num_foreign_icmp += 1
