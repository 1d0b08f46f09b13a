# cython: language_level=3, boundscheck=False, wraparound=False
"""Socket helpers of the core: the descriptor of a Python socket, and ``sockaddr`` structures from and to
``(host, port)`` tuples (declarations in sockets.pxd)."""

cimport cython

import socket as _socket

from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memcpy, memset, strlen


cdef extern from "<netinet/in.h>" nogil:
    struct in_addr:
        uint32_t s_addr

    struct in6_addr:
        pass

    struct sockaddr_in:
        sa_family_t sin_family
        uint16_t sin_port
        in_addr sin_addr

    struct sockaddr_in6:
        sa_family_t sin6_family
        uint16_t sin6_port
        uint32_t sin6_flowinfo
        in6_addr sin6_addr
        uint32_t sin6_scope_id

    uint16_t htons(uint16_t)
    uint16_t ntohs(uint16_t)
    uint32_t htonl(uint32_t)


cdef extern from "<arpa/inet.h>" nogil:
    const char* inet_ntop(int af, const void* src, char* dst, socklen_t size)
    int inet_pton(int af, const char* src, void* dst)


#: largest UDP payload over IPv4 (65535 - 8 byte UDP header - 20 byte IP header)
MAX_UDP_PAYLOAD = MAX_UDP_DATAGRAM


cdef int sock_fd(object sock, int kind) except -1:
    """The descriptor of an open socket of type ``kind`` (SOCK_DGRAM, SOCK_STREAM; 0: any)."""
    try:
        fd = sock.fileno()
    except AttributeError:
        raise TypeError(f"expected a socket.socket, got {type(sock).__name__}") from None
    if fd < 0:
        raise ValueError("the socket is closed: pass an open socket")
    if kind == SOCK_DGRAM and sock.type != _socket.SOCK_DGRAM:
        raise ValueError(f"expected a UDP (SOCK_DGRAM) socket, got type {sock.type!r}")
    if kind == SOCK_STREAM and sock.type != _socket.SOCK_STREAM:
        raise ValueError(f"expected a TCP (SOCK_STREAM) socket, got type {sock.type!r}")
    return fd


@cython.boundscheck(True)
@cython.wraparound(True)
cdef int fill_sockaddr(object sock, object dest, sockaddr_storage* out, socklen_t* outlen) except -1:
    """Builds the sockaddr for ``dest`` = (host, port[, flowinfo, scope_id]) matching the socket's family.

    Numeric hosts are parsed with inet_pton; names are resolved once with getaddrinfo.  An IPv4
    destination on an AF_INET6 socket becomes the v4-mapped address ``::ffff:a.b.c.d``.
    """
    cdef sockaddr_in* sin
    cdef sockaddr_in6* sin6
    cdef unsigned char* a6
    cdef in_addr v4
    cdef int family = sock.family
    try:
        dest = tuple(dest)
        if not 2 <= len(dest) <= 4:
            raise ValueError
        host, port = dest[0], int(dest[1])
    except (TypeError, ValueError):
        raise ValueError(f"destination must be a (host, port) tuple, got {dest!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"destination port must be in 1..65535, got {port} in {dest!r}")
    if not isinstance(host, str):
        raise ValueError(f"destination host must be a str, got {host!r} in {dest!r}")
    hb = host.encode("ascii", "replace")
    memset(out, 0, sizeof(sockaddr_storage))
    if family == AF_INET:
        sin = <sockaddr_in*>out
        if inet_pton(AF_INET, hb, &sin.sin_addr) != 1:
            try:
                infos = _socket.getaddrinfo(host, port, _socket.AF_INET, _socket.SOCK_DGRAM)
            except OSError as e:
                raise ValueError(f"cannot resolve destination {dest!r} to an IPv4 address: {e}") from None
            hb = infos[0][4][0].encode("ascii")
            if inet_pton(AF_INET, hb, &sin.sin_addr) != 1:
                raise ValueError(f"cannot resolve destination {dest!r} to an IPv4 address")
        sin.sin_family = AF_INET
        sin.sin_port = htons(<uint16_t>port)
        outlen[0] = sizeof(sockaddr_in)
        return 0
    if family == AF_INET6:
        sin6 = <sockaddr_in6*>out
        a6 = <unsigned char*>&sin6.sin6_addr
        flowinfo = int(dest[2]) if len(dest) > 2 else 0
        scope_id = int(dest[3]) if len(dest) > 3 else 0
        if inet_pton(AF_INET6, hb, a6) != 1:
            if inet_pton(AF_INET, hb, &v4) == 1:
                memset(a6, 0, 10)
                a6[10] = 0xFF
                a6[11] = 0xFF
                memcpy(a6 + 12, &v4, 4)
            else:
                try:
                    infos = _socket.getaddrinfo(host, port, _socket.AF_INET6, _socket.SOCK_DGRAM)
                except OSError as e:
                    raise ValueError(f"cannot resolve destination {dest!r} to an IPv6 address: {e}") from None
                sa = infos[0][4]
                hb = sa[0].split("%")[0].encode("ascii")
                if len(sa) > 3 and not scope_id:
                    scope_id = int(sa[3])
                if inet_pton(AF_INET6, hb, a6) != 1:
                    raise ValueError(f"cannot resolve destination {dest!r} to an IPv6 address")
        sin6.sin6_family = AF_INET6
        sin6.sin6_port = htons(<uint16_t>port)
        sin6.sin6_flowinfo = htonl(<uint32_t>flowinfo)
        sin6.sin6_scope_id = <uint32_t>scope_id
        outlen[0] = sizeof(sockaddr_in6)
        return 0
    raise ValueError(f"only AF_INET and AF_INET6 sockets are supported, got family {family!r}")


cdef object sockaddr_to_tuple(const sockaddr_storage* sa):
    """(host: str, port: int) for an IPv4/IPv6 source address, None for another family."""
    cdef char buf[64]
    cdef const sockaddr_in* sin
    cdef const sockaddr_in6* sin6
    if sa.ss_family == AF_INET:
        sin = <const sockaddr_in*>sa
        if inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof(buf)) == NULL:
            return None
        return (buf[:strlen(buf)].decode("ascii"), ntohs(sin.sin_port))
    if sa.ss_family == AF_INET6:
        sin6 = <const sockaddr_in6*>sa
        if inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof(buf)) == NULL:
            return None
        return (buf[:strlen(buf)].decode("ascii"), ntohs(sin6.sin6_port))
    return None

