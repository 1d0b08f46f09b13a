"""A dialect spec interpreted in Python: encode, decode and Java's ``size()`` of every header and data class.

The generated Cython (``codegen.py``) is the fast path; this twin reads the same spec field by field at run time,
as aiokafka keeps a pure-Python twin of its C record builder: ``tests/test_dialect_twin.py`` holds the two to the
same bytes, the same accept/reject decisions and the same values on random input. The twin also gives the dialect
its Java sizes (``Dialect212.message_size``/``header_size``: FRAG's estimate, compared with the 2.12 jar by
``tests/test_java_size.py``), which no hot path needs.

Java's ``size()`` is the sum of its fields' sizes by wire type (``Util.size(Address)``, ``Util.size(Collection)``
counts the first element times the count, a string its UTF-16 chars + 2, ...), except where a header class gives
its own table (``HeaderClass.java_size``).
"""

from __future__ import annotations

import importlib
from typing import Any

from jgpy._core.wire import Reader, Writer
from jgpy.errors import UnknownMagicError, WireFormatError

from . import wirespec as ws


def jlen(s: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _class_of(c) -> type:
    module = "headers" if isinstance(c, ws.HeaderClass) else c.module
    return getattr(importlib.import_module(f"jgpy._core.{module}"), c.name)


class Twin:
    """The spec ``spec`` (a module such as :mod:`jgpy._core.spec212`) in Python; ``dialect`` encodes header classes
    registered from Python (their Java size is their encoded length)."""

    def __init__(self, spec, dialect=None):
        self.spec = spec
        self.dialect = dialect
        self.header_specs: dict[type, ws.HeaderClass] = {_class_of(h): h for h in spec.HEADERS}
        self.headers_by_magic: dict[int, ws.HeaderClass] = {h.magic: h for h in spec.HEADERS}
        self.data_specs: dict[type, ws.DataClass] = {_class_of(c): c for c in spec.DATA_CLASSES}
        self.classes: dict[str, type] = {c.name: cls for cls, c in self.data_specs.items()}
        self.classes.update({h.name: cls for cls, h in self.header_specs.items()})
        self.by_name = {c.name: c for c in spec.DATA_CLASSES}
        self.address_magics = {c.magic: c for c in spec.DATA_CLASSES if c.module == "address" and c.magic}

    # ---- encode ----

    def encode_header(self, hdr) -> bytes:
        w = Writer()
        self.write_fields(w, self.header_specs[type(hdr)], hdr)
        return w.getvalue()

    def encode(self, value) -> bytes:
        """The body of a data class value (``writeTo``), or of a header."""
        if type(value) in self.header_specs:
            return self.encode_header(value)
        w = Writer()
        self.write_body(w, self.data_specs[type(value)], value)
        return w.getvalue()

    def write_fields(self, w: Writer, h: ws.HeaderClass, hdr) -> None:
        if h.closed:
            self._check_type(h, hdr.type, None)
        for f in self.present(h, hdr.type if h.types else None):
            self.write(w, f.wire, getattr(hdr, f.name))

    def present(self, h: ws.HeaderClass, type_value) -> list[ws.Field]:
        """The fields on the wire for a header of type ``type_value``."""
        return [f for f in h.all_fields
                if f.when is None or type_value in {h.type_value(t) for t in f.when.types}]

    def write_body(self, w: Writer, c: ws.DataClass, v) -> None:
        if c.name == "IpAddress":
            w.write_byte(0 if v.ip is None else len(v.ip))
            if v.ip is not None:
                w.write_bytes(v.ip)
                if len(v.ip) == 16:
                    w.write_int(v.scope_id or 0)
            w.write_short(v.port)
            self.write(w, ws.OPT_SHORT_BYTES, v.additional_data)
            return
        if c.name == "View" and type(v).__name__ == "MergeView":
            c = self.by_name["MergeView"]
        for f in c.all_fields:
            value = getattr(v, f.name)
            self.write(w, f.wire, value() if callable(value) else value)     # Digest.entries() is a method

    def write(self, w: Writer, t: ws.Wire, v) -> None:
        k = t.kind
        if t in ws.PRIMITIVES:
            {"byte": w.write_byte, "short": w.write_short, "ushort": w.write_short, "int": w.write_int,
             "long": w.write_long, "bool": w.write_bool}[k](v)
        elif k == "utf":
            w.write_utf(v)
        elif k == "string":
            w.write_string(v)
        elif k == "byte_buffer":
            w.write_byte_buffer(v)
        elif k == "short_bytes":
            if not v:
                w.write_short(0)
            elif len(v) > 32767:
                raise WireFormatError(f"{len(v)} bytes do not fit a short length", "short_bytes")
            else:
                w.write_short(len(v))
                w.write_bytes(v)
        elif k == "int_bytes":
            w.write_int(len(v) if v else 0)
            if v:
                w.write_bytes(v)
        elif isinstance(t, ws.OptStruct):
            w.write_bool(v is not None)
            if v is not None:
                for f, x in zip(t.fields, v, strict=True):
                    self.write(w, f.wire, x)
        elif k == "opt_short_bytes":
            w.write_bool(v is not None)
            if v is not None:
                w.write_short(len(v))
                w.write_bytes(v)
        elif k == "address":
            self.write_address(w, v)
        elif k in ("view", "gms_view", "sync_view"):
            merge = type(v).__name__ == "MergeView"
            if k == "gms_view":
                w.write_bool(merge)
            if k == "sync_view":
                w.write_byte(0 if v is None else 2 if merge else 1)
            w.write_bool(v is not None)
            if v is not None:
                if k == "view":
                    w.write_bool(merge)
                self.write_body(w, self.by_name["View"], v)
        elif isinstance(t, ws.Opt):
            w.write_bool(v is not None)
            if v is not None:
                self.write_body(w, t.cls, v)
        elif isinstance(t, ws.Body):
            self.write_body(w, t.cls, v)
        elif isinstance(t, ws.FlaggedView):
            w.write_bool(type(v).__name__ == "MergeView")
            self.write_body(w, self.by_name["View"], v)
        elif isinstance(t, ws.Struct):
            for f, x in zip(t.fields, v, strict=True):
                self.write(w, f.wire, x)
        elif isinstance(t, ws.ListOf):
            self.write_list(w, t, v)
        elif k == "java_object":
            self.write_java_object(w, v)
        elif isinstance(t, ws.Tagged):
            if v is None:
                raise WireFormatError("no value to write (Java cannot write a null one)", t.name)
            tag, body = v
            w.write_string(tag)
            if t.body_wire(tag) is not None:
                self.write(w, t.body_wire(tag), body)
        else:
            raise ValueError(f"no writer for {t!r}")

    def write_list(self, w: Writer, t: ws.ListOf, v) -> None:
        write_count = w.write_short if t.count is ws.SHORT else w.write_int
        if v is None or (t.none == 0 and not v):
            write_count(t.none if v is None else 0)
            return
        limit = 32767 if t.count is ws.SHORT else 0x7FFFFFFF
        if len(v) > limit:
            raise WireFormatError(f"{len(v)} entries do not fit the count of {t.name}", f"{t.name}.count")
        write_count(len(v))
        for x in v:
            self.write(w, t.elem, x)

    def write_address(self, w: Writer, a) -> None:
        if a is None:
            w.write_byte(1)
            return
        c = self.data_specs[type(a)]
        if c.name == "UUID":
            w.write_byte(2)
        elif c.name == "IpAddress":
            w.write_byte(4)
        else:
            w.write_byte(0)
            w.write_short(c.magic)
        self.write_body(w, c, a)

    # ---- decode ----

    def decode_header(self, magic: int, data: bytes, exact: bool = True):
        """A header of class ``magic`` from its body bytes; returns ``(header, bytes read)``."""
        h = self.headers_by_magic.get(magic)
        if h is None:
            raise UnknownMagicError(f"magic number {magic} has no header class in the spec", "header.magic", 0)
        r = Reader(data)
        values: dict[str, Any] = {f.name: f.default for f in h.all_fields}
        type_value = None
        for f in h.all_fields:
            if f.when is not None and type_value not in {h.type_value(t) for t in f.when.types}:
                continue
            values[f.name] = self.read(r, f.wire, 0)
            if f.name == "type":
                type_value = values["type"]
                if h.closed:
                    self._check_type(h, type_value, r.pos - ws.fixed_size(f.wire))
        self._expect_end(r, exact)
        return self.classes[h.name](**values), r.pos

    def decode(self, cls: type, data: bytes, exact: bool = True):
        """A data class body; returns ``(value, bytes read)``."""
        r = Reader(data)
        c = self.data_specs[cls]
        v = self.read_body(r, c, 0, merge=c.name == "MergeView")
        self._expect_end(r, exact)
        return v, r.pos

    @staticmethod
    def _check_type(h: ws.HeaderClass, type_value, offset) -> None:
        """A closed header class's type must be one of its constants (Java's readFrom throws on any other)."""
        if type_value not in h.types.values():
            raise WireFormatError(f"unknown {h.name} type {type_value} (Java's readFrom throws)", f"{h.name}.type",
                                  offset)

    @staticmethod
    def _expect_end(r: Reader, exact: bool) -> None:
        if exact and r.remaining:
            raise WireFormatError(f"{r.remaining} trailing bytes", "end", r.pos)

    def read_body(self, r: Reader, c: ws.DataClass, depth: int, merge: bool = False):
        if c.name == "IpAddress":
            return self.read_ip(r)
        if c.name in ("View", "MergeView"):
            c = self.by_name["MergeView" if merge else "View"]
            if merge and depth > self.spec.MAX_VIEW_DEPTH:
                raise WireFormatError("MergeViews nested too deep", "MergeView.subgroups", r.pos)
        values = {f.name: self.read(r, f.wire, depth) for f in c.all_fields}
        try:
            return self.classes[c.name](**values)
        except (TypeError, ValueError) as e:          # e.g. a digest entry without a member, low > highest
            raise WireFormatError(f"invalid {c.name}: {e}", c.name, r.pos) from None

    def read_ip(self, r: Reader):
        n = r.read_byte("IpAddress.addr_len")
        if n not in (4, 16):
            raise WireFormatError(f"IpAddress length has to be 4 or 16 bytes (was {n})", "IpAddress.addr_len", r.pos)
        ip = r.read_bytes(n)
        scope = None
        if n == 16:
            scope = max(0, r.read_int("IpAddress.scope_id"))
        port = r.read_ushort("IpAddress.port")
        return self.classes["IpAddress"](ip, port, scope, self.read(r, ws.OPT_SHORT_BYTES, 0))

    def read(self, r: Reader, t: ws.Wire, depth: int):
        k = t.kind
        if t in ws.PRIMITIVES:
            return {"byte": r.read_byte, "short": r.read_short, "ushort": r.read_ushort, "int": r.read_int,
                    "long": r.read_long, "bool": r.read_bool}[k](k)
        if k == "utf":
            return r.read_utf(k)
        if k == "string":
            return r.read_string(k)
        if k == "byte_buffer":
            return r.read_byte_buffer(k)
        if k == "short_bytes":
            n = r.read_short(k)
            return r.read_bytes(n, k) if n > 0 else None
        if k == "int_bytes":
            n = r.read_int(k)
            return r.read_bytes(n, k) if n > 0 else None
        if isinstance(t, ws.OptStruct):
            return tuple(self.read(r, f.wire, depth) for f in t.fields) if r.read_bool(k) else None
        if k == "opt_short_bytes":
            if not r.read_bool(k):
                return None
            n = r.read_ushort(k)
            return r.read_bytes(n, k) if n > 0 else None
        if k == "address":
            return self.read_address(r)
        if k == "view":
            if not r.read_bool(k):
                return None
            return self.read_body(r, self.by_name["View"], depth, merge=r.read_bool(k))
        if k in ("gms_view", "sync_view"):
            merge = r.read_bool(k) if k == "gms_view" else r.read_byte(k) == 2
            return self.read_body(r, self.by_name["View"], depth, merge=merge) if r.read_bool(k) else None
        if isinstance(t, ws.Opt):
            if not r.read_bool(k):
                return None
            return self.read_body(r, t.cls, depth)           # a View in an Opt is read as a plain View
        if isinstance(t, ws.Body):
            return self.read_body(r, t.cls, depth)
        if isinstance(t, ws.FlaggedView):
            return self.read_body(r, self.by_name["View"], depth + 1, merge=r.read_bool(k))
        if isinstance(t, ws.Struct):
            return tuple(self.read(r, f.wire, depth) for f in t.fields)
        if isinstance(t, ws.ListOf):
            n = r.read_short(k) if t.count is ws.SHORT else r.read_int(k)
            if n < 0 and t.negative == "fail":
                raise WireFormatError(f"negative count {n}", f"{t.name}.count", r.pos)
            if n < 0 or (n == 0 and t.none == 0):
                return None
            return tuple(self.read(r, t.elem, depth) for _ in range(n))
        if k == "java_object":
            return self.read_java_object(r)
        if isinstance(t, ws.Tagged):
            start = r.pos
            tag = r.read_string(f"{t.name}.class")
            if tag is None or tag in t.rejected:
                raise WireFormatError(f"class {tag} cannot be instantiated", f"{t.name}.class", start)
            body = t.body_wire(tag)
            return tag, (self.read(r, body, depth) if body is not None else None)
        raise ValueError(f"no reader for {t!r}")

    # ---- Util.objectToStream / objectFromStream ----

    _FIXED = {"Byte": (11, "write_byte", "read_byte"), "Short": (17, "write_short", "read_short"),
              "Integer": (15, "write_int", "read_int"), "Long": (16, "write_long", "read_long"),
              "Float": (14, "write_float", "read_float"), "Double": (13, "write_double", "read_double"),
              "Boolean": (10, "write_bool", "read_bool")}

    def write_java_object(self, w: Writer, v) -> None:
        jg = importlib.import_module("jgpy._core.jg212")
        jtype, value = jg.java_type_of(v)
        if jtype in self._FIXED:
            tag, writer, _ = self._FIXED[jtype]
            w.write_byte(tag)
            getattr(w, writer)(value)
        elif jtype == "null":
            w.write_byte(0)
        elif jtype == "Character":
            w.write_byte(12)
            w.write_short(ord(value) if isinstance(value, str) else int(value))
        elif jtype == "String":
            w.write_byte(18)
            w.write_bool(jlen(value) > 32767)
            if jlen(value) > 32767:              # a Java object stream holding the String (TC_STRING)
                w.write_bytes(b"\xac\xed\x00\x05\x74")
            w.write_utf(value)
        elif jtype == "byte[]":
            w.write_byte(19)
            w.write_int(len(value))
            w.write_bytes(bytes(value))
        elif jtype == "Serializable":
            w.write_byte(2)
            w.write_bytes(bytes(value))
        elif value is None:                      # a null Streamable
            w.write_byte(1)
            w.write_byte(0)
        else:                                    # writeGenericStreamable: as objectToByteBuffer writes it
            w.write_bytes(jg.object_to_buffer(jg.JavaObject("Streamable", value)))

    def read_java_object(self, r: Reader):
        jg = importlib.import_module("jgpy._core.jg212")
        start = r.pos
        tag = r.read_byte("object.tag")
        by_tag = {t: (name, reader) for name, (t, _, reader) in self._FIXED.items()}
        if tag == 0:
            return None
        if tag in by_tag:
            name, reader = by_tag[tag]
            return jg.JavaObject(name, getattr(r, reader)("object.value"))
        if tag == 12:
            return jg.JavaObject("Character", chr(r.read_ushort("object.value")))
        if tag == 18:
            if not r.read_bool("object.long_string"):
                return jg.JavaObject("String", r.read_utf("object.value"))
            obj, raw = self.read_embedded(r, jg)
            return jg.JavaObject("String", obj) if isinstance(obj, str) else jg.JavaObject("Serializable", raw)
        if tag == 19:
            return jg.JavaObject("byte[]", r.read_bytes(r.read_int("object.length"), "object.value"))
        if tag == 2:
            return jg.JavaObject("Serializable", self.read_embedded(r, jg)[1])
        if tag == 1:
            return jg.JavaObject("Streamable", self.read_streamable(r))
        raise WireFormatError(f"type {tag} is invalid", "object.tag", start)

    @staticmethod
    def read_embedded(r: Reader, jg) -> tuple[Any, bytes]:
        """An object stream (its header and one object) amid other data: ``(object, its bytes)``."""
        start = r.pos
        reader = jg.embedded_object_reader()
        if reader is None:
            raise WireFormatError("no reader of Java object streams is installed", "object.value", start)
        data = r.peek_rest()
        try:
            obj, n = reader(data)
        except Exception as e:  # noqa: BLE001 - whatever the reader failed on fails the value
            raise WireFormatError(f"not a Java object stream jgpy reads: {e}", "object.value", start) from None
        r.skip_bytes(n, "object.value")
        return obj, data[:n]

    def read_streamable(self, r: Reader):
        """``Util.readGenericStreamable`` amid other data: the classes whose end jgpy knows, no Message."""
        start = r.pos
        if r.read_ubyte("Streamable.present") == 0:
            return None
        if r.read_bool("Streamable.use_magic"):
            magic = r.read_short("Streamable.magic")
            c = next((c for c in self.spec.DATA_CLASSES if c.magic == magic and c.name in self.STREAMABLES), None)
            if c is None:
                raise WireFormatError(f"a Streamable of magic {magic} inside a header: jgpy does not read it",
                                      "Streamable.magic", start)
            return self.read_body(r, c, 0)
        cls = r.read_utf("Streamable.classname")
        if cls not in ("org.jgroups.MergeView", "org.jgroups.View"):
            raise WireFormatError(f"a Streamable of class {cls} inside a header: jgpy does not read it",
                                  "Streamable.classname", start)
        return self.read_body(r, self.by_name["View"], 0, merge=cls == "org.jgroups.MergeView")

    #: the data classes a Streamable inside a header may be (jg212's _read_streamable_in_stream)
    STREAMABLES = ("View", "ViewId", "Digest", "JoinRsp", "PingData", "UUID", "IpAddress")

    def read_address(self, r: Reader):
        flags = r.read_ubyte("Address.flags")
        if flags & 1:
            return None
        if flags & 2:
            return self.read_body(r, self.by_name["UUID"], 0)
        if flags & 4:
            return self.read_ip(r)
        magic = r.read_short("Address.magic")
        c = self.address_magics.get(magic)
        if c is None:
            raise WireFormatError(f"magic {magic} is not an address class", "Address.magic", r.pos)
        return self.read_body(r, c, 0)

    # ---- Java's size() ----

    def message_size(self, msg) -> int:
        """``Message.size()``: flags, addresses, payload and, per header, 4 bytes (id and magic) + its size."""
        n = 2
        if msg.dest is not None:
            n += self.size(ws.ADDRESS, msg.dest)
        if msg.src is not None:
            n += self.size(ws.ADDRESS, msg.src)
        if msg.has_buffer():
            n += 4 + msg.length
        n += 2
        for pid, hdr in msg.headers:
            if pid <= 0:
                break
            n += 4 + self.header_size(hdr)
        return n

    def header_size(self, hdr) -> int:
        """``Header.size()`` (the encoded body length for a header class the spec does not describe)."""
        h = self.header_specs.get(type(hdr))
        if h is None:
            return len(self.dialect.encode_header(hdr))
        type_value = hdr.type if h.types else None
        if h.java_size == "encoded":
            return len(self.encode_header(hdr))
        if isinstance(h.java_size, tuple):
            if_null, otherwise = h.java_size
            return if_null if all(getattr(hdr, f.name) is None for f in h.all_fields) else otherwise
        if h.java_size is not None:
            names = {v: k for k, v in h.types.items()}
            return h.java_size.get(names.get(type_value), h.java_size[None])
        return sum(self.size(f.wire, getattr(hdr, f.name)) for f in self.present(h, type_value))

    def java_size(self, obj) -> int:
        """Java's size of a message, a header, an address (``Util.size``: flag byte included) or a data class."""
        if hasattr(obj, "headers") and hasattr(obj, "has_buffer"):
            return self.message_size(obj)
        if obj is None or type(obj) in self.data_specs and self.data_specs[type(obj)].module == "address":
            return self.size(ws.ADDRESS, obj)
        if type(obj) in self.data_specs:
            return self.body_size(self.data_specs[type(obj)], obj)
        return self.header_size(obj)

    def body_size(self, c: ws.DataClass, v) -> int:
        if c.name == "IpAddress":          # IpAddress.size(): the length byte, port and flag, address, scope
            n = 4 + (len(v.ip) + (4 if len(v.ip) == 16 else 0) if v.ip is not None else 0)
            return n + (len(v.additional_data) + 2 if v.additional_data is not None else 0)
        if c.name == "View" and type(v).__name__ == "MergeView":
            c = self.by_name["MergeView"]
        total = 0
        for f in c.all_fields:
            value = getattr(v, f.name)
            total += self.size(f.wire, value() if callable(value) else value)
        return total

    def size(self, t: ws.Wire, v) -> int:
        k = t.kind
        if t.fixed is not None:
            return t.fixed
        if k == "utf":
            return jlen(v) + 2 if v is not None else 0
        if k == "string":
            return 1 + (jlen(v) + 2 if v is not None else 0)
        if k == "byte_buffer":                 # AdditionalDataUUID.size(): the flag and the bytes, no length
            return 1 + (len(v) if v is not None else 0)
        if k == "short_bytes":
            return 2 + (len(v) if v is not None else 0)
        if k == "opt_short_bytes":
            return 1 + (len(v) + 2 if v is not None else 0)
        if k == "int_bytes":
            return 4 + (len(v) if v is not None else 0)
        if isinstance(t, ws.OptStruct):
            return 1 + (sum(self.size(f.wire, x) for f, x in zip(t.fields, v)) if v is not None else 0)
        if k == "address":      # Util.size(Address): the flag byte and the body (for a UUID, subclasses included,
            if v is None:       # or an IpAddress, though a UUID subclass is written with a magic number)
                return 1
            return 1 + self.body_size(self.data_specs[type(v)], v)
        if k == "view":
            return 1 + (1 + self.body_size(self.by_name["View"], v) if v is not None else 0)
        if k in ("gms_view", "sync_view"):
            return 2 + (self.body_size(self.by_name["View"], v) if v is not None else 0)
        if isinstance(t, ws.Opt):
            return 1 + (self.body_size(t.cls, v) if v is not None else 0)
        if isinstance(t, ws.Body):
            return self.body_size(t.cls, v)
        if isinstance(t, ws.FlaggedView):
            return 1 + self.body_size(self.by_name["View"], v)
        if isinstance(t, ws.Struct):
            return sum(self.size(f.wire, x) for f, x in zip(t.fields, v))
        if isinstance(t, ws.ListOf):
            return self.list_size(t, v)
        raise ValueError(f"no size for {t!r}")

    def list_size(self, t: ws.ListOf, v) -> int:
        n = t.count.fixed
        if not v:
            return n
        rule = t.java_size
        if rule == "first_times_count":
            return n + self.size(t.elem, v[0]) * len(v)
        if rule == "sum":
            return n + sum(self.size(t.elem, x) for x in v)
        if rule == "distinct":                 # a Java HashSet
            return n + sum(self.size(t.elem, x) for x in dict.fromkeys(v))
        key_wire, value_wire = (f.wire for f in t.elem.fields)     # "hash_map": a Java HashMap, null keys count 0
        return n + sum((self.size(key_wire, key) if key is not None else 0) + self.size(value_wire, val)
                       for key, val in dict(v).items())
