"""BPING: discovery by UDP broadcast (``org.jgroups.protocols.BPING`` of 2.12).

Each member binds the first free port of ``bind_port`` .. ``bind_port + port_range - 1`` (on all interfaces,
as 2.12) and sends its requests to every port of that range at ``dest`` (a broadcast address; on one host
``127.255.255.255`` or ``127.0.0.1`` reaches the members on loopback). Answers come back through the transport.
See :mod:`jgpy.protocols.datagram_discovery` for what is accepted from the socket.
"""

from __future__ import annotations

import socket

from jgpy.errors import ConfigError
from jgpy.protocols.datagram_discovery import DatagramDiscovery
from jgpy.stack.properties import Property, to_int, to_str


class BPING(DatagramDiscovery):
    NAME = "BPING"

    dest = Property(to_str, "255.255.255.255", "where the requests go (a broadcast address of the local subnet)")
    bind_port = Property(to_int, 8555, "first port of the discovery sockets",
                         system_property=("jgroups.bping.bind_port",))
    port_range = Property(to_int, 5, "ports bind_port .. bind_port + port_range - 1: a member binds the first free "
                          "one, requests go to all of them")

    def init(self) -> None:
        super().init()
        if self.port_range < 1:
            raise ConfigError(f"BPING port_range={self.port_range}: must be at least 1")
        try:
            self._dest_ip = socket.getaddrinfo(self.dest, None, socket.AF_INET, socket.SOCK_DGRAM)[0][4][0]
        except OSError as e:
            raise ConfigError(f"BPING dest {self.dest!r} cannot be resolved: {e}") from None

    def open_socket(self) -> socket.socket:
        last: OSError | None = None
        for port in range(self.bind_port, self.bind_port + self.port_range):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.bind(("", port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
                return sock
            except OSError as e:
                sock.close()
                last = e
        raise ConfigError(f"BPING: no free port in [{self.bind_port}, {self.bind_port + self.port_range - 1}] "
                          f"({last}): raise port_range or free a port") from last

    def destinations(self) -> list[tuple[str, int]]:
        return [(self._dest_ip, p) for p in range(self.bind_port, self.bind_port + self.port_range)]
