"""The vocabulary of a wire-dialect spec: wire types, fields, header classes and data classes.

A dialect spec (``spec212.py`` for JGroups 2.12) describes every header class and data class as plain data
built from the names below: its fields in wire order, each with a wire type (how Java writes it), the type
constants, the Java class and magic number, the protocols that carry it. Two programs read a spec:

* ``codegen.py`` writes the Cython of the header classes (``headers.pxd``/``headers.pyx``) and of the codecs
  (``_codecs212.pxi``, included by ``jg212.pyx``) at build time;
* ``twin.py`` interprets it in Python: encode, decode and Java's ``size()`` (the test oracle of the generated C,
  and the dialect's Java sizes).

This module imports nothing from jgpy, so the build can load it before anything is compiled.

Wire types (``Wire.kind``), with Java's writer:

=================  ====================================================================================
``byte`` ...       ``writeByte``, ``writeShort`` (``short``; ``ushort`` read unsigned), ``writeInt``,
                   ``writeLong``, ``writeBoolean`` (``bool``, any non-zero byte reads as true)
``utf``            ``writeUTF`` (a 2-byte length and modified UTF-8; never null)
``string``         ``Util.writeString``: a presence byte (only 1 means present), then ``writeUTF``
``byte_buffer``    ``Util.writeByteBuffer``: a presence byte, an int length, the bytes
``short_bytes``    a short length, then the bytes (``View``'s payload; length <= 0: none)
``int_bytes``      an int length, then the bytes (mux ``ServiceInfo``'s state; length <= 0: none)
``opt_short_bytes``  a boolean, an unsigned short length, the bytes (an address's ``additional_data``;
                   length 0: none)
``address``        ``Util.writeAddress``: a flag byte (null, UUID, IpAddress, else a magic number)
``opt``            ``Util.writeStreamable``: a boolean, then the body of a data class
``opt_struct``     a boolean, then values in a row, read into a tuple (a nested Streamable jgpy has no class for)
``view``           ``Util.writeView``: a boolean (present), a boolean (MergeView), the body
``gms_view``       GmsHeader's own order: a boolean (MergeView) first, then a boolean (present), the body
``sync_view``      VIEW_SYNC's order: a byte (0 none, 1 View, 2 MergeView; only 2 reads a MergeView), then a boolean
                   (present), the body
``list``           a count (``short`` or ``int``), then that many elements (see :class:`ListOf`)
``flagged_view``   a MergeView subgroup: a boolean (MergeView), then the view body one level deeper
``struct``/``body``  list elements only: values in a row / a data class body without a presence byte
``ip_bytes``       an address length byte (4 or 16), then the address (IpAddress, hand-written)
``tagged``         a class name (``Util.writeString``) that chooses the body after it (``Util.writeAuthToken``:
                   the token's class name, then its ``writeTo``); see :class:`Tagged`
``java_object``    ``Util.objectToStream``: a type byte, then the value (primitives as DataOutput writes them, a
                   String as a boolean and ``writeUTF``, a byte[] with an int length, a Streamable as
                   ``writeGenericStreamable``, anything else as a Java object stream); read into a ``JavaObject``
                   (null: None), hand-written in ``jg212.pyx`` (``read_java_object``/``write_java_object``)
=================  ====================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Wire:
    """How one value is written. ``ctype``/``arg``: the C type of a header field of this wire type and of its
    ``__init__`` argument; ``min_size``: the fewest bytes a valid encoding takes (a count is checked against the
    bytes left times this before anything is read or allocated); ``fixed``: the size when it never varies (a run
    of such fields is skipped in one step)."""

    kind: str
    ctype: str = "object"
    arg: str = ""
    min_size: int = 1
    fixed: int | None = None
    reader: str = ""             # the Reader/Writer method of a primitive
    writer: str = ""

    def __repr__(self) -> str:
        return self.kind.upper()


BYTE = Wire("byte", "int8_t", "int", 1, 1, "byte", "byte")
SHORT = Wire("short", "int16_t", "int", 2, 2, "short", "short")
USHORT = Wire("ushort", "int", "int", 2, 2, "ushort", "short")
INT = Wire("int", "int32_t", "int", 4, 4, "int32", "int32")
LONG = Wire("long", "int64_t", "long long", 8, 8, "int64", "int64")
BOOL = Wire("bool", "bint", "bint", 1, 1, "boolean", "boolean")
UTF = Wire("utf", "str", "str", 2)
STRING = Wire("string", min_size=1)
BYTE_BUFFER = Wire("byte_buffer", min_size=1)
SHORT_BYTES = Wire("short_bytes", min_size=2)
INT_BYTES = Wire("int_bytes", min_size=4)
OPT_SHORT_BYTES = Wire("opt_short_bytes", min_size=1)
ADDRESS = Wire("address", min_size=1)
VIEW = Wire("view", min_size=1)
GMS_VIEW = Wire("gms_view", min_size=2)
SYNC_VIEW = Wire("sync_view", min_size=2)
IP_BYTES = Wire("ip_bytes", min_size=5)
JAVA_OBJECT = Wire("java_object", min_size=1)

PRIMITIVES = (BYTE, SHORT, USHORT, INT, LONG, BOOL)


@dataclass(frozen=True, repr=False)
class Opt(Wire):
    """``Util.writeStreamable(body)``: a boolean, then the body of ``cls`` (``as_plain_view``: a view read back as a
    plain View whatever was written, as ``JoinRsp`` does)."""

    cls: Any = None
    as_plain_view: bool = False

    def __repr__(self) -> str:
        return f"Opt({self.cls.name})"


@dataclass(frozen=True, repr=False)
class Body(Wire):
    """The body of a data class, no presence byte (a list element)."""

    cls: Any = None

    def __repr__(self) -> str:
        return f"Body({self.cls.name})"


@dataclass(frozen=True, repr=False)
class Struct(Wire):
    """Values in a row, read into a tuple (a list element: a map entry, a digest entry)."""

    fields: tuple = ()

    def __repr__(self) -> str:
        return f"Struct({', '.join(f.name for f in self.fields)})"


@dataclass(frozen=True, repr=False)
class OptStruct(Wire):
    """A boolean (present), then values in a row, read into a tuple (None when absent): a nested Streamable
    written as ``writeBoolean(x != null)`` + ``x.writeTo`` that jgpy keeps as a tuple (mux ``ServiceInfo``)."""

    fields: tuple = ()

    def __repr__(self) -> str:
        return f"OptStruct({', '.join(f.name for f in self.fields)})"


@dataclass(frozen=True, repr=False)
class FlaggedView(Wire):
    """A MergeView subgroup: a boolean (MergeView), then the view body one nesting level deeper."""


@dataclass(frozen=True, repr=False)
class ListOf(Wire):
    """A counted list, read into a tuple.

    ``count``: ``SHORT`` or ``INT``. ``none``: the count written for None (``-1``: ``Util.writeAddresses``; ``0``:
    None and empty both write 0 and read back as None). ``negative``: what a negative count read means
    (``"none"`` or ``"fail"``). ``java_size``: how Java's ``size()`` counts it: ``"first_times_count"`` (the count
    plus the first element's size times the count, ``Util.size(Collection)``), ``"sum"`` (the count plus every
    element), ``"distinct"`` (the count plus every distinct element: a Java ``HashSet``), ``"hash_map"`` (the
    count plus every distinct key's entry: a ``HashMap``; a null key counts nothing). ``name``: the generated
    ``read_<name>``/``write_<name>`` functions."""

    elem: Wire | None = None
    count: Wire = SHORT
    none: int = -1
    negative: str = "none"
    java_size: str = "sum"
    name: str = ""

    def __repr__(self) -> str:
        return f"ListOf({self.name})"


def struct(*fields: "Field") -> Struct:
    return Struct("struct", min_size=sum(min_size(f.wire) for f in fields), fields=tuple(fields))


def opt_struct(*fields: "Field") -> OptStruct:
    return OptStruct("opt_struct", min_size=1, fields=tuple(fields))


def opt(cls, as_plain_view: bool = False) -> Opt:
    return Opt("opt", min_size=1, cls=cls, as_plain_view=as_plain_view)


def body(cls) -> Body:
    return Body("body", min_size=cls.min_size(), cls=cls)


def flagged_view(view_cls) -> FlaggedView:
    return FlaggedView("flagged_view", min_size=1 + view_cls.min_size())


def list_of(name: str, elem: Wire, count: Wire = SHORT, none: int = -1, negative: str = "none",
            java_size: str = "sum") -> ListOf:
    assert count in (SHORT, INT) and none in (-1, 0) and negative in ("none", "fail")
    assert java_size in ("first_times_count", "sum", "distinct", "hash_map")
    return ListOf("list", min_size=count.min_size, elem=elem, count=count, none=none, negative=negative,
                  java_size=java_size, name=name)


@dataclass(frozen=True, repr=False)
class Tagged(Wire):
    """A class name, then the body that class writes: read into ``(name, body)``.

    ``cases``: ``((name, wire of the body or None for an empty body), ...)``. A null name and the names in
    ``rejected`` fail (Java cannot instantiate them); any other name reads as ``(name, None)`` with nothing more
    read (Java's ``Util.readAuthToken`` returns null for a class it cannot find and leaves its body unread).
    ``name``: the generated ``read_<name>``/``write_<name>`` functions."""

    cases: tuple = ()
    rejected: tuple = ()
    name: str = ""

    def __repr__(self) -> str:
        return f"Tagged({self.name})"

    def body_wire(self, tag: str) -> "Wire | None":
        return dict(self.cases).get(tag)


def tagged(name: str, cases: dict, rejected: tuple = ()) -> Tagged:
    return Tagged("tagged", min_size=1, cases=tuple(cases.items()), rejected=tuple(rejected), name=name)


@dataclass(frozen=True)
class When:
    """A field that is on the wire only for some values of the header's ``type`` (names of its type constants)."""

    types: tuple[str, ...]


def when(*type_names: str) -> When:
    return When(tuple(type_names))


@dataclass(frozen=True)
class Field:
    """One field, in wire order. ``default``: the ``__init__`` default, and the value a decoded header has when its
    type does not carry the field. ``java_name``: Java's name where it differs (JSON of the interop harness)."""

    name: str
    wire: Wire
    default: Any = None
    when: When | None = None
    java_name: str | None = None
    doc: str = ""

    @property
    def json_name(self) -> str:
        return self.java_name or self.name


F = Field


@dataclass(frozen=True)
class HeaderClass:
    """A header class: fields in wire order, type constants, Java class (``org.jgroups.`` dropped), magic number,
    the protocols that file it under their own id, and Java's ``size()`` where the sum of the fields' sizes is not
    it (``java_size``: ``{type name: size}``, ``None`` for every other type; ``"encoded"``: the encoded length, as
    ``Util.sizeOf(Streamable)`` computes it; ``(n, m)``: n when every field is null, else m).

    ``base``: the header class it extends (its fields come first). ``extra``: Cython source pasted into the class
    (helper constructors), ``extra_stub``: their signatures for the class's type stub. ``closed``: a ``type`` that is
    none of ``types`` fails to read and to write (Java's ``readFrom`` throws on it: a switch's default that throws,
    an enum's ``values()[ordinal]``); otherwise any type value reads, with the fields of the types without a
    condition."""

    name: str
    magic: int
    java: str
    protocols: tuple[str, ...]
    fields: tuple[Field, ...]
    doc: str
    types: dict[str, int] = field(default_factory=dict)
    base: "HeaderClass | None" = None
    java_size: dict | str | tuple | None = None
    extra: str = ""
    extra_stub: str = ""
    closed: bool = False

    @property
    def all_fields(self) -> tuple[Field, ...]:
        return (self.base.all_fields if self.base else ()) + self.fields

    def type_value(self, name: str) -> int:
        if name not in self.types:
            raise ValueError(f"{self.name}: no type constant {name!r}")
        return self.types[name]


@dataclass(frozen=True)
class DataClass:
    """A data class (an address, View, Digest, ...): fields in wire order. ``codec``: ``"generated"``, or
    ``"hand-written"`` (the C is in ``jg212.pyx`` because a rule does not fit a field list; the fields still say
    what is on the wire, for the twin and Java's size). ``c_name``: the generated ``read_<c_name>_body`` and
    ``write_<c_name>_body``; ``module``: the core module that defines the class (``address``, ``types``)."""

    name: str
    c_name: str
    module: str
    java: str
    fields: tuple[Field, ...]
    magic: int | None = None
    base: "DataClass | None" = None
    codec: str = "generated"
    min_bytes: int | None = None       # hand-written codecs: the smallest valid body
    doc: str = ""

    @property
    def all_fields(self) -> tuple[Field, ...]:
        return (self.base.all_fields if self.base else ()) + self.fields

    def min_size(self) -> int:
        if self.min_bytes is not None:
            return self.min_bytes
        return sum(min_size(f.wire) for f in self.all_fields)


@dataclass(frozen=True)
class ForeignClass:
    """A class of the magic map that jgpy does not model (its headers make a message unreadable, as an unknown
    magic does), with the protocols that file it under their id."""

    magic: int
    java: str
    protocols: tuple[str, ...] = ()


def min_size(w: Wire) -> int:
    """The fewest bytes a valid encoding of ``w`` takes."""
    if isinstance(w, Struct):
        return sum(min_size(f.wire) for f in w.fields)
    if isinstance(w, Body):
        return w.cls.min_size()
    return w.min_size


def fixed_size(w: Wire) -> int | None:
    """The encoded size of ``w`` when it never varies, else None."""
    if isinstance(w, Body) and w.cls.codec == "generated":
        sizes = [fixed_size(f.wire) for f in w.cls.all_fields]
        return None if None in sizes or any(f.when for f in w.cls.all_fields) else sum(sizes)
    return w.fixed
