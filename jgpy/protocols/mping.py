"""MPING: discovery by IP multicast on a group of its own (``org.jgroups.protocols.MPING`` of 2.12).

For transports without multicast (TCP, as in the jar's ``mping.xml``): requests go to ``mcast_addr:mcast_port``
from a socket bound to that group (on Linux, as 2.12 does, so that other groups on the port stay out) and
joined on ``bind_addr`` (the transport's unless set); answers come back through the transport. See
:mod:`jgpy.protocols.datagram_discovery` for what is accepted from the socket.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

from jgpy.errors import ConfigError
from jgpy.protocols.datagram_discovery import DatagramDiscovery
from jgpy.stack.netutil import resolve_bind_addr
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_str


class MPING(DatagramDiscovery):
    NAME = "MPING"

    bind_addr = Property(to_str, None, "interface the multicast socket joins the group on (default: the "
                         "transport's bind_addr)", system_property=("jgroups.bind_addr", "bind.address"))
    mcast_addr = Property(to_str, "230.5.6.7", "multicast group of the discovery requests",
                          system_property=("jgroups.mping.mcast_addr",))
    mcast_port = Property(to_int, 7555, "multicast port of the discovery requests",
                          system_property=("jgroups.mping.mcast_port",))
    ip_ttl = Property(to_int, 8, "time to live of the discovery datagrams", system_property=("jgroups.mping.ip_ttl",))
    receive_on_all_interfaces = Property(to_bool, False, "join the group on every interface that has IPv4 (as the "
                                         "jar's mping.xml has it), not only on bind_addr's")

    DEPRECATED_PROPERTIES = DatagramDiscovery.DEPRECATED_PROPERTIES + ("bind_to_all_interfaces",)
    IGNORED_PROPERTIES = {
        "bind_interface": ignored("use bind_addr"),
        "bind_interface_str": ignored("use bind_addr"),
        "receive_interfaces": ignored("jgpy joins the group on bind_addr only"),
        "send_on_all_interfaces": ignored("jgpy sends on bind_addr's interface only"),
        "send_interfaces": ignored("jgpy sends on bind_addr's interface only"),
    }

    def init(self) -> None:
        super().init()
        try:
            group = ipaddress.ip_address(self.mcast_addr)
        except ValueError:
            raise ConfigError(f"MPING mcast_addr {self.mcast_addr!r} is not an IP address") from None
        if not group.is_multicast:
            raise ConfigError(f"MPING mcast_addr {self.mcast_addr} is not a multicast address")
        if group.version != 4:
            raise ConfigError(f"MPING mcast_addr {self.mcast_addr}: jgpy's MPING supports IPv4 groups only")

    def _interface(self) -> str:
        spec = self.bind_addr if self.bind_addr is not None else getattr(self.transport, "bind_addr", None)
        return resolve_bind_addr(spec)

    def open_socket(self) -> socket.socket:
        iface = self._interface()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.mcast_addr, self.mcast_port))     # only this group's datagrams (JGRP-836)
            except OSError:
                sock.bind(("", self.mcast_port))
            group = socket.inet_aton(self.mcast_addr)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group + socket.inet_aton(iface))
            if self.receive_on_all_interfaces:
                self._join_everywhere(sock, group)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(iface))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, self.ip_ttl)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            return sock
        except BaseException:
            sock.close()
            raise

    def _join_everywhere(self, sock: socket.socket, group: bytes) -> None:
        """Join on every interface (``ip_mreqn`` by interface index); one that cannot (down, no IPv4, already
        joined through bind_addr) is skipped."""
        for index, _name in socket.if_nameindex():
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                                group + socket.inet_aton("0.0.0.0") + struct.pack("@i", index))
            except OSError:
                pass

    def destinations(self) -> list[tuple[str, int]]:
        return [(self.mcast_addr, self.mcast_port)]
