"""UDP: IP multicast transport (``org.jgroups.protocols.UDP``).

Two sockets, as in Java: the multicast socket (bound to mcast_addr:mcast_port, joined to the group on
bind_addr) receives multicasts and also sends them, so they leave from the group port; the unicast
socket (bind_addr, ephemeral or bind_port) is the member's physical address. Each socket is read by a
Cython loop (``jgpy._core.recvloop.DatagramLoop``: epoll + recvmmsg, GIL released; two threads that relay the
socket between them when the thread pools are enabled, see ``TP.relay_delivery`` and ``jgpy._core.relay``),
bundles are sent by ``jgpy._core.bundler.Bundler`` (sendmmsg, GIL released) and single datagrams by
``jgpy._core.senders.DatagramSender``. The sockets' errors are logged through the transport's rate-limited log.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from typing import Any, Callable

from jgpy._core.address import IpAddress
from jgpy._core.bundler import Bundler
from jgpy._core.recvloop import DatagramLoop
from jgpy._core.senders import DatagramSender
from jgpy.errors import ConfigError
from jgpy.protocols.tp import TP
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import register_relay
from jgpy.stack.netutil import resolve_bind_addr
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_size, to_str
from jgpy.stack.sockfilter import attach_filter, drop_payload_prefix

IP_TOS = getattr(socket, "IP_TOS", 1)


class UDP(TP):
    NAME = "UDP"

    mcast_addr = Property(to_str, "228.8.8.8", "multicast group", system_property=("jgroups.udp.mcast_addr",),
                          aliases=("mcast_group_addr",))
    mcast_port = Property(to_int, 7600, "multicast port", system_property=("jgroups.udp.mcast_port",))
    ip_mcast = Property(to_bool, True, "use IP multicast (jgpy requires it: false is not supported)")
    ip_ttl = Property(to_int, 8, "multicast TTL", system_property=("jgroups.udp.ip_ttl",))
    tos = Property(to_int, 8, "IP type of service of outgoing datagrams")
    mcast_send_buf_size = Property(to_size, 100000, "requested SO_SNDBUF of the multicast socket")
    mcast_recv_buf_size = Property(to_size, 500000, "requested SO_RCVBUF of the multicast socket")
    ucast_send_buf_size = Property(to_size, 100000, "requested SO_SNDBUF of the unicast socket")
    ucast_recv_buf_size = Property(to_size, 64000, "requested SO_RCVBUF of the unicast socket")
    disable_loopback = Property(to_bool, False, "switch off IP_MULTICAST_LOOP (other members on this host "
                                "would not see our multicasts)")
    recv_batch = Property(to_int, 32, "jgpy: datagrams read per recvmmsg call")
    recv_coalesce_us = Property(to_int, 20, "jgpy: once 3 batches in a row came less than twice this apart, a "
                                "receive thread sleeps this long (plus the kernel's timer slack) between batches "
                                "and reads several per wake-up (0: off)",
                                system_property=("jgpy.udp.recv_coalesce_us",))

    drop_own_bundles_in_kernel = Property(to_bool, True, "jgpy: with loopback, a socket filter makes the kernel "
                                          "drop our own bundles coming back on the multicast socket (they went "
                                          "up through loopback already) instead of copying them to us to be "
                                          "dropped here")

    IGNORED_PROPERTIES = {
        "num_last_ports": ignored("deprecated in 2.12"),
        "null_src_addresses": ignored("deprecated in 2.12"),
        "send_on_all_interfaces": ignored("deprecated in 2.12"),
        "send_interfaces": ignored("deprecated in 2.12"),
    }

    def __init__(self) -> None:
        super().__init__()
        self.ucast_sock: socket.socket | None = None
        self.mcast_sock: socket.socket | None = None
        self._loops: list[DatagramLoop] = []
        self._bundler: Bundler | None = None
        self._peer_bundlers: dict[Any, Bundler] = {}     # unicast streams, per member (see unicast_stream_gap_us)
        self._peer_bundlers_lock = threading.Lock()
        self.granted: dict[str, int] = {}
        self.own_bundles_filtered = False            # the kernel drops our own bundles (_filter_own_bundles)

    def init(self) -> None:
        if not self.ip_mcast:
            raise ConfigError("UDP ip_mcast=false (multicast by unicasts to every member) is not supported by jgpy")
        try:
            group = ipaddress.ip_address(self.mcast_addr)
        except ValueError:
            raise ConfigError(f"UDP mcast_addr {self.mcast_addr!r} is not an IP address") from None
        if not group.is_multicast:
            raise ConfigError(f"UDP mcast_addr {self.mcast_addr} is not a multicast address")
        if self.bundler_ring_size < 65536:
            raise ConfigError(f"UDP bundler_ring_size={self.bundler_ring_size}: the ring must hold the biggest "
                              f"datagram: set it to at least 65536")
        if self.bundler_capacity < 1:
            raise ConfigError(f"UDP bundler_capacity={self.bundler_capacity}: must be at least 1")

    # ---- sockets ----

    def start(self) -> None:
        bind = resolve_bind_addr(self.bind_addr)
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self.ucast_sock = self._unicast_socket(bind, family)
        port = self.ucast_sock.getsockname()[1]
        self.physical_addr = IpAddress(bind, port)
        self.mcast_sock = self._multicast_socket(bind, family)
        # the core sends unicasts to known members and sparse multicasts itself, from C
        self.ucast_sender = DatagramSender(self.ucast_sock)
        self.mcast_sender = DatagramSender(self.mcast_sock)
        self.mcast_dest = (self.mcast_addr, self.mcast_port)
        relay = self.thread_pool_enabled and self.relay_delivery     # see TP.relay_delivery
        loop_args = {"batch": self.recv_batch, "coalesce_us": self.recv_coalesce_us, "threads": 2 if relay else 1,
                     "on_thread": register_relay if relay else None, "relay_gap_us": self.relay_gap_us,
                     "log": self._rl}
        self._loops = [
            DatagramLoop(self.ucast_sock, self.receive_unicasts, name=f"jgpy-ucast-{port}", guest=relay,
                         **loop_args),
            DatagramLoop(self.mcast_sock, self.receive_multicasts, name=f"jgpy-mcast-{port}", **loop_args),
        ]
        for loop in self._loops:
            loop.start()
        super().start()
        # as Java's TP: tell the protocols above which interface the transport uses (FD_SOCK binds there too)
        self.up_prot.up(Event(EventType.CONFIG, {"bind_addr": bind}))

    def _set_buffers(self, sock: socket.socket, which: str, snd: int, rcv: int) -> None:
        for opt, size, label in ((socket.SO_SNDBUF, snd, "send"), (socket.SO_RCVBUF, rcv, "receive")):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, size)
            except OSError:
                pass
            got = sock.getsockopt(socket.SOL_SOCKET, opt) // 2      # Linux reports twice what it grants
            self.granted[f"{which}_{label}"] = got
            if got < size:
                self.log.warning("%s buffer of the %s socket was set to %s, but the OS only allocated %s. This "
                                 "might lead to performance problems: raise net.core.%smem_max", label, which,
                                 _human(size), _human(got), "w" if label == "send" else "r")

    def _unicast_socket(self, bind: str, family: int) -> socket.socket:
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            if self.bind_port > 0:
                for p in range(self.bind_port, self.bind_port + max(0, self.port_range) + 1):
                    try:
                        sock.bind((bind, p))
                        break
                    except OSError:
                        continue
                else:
                    raise ConfigError(f"UDP: failed to open a port in range {self.bind_port}-"
                                      f"{self.bind_port + self.port_range} on {bind}")
            else:
                sock.bind((bind, 0))
            try:
                sock.setsockopt(socket.IPPROTO_IP, IP_TOS, self.tos)
            except OSError:
                pass
            self._set_buffers(sock, "unicast", self.ucast_send_buf_size, self.ucast_recv_buf_size)
            sock.setblocking(True)
            return sock
        except BaseException:
            sock.close()
            raise

    def _multicast_socket(self, bind: str, family: int) -> socket.socket:
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET:
                try:
                    sock.bind((self.mcast_addr, self.mcast_port))     # only this group's datagrams (as Java on Linux)
                except OSError:
                    sock.bind(("", self.mcast_port))
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                                socket.inet_aton(self.mcast_addr) + socket.inet_aton(bind))
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(bind))
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, self.ip_ttl)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0 if self.disable_loopback else 1)
                try:
                    sock.setsockopt(socket.IPPROTO_IP, IP_TOS, self.tos)
                except OSError:
                    pass
            else:
                sock.bind(("", self.mcast_port))
                ifindex = 0
                mreq = socket.inet_pton(socket.AF_INET6, self.mcast_addr) + ifindex.to_bytes(4, "little")
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, self.ip_ttl)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0 if self.disable_loopback else 1)
            self._set_buffers(sock, "multicast", self.mcast_send_buf_size, self.mcast_recv_buf_size)
            return sock
        except BaseException:
            sock.close()
            raise

    def handle_local_address(self, addr) -> None:
        if self.mcast_sock is None or not self.enable_bundling:
            return
        prefix = self.stack.dialect.list_prefix(None, addr, True)
        self.own_bundle_prefix = prefix
        self._filter_own_bundles(prefix)
        self._bundler = Bundler(self.mcast_sock, self.mcast_dest, prefix, b"\x00",
                                max_size=self.max_bundle_size, max_delay_ms=float(self.max_bundle_timeout),
                                capacity=self.bundler_ring_size, max_entries=self.bundler_capacity,
                                name=f"jgpy-bundler-{addr}", log=self._rl)
        self._bundler.start()
        self.bundler = self._bundler
        self.make_peer_bundler = self._make_peer_bundler

    def _filter_own_bundles(self, prefix: bytes) -> None:
        """Our bundles come back on the multicast socket (IP_MULTICAST_LOOP, for the other members on this host)
        and are dropped by the transport core (their messages went up through loopback). A sender of 1 KB
        multicasts at 300k/s gets 300 MB/s of them: the kernel drops them before copying (prefix: the bundle's
        start, with our address in it). Without socket filters the core drops them as before."""
        self.own_bundles_filtered = False
        if not (self.loopback and self.drop_own_bundles_in_kernel) or self.mcast_sock is None:
            return
        try:
            attach_filter(self.mcast_sock, drop_payload_prefix(prefix))
            self.own_bundles_filtered = True
        except (OSError, ValueError) as e:
            self.log.debug("%s: own bundles are dropped in user space: %s", self.local_addr, e)

    def _make_peer_bundler(self, dest, physical: IpAddress) -> Bundler | None:
        """The bundler of the unicast streams to ``dest`` (called by the send core when it sees one)."""
        sock, me = self.ucast_sock, self.local_addr
        if sock is None or me is None:
            return None
        b = Bundler(sock, physical.sockaddr(), self.stack.dialect.list_prefix(dest, me, False), b"\x00",
                    max_size=self.max_bundle_size, max_delay_ms=float(self.max_bundle_timeout),
                    capacity=self.bundler_ring_size, max_entries=self.bundler_capacity,
                    name=f"jgpy-bundler-{me}-{dest}", log=self._rl)
        b.start()
        with self._peer_bundlers_lock:
            old = self._peer_bundlers.pop(dest, None)
            self._peer_bundlers[dest] = b
        if old is not None:
            old.stop()                    # the member's physical address changed
        return b

    def retire_peer_bundlers(self, keep: set | None = None) -> None:
        with self._peer_bundlers_lock:
            gone = [d for d in self._peer_bundlers if keep is None or d not in keep]
            bundlers = [self._peer_bundlers.pop(d) for d in gone]
        peers = self.peers
        for d in [d for d in peers if keep is None or d not in keep]:
            peers.pop(d, None)
        for b in bundlers:
            b.stop()

    def stop(self) -> None:
        super().stop()
        self.bundler = self.ucast_sender = self.mcast_sender = self.make_peer_bundler = None
        self.retire_peer_bundlers()
        if self._bundler is not None:
            self._bundler.stop()
            self._bundler = None
        for loop in self._loops:
            loop.stop()
        self._loops = []
        for sock in (self.mcast_sock, self.ucast_sock):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        self.mcast_sock = self.ucast_sock = None

    # ---- receiving: a waiting caller reads its answers itself ----

    def read_while(self, pending: Callable[[], bool], timeout: float) -> bool:
        loops = self._loops
        return bool(loops) and loops[0].read_while(pending, timeout)

    def wake_reader(self) -> None:
        loops = self._loops
        if loops:
            loops[0].wake_reader()

    # ---- sending ----

    def send_multicast_datagram(self, data: bytes) -> None:
        sender = self.mcast_sender
        if sender is None:
            return
        try:
            sender.send(data, self.mcast_dest)
        except OSError as e:
            self._multicast_failed(e, len(data))

    def _multicast_failed(self, e: OSError, size: int) -> None:
        self._rl.error("mcast-send", "%s: multicast of %d bytes failed: %s", self.local_addr, size, e)

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        sender = self.ucast_sender
        if sender is None:
            return
        try:
            sender.send(data, dest)
        except OSError as e:
            self._unicast_failed(e, len(data), dest)

    def _unicast_failed(self, e: OSError, size: int, dest: IpAddress) -> None:
        self._rl.error(f"ucast-send-{dest}", "%s: unicast of %d bytes to %s failed: %s", self.local_addr, size,
                       dest, e)

    def bundle(self, entry: bytes) -> None:
        b = self._bundler
        if b is None:                     # bundling switched off or not connected: send the entry alone
            self.send_multicast_datagram(self.stack.dialect.list_prefix(None, self.local_addr, True) + entry + b"\x00")
            return
        try:
            b.add(entry)
        except RuntimeError:              # the bundler was stopped under us: we are disconnecting
            self.log.debug("%s: dropped a multicast sent while stopping", self.local_addr)

    def dump_stats(self) -> dict[str, Any]:
        d = super().dump_stats()
        d["granted_buffers"] = dict(self.granted)
        if self._bundler is not None:
            d["bundler"] = self._bundler.stats
        with self._peer_bundlers_lock:
            peers = dict(self._peer_bundlers)
        for dest, b in peers.items():
            d[f"bundler-{dest}"] = b.stats
        d["own_bundles_filtered"] = self.own_bundles_filtered
        d["unicasts_bundled"] = self.unicasts_bundled
        d["multicasts_direct"] = self.multicasts_direct
        for loop in self._loops:
            d[loop.name if hasattr(loop, "name") else "loop"] = loop.stats
        return d


def _human(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f}MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.0f}KB"
    return f"{n}B"
