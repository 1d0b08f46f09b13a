# cython: language_level=3
"""The JGroups 2.12 wire dialect: id tables, every codec, transport framing, payload tags.

Everything that knows how a 2.12.2.Final node lays out bytes lives in this one module: protocol ids
(``jg-protocol-ids.xml``), magic numbers (``jg-magic-map.xml``), the codecs of addresses, data classes
and headers, the datagram framing (version short, tp_flags, single message or bundled list), TCP
framing with the ``bela`` handshake, and the ``Message.setObject`` payload tags. Another dialect (a
later JGroups) would be a sibling module with the same interface; protocol code never imports this.

Decoding mirrors Java's ``readFrom`` methods, including what they reject (a digest entry with
low > highest_delivered, an IpAddress of length 0, a negative count): a :class:`WireFormatError`
names the field and offset. Nothing is allocated from a length or count before checking that the bytes
left can hold it, and the one nesting on the wire (MergeView subgroups) is bounded by
:data:`MAX_VIEW_DEPTH`. Where jgpy is stricter than Java on purpose (that bound, a header filed under a
protocol id that does not use its class: see :data:`HEADER_MAGICS`), the code says so.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_SIZE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t
from libc.string cimport memset

from jgpy._core.wire cimport Reader, Writer, new_wire_error, mutf8_decode
from jgpy._core.address cimport (Address, UUID, PayloadUUID, AdditionalDataUUID, TopologyUUID, IpAddress,
                                 make_uuid)
from jgpy._core.types cimport ViewId, View, MergeView, Digest, JoinRsp, MergeId, PingData, Range
from jgpy._core.message cimport Message, WireDialect, new_message
from jgpy._core.headers cimport (Header, TpHeader, NakAckHeader, UnicastHeader, FragHeader, FcHeader,
                                 PingHeader, GmsHeader, Unicast2Header, StableHeader, FdHeader,
                                 HeartbeatHeader, FdSockHeader, VerifyHeader, SfcHeader, StateHeader,
                                 StreamingStateHeader, FlushHeader, SequencerHeader, CompressHeader,
                                 CoordAnnouncement, RequestCorrelatorHeader, MultiDestinationHeader)

import struct

from jgpy.errors import WireFormatError, IncompatibleVersionError, UnknownMagicError, version_string
from jgpy._core import message as _message_py

NAME = "jgroups-2.12"

# ---------------------------------------------------------------------------------------------
# versions and transport flags (Version.java, TP.java)
# ---------------------------------------------------------------------------------------------

VERSION = 0x1302                     # 2.12.2: (2 << 11) + (12 << 6) + 2
cdef int _VERSION = 0x1302
TP_LIST = 0x01
TP_MULTICAST = 0x02
TP_OOB = 0x04
TCP_COOKIE = b"bela"

cdef int ADDR_NULL = 0x01
cdef int ADDR_UUID = 0x02
cdef int ADDR_IP = 0x04


def is_binary_compatible(int version):
    """``Version.isBinaryCompatible``: equal, or same major and minor (micro is ignored)."""
    version &= 0xFFFF
    return version == _VERSION or (version & 0xFFC0) == (_VERSION & 0xFFC0)


# ---------------------------------------------------------------------------------------------
# id tables (conf/jg-protocol-ids.xml and conf/jg-magic-map.xml of the 2.12.2.Final jar)
# ---------------------------------------------------------------------------------------------

#: protocol id by the name used in XML stack configs (org.jgroups.protocols. prefix dropped)
PROTOCOL_IDS = {
    "FD": 2, "FD_SOCK": 3, "FRAG": 4, "FRAG2": 5, "PING": 6, "MPING": 7, "S3_PING": 8, "FILE_PING": 9,
    "TCPPING": 10, "TCPGOSSIP": 11, "UNICAST": 12, "VERIFY_SUSPECT": 13, "pbcast.GMS": 14,
    "pbcast.NAKACK": 15, "pbcast.STABLE": 16, "pbcast.STATE_TRANSFER": 17, "SMACK": 18, "COMPRESS": 19,
    "FC": 20, "UDP": 21, "TCP": 22, "TCP_NIO": 23, "TUNNEL": 24, "ENCRYPT": 25, "SEQUENCER": 26,
    "FD_SIMPLE": 27, "VIEW_SYNC": 28, "FD_ALL": 29, "SFC": 30, "pbcast.FLUSH": 31,
    "pbcast.STREAMING_STATE_TRANSFER": 32, "AUTH": 33, "MERGE3": 34, "MERGEFAST": 35, "HTOTAL": 36,
    "DISCARD": 37, "LOOPBACK": 38, "SHARED_LOOPBACK": 39, "UNICAST2": 40, "SCOPE": 41, "DAISYCHAIN": 42,
    "RELAY": 43, "MFC": 44, "UFC": 45, "JDBC_PING": 46, "STOMP": 47, "PRIO": 48, "BPING": 49,
    "CENTRAL_LOCK": 50, "PEER_LOCK": 51, "CENTRAL_EXECUTOR": 52,
    "blocks.PullPushAdapter": 200, "blocks.RequestCorrelator": 201, "mux.MuxChannel": 202,
    "mux.Multiplexer": 203, "blocks.mux.MuxRequestCorrelator": 204,
}
PROTOCOL_NAMES = {v: k for k, v in PROTOCOL_IDS.items()}

#: class key (org.jgroups. prefix dropped, java.util kept) by magic number
MAGIC_CLASSES = {
    1: "stack.IpAddress", 3: "protocols.FD$FdHeader", 6: "protocols.FD_SOCK$FdHeader",
    7: "protocols.FragHeader", 13: "protocols.PingHeader", 21: "protocols.UNICAST$UnicastHeader",
    22: "protocols.VERIFY_SUSPECT$VerifyHeader", 24: "protocols.pbcast.GMS$GmsHeader",
    25: "protocols.pbcast.NakAckHeader", 27: "protocols.pbcast.STABLE$StableHeader",
    28: "protocols.pbcast.STATE_TRANSFER$StateHeader", 29: "protocols.SMACK$SmackHeader", 30: "Message",
    31: "View", 32: "ViewId", 34: "Address", 36: "protocols.PingData", 38: "java.util.Vector",
    39: "protocols.pbcast.JoinRsp", 40: "util.Digest", 41: "java.util.Hashtable",
    53: "protocols.COMPRESS$CompressHeader", 54: "protocols.FcHeader", 56: "protocols.TpHeader",
    57: "protocols.ENCRYPT$EncryptHeader", 58: "protocols.SEQUENCER$SequencerHeader",
    59: "protocols.FD_SIMPLE$FdHeader", 60: "protocols.VIEW_SYNC$ViewSyncHeader",
    61: "protocols.FD_ALL$HeartbeatHeader", 62: "protocols.SFC$Header", 63: "mux.MuxHeader",
    64: "protocols.pbcast.FLUSH$FlushHeader", 65: "protocols.pbcast.STREAMING_STATE_TRANSFER$StateHeader",
    66: "blocks.PullPushAdapter$PullHeader", 67: "protocols.AuthHeader", 68: "util.UUID",
    69: "protocols.MERGE3$CoordAnnouncement", 70: "protocols.MERGEFAST$MergefastHeader",
    71: "blocks.RequestCorrelator$Header", 72: "blocks.RequestCorrelator$MultiDestinationHeader",
    73: "protocols.UNICAST2$Unicast2Header", 74: "protocols.SCOPE$ScopeHeader", 75: "blocks.mux.MuxHeader",
    76: "protocols.DAISYCHAIN$DaisyHeader", 77: "protocols.RELAY$RelayHeader",
    78: "protocols.STOMP$StompHeader", 80: "protocols.PrioHeader", 81: "protocols.Locking$LockingHeader",
    82: "util.PayloadUUID", 83: "util.AdditionalDataUUID", 84: "util.TopologyUUID",
    85: "protocols.Executing$ExecutorHeader", 86: "protocols.Executing$Request",
    87: "blocks.executor.ExecutionService$RunnableAdapter", 88: "blocks.executor.Executions$StreamableCallable",
}
MAGIC_NUMBERS = {v: k for k, v in MAGIC_CLASSES.items()}

cdef int MAGIC_IPADDRESS = 1
cdef int MAGIC_MESSAGE = 30
cdef int MAGIC_VIEW = 31
cdef int MAGIC_VIEWID = 32
cdef int MAGIC_PINGDATA = 36
cdef int MAGIC_JOINRSP = 39
cdef int MAGIC_DIGEST = 40
cdef int MAGIC_UUID = 68
cdef int MAGIC_PAYLOAD_UUID = 82
cdef int MAGIC_ADDITIONAL_DATA_UUID = 83
cdef int MAGIC_TOPOLOGY_UUID = 84

#: The header class(es) each 2.12 protocol puts under its own id (``msg.putHeader(this.id, ...)`` in the
#: 2.12.2.Final sources), by protocol name. A received header of another class under one of these ids is
#: malformed: Java would decode it and fail later with a ClassCastException in that protocol; jgpy drops the
#: message (alone) as it decodes it, so no protocol ever sees a header of a class it does not expect. Ids not
#: listed here (custom protocols, ids whose 2.12 header class has no magic) are not checked; pairs can be added
#: with :func:`register_protocol_id` and ``Dialect212.register_header(..., protocol_ids=...)``.
HEADER_MAGICS = {
    "FD": (3,), "FD_SOCK": (6,), "FRAG": (7,), "FRAG2": (7,),
    # every discovery protocol (Discovery and its subclasses) files PingHeaders under its own id
    "PING": (13,), "MPING": (13,), "S3_PING": (13,), "FILE_PING": (13,), "TCPPING": (13,), "TCPGOSSIP": (13,),
    "JDBC_PING": (13,), "BPING": (13,),
    "UNICAST": (21,), "VERIFY_SUSPECT": (22,), "pbcast.GMS": (24,), "pbcast.NAKACK": (25,),
    "pbcast.STABLE": (27,), "pbcast.STATE_TRANSFER": (28,), "SMACK": (29,), "COMPRESS": (53,),
    "FC": (54,), "MFC": (54,), "UFC": (54,),
    # every transport (TP and its subclasses) files its TpHeader under its own id
    "UDP": (56,), "TCP": (56,), "TCP_NIO": (56,), "TUNNEL": (56,), "LOOPBACK": (56,), "SHARED_LOOPBACK": (56,),
    "ENCRYPT": (57,), "SEQUENCER": (58,), "FD_SIMPLE": (59,), "VIEW_SYNC": (60,), "FD_ALL": (61,), "SFC": (62,),
    "pbcast.FLUSH": (64,), "pbcast.STREAMING_STATE_TRANSFER": (65,), "AUTH": (67,), "MERGE3": (69,),
    "MERGEFAST": (70,), "UNICAST2": (73,), "SCOPE": (74,), "DAISYCHAIN": (76,), "RELAY": (77,), "STOMP": (78,),
    "PRIO": (80,), "CENTRAL_LOCK": (81,), "PEER_LOCK": (81,), "CENTRAL_EXECUTOR": (85,),
    "blocks.PullPushAdapter": (66,), "blocks.RequestCorrelator": (71, 72), "mux.MuxChannel": (63,),
    "mux.Multiplexer": (63,), "blocks.mux.MuxRequestCorrelator": (75,),
}

#: How many levels of MergeView subgroups may nest on the wire (a MergeView inside the subgroups of a MergeView
#: inside ... : the top view is level 0, this is the deepest level). A MergeView's subgroups are the views
#: the subgroup coordinators had when the merge ran, so a subgroup is itself a MergeView only when its last
#: view came from a merge: one level per consecutive merge without a regular view (a join, leave or suspicion)
#: in between, typically 1 or 2, a few when a many-way partition heals in stages. 2.12 bounds nothing (its
#: recursion ends in a StackOverflowError, caught with the packet's other failures in TP.IncomingPacket);
#: jgpy fails a deeper MergeView with a WireFormatError: far above legitimate traffic, far below what the
#: C stack of any thread holds (the C recursion without a bound let a 1.2 MB TCP frame crash the process).
MAX_VIEW_DEPTH = 100
cdef int _MAX_VIEW_DEPTH = MAX_VIEW_DEPTH

# the smallest encodings, to check a count against the bytes left before reading (or allocating for) it
cdef Py_ssize_t _MIN_SUBGROUP = 6       # is_merge_view flag, vid absent, member count, payload length
cdef Py_ssize_t _MIN_DIGEST_ENTRY = 25  # a null-flag address byte and three longs
cdef Py_ssize_t _MIN_CACHE_ENTRY = 2    # FD_SOCK cache: an address flag byte and an IpAddress presence byte


def protocol_id(str name):
    """The 2.12 protocol id of a protocol as named in XML configs (``"pbcast.NAKACK"`` -> 15)."""
    name = name.removeprefix("org.jgroups.protocols.").removeprefix("org.jgroups.")
    try:
        return PROTOCOL_IDS[name]
    except KeyError:
        raise KeyError(f"protocol {name!r} has no id in the 2.12 jg-protocol-ids.xml table; a header of a "
                       "custom protocol needs an id registered with register_protocol_id (> 512)") from None


def register_protocol_id(str name, int id, header_magics=()):
    """Register a custom protocol id (Java requires ids > 512 for custom protocols).

    ``header_magics``: the magic numbers of the header classes the protocol puts under its id; once given,
    a received header of any other class under that id makes its message malformed (see :data:`HEADER_MAGICS`).
    """
    if id <= 512:
        raise ValueError("custom protocol ids must be > 512 (ClassConfigurator.addProtocol)")
    if PROTOCOL_NAMES.get(id, name) != name:
        raise ValueError(f"protocol id {id} is already used by {PROTOCOL_NAMES[id]}")
    PROTOCOL_IDS[name] = id
    PROTOCOL_NAMES[id] = name
    for magic in header_magics:
        (<Dialect212>DIALECT).allow_header(id, magic)


# ---------------------------------------------------------------------------------------------
# addresses (Util.writeAddress/readAddress, UUID, IpAddress and the UUID subclasses)
# ---------------------------------------------------------------------------------------------

cdef int read_uuid_into(Reader r, UUID u) except -1:
    cdef uint16_t n
    u.lsb = r.int64(b"UUID.leastSigBits")
    u.msb = r.int64(b"UUID.mostSigBits")
    u.additional_data = None
    if r.boolean(b"UUID.has_additional_data"):
        n = r.ushort(b"UUID.additional_data.length")
        if n > 0:
            u.additional_data = r.take(n, b"UUID.additional_data")
    return 0


cdef int write_uuid_body(Writer w, UUID u) except -1:
    w.int64(u.lsb)
    w.int64(u.msb)
    if u.additional_data is None:
        return w.byte(0)
    w.byte(1)
    w.short(len(u.additional_data))
    return w.buffer(u.additional_data, 0, len(u.additional_data))


cdef UUID read_uuid_body(Reader r):
    cdef UUID u = make_uuid(0, 0)
    read_uuid_into(r, u)
    return u


cdef IpAddress read_ip_body(Reader r):
    cdef Py_ssize_t start = r._pos
    cdef int8_t n = r.byte(b"IpAddress.addr_len")
    cdef IpAddress a = IpAddress.__new__(IpAddress)
    cdef int32_t scope
    cdef uint16_t extra
    if n != 4 and n != 16:
        # Java: lengths other than 4/16 throw; 0 fails in InetAddress.getByAddress
        r.fail(f"IpAddress length has to be 4 or 16 bytes (was {n})", b"IpAddress.addr_len", start)
    a.ip = r.take(n, b"IpAddress.addr")
    a.scope_id = None
    if n == 16:
        scope = r.int32(b"IpAddress.scope_id")
        a.scope_id = scope if scope >= 0 else 0
    a.port = r.ushort(b"IpAddress.port")
    a.additional_data = None
    if r.boolean(b"IpAddress.has_additional_data"):
        extra = r.ushort(b"IpAddress.additional_data.length")
        if extra > 0:
            a.additional_data = r.take(extra, b"IpAddress.additional_data")
    return a


cdef int write_ip_body(Writer w, IpAddress a) except -1:
    if a.ip is None:
        w.byte(0)
    else:
        w.byte(len(a.ip))
        w.buffer(a.ip, 0, len(a.ip))
        if len(a.ip) == 16:
            w.int32(a.scope_id or 0)
    w.short(a.port)
    if a.additional_data is None:
        return w.byte(0)
    w.byte(1)
    w.short(len(a.additional_data))
    return w.buffer(a.additional_data, 0, len(a.additional_data))


cdef object read_address_body(Reader r, int magic, Py_ssize_t at):
    """The body of an address whose class is given by ``magic`` (the "other" path of readAddress)."""
    cdef UUID u
    if magic == MAGIC_UUID:
        return read_uuid_body(r)
    if magic == MAGIC_IPADDRESS:
        return read_ip_body(r)
    if magic == MAGIC_PAYLOAD_UUID:
        u = PayloadUUID.__new__(PayloadUUID)
        read_uuid_into(r, u)
        (<PayloadUUID>u).payload = r.string(b"PayloadUUID.payload")
        return u
    if magic == MAGIC_ADDITIONAL_DATA_UUID:
        u = AdditionalDataUUID.__new__(AdditionalDataUUID)
        read_uuid_into(r, u)
        (<AdditionalDataUUID>u).payload = r.byte_buffer(b"AdditionalDataUUID.payload")
        return u
    if magic == MAGIC_TOPOLOGY_UUID:
        u = TopologyUUID.__new__(TopologyUUID)
        read_uuid_into(r, u)
        (<TopologyUUID>u).site_id = r.string(b"TopologyUUID.site_id")
        (<TopologyUUID>u).rack_id = r.string(b"TopologyUUID.rack_id")
        (<TopologyUUID>u).machine_id = r.string(b"TopologyUUID.machine_id")
        return u
    if magic in MAGIC_CLASSES:
        raise new_wire_error(f"magic {magic} ({MAGIC_CLASSES[magic]}) is not an address class",
                             b"Address.magic", at)
    raise UnknownMagicError(f"no address class for magic number {magic}", "Address.magic", at)


cdef object read_address(Reader r):
    cdef uint8_t flags = r.ubyte(b"Address.flags")
    if flags & ADDR_NULL:
        return None
    if flags & ADDR_UUID:
        return read_uuid_body(r)
    if flags & ADDR_IP:
        return read_ip_body(r)
    cdef Py_ssize_t at = r._pos
    return read_address_body(r, r.short(b"Address.magic"), at)


cdef int write_address(Writer w, object a) except -1:
    cdef type t
    if a is None:
        return w.byte(ADDR_NULL)
    t = type(a)
    if t is UUID:
        w.byte(ADDR_UUID)
        return write_uuid_body(w, <UUID>a)
    if t is IpAddress:
        w.byte(ADDR_IP)
        return write_ip_body(w, <IpAddress>a)
    w.byte(0)
    if t is PayloadUUID:
        w.short(MAGIC_PAYLOAD_UUID)
        write_uuid_body(w, <UUID>a)
        return w.string((<PayloadUUID>a).payload)
    if t is AdditionalDataUUID:
        w.short(MAGIC_ADDITIONAL_DATA_UUID)
        write_uuid_body(w, <UUID>a)
        return w.byte_buffer((<AdditionalDataUUID>a).payload)
    if t is TopologyUUID:
        w.short(MAGIC_TOPOLOGY_UUID)
        write_uuid_body(w, <UUID>a)
        w.string((<TopologyUUID>a).site_id)
        w.string((<TopologyUUID>a).rack_id)
        return w.string((<TopologyUUID>a).machine_id)
    raise TypeError(f"{t.__name__} is not an address type of the 2.12 dialect")


cdef tuple read_addresses(Reader r):
    cdef Py_ssize_t start = r._pos
    cdef int16_t n = r.short(b"Addresses.count")
    cdef int i
    if n < 0:
        return None
    # every address takes at least one byte: check before allocating
    r.need(n, b"Addresses")
    return tuple([read_address(r) for i in range(n)])


cdef int write_addresses(Writer w, object addrs) except -1:
    if addrs is None:
        return w.short(-1)
    cdef Py_ssize_t n = len(addrs)
    if n > 32767:
        raise WireFormatError(f"{n} addresses do not fit Util.writeAddresses (max 32767)", "Addresses.count")
    w.short(<int>n)
    for a in addrs:
        write_address(w, a)
    return 0


# ---------------------------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------------------------

cdef ViewId read_view_id_body(Reader r):
    cdef ViewId v = ViewId.__new__(ViewId)
    v.coord_addr = read_address(r)
    v.id = r.int64(b"ViewId.id")
    return v


cdef int write_view_id_body(Writer w, ViewId v) except -1:
    write_address(w, v.coord_addr)
    return w.int64(v.id)


cdef int read_view_into(Reader r, View v) except -1:
    cdef int16_t plen
    if r.boolean(b"View.vid.present"):
        v.vid = read_view_id_body(r)
    else:
        v.vid = None
    v.members = read_addresses(r)
    plen = r.short(b"View.payload_len")
    v.payload = None
    if plen > 0:
        # a Java-serialised Map<String,Object>; kept opaque
        v.payload = r.take(plen, b"View.payload")
    return 0


cdef View read_view_body(Reader r, bint merge, int depth):
    """A View or MergeView body at nesting level ``depth`` (0: not inside another view's subgroups)."""
    cdef View v
    cdef int16_t n
    cdef int i
    if not merge:
        v = View.__new__(View)
        read_view_into(r, v)
        return v
    if depth > _MAX_VIEW_DEPTH:
        r.fail(f"MergeViews nested more than {_MAX_VIEW_DEPTH} levels deep", b"MergeView.subgroups", r._pos)
    v = MergeView.__new__(MergeView)
    read_view_into(r, v)
    n = r.short(b"MergeView.num_subgroups")
    (<MergeView>v).subgroups = None
    if n > 0:
        r.need(<Py_ssize_t>n * _MIN_SUBGROUP, b"MergeView.subgroups")
        subs = []
        for i in range(n):
            subs.append(read_view_body(r, r.boolean(b"MergeView.subgroup.is_merge_view"), depth + 1))
        (<MergeView>v).subgroups = tuple(subs)
    return v


cdef int write_view_body(Writer w, View v) except -1:
    if v.vid is None:
        w.byte(0)
    else:
        w.byte(1)
        write_view_id_body(w, v.vid)
    write_addresses(w, v.members)
    if v.payload:
        if len(v.payload) > 32767:
            raise WireFormatError("a View payload longer than 32767 bytes would be ignored by Java", "View.payload")
        w.short(len(v.payload))
        w.buffer(v.payload, 0, len(v.payload))
    else:
        w.short(0)
    if isinstance(v, MergeView):
        subs = (<MergeView>v).subgroups
        if not subs:
            return w.short(0)
        w.short(len(subs))
        for s in subs:
            w.boolean(isinstance(s, MergeView))
            write_view_body(w, <View?>s)
    return 0


cdef object read_view(Reader r):           # Util.readView
    if not r.boolean(b"View.present"):
        return None
    return read_view_body(r, r.boolean(b"View.is_merge_view"), 0)


cdef int write_view(Writer w, object v) except -1:   # Util.writeView
    if v is None:
        return w.byte(0)
    w.byte(1)
    w.boolean(isinstance(v, MergeView))
    return write_view_body(w, <View?>v)


cdef object read_view_id(Reader r):        # Util.readViewId
    if not r.boolean(b"ViewId.present"):
        return None
    return read_view_id_body(r)


cdef int write_view_id(Writer w, object v) except -1:
    if v is None:
        return w.byte(0)
    w.byte(1)
    return write_view_id_body(w, <ViewId?>v)


cdef Digest read_digest_body(Reader r):
    cdef Py_ssize_t start = r._pos, at
    cdef int16_t n = r.short(b"Digest.count")
    cdef Digest d = Digest.__new__(Digest)
    cdef int64_t low, hd, hr
    cdef int i
    d._entries = {}
    if n < 0:
        r.fail(f"negative digest size {n}", b"Digest.count", start)
    r.need(<Py_ssize_t>n * _MIN_DIGEST_ENTRY, b"Digest.entries")
    for i in range(n):
        at = r._pos
        addr = read_address(r)
        if addr is None:
            r.fail("digest entry without a member address", b"Digest.member", at)
        low = r.int64(b"Digest.low")
        hd = r.int64(b"Digest.highest_delivered")
        hr = r.int64(b"Digest.highest_received")
        if low > hd:
            r.fail(f"digest entry low ({low}) > highest_delivered ({hd})", b"Digest.low", at)
        d._entries[addr] = (low, hd, hr)
    return d


cdef int write_digest_body(Writer w, Digest d) except -1:
    if len(d._entries) > 32767:
        raise WireFormatError("digest with more than 32767 members", "Digest.count")
    w.short(len(d._entries))
    for addr, e in d._entries.items():
        write_address(w, addr)
        w.int64(e[0])
        w.int64(e[1])
        w.int64(e[2])
    return 0


cdef object read_digest(Reader r):
    if not r.boolean(b"Digest.present"):
        return None
    return read_digest_body(r)


cdef int write_digest(Writer w, object d) except -1:
    if d is None:
        return w.byte(0)
    w.byte(1)
    return write_digest_body(w, <Digest?>d)


cdef JoinRsp read_join_rsp_body(Reader r):
    cdef JoinRsp j = JoinRsp.__new__(JoinRsp)
    # Java reads the view back as a plain View, whatever was written
    j.view = read_view_body(r, False, 0) if r.boolean(b"JoinRsp.view.present") else None
    j.digest = read_digest(r)
    j.fail_reason = r.string(b"JoinRsp.fail_reason")
    return j


cdef int write_join_rsp_body(Writer w, JoinRsp j) except -1:
    if j.view is None:
        w.byte(0)
    else:
        w.byte(1)
        write_view_body(w, j.view)
    write_digest(w, j.digest)
    return w.string(j.fail_reason)


cdef MergeId read_merge_id_body(Reader r):
    cdef MergeId m = MergeId.__new__(MergeId)
    m.initiator = read_address(r)
    m.id = r.int32(b"MergeId.id")
    return m


cdef int write_merge_id_body(Writer w, MergeId m) except -1:
    write_address(w, m.initiator)
    return w.int32(m.id)


cdef PingData read_ping_data_body(Reader r):
    cdef PingData p = PingData.__new__(PingData)
    p.own_addr = read_address(r)
    p.view = read_view(r)
    p.view_id = read_view_id(r)
    p.is_server = r.boolean(b"PingData.is_server")
    p.logical_name = r.string(b"PingData.logical_name")
    p.physical_addrs = read_addresses(r)
    return p


cdef int write_ping_data_body(Writer w, PingData p) except -1:
    write_address(w, p.own_addr)
    write_view(w, p.view)
    write_view_id(w, p.view_id)
    w.boolean(p.is_server)
    w.string(p.logical_name)
    return write_addresses(w, p.physical_addrs)


cdef Range read_range_body(Reader r):
    cdef Range g = Range.__new__(Range)
    g.low = r.int64(b"Range.low")
    g.high = r.int64(b"Range.high")
    return g


cdef int write_range_body(Writer w, Range g) except -1:
    w.int64(g.low)
    return w.int64(g.high)


cdef object read_ip_streamable(Reader r):      # Util.readStreamable(IpAddress.class): no flag byte
    if not r.boolean(b"IpAddress.present"):
        return None
    return read_ip_body(r)


cdef int write_ip_streamable(Writer w, object a) except -1:
    if a is None:
        return w.byte(0)
    w.byte(1)
    return write_ip_body(w, <IpAddress?>a)


# ---------------------------------------------------------------------------------------------
# header codecs
# ---------------------------------------------------------------------------------------------

cdef class HeaderCodec:
    """Reads and writes the body of one header class (``Header.writeTo``/``readFrom``)."""
    cdef readonly int magic
    cdef readonly object type
    cdef readonly str java_class

    cdef object read(self, Reader r):
        raise NotImplementedError

    cdef int write(self, Writer w, object h) except -1:
        raise NotImplementedError

    cdef int skip(self, Reader r) except -1:
        """Move past a header body without keeping it (lazy decoding); validates like ``read``."""
        self.read(r)
        return 0


cdef class TpHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef TpHeader h = TpHeader.__new__(TpHeader)
        h.channel_name = r.utf(b"TpHeader.channel_name")
        return h

    cdef int write(self, Writer w, object h) except -1:
        return w.utf((<TpHeader>h).channel_name)

    cdef int skip(self, Reader r) except -1:
        cdef Py_ssize_t start = r._pos
        cdef uint16_t n = r.ushort(b"TpHeader.channel_name")
        cdef Py_ssize_t i
        r.skip(n, b"TpHeader.channel_name")
        for i in range(start + 2, start + 2 + n):
            if r._data[i] >= 0x80:   # not plain ASCII: validate the modified UTF-8 properly
                mutf8_decode(r._data + start + 2, n, start + 2, b"TpHeader.channel_name")
                break
        return 0


cdef class NakAckHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef NakAckHeader h = NakAckHeader.__new__(NakAckHeader)
        h.seqno = -1   # Java's default when the type carries no seqno
        h.type = r.byte(b"NakAckHeader.type")
        if h.type == 1 or h.type == 3:
            h.seqno = r.int64(b"NakAckHeader.seqno")
        elif h.type == 2:
            h.range = read_range_body(r) if r.boolean(b"NakAckHeader.range.present") else None
            h.sender = read_address(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef NakAckHeader h = <NakAckHeader>o
        w.byte(h.type)
        if h.type == 1 or h.type == 3:
            w.int64(h.seqno)
        elif h.type == 2:
            if h.range is None:
                w.byte(0)
            else:
                w.byte(1)
                write_range_body(w, <Range?>h.range)
            write_address(w, h.sender)
        return 0

    cdef int skip(self, Reader r) except -1:
        cdef int8_t t = r.byte(b"NakAckHeader.type")
        if t == 1 or t == 3:
            return r.skip(8, b"NakAckHeader.seqno")
        if t == 2:
            if r.boolean(b"NakAckHeader.range.present"):
                r.skip(16, b"NakAckHeader.range")
            read_address(r)
        return 0


cdef class UnicastHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef UnicastHeader h = UnicastHeader.__new__(UnicastHeader)
        h.type = r.byte(b"UnicastHeader.type")
        if h.type == 0:
            h.seqno = r.int64(b"UnicastHeader.seqno")
            h.conn_id = r.short(b"UnicastHeader.conn_id")
            h.first = r.boolean(b"UnicastHeader.first")
        elif h.type == 1:
            h.seqno = r.int64(b"UnicastHeader.seqno")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef UnicastHeader h = <UnicastHeader>o
        w.byte(h.type)
        if h.type == 0:
            w.int64(h.seqno)
            w.short(h.conn_id)
            w.boolean(h.first)
        elif h.type == 1:
            w.int64(h.seqno)
        return 0

    cdef int skip(self, Reader r) except -1:
        cdef int8_t t = r.byte(b"UnicastHeader.type")
        if t == 0:
            return r.skip(11, b"UnicastHeader.DATA")
        if t == 1:
            return r.skip(8, b"UnicastHeader.seqno")
        return 0


cdef class FragHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef FragHeader h = FragHeader.__new__(FragHeader)
        h.id = r.int64(b"FragHeader.id")
        h.frag_id = r.int32(b"FragHeader.frag_id")
        h.num_frags = r.int32(b"FragHeader.num_frags")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef FragHeader h = <FragHeader>o
        w.int64(h.id)
        w.int32(h.frag_id)
        return w.int32(h.num_frags)

    cdef int skip(self, Reader r) except -1:
        return r.skip(16, b"FragHeader")


cdef class FcHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef FcHeader h = FcHeader.__new__(FcHeader)
        h.type = r.byte(b"FcHeader.type")
        return h

    cdef int write(self, Writer w, object o) except -1:
        return w.byte((<FcHeader>o).type)

    cdef int skip(self, Reader r) except -1:
        return r.skip(1, b"FcHeader.type")


cdef class SfcHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef SfcHeader h = SfcHeader.__new__(SfcHeader)
        h.type = r.byte(b"SFC.Header.type")
        return h

    cdef int write(self, Writer w, object o) except -1:
        return w.byte((<SfcHeader>o).type)


cdef class PingHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef PingHeader h = PingHeader.__new__(PingHeader)
        h.type = r.byte(b"PingHeader.type")
        h.data = read_ping_data_body(r) if r.boolean(b"PingHeader.data.present") else None
        h.cluster_name = r.string(b"PingHeader.cluster_name")
        h.view_id = read_view_id(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef PingHeader h = <PingHeader>o
        w.byte(h.type)
        if h.data is None:
            w.byte(0)
        else:
            w.byte(1)
            write_ping_data_body(w, <PingData?>h.data)
        w.string(h.cluster_name)
        return write_view_id(w, h.view_id)


cdef class GmsHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef GmsHeader h = GmsHeader.__new__(GmsHeader)
        h.type = r.byte(b"GmsHeader.type")
        cdef bint merge = r.boolean(b"GmsHeader.is_merge_view")
        h.view = read_view_body(r, merge, 0) if r.boolean(b"GmsHeader.view.present") else None
        h.mbr = read_address(r)
        h.mbrs = read_addresses(r)
        h.join_rsp = read_join_rsp_body(r) if r.boolean(b"GmsHeader.join_rsp.present") else None
        h.my_digest = read_digest(r)
        h.merge_id = read_merge_id_body(r) if r.boolean(b"GmsHeader.merge_id.present") else None
        h.merge_rejected = r.boolean(b"GmsHeader.merge_rejected")
        h.use_flush_if_present = r.boolean(b"GmsHeader.useFlushIfPresent")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef GmsHeader h = <GmsHeader>o
        w.byte(h.type)
        w.boolean(isinstance(h.view, MergeView))
        if h.view is None:
            w.byte(0)
        else:
            w.byte(1)
            write_view_body(w, <View?>h.view)
        write_address(w, h.mbr)
        write_addresses(w, h.mbrs)
        if h.join_rsp is None:
            w.byte(0)
        else:
            w.byte(1)
            write_join_rsp_body(w, <JoinRsp?>h.join_rsp)
        write_digest(w, h.my_digest)
        if h.merge_id is None:
            w.byte(0)
        else:
            w.byte(1)
            write_merge_id_body(w, <MergeId?>h.merge_id)
        w.boolean(h.merge_rejected)
        return w.boolean(h.use_flush_if_present)


cdef class Unicast2HeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef Unicast2Header h = Unicast2Header.__new__(Unicast2Header)
        h.type = r.byte(b"Unicast2Header.type")
        if h.type == 0:
            h.seqno = r.int64(b"Unicast2Header.seqno")
            h.conn_id = r.short(b"Unicast2Header.conn_id")
            h.first = r.boolean(b"Unicast2Header.first")
        elif h.type == 1 or h.type == 3:
            h.seqno = r.int64(b"Unicast2Header.seqno")
            h.high_seqno = r.int64(b"Unicast2Header.high_seqno")
        elif h.type == 2:
            h.seqno = r.int64(b"Unicast2Header.seqno")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef Unicast2Header h = <Unicast2Header>o
        w.byte(h.type)
        if h.type == 0:
            w.int64(h.seqno)
            w.short(h.conn_id)
            w.boolean(h.first)
        elif h.type == 1 or h.type == 3:
            w.int64(h.seqno)
            w.int64(h.high_seqno)
        elif h.type == 2:
            w.int64(h.seqno)
        return 0


cdef class StableHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef StableHeader h = StableHeader.__new__(StableHeader)
        h.type = r.int32(b"StableHeader.type")
        h.stable_digest = read_digest(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        w.int32((<StableHeader>o).type)
        return write_digest(w, (<StableHeader>o).stable_digest)


cdef class FdHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef FdHeader h = FdHeader.__new__(FdHeader)
        h.type = r.byte(b"FD.FdHeader.type")
        h.mbrs = read_addresses(r)
        h.from_ = read_address(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        w.byte((<FdHeader>o).type)
        write_addresses(w, (<FdHeader>o).mbrs)
        return write_address(w, (<FdHeader>o).from_)


cdef class HeartbeatHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        return HeartbeatHeader.__new__(HeartbeatHeader)

    cdef int write(self, Writer w, object o) except -1:
        return 0


cdef class FdSockHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef FdSockHeader h = FdSockHeader.__new__(FdSockHeader)
        cdef int32_t n
        cdef int i
        h.type = r.byte(b"FD_SOCK.FdHeader.type")
        h.mbr = read_address(r)
        h.sock_addr = read_ip_streamable(r)
        n = r.int32(b"FD_SOCK.FdHeader.cache_size")
        h.cached_addrs = None
        if n > 0:
            r.need(<Py_ssize_t>n * _MIN_CACHE_ENTRY, b"FD_SOCK.FdHeader.cache")
            h.cached_addrs = tuple([(read_address(r), read_ip_streamable(r)) for i in range(n)])
        n = r.int32(b"FD_SOCK.FdHeader.mbrs_size")
        h.mbrs = None
        if n > 0:
            r.need(n, b"FD_SOCK.FdHeader.mbrs")
            h.mbrs = tuple([read_address(r) for i in range(n)])
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef FdSockHeader h = <FdSockHeader>o
        w.byte(h.type)
        write_address(w, h.mbr)
        write_ip_streamable(w, h.sock_addr)
        if not h.cached_addrs:
            w.int32(0)
        else:
            w.int32(len(h.cached_addrs))
            for k, v in h.cached_addrs:
                write_address(w, k)
                write_ip_streamable(w, v)
        if not h.mbrs:
            return w.int32(0)
        w.int32(len(h.mbrs))
        for a in h.mbrs:
            write_address(w, a)
        return 0


cdef class VerifyHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef VerifyHeader h = VerifyHeader.__new__(VerifyHeader)
        h.type = r.short(b"VerifyHeader.type")
        h.from_ = read_address(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        w.short((<VerifyHeader>o).type)
        return write_address(w, (<VerifyHeader>o).from_)


cdef class StateHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef StateHeader h = StateHeader.__new__(StateHeader)
        h.type = r.byte(b"StateHeader.type")
        h.id = r.int64(b"StateHeader.id")
        h.sender = read_address(r)
        h.my_digest = read_digest(r)
        h.state_id = r.string(b"StateHeader.state_id")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef StateHeader h = <StateHeader>o
        w.byte(h.type)
        w.int64(h.id)
        write_address(w, h.sender)
        write_digest(w, h.my_digest)
        return w.string(h.state_id)


cdef class StreamingStateHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef StreamingStateHeader h = StreamingStateHeader.__new__(StreamingStateHeader)
        h.type = r.byte(b"StreamingStateHeader.type")
        h.id = r.int64(b"StreamingStateHeader.id")
        h.sender = read_address(r)
        h.my_digest = read_digest(r)
        h.bind_addr = read_ip_streamable(r)
        h.state_id = r.string(b"StreamingStateHeader.state_id")
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef StreamingStateHeader h = <StreamingStateHeader>o
        w.byte(h.type)
        w.int64(h.id)
        write_address(w, h.sender)
        write_digest(w, h.my_digest)
        write_ip_streamable(w, h.bind_addr)
        return w.string(h.state_id)


cdef class FlushHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef FlushHeader h = FlushHeader.__new__(FlushHeader)
        h.type = r.byte(b"FlushHeader.type")
        h.view_id = r.int64(b"FlushHeader.viewID")
        h.flush_participants = read_addresses(r)
        h.digest = read_digest(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        cdef FlushHeader h = <FlushHeader>o
        w.byte(h.type)
        w.int64(h.view_id)
        write_addresses(w, h.flush_participants)
        return write_digest(w, h.digest)


cdef class SequencerHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef SequencerHeader h = SequencerHeader.__new__(SequencerHeader)
        h.type = r.byte(b"SequencerHeader.type")
        h.tag = read_view_id(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        w.byte((<SequencerHeader>o).type)
        return write_view_id(w, (<SequencerHeader>o).tag)


cdef class CompressHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef CompressHeader h = CompressHeader.__new__(CompressHeader)
        h.original_size = r.int32(b"CompressHeader.original_size")
        return h

    cdef int write(self, Writer w, object o) except -1:
        return w.int32((<CompressHeader>o).original_size)


cdef class CoordAnnouncementCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef CoordAnnouncement h = CoordAnnouncement.__new__(CoordAnnouncement)
        h.view = read_view(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        return write_view(w, (<CoordAnnouncement>o).view)


cdef class RequestCorrelatorHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef RequestCorrelatorHeader h = RequestCorrelatorHeader.__new__(RequestCorrelatorHeader)
        _read_rc(r, h)
        return h

    cdef int write(self, Writer w, object o) except -1:
        return _write_rc(w, <RequestCorrelatorHeader>o)


cdef class MultiDestinationHeaderCodec(HeaderCodec):
    cdef object read(self, Reader r):
        cdef MultiDestinationHeader h = MultiDestinationHeader.__new__(MultiDestinationHeader)
        _read_rc(r, h)
        h.exclusion_list = read_addresses(r)
        return h

    cdef int write(self, Writer w, object o) except -1:
        _write_rc(w, <RequestCorrelatorHeader>o)
        return write_addresses(w, (<MultiDestinationHeader>o).exclusion_list)


cdef int _read_rc(Reader r, RequestCorrelatorHeader h) except -1:
    h.type = r.byte(b"RequestCorrelator.Header.type")
    h.id = r.int64(b"RequestCorrelator.Header.id")
    h.rsp_expected = r.boolean(b"RequestCorrelator.Header.rsp_expected")
    h.corr_id = r.short(b"RequestCorrelator.Header.corrId")
    return 0


cdef int _write_rc(Writer w, RequestCorrelatorHeader h) except -1:
    w.byte(h.type)
    w.int64(h.id)
    w.boolean(h.rsp_expected)
    return w.short(h.corr_id)


cdef class PyHeaderCodec(HeaderCodec):
    """Codec of a header registered from Python: ``read(reader) -> header``, ``write(writer, header)``."""
    cdef object _read
    cdef object _write

    cdef object read(self, Reader r):
        return self._read(r)

    cdef int write(self, Writer w, object h) except -1:
        self._write(w, h)
        return 0


# ---------------------------------------------------------------------------------------------
# the dialect object: header registry, messages, datagrams
# ---------------------------------------------------------------------------------------------

cdef int _FAST_MAGICS = 1024

cdef enum:
    _CHECKED_IDS = 1024     # protocol ids below this have their header classes in a C table
    _MAX_FITS = 4           # header classes one protocol id may carry


cdef inline bint _magic_in(const int16_t* magics, int n, int16_t magic) noexcept nogil:
    cdef int j
    for j in range(n):
        if magics[j] == magic:
            return True
    return False


cdef class Dialect212


cdef inline bint _header_fits(Dialect212 d, int16_t pid, int16_t magic) except -1:
    """Whether a header of class ``magic`` may travel under protocol id ``pid``: for ids below _CHECKED_IDS a C
    table lookup (most ids carry one class: the first comparison decides), else the dict of bigger checked ids."""
    cdef int k
    if 0 <= pid < _CHECKED_IDS:
        k = d._nfits[pid]
        return k == 0 or d._fits[pid][0] == magic or _magic_in(d._fits[pid] + 1, k - 1, magic)
    return _big_header_fits(d, pid, magic)


cdef bint _big_header_fits(Dialect212 d, int16_t pid, int16_t magic) except -1:
    if not d._fits_big:
        return True
    allowed = d._fits_big.get(pid)
    return allowed is None or magic in <tuple>allowed


cdef class Dialect212(WireDialect):
    """The 2.12.2.Final dialect. Use the module-level :data:`DIALECT` instance."""
    cdef list _by_magic           # magic (< 1024) -> HeaderCodec or None
    cdef dict _by_magic_big       # magic >= 1024 -> HeaderCodec
    cdef dict _by_type            # header type -> HeaderCodec
    cdef int16_t _fits[_CHECKED_IDS][_MAX_FITS]   # protocol id -> the magics of the header classes it carries
    cdef uint8_t _nfits[_CHECKED_IDS]             # how many of them (0: the id is not checked)
    cdef dict _fits_big           # protocol id >= _CHECKED_IDS -> tuple of magics (checked ids only)
    cdef readonly str name
    cdef readonly int version

    def __cinit__(self):
        self._by_magic = [None] * _FAST_MAGICS
        self._by_magic_big = {}
        self._by_type = {}
        memset(self._nfits, 0, sizeof(self._nfits))
        self._fits_big = {}
        self.name = NAME
        self.version = _VERSION

    def allow_header(self, int protocol_id, int magic):
        """Let headers of class ``magic`` travel under ``protocol_id``. Once an id has an allowed class, a
        received message with a header of any other class under that id is malformed (dropped alone)."""
        cdef int k
        if not -0x8000 <= protocol_id <= 0x7FFF or not -0x8000 <= magic <= 0x7FFF:
            raise ValueError(f"protocol id {protocol_id} and magic {magic} must fit a Java short")
        if self.header_fits(protocol_id, magic) and self._is_checked(protocol_id):
            return
        if 0 <= protocol_id < _CHECKED_IDS:
            k = self._nfits[protocol_id]
            if k == _MAX_FITS:
                raise ValueError(f"protocol id {protocol_id} already carries {_MAX_FITS} header classes")
            self._fits[protocol_id][k] = <int16_t>magic
            self._nfits[protocol_id] = k + 1
        else:
            self._fits_big[protocol_id] = self._fits_big.get(protocol_id, ()) + (magic,)

    cdef bint _is_checked(self, int protocol_id):
        if 0 <= protocol_id < _CHECKED_IDS:
            return self._nfits[protocol_id] != 0
        return protocol_id in self._fits_big

    def header_fits(self, int protocol_id, int magic):
        """False when a header of class ``magic`` under ``protocol_id`` makes a message malformed."""
        return _header_fits(self, <int16_t>protocol_id, <int16_t>magic)

    cdef int _add(self, HeaderCodec c, int magic, object typ) except -1:
        c.magic = magic
        c.type = typ
        c.java_class = MAGIC_CLASSES.get(magic) or getattr(typ, "JAVA_CLASS", None)
        if 0 <= magic < _FAST_MAGICS:
            if self._by_magic[magic] is not None:
                raise ValueError(f"magic {magic} is already registered for {self._by_magic[magic].type}")
            self._by_magic[magic] = c
        else:
            if magic in self._by_magic_big:
                raise ValueError(f"magic {magic} is already registered")
            self._by_magic_big[magic] = c
        if typ in self._by_type:
            raise ValueError(f"{typ.__name__} is already registered")
        self._by_type[typ] = c
        return 0

    def register_header(self, int magic, type header_type, read, write, str java_class=None, protocol_ids=()):
        """Register a header class defined in Python (the hook for headers this module does not know).

        ``read(reader)`` returns a header read from a :class:`jgpy._core.wire.Reader`;
        ``write(writer, header)`` writes its body. Java requires custom magics to be > 1024, and the
        Java peer must have the same class under the same magic, or it will drop the whole message.
        ``protocol_ids``: the ids this header travels under (see :meth:`allow_header`).
        """
        if magic <= 1024:
            raise ValueError("custom magic numbers must be > 1024 (ClassConfigurator.add)")
        cdef PyHeaderCodec c = PyHeaderCodec()
        c._read = read
        c._write = write
        self._add(c, magic, header_type)
        if java_class:
            c.java_class = java_class
        for pid in protocol_ids:
            self.allow_header(pid, magic)

    cdef inline HeaderCodec codec_for_magic(self, int magic):
        if 0 <= magic < _FAST_MAGICS:
            return <HeaderCodec>self._by_magic[magic]
        return self._by_magic_big.get(magic)

    cdef HeaderCodec codec_for(self, object hdr):
        c = self._by_type.get(type(hdr))
        if c is None:
            raise TypeError(f"{type(hdr).__name__} is not a header class of the {self.name} dialect "
                            "(register it with register_header)")
        return <HeaderCodec>c

    def magic_of(self, hdr_or_type):
        """The magic number the header (or header class) is written with."""
        t = hdr_or_type if isinstance(hdr_or_type, type) else type(hdr_or_type)
        c = self._by_type.get(t)
        return c.magic if c is not None else None

    def header_type(self, int magic):
        c = self.codec_for_magic(magic)
        return c.type if c is not None else None

    def java_class(self, hdr_or_type):
        t = hdr_or_type if isinstance(hdr_or_type, type) else type(hdr_or_type)
        c = self._by_type.get(t)
        return c.java_class if c is not None else None

    def header_types(self):
        """``{magic: header type}`` of every registered header class."""
        d = {i: (<HeaderCodec>c).type for i, c in enumerate(self._by_magic) if c is not None}
        d.update({m: (<HeaderCodec>c).type for m, c in self._by_magic_big.items()})
        return d

    cdef object read_header_at(self, int magic, object raw, Py_ssize_t off, Py_ssize_t end):
        cdef HeaderCodec c = self.codec_for_magic(magic)
        cdef Reader r = Reader(raw, off, end)
        if c is None:
            raise UnknownMagicError(f"magic number {magic} is not available in the magic map", "header.magic", off)
        h = c.read(r)
        if r._pos != end:
            raise new_wire_error("header body length changed between skip and read", b"header", r._pos)
        return h

    # ---- headers by value ----

    cdef int write_header_body(self, Writer w, object hdr) except -1:
        return self.codec_for(hdr).write(w, hdr)

    cdef object read_header_body(self, Reader r, int magic):
        cdef HeaderCodec c = self.codec_for_magic(magic)
        if c is None:
            raise UnknownMagicError(f"magic number {magic} is not available in the magic map", "header.magic", r._pos)
        return c.read(r)

    # ---- messages ----

    cdef Message read_message(self, Reader r, Py_ssize_t* misfiled):
        """``Message.readFrom``; the payload and the header bodies stay in the reader's buffer.

        The whole message is read (and validated) even when a header's class does not fit its protocol id
        (:meth:`header_fits`); then ``misfiled`` gets the offset of the first such header (else -1), and the
        caller drops the message or fails (``misfiled_error`` says why)."""
        cdef uint8_t leading = r.ubyte(b"Message.leading")
        cdef Message m = new_message()
        cdef int32_t n
        cdef int16_t nh, pid, magic
        cdef Py_ssize_t start, at
        cdef int i
        cdef HeaderCodec c
        misfiled[0] = -1
        m.flags = r.ubyte(b"Message.flags")
        if leading & 0x01:
            m.dest = read_address(r)
        if leading & 0x02:
            m.src = read_address(r)
        if leading & 0x04:
            start = r._pos
            n = r.int32(b"Message.length")
            if n < 0:
                r.fail(f"negative payload length {n}", b"Message.length", start)
            r.skip(n, b"Message.buf")
            m.set_payload(r._owner, r._pos - n, n)
        nh = r.short(b"Message.num_headers")
        if nh < 0:
            nh = 0      # Java sizes its header array to a default and reads none
        r.need(<Py_ssize_t>nh * 4, b"Message.headers")
        m.set_raw(r._owner, self)
        for i in range(nh):
            pid = r.short(b"header.protocol_id")
            at = r._pos
            magic = r.short(b"header.magic")
            c = self.codec_for_magic(magic)
            if c is None:
                raise UnknownMagicError(f"magic number {magic} is not available in the magic map "
                                        "(Java drops the whole packet)", "header.magic", at)
            if misfiled[0] < 0 and not _header_fits(self, pid, magic):
                misfiled[0] = at - 2
            at = r._pos
            c.skip(r)
            m.add_raw_header(pid, magic, at, r._pos)
        return m

    cdef Message read_whole_message(self, Reader r):
        """``read_message`` for a message that is a value of its own (a Streamable): a misfiled header fails."""
        cdef Py_ssize_t misfiled
        cdef Message m = self.read_message(r, &misfiled)
        if misfiled >= 0:
            raise self.misfiled_error(r, misfiled)
        return m

    cdef object misfiled_error(self, Reader r, Py_ssize_t at):
        """The WireFormatError of the header at ``at`` (its protocol id) whose class does not fit that id."""
        cdef const unsigned char* p = r._data + at
        cdef int16_t pid = <int16_t>((p[0] << 8) | p[1])
        cdef int16_t magic = <int16_t>((p[2] << 8) | p[3])
        return WireFormatError(f"a {MAGIC_CLASSES.get(magic, magic)} header under protocol id {pid} "
                               f"({PROTOCOL_NAMES.get(pid, 'custom')}), which carries "
                               f"{_allowed_names(self.allowed_magics(pid))} only", "header.protocol_id", at)

    def allowed_magics(self, int protocol_id):
        """The magics allowed under ``protocol_id`` (empty: not checked)."""
        if 0 <= protocol_id < _CHECKED_IDS:
            return tuple([self._fits[protocol_id][j] for j in range(self._nfits[protocol_id])])
        return self._fits_big.get(protocol_id, ())

    cdef int write_message(self, Writer w, Message m, bint no_addrs, object list_src) except -1:
        """``Message.writeTo`` (``no_addrs=False``) or ``writeToNoAddrs(list_src)``."""
        cdef uint8_t leading = 0
        cdef bint write_src
        cdef int i, count, pos
        cdef HeaderCodec c
        if not no_addrs:
            if m.dest is not None:
                leading |= 0x01
            if m.src is not None:
                leading |= 0x02
            write_src = m.src is not None
        else:
            write_src = list_src is None or (m.src is not None and m.src != list_src)
            if write_src:
                leading |= 0x02
        if m._buf is not None:
            leading |= 0x04
        w.ensure(2)
        w._buf[w._len] = leading
        w._buf[w._len + 1] = m.flags
        w._len += 2
        if leading & 0x01:
            write_address(w, m.dest)
        if leading & 0x02:
            write_address(w, m.src)
        if leading & 0x04:
            w.int32(<int32_t>m._len)
            w.buffer(m._buf, m._off, m._len)
        # Headers.size(): the leading run of ids > 0; every header with id > 0 is written
        count = 0
        while count < m._nh and m._h[count].id > 0:
            count += 1
        w.short(count)
        for i in range(m._nh):
            if m._h[i].id <= 0:
                continue
            w.short(m._h[i].id)
            hdr = m.built_header(i)
            if hdr is not None:
                c = self.codec_for(hdr)
                w.short(c.magic)
                c.write(w, hdr)
            else:  # untouched received header: copy its bytes
                w.short(m._h[i].magic)
                w.buffer(m._raw, m._h[i].off, m._h[i].end - m._h[i].off)
        return 0

    # ---- datagrams (TP.writeMessage / writeMessageList / IncomingPacket) ----

    cdef int write_single(self, Writer w, Message m, bint multicast) except -1:
        w.short(_VERSION)
        w.byte((TP_MULTICAST if multicast else 0) | (TP_OOB if m.flags & 0x01 else 0))
        return self.write_message(w, m, False, None)

    cdef int write_list(self, Writer w, object dest, object src, list msgs, bint multicast) except -1:
        w.short(_VERSION)
        w.byte(TP_LIST | (TP_MULTICAST if multicast else 0))
        write_address(w, dest)
        write_address(w, src)
        for m in msgs:
            w.byte(1)
            self.write_message(w, <Message?>m, True, src)
        return w.byte(0)

    cdef int read_datagram_into(self, Reader r, list out, bint check_version, list rejected) except -1:
        """Decode one datagram, appending its messages to ``out``; returns the tp_flags.

        A message with a header whose class does not fit its protocol id is malformed: it is dropped alone
        (its error appended to ``rejected`` unless None) and the rest of the datagram is read on. Anything
        else wrong raises, and no message of the datagram is kept: a LIST cannot be resynchronised after a
        message that does not parse, and Java's ``readMessageList`` drops the whole list too."""
        cdef int16_t version = r.short(b"version")
        cdef uint8_t flags
        cdef Message m
        cdef Py_ssize_t misfiled, n0, r0
        if check_version and not is_binary_compatible(version):
            raise IncompatibleVersionError(version & 0xFFFF, _VERSION, 0)
        flags = r.ubyte(b"tp_flags")
        if flags & TP_LIST:
            dest = read_address(r)
            src = read_address(r)
            n0 = PyList_GET_SIZE(out)
            r0 = PyList_GET_SIZE(rejected) if rejected is not None else 0
            try:
                while r.boolean(b"list.more"):
                    m = self.read_message(r, &misfiled)
                    if misfiled >= 0:
                        if rejected is not None:
                            rejected.append(self.misfiled_error(r, misfiled))
                        continue
                    m.dest = dest
                    if m.src is None:
                        m.src = src
                    out.append(m)
            except BaseException:
                del out[n0:]   # Java drops the whole list when one message fails
                if rejected is not None:
                    del rejected[r0:]   # counted with the datagram instead
                raise
        else:
            m = self.read_message(r, &misfiled)
            if misfiled < 0:
                out.append(m)
            elif rejected is not None:
                rejected.append(self.misfiled_error(r, misfiled))
        return flags

    # ---- Python API ----

    def encode_message(self, Message msg, multicast=None):
        """One message as a datagram (``TP.writeMessage``); multicast defaults to ``msg.dest is None``."""
        cdef Writer w = Writer(256 + msg._len)
        self.write_single(w, msg, msg.dest is None if multicast is None else multicast)
        return w.getvalue()

    def encode_bundle(self, list msgs, dest=None, src=None, multicast=None):
        """A bundle datagram (``TP.writeMessageList``); ``src`` defaults to the first message's src."""
        cdef Writer w = Writer(256 + 1100 * len(msgs))
        if src is None and msgs:
            src = (<Message?>msgs[0]).src
        self.write_list(w, dest, src, msgs, dest is None if multicast is None else multicast)
        return w.getvalue()

    def decode_datagram(self, data, bint check_version=True):
        """Decode a UDP datagram or TCP frame payload into a :class:`Datagram` (messages dropped alone, for a
        header under a protocol id that does not carry its class, are in its ``rejected``)."""
        data = data if type(data) is bytes else bytes(data)
        cdef Reader r = Reader(data)
        cdef list msgs = []
        cdef list rejected = []
        cdef int flags = self.read_datagram_into(r, msgs, check_version, rejected)
        return Datagram(int.from_bytes(data[:2], "big"), flags, msgs, r._end - r._pos, rejected)

    def decode_messages(self, bytes data, list out, bint check_version=True, list rejected=None):
        """Hot-path decode: append the datagram's messages to ``out``; returns the tp_flags. The error of each
        message dropped alone (a misfiled header) goes to ``rejected`` when given."""
        cdef Reader r = Reader(data)
        return self.read_datagram_into(r, out, check_version, rejected)

    def write_datagram(self, Writer w, Message msg, bint multicast):
        """Append ``msg`` as a single-message datagram to a (reused) writer: the transport's send path."""
        self.write_single(w, msg, multicast)

    def write_bundle(self, Writer w, list msgs, dest, src, bint multicast):
        """Append a bundle datagram to a (reused) writer."""
        self.write_list(w, dest, src, msgs, multicast)

    def encode_list_entry(self, Message msg, list_src):
        """One message of a bundle as the bundler queues it: the 0x01 "more" byte, then
        ``writeToNoAddrs(list_src)``; a datagram is then prefix + entries + 0x00."""
        cdef Writer w = Writer(64 + msg._len)
        w.byte(1)
        self.write_message(w, msg, True, list_src)
        return w.getvalue()

    def list_prefix(self, dest, src, bint multicast):
        """The start of a bundle datagram: version, LIST flags, the list dest and src."""
        cdef Writer w = Writer(64)
        w.short(_VERSION)
        w.byte(TP_LIST | (TP_MULTICAST if multicast else 0))
        write_address(w, dest)
        write_address(w, src)
        return w.getvalue()

    def write_message_to(self, Writer w, Message msg):
        """Append ``Message.writeTo`` of ``msg`` (no transport framing)."""
        self.write_message(w, msg, False, None)

    def read_message_from(self, Reader r):
        return self.read_whole_message(r)

    def encode_header(self, hdr):
        """The body bytes of a header (``Header.writeTo``)."""
        cdef Writer w = Writer()
        self.write_header_body(w, hdr)
        return w.getvalue()

    def decode_header(self, int magic, data):
        cdef Reader r = Reader(data)
        h = self.read_header_body(r, magic)
        _expect_end(r)
        return h

    def encode(self, obj):
        """``writeTo`` of any streamable value: an address body, a data class, a header or a Message."""
        cdef Writer w = Writer()
        self.write_streamable_body(w, obj)
        return w.getvalue()

    cdef int write_streamable_body(self, Writer w, object obj) except -1:
        t = type(obj)
        if isinstance(obj, Message):
            return self.write_message(w, <Message>obj, False, None)
        if isinstance(obj, Header):
            return self.write_header_body(w, obj)
        if t is UUID:
            return write_uuid_body(w, <UUID>obj)
        if t is IpAddress:
            return write_ip_body(w, <IpAddress>obj)
        if isinstance(obj, UUID):   # subclasses: body without flag/magic
            write_uuid_body(w, <UUID>obj)
            if t is PayloadUUID:
                return w.string((<PayloadUUID>obj).payload)
            if t is AdditionalDataUUID:
                return w.byte_buffer((<AdditionalDataUUID>obj).payload)
            w.string((<TopologyUUID>obj).site_id)
            w.string((<TopologyUUID>obj).rack_id)
            return w.string((<TopologyUUID>obj).machine_id)
        if isinstance(obj, View):
            return write_view_body(w, <View>obj)
        if t is ViewId:
            return write_view_id_body(w, <ViewId>obj)
        if t is Digest:
            return write_digest_body(w, <Digest>obj)
        if t is JoinRsp:
            return write_join_rsp_body(w, <JoinRsp>obj)
        if t is MergeId:
            return write_merge_id_body(w, <MergeId>obj)
        if t is PingData:
            return write_ping_data_body(w, <PingData>obj)
        if t is Range:
            return write_range_body(w, <Range>obj)
        raise TypeError(f"cannot encode a {t.__name__}")

    def decode(self, kind, data, bint exact=True):
        """Read a value of ``kind`` (a class such as ``View`` or a header class) from ``data``.

        With ``exact`` (default) trailing bytes are an error. Returns the value.
        """
        cdef Reader r = Reader(data)
        v = self.read_kind(r, kind)
        if exact:
            _expect_end(r)
        return v

    def read_kind(self, Reader r, kind):
        if kind is Message:
            return self.read_whole_message(r)
        if kind is UUID:
            return read_uuid_body(r)
        if kind is IpAddress:
            return read_ip_body(r)
        if kind is View:
            return read_view_body(r, False, 0)
        if kind is MergeView:
            return read_view_body(r, True, 0)
        if kind is ViewId:
            return read_view_id_body(r)
        if kind is Digest:
            return read_digest_body(r)
        if kind is JoinRsp:
            return read_join_rsp_body(r)
        if kind is MergeId:
            return read_merge_id_body(r)
        if kind is PingData:
            return read_ping_data_body(r)
        if kind is Range:
            return read_range_body(r)
        if kind is PayloadUUID:
            return read_address_body(r, MAGIC_PAYLOAD_UUID, r._pos)
        if kind is AdditionalDataUUID:
            return read_address_body(r, MAGIC_ADDITIONAL_DATA_UUID, r._pos)
        if kind is TopologyUUID:
            return read_address_body(r, MAGIC_TOPOLOGY_UUID, r._pos)
        c = self._by_type.get(kind)
        if c is not None:
            return (<HeaderCodec>c).read(r)
        raise TypeError(f"cannot decode a {kind!r}")

    def encode_address(self, addr):
        """``Util.writeAddress`` (flag byte, then the body)."""
        cdef Writer w = Writer(64)
        write_address(w, addr)
        return w.getvalue()

    def decode_address(self, data):
        cdef Reader r = Reader(data)
        a = read_address(r)
        _expect_end(r)
        return a

    def encode_addresses(self, addrs):
        cdef Writer w = Writer()
        write_addresses(w, addrs)
        return w.getvalue()

    def decode_addresses(self, data):
        cdef Reader r = Reader(data)
        a = read_addresses(r)
        _expect_end(r)
        return a


cdef int _expect_end(Reader r) except -1:
    if r._pos != r._end:
        r.fail(f"{r._end - r._pos} trailing bytes", b"end", r._pos)
    return 0


def _allowed_names(magics):
    return " or ".join(str(MAGIC_CLASSES.get(m, m)) for m in magics)


class Datagram:
    """A decoded datagram: ``version``, ``tp_flags``, the ``messages``, any ``trailing`` bytes and the errors
    of the messages dropped alone (``rejected``: a header under a protocol id that does not carry its class)."""

    __slots__ = ("version", "tp_flags", "messages", "trailing", "rejected")

    def __init__(self, version, tp_flags, messages, trailing=0, rejected=()):
        self.version = version
        self.tp_flags = tp_flags
        self.messages = messages
        self.trailing = trailing
        self.rejected = list(rejected)

    @property
    def is_list(self):
        return bool(self.tp_flags & TP_LIST)

    @property
    def is_multicast(self):
        return bool(self.tp_flags & TP_MULTICAST)

    @property
    def is_oob(self):
        return bool(self.tp_flags & TP_OOB)

    def __repr__(self):
        flags = "|".join(n for bit, n in ((1, "LIST"), (2, "MULTICAST"), (4, "OOB")) if self.tp_flags & bit)
        return (f"Datagram(version={version_string(self.version)}, flags={flags or 0}, "
                f"{len(self.messages)} message(s){', %d trailing bytes' % self.trailing if self.trailing else ''}"
                f"{', %d rejected' % len(self.rejected) if self.rejected else ''})")


# ---------------------------------------------------------------------------------------------
# TCP framing (BasicTCP / TCPConnectionMap)
# ---------------------------------------------------------------------------------------------

def encode_tcp_handshake(IpAddress local_addr):
    """What the connecting side sends first: ``bela``, the version, its IpAddress (no flag byte)."""
    cdef Writer w = Writer(64)
    w.raw(<const unsigned char*>b"bela", 4)
    w.short(_VERSION)
    write_ip_body(w, local_addr)
    return w.getvalue()


def decode_tcp_handshake(data):
    """Parse a handshake; returns ``(version, IpAddress, bytes consumed)``.

    Raises :class:`WireFormatError` on a wrong cookie (Java closes such a connection) and
    :class:`WireFormatError` with field ``truncated`` if more bytes are needed.
    """
    cdef Reader r = Reader(data)
    cookie = r.take(4, b"handshake.cookie")
    if cookie != b"bela":
        raise WireFormatError(f"bad TCP handshake cookie {cookie!r} (expected b'bela')", "handshake.cookie", 0)
    version = r.ushort(b"handshake.version")
    addr = read_ip_body(r)
    return version, addr, r._pos


def frame(bytes datagram):
    """A TCP frame: 4-byte big-endian length, then the datagram bytes."""
    return struct.pack(">i", len(datagram)) + datagram


class TcpFrameDecoder:
    """Incremental splitter of a TCP byte stream into frames (int length + payload).

    ``max_frame`` bounds what a peer can make us allocate; a larger or negative length raises
    :class:`WireFormatError` (the connection should then be closed).
    """

    def __init__(self, int max_frame=64 * 1024 * 1024):
        self._buf = bytearray()
        self.max_frame = max_frame

    def feed(self, data):
        """Add received bytes; returns the list of complete frames (as bytes)."""
        self._buf += data
        frames = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            n = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if n < 0 or n > self.max_frame:
                raise WireFormatError(f"TCP frame length {n} outside 0..{self.max_frame}", "frame.length", pos)
            if len(buf) - pos - 4 < n:
                break
            frames.append(bytes(buf[pos + 4:pos + 4 + n]))
            pos += 4 + n
        if pos:
            del buf[:pos]
        return frames

    @property
    def pending(self):
        return len(self._buf)


# ---------------------------------------------------------------------------------------------
# Message.setObject payloads (Util.objectToByteBuffer / objectFromByteBuffer)
# ---------------------------------------------------------------------------------------------

TAG_NULL = 0
TAG_STREAMABLE = 1
TAG_SERIALIZABLE = 2
TAG_BOOLEAN = 10
TAG_BYTE = 11
TAG_CHAR = 12
TAG_DOUBLE = 13
TAG_FLOAT = 14
TAG_INT = 15
TAG_LONG = 16
TAG_SHORT = 17
TAG_STRING = 18
TAG_BYTEARRAY = 19

JAVA_TYPES = {"null": TAG_NULL, "Boolean": TAG_BOOLEAN, "Byte": TAG_BYTE, "Character": TAG_CHAR,
              "Double": TAG_DOUBLE, "Float": TAG_FLOAT, "Integer": TAG_INT, "Long": TAG_LONG, "Short": TAG_SHORT,
              "String": TAG_STRING, "byte[]": TAG_BYTEARRAY, "Serializable": TAG_SERIALIZABLE,
              "Streamable": TAG_STREAMABLE}
_TAG_TYPES = {v: k for k, v in JAVA_TYPES.items()}
_FIXED = {TAG_BYTE: ">b", TAG_SHORT: ">h", TAG_INT: ">i", TAG_LONG: ">q", TAG_FLOAT: ">f", TAG_DOUBLE: ">d",
          TAG_CHAR: ">H"}


class JavaObject:
    """A value with an explicit Java type for ``Message.setObject`` payloads.

    ``type`` is one of ``JAVA_TYPES`` (``"Long"``, ``"String"``, ``"byte[]"``, ...). For
    ``"Serializable"`` the value is the raw ``ObjectOutputStream`` bytes, for ``"Streamable"`` either a
    decoded jgpy value (View, Digest, Message, ...) or ``(magic_or_classname, body bytes)`` for a class
    jgpy does not know.
    """

    __slots__ = ("type", "value")

    def __init__(self, str type, value):
        if type not in JAVA_TYPES:
            raise ValueError(f"unknown Java type {type!r}; use one of {sorted(JAVA_TYPES)}")
        self.type = type
        self.value = value

    def __eq__(self, other):
        if not isinstance(other, JavaObject):
            return NotImplemented
        if self.type in ("Float", "Double") and self.value != self.value:
            return other.type == self.type and other.value != other.value
        return self.type == other.type and self.value == other.value

    __hash__ = None

    def __repr__(self):
        return f"JavaObject({self.type!r}, {self.value!r})"


_STREAMABLE_MAGICS = None


def _streamable_magics():
    global _STREAMABLE_MAGICS
    if _STREAMABLE_MAGICS is None:
        _STREAMABLE_MAGICS = {Message: MAGIC_MESSAGE, View: MAGIC_VIEW, ViewId: MAGIC_VIEWID,
                              PingData: MAGIC_PINGDATA, JoinRsp: MAGIC_JOINRSP, Digest: MAGIC_DIGEST,
                              UUID: MAGIC_UUID, IpAddress: MAGIC_IPADDRESS}
    return _STREAMABLE_MAGICS


def object_to_buffer(obj):
    """``Util.objectToByteBuffer``: a type tag, then the value.

    Plain values map as Java would box them: None -> null, bool -> Boolean, int -> Integer (Long when it
    does not fit 32 bits), float -> Double, str -> String (Java keeps only the low 8 bits of each
    char: use bytes for anything that is not Latin-1), bytes -> byte[]; jgpy Streamables (View,
    Digest, Message, ...) -> Streamable. Use :class:`JavaObject` to choose the Java type.
    """
    if isinstance(obj, JavaObject):
        return _typed_to_buffer(obj.type, obj.value)
    if obj is None:
        return bytes([TAG_NULL])
    if isinstance(obj, bool):
        return bytes([TAG_BOOLEAN, 1 if obj else 0])
    if isinstance(obj, int):
        return _typed_to_buffer("Integer" if -(1 << 31) <= obj < (1 << 31) else "Long", obj)
    if isinstance(obj, float):
        return _typed_to_buffer("Double", obj)
    if isinstance(obj, str):
        return _typed_to_buffer("String", obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes([TAG_BYTEARRAY]) + bytes(obj)
    return _typed_to_buffer("Streamable", obj)


cdef bytes _typed_to_buffer(str jtype, value):
    cdef int tag = JAVA_TYPES[jtype]
    cdef Writer w
    if tag == TAG_NULL:
        return bytes([TAG_NULL])
    if tag == TAG_BOOLEAN:
        return bytes([TAG_BOOLEAN, 1 if value else 0])
    if tag in _FIXED:
        if tag == TAG_CHAR:
            value = ord(value) if isinstance(value, str) else int(value)
        return bytes([tag]) + struct.pack(_FIXED[tag], value)
    if tag == TAG_STRING:
        units = str(value).encode("utf-16-be", "surrogatepass")
        return bytes([TAG_STRING]) + units[1::2]      # low byte of each UTF-16 unit, as Java does
    if tag == TAG_BYTEARRAY:
        return bytes([TAG_BYTEARRAY]) + bytes(value)
    if tag == TAG_SERIALIZABLE:
        return bytes([TAG_SERIALIZABLE]) + bytes(value)
    # Streamable: writeGenericStreamable
    w = Writer()
    w.byte(TAG_STREAMABLE)
    w.byte(1)
    if isinstance(value, tuple):       # (magic or class name, body) of a class we do not model
        cls, body = value
        if isinstance(cls, int):
            w.boolean(True)
            w.short(cls)
        else:
            w.boolean(False)
            w.utf(cls)
        w.buffer(body, 0, len(body))
        return w.getvalue()
    if type(value) is MergeView:       # MergeView has no magic number: Java writes its class name
        w.boolean(False)
        w.utf("org.jgroups.MergeView")
        write_view_body(w, <View>value)
        return w.getvalue()
    magic = _streamable_magics().get(type(value))
    if magic is None:
        raise TypeError(f"{type(value).__name__} is not a Streamable of the 2.12 dialect; send bytes instead")
    w.boolean(True)
    w.short(magic)
    (<Dialect212>DIALECT).write_streamable_body(w, value)
    return w.getvalue()


def object_from_buffer(data, bint typed=False):
    """``Util.objectFromByteBuffer``: decode a tagged payload.

    Returns plain Python values (``typed=False``) or :class:`JavaObject` (``typed=True``). A Java-
    serialised object (tag 2) comes back as ``JavaObject("Serializable", bytes)`` either way, since
    jgpy does not run Java serialization. Strings are decoded as Latin-1, the inverse of the encoding.
    """
    cdef Reader r
    b = bytes(data)
    if not b:
        raise WireFormatError("empty payload has no type tag", "object.tag", 0)
    cdef int tag = b[0]
    cdef str jtype = _TAG_TYPES.get(tag)
    if jtype is None:
        raise WireFormatError(f"type {tag} is invalid", "object.tag", 0)
    if tag == TAG_NULL:
        value = None
    elif tag == TAG_BOOLEAN:
        if len(b) < 2:
            raise WireFormatError("truncated Boolean", "object.value", 1)
        value = b[1] == 1
    elif tag in _FIXED:
        size = struct.calcsize(_FIXED[tag])
        if len(b) < 1 + size:
            raise WireFormatError(f"truncated {jtype}", "object.value", 1)
        value = struct.unpack_from(_FIXED[tag], b, 1)[0]
        if tag == TAG_CHAR:
            value = chr(value)
    elif tag == TAG_STRING:
        value = b[1:].decode("latin-1")
    elif tag == TAG_BYTEARRAY:
        value = b[1:]
    elif tag == TAG_SERIALIZABLE:
        return JavaObject("Serializable", b[1:])
    else:
        r = Reader(b, 1)
        value = _read_generic_streamable(r)
    return JavaObject(jtype, value) if typed else value


cdef object _read_generic_streamable(Reader r):
    cdef Py_ssize_t at
    if r.ubyte(b"Streamable.present") == 0:
        return None
    if r.boolean(b"Streamable.use_magic"):
        at = r._pos
        magic = r.short(b"Streamable.magic")
        body_at = r._pos
        if magic == MAGIC_MESSAGE:
            m = (<Dialect212>DIALECT).read_whole_message(r)
            m.headers   # materialize: the message outlives nothing but must be fully valid
            return m
        if magic == MAGIC_VIEW:
            return read_view_body(r, False, 0)
        if magic == MAGIC_VIEWID:
            return read_view_id_body(r)
        if magic == MAGIC_DIGEST:
            return read_digest_body(r)
        if magic == MAGIC_JOINRSP:
            return read_join_rsp_body(r)
        if magic == MAGIC_PINGDATA:
            return read_ping_data_body(r)
        if magic == MAGIC_UUID:
            return read_uuid_body(r)
        if magic == MAGIC_IPADDRESS:
            return read_ip_body(r)
        return (magic, r.take(r._end - r._pos, b"Streamable.body"))
    cls = r.utf(b"Streamable.classname")
    if cls == "org.jgroups.MergeView":
        return read_view_body(r, True, 0)
    if cls == "org.jgroups.View":
        return read_view_body(r, False, 0)
    return (cls, r.take(r._end - r._pos, b"Streamable.body"))


# ---------------------------------------------------------------------------------------------
# the dialect instance
# ---------------------------------------------------------------------------------------------

cdef Dialect212 _make_dialect():
    cdef Dialect212 d = Dialect212()
    d._add(TpHeaderCodec(), 56, TpHeader)
    d._add(NakAckHeaderCodec(), 25, NakAckHeader)
    d._add(UnicastHeaderCodec(), 21, UnicastHeader)
    d._add(FragHeaderCodec(), 7, FragHeader)
    d._add(FcHeaderCodec(), 54, FcHeader)
    d._add(PingHeaderCodec(), 13, PingHeader)
    d._add(GmsHeaderCodec(), 24, GmsHeader)
    d._add(Unicast2HeaderCodec(), 73, Unicast2Header)
    d._add(StableHeaderCodec(), 27, StableHeader)
    d._add(FdHeaderCodec(), 3, FdHeader)
    d._add(HeartbeatHeaderCodec(), 61, HeartbeatHeader)
    d._add(FdSockHeaderCodec(), 6, FdSockHeader)
    d._add(VerifyHeaderCodec(), 22, VerifyHeader)
    d._add(SfcHeaderCodec(), 62, SfcHeader)
    d._add(StateHeaderCodec(), 28, StateHeader)
    d._add(StreamingStateHeaderCodec(), 65, StreamingStateHeader)
    d._add(FlushHeaderCodec(), 64, FlushHeader)
    d._add(SequencerHeaderCodec(), 58, SequencerHeader)
    d._add(CompressHeaderCodec(), 53, CompressHeader)
    d._add(CoordAnnouncementCodec(), 69, CoordAnnouncement)
    d._add(RequestCorrelatorHeaderCodec(), 71, RequestCorrelatorHeader)
    d._add(MultiDestinationHeaderCodec(), 72, MultiDestinationHeader)
    for name, magics in HEADER_MAGICS.items():
        for magic in magics:
            d.allow_header(PROTOCOL_IDS[name], magic)
    return d


DIALECT = _make_dialect()
_message_py._object_codec = (object_to_buffer, object_from_buffer)
