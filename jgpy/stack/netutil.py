"""Network helpers shared by the protocols that open sockets (UDP, FD_SOCK, ...)."""

from __future__ import annotations

import ipaddress
import socket

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
