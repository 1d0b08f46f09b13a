"""``org.jgroups.blocks.MethodCall`` (2.12): a method name or id, arguments, and how the callee finds the method.

Modes (``MethodCall.mode``), as 2.12 writes them (``writeExternal``: boolean name-present, then writeUTF(name) or
writeShort(id), ``writeObject(Object[] args)``, writeShort(mode), the mode's extra object(s), boolean
payload-present):

======== === ========================================================================================
OLD        1 the name only; the callee takes the first method of that name with as many parameters
METHOD     2 + ``Class[]`` parameter types and the declaring ``Class`` (Java looks the method up when it
             *reads* the call: the declaring class must exist on a Java callee)
TYPES      3 + ``Class[]`` types: the method whose parameters accept them
SIGNATURE  4 + ``String[]`` type names
ID         5 a ``short`` id instead of the name; the callee's method lookup maps it to a method
======== === ========================================================================================

Types are Java class names: ``int``, ``long``, ``java.lang.String``, ``[B`` (``byte[]``),
``[Ljava.lang.String;`` (``String[]``); the short forms ``String``, ``Integer``, ``byte[]``, ``String[]``, ...
are accepted and written in full. Arguments are Python values, written as the type at their position says
(an int for ``long`` goes as a Long, a float for ``float`` as a Float); without types as
:mod:`jgpy.javaser_write` maps them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Sequence

import jgpy._core.mcall as _mcall
from jgpy._core.jg212 import JavaObject
from jgpy.javaser import (ClassDesc, JavaArray, JavaObject as ReadObject, JavaSerializationError, ObjectInput,
                          decode_modified_utf8)
from jgpy.blocks.methodcall_read import method_call_fields
from jgpy.javaser_values import to_python
from jgpy.javaser_write import (FAST_WRITERS, SC_METHOD_CALL, JavaClass, JavaCollection, JavaMap, JavaWriteError,
                                ObjectWriter, METHOD_CALL_CLASS, c_writer_setup)

OLD, METHOD, TYPES, SIGNATURE, ID = 1, 2, 3, 4, 5
MODE_NAMES = {OLD: "OLD", METHOD: "METHOD", TYPES: "TYPES", SIGNATURE: "SIGNATURE", ID: "ID"}

#: short type names -> Java class names
_SHORT_NAMES = {
    "String": "java.lang.String", "Integer": "java.lang.Integer", "Long": "java.lang.Long",
    "Short": "java.lang.Short", "Byte": "java.lang.Byte", "Float": "java.lang.Float", "Double": "java.lang.Double",
    "Boolean": "java.lang.Boolean", "Character": "java.lang.Character", "Object": "java.lang.Object",
    "byte[]": "[B", "short[]": "[S", "int[]": "[I", "long[]": "[J", "float[]": "[F", "double[]": "[D",
    "boolean[]": "[Z", "char[]": "[C", "String[]": "[Ljava.lang.String;", "Object[]": "[Ljava.lang.Object;",
    "List": "java.util.List", "Map": "java.util.Map", "Set": "java.util.Set",
}
#: Java class name -> the boxed type an argument of that type is written as
_BOXED_FOR = {
    "int": "Integer", "java.lang.Integer": "Integer", "long": "Long", "java.lang.Long": "Long",
    "short": "Short", "java.lang.Short": "Short", "byte": "Byte", "java.lang.Byte": "Byte",
    "float": "Float", "java.lang.Float": "Float", "double": "Double", "java.lang.Double": "Double",
    "boolean": "Boolean", "java.lang.Boolean": "Boolean", "char": "Character", "java.lang.Character": "Character",
}
PRIMITIVES = {"int", "long", "short", "byte", "float", "double", "boolean", "char"}
_LIST_TYPES = {"java.util.List", "java.util.Collection", "java.util.ArrayList", "java.lang.Iterable"}
_MAP_TYPES = {"java.util.Map", "java.util.HashMap"}
_SET_TYPES = {"java.util.Set", "java.util.HashSet"}


def java_type_name(t: str) -> str:
    """The full Java class name of a type name (``String`` -> ``java.lang.String``, ``byte[]`` -> ``[B``)."""
    return _SHORT_NAMES.get(t, t)


#: (Python type, Java type) pairs whose value is its own Java form (the common arguments: no checks to make)
_AS_IS = frozenset({(bytes, "[B"), (str, "java.lang.String"), (str, "java.lang.Object"), (bytes, "java.lang.Object")})


def java_value(value: Any, type_name: str) -> Any:
    """``value`` in the Java form ``type_name`` asks for (what the writer should write at that position)."""
    if (type(value), type_name) in _AS_IS:
        return value
    if value is None:
        if type_name in PRIMITIVES:
            raise JavaWriteError(f"None for a parameter of primitive type {type_name}")
        return None
    if isinstance(value, (JavaObject, JavaArray, JavaCollection, JavaMap, JavaClass)):
        return value
    boxed = _BOXED_FOR.get(type_name)
    if boxed is not None:
        if boxed in ("Integer", "Long", "Short", "Byte") and (isinstance(value, bool) or not isinstance(value, int)):
            raise JavaWriteError(f"a {type(value).__name__} ({value!r}) for a parameter of type {type_name}")
        if boxed in ("Float", "Double") and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise JavaWriteError(f"a {type(value).__name__} ({value!r}) for a parameter of type {type_name}")
        if boxed == "Boolean" and not isinstance(value, bool):
            raise JavaWriteError(f"a {type(value).__name__} ({value!r}) for a parameter of type {type_name}")
        if boxed in ("Float", "Double"):
            value = float(value)
        return JavaObject(boxed, value)
    if type_name == "java.lang.String" and not isinstance(value, str):
        raise JavaWriteError(f"a {type(value).__name__} ({value!r}) for a parameter of type java.lang.String")
    if type_name.startswith("[") and isinstance(value, (list, tuple)) and type_name != "[B":
        return JavaArray(type_name, list(value))
    if type_name in ("java.util.Hashtable", "java.util.TreeMap") and isinstance(value, dict):
        return JavaMap(type_name, value)
    if type_name == "java.util.LinkedList" and isinstance(value, (list, tuple)):
        return JavaCollection(type_name, list(value))
    if type_name in _LIST_TYPES and isinstance(value, tuple):
        return list(value)
    return value


@dataclass
class MethodCall:
    """One remote call. Build it with :meth:`old`, :meth:`with_types`, :meth:`with_signature`, :meth:`with_id`
    or :meth:`with_method`; :meth:`to_buffer` gives what RpcDispatcher sends."""

    mode: int
    name: str | None
    args: list[Any] = field(default_factory=list)
    types: list[str] | None = None          # TYPES, METHOD: parameter types; SIGNATURE: the signature
    method_id: int = 0
    declaring_class: str | None = None      # METHOD only

    JAVA_DESC = SC_METHOD_CALL

    @classmethod
    def old(cls, name: str, args: Sequence[Any] = ()) -> MethodCall:
        return cls(OLD, name, list(args))

    @classmethod
    def with_types(cls, name: str, args: Sequence[Any], types: Sequence[str]) -> MethodCall:
        return cls(TYPES, name, list(args), [java_type_name(t) for t in types])

    @classmethod
    def with_signature(cls, name: str, args: Sequence[Any], signature: Sequence[str]) -> MethodCall:
        return cls(SIGNATURE, name, list(args), [java_type_name(t) for t in signature])

    @classmethod
    def with_id(cls, method_id: int, args: Sequence[Any] = (), types: Sequence[str] | None = None) -> MethodCall:
        """ID mode; ``types`` (not sent) only say how to write the arguments."""
        return cls(ID, None, list(args), [java_type_name(t) for t in types] if types else None, method_id)

    @classmethod
    def with_method(cls, name: str, args: Sequence[Any], types: Sequence[str], declaring_class: str) -> MethodCall:
        return cls(METHOD, name, list(args), [java_type_name(t) for t in types], declaring_class=declaring_class)

    def __post_init__(self) -> None:
        if self.mode not in MODE_NAMES:
            raise ValueError(f"mode {self.mode} is not one of {MODE_NAMES}")
        if self.types is not None and len(self.types) != len(self.args) and self.mode != ID:
            raise JavaWriteError(f"{len(self.args)} argument(s) but {len(self.types)} type(s)")
        if self.mode == ID and not -32768 <= self.method_id <= 32767:
            raise JavaWriteError(f"method id {self.method_id} does not fit a Java short")

    def java_args(self) -> tuple[Any, ...]:
        """The arguments in their Java form (an ``Object[]``)."""
        if self.types is not None and len(self.types) == len(self.args):
            return tuple(map(java_value, self.args, self.types))
        return tuple(self.args)

    def write_external(self, out: ObjectWriter) -> None:
        if self.mode != ID:
            if self.name is None:
                raise JavaWriteError("a MethodCall without a method name")
            out.write_raw(b"\x01")
            out.write_utf(self.name)
        else:
            out.write_raw(struct.pack(">?h", False, self.method_id))
        out.write_object(self.java_args())
        out.write_raw(struct.pack(">h", self.mode))
        if self.mode in (METHOD, TYPES):
            out.write_class_array(self.types or ())
            if self.mode == METHOD:
                out.write_object(JavaClass(self.declaring_class or "java.lang.Object"))
        elif self.mode == SIGNATURE:
            out.write_object(JavaArray("[Ljava.lang.String;", list(self.types or ())))
        out.write_raw(b"\x00")                      # no payload (deprecated)

    def to_stream(self) -> bytes:
        """The Java object stream of this call (``ObjectOutputStream.writeObject``): the common shapes from C
        (``jgpy/_core/mcall.pyx``), anything else (and every error) from :class:`~jgpy.javaser_write.ObjectWriter`;
        both give the same bytes."""
        if self.mode == ID or self.name is not None:
            data = _mcall.method_call_stream(self.mode, self.name, self.method_id, self.java_args(), self.types,
                                             self.declaring_class)
            if data is not None:
                return data
        w = ObjectWriter()
        w.write_object(self)
        return w.getvalue()

    def to_buffer(self) -> bytes:
        """``Util.objectToByteBuffer(call)``: tag 2 (Java serialization) + the object stream."""
        return b"\x02" + self.to_stream()

    def __str__(self) -> str:
        return f"{self.name if self.mode != ID else self.method_id}({', '.join(map(repr, self.args))})"


def typed_call_buffer(name: str, args: Sequence[Any], types: Sequence[str]) -> bytes:
    """``MethodCall.with_types(name, args, types).to_buffer()`` without building the MethodCall (a caller's
    per-call work); the same bytes and the same errors."""
    jtypes = list(map(_SHORT_NAMES.get, types, types))
    if len(jtypes) == len(args):
        data = _mcall.method_call_stream(TYPES, name, 0, tuple(map(java_value, args, jtypes)), jtypes, None)
        if data is not None:
            return b"\x02" + data
    return MethodCall.with_types(name, list(args), jtypes).to_buffer()


FAST_WRITERS[MethodCall] = ObjectWriter._externalizable
_mcall.configure_writer(java_object_type=JavaObject, method_call_desc=SC_METHOD_CALL, **c_writer_setup())


_BOOL = struct.Struct(">?")
_SHORT = struct.Struct(">h")
_USHORT = struct.Struct(">H")


class _Block:
    """Reads the primitive data of a MethodCall's writeExternal."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, st: struct.Struct) -> Any:
        pos = self.pos
        if pos + st.size > len(self.data):
            raise JavaSerializationError("MethodCall: block data ends early")
        self.pos = pos + st.size
        return st.unpack_from(self.data, pos)[0]

    def utf(self) -> str:
        n = self.take(_USHORT)
        pos = self.pos
        if pos + n > len(self.data):
            raise JavaSerializationError("MethodCall: method name ends early")
        self.pos = pos + n
        raw = self.data[pos:pos + n]
        return raw.decode("ascii") if raw.isascii() else decode_modified_utf8(raw)


def _class_names(v: Any, what: str) -> list[str]:
    if not isinstance(v, JavaArray) or not isinstance(v.values, list):
        raise JavaSerializationError(f"MethodCall: {what} is not an array")
    out = []
    for x in v.values:
        if isinstance(x, ClassDesc):
            out.append(x.name)
        elif isinstance(x, str):
            out.append(x)
        else:
            raise JavaSerializationError(f"MethodCall: {what} holds a {type(x).__name__}")
    return out


def method_call_from_object(obj: Any) -> MethodCall:
    """A MethodCall from what ObjectInput read (a JavaObject of class org.jgroups.blocks.MethodCall)."""
    if not isinstance(obj, ReadObject) or obj.class_name != METHOD_CALL_CLASS or obj.external is None:
        raise JavaSerializationError(f"not a {METHOD_CALL_CLASS}: {type(obj).__name__}")
    objects = list(obj.annotations.get(METHOD_CALL_CLASS, (b"", []))[1])
    return _assemble(obj.external, objects, _READ_OBJECTS)


class _ReadObjects:
    """The general reader's objects of a MethodCall as Python values."""

    @staticmethod
    def args(v: Any) -> list[Any]:
        if isinstance(v, JavaArray) and isinstance(v.values, list):
            return list(to_python(v))
        raise JavaSerializationError("MethodCall: the arguments are not an Object[]")

    names = staticmethod(_class_names)

    @staticmethod
    def declaring(v: Any) -> str:
        if not isinstance(v, ClassDesc):
            raise JavaSerializationError("MethodCall: METHOD mode without the declaring class")
        return v.name


_READ_OBJECTS = _ReadObjects()


def _assemble(external: bytes, objects: list[Any], read: Any) -> MethodCall:
    """A MethodCall from its writeExternal's block data and objects (in stream order), ``read`` turning the
    objects into arguments, type names and the declaring class."""
    block = _Block(external)
    name = None
    method_id = 0
    if block.take(_BOOL):
        name = block.utf()
    else:
        method_id = block.take(_SHORT)
    if not objects:
        raise JavaSerializationError("MethodCall: no arguments array")
    raw_args = objects.pop(0)
    args: list[Any] = [] if raw_args is None else read.args(raw_args)
    mode = block.take(_SHORT)
    types = None
    declaring = None
    if mode in (METHOD, TYPES, SIGNATURE):
        if not objects:
            raise JavaSerializationError(f"MethodCall: mode {mode} without its types")
        types = read.names(objects.pop(0), "the types")
        if mode == METHOD:
            declaring = read.declaring(objects.pop(0) if objects else None)
    elif mode not in (OLD, ID):
        raise JavaSerializationError(f"MethodCall: mode {mode} is invalid")
    mc = MethodCall.__new__(MethodCall)
    mc.mode, mc.name, mc.args, mc.types, mc.method_id, mc.declaring_class = mode, name, args, types, method_id, declaring
    return mc


def method_call_fields_of(data: bytes) -> tuple[int, str | None, list[Any], list[str] | None, int, str | None]:
    """What :func:`decode_method_call` reads, as ``(mode, name, args, types, method_id, declaring_class)``
    without building the MethodCall (a server's per-request work); the same errors."""
    if data[:1] == b"\x02":
        data = data[1:]
    fields = method_call_fields(data, METHOD_CALL_CLASS)
    if fields is None:                              # another shape: the general reader (its value or its words)
        mc = method_call_from_object(ObjectInput.from_bytes(data).read_object())
        return mc.mode, mc.name, mc.args, mc.types, mc.method_id, mc.declaring_class
    return fields


def decode_method_call(data: bytes) -> MethodCall:
    """A MethodCall from its Java object stream (``AC ED 00 05 ...``) or its ``objectToByteBuffer`` form (tag
    2 first). Malformed or hostile bytes raise :class:`~jgpy.javaser.JavaSerializationError`; the bytes bound
    everything read. The common shapes are read and assembled straight from the bytes, in C
    (:mod:`jgpy.blocks.methodcall_read`); anything else, and anything that reader does not take, by the general
    reader from the start."""
    mc = MethodCall.__new__(MethodCall)
    mc.mode, mc.name, mc.args, mc.types, mc.method_id, mc.declaring_class = method_call_fields_of(bytes(data))
    return mc


__all__ = ["ID", "METHOD", "MODE_NAMES", "MethodCall", "OLD", "PRIMITIVES", "SIGNATURE", "TYPES",
           "decode_method_call", "java_type_name", "java_value", "method_call_fields_of", "method_call_from_object",
           "typed_call_buffer"]
