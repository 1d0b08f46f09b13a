"""The GossipRouter protocol of 2.12 (``org.jgroups.stack.GossipData``, ``GossipRouter``'s request types): what
TUNNEL's and TCPGOSSIP's stubs and a GossipRouter say to each other over one TCP connection.

Every request is a ``GossipData`` (no length prefix: a reader learns its end by parsing it)::

    byte    type             CONNECT=1 DISCONNECT=2 GOSSIP_GET=4 MESSAGE=10 SUSPECT=11 PING=12 CLOSE=13
                             CONNECT_OK=14 OP_FAIL=15 DISCONNECT_OK=16
    Util.writeString(group)            bool presence + writeUTF
    Util.writeAddress(addr)            CONNECT/DISCONNECT: the member; MESSAGE: the destination (null: all)
    Util.writeString(logical_name)     CONNECT
    Util.writeAddresses(mbrs)          short count (-1: null) + addresses (never sent by 2.12)
    Util.writeAddresses(physical_addrs) CONNECT: the member's physical address
    Util.writeByteBuffer(buffer)       byte 1 + int length + bytes, or byte 0; MESSAGE: a TP datagram

Answers that are not a GossipData: CONNECT gets one status byte (CONNECT_OK or OP_FAIL); GOSSIP_GET gets a short
count and that many ``PingData.writeTo`` (no presence byte). The router's SUSPECT (a member's connection broke)
is a GossipData of type SUSPECT followed by ``Util.writeAddress(suspect)``.

Parsing from a stream: :func:`decode_request` raises :class:`NeedMore` (with the total length known to be needed,
when it is) while the request is incomplete, and :class:`~jgpy.errors.WireFormatError` when it cannot be one;
counts and lengths are checked against ``limits`` before anything is read for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jgpy._core.wire import Reader, Writer
from jgpy.errors import WireFormatError

CONNECT, DISCONNECT, GOSSIP_GET = 1, 2, 4
MESSAGE, SUSPECT, PING, CLOSE = 10, 11, 12, 13
CONNECT_OK, OP_FAIL, DISCONNECT_OK = 14, 15, 16

TYPE_NAMES = {CONNECT: "CONNECT", DISCONNECT: "DISCONNECT", GOSSIP_GET: "GOSSIP_GET", MESSAGE: "MESSAGE",
              SUSPECT: "SUSPECT", PING: "PING", CLOSE: "CLOSE", CONNECT_OK: "CONNECT_OK", OP_FAIL: "OP_FAIL",
              DISCONNECT_OK: "DISCONNECT_OK"}

_NEED = re.compile(r"truncated: need (\d+) bytes")


@dataclass(frozen=True)
class Limits:
    """What a reader accepts: the longest MESSAGE buffer and the most addresses in a list."""

    max_buffer: int = 1 << 20
    max_addresses: int = 64


@dataclass
class GossipData:
    type: int
    group: str | None = None
    addr: Any = None
    logical_name: str | None = None
    mbrs: list | None = None
    physical_addrs: list | None = None
    buffer: bytes | None = None
    suspect: Any = None           # SUSPECT from a router: the address written after the GossipData

    def __repr__(self) -> str:
        parts = [TYPE_NAMES.get(self.type, f"type {self.type}"), f"group={self.group}", f"addr={self.addr}"]
        if self.logical_name is not None:
            parts.append(f"name={self.logical_name}")
        if self.physical_addrs:
            parts.append(f"physical={list(self.physical_addrs)}")
        if self.buffer is not None:
            parts.append(f"{len(self.buffer)} bytes")
        return f"GossipData({', '.join(parts)})"


class NeedMore(Exception):
    """The bytes so far are the start of a request; ``need``: the total length it needs at least (0: unknown)."""

    def __init__(self, need: int = 0):
        super().__init__(need)
        self.need = need


def _write_addresses(w: Writer, dialect, addrs) -> None:
    if addrs is None:
        w.write_short(-1)
        return
    addrs = list(addrs)
    w.write_short(len(addrs))
    for a in addrs:
        dialect.write_address_to(w, a)


def encode(dialect, gd: GossipData) -> bytes:
    """``GossipData.writeTo`` (plus the suspect's address after a SUSPECT that names one)."""
    w = Writer(64 + (len(gd.buffer) if gd.buffer is not None else 0))
    w.write_byte(gd.type)
    w.write_string(gd.group)
    dialect.write_address_to(w, gd.addr)
    w.write_string(gd.logical_name)
    _write_addresses(w, dialect, gd.mbrs)
    _write_addresses(w, dialect, gd.physical_addrs)
    w.write_byte_buffer(gd.buffer)
    if gd.type == SUSPECT and gd.suspect is not None:
        dialect.write_address_to(w, gd.suspect)
    return w.getvalue()


def message_prefix(dialect, group: str | None, dest, length: int) -> bytes:
    """The bytes of a MESSAGE up to its buffer (the buffer of ``length`` bytes follows): one encoding of the
    header, sent in front of the datagram without copying it."""
    w = Writer(64)
    w.write_byte(MESSAGE)
    w.write_string(group)
    dialect.write_address_to(w, dest)
    w.write_string(None)
    w.write_short(-1)
    w.write_short(-1)
    w.write_byte(1)
    w.write_int(length)
    return w.getvalue()


def _read_addresses(r: Reader, dialect, limits: Limits, what: str):
    n = r.read_short(what)
    if n < 0:
        return None
    if n > limits.max_addresses:
        raise WireFormatError(f"{n} addresses, more than the {limits.max_addresses} accepted", what, r.pos - 2)
    return [dialect.read_address_from(r) for _ in range(n)]


def _need_more(e: WireFormatError, start: int) -> NeedMore | None:
    """A truncation of the bytes so far is a request still arriving; anything else is a malformed one."""
    m = _NEED.match(e.reason or "")
    if m is None:
        return None
    return NeedMore((e.offset or start) + int(m.group(1)))


def decode_request(dialect, data, limits: Limits, with_suspect: bool = False,
                   start: int = 0) -> tuple[GossipData, int]:
    """One GossipData from ``data[start:]``: ``(request, end offset)``. ``with_suspect``: the data comes from a
    router (a SUSPECT is followed by the suspect's address). Raises :class:`NeedMore` or WireFormatError."""
    r = Reader(data, start)
    try:
        t = r.read_byte("GossipData.type")
        group = r.read_string("GossipData.group")
        addr = dialect.read_address_from(r)
        name = r.read_string("GossipData.logical_name")
        mbrs = _read_addresses(r, dialect, limits, "GossipData.mbrs")
        physical = _read_addresses(r, dialect, limits, "GossipData.physical_addrs")
        flag = r.read_byte("GossipData.buffer")
        buffer = None
        if flag == 1:                 # Util.readByteBuffer: 1 = a buffer follows, anything else (-1: EOF) none
            n = r.read_int("GossipData.buffer.length")
            if n < 0 or n > limits.max_buffer:
                raise WireFormatError(f"buffer of {n} bytes (at most {limits.max_buffer} accepted)",
                                      "GossipData.buffer.length", r.pos - 4)
            if r.remaining < n:
                raise NeedMore(r.pos + n)
            buffer = r.read_bytes(n, "GossipData.buffer")
        suspect = dialect.read_address_from(r) if with_suspect and t == SUSPECT else None
    except WireFormatError as e:
        more = _need_more(e, start)
        if more is not None:
            raise more from None
        raise
    return GossipData(t, group, addr, name, mbrs, physical, buffer, suspect), r.pos


def encode_members(dialect, rsps: list) -> bytes:
    """The answer to GOSSIP_GET: a short count and each ``PingData.writeTo``."""
    w = Writer(64 * (len(rsps) + 1))
    w.write_short(len(rsps))
    out = [w.getvalue()]
    for p in rsps:
        out.append(dialect.encode(p))
    return b"".join(out)


def decode_members(dialect, data, limits: Limits) -> tuple[list, int]:
    """The answer to GOSSIP_GET from ``data``: ``(PingData list, end offset)``; NeedMore or WireFormatError."""
    from jgpy._core.types import PingData
    r = Reader(data)
    try:
        n = r.read_short("GOSSIP_GET.count")
        if n < 0 or n > max(limits.max_addresses, 32767):
            raise WireFormatError(f"{n} members", "GOSSIP_GET.count", 0)
        rsps = [dialect.read_kind(r, PingData) for _ in range(n)]
    except WireFormatError as e:
        more = _need_more(e, 0)
        if more is not None:
            raise more from None
        raise
    return rsps, r.pos
