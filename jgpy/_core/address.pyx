# cython: language_level=3
"""Addresses: :class:`UUID` (logical member address) and :class:`IpAddress` (physical address).

Semantics follow ``org.jgroups.util.UUID`` and ``org.jgroups.stack.IpAddress`` of 2.12: equality and
``java_hash()`` match Java's ``equals``/``hashCode``, ordering matches ``compareTo`` (UUID: signed
msb, then signed lsb), so sorting addresses gives the order Java nodes use (e.g. to pick a merge
leader). Logical names are not part of an address: they live in a process-wide cache, as in Java.
"""

cimport cython

import os
import socket

from libc.stdint cimport uint64_t, uint32_t

cdef dict _names = {}          # UUID -> logical name (org.jgroups.util.UUID.cache)
cdef Py_ssize_t _MAX_NAMES = 10000


cdef inline int64_t _signed64(object v) except? -1:
    v = int(v)
    if v < -(1 << 63) or v >= (1 << 64):
        raise ValueError(f"{v} does not fit in 64 bits")
    if v >= (1 << 63):
        v -= (1 << 64)
    return <int64_t>v


cdef UUID make_uuid(int64_t msb, int64_t lsb):
    cdef UUID u = UUID.__new__(UUID)
    u.msb = msb
    u.lsb = lsb
    u.additional_data = None
    return u


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class Address:
    """Base class of every member address: Java's equals/hashCode/compareTo semantics for Python."""

    cpdef int32_t java_hash(self):
        """Java's ``hashCode()``."""
        raise NotImplementedError

    cpdef object _eq(self, object other):
        """Java's ``equals``, or NotImplemented for an object of another address family."""
        raise NotImplementedError

    cpdef int compare_to(self, object other) except? -2:
        """Java's ``compareTo``: -1, 0 or 1 (TypeError across address families, where Java throws)."""
        raise NotImplementedError

    def __hash__(self):
        return self.java_hash()

    def __eq__(self, other):
        return self._eq(other)

    def __ne__(self, other):
        r = self._eq(other)
        return r if r is NotImplemented else not r

    def __lt__(self, other): return self.compare_to(other) < 0
    def __le__(self, other): return self.compare_to(other) <= 0
    def __gt__(self, other): return self.compare_to(other) > 0
    def __ge__(self, other): return self.compare_to(other) >= 0


def _hex(v, digits):
    return format(v & ((1 << (4 * digits)) - 1), f"0{digits}x")


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class UUID(Address):
    """A logical address: 128 random bits (``org.jgroups.util.UUID``).

    ``msb``/``lsb`` are the signed 64-bit halves. On the wire the least significant half comes first.
    """

    def __init__(self, msb, lsb, additional_data=None):
        self.msb = _signed64(msb)
        self.lsb = _signed64(lsb)
        self.additional_data = bytes(additional_data) if additional_data is not None else None

    @classmethod
    def random(cls):
        """A fresh random UUID, like ``UUID.randomUUID()`` (16 random bytes, no version bits set)."""
        data = os.urandom(16)
        return cls(int.from_bytes(data[:8], "big", signed=True), int.from_bytes(data[8:], "big", signed=True))

    @classmethod
    def from_string(cls, str text):
        """Parse the ``8-4-4-4-12`` hex form printed by ``toStringLong()``."""
        parts = text.split("-")
        if len(parts) != 5 or [len(p) for p in parts] != [8, 4, 4, 4, 12]:
            raise ValueError(f"not a UUID: {text!r}")
        value = int("".join(parts), 16)
        return cls(value >> 64, value & ((1 << 64) - 1))

    def to_string_long(self):
        """The ``8-4-4-4-12`` hex form (msb first), as Java's ``UUID.toStringLong()``."""
        m = self.msb & 0xFFFFFFFFFFFFFFFF
        l = self.lsb & 0xFFFFFFFFFFFFFFFF
        return f"{_hex(m >> 32, 8)}-{_hex(m >> 16, 4)}-{_hex(m, 4)}-{_hex(l >> 48, 4)}-{_hex(l, 12)}"

    @property
    def name(self):
        """The logical name from the process-wide cache, or None."""
        return _names.get(self)

    cpdef int32_t java_hash(self):
        cdef uint64_t m = <uint64_t>self.msb, l = <uint64_t>self.lsb
        return <int32_t>(<uint32_t>((m >> 32) ^ m ^ (l >> 32) ^ l))

    cpdef object _eq(self, object other):
        if not isinstance(other, UUID):
            return NotImplemented
        return self.msb == (<UUID>other).msb and self.lsb == (<UUID>other).lsb

    cpdef int compare_to(self, object other) except? -2:
        if not isinstance(other, UUID):
            raise TypeError(f"cannot order a UUID and a {type(other).__name__}")
        cdef UUID o = <UUID>other
        if self.msb != o.msb:
            return -1 if self.msb < o.msb else 1
        if self.lsb != o.lsb:
            return -1 if self.lsb < o.lsb else 1
        return 0

    def __str__(self):
        n = _names.get(self)
        return n if n is not None else self.to_string_long()

    def __repr__(self):
        n = _names.get(self)
        extra = f", name={n!r}" if n is not None else ""
        return f"{type(self).__name__}('{self.to_string_long()}'{extra})"

    def __reduce__(self):
        return (type(self)._from_state, (self.msb, self.lsb, self.additional_data))

    @classmethod
    def _from_state(cls, msb, lsb, additional_data):
        return cls(msb, lsb, additional_data)


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class PayloadUUID(UUID):
    """UUID carrying a string payload (``org.jgroups.util.PayloadUUID``, magic 82)."""

    def __init__(self, msb, lsb, payload=None, additional_data=None):
        UUID.__init__(self, msb, lsb, additional_data)
        self.payload = payload

    def __reduce__(self):
        return (PayloadUUID, (self.msb, self.lsb, self.payload, self.additional_data))


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class AdditionalDataUUID(UUID):
    """UUID carrying a byte payload (``org.jgroups.util.AdditionalDataUUID``, magic 83)."""

    def __init__(self, msb, lsb, payload=None, additional_data=None):
        UUID.__init__(self, msb, lsb, additional_data)
        self.payload = bytes(payload) if payload is not None else None

    def __reduce__(self):
        return (AdditionalDataUUID, (self.msb, self.lsb, self.payload, self.additional_data))


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class TopologyUUID(UUID):
    """UUID carrying site/rack/machine ids (``org.jgroups.util.TopologyUUID``, magic 84)."""

    def __init__(self, msb, lsb, site_id=None, rack_id=None, machine_id=None, additional_data=None):
        UUID.__init__(self, msb, lsb, additional_data)
        self.site_id = site_id
        self.rack_id = rack_id
        self.machine_id = machine_id

    def __reduce__(self):
        return (TopologyUUID, (self.msb, self.lsb, self.site_id, self.rack_id, self.machine_id,
                               self.additional_data))


cdef int32_t _java_inet_hash(bytes ip):
    """``InetAddress.hashCode()`` of Java 17 (IPv4: the address as an int; IPv6: sum of 4-byte words)."""
    cdef const unsigned char* p = ip
    cdef uint32_t h = 0, comp
    cdef Py_ssize_t i, j, n = len(ip)
    if n == 4:
        return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])
    i = 0
    while i < n:
        comp = 0
        j = 0
        while j < 4 and i < n:
            comp = (comp << 8) + <uint32_t><int32_t>(<signed char>p[i])   # Java bytes are signed
            j += 1
            i += 1
        h += comp
    return <int32_t>h


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class IpAddress(Address):
    """A physical address: IP + port (``org.jgroups.stack.IpAddress``)."""

    def __init__(self, host, int port, scope_id=None, additional_data=None):
        if not 0 <= port <= 0xFFFF:
            raise ValueError(f"port {port} out of range 0..65535")
        if host is None:
            self.ip = None
        elif isinstance(host, (bytes, bytearray)):
            if len(host) not in (4, 16):
                raise ValueError(f"a packed IP address has 4 or 16 bytes, not {len(host)}")
            self.ip = bytes(host)
        else:
            host = str(host)
            if "%" in host:
                host, _, scope = host.partition("%")
                if scope_id is None:
                    scope_id = int(scope)
            try:
                self.ip = socket.inet_pton(socket.AF_INET, host)
            except OSError:
                try:
                    self.ip = socket.inet_pton(socket.AF_INET6, host)
                except OSError:
                    raise ValueError(f"not a numeric IP address: {host!r} (resolve names before building "
                                     "an IpAddress)") from None
        self.port = port
        if self.ip is not None and len(self.ip) == 16:
            self.scope_id = int(scope_id or 0)
        else:
            self.scope_id = None
        self.additional_data = bytes(additional_data) if additional_data is not None else None

    @property
    def host(self):
        """The address in text form (dotted quad or IPv6 text), or None."""
        if self.ip is None:
            return None
        return socket.inet_ntop(socket.AF_INET if len(self.ip) == 4 else socket.AF_INET6, self.ip)

    @property
    def is_ipv6(self):
        return self.ip is not None and len(self.ip) == 16

    def is_multicast(self):
        if self.ip is None:
            return False
        cdef const unsigned char* p = self.ip
        return (p[0] & 0xF0) == 0xE0 if len(self.ip) == 4 else p[0] == 0xFF

    def sockaddr(self):
        """A tuple for ``socket.sendto``/``connect``."""
        if self.is_ipv6:
            return (self.host, self.port, 0, self.scope_id or 0)
        return (self.host, self.port)

    cpdef int32_t java_hash(self):
        if self.ip is None:
            return self.port
        return <int32_t>(<uint32_t>_java_inet_hash(self.ip) + <uint32_t>self.port)

    cpdef object _eq(self, object other):
        if not isinstance(other, IpAddress):
            return NotImplemented
        return self.ip == (<IpAddress>other).ip and self.port == (<IpAddress>other).port

    cpdef int compare_to(self, object other) except? -2:
        """InetAddress hash code (signed), then port."""
        if not isinstance(other, IpAddress):
            raise TypeError(f"cannot order an IpAddress and a {type(other).__name__}")
        cdef IpAddress o = <IpAddress>other
        cdef int32_t h1, h2
        if self.ip is None:
            if o.ip is None:
                return (self.port > o.port) - (self.port < o.port)
            return -1
        if o.ip is None:
            return 1  # Java would throw a NullPointerException here; order nulls first instead
        h1 = _java_inet_hash(self.ip)
        h2 = _java_inet_hash(o.ip)
        if h1 != h2:
            return -1 if h1 < h2 else 1
        return (self.port > o.port) - (self.port < o.port)

    def __str__(self):
        h = self.host
        return f"{h if h is not None else '<null>'}:{self.port}"

    def __repr__(self):
        extra = f", scope_id={self.scope_id}" if self.scope_id else ""
        return f"IpAddress({self.host!r}, {self.port}{extra})"

    def __reduce__(self):
        return (IpAddress, (self.ip, self.port, self.scope_id, self.additional_data))


# ---- logical name cache (org.jgroups.util.UUID.add/get/remove) ----

def set_logical_name(UUID addr, str name):
    """Remember ``name`` as the logical name of ``addr`` (filled from discovery and JChannel.setName)."""
    if name is None:
        _names.pop(addr, None)
        return
    if len(_names) >= _MAX_NAMES and addr not in _names:
        _names.pop(next(iter(_names)))
    _names[addr] = name


def logical_name(addr):
    """The cached logical name of ``addr``, or None."""
    return _names.get(addr)


def remove_logical_name(addr):
    _names.pop(addr, None)


def logical_names():
    """A snapshot of the cache as a dict ``{UUID: name}``."""
    return dict(_names)
