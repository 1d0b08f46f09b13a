"""A MethodCall read straight from its bytes, for the shapes remote calls send (the server's per-request work).

:func:`jgpy.blocks.methodcall.decode_method_call` tries :func:`fast_method_call` first. It knows one layout, the
one ``MethodCall.writeExternal`` gives (block data, the ``Object[]`` of arguments, the mode, the ``Class[]`` or
``String[]`` of types, the declaring ``Class``), with arguments that are null, String, ``byte[]`` or a boxed
Integer, Long, Boolean or Double (and back-references to those). For anything else (another type code or class,
a descriptor of another layout, a nested array, bytes that end early, text that is not modified UTF-8) it
returns None and the general reader (:class:`jgpy.javaser.ObjectInput`) reads the stream from its start and gives
its value or its error. It gives what the general reader gives for every stream it accepts, handles numbered as
there (``tests/test_javaser_fast.py`` compares both on valid and damaged streams); it reads nothing past the
bytes given and allocates nothing a length claims beyond them; descriptor super chains are cut at
:data:`MAX_SUPER_CHAIN`.
"""

from __future__ import annotations

import struct
from typing import Any

from jgpy.javaser import (BASE_WIRE_HANDLE, MAX_DEPTH, SC_BLOCK_DATA, SC_EXTERNALIZABLE, STREAM_HEADER, TC_ARRAY, TC_BLOCKDATA,
                          TC_CLASS, TC_CLASSDESC, TC_ENDBLOCKDATA, TC_NULL, TC_OBJECT, TC_REFERENCE, TC_STRING,
                          JavaSerializationError, decode_modified_utf8)
from jgpy.javaser_write import BOXED_SUBCLASSES

#: how long a descriptor's super class chain may be here (Integer -> Number: 2); longer: the general reader
MAX_SUPER_CHAIN = 4
_I = struct.Struct(">i")
_H = struct.Struct(">H")
_PRIM_CODES = frozenset("BCDFIJSZ")
#: boxed class -> (its value field's type code, struct, the Python type the general reader's values become, the
#: super class it must have: Number or none)
_BOXES = {
    "java.lang.Integer": ("I", struct.Struct(">i"), int, "java.lang.Number"),
    "java.lang.Long": ("J", struct.Struct(">q"), BOXED_SUBCLASSES["Long"], "java.lang.Number"),
    "java.lang.Double": ("D", struct.Struct(">d"), float, "java.lang.Number"),
    "java.lang.Boolean": ("Z", struct.Struct(">?"), bool, None),
}
#: descriptors read before: key (name .. field count, as written) -> (the descriptor's bytes, the handles it took,
#: the _Desc); only descriptors without back-references, at most _MAX_SPAN bytes each and _MAX_SPANS in all (as
#: jgpy.javaser._DESC_SPANS: a stranger's descriptors can fill it, never grow it)
_SPANS: dict[bytes, tuple[bytes, tuple[Any, ...], "_Desc"]] = {}
_MAX_SPANS = 256
_MAX_SPAN = 1024
_PENDING = object()           # the handle of an array whose elements are being read (a reference to it: unsupported)


class _Unsupported(Exception):
    """Not a shape this reader knows: the general reader decides."""


class _Desc:
    """A class descriptor as read: name, flags, fields ((type code, name), ...), super class, and how many classes
    its chain holds (0 while it is being read: a reference to it then would make a loop)."""

    __slots__ = ("name", "flags", "fields", "super", "chain")

    def __init__(self, name: str, flags: int) -> None:
        self.name = name
        self.flags = flags
        self.fields: tuple[tuple[str, str], ...] = ()
        self.super: _Desc | None = None
        self.chain = 0


class _Parts:
    """What a MethodCall's writeExternal wrote: its block data (joined) and its objects, as Python values
    (arguments: a list; types: a list of names; the declaring class: a :class:`_Desc`)."""

    __slots__ = ("block", "objects")

    def __init__(self, block: bytes, objects: list[Any]) -> None:
        self.block = block
        self.objects = objects


class _Names(list[str]):
    """The names of a ``Class[]`` or ``String[]`` of types."""


class _Reader:
    __slots__ = ("data", "pos", "handles", "refs")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos
        self.handles: list[Any] = []
        self.refs = 0                                   # back-references resolved (a remembered span has none)

    # ---- primitives (IndexError / struct.error past the end: the caller falls back)

    def u1(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        p = self.pos
        end = p + n
        if n < 0 or end > len(self.data):
            raise _Unsupported
        self.pos = end
        return self.data[p:end]

    def unpack(self, st: struct.Struct) -> Any:
        p = self.pos
        v = st.unpack_from(self.data, p)[0]
        self.pos = p + st.size
        return v

    def text(self) -> str:
        raw = self.take(self.unpack(_H))
        return raw.decode("ascii") if raw.isascii() else decode_modified_utf8(raw)

    def ref(self) -> Any:
        self.refs += 1
        h = self.unpack(_I) - BASE_WIRE_HANDLE
        if not 0 <= h < len(self.handles) or self.handles[h] is _PENDING:
            raise _Unsupported
        return self.handles[h]

    # ---- class descriptors

    def desc(self, chain: int = 0) -> _Desc | None:
        """A descriptor (TC_CLASSDESC, a reference to one, or null), handles taken in the general reader's order:
        the descriptor's, then its fields' signature strings, then its super class's. One read before with the
        same bytes (and no reference inside) is taken from :data:`_SPANS`."""
        tc = self.data[self.pos]
        self.pos += 1
        if tc == TC_REFERENCE:
            d = self.ref()
            if not isinstance(d, _Desc) or not d.chain:          # not a descriptor, or one still being read
                raise _Unsupported
            return d
        if tc == TC_NULL:
            return None
        if tc != TC_CLASSDESC or chain >= MAX_SUPER_CHAIN:
            raise _Unsupported
        data, p = self.data, self.pos
        key = data[p:p + 13 + ((data[p] << 8) | data[p + 1])]     # name, serialVersionUID, flags, field count
        hit = _SPANS.get(key)
        if hit is not None and data.startswith(hit[0], p):
            self.pos = p + len(hit[0])
            self.handles.extend(hit[1])
            return hit[2]
        first, refs = len(self.handles), self.refs
        d = self._new_desc(chain)
        if self.refs == refs and self.pos - p <= _MAX_SPAN and len(_SPANS) < _MAX_SPANS:
            _SPANS[key] = (data[p:self.pos], tuple(self.handles[first:]), d)
        return d

    def _new_desc(self, chain: int) -> _Desc:
        name = self.text()
        self.pos += 8                                   # serialVersionUID: the general reader keeps, never checks it
        d = _Desc(name, self.u1())
        self.handles.append(d)
        fields = []
        for _ in range(self.unpack(_H)):
            code = chr(self.u1())
            fname = self.text()
            if code in "L[":
                tc = self.u1()
                if tc == TC_STRING:
                    self.handles.append(self.text())
                elif tc != TC_REFERENCE or not isinstance(self.ref(), str):
                    raise _Unsupported
            elif code not in _PRIM_CODES:
                raise _Unsupported
            fields.append((code, fname))
        d.fields = tuple(fields)
        if self.u1() != TC_ENDBLOCKDATA:                # class annotations
            raise _Unsupported
        d.super = sup = self.desc(chain + 1)
        d.chain = 1 + (sup.chain if sup is not None else 0)
        if d.chain > MAX_DEPTH:                         # the general reader refuses such chains
            raise _Unsupported
        return d

    # ---- values

    def value(self) -> Any:
        """An argument: null, a String, a byte[], a boxed Integer/Long/Boolean/Double, or a reference to one."""
        tc = self.data[self.pos]
        self.pos += 1
        if tc == TC_STRING:
            s = self.text()
            self.handles.append(s)
            return s
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            v = self.ref()
            if isinstance(v, (_Desc, _Names, list)):
                raise _Unsupported
            return v
        if tc == TC_ARRAY:
            d = self.desc()
            if d is None or d.name != "[B":
                raise _Unsupported
            h = len(self.handles)
            self.handles.append(_PENDING)
            v = self.take(self.unpack(_I))
            self.handles[h] = v
            return v
        if tc == TC_OBJECT:
            return self.box(self.desc())
        raise _Unsupported

    def box(self, d: _Desc | None) -> Any:
        """A boxed value whose descriptors have exactly the JDK's layout (what the general reader's fields
        would hold: the one ``value`` field, nothing from the super class)."""
        if d is None:
            raise _Unsupported
        spec = _BOXES.get(d.name)
        if spec is None or d.flags != 0x02 or d.fields != ((spec[0], "value"),):
            raise _Unsupported
        sup = d.super
        if spec[3] is None:
            if sup is not None:
                raise _Unsupported
        elif sup is None or sup.name != spec[3] or sup.flags != 0x02 or sup.fields or sup.super is not None:
            raise _Unsupported
        v = spec[2](self.unpack(spec[1]))
        self.handles.append(v)
        return v

    def array(self) -> Any:
        """An array among the call's objects: the arguments (Object[]), or the types (Class[], String[])."""
        d = self.desc()
        if d is None:
            raise _Unsupported
        h = len(self.handles)
        self.handles.append(_PENDING)
        n = self.unpack(_I)
        if n < 0 or n > len(self.data) - self.pos:          # every element takes a byte at least
            raise _Unsupported
        if d.name == "[Ljava.lang.Object;":
            out: list[Any] = [self.value() for _ in range(n)]
        elif d.name == "[Ljava.lang.Class;":
            out = _Names(self.class_name() for _ in range(n))
        elif d.name == "[Ljava.lang.String;":
            out = _Names(self.string() for _ in range(n))
        else:
            raise _Unsupported
        self.handles[h] = out
        return out

    def class_name(self) -> str:
        """A Class object's name (TC_CLASS and its descriptor, or a reference to a class or descriptor)."""
        tc = self.data[self.pos]
        self.pos += 1
        if tc == TC_CLASS:
            d = self.desc()
            if d is None:
                raise _Unsupported
            self.handles.append(d)
            return d.name
        if tc == TC_REFERENCE:
            v = self.ref()
            if isinstance(v, _Desc):
                return v.name
            if isinstance(v, str):
                return v
        raise _Unsupported

    def string(self) -> str:
        v = self.value()
        if not isinstance(v, str):
            raise _Unsupported
        return v

    def external(self) -> _Parts:
        """The MethodCall's writeExternal: block data and objects until TC_ENDBLOCKDATA."""
        blocks: list[bytes] = []
        objects: list[Any] = []
        while True:
            tc = self.data[self.pos]
            self.pos += 1
            if tc == TC_BLOCKDATA:
                blocks.append(self.take(self.u1()))
            elif tc == TC_ENDBLOCKDATA:
                return _Parts(b"".join(blocks), objects)
            elif tc == TC_ARRAY:
                objects.append(self.array())
            elif tc == TC_NULL:
                objects.append(None)
            elif tc == TC_CLASS:
                d = self.desc()
                if d is None:
                    raise _Unsupported
                self.handles.append(d)
                objects.append(d)
            else:
                raise _Unsupported


def method_call_parts(data: bytes, class_name: str) -> _Parts | None:
    """The block data and objects of the MethodCall in ``data`` (a Java object stream), or None when the stream
    is not of the shape this module reads (see the module docstring)."""
    if not data.startswith(STREAM_HEADER) or len(data) < 5 or data[4] != TC_OBJECT:
        return None
    r = _Reader(data, 5)
    try:
        d = r.desc()
        if (d is None or d.name != class_name or d.super is not None
                or d.flags & (SC_EXTERNALIZABLE | SC_BLOCK_DATA) != SC_EXTERNALIZABLE | SC_BLOCK_DATA):
            return None
        r.handles.append(_PENDING)                      # the MethodCall itself
        return r.external()
    except (_Unsupported, IndexError, struct.error, JavaSerializationError):
        return None


__all__ = ["MAX_SUPER_CHAIN", "method_call_parts"]
