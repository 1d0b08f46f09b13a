# cython: language_level=3
"""The JGroups 2.12 wire dialect: id tables, codecs, transport framing, payload tags.

Everything that knows how a 2.12.2.Final node lays out bytes is reached through this module's :data:`DIALECT`:
protocol ids (``jg-protocol-ids.xml``), magic numbers (``jg-magic-map.xml``), the codecs of addresses, data
classes and headers, the datagram framing (version short, tp_flags, single message or bundled list), TCP framing
with the ``bela`` handshake, the ``Message.setObject`` payload tags and Java's ``size()``. Another dialect (a
later JGroups) would be a sibling module with the same interface; protocol code never imports this one: the
stack hands protocols ``stack.dialect``.

The header classes and data classes are described as data in :mod:`jgpy._core.spec212`; their codecs are
generated from it at build time (``codegen.py`` writes ``_codecs212.pxi``, included below). What is written here
by hand: the rules that do not fit a field list (address flags and magic numbers, IpAddress, View/MergeView with
their nesting bound, Digest), messages, datagrams, TCP and ``setObject``.

Decoding mirrors Java's ``readFrom`` methods, including what they reject (a digest entry with
low > highest_delivered, an IpAddress of length 0, a negative count): a :class:`WireFormatError`
names the field and offset. Nothing is allocated from a length or count before checking that the bytes
left can hold it, and the one nesting on the wire (MergeView subgroups) is bounded by
:data:`MAX_VIEW_DEPTH`. Where jgpy is stricter than Java on purpose (that bound, a header filed under a
protocol id that does not use its class: see :data:`HEADER_MAGICS`), the code says so.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_SIZE
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t
from libc.string cimport memset

from jgpy._core.wire cimport Reader, Writer, new_wire_error, mutf8_decode
from jgpy._core.address cimport Address, UUID, PayloadUUID, AdditionalDataUUID, TopologyUUID, IpAddress
from jgpy._core.types cimport ViewId, View, MergeView, Digest, JoinRsp, MergeId, PingData, Range
from jgpy._core.message cimport Message, WireDialect, new_message

import struct

from jgpy.errors import WireFormatError, IncompatibleVersionError, UnknownMagicError, version_string
from jgpy._core import message as _message_py
from jgpy._core import spec212 as SPEC


NAME = SPEC.NAME

# ---------------------------------------------------------------------------------------------
# versions and transport flags (Version.java, TP.java)
# ---------------------------------------------------------------------------------------------

VERSION = SPEC.VERSION               # 2.12.2: (2 << 11) + (12 << 6) + 2
cdef int _VERSION = VERSION
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

#: protocol id by the name used in XML stack configs (org.jgroups.protocols. prefix dropped); grows with
#: register_protocol_id
PROTOCOL_IDS = dict(SPEC.PROTOCOL_IDS)
PROTOCOL_NAMES = {v: k for k, v in PROTOCOL_IDS.items()}

#: class key (org.jgroups. prefix dropped, java.util kept) by magic number
MAGIC_CLASSES = SPEC.magic_classes()
MAGIC_NUMBERS = {v: k for k, v in MAGIC_CLASSES.items()}

cdef int MAGIC_IPADDRESS = SPEC.IP_ADDRESS.magic
cdef int MAGIC_MESSAGE = MAGIC_NUMBERS["Message"]
cdef int MAGIC_VIEW = SPEC.VIEW_CLS.magic
cdef int MAGIC_VIEWID = SPEC.VIEW_ID.magic
cdef int MAGIC_PINGDATA = SPEC.PING_DATA.magic
cdef int MAGIC_JOINRSP = SPEC.JOIN_RSP.magic
cdef int MAGIC_DIGEST = SPEC.DIGEST.magic
cdef int MAGIC_UUID = SPEC.UUID.magic
cdef int MAGIC_PAYLOAD_UUID = SPEC.PAYLOAD_UUID.magic
cdef int MAGIC_ADDITIONAL_DATA_UUID = SPEC.ADDITIONAL_DATA_UUID.magic
cdef int MAGIC_TOPOLOGY_UUID = SPEC.TOPOLOGY_UUID.magic

#: The header class(es) each 2.12 protocol puts under its own id (``msg.putHeader(this.id, ...)`` in the
#: 2.12.2.Final sources), by protocol name. A received header of another class under one of these ids is
#: malformed: Java would decode it and fail later with a ClassCastException in that protocol; jgpy drops the
#: message (alone) as it decodes it, so no protocol ever sees a header of a class it does not expect. Ids not
#: listed here (custom protocols, ids whose 2.12 header class has no magic) are not checked; pairs can be added
#: with :func:`register_protocol_id` and ``Dialect212.register_header(..., protocol_ids=...)``.
HEADER_MAGICS = SPEC.header_magics()

#: How many levels of MergeView subgroups may nest on the wire (see spec212.MAX_VIEW_DEPTH: 2.12 bounds nothing)
MAX_VIEW_DEPTH = SPEC.MAX_VIEW_DEPTH
cdef int _MAX_VIEW_DEPTH = MAX_VIEW_DEPTH


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

# ---- value primitives the generated codecs use ----

cdef inline object _read_opt_short_bytes(Reader r, const char* field):
    """A boolean, an unsigned short length, the bytes (an address's additional_data; length 0: None)."""
    cdef uint16_t n
    if not r.boolean(field):
        return None
    n = r.ushort(field)
    return r.take(n, field) if n > 0 else None


cdef inline int _write_opt_short_bytes(Writer w, object b) except -1:
    if b is None:
        return w.byte(0)
    w.byte(1)
    w.short(len(b))
    return w.buffer(b, 0, len(b))


cdef inline object _read_short_bytes(Reader r, const char* field):
    """A short length, then the bytes (a View's payload; a length <= 0: None)."""
    cdef int16_t n = r.short(field)
    return r.take(n, field) if n > 0 else None


cdef inline int _write_short_bytes(Writer w, object b, const char* field) except -1:
    if not b:
        return w.short(0)
    if len(b) > 32767:
        raise WireFormatError(f"{len(b)} bytes do not fit a short length (Java would ignore them)",
                              field.decode())
    w.short(len(b))
    return w.buffer(b, 0, len(b))


cdef inline object _read_int_bytes(Reader r, const char* field):
    """An int length, then the bytes (mux ServiceInfo's state; a length <= 0: None); checked against the bytes left
    before anything is taken."""
    cdef int32_t n = r.int32(field)
    return r.take(n, field) if n > 0 else None


cdef inline int _write_int_bytes(Writer w, object b) except -1:
    if not b:
        return w.int32(0)
    w.int32(len(b))
    return w.buffer(b, 0, len(b))


cdef inline int _skip_utf(Reader r, const char* field) except -1:
    """Move past a writeUTF string, validating it as reading would (only a non-ASCII one is decoded)."""
    cdef Py_ssize_t start = r._pos
    cdef uint16_t n = r.ushort(field)
    cdef Py_ssize_t i
    r.skip(n, field)
    for i in range(start + 2, start + 2 + n):
        if r._data[i] >= 0x80:   # not plain ASCII: validate the modified UTF-8 properly
            mutf8_decode(r._data + start + 2, n, start + 2, field)
            break
    return 0


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
    if magic == MAGIC_UUID:
        return read_uuid_body(r)
    if magic == MAGIC_IPADDRESS:
        return read_ip_body(r)
    if magic == MAGIC_PAYLOAD_UUID:
        return read_payload_uuid_body(r)
    if magic == MAGIC_ADDITIONAL_DATA_UUID:
        return read_additional_data_uuid_body(r)
    if magic == MAGIC_TOPOLOGY_UUID:
        return read_topology_uuid_body(r)
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
        return write_payload_uuid_body(w, <PayloadUUID>a)
    if t is AdditionalDataUUID:
        w.short(MAGIC_ADDITIONAL_DATA_UUID)
        return write_additional_data_uuid_body(w, <AdditionalDataUUID>a)
    if t is TopologyUUID:
        w.short(MAGIC_TOPOLOGY_UUID)
        return write_topology_uuid_body(w, <TopologyUUID>a)
    raise TypeError(f"{t.__name__} is not an address type of the 2.12 dialect")


# ---------------------------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------------------------

cdef int read_view_into(Reader r, View v) except -1:
    v.vid = read_view_id_body(r) if r.boolean(b"View.vid") else None
    v.members = read_addresses(r)
    v.payload = _read_short_bytes(r, b"View.payload")      # a Java-serialised Map<String,Object>; kept opaque
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
        r.need(<Py_ssize_t>n * MIN_SUBGROUPS_ENTRY, b"MergeView.subgroups")
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
    _write_short_bytes(w, v.payload, b"View.payload")
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


cdef object read_flag_first_view(Reader r, const char* field):   # GmsHeader: the MergeView flag comes first
    cdef bint merge = r.boolean(field)
    return read_view_body(r, merge, 0) if r.boolean(field) else None


cdef int write_flag_first_view(Writer w, object v) except -1:
    w.boolean(isinstance(v, MergeView))
    if v is None:
        return w.byte(0)
    w.byte(1)
    return write_view_body(w, <View?>v)


cdef object read_kind_first_view(Reader r, const char* field):   # ViewSyncHeader: 0 none, 1 View, 2 MergeView
    cdef bint merge = r.byte(field) == 2                            # then Util.writeStreamable(view)
    return read_view_body(r, merge, 0) if r.boolean(field) else None


cdef int write_kind_first_view(Writer w, object v) except -1:
    if v is None:
        w.byte(0)
        return w.byte(0)
    w.byte(2 if isinstance(v, MergeView) else 1)
    w.byte(1)
    return write_view_body(w, <View?>v)


cdef Digest read_digest_body(Reader r):
    cdef Py_ssize_t start = r._pos, at
    cdef int16_t n = r.short(b"Digest.count")
    cdef Digest d = Digest.__new__(Digest)
    cdef int64_t low, hd, hr
    cdef int i
    d._entries = {}
    if n < 0:
        r.fail(f"negative digest size {n}", b"Digest.count", start)
    r.need(<Py_ssize_t>n * MIN_DIGEST_ENTRIES_ENTRY, b"Digest.entries")
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
    cdef object _twin             # the spec interpreted in Python (Java sizes), made on first use

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

    # ---- a message as a value (Util.objectToByteBuffer / objectFromByteBuffer: SEQUENCER) ----

    cdef bytes marshal_message(self, Message m):
        cdef Writer w = Writer()
        w.byte(1)                               # TAG_STREAMABLE
        w.byte(1)                               # present
        w.boolean(True)                         # a magic number follows
        w.short(MAGIC_MESSAGE)
        self.write_message(w, m, False, None)
        return w.getvalue()

    cdef Message unmarshal_message(self, object buf, Py_ssize_t off, Py_ssize_t end):
        cdef Reader r = Reader(buf, off, end)
        if r.ubyte(b"object.tag") != 1:         # TAG_STREAMABLE
            r.fail("not a Streamable", b"object.tag", off)
        if r.ubyte(b"Streamable.present") != 1 or not r.boolean(b"Streamable.use_magic"):
            r.fail("not a Message (no magic number)", b"Streamable.use_magic", off + 1)
        if r.short(b"Streamable.magic") != MAGIC_MESSAGE:
            r.fail("not a Message", b"Streamable.magic", off + 3)
        return self.read_whole_message(r)

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

    # ---- what protocols reach through stack.dialect (everything that depends on the JGroups version) ----

    @property
    def spec(self):
        """The dialect as data (:mod:`jgpy._core.spec212`)."""
        return SPEC

    def header_spec(self, hdr_or_type):
        """The spec entry (:class:`~jgpy._core.wirespec.HeaderClass`) of a header class, None for one registered
        from Python."""
        t = hdr_or_type if isinstance(hdr_or_type, type) else type(hdr_or_type)
        return _twin_of(self).header_specs.get(t)

    def protocol_id(self, str name):
        """The protocol id of a protocol as named in XML configs (``"pbcast.NAKACK"`` -> 15)."""
        return protocol_id(name)

    def object_to_buffer(self, obj, str java_type=None):
        """``Message.setObject``'s bytes of ``obj`` (:func:`object_to_buffer`); ``java_type`` (``"Long"``,
        ``"Integer"``, ...) picks the Java type, as :class:`JavaObject` does."""
        return object_to_buffer(obj if java_type is None else JavaObject(java_type, obj))

    def object_from_buffer(self, data, bint typed=False):
        """The value of a ``setObject`` payload (:func:`object_from_buffer`); with ``typed`` a
        :class:`JavaObject` whose ``type`` names the Java type."""
        return object_from_buffer(data, typed)

    def message_size(self, Message msg):
        """Java's ``Message.size()``: the estimate FRAG compares with ``frag_size`` (not the encoded length)."""
        return _twin_of(self).message_size(msg)

    def header_size(self, hdr):
        """Java's ``Header.size()`` (the encoded body length for a header class registered from Python)."""
        return _twin_of(self).header_size(hdr)

    def java_size(self, obj):
        """Java's size of a message, a header, an address (``Util.size(Address)``: with its flag byte) or the
        body of a data class."""
        return _twin_of(self).java_size(obj)

    @property
    def tcp_cookie(self):
        """The first bytes of a TCP connection (``bela``)."""
        return TCP_COOKIE

    def encode_tcp_handshake(self, IpAddress local_addr):
        return encode_tcp_handshake(local_addr)

    def decode_tcp_handshake(self, data):
        return decode_tcp_handshake(data)

    def tcp_handshake_need(self, buf):
        return tcp_handshake_need(buf)

    def is_binary_compatible(self, int version):
        return is_binary_compatible(version)

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
        if t is PayloadUUID:        # UUID subclasses: the body without flag and magic
            return write_payload_uuid_body(w, <PayloadUUID>obj)
        if t is AdditionalDataUUID:
            return write_additional_data_uuid_body(w, <AdditionalDataUUID>obj)
        if t is TopologyUUID:
            return write_topology_uuid_body(w, <TopologyUUID>obj)
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
            return read_payload_uuid_body(r)
        if kind is AdditionalDataUUID:
            return read_additional_data_uuid_body(r)
        if kind is TopologyUUID:
            return read_topology_uuid_body(r)
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

    def write_address_to(self, Writer w, addr):
        """``Util.writeAddress`` into ``w`` (for Streamables whose body a protocol writes itself)."""
        write_address(w, addr)

    def read_address_from(self, Reader r):
        """``Util.readAddress`` from ``r`` at its position (``r`` moves past it)."""
        return read_address(r)

    def encode_addresses(self, addrs):
        cdef Writer w = Writer()
        write_addresses(w, addrs)
        return w.getvalue()

    def decode_addresses(self, data):
        cdef Reader r = Reader(data)
        a = read_addresses(r)
        _expect_end(r)
        return a


cdef object _twin_of(Dialect212 d):
    if d._twin is None:
        from jgpy._core.twin import Twin
        d._twin = Twin(SPEC, d)
    return d._twin


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


cdef int _HANDSHAKE_HEAD = 7      # cookie and version, then the IpAddress length byte


def tcp_handshake_need(buf):
    """``(bytes, whole)``: how long the ``bela`` handshake at the start of ``buf`` is as far as these bytes tell,
    and whether that is all of it. Raises WireFormatError as soon as the bytes cannot be a handshake (cookie,
    address length)."""
    n = len(buf)
    if bytes(buf[:4]) != TCP_COOKIE[:min(n, 4)]:
        raise WireFormatError(f"bad handshake cookie {bytes(buf[:4])!r} (not a JGroups TCP peer?)",
                              "handshake.cookie", 0)
    if n < _HANDSHAKE_HEAD:
        return _HANDSHAKE_HEAD, False
    addr_len = buf[6]
    if addr_len not in (4, 16):
        raise WireFormatError(f"IpAddress length has to be 4 or 16 bytes (was {addr_len})", "handshake.addr_len", 6)
    need = _HANDSHAKE_HEAD + addr_len + (4 if addr_len == 16 else 0) + 2 + 1     # address, scope, port, flag
    if n < need:
        return need, False
    if not buf[need - 1]:
        return need, True
    if n < need + 2:                                            # additional data: short length + bytes
        return need + 2, False
    return need + 2 + int.from_bytes(buf[need:need + 2], "big"), True


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


cpdef bytes object_to_buffer(obj):
    """``Util.objectToByteBuffer``: a type tag, then the value.

    Plain values map as Java would box them: None -> null, bool -> Boolean, int -> Integer (Long when it
    does not fit 32 bits), float -> Double, str -> String (Java keeps only the low 8 bits of each
    char: use bytes for anything that is not Latin-1), bytes -> byte[]; jgpy Streamables (View,
    Digest, Message, ...) -> Streamable. Use :class:`JavaObject` to choose the Java type.
    """
    if type(obj) is bytes:                       # (the common case, e.g. an RPC's byte[] answer)
        return _BYTEARRAY_TAG + <bytes>obj
    jtype, value = java_type_of(obj)
    return _typed_to_buffer(jtype, value)


cdef bytes _BYTEARRAY_TAG = bytes([TAG_BYTEARRAY])


cpdef tuple java_type_of(obj):
    """``(Java type, value)``: a :class:`JavaObject`'s, or a plain value boxed as Java would box it."""
    if isinstance(obj, JavaObject):
        return obj.type, obj.value
    if obj is None:
        return "null", None
    if isinstance(obj, bool):
        return "Boolean", obj
    if isinstance(obj, int):
        return ("Integer" if -(1 << 31) <= obj < (1 << 31) else "Long"), obj
    if isinstance(obj, float):
        return "Double", obj
    if isinstance(obj, str):
        return "String", obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return "byte[]", obj
    return "Streamable", obj


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
        value = _read_streamable(r, False)
    return JavaObject(jtype, value) if typed else value


cdef object _read_streamable(Reader r, bint in_stream):
    """``Util.readGenericStreamable``: the classes jgpy knows by magic number (View, ViewId, Digest, JoinRsp,
    PingData, UUID, IpAddress) or by name (View, MergeView). ``in_stream`` (amid other data: a PullHeader's
    value): anything else is an error, a Message too (it would nest headers in headers without a bound); else
    (the rest of a buffer is the object) a Message is read whole and any other class comes back as ``(its magic
    number or class name, the bytes that remain)``."""
    cdef Py_ssize_t start = r._pos
    if r.ubyte(b"Streamable.present") == 0:
        return None
    if r.boolean(b"Streamable.use_magic"):
        magic = r.short(b"Streamable.magic")
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
        if in_stream:
            r.fail(f"a Streamable of magic {magic} inside a header: jgpy does not read it", b"Streamable.magic",
                   start)
        if magic == MAGIC_MESSAGE:
            m = (<Dialect212>DIALECT).read_whole_message(r)
            m.headers   # materialize: the message outlives nothing but must be fully valid
            return m
        return (magic, r.take(r._end - r._pos, b"Streamable.body"))
    cls = r.utf(b"Streamable.classname")
    if cls == "org.jgroups.MergeView":
        return read_view_body(r, True, 0)
    if cls == "org.jgroups.View":
        return read_view_body(r, False, 0)
    if in_stream:
        r.fail(f"a Streamable of class {cls} inside a header: jgpy does not read it", b"Streamable.classname",
               start)
    return (cls, r.take(r._end - r._pos, b"Streamable.body"))


# ---------------------------------------------------------------------------------------------
# Util.objectToStream / Util.objectFromStream: a value inside a header (PullPushAdapter's PullHeader)
# ---------------------------------------------------------------------------------------------

#: ``reader(data) -> (object, bytes read)``: the Java object stream at the start of ``data``; jgpy installs
#: jgpy.javaser.read_embedded_object (bounded in nesting and length) when it is imported: the core imports nothing
#: above it, so it reads Java serialization through this hook only
cdef object _embedded_object_reader = None


def set_embedded_object_reader(reader):
    """Install the reader of Java object streams embedded in headers (``reader(data) -> (object, bytes read)``)."""
    global _embedded_object_reader
    _embedded_object_reader = reader


def embedded_object_reader():
    """The installed reader of Java object streams (None: none yet)."""
    return _embedded_object_reader


cdef tuple _read_embedded_stream(Reader r, const char* field):
    """``(object, its bytes)``: the object stream (header and one object) at the reader's position."""
    cdef Py_ssize_t start = r._pos
    if _embedded_object_reader is None:
        r.fail("no reader of Java object streams is installed", field, start)
    data = PyBytes_FromStringAndSize(<const char*>r._data + start, r._end - start)
    try:
        obj, n = _embedded_object_reader(data)
    except Exception as e:       # JavaSerializationError, or anything else the reader failed on: the datagram's
        r.fail(f"not a Java object stream jgpy reads: {e}", field, start)     # error, never the receive thread's
    if not 0 < n <= len(data):
        r.fail(f"the object stream reader claims {n} bytes", field, start)
    r.skip(n, field)
    return obj, data[:n]


cdef object read_java_object(Reader r):
    """``Util.objectFromStream``: a type tag, then the value, read into a :class:`JavaObject` (None for null)."""
    cdef Py_ssize_t start = r._pos
    cdef int tag = r.byte(b"object.tag")
    cdef int32_t n
    if tag == TAG_NULL:
        return None
    if tag == TAG_BOOLEAN:
        return JavaObject("Boolean", r.boolean(b"object.value"))
    if tag == TAG_BYTE:
        return JavaObject("Byte", r.byte(b"object.value"))
    if tag == TAG_CHAR:
        return JavaObject("Character", chr(r.ushort(b"object.value")))
    if tag == TAG_DOUBLE:
        return JavaObject("Double", r.float64(b"object.value"))
    if tag == TAG_FLOAT:
        return JavaObject("Float", r.float32(b"object.value"))
    if tag == TAG_INT:
        return JavaObject("Integer", r.int32(b"object.value"))
    if tag == TAG_LONG:
        return JavaObject("Long", r.int64(b"object.value"))
    if tag == TAG_SHORT:
        return JavaObject("Short", r.short(b"object.value"))
    if tag == TAG_STRING:
        if not r.boolean(b"object.long_string"):
            return JavaObject("String", r.utf(b"object.value"))
        obj, raw = _read_embedded_stream(r, b"object.value")     # longer than Short.MAX_VALUE chars: serialized
        return JavaObject("String", obj) if isinstance(obj, str) else JavaObject("Serializable", raw)
    if tag == TAG_BYTEARRAY:
        n = r.int32(b"object.length")
        return JavaObject("byte[]", r.take(n, b"object.value"))
    if tag == TAG_SERIALIZABLE:
        return JavaObject("Serializable", _read_embedded_stream(r, b"object.value")[1])
    if tag == TAG_STREAMABLE:
        return JavaObject("Streamable", _read_streamable(r, True))
    r.fail(f"type {tag} is invalid", b"object.tag", start)


cdef int write_java_object(Writer w, object v) except -1:
    """``Util.objectToStream``: plain values boxed as :func:`object_to_buffer` boxes them."""
    cdef bytes b
    jtype, value = java_type_of(v)
    if jtype == "String":
        s = str(value)
        if len(s.encode("utf-16-le", "surrogatepass")) // 2 <= 32767:
            w.byte(TAG_STRING)
            w.boolean(False)
            return w.utf(s)
        w.byte(TAG_STRING)              # a long one: an object stream holding the String (TC_STRING only)
        w.boolean(True)
        w.raw(<const unsigned char*>b"\xac\xed\x00\x05\x74", 5)
        return w.utf(s)
    if jtype == "byte[]":
        b = bytes(value)
        w.byte(TAG_BYTEARRAY)
        w.int32(len(b))
        return w.buffer(b, 0, len(b))
    if jtype == "Serializable":
        w.byte(TAG_SERIALIZABLE)
        b = bytes(value)
        return w.buffer(b, 0, len(b))
    if jtype == "Streamable" and value is None:      # (objectToStream writes null as TYPE_NULL; this reads back)
        w.byte(TAG_STREAMABLE)
        return w.byte(0)
    b = _typed_to_buffer(jtype, value)     # the tag, then the value: the same bytes as objectToByteBuffer's
    return w.buffer(b, 0, len(b))


# ---------------------------------------------------------------------------------------------
# the dialect instance
# ---------------------------------------------------------------------------------------------

# The generated codecs of spec212.py (jgpy/_core/codegen.py): lists, data class bodies, one HeaderCodec per header
# class, the smallest encodings the count checks use. (Module-level cdef functions may be used above their
# definition. Where the include goes moves the hot paths' machine code: here, after the dialect object, the
# datagram decode measured as fast as the hand-written codecs did; in front of it, 3-5 % slower.)
include "_codecs212.pxi"


cdef Dialect212 _make_dialect():
    cdef Dialect212 d = Dialect212()
    _add_spec_headers(d)
    for name, magics in HEADER_MAGICS.items():
        for magic in magics:
            d.allow_header(PROTOCOL_IDS[name], magic)
    return d


def _check_spec():
    """The spec this core was generated from must be the one next to it (else a table would not match a codec)."""
    from jgpy._core.codegen import spec_digest
    if spec_digest() != SPEC_DIGEST:
        raise ImportError("jgpy/_core/spec212.py (or wirespec.py) changed since the Cython core was generated from it: "
                          "rebuild (make build, or python setup.py build_ext --inplace)")


_check_spec()
DIALECT = _make_dialect()
_message_py._object_codec = (object_to_buffer, object_from_buffer)
