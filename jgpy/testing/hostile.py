"""A hostile peer for tests: bad input for every receive path of a member, built byte by byte.

Every generator yields ``(kind, bytes)``: ``kind`` names the attack (a test reports which kinds it sent and
how many). Datagrams carry the real cluster name and version, so they reach the protocols rather than being
dropped at the door, unless the attack is the door itself. Deep structures are written by hand (:func:`deep_merge_view_gms`):
jgpy's own encoder recurses, and the point is to send what no sane encoder produces.

The socket attacks (:class:`SlowLoris`, :func:`flood_connections`) hold connections open in the caller's
process; they close everything they opened when stopped.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

from jgpy._core.address import UUID, IpAddress
from jgpy._core.jg212 import DIALECT, VERSION, encode_tcp_handshake, frame

# protocol ids and magic numbers of the 2.12 dialect (jg-protocol-ids.xml, jg-magic-map.xml)
ID_UDP, ID_TCP = 21, 22
ID_FRAG, ID_FRAG2, ID_PING, ID_UNICAST, ID_GMS, ID_NAKACK, ID_STABLE = 4, 5, 6, 12, 14, 15, 16
ID_FD_SOCK, ID_FD_ALL, ID_VERIFY, ID_MFC, ID_UFC, ID_MERGE2 = 3, 29, 13, 44, 45, 0
ID_COMPRESS, ID_AUTH = 19, 33
MAGIC = {"Frag": 7, "Ping": 13, "Unicast": 21, "Verify": 22, "Gms": 24, "NakAck": 25, "Stable": 27,
         "Fc": 54, "Tp": 56, "Heartbeat": 61, "FdSock": 6, "Compress": 53, "Auth": 67}
# jgpy's own TOTAL (docs/ARCHITECTURE.md: id and magic above what 2.12 uses) and its header types
ID_TOTAL, MAGIC_TOTAL = 513, 1025
ID_PBCAST, MAGIC_PBCAST = 515, 1026
P_MCAST_MSG, P_GOSSIP, P_XMIT_REQ, P_XMIT_RSP = 0, 1, 2, 3
T_BCAST, T_REQUEST, T_NEW_VIEW, T_NEW_VIEW_ACK, T_CUM_SEQ_ACK, T_RESEND, T_STABLE = 1, 2, 3, 4, 5, 7, 8

TP_LIST, TP_MULTICAST = 0x01, 0x02
MAX_DATAGRAM = 65000


def _utf(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


def address(a) -> bytes:
    """``Util.writeAddress`` of a jgpy address (or None)."""
    return DIALECT.encode_address(a)


def stranger(rnd: random.Random) -> UUID:
    """A made-up member address."""
    return UUID(rnd.getrandbits(63), rnd.getrandbits(63))


@dataclass
class Hdr:
    """One header as it goes on the wire: protocol id, magic number, body."""

    pid: int
    magic: int
    body: bytes

    def encode(self) -> bytes:
        return struct.pack(">hh", self.pid, self.magic) + self.body


def message(src, hdrs: list[Hdr], dest=None, payload: bytes | None = None, flags: int = 0,
            no_addrs: bool = False, header_count: int | None = None) -> bytes:
    """``Message.writeTo`` (or ``writeToNoAddrs`` for a list entry with its own src) of hand-made headers;
    ``header_count`` overrides the count written before them."""
    leading = 0
    out = bytearray()
    if not no_addrs and dest is not None:
        leading |= 0x01
    if src is not None:
        leading |= 0x02
    if payload is not None:
        leading |= 0x04
    out += bytes([leading, flags & 0xFF])
    if leading & 0x01:
        out += address(dest)
    if leading & 0x02:
        out += address(src)
    if payload is not None:
        out += struct.pack(">i", len(payload)) + payload
    out += struct.pack(">h", len(hdrs) if header_count is None else header_count)
    for h in hdrs:
        out += h.encode()
    return bytes(out)


def datagram(msg: bytes, multicast: bool) -> bytes:
    """A single-message datagram (``TP.writeMessage``)."""
    return struct.pack(">hB", VERSION, TP_MULTICAST if multicast else 0) + msg


def bundle(src, entries: Iterable[bytes], multicast: bool, dest=None) -> bytes:
    """A LIST datagram of message entries written with :func:`message` (``no_addrs=True``)."""
    out = bytearray(struct.pack(">hB", VERSION, TP_LIST | (TP_MULTICAST if multicast else 0)))
    out += address(dest) + address(src)
    for e in entries:
        out += b"\x01" + e
    out += b"\x00"
    return bytes(out)


class Forger:
    """Hand-made messages of one cluster: the transport header goes last, as a real member's would."""

    def __init__(self, cluster: str, tp_id: int = ID_UDP):
        self.cluster = cluster
        self.tp = Hdr(tp_id, MAGIC["Tp"], _utf(cluster))

    def msg(self, src, hdrs: list[Hdr], dest=None, payload: bytes | None = None, flags: int = 0,
            no_addrs: bool = False, header_count: int | None = None) -> bytes:
        return message(src, hdrs + [self.tp], dest, payload, flags, no_addrs, header_count)

    def dgram(self, src, hdrs: list[Hdr], dest=None, payload: bytes | None = None, flags: int = 0) -> bytes:
        return datagram(self.msg(src, hdrs, dest, payload, flags), dest is None)


# ---- header bodies -------------------------------------------------------------------------------------

def nakack_msg(seqno: int) -> Hdr:
    return Hdr(ID_NAKACK, MAGIC["NakAck"], struct.pack(">bq", 1, seqno))


def nakack_xmit_req(low: int, high: int, original_sender) -> Hdr:
    return Hdr(ID_NAKACK, MAGIC["NakAck"], struct.pack(">bbqq", 2, 1, low, high) + address(original_sender))


def unicast_data(seqno: int, conn_id: int, first: bool) -> Hdr:
    return Hdr(ID_UNICAST, MAGIC["Unicast"], struct.pack(">bqh?", 0, seqno, conn_id, first))


def unicast_ack(seqno: int) -> Hdr:
    return Hdr(ID_UNICAST, MAGIC["Unicast"], struct.pack(">bq", 1, seqno))


def frag(pid: int, msg_id: int, frag_id: int, num_frags: int) -> Hdr:
    return Hdr(pid, MAGIC["Frag"], struct.pack(">qii", msg_id, frag_id, num_frags))


def gms_body(type_: int, view_body: bytes | None, merge: bool, merge_id: tuple | None = None) -> bytes:
    """A GmsHeader with only a view (or none) and a merge id ``(initiator, n)`` (or none): no mbr, mbrs,
    join_rsp or digest."""
    out = struct.pack(">b?", type_, merge)
    out += b"\x00" if view_body is None else b"\x01" + view_body
    out += b"\x01"                                  # mbr: null address
    out += struct.pack(">h", -1)                     # mbrs: null
    out += b"\x00\x00"                               # join_rsp, digest absent
    out += b"\x00" if merge_id is None else b"\x01" + address(merge_id[0]) + struct.pack(">i", merge_id[1])
    out += b"\x00\x00"                               # merge_rejected, useFlushIfPresent
    return out


def gms_merge(type_: int, merge_id: tuple) -> Hdr:
    """A GMS header of a merge (MERGE_RSP 7, INSTALL_MERGE_VIEW 8, CANCEL_MERGE 9) with no view."""
    return Hdr(ID_GMS, MAGIC["Gms"], gms_body(type_, None, False, merge_id))


def deep_merge_view_body(depth: int) -> bytes:
    """The body of a MergeView whose single subgroup is a MergeView ... ``depth`` levels down (8 bytes a level)."""
    level = b"\x00" + struct.pack(">hhh", -1, 0, 1)          # no vid, null members, no payload, 1 subgroup
    inner = b"\x00" + struct.pack(">hhh", -1, 0, 0)          # the innermost: no subgroups
    return level + (b"\x01" + level) * (depth - 1) + b"\x01" + inner


def deep_merge_view_gms(depth: int) -> Hdr:
    """A GMS VIEW header (type 5) whose MergeView nests ``depth`` MergeViews."""
    return Hdr(ID_GMS, MAGIC["Gms"], gms_body(5, deep_merge_view_body(depth), True))


def digest_body(count_claimed: int, entries: list[tuple]) -> bytes:
    out = struct.pack(">h", count_claimed)
    for a, low, hd, hr in entries:
        out += address(a) + struct.pack(">qqq", low, hd, hr)
    return out


def view_id(coord, id_: int) -> bytes:
    """``Util.writeStreamable(ViewId)``: present, the coordinator's address, the id."""
    return b"\x01" + address(coord) + struct.pack(">q", id_)


def total(type_: int, vid: int, seqno: int = 0, high: int = 0, req_id: int = 0, sender=None, epoch: bytes = b"",
          prev_epoch: bytes = b"", starts: list[tuple] | None = None, starts_count: int | None = None) -> Hdr:
    """A TOTAL header (fields only where its type carries them, in wire order); ``epoch``/``prev_epoch``: bytes
    of :func:`view_id` (empty: absent); ``starts_count`` overrides the count written before ``starts``."""
    body = struct.pack(">bq", type_, vid)
    if type_ in (T_BCAST, T_NEW_VIEW, T_NEW_VIEW_ACK, T_CUM_SEQ_ACK, 6, T_RESEND, T_STABLE):
        body += struct.pack(">q", seqno)
    if type_ in (T_RESEND, T_NEW_VIEW_ACK, T_STABLE):
        body += struct.pack(">q", high)
    if type_ in (T_REQUEST, T_BCAST):
        body += struct.pack(">q", req_id)
    if type_ == T_BCAST:
        body += address(sender)
    if type_ in (T_NEW_VIEW, T_NEW_VIEW_ACK):
        body += epoch or b"\x00"
    if type_ == T_NEW_VIEW_ACK:
        body += prev_epoch or b"\x00"
    if type_ == T_NEW_VIEW:
        entries = starts or []
        body += struct.pack(">h", len(entries) if starts_count is None else starts_count)
        for a, first in entries:
            body += address(a) + struct.pack(">q", first)
    return Hdr(ID_TOTAL, MAGIC_TOTAL, body)


def total_attacks(f: Forger, rnd: random.Random, target, member, vid: int) -> Iterator[tuple[str, bytes]]:
    """TOTAL messages against ``target`` (logical address): from strangers (raw, and through a UNICAST
    connection of their own), in the name of ``member`` (the sequencer, or a member of the sequencer ``target``)
    without the NAKACK/UNICAST header every real TOTAL message carries, with absurd numbers; and malformed
    TOTAL headers between well-formed messages in one LIST. ``vid``: the current view id (the epoch)."""
    big, ep = 1 << 62, view_id(member, vid)
    absurd_hdrs = [("req", True, total(T_REQUEST, vid, req_id=big)),
                   ("bcast-next", False, None),        # BCASTs at the next numbers: filled in below
                   ("bcast-far", False, total(T_BCAST, vid, seqno=big, req_id=1, sender=member)),
                   ("bcast-negative", False, total(T_BCAST, vid, seqno=-big, req_id=1, sender=member)),
                   ("xmit", True, total(T_BCAST, vid, seqno=3, req_id=big, sender=member)),
                   ("stable", False, total(T_STABLE, vid, seqno=big, high=big)),
                   ("stable-negative", False, total(T_STABLE, vid, seqno=-big, high=-big)),
                   ("ack", True, total(T_CUM_SEQ_ACK, vid, seqno=big)),
                   ("resend", True, total(T_RESEND, vid, seqno=-big, high=big)),
                   ("new-view", False, total(T_NEW_VIEW, vid, seqno=big, epoch=ep, starts=[(target, big)])),
                   ("new-view-ack", True, total(T_NEW_VIEW_ACK, vid + 1, seqno=big, high=big, epoch=ep,
                                                prev_epoch=ep)),
                   ("unknown-type", True, Hdr(ID_TOTAL, MAGIC_TOTAL, struct.pack(">bq", 99, vid)))]
    for name, unicast, h in absurd_hdrs:
        hdrs = [h] if h is not None else \
            [total(T_BCAST, vid, seqno=k, req_id=10_000 + k, sender=member) for k in range(1, 400)]
        for one in hdrs:
            dest = target if unicast else None
            src = stranger(rnd)
            yield "total-stranger-" + name, f.dgram(src, [one], dest, b"total-stranger")
            if unicast:
                yield "total-stranger-unicast-conn-" + name, \
                    f.dgram(src, [unicast_data(1, 5, True), one], dest, b"total-stranger")
            yield "total-spoofed-" + name, f.dgram(member, [one], dest, b"total-spoofed")
    # malformed TOTAL headers, each between two well-formed messages of a LIST (with NAKACK headers: a stranger's
    # message without one would go up to the application, as in 2.12). 2.12 headers carry no length: a broken
    # one makes the rest of its datagram unreadable, so the whole datagram is dropped, as Java does
    src = stranger(rnd)
    bad = [total(T_BCAST, vid, seqno=1, req_id=1, sender=member).body[:12],               # truncated
           total(T_NEW_VIEW, vid, seqno=1, epoch=ep, starts=[(target, 1)], starts_count=32767).body,
           total(T_NEW_VIEW, vid, seqno=1, epoch=ep, starts=[(target, 1)], starts_count=-7).body,
           total(T_NEW_VIEW_ACK, vid, seqno=1, high=1, epoch=b"\x01\x07").body]        # bad address type
    for k, body in enumerate(bad):
        entries = [f.msg(None, [nakack_msg(k)], None, b"before", 0, True),
                   f.msg(None, [Hdr(ID_TOTAL, MAGIC_TOTAL, body)], None, b"bad", 0, True),
                   f.msg(None, [nakack_msg(k + 2)], None, b"after", 0, True)]
        yield "total-malformed", bundle(src, entries, True)
        yield "total-malformed", f.dgram(member, [Hdr(ID_TOTAL, MAGIC_TOTAL, body)], None, b"alone")
    # a TOTAL header under NAKACK's id, and NAKACK's under TOTAL's: that message alone is dropped, also in a LIST
    for k, h in enumerate((Hdr(ID_NAKACK, MAGIC_TOTAL, total(T_STABLE, vid, 1, 1).body),
                           Hdr(ID_TOTAL, MAGIC["NakAck"], nakack_msg(1).body))):
        yield "total-wrong-protocol-id", f.dgram(src, [h])
        entries = [f.msg(None, [nakack_msg(k)], None, b"before", 0, True), f.msg(None, [h], None, b"bad", 0, True),
                   f.msg(None, [nakack_msg(k + 2)], None, b"after", 0, True)]
        yield "total-wrong-protocol-id", bundle(src, entries, True)


def addresses(addrs, count: int | None = None) -> bytes:
    """``Util.writeAddresses``: a short count (``count`` overrides it), then each address."""
    return struct.pack(">h", len(addrs) if count is None else count) + b"".join(address(a) for a in addrs)


def pbcast(type_: int, seqno: int = 0, sender=None, gossip_id: int = 0, origin=None, digest: bytes | None = None,
           not_seen: bytes | None = None, seen: bytes = b"\xff\xff", xmit_reqs: list[tuple] | None = None,
           reqs_count: int | None = None) -> Hdr:
    """A PbcastHeader (fields only where its type carries them, in wire order); ``digest``: a
    :func:`digest_body` (None: absent), ``not_seen``/``seen``: :func:`addresses` bytes (-1: null);
    ``reqs_count`` overrides the count written before ``xmit_reqs``."""
    body = struct.pack(">b", type_)
    if type_ in (P_MCAST_MSG, P_XMIT_RSP):
        body += struct.pack(">q", seqno)
    if type_ == P_XMIT_RSP:
        body += address(sender)
    if type_ == P_GOSSIP:
        body += struct.pack(">q", gossip_id) + address(origin)
        body += b"\x00" if digest is None else b"\x01" + digest
        body += (b"\xff\xff" if not_seen is None else not_seen) + seen
    if type_ == P_XMIT_REQ:
        entries = xmit_reqs or []
        body += struct.pack(">h", len(entries) if reqs_count is None else reqs_count)
        for a, first, last in entries:
            body += address(a) + struct.pack(">qq", first, last)
    return Hdr(ID_PBCAST, MAGIC_PBCAST, body)


def pbcast_attacks(f: Forger, rnd: random.Random, target, member) -> Iterator[tuple[str, bytes]]:
    """PBCAST messages against ``target`` (logical address): gossips, retransmission requests and multicasts from
    strangers, gossips relayed by strangers, absurd digests (strangers' entries, 2^62 seqnos, a claimed count
    beyond the bytes) and not-seen lists (a thousand strangers), retransmission requests for everything, in the
    name of ``member`` too, unsolicited retransmissions, multicasts far beyond any window; malformed PBCAST headers
    alone and between well-formed messages in one LIST, and a PbcastHeader under NAKACK's id."""
    big = 1 << 62
    crowd = [stranger(rnd) for _ in range(1000)]
    absurd_digest = digest_body(202, [(a, 0, big, big) for a in crowd[:200]] + [(member, 0, big, big),
                                                                                (target, 0, big, big)])
    hdrs = [("gossip-mcast", None, lambda src: pbcast(P_GOSSIP, gossip_id=rnd.randrange(big), origin=src,
                                                      digest=absurd_digest, seen=addresses(crowd))),
            ("gossip-relayed", target, lambda src: pbcast(P_GOSSIP, gossip_id=rnd.randrange(big), origin=member,
                                                          digest=absurd_digest, not_seen=addresses(crowd + [target]),
                                                          seen=addresses(crowd[:10]))),
            ("xmit-req", target, lambda src: pbcast(P_XMIT_REQ, xmit_reqs=[(member, -big, big), (target, 1, big)]
                                                    + [(a, 1, big) for a in crowd[:100]])),
            ("xmit-rsp-unsolicited", target, lambda src: pbcast(P_XMIT_RSP, seqno=big, sender=member)),
            ("mcast-far", None, lambda src: pbcast(P_MCAST_MSG, seqno=big)),
            ("mcast-negative", None, lambda src: pbcast(P_MCAST_MSG, seqno=-big)),
            ("unknown-type", None, lambda src: Hdr(ID_PBCAST, MAGIC_PBCAST, b"\x63"))]
    for name, dest, make in hdrs:
        for _ in range(20):
            src = stranger(rnd)
            yield "pbcast-stranger-" + name, f.dgram(src, [make(src)], dest, b"pbcast-stranger")
            yield "pbcast-spoofed-" + name, f.dgram(member, [make(member)], dest, b"pbcast-spoofed")
    for k in range(1, 200):                      # a stranger's multicasts at plausible seqnos: it has no window
        yield "pbcast-stranger-mcast", f.dgram(stranger(rnd), [pbcast(P_MCAST_MSG, seqno=k)], None, b"stranger")
    src = stranger(rnd)
    bad = [pbcast(P_GOSSIP, gossip_id=1, origin=member, digest=absurd_digest).body[:20],          # truncated
           pbcast(P_GOSSIP, gossip_id=1, origin=member, digest=digest_body(30000, [(member, 0, 1, 1)])).body,
           pbcast(P_GOSSIP, gossip_id=1, origin=member, not_seen=addresses([target], 32767)).body,
           pbcast(P_XMIT_REQ, xmit_reqs=[(member, 1, 2)], reqs_count=-9).body,
           pbcast(P_XMIT_REQ, xmit_reqs=[(member, 1, 2)], reqs_count=30000).body,
           pbcast(P_XMIT_RSP, seqno=1).body[:9] + b"\x07"]                                      # bad address type
    for k, body in enumerate(bad):               # (a count of -9 reads as no list: well-formed, as in Java)
        entries = [f.msg(None, [pbcast(P_MCAST_MSG, seqno=k + 1)], None, b"before", 0, True),
                   f.msg(None, [Hdr(ID_PBCAST, MAGIC_PBCAST, body)], None, b"bad", 0, True),
                   f.msg(None, [pbcast(P_MCAST_MSG, seqno=k + 2)], None, b"after", 0, True)]
        yield "pbcast-malformed", bundle(src, entries, True)
        yield "pbcast-malformed", f.dgram(member, [Hdr(ID_PBCAST, MAGIC_PBCAST, body)], target, b"alone")
    yield "pbcast-wrong-protocol-id", f.dgram(src, [Hdr(ID_NAKACK, MAGIC_PBCAST, pbcast(P_MCAST_MSG, 1).body)])


# ---- datagram attacks ----------------------------------------------------------------------------------

def random_bytes(rnd: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """Random datagrams, half of them starting like a 2.12 datagram."""
    for i in range(count):
        n = rnd.choice((0, 1, 2, 3, 5, 16, 64, 512, 1500, 8000, MAX_DATAGRAM))
        body = rnd.randbytes(rnd.randrange(n + 1))
        if i % 2:
            yield "random", body
        else:
            yield "random-versioned", struct.pack(">hB", VERSION, rnd.randrange(8)) + body


def truncations(datagrams: list[bytes]) -> Iterator[tuple[str, bytes]]:
    """Every truncation of each of ``datagrams``."""
    for d in datagrams:
        for cut in range(len(d)):
            yield "truncated", d[:cut]


def absurd(f: Forger, rnd: random.Random, multicast: bool, dest=None) -> Iterator[tuple[str, bytes]]:
    """Absurd lengths, counts and depths, each in an otherwise well-formed datagram."""
    src = stranger(rnd)
    d = None if multicast else dest
    # payload length 2^31 - 1 and negative
    base = f.msg(src, [], d, b"abcd")
    at = base.index(struct.pack(">i", 4))
    for n in (0x7FFFFFFF, -5, 0x10000000):
        yield "payload-length", datagram(base[:at] + struct.pack(">i", n) + base[at + 4:], multicast)
    # header count 32767 with two headers present
    yield "header-count", datagram(f.msg(src, [nakack_msg(1)], d, b"x" * 16, header_count=32767), multicast)
    # a digest claiming 32767 entries (STABLE gossip) and one claiming a negative count
    for n in (32767, -3, 2000):
        stable = Hdr(ID_STABLE, MAGIC["Stable"], struct.pack(">ib", 1, 1) + digest_body(n, [(src, 0, 5, 5)]))
        yield "digest-count", f.dgram(src, [stable], d)
    # an address list claiming 32767 members
    gms = Hdr(ID_GMS, MAGIC["Gms"], struct.pack(">b?", 1, False) + b"\x00\x01" + struct.pack(">h", 32767) + b"\x03" * 64)
    yield "address-count", f.dgram(src, [gms], d)
    # a MergeView nested as deep as one datagram allows (8 bytes a level)
    yield "merge-view-depth", f.dgram(src, [deep_merge_view_gms((MAX_DATAGRAM - 200) // 8)], d)
    # a LIST of 10,000 empty messages (a count no bundle of ours reaches)
    entry = f.msg(None, [], None, None, 0, True)
    yield "list-length", bundle(src, [entry] * min(10_000, (MAX_DATAGRAM - 100) // len(entry)), multicast, d)


def wrong_protocol_ids(f: Forger, rnd: random.Random, multicast: bool, dest=None) -> Iterator[tuple[str, bytes]]:
    """Headers filed under another protocol's id (a GMS header as NAKACK's, a NAKACK header as UNICAST's ...),
    each in a LIST between well-formed messages."""
    src = stranger(rnd)
    d = None if multicast else dest
    swaps = [Hdr(ID_NAKACK, MAGIC["Gms"], gms_body(1, None, False)),
             Hdr(ID_UNICAST, MAGIC["NakAck"], nakack_msg(5).body),
             Hdr(ID_GMS, MAGIC["Unicast"], unicast_data(1, 0, True).body),
             Hdr(ID_FRAG2, MAGIC["Ping"], struct.pack(">bb", 1, 0) + b"\x00\x00" + b"\x00"),
             Hdr(ID_STABLE, MAGIC["Frag"], frag(ID_FRAG2, 1, 0, 2).body),
             Hdr(ID_UFC, MAGIC["Stable"], struct.pack(">ib", 1, 0)),
             Hdr(ID_MFC, MAGIC["NakAck"], nakack_msg(7).body),
             Hdr(ID_VERIFY, MAGIC["Fc"], b"\x01"),
             Hdr(ID_FD_ALL, MAGIC["Verify"], struct.pack(">h", 1) + b"\x01"),
             Hdr(ID_PING, MAGIC["Heartbeat"], b"")]
    for h in swaps:
        entries = [f.msg(None, [], None, b"before", 0, True), f.msg(None, [h], None, b"bad", 0, True),
                   f.msg(None, [], None, b"after", 0, True)]
        yield "wrong-protocol-id", bundle(src, entries, multicast, d)
        yield "wrong-protocol-id", f.dgram(src, [h], d, b"alone")


def strangers_with_seqnos(f: Forger, rnd: random.Random, dest, senders: int) -> Iterator[tuple[str, bytes]]:
    """Unicasts from ``senders`` made-up members: a ``first`` message at a low seqno, then one ~2^24 further,
    and fragments claiming 2^31 - 1 parts; what used to open a window / table for each and size it by the
    claim."""
    for _ in range(senders):
        src = stranger(rnd)
        first = rnd.randrange(1, 1000)
        yield "unicast-first", f.dgram(src, [unicast_data(first, 7, True)], dest, b"hello")
        yield "unicast-far-seqno", f.dgram(src, [unicast_data(first + (1 << 24) - 2, 7, False)], dest, b"far")
        yield "unicast-far-seqno", f.dgram(src, [unicast_data(rnd.randrange(1 << 62), 7, True)], dest, b"far")
        yield "frag2-num-frags", f.dgram(src, [unicast_data(first + 1, 7, False),
                                                frag(ID_FRAG2, rnd.randrange(1 << 40), 1, 0x7FFFFFFF)], dest,
                                         b"f" * 64)
        yield "frag-num-frags", f.dgram(src, [frag(ID_FRAG, rnd.randrange(1 << 40), 3, 0x7FFFFFFF)], dest,
                                        b"f" * 64)


def forged_merges(f: Forger, rnd: random.Random, dest, count: int) -> Iterator[tuple[str, bytes]]:
    """Merge responses, merge views and cancellations from made-up members, for merges that never ran: each
    is refused and counted; what they log is rate-limited."""
    for _ in range(count):
        src = stranger(rnd)
        mid = (src, rnd.randrange(1 << 31))
        yield "forged-merge-rsp", f.dgram(src, [gms_merge(7, mid)], dest)
        yield "forged-merge-view", f.dgram(src, [gms_merge(8, mid)], dest)
        yield "forged-cancel-merge", f.dgram(src, [gms_merge(9, mid)], dest)


def _join_req(f: Forger, src, dest, auth: Hdr | None, state_transfer: bool = False) -> bytes:
    """A JOIN_REQ (OOB, as GMS sends it) with ``auth`` as its AuthHeader (None: without one)."""
    from jgpy.headers import GmsHeader
    gms = GmsHeader(GmsHeader.JOIN_REQ_WITH_STATE_TRANSFER if state_transfer else GmsHeader.JOIN_REQ, mbr=src)
    hdrs = [Hdr(ID_GMS, MAGIC["Gms"], DIALECT.encode_header(gms))]
    if auth is not None:
        hdrs.insert(0, auth)
    return f.dgram(src, hdrs, dest=dest, flags=0x01)          # Message.OOB


def auth_token(token) -> Hdr:
    """An AuthHeader with ``token`` (class name, body)."""
    from jgpy.headers import AuthHeader
    return Hdr(ID_AUTH, MAGIC["Auth"], DIALECT.encode_header(AuthHeader(token)))


def auth_attacks(f: Forger, rnd: random.Random, dest, count: int,
                 value: str = "chris") -> Iterator[tuple[str, bytes]]:
    """JOIN_REQs of ``count`` made-up joiners each, to an AUTH coordinator of SimpleToken ``value``: a token that
    lies (another value, another token class, a class 2.12 does not know), none, and AuthHeaders that are
    garbage, truncated or claim an absurd length."""
    simple = "org.jgroups.auth.SimpleToken"
    x509 = struct.pack(">?H", True, 26) + b"org.jgroups.auth.X509Token"
    for i in range(count):
        src = stranger(rnd)
        yield "auth-liar", _join_req(f, src, dest, auth_token((simple, f"{value}{i}")))
        yield "auth-other-class", _join_req(f, src, dest, auth_token(("org.jgroups.auth.MD5Token", value)), True)
        yield "auth-unknown-class", _join_req(f, src, dest, auth_token(("org.evil.Token", None)))
        yield "auth-no-header", _join_req(f, src, dest, None)
        yield "auth-garbage", _join_req(f, src, dest, Hdr(ID_AUTH, MAGIC["Auth"], rnd.randbytes(rnd.randrange(40))))
        yield "auth-truncated", _join_req(f, src, dest, Hdr(ID_AUTH, MAGIC["Auth"], b"\x01\x00\x1corg.jgroups.auth"))
        yield "auth-absurd-length", _join_req(f, src, dest, Hdr(ID_AUTH, MAGIC["Auth"], x509 + b"\x01\x7f\xff\xff\xf0"))


def compress_attacks(f: Forger, rnd: random.Random, dest, count: int) -> Iterator[tuple[str, bytes]]:
    """Unicasts (UNICAST seqnos 1, 2, ...) of ``count`` made-up members whose CompressHeader lies: a size other
    than the stream's, negative or absurd sizes, a corrupt or truncated stream, a deflate bomb (32 MB of zeros in
    32 KB) claiming 1 KB, 30 MB or 2 GB."""
    import zlib
    text = b"compress me " * 100
    stream = zlib.compress(text)
    co = zlib.compressobj(9)
    bomb = b"".join([co.compress(bytes(1 << 20)) for _ in range(32)] + [co.flush()])

    def hdr(size: int) -> Hdr:
        return Hdr(ID_COMPRESS, MAGIC["Compress"], struct.pack(">i", size))
    lies = [("compress-size", stream, len(text) + 1), ("compress-size", stream, len(text) - 7),
            ("compress-negative", stream, -1), ("compress-absurd", stream, 0x7FFFFFFF),
            ("compress-corrupt", b"\x78\x9c" + rnd.randbytes(200), 1000), ("compress-truncated", stream[:20], len(text)),
            ("compress-bomb", bomb, 1000), ("compress-bomb", bomb, 30 << 20), ("compress-bomb", bomb, 0x7FFFFFFF)]
    for _ in range(count):
        src = stranger(rnd)
        for i, (kind, payload, size) in enumerate(lies):
            yield kind, f.dgram(src, [unicast_data(i + 1, 3, i == 0), hdr(size)], dest, payload)


def spoofed_member(f: Forger, rnd: random.Random, member, multicast: bool, dest=None,
                   far: int = 1 << 23) -> Iterator[tuple[str, bytes]]:
    """Multicasts (or unicasts) that claim to come from a real member: NAKACK seqnos far beyond what it sent,
    fragments claiming 2^31 - 1 parts, a retransmission request for 2^40 of its messages."""
    d = None if multicast else dest
    for k in range(4):
        yield "spoofed-far-seqno", f.dgram(member, [nakack_msg(far + rnd.randrange(far))], d, b"spoofed")
        yield "spoofed-frag2", f.dgram(member, [nakack_msg(far * 2 + k), frag(ID_FRAG2, rnd.randrange(1 << 40),
                                                                                   k, 0x7FFFFFFF)], d, b"f" * 64)
    yield "xmit-req-flood", f.dgram(stranger(rnd), [nakack_xmit_req(0, 1 << 40, member)], d)
    yield "xmit-req-flood", f.dgram(member, [nakack_xmit_req(0, 1 << 40, member)], d)


def all_datagram_attacks(f: Forger, rnd: random.Random, dest, member, multicast: bool,
                         seeds: list[bytes], senders: int = 200) -> Iterator[tuple[str, bytes]]:
    """Everything above for one socket (``dest``: the target's logical address, for unicasts)."""
    yield from random_bytes(rnd, 300)
    yield from truncations(seeds)
    yield from absurd(f, rnd, multicast, dest)
    yield from wrong_protocol_ids(f, rnd, multicast, dest)
    if not multicast:
        yield from strangers_with_seqnos(f, rnd, dest, senders)
        yield from forged_merges(f, rnd, dest, senders)
    yield from spoofed_member(f, rnd, member, multicast, dest)


# ---- sending ---------------------------------------------------------------------------------------------

def send_datagrams(attacks: Iterable[tuple[str, bytes]], to: tuple[str, int], pace_every: int = 50,
                   pause: float = 0.002) -> dict[str, int]:
    """Send each attack datagram to ``to`` (a unicast socket or a multicast group on loopback); returns how
    many of each kind were sent. Pauses briefly every ``pace_every`` datagrams so the target's socket buffer
    is not simply overrun (then the test would prove nothing about the decoder)."""
    sent: dict[str, int] = {}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        for i, (kind, data) in enumerate(attacks):
            try:
                s.sendto(data[:MAX_DATAGRAM], to)
            except OSError:
                continue
            sent[kind] = sent.get(kind, 0) + 1
            if i % pace_every == pace_every - 1:
                time.sleep(pause)
    finally:
        s.close()
    return sent


# ---- stream attacks (TCP transport, FD_SOCK, state server) -----------------------------------------------

def tcp_handshake(claimed: IpAddress) -> bytes:
    """The ``bela`` handshake claiming to be ``claimed``."""
    return encode_tcp_handshake(claimed)


def tcp_frame_attacks(f: Forger, rnd: random.Random, dest, seeds: list[bytes]) -> Iterator[tuple[str, bytes]]:
    """Byte streams to send after a valid handshake, one connection each: absurd frame lengths, the deep
    MergeView that used to crash the member (~150,000 levels in one 1.2 MB frame), truncated and random
    frames."""
    yield "frame-length-max", struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64
    yield "frame-length-negative", struct.pack(">i", -2) + b"\x00" * 64
    yield "merge-view-depth", frame(datagram(f.msg(stranger(rnd), [deep_merge_view_gms(150_000)], dest), False))
    yield "random-frames", b"".join(frame(rnd.randbytes(rnd.randrange(1, 2000))) for _ in range(50))
    yield "truncated-frames", b"".join(frame(d[:rnd.randrange(len(d))]) for d in seeds for _ in range(3))
    yield "wrong-protocol-id", b"".join(frame(d) for _, d in wrong_protocol_ids(f, rnd, False, dest))
    yield "strangers", b"".join(frame(d) for _, d in strangers_with_seqnos(f, rnd, dest, 50))


#: where a stranger's connections come from: a loopback address that is not the members' (127.0.0.1)
STRANGER_IP = "127.0.0.2"


def connect(to: tuple[str, int], timeout: float = 2.0, source: str | None = STRANGER_IP) -> socket.socket:
    """A TCP connection to ``to`` from ``source`` (None: whatever the kernel picks)."""
    return socket.create_connection(to, timeout=timeout, source_address=(source, 0) if source else None)


def stream_send(to: tuple[str, int], data: bytes, timeout: float = 5.0, linger: float = 0.2,
                source: str | None = STRANGER_IP) -> bool:
    """Connect, send ``data``, wait ``linger`` seconds, close. False when the peer refused or closed early."""
    try:
        with connect(to, timeout, source) as s:
            s.sendall(data)
            time.sleep(linger)
        return True
    except OSError:
        return False


class SlowLoris:
    """``count`` connections to ``to`` that each send one byte of ``prefix`` every ``interval`` seconds, on a
    thread of their own, until :meth:`stop` (a handshake that never completes in time)."""

    def __init__(self, to: tuple[str, int], count: int, prefix: bytes, interval: float = 0.7,
                 source: str | None = STRANGER_IP):
        self.to, self.prefix, self.interval = to, prefix, interval
        self.socks: list[socket.socket] = []
        self.refused = 0
        for _ in range(count):
            try:
                s = connect(to, 2.0, source)
                s.setblocking(False)
                self.socks.append(s)
            except OSError:
                self.refused += 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(self.interval):
            b = self.prefix[i % len(self.prefix):i % len(self.prefix) + 1]
            for s in list(self.socks):
                try:
                    s.send(b)
                except OSError:
                    self.socks.remove(s)
                    s.close()
            i += 1

    @property
    def alive(self) -> int:
        return len(self.socks)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks:
            s.close()
        self.socks.clear()


def flood_connections(to: tuple[str, int], count: int, first_bytes: bytes = b"",
                      source: str | None = STRANGER_IP) -> list[socket.socket]:
    """Try ``count`` connections (each sends ``first_bytes``) and keep those that were made, open; the caller
    closes them. (The server may accept and close some of them at once: they are returned too.)"""
    socks = []
    for _ in range(count):
        try:
            s = connect(to, 1.0, source)
            if first_bytes:
                s.sendall(first_bytes)
            socks.append(s)
        except OSError:
            continue
    return socks


def still_open(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the server has not closed (no EOF or reset waiting)."""
    n = 0
    for s in socks:
        try:
            s.setblocking(False)
            if s.recv(1, socket.MSG_PEEK) == b"":
                continue
            n += 1
        except BlockingIOError:
            n += 1
        except OSError:
            continue
    return n
