"""Just enough Java serialization (``java.io.ObjectOutputStream``/``ObjectInputStream``) for JGroups 2.12.

pbcast.STREAMING_STATE_TRANSFER opens its state socket with a Java object stream: the requester writes
``new ObjectOutputStream(out)``, ``writeObject(String state_id)`` (null for the full state) and
``writeObject(Address local_addr)``; the provider reads both with an ``ObjectInputStream`` and then streams
the raw state. A jgpy member writes the same bytes (:func:`state_request_bytes`) and reads what a Java
member writes (:func:`read_state_request`).

The format is the Java Object Serialization Stream Protocol, version 2 (the default since JDK 1.2):

* stream header ``AC ED 00 05`` (STREAM_MAGIC, STREAM_VERSION)
* a String: ``TC_STRING`` (0x74) + u2 length + modified UTF-8, or ``TC_LONGSTRING`` (0x7C) + u8 length when
  the modified UTF-8 form is longer than 65535 bytes; null is ``TC_NULL`` (0x70)
* an ``org.jgroups.util.UUID`` (``Externalizable``): ``TC_OBJECT`` (0x73), its class descriptor
  ``TC_CLASSDESC`` (0x72) + writeUTF("org.jgroups.util.UUID") + serialVersionUID 3972962439975931228 (s8) +
  flags ``SC_EXTERNALIZABLE|SC_BLOCK_DATA`` (0x0C) + 0 fields (u2: externalizable classes declare none) +
  ``TC_ENDBLOCKDATA`` (0x78, no class annotations) + super class descriptor ``TC_NULL`` (Object is not
  serializable); then ``writeExternal`` in block-data mode: ``TC_BLOCKDATA`` (0x77) + u1 16 + lsb (s8) + msb
  (s8), closed by ``TC_ENDBLOCKDATA``.

Every object and class descriptor takes the next handle (from 0x7E0000); a repeated one is written as
``TC_REFERENCE`` (0x71) + s4 handle, which the reader resolves. The reader handles what Java's writer
produces for strings, enums, arrays, class objects, ``Externalizable`` objects (block data, kept raw) and
``Serializable`` objects (field values; ``writeObject`` extras are read and dropped). The byte layout was
checked against the live JVM (``tests/test_state_transfer.py``).

The reader takes bytes from a stranger (the state socket accepts any connection), so it is bounded: it reads
at most ``max_bytes`` in all (a length or count that the bytes left cannot hold fails before anything is read
or allocated for it), asks the socket for at most :data:`READ_CHUNK` bytes at a time, and objects, arrays and
class descriptors (including super class chains) nest at most :data:`MAX_DEPTH` deep. Java's
``ObjectInputStream`` bounds none of these unless a serial filter says so; what it rejects (negative lengths,
bad type codes) fails here too, as a :class:`JavaSerializationError`.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable

from jgpy._core.address import UUID

STREAM_MAGIC = 0xACED
STREAM_VERSION = 5
STREAM_HEADER = b"\xac\xed\x00\x05"

TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_STRING = 0x74
TC_ARRAY = 0x75
TC_CLASS = 0x76
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
TC_RESET = 0x79
TC_BLOCKDATALONG = 0x7A
TC_EXCEPTION = 0x7B
TC_LONGSTRING = 0x7C
TC_PROXYCLASSDESC = 0x7D
TC_ENUM = 0x7E
BASE_WIRE_HANDLE = 0x7E0000

SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02
SC_EXTERNALIZABLE = 0x04
SC_BLOCK_DATA = 0x08
SC_ENUM = 0x10

UUID_CLASS = "org.jgroups.util.UUID"
UUID_SERIAL_VERSION_UID = 3972962439975931228

#: how deep objects, arrays and class descriptors may nest (a state request is a String and an address: 3)
MAX_DEPTH = 64
#: what an ObjectInput over a socket reads at most in all, unless told otherwise (a state request: a state id
#: and an address, a few hundred bytes; Java's own object streams write strings up to 64 KB in one piece)
DEFAULT_MAX_BYTES = 1 << 20
#: the most an ObjectInput asks its ``read`` function for at once
READ_CHUNK = 64 * 1024


class JavaSerializationError(ValueError):
    """Bytes that are not a Java object stream this module can read (or a value it cannot write)."""


# ---- modified UTF-8 (DataOutput.writeUTF) -------------------------------------------------------------

def modified_utf8(s: str) -> bytes:
    """Java's modified UTF-8: UTF-16 code units, each as 1-3 bytes; U+0000 as ``C0 80``."""
    if s.isascii() and "\x00" not in s:
        return s.encode("ascii")
    units = array("H", s.encode("utf-16-le", "surrogatepass"))
    return "".join(map(chr, units)).encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def decode_modified_utf8(b: bytes) -> str:
    try:
        return (bytes(b).replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
                .encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))
    except UnicodeError as e:
        raise JavaSerializationError(f"malformed modified UTF-8: {e}") from None


# ---- writing -----------------------------------------------------------------------------------------

class ObjectOutput:
    """An ``ObjectOutputStream`` for strings and JGroups UUIDs; :meth:`getvalue` gives the bytes so far."""

    def __init__(self) -> None:
        self.buf = bytearray(STREAM_HEADER)
        self._next_handle = BASE_WIRE_HANDLE
        self._handles: dict = {}              # key -> handle (class descriptors, strings)

    def _assign(self, key=None) -> int:
        h = self._next_handle
        self._next_handle += 1
        if key is not None:
            self._handles[key] = h
        return h

    def _utf(self, s: str) -> None:
        b = modified_utf8(s)
        if len(b) > 0xFFFF:
            raise JavaSerializationError(f"writeUTF: {len(b)} bytes is too long")
        self.buf += struct.pack(">H", len(b)) + b

    def write_null(self) -> None:
        self.buf.append(TC_NULL)

    def write_string(self, s: str | None) -> None:
        """``writeObject(String)`` (None: null). Strings are shared like Java's: by value here, which is
        what Java does for the same String object."""
        if s is None:
            self.write_null()
            return
        ref = self._handles.get(("str", s))
        if ref is not None:
            self.buf += struct.pack(">Bi", TC_REFERENCE, ref)
            return
        b = modified_utf8(s)
        if len(b) <= 0xFFFF:
            self.buf += struct.pack(">BH", TC_STRING, len(b)) + b
        else:
            self.buf += struct.pack(">BQ", TC_LONGSTRING, len(b)) + b
        self._assign(("str", s))

    def _externalizable_desc(self, class_name: str, suid: int) -> None:
        ref = self._handles.get(("desc", class_name))
        if ref is not None:
            self.buf += struct.pack(">Bi", TC_REFERENCE, ref)
            return
        self.buf.append(TC_CLASSDESC)
        self._assign(("desc", class_name))
        self._utf(class_name)
        self.buf += struct.pack(">qBH", suid, SC_EXTERNALIZABLE | SC_BLOCK_DATA, 0)
        self.buf.append(TC_ENDBLOCKDATA)            # no class annotations
        self.buf.append(TC_NULL)                    # super class (java.lang.Object) is not serializable

    def write_block_data(self, data: bytes) -> None:
        n = len(data)
        if n <= 0xFF:
            self.buf += struct.pack(">BB", TC_BLOCKDATA, n)
        else:
            self.buf += struct.pack(">Bi", TC_BLOCKDATALONG, n)
        self.buf += data

    def write_uuid(self, addr: UUID | None) -> None:
        """``writeObject(org.jgroups.util.UUID)`` (None: null); a UUID subclass is written as a plain UUID."""
        if addr is None:
            self.write_null()
            return
        self.buf.append(TC_OBJECT)
        self._externalizable_desc(UUID_CLASS, UUID_SERIAL_VERSION_UID)
        self._assign()
        self.write_block_data(struct.pack(">qq", addr.lsb, addr.msb))      # writeExternal: lsb, msb
        self.buf.append(TC_ENDBLOCKDATA)

    def getvalue(self) -> bytes:
        return bytes(self.buf)


def state_request_bytes(state_id: str | None, local_addr: UUID | None) -> bytes:
    """What a JGroups 2.12 state requester writes on the STREAMING_STATE_TRANSFER socket."""
    out = ObjectOutput()
    out.write_string(state_id)
    out.write_uuid(local_addr)
    return out.getvalue()


# ---- reading -----------------------------------------------------------------------------------------

@dataclass
class ClassDesc:
    name: str
    suid: int
    flags: int
    fields: list = field(default_factory=list)      # [(type code, name, class name or None)]
    super_desc: "ClassDesc | None" = None
    proxy_interfaces: list | None = None


@dataclass
class JavaObject:
    """An object read from a stream: its class and either ``external`` (the raw block data of an
    Externalizable) or ``fields`` (per class, super class first: ``{field name: value}``) and what each class's
    ``writeObject`` wrote after them (``annotations``: a collection's or map's elements)."""

    desc: ClassDesc
    external: bytes | None = None
    fields: dict = field(default_factory=dict)
    #: per class with a ``writeObject`` method: (its block data, the objects it wrote), in stream order
    annotations: dict = field(default_factory=dict)

    @property
    def class_name(self) -> str:
        return self.desc.name


@dataclass
class JavaEnum:
    class_name: str
    constant: str


@dataclass
class JavaArray:
    class_name: str
    values: Any


_PRIM = {"B": (">b", 1), "C": (">H", 2), "D": (">d", 8), "F": (">f", 4), "I": (">i", 4), "J": (">q", 8),
         "S": (">h", 2), "Z": (">?", 1)}


class ObjectInput:
    """An ``ObjectInputStream`` over ``read(n)`` (a function returning up to n bytes, b"" at EOF) that reads at
    most ``max_bytes`` in all. The stream header is read by the constructor, as Java's does."""

    def __init__(self, read: Callable[[int], bytes], max_bytes: int = DEFAULT_MAX_BYTES):
        self._read = read
        self._left = max_bytes            # bytes we may still read
        self._depth = 0
        self._max_depth = 0               # the deepest nesting so far (a remembered descriptor needs as much)
        self._refs_used = 0               # back-references resolved so far
        self._handles: list = []
        header = self._exact(4)
        if header != STREAM_HEADER:
            raise JavaSerializationError(f"not a Java object stream (header {header.hex()}, expected aced0005)")

    @classmethod
    def from_bytes(cls, data: bytes) -> "ObjectInput":
        """An ObjectInput over ``data``: every length and count is checked against the bytes ``data`` has left."""
        return _BytesObjectInput(bytes(data))

    @property
    def remaining(self) -> int:
        """How many more bytes this stream may read (``from_bytes``: the bytes not read yet)."""
        return self._left

    def _check(self, n: int, what: str) -> int:
        """``n`` (a length read from the stream), if the stream may still hold that many bytes."""
        if n < 0:
            raise JavaSerializationError(f"negative {what} {n}")
        if n > self._left:
            raise JavaSerializationError(f"{what} {n} is more than the {self._left} bytes the stream may still hold")
        return n

    def _exact(self, n: int) -> bytes:
        self._check(n, "length")
        parts = []
        left = n
        while left > 0:
            chunk = self._read(min(left, READ_CHUNK))
            if not chunk:
                raise JavaSerializationError(f"end of stream: {left} of {n} bytes missing")
            if len(chunk) > left:
                raise JavaSerializationError(f"the stream returned {len(chunk)} bytes for {left} asked")
            parts.append(chunk)
            left -= len(chunk)
        self._left -= n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _enter(self) -> None:
        """One more level of nesting (an object, array or class descriptor inside another); the deepest so far
        is kept (a remembered descriptor, :data:`_DESC_SPANS`, needs as much)."""
        depth = self._depth
        if depth >= MAX_DEPTH:
            raise JavaSerializationError(f"objects nested more than {MAX_DEPTH} deep")
        self._depth = depth = depth + 1
        if depth > self._max_depth:
            self._max_depth = depth

    def _u1(self) -> int:
        return self._exact(1)[0]

    def _unpack(self, fmt: str, n: int):
        return struct.unpack(fmt, self._exact(n))[0]

    def _utf(self) -> str:
        return decode_modified_utf8(self._exact(self._unpack(">H", 2)))

    def _new_handle(self, obj=None) -> int:
        self._handles.append(obj)
        return len(self._handles) - 1

    def _ref(self) -> Any:
        self._refs_used += 1
        h = self._unpack(">i", 4) - BASE_WIRE_HANDLE
        if not 0 <= h < len(self._handles):
            raise JavaSerializationError(f"reference to unknown handle {h + BASE_WIRE_HANDLE:#x}")
        return self._handles[h]

    # ---- objects

    def read_object(self) -> Any:
        """The next object: None, str, :class:`JavaObject`, :class:`JavaEnum`, :class:`JavaArray`, a
        :class:`ClassDesc` (for a ``Class``) or, for ``org.jgroups.util.UUID`` and subclasses, a jgpy UUID."""
        while True:
            tc = self._u1()
            if tc == TC_RESET:
                if self._depth:           # as Java's handleReset: only between top-level objects
                    raise JavaSerializationError(f"unexpected reset at nesting depth {self._depth}")
                self._handles.clear()
                continue
            return self._content(tc)

    def _content(self, tc: int) -> Any:
        self._enter()
        try:
            return self._content_body(tc)
        finally:
            self._depth -= 1

    def _content_body(self, tc: int) -> Any:
        if tc == TC_OBJECT:                 # the common codes first
            return self._object()
        if tc == TC_ARRAY:
            return self._array()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self._ref()
        if tc == TC_STRING:
            s = decode_modified_utf8(self._exact(self._unpack(">H", 2)))
            self._new_handle(s)
            return s
        if tc == TC_LONGSTRING:
            s = decode_modified_utf8(self._exact(self._check(self._unpack(">q", 8), "string length")))
            self._new_handle(s)
            return s
        if tc in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            return self._class_desc_body(tc)
        if tc == TC_CLASS:
            desc = self._class_desc()
            self._new_handle(desc)
            return desc
        if tc == TC_ENUM:
            desc = self._class_desc()
            h = self._new_handle()
            name = self.read_object()
            e = JavaEnum(desc.name if desc else "?", name)
            self._handles[h] = e
            return e
        if tc == TC_EXCEPTION:
            raise JavaSerializationError("the writer failed while writing (TC_EXCEPTION)")
        if tc in (TC_BLOCKDATA, TC_BLOCKDATALONG):
            raise JavaSerializationError("block data where an object was expected (OptionalDataException)")
        if tc == TC_ENDBLOCKDATA:
            raise JavaSerializationError("TC_ENDBLOCKDATA where an object was expected")
        raise JavaSerializationError(f"invalid type code {tc:#04x}")

    def _class_desc(self) -> ClassDesc | None:
        tc = self._u1()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            d = self._ref()
            if not isinstance(d, ClassDesc):
                raise JavaSerializationError("a reference to a non class descriptor where one was expected")
            return d
        if tc in (TC_CLASSDESC, TC_PROXYCLASSDESC):
            return self._class_desc_body(tc)
        raise JavaSerializationError(f"invalid class descriptor type code {tc:#04x}")

    def _class_desc_body(self, tc: int) -> ClassDesc:
        self._enter()           # a class descriptor nests its super class's
        try:
            return self._class_desc_fields(tc)
        finally:
            self._depth -= 1

    def _class_desc_fields(self, tc: int) -> ClassDesc:
        if tc == TC_PROXYCLASSDESC:
            desc = ClassDesc("<proxy>", 0, SC_SERIALIZABLE)
            self._new_handle(desc)
            count = self._unpack(">i", 4)
            self._check(2 * count, "interface count (2 bytes each at least)")
            desc.proxy_interfaces = [self._utf() for _ in range(count)]
        else:
            name = self._utf()
            desc = ClassDesc(name, 0, 0)
            self._new_handle(desc)
            desc.suid = self._unpack(">q", 8)
            desc.flags = self._u1()
            count = self._unpack(">H", 2)
            self._check(3 * count, "field count (3 bytes each at least)")
            for _ in range(count):
                code = chr(self._u1())
                fname = self._utf()
                cname = None
                if code in "[L":
                    cname = self.read_object()
                elif code not in _PRIM:
                    raise JavaSerializationError(f"invalid field type code {code!r} in {name}")
                desc.fields.append((code, fname, cname))
        self._skip_annotations()
        desc.super_desc = self._class_desc()
        _check_super_chain(desc)
        return desc

    def _skip_annotations(self) -> None:
        """Class annotations / writeObject extras: objects and block data up to TC_ENDBLOCKDATA."""
        self._block_data_until_end(keep=False)

    def _block_data_until_end(self, keep: bool, objects: list | None = None) -> bytes:
        data = bytearray()
        while True:
            tc = self._u1()
            if tc == TC_ENDBLOCKDATA:
                return bytes(data)
            if tc == TC_BLOCKDATA:
                chunk = self._exact(self._u1())
            elif tc == TC_BLOCKDATALONG:
                chunk = self._exact(self._check(self._unpack(">i", 4), "block data length"))
            else:
                obj = self._content(tc)           # an object inside the annotations: kept if asked, else dropped
                if objects is not None:
                    objects.append(obj)
                continue
            if keep:
                data += chunk

    def _array(self) -> JavaArray:
        desc = self._class_desc()
        handles = self._handles
        h = len(handles)
        handles.append(None)
        n = self._check(self._unpack(">i", 4), "array length")   # every element takes a byte at least
        comp = desc.name[1:2] if desc else "L"
        if comp in _PRIM:
            fmt, size = _PRIM[comp]
            raw = self._exact(n * size)
            values: Any = raw if comp == "B" else list(struct.unpack(f">{n}{fmt[1]}", raw))
        else:
            values = [self.read_object() for _ in range(n)]
        arr = JavaArray(desc.name if desc else "?", values)
        self._handles[h] = arr
        return arr

    def _object(self) -> Any:
        desc = self._class_desc()
        if desc is None:
            raise JavaSerializationError("an object without a class descriptor")
        handles = self._handles
        h = len(handles)
        obj = JavaObject(desc)
        handles.append(obj)
        if desc.flags & SC_EXTERNALIZABLE:
            if not desc.flags & SC_BLOCK_DATA:
                raise JavaSerializationError(f"{desc.name}: externalizable data of protocol version 1 cannot be "
                                             "read without the class")
            objects = []
            obj.external = self._block_data_until_end(keep=True, objects=objects)
            if objects:
                obj.annotations[desc.name] = (obj.external, objects)
        else:
            chain = []
            d: ClassDesc | None = desc
            while d is not None:
                chain.append(d)
                d = d.super_desc
            for d in reversed(chain):
                values = {}
                for code, fname, _cname in d.fields:
                    if code in _PRIM:
                        fmt, size = _PRIM[code]
                        values[fname] = self._unpack(fmt, size)
                for code, fname, _cname in d.fields:   # primitives first, then objects (Java's field order)
                    if code not in _PRIM:
                        values[fname] = self.read_object()
                obj.fields[d.name] = values
                if d.flags & SC_WRITE_METHOD:
                    objects: list = []
                    obj.annotations[d.name] = (self._block_data_until_end(keep=True, objects=objects), objects)
        if desc.super_desc is None and desc.name != UUID_CLASS:      # the common case: not an address
            return obj
        result = _to_address(obj)
        if result is not obj:
            self._handles[h] = result
        return result


#: class descriptors read from bytes before: key (name, serialVersionUID, flags, field count as written) ->
#: (the descriptor's bytes, the objects it put in the handle table, the ClassDesc, how deep it nested). Only
#: descriptors without back-references (those would mean something else in another stream), at most
#: _MAX_SPAN bytes each and _MAX_SPANS in all: a stranger's descriptors can fill it, not grow it
_DESC_SPANS: dict[bytes, tuple[bytes, list, ClassDesc, int]] = {}
_MAX_SPANS = 256
_MAX_SPAN = 1024


class _BytesObjectInput(ObjectInput):
    """ObjectInput over bytes in memory: reads are slices (a call's MethodCall is read per request)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0
        super().__init__(self._no_read, len(data))

    @staticmethod
    def _no_read(n: int) -> bytes:
        return b""

    def _consumed(self) -> int:
        return self._pos

    def _content(self, tc: int) -> Any:
        """ObjectInput's (one nesting level more, the deepest kept), without a call for the bookkeeping."""
        depth = self._depth
        if depth >= MAX_DEPTH:
            raise JavaSerializationError(f"objects nested more than {MAX_DEPTH} deep")
        self._depth = depth + 1
        if depth >= self._max_depth:
            self._max_depth = depth + 1
        try:
            return self._content_body(tc)
        finally:
            self._depth = depth

    def read_object(self) -> Any:
        if self._left and self._data[self._pos] != TC_RESET:    # the common case: no reset first
            tc = self._data[self._pos]
            self._pos += 1
            self._left -= 1
            return self._content(tc)
        return super().read_object()

    def _class_desc(self) -> ClassDesc | None:
        """As ObjectInput's, a remembered descriptor (the common case) found without the generic steps."""
        if self._left and self._data[self._pos] == TC_CLASSDESC:
            self._pos += 1
            self._left -= 1
            return self._class_desc_body(TC_CLASSDESC)
        return super()._class_desc()

    def _block_data_until_end(self, keep: bool, objects: list[Any] | None = None) -> bytes:
        """ObjectInput's, with short blocks (what writeExternal writes) taken straight from the bytes."""
        data = self._data
        chunks = []
        while True:
            p = self._pos
            if self._left >= 2 and data[p] == TC_BLOCKDATA and data[p + 1] <= self._left - 2:
                n = data[p + 1]
                self._pos = p + 2 + n
                self._left -= 2 + n
                if keep:
                    chunks.append(data[p + 2:p + 2 + n])
                continue
            tc = self._u1()
            if tc == TC_ENDBLOCKDATA:
                return b"".join(chunks)
            if tc == TC_BLOCKDATA:
                chunk = self._exact(self._u1())
            elif tc == TC_BLOCKDATALONG:
                chunk = self._exact(self._check(self._unpack(">i", 4), "block data length"))
            else:
                obj = self._content(tc)
                if objects is not None:
                    objects.append(obj)
                continue
            if keep:
                chunks.append(chunk)

    def _class_desc_body(self, tc: int) -> ClassDesc:
        """A class descriptor; one read before with the same bytes (and no back-reference inside) is not read
        again: the same ClassDesc and handles are taken from :data:`_DESC_SPANS` (a call's MethodCall repeats
        its descriptors in every request)."""
        if tc != TC_CLASSDESC or self._left < 2:
            return super()._class_desc_body(tc)
        data, p = self._data, self._pos
        klen = 2 + ((data[p] << 8) | data[p + 1]) + 11          # name, serialVersionUID, flags, field count
        key = data[p:p + klen] if klen <= self._left else None
        if key is not None:
            hit = _DESC_SPANS.get(key)
            if hit is not None:
                span, objs, desc, depth = hit
                depth += self._depth
                if depth <= MAX_DEPTH and data.startswith(span, p):
                    if depth > self._max_depth:
                        self._max_depth = depth
                    self._handles.extend(objs)
                    self._pos = p + len(span)
                    self._left -= len(span)
                    return desc
        refs, first_handle, depth0 = self._refs_used, len(self._handles), self._depth
        self._max_depth = depth0
        desc = super()._class_desc_body(tc)
        if (key is not None and self._refs_used == refs and self._pos - p <= _MAX_SPAN
                and len(_DESC_SPANS) < _MAX_SPANS):
            _DESC_SPANS[key] = (data[p:self._pos], self._handles[first_handle:], desc, self._max_depth - depth0)
        return desc

    def _exact(self, n: int) -> bytes:
        if n < 0 or n > self._left:
            self._check(n, "length")
        p = self._pos
        self._pos = p + n
        self._left -= n
        return self._data[p:p + n]

    def _u1(self) -> int:
        if self._left < 1:
            raise JavaSerializationError("end of stream: 1 of 1 bytes missing")
        p = self._pos
        self._pos = p + 1
        self._left -= 1
        return self._data[p]

    def _unpack(self, fmt: str, n: int):
        if n > self._left:
            self._check(n, "length")
        p = self._pos
        self._pos = p + n
        self._left -= n
        return struct.unpack_from(fmt, self._data, p)[0]


def _check_super_chain(desc: ClassDesc) -> None:
    """A class and its super classes: at most :data:`MAX_DEPTH` of them, and no loop. A super class may be a
    back-reference, to a descriptor still being read (its own: a loop) or to one whose chain is long already;
    every walk over the chain (an object's fields, the address check) needs both bounds. Java's reader resolves
    the local classes and fails on such chains too."""
    n = 1
    d = desc.super_desc
    while d is not None:
        n += 1
        if d is desc or n > MAX_DEPTH:
            raise JavaSerializationError(f"the super classes of {desc.name} loop or are more than {MAX_DEPTH}")
        d = d.super_desc


def _to_address(obj: JavaObject) -> Any:
    """A JGroups UUID (or subclass: PayloadUUID, TopologyUUID, ...) as a jgpy UUID (lsb, msb come first)."""
    d: ClassDesc | None = obj.desc
    while d is not None:
        if d.name == UUID_CLASS:
            if obj.external is not None and len(obj.external) >= 16:
                lsb, msb = struct.unpack_from(">qq", obj.external)
                return UUID(msb, lsb)
            return obj
        d = d.super_desc
    return obj


def read_embedded_object(data: bytes) -> tuple[Any, int]:
    """``(object, bytes read)``: the object stream at the start of ``data`` (a stream header, then one object), as
    a ``new ObjectInputStream(in).readObject()`` in the middle of other data reads it (2.12's
    ``Util.objectFromStream`` in a header). Bounded as every reader here: nothing past ``data``, :data:`MAX_DEPTH`
    levels of nesting; what it cannot read raises :class:`JavaSerializationError`."""
    inp = ObjectInput.from_bytes(data)
    obj = inp.read_object()
    return obj, len(data) - inp.remaining


def read_state_request(read: Callable[[int], bytes], max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str | None, Any]:
    """``(state_id, requester address)`` from a STREAMING_STATE_TRANSFER state socket, as the provider's
    ``ObjectInputStream`` reads them; the address is a jgpy UUID for JGroups UUIDs, else a
    :class:`JavaObject`. At most ``max_bytes`` are read."""
    inp = ObjectInput(read, max_bytes)
    state_id = inp.read_object()
    if state_id is not None and not isinstance(state_id, str):
        raise JavaSerializationError(f"the state id is a {type(state_id).__name__}, not a String")
    addr = inp.read_object()
    return state_id, addr


__all__ = ["ClassDesc", "JavaArray", "JavaEnum", "JavaObject", "JavaSerializationError", "ObjectInput",
           "ObjectOutput", "decode_modified_utf8", "modified_utf8", "read_embedded_object", "read_state_request",
           "state_request_bytes"]
