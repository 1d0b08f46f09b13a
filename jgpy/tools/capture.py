"""Capture JGroups traffic: a multicast tap, a loopback sniffer (AF_PACKET, needs root) and pcap readers.

These are diagnostics: they only observe. Every captured packet is a :class:`Packet` with the UDP
payload (or, for TCP, the reassembled stream of one connection direction).
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from jgpy.stack.sockfilter import JA, JEQ_K, LD_B_ABS, LD_H_ABS, LD_W_ABS, RET_K, Program, attach_filter

log = logging.getLogger(__name__)

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33


@dataclass
class Packet:
    """One captured UDP datagram (or one TCP segment's payload when ``proto == "tcp"``)."""

    ts: float
    src: tuple[str, int]
    dst: tuple[str, int]
    data: bytes
    proto: str = "udp"


class _Recorder:
    """A socket read by a background thread; every packet :meth:`_handle` accepts is kept."""

    def __init__(self, sock: socket.socket, name: str):
        self.sock = sock
        self._packets: list[Packet] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.sock.setblocking(False)
        while not self._stop.is_set():
            r, _, _ = select.select([self.sock], [], [], 0.1)
            if not r:
                continue
            for _ in range(4096):              # drain what is queued: one select per burst, not per packet
                try:
                    data, addr = self.sock.recvfrom(65535 + 64)
                except BlockingIOError:
                    break
                except OSError:
                    return
                pkt = self._handle(data, addr)
                if pkt is not None:
                    self._packets.append(pkt)

    def _handle(self, data: bytes, addr) -> Packet | None:
        raise NotImplementedError

    def packets(self) -> list[Packet]:
        return list(self._packets)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MulticastTap(_Recorder):
    """Join a multicast group on an interface and record every datagram sent to it.

    The socket shares the group port with the members (SO_REUSEADDR), so it sees exactly what a
    member's multicast socket sees. Use as a context manager; :meth:`packets` returns what arrived.
    """

    def __init__(self, group: str, port: int, interface: str = "127.0.0.1", rcvbuf: int = 4 << 20):
        self.group, self.port = group, port
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind((group, port))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(interface))
        super().__init__(sock, f"tap-{group}:{port}")

    def _handle(self, data: bytes, addr) -> Packet | None:
        return Packet(time.time(), addr, (self.group, self.port), data)


def sniffer_available() -> str | None:
    """None when an AF_PACKET sniffer can be opened here, else why not."""
    if not hasattr(socket, "AF_PACKET"):
        return "AF_PACKET sockets exist on Linux only"
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.close()
    except PermissionError:
        return "capturing needs root or CAP_NET_RAW"
    except OSError as e:
        return f"cannot open an AF_PACKET socket: {e}"
    return None


class LoopbackSniffer(_Recorder):
    """Record the UDP (and optionally TCP) packets on ``lo`` whose ports are in ``ports`` (all if None).

    Loopback packets pass the interface twice; only the outgoing copy is kept.
    """

    def __init__(self, ports: Iterable[int] | None = None, interface: str = "lo", tcp: bool = False,
                 rcvbuf: int = 32 << 20):
        self.ports = set(ports) if ports is not None else None
        self.tcp = tcp
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        try:                                   # past net.core.rmem_max when we may (CAP_NET_ADMIN)
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        # the kernel hands us only outgoing UDP (and TCP) packets: a busy loopback (other clusters, benchmarks)
        # would otherwise fill the buffer with frames we throw away, and drop the ones we want
        try:
            attach_filter(sock, _outgoing_ip_filter(tcp))
        except OSError as e:                   # no socket filters here: everything, filtered below in Python
            log.debug("the loopback sniffer runs without a kernel filter: %s", e)
        sock.bind((interface, 0))
        super().__init__(sock, "sniffer")

    def drops(self) -> int:
        """Packets the kernel dropped for want of buffer since the last call (0 if it cannot tell)."""
        try:
            _, dropped = struct.unpack("II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        except OSError:
            return 0
        return dropped

    def add_ports(self, ports: Iterable[int]) -> None:
        if self.ports is not None:
            self.ports.update(ports)

    def _handle(self, frame: bytes, addr) -> Packet | None:
        if addr[2] != PACKET_OUTGOING:
            return None
        pkt = parse_ethernet(frame, time.time(), tcp=self.tcp)
        if pkt is None or (self.ports is not None and pkt.src[1] not in self.ports and pkt.dst[1] not in self.ports):
            return None
        return pkt


def _outgoing_ip_filter(tcp: bool) -> Program:
    """A classic BPF program: outgoing IPv4/IPv6 frames carrying UDP (or TCP when ``tcp``), whole; else nothing."""
    pkttype = 0xFFFFF000 + 4                  # SKF_AD_OFF + SKF_AD_PKTTYPE
    second = 6 if tcp else 17                 # (17 again: never true after the first test)
    return [(LD_W_ABS, 0, 0, pkttype),         # 0
            (JEQ_K, 0, 9, PACKET_OUTGOING),    # 1: else drop
            (LD_H_ABS, 0, 0, 12),              # 2: ethertype
            (JEQ_K, 0, 2, 0x0800),             # 3: else 6
            (LD_B_ABS, 0, 0, 23),              # 4: IPv4 protocol
            (JA, 0, 0, 2),                     # 5: to 8
            (JEQ_K, 0, 4, 0x86DD),             # 6: else drop
            (LD_B_ABS, 0, 0, 20),              # 7: IPv6 next header
            (JEQ_K, 1, 0, 17),                 # 8: UDP: accept
            (JEQ_K, 0, 1, second),             # 9: else drop
            (RET_K, 0, 0, 0x40000),            # 10: accept the whole frame
            (RET_K, 0, 0, 0)]                  # 11: drop


def parse_ip(buf: bytes, ts: float, tcp: bool = False) -> Packet | None:
    """A UDP (or TCP) packet from an IPv4/IPv6 packet, else None."""
    if len(buf) < 20:
        return None
    version = buf[0] >> 4
    if version == 4:
        ihl = (buf[0] & 0x0F) * 4
        proto = buf[9]
        total = struct.unpack_from(">H", buf, 2)[0]
        src_ip, dst_ip = socket.inet_ntoa(buf[12:16]), socket.inet_ntoa(buf[16:20])
        frag = struct.unpack_from(">H", buf, 6)[0]
        if frag & 0x1FFF or frag & 0x2000:
            return None          # IP fragments: JGroups keeps datagrams below the MTU of lo; ignore
        payload = buf[ihl:total]
    elif version == 6:
        if len(buf) < 40:
            return None
        proto = buf[6]
        plen = struct.unpack_from(">H", buf, 4)[0]
        src_ip = socket.inet_ntop(socket.AF_INET6, buf[8:24])
        dst_ip = socket.inet_ntop(socket.AF_INET6, buf[24:40])
        payload = buf[40:40 + plen]
    else:
        return None
    if proto == 17 and len(payload) >= 8:
        sport, dport, ulen = struct.unpack_from(">HHH", payload, 0)
        return Packet(ts, (src_ip, sport), (dst_ip, dport), bytes(payload[8:ulen]))
    if tcp and proto == 6 and len(payload) >= 20:
        sport, dport = struct.unpack_from(">HH", payload, 0)
        off = (payload[12] >> 4) * 4
        data = bytes(payload[off:])
        if data:
            return Packet(ts, (src_ip, sport), (dst_ip, dport), data, "tcp")
    return None


def parse_ethernet(frame: bytes, ts: float, tcp: bool = False) -> Packet | None:
    if len(frame) < 14:
        return None
    ethertype = struct.unpack_from(">H", frame, 12)[0]
    if ethertype not in (0x0800, 0x86DD):
        return None
    return parse_ip(frame[14:], ts, tcp)


def _link_parser(linktype: int):
    if linktype == 1:         # Ethernet
        return lambda b, ts, tcp: parse_ethernet(b, ts, tcp)
    if linktype == 113:       # Linux cooked (SLL)
        return lambda b, ts, tcp: parse_ip(b[16:], ts, tcp) if len(b) > 16 else None
    if linktype == 276:       # Linux cooked v2 (SLL2)
        return lambda b, ts, tcp: parse_ip(b[20:], ts, tcp) if len(b) > 20 else None
    if linktype in (101, 12, 14):  # raw IP
        return lambda b, ts, tcp: parse_ip(b, ts, tcp)
    if linktype == 0:         # BSD loopback: 4-byte family
        return lambda b, ts, tcp: parse_ip(b[4:], ts, tcp)
    raise ValueError(f"unsupported pcap link type {linktype}")


def read_pcap(path: str | Path, tcp: bool = False) -> Iterator[Packet]:
    """UDP (and optionally TCP) packets of a classic pcap or a pcapng file (as written by tcpdump/tshark)."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        raise ValueError(f"{path}: too short for a pcap file")
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        yield from _read_classic(data, path, tcp)
    elif magic == b"\x0a\x0d\x0d\x0a":
        yield from _read_pcapng(data, path, tcp)
    else:
        raise ValueError(f"{path}: not a pcap or pcapng file (magic {magic.hex()})")


def _read_classic(data: bytes, path, tcp: bool) -> Iterator[Packet]:
    le = data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1")
    nano = data[:4] in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    e = "<" if le else ">"
    linktype = struct.unpack_from(e + "I", data, 20)[0] & 0x0FFFFFFF
    parse = _link_parser(linktype)
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack_from(e + "IIII", data, pos)
        pos += 16
        if pos + caplen > len(data):
            log.warning("%s: truncated last record", path)
            return
        pkt = parse(data[pos:pos + caplen], sec + frac / (1e9 if nano else 1e6), tcp)
        pos += caplen
        if pkt is not None:
            yield pkt


def _read_pcapng(data: bytes, path, tcp: bool) -> Iterator[Packet]:
    pos = 0
    e = "<"
    links: list[tuple[int, float]] = []
    while pos + 12 <= len(data):
        btype = struct.unpack_from(e + "I", data, pos)[0]
        if btype == 0x0A0D0D0A:
            e = "<" if data[pos + 8:pos + 12] == b"\x4d\x3c\x2b\x1a" else ">"
            links = []
        blen = struct.unpack_from(e + "I", data, pos + 4)[0]
        if blen < 12 or pos + blen > len(data):
            log.warning("%s: truncated pcapng block", path)
            return
        body = data[pos + 8:pos + blen - 4]
        if btype == 1:      # interface description
            links.append((struct.unpack_from(e + "H", body, 0)[0], 1e-6))
        elif btype == 6 and len(body) >= 20:   # enhanced packet
            iface, ts_hi, ts_lo, caplen = struct.unpack_from(e + "IIII", body, 0)
            link, res = links[iface] if iface < len(links) else (1, 1e-6)
            pkt = _link_parser(link)(body[20:20 + caplen], ((ts_hi << 32) | ts_lo) * res, tcp)
            if pkt is not None:
                yield pkt
        elif btype == 3 and links:             # simple packet
            pkt = _link_parser(links[0][0])(body[4:], 0.0, tcp)
            if pkt is not None:
                yield pkt
        pos += blen


@dataclass
class TcpStream:
    """The bytes one side of a TCP connection sent, in capture order (loopback: no loss, no reordering)."""

    src: tuple[str, int]
    dst: tuple[str, int]
    data: bytearray = field(default_factory=bytearray)


def tcp_streams(packets: Iterable[Packet]) -> list[TcpStream]:
    streams: dict[tuple, TcpStream] = {}
    for p in packets:
        if p.proto != "tcp":
            continue
        key = (p.src, p.dst)
        if key not in streams:
            streams[key] = TcpStream(p.src, p.dst)
        streams[key].data += p.data
    return list(streams.values())
