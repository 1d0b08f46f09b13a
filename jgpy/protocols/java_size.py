"""Java's ``Message.size()`` of 2.12: the size estimate FRAG compares with ``frag_size``.

``Message.size()`` adds up the fixed fields, the payload and, per header, 4 bytes (id and magic) plus the
header's own ``size()``. Several 2.12 ``size()`` methods are estimates (a list of addresses counts its
first address times the count, strings count UTF-16 chars, ``GmsHeader`` counts a byte it never writes,
...), so the encoded length is not what Java compares. Deciding exactly as Java does keeps FRAG's choice
of *whether* to fragment byte-exact; the formulas below are the 2.12 ones, by header type. Header types
registered by applications count their encoded body length.
"""

from __future__ import annotations

from typing import Any, Callable

from jgpy._core.address import AdditionalDataUUID, IpAddress, PayloadUUID, TopologyUUID, UUID
from jgpy._core.headers import (CompressHeader, CoordAnnouncement, FcHeader, FdHeader, FdSockHeader, FlushHeader,
                                FragHeader, GmsHeader, HeartbeatHeader, MultiDestinationHeader, NakAckHeader,
                                PingHeader, RequestCorrelatorHeader, SequencerHeader, SfcHeader, StableHeader,
                                StateHeader, StreamingStateHeader, TpHeader, Unicast2Header, UnicastHeader,
                                VerifyHeader)
from jgpy._core.message import Message
from jgpy._core.types import MergeView


def jlen(s: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _str(s) -> int:
    """``s.length() + 2`` (the writeUTF estimate) or 0 for null."""
    return jlen(s) + 2 if s is not None else 0


def addr_size(a) -> int:
    """``Address.size()``."""
    if isinstance(a, IpAddress):
        n = 4
        if a.ip is not None:
            n += len(a.ip) + (4 if len(a.ip) == 16 else 0)
        if a.additional_data is not None:
            n += len(a.additional_data) + 2
        return n
    n = 17
    if a.additional_data is not None:
        n += len(a.additional_data) + 2
    if isinstance(a, PayloadUUID):
        n += 1 + _str(a.payload)
    elif isinstance(a, AdditionalDataUUID):
        n += 1 + (len(a.payload) if a.payload is not None else 0)
    elif isinstance(a, TopologyUUID):
        n += 3 + _str(a.site_id) + _str(a.rack_id) + _str(a.machine_id)
    return n


def util_size_addr(a) -> int:
    """``Util.size(Address)``: flag byte plus the address (UUIDs and IpAddresses need no magic number)."""
    if a is None:
        return 1
    if isinstance(a, (UUID, IpAddress)):
        return 1 + addr_size(a)
    return 3 + addr_size(a)


def util_size_addrs(addrs) -> int:
    """``Util.size(Collection<Address>)``: 2 + the first address's size times the count."""
    if not addrs:
        return 2
    return 2 + util_size_addr(addrs[0]) * len(addrs)


def view_id_size(vid) -> int:
    return 8 + util_size_addr(vid.coord_addr)


def util_size_view_id(vid) -> int:
    return 1 + (view_id_size(vid) if vid is not None else 0)


def view_size(v) -> int:
    """``View.serializedSize()`` (``MergeView``'s for merge views)."""
    n = 1 + (view_id_size(v.vid) if v.vid is not None else 0) + util_size_addrs(v.members) + 2
    if v.payload is not None:
        n += len(v.payload)
    if isinstance(v, MergeView):
        n += 2
        for sub in v.subgroups or ():
            n += 1 + view_size(sub)
    return n


def util_size_view(v) -> int:
    return 1 + (view_size(v) + 1 if v is not None else 0)


def digest_size(d) -> int:
    entries = d.entries()
    if not entries:
        return 2
    return 2 + (util_size_addr(entries[0][0]) + 24) * len(entries)


def _opt_digest(d) -> int:
    return 1 + (digest_size(d) if d is not None else 0)


def join_rsp_size(j) -> int:
    n = 2
    if j.view is not None:
        n += view_size(j.view)
    if j.digest is not None:
        n += digest_size(j.digest)
    return n + 1 + _str(j.fail_reason)


def ping_data_size(p) -> int:
    return (1 + util_size_addr(p.own_addr) + util_size_view(p.view) + util_size_view_id(p.view_id) + 1
            + _str(p.logical_name) + util_size_addrs(p.physical_addrs))


def _gms(h) -> int:
    n = 4 + (view_size(h.view) if h.view is not None else 0)
    n += util_size_addr(h.mbr) + util_size_addrs(h.mbrs)
    n += 1 + (join_rsp_size(h.join_rsp) if h.join_rsp is not None else 0)
    n += _opt_digest(h.my_digest)
    n += 1 + (util_size_addr(h.merge_id.initiator) + 4 if h.merge_id is not None else 0)
    return n + 1


def _nakack(h) -> int:
    if h.type in (NakAckHeader.MSG, NakAckHeader.XMIT_RSP):
        return 9
    if h.type == NakAckHeader.XMIT_REQ:
        return 2 + (16 if h.range is not None else 0) + util_size_addr(h.sender)
    return 1


def _unicast(h) -> int:
    return {UnicastHeader.DATA: 12, UnicastHeader.ACK: 9, UnicastHeader.SEND_FIRST_SEQNO: 1}.get(h.type, 0)


def _unicast2(h) -> int:
    return {Unicast2Header.DATA: 12, Unicast2Header.XMIT_REQ: 17, Unicast2Header.STABLE: 17,
            Unicast2Header.SEND_FIRST_SEQNO: 1}.get(h.type, 0)


def _fd_sock(h) -> int:
    n = 1 + util_size_addr(h.mbr) + 1 + (addr_size(h.sock_addr) if h.sock_addr is not None else 0) + 4
    for key, val in dict(h.cached_addrs or ()).items():      # a HashMap and a HashSet in Java
        if key is not None:
            n += util_size_addr(key)
        n += 1 + (addr_size(val) if val is not None else 0)
    n += 4
    for m in dict.fromkeys(h.mbrs or ()):
        n += util_size_addr(m)
    return n


_HEADER_SIZES: dict[type, Callable[[Any], int]] = {
    TpHeader: lambda h: _str(h.channel_name) if h.channel_name is not None else 0,
    PingHeader: lambda h: (3 + (ping_data_size(h.data) if h.data is not None else 0) + _str(h.cluster_name)
                           + util_size_view_id(h.view_id)),
    GmsHeader: _gms,
    NakAckHeader: _nakack,
    UnicastHeader: _unicast,
    Unicast2Header: _unicast2,
    StableHeader: lambda h: 5 + (digest_size(h.stable_digest) if h.stable_digest is not None else 0),
    FdHeader: lambda h: 1 + util_size_addrs(h.mbrs) + util_size_addr(h.from_),
    HeartbeatHeader: lambda h: 0,
    FdSockHeader: _fd_sock,
    VerifyHeader: lambda h: 2 + util_size_addr(h.from_),
    FragHeader: lambda h: 16,
    FcHeader: lambda h: 1,
    SfcHeader: lambda h: 1,
    CompressHeader: lambda h: 4,
    StateHeader: lambda h: 9 + util_size_addr(h.sender) + _opt_digest(h.my_digest) + 1 + _str(h.state_id),
    StreamingStateHeader: lambda h: (9 + util_size_addr(h.sender) + _opt_digest(h.my_digest)
                                     + util_size_addr(h.bind_addr) + 1 + _str(h.state_id)),
    FlushHeader: lambda h: 9 + util_size_addrs(h.flush_participants) + _opt_digest(h.digest),
    SequencerHeader: lambda h: 2 + (view_id_size(h.tag) if h.tag is not None else 0),
    CoordAnnouncement: lambda h: util_size_view(h.view),
    RequestCorrelatorHeader: lambda h: 12,
    MultiDestinationHeader: lambda h: 12 + util_size_addrs(h.exclusion_list),
}


def header_size(hdr, dialect=None) -> int:
    """``Header.size()`` of 2.12 (the encoded body length for header types 2.12 does not know)."""
    fn = _HEADER_SIZES.get(type(hdr))
    if fn is not None:
        return fn(hdr)
    if dialect is None:
        from jgpy._core.jg212 import DIALECT as dialect
    return len(dialect.encode_header(hdr))


def message_size(msg: Message, dialect=None) -> int:
    """``Message.size()`` of 2.12."""
    n = 2
    if msg.dest is not None:
        n += util_size_addr(msg.dest)
    if msg.src is not None:
        n += util_size_addr(msg.src)
    if msg.has_buffer():
        n += 4 + msg.length
    n += 2
    for pid, hdr in msg.headers:
        if pid <= 0:
            break
        n += 4 + header_size(hdr, dialect)
    return n
