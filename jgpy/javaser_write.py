"""Python values as a Java object stream (``java.io.ObjectOutputStream``), for RpcDispatcher calls and answers.

The reader and the stream constants are :mod:`jgpy.javaser`; this module writes what a JVM writes for the JDK
classes remote calls use, byte for byte (``tests/test_javaser_write.py`` holds it to the live JVM):

=====================================  ==========================================================================
Python value                           Java object written
=====================================  ==========================================================================
None                                   null
str                                    String (``TC_STRING``; ``TC_LONGSTRING`` past 65535 bytes)
bool / int / float                     Boolean / Integer (Long when it needs 64 bits) / Double
JLong / JShort / JByte / JFloat        Long / Short / Byte / Float (int and float subclasses; the reader
                                       gives these for such values, so they go back as they came)
``JavaObject("Long", 5)`` ...          the boxed type named (Integer, Long, Short, Byte, Float, Double, Boolean,
                                       Character, String, byte[], null): :class:`jgpy.JavaObject`, as for
                                       ``Message.setObject``
bytes / bytearray / memoryview         byte[]
list / tuple                           ArrayList / Object[]
dict / set, frozenset                  HashMap / HashSet (entries in Java's hash order for str and int keys)
``JavaArray("[I", [1, 2])``            that array (``[B [S [I [J [F [D [Z [C``, ``[Ljava.lang.Object;``,
                                       ``[Ljava.lang.String;``, ``[Ljava.lang.Class;``)
``JavaCollection(cls, items)``         ``java.util.ArrayList``, ``LinkedList``, ``HashSet`` or ``Vector``
``JavaMap(cls, mapping)``              ``java.util.HashMap``, ``Hashtable`` or ``TreeMap`` (natural order)
``JavaClass(name)``                    a ``Class`` object (``int``, ``java.lang.String``, ...)
:class:`JavaThrowable`, an exception   a Throwable Java can read: the known JDK class (an exception from Java
                                       keeps its class), message, stack trace and cause
``MethodCall``                         ``org.jgroups.blocks.MethodCall`` (:mod:`jgpy.blocks.methodcall`)
=====================================  ==========================================================================

Objects are shared as Java shares them: strings by value, the boxed values Java's ``valueOf`` caches
(-128..127, booleans) by value, lists, dicts and sets by identity (so a list that contains itself is written
once, as Java would). A value this module cannot represent raises :class:`JavaWriteError` (a ``TypeError``)
before anything is sent.
"""

from __future__ import annotations

import math
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from jgpy._core.jg212 import JavaObject
from jgpy.javaser import (
    BASE_WIRE_HANDLE, SC_BLOCK_DATA, SC_EXTERNALIZABLE, SC_SERIALIZABLE, SC_WRITE_METHOD, STREAM_HEADER,
    TC_ARRAY, TC_BLOCKDATA, TC_BLOCKDATALONG, TC_CLASS, TC_CLASSDESC, TC_ENDBLOCKDATA, TC_LONGSTRING, TC_NULL,
    TC_OBJECT, TC_REFERENCE, TC_STRING, JavaArray, JavaSerializationError, modified_utf8,
)

#: ObjectOutputStream's block data buffer: primitive data goes out in blocks of at most this many bytes
MAX_BLOCK_SIZE = 1024
#: how deep values may nest (Java has no bound but its thread's stack; each level takes a few Python frames)
MAX_WRITE_DEPTH = 200


class JavaWriteError(JavaSerializationError, TypeError):
    """A value that cannot be written as a Java object (raised at the caller; nothing is sent)."""


class JLong(int):
    """An int that is a Java ``Long`` (what the reader gives for one, so it goes back as a Long)."""

    JAVA_TYPE = "Long"


class JShort(int):
    """An int that is a Java ``Short``."""

    JAVA_TYPE = "Short"


class JByte(int):
    """An int that is a Java ``Byte``."""

    JAVA_TYPE = "Byte"


class JFloat(float):
    """A float that is a Java ``Float`` (Python's float is a Double)."""

    JAVA_TYPE = "Float"


#: the reader's boxed values that are not Python's defaults (Integer: int, Double: float)
BOXED_SUBCLASSES = {"Long": JLong, "Short": JShort, "Byte": JByte, "Float": JFloat}


@dataclass(frozen=True)
class JavaClass:
    """A ``java.lang.Class`` value: ``int``, ``java.lang.String``, ``org.example.Server`` ..."""

    name: str


@dataclass
class JavaCollection:
    """A list or set of an explicit Java class (``java.util.LinkedList``, ``java.util.HashSet``, ...)."""

    class_name: str
    items: Iterable[Any]


@dataclass
class JavaMap:
    """A map of an explicit Java class (``java.util.Hashtable``, ``java.util.TreeMap``, ``java.util.HashMap``)."""

    class_name: str
    entries: Mapping[Any, Any]


@dataclass(frozen=True)
class StackFrame:
    """One ``StackTraceElement``."""

    declaring_class: str
    method_name: str
    file_name: str | None = None
    line_number: int = -1


@dataclass
class JavaThrowable:
    """A Java ``Throwable``: its class, message, stack trace and cause (None: no cause)."""

    class_name: str
    message: str | None = None
    stack_trace: list[StackFrame] = field(default_factory=list)
    cause: "JavaThrowable | None" = None


# ---- class descriptors of the JDK classes written --------------------------------------------------------

@dataclass(frozen=True)
class JavaClassDesc:
    """A Java class as its object stream describes it: name, serialVersionUID, flags (SC_*), fields (type code,
    name, JVM signature of object fields; primitives first, then by name, as ObjectStreamClass sorts them) and
    the serializable super class."""

    name: str
    suid: int
    flags: int = SC_SERIALIZABLE
    fields: tuple[tuple[str, str, str | None], ...] = ()      # (type code, name, JVM type signature)
    super: "JavaClassDesc | None" = None
    #: the writer's handle key of this descriptor, and what writing it into a fresh stream gives (see
    #: _desc_blob): kept on the descriptor so a write needs no hashing of the whole dataclass
    _key: tuple[str, str] = field(init=False, repr=False, compare=False, hash=False, default=("desc", ""))
    _blob: Any = field(init=False, repr=False, compare=False, hash=False, default=None)
    _head: Any = field(init=False, repr=False, compare=False, hash=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", ("desc", self.name))


_Desc = JavaClassDesc            # the descriptor of a class this module writes (name, serialVersionUID, fields)
_OBJ = "Ljava/lang/Object;"
_NUMBER = _Desc("java.lang.Number", -8742448824652078965)
_BOXES = {       # Java type -> (descriptor, struct format)
    "Integer": (_Desc("java.lang.Integer", 1360826667806852920, fields=(("I", "value", None),), super=_NUMBER), ">i"),
    "Long": (_Desc("java.lang.Long", 4290774380558885855, fields=(("J", "value", None),), super=_NUMBER), ">q"),
    "Short": (_Desc("java.lang.Short", 7515723908773894738, fields=(("S", "value", None),), super=_NUMBER), ">h"),
    "Byte": (_Desc("java.lang.Byte", -7183698231559129828, fields=(("B", "value", None),), super=_NUMBER), ">b"),
    "Float": (_Desc("java.lang.Float", -2671257302660747028, fields=(("F", "value", None),), super=_NUMBER), ">f"),
    "Double": (_Desc("java.lang.Double", -9172774392245257468, fields=(("D", "value", None),), super=_NUMBER),
               ">d"),
    "Boolean": (_Desc("java.lang.Boolean", -3665804199014368530, fields=(("Z", "value", None),)), ">?"),
    "Character": (_Desc("java.lang.Character", 3786198910865385080, fields=(("C", "value", None),)), ">H"),
}
#: the boxed types whose small values Java's valueOf caches (so equal values are one object, written once)
_CACHED = {"Integer": (-128, 127), "Long": (-128, 127), "Short": (-128, 127), "Byte": (-128, 127),
           "Character": (0, 127), "Boolean": (0, 1)}
_ARRAY_SUIDS = {
    "[B": -5984413125824719648, "[S": -1188055269542874886, "[I": 5600894804908749477,
    "[J": 8655923659555304851, "[F": 836686056779680834, "[D": 4514449696888150558, "[Z": 6309297032502205922,
    "[C": -5753798564021173076, "[Ljava.lang.Object;": -8012369246846506644,
    "[Ljava.lang.String;": -5921575005990323385, "[Ljava.lang.Class;": -6118465897992725863,
    "[Ljava.lang.StackTraceElement;": 163864874655228473,
}
_ARRAY_DESCS = {name: _Desc(name, suid) for name, suid in _ARRAY_SUIDS.items()}
_FIELD_FORMATS = {"B": ">b", "S": ">h", "I": ">i", "J": ">q", "F": ">f", "D": ">d", "Z": ">?", "C": ">H"}
_PRIM_ARRAY_FORMATS = {"[B": "b", "[S": "h", "[I": "i", "[J": "q", "[F": "f", "[D": "d", "[Z": "?", "[C": "H"}
#: the serialVersionUIDs of the Class objects a call's types name (primitive and non-serializable classes: 0)
_CLASS_SUIDS = {"java.lang.String": -6849794470754667710, **{d.name: d.suid for d, _ in _BOXES.values()},
                "java.lang.Number": _NUMBER.suid, "java.util.ArrayList": 8683452581122892189,
                "java.util.HashMap": 362498820763181265, "java.util.Hashtable": 1421746759512286392,
                "java.util.LinkedList": 876323262645176354, "java.util.HashSet": -5024744406713321676,
                "java.util.TreeMap": 919286545866124006, "java.util.Vector": -2767605614048989439,
                **_ARRAY_SUIDS}
_COLLECTIONS = {
    "java.util.ArrayList": _Desc("java.util.ArrayList", 8683452581122892189, SC_SERIALIZABLE | SC_WRITE_METHOD,
                                 (("I", "size", None),)),
    "java.util.LinkedList": _Desc("java.util.LinkedList", 876323262645176354, SC_SERIALIZABLE | SC_WRITE_METHOD),
    "java.util.HashSet": _Desc("java.util.HashSet", -5024744406713321676, SC_SERIALIZABLE | SC_WRITE_METHOD),
    "java.util.Vector": _Desc("java.util.Vector", -2767605614048989439, SC_SERIALIZABLE | SC_WRITE_METHOD,
                              (("I", "capacityIncrement", None), ("I", "elementCount", None),
                               ("[", "elementData", "[Ljava/lang/Object;"))),
}
_MAPS = {
    "java.util.HashMap": _Desc("java.util.HashMap", 362498820763181265, SC_SERIALIZABLE | SC_WRITE_METHOD,
                               (("F", "loadFactor", None), ("I", "threshold", None))),
    "java.util.Hashtable": _Desc("java.util.Hashtable", 1421746759512286392, SC_SERIALIZABLE | SC_WRITE_METHOD,
                                 (("F", "loadFactor", None), ("I", "threshold", None))),
    "java.util.TreeMap": _Desc("java.util.TreeMap", 919286545866124006, SC_SERIALIZABLE | SC_WRITE_METHOD,
                               (("L", "comparator", "Ljava/util/Comparator;"),)),
}
_THROWABLE = _Desc("java.lang.Throwable", -3042686055658047285, SC_SERIALIZABLE | SC_WRITE_METHOD, (
    ("L", "cause", "Ljava/lang/Throwable;"), ("L", "detailMessage", "Ljava/lang/String;"),
    ("[", "stackTrace", "[Ljava/lang/StackTraceElement;"), ("L", "suppressedExceptions", "Ljava/util/List;")))


def _throwables() -> dict[str, _Desc]:
    exc = _Desc("java.lang.Exception", -3387516993124229948, super=_THROWABLE)
    rte = _Desc("java.lang.RuntimeException", -7034897190745766939, super=exc)
    err = _Desc("java.lang.Error", 4980196508277280342, super=_THROWABLE)
    refl = _Desc("java.lang.ReflectiveOperationException", 123456789, super=exc)
    out = {d.name: d for d in (_THROWABLE, exc, rte, err, refl)}
    for name, suid, sup in (
            ("java.lang.IllegalStateException", -1848914673093119416, rte),
            ("java.lang.IllegalArgumentException", -5365630128856068164, rte),
            ("java.lang.UnsupportedOperationException", -1242599979055084673, rte),
            ("java.lang.ArithmeticException", 2256477558314496007, rte),
            ("java.lang.IndexOutOfBoundsException", 234122996006267687, rte),
            ("java.lang.ClassCastException", -9223365651070458532, rte),
            ("java.util.NoSuchElementException", 6769829250639411880, rte),
            ("java.lang.NoSuchMethodException", 5034388446362600923, refl),
            ("java.util.concurrent.TimeoutException", 1900926677490660714, exc),
            ("java.io.IOException", 7818375828146090155, exc),
            ("java.lang.AssertionError", -5013299493970297370, err)):
        out[name] = _Desc(name, suid, super=sup)
    return out


#: the Throwable classes this module can write (a Java exception of another class is written as the nearest
#: of these it is known to extend: RuntimeException)
THROWABLES = _throwables()
_STACK_TRACE_ELEMENT = _Desc("java.lang.StackTraceElement", 6992337162326171013, fields=(
    ("B", "format", None), ("I", "lineNumber", None), ("L", "classLoaderName", "Ljava/lang/String;"),
    ("L", "declaringClass", "Ljava/lang/String;"), ("L", "fileName", "Ljava/lang/String;"),
    ("L", "methodName", "Ljava/lang/String;"), ("L", "moduleName", "Ljava/lang/String;"),
    ("L", "moduleVersion", "Ljava/lang/String;")))
_EMPTY_LIST = _Desc("java.util.Collections$EmptyList", 8842843931221139166)
METHOD_CALL_CLASS = "org.jgroups.blocks.MethodCall"
_METHOD_CALL = _Desc(METHOD_CALL_CLASS, 7873471327078957662, SC_EXTERNALIZABLE | SC_BLOCK_DATA)

#: Python exceptions -> the Java class a Java caller sees
_PY_TO_JAVA_EXC = ((TimeoutError, "java.util.concurrent.TimeoutException"),
                   (NotImplementedError, "java.lang.UnsupportedOperationException"),
                   ((TypeError, ValueError), "java.lang.IllegalArgumentException"),
                   (ArithmeticError, "java.lang.ArithmeticException"),
                   (IndexError, "java.lang.IndexOutOfBoundsException"),
                   (KeyError, "java.util.NoSuchElementException"),
                   (OSError, "java.io.IOException"),
                   (AssertionError, "java.lang.AssertionError"))


def throwable_from_exception(exc: BaseException, _depth: int = 0) -> JavaThrowable:
    """``exc`` as a Java Throwable: a Java exception (anything with ``java_class``) keeps its class, message
    and trace; a Python one becomes the nearest JDK exception class, its message ``"ValueError: text"``, its
    traceback the stack trace (module as the class), ``__cause__`` the cause."""
    java_class = getattr(exc, "java_class", None)
    if isinstance(java_class, str):
        t = JavaThrowable(java_class, getattr(exc, "message", None), list(getattr(exc, "stack_trace", ()) or ()))
    else:
        name = next((j for py, j in _PY_TO_JAVA_EXC if isinstance(exc, py)), "java.lang.RuntimeException")
        text = str(exc)
        frames = [StackFrame(f.name if not f.filename else _module_of(f.filename), f.name,
                             f.filename.rsplit("/", 1)[-1] or None, f.lineno or -1)
                  for f in reversed(traceback.extract_tb(exc.__traceback__))] if exc.__traceback__ else []
        t = JavaThrowable(name, f"{type(exc).__name__}: {text}" if text else type(exc).__name__, frames)
    cause = exc.__cause__
    explicit = getattr(exc, "cause", None)
    if cause is None and isinstance(explicit, BaseException):
        cause = explicit
    if cause is not None and cause is not exc and _depth < 16:
        t.cause = throwable_from_exception(cause, _depth + 1)
    return t


def _module_of(filename: str) -> str:
    base = filename.rsplit("/", 1)[-1]
    return base[:-3] if base.endswith(".py") else base


# ---- Java's hashCode, for HashMap's order -------------------------------------------------------------

def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def java_hash(value: Any) -> int | None:
    """``hashCode()`` of the Java value ``value`` is written as (str, int, bool); None for other types."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return value
        v = value & 0xFFFFFFFFFFFFFFFF
        return _i32(v ^ (v >> 32))
    if isinstance(value, str):
        h = 0
        for unit in struct.unpack(f">{len(value.encode('utf-16-be', 'surrogatepass')) // 2}H",
                                  value.encode("utf-16-be", "surrogatepass")):
            h = (31 * h + unit) & 0xFFFFFFFF
        return _i32(h)
    return None


def _table_size_for(c: int) -> int:
    n = 1
    while n < c:
        n <<= 1
    return n


def _hashmap_capacity(size: int) -> int:
    """Table length of ``new HashMap()`` after ``size`` puts."""
    cap = 16
    while size > int(cap * 0.75):
        cap <<= 1
    return cap


def _hash_order(keys: list[Any], capacity: int) -> list[int]:
    hashes = [java_hash(k) for k in keys]
    if any(h is None for h in hashes):
        return list(range(len(keys)))
    def bucket(i: int) -> int:
        h = hashes[i] & 0xFFFFFFFF   # type: ignore[operator]
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(range(len(keys)), key=bucket)


# ---- the writer --------------------------------------------------------------------------------------------

class ObjectWriter:
    """An ``ObjectOutputStream``: :meth:`write_object` any supported value, :meth:`getvalue` the bytes.

    ``fast`` (default) writes the common exact types (str, bytes, int, float, bool, None, tuple, JavaArray,
    JavaClass, registered Externalizables such as MethodCall) through :data:`FAST_WRITERS`, straight from their
    type, and class descriptors from bytes made once (``_blob``, ``_head``); ``fast=False`` takes the general
    ``isinstance`` route and writes every descriptor field by field. Both give the same bytes
    (``tests/test_javaser_fast.py`` holds them to it); the general one is the reference."""

    def __init__(self, fast: bool = True) -> None:
        self.buf = bytearray(STREAM_HEADER)
        self._dispatch: dict[type, Any] = FAST_WRITERS if fast else {}
        self._next = BASE_WIRE_HANDLE
        self._handles: dict[Any, int] = {}
        self._keep: list[Any] = []          # objects shared by identity stay alive while their id is a key
        self._block = bytearray()           # block data not written yet (writeExternal / writeObject extras)
        self._block_mode = 0
        self._depth = 0
        self._refs = 0                      # references written (a descriptor blob must have none)

    def getvalue(self) -> bytes:
        self._flush_block()
        return bytes(self.buf)

    # ---- handles

    def _new_handle(self, key: Any = None) -> None:
        if key is not None:
            self._handles[key] = self._next
        self._next += 1

    def _shared(self, key: Any) -> bool:
        h = self._handles.get(key)
        if h is None:
            return False
        self._flush_block()
        self._reference(h)
        return True

    def _reference(self, handle: int) -> None:
        self._refs += 1
        self.buf += _PACK_REF(TC_REFERENCE, handle)

    # ---- block data (primitive writes inside writeExternal / writeObject)

    def write_raw(self, data: bytes) -> None:
        """Primitive data in block data mode (``out.writeInt`` ... inside ``writeExternal``)."""
        if not self._block_mode:
            raise JavaWriteError("primitive data outside writeExternal/writeObject")
        self._block += data
        while len(self._block) >= MAX_BLOCK_SIZE:
            self._emit_block(self._block[:MAX_BLOCK_SIZE])
            del self._block[:MAX_BLOCK_SIZE]

    def write_utf(self, s: str) -> None:
        b = modified_utf8(s)
        if len(b) > 0xFFFF:
            raise JavaWriteError(f"writeUTF: {len(b)} bytes is more than 65535")
        self.write_raw(struct.pack(">H", len(b)) + b)

    def _emit_block(self, data: bytes | bytearray) -> None:
        n = len(data)
        self.buf += _PACK_BB(TC_BLOCKDATA, n) if n <= 0xFF else _PACK_REF(TC_BLOCKDATALONG, n)
        self.buf += data

    def _flush_block(self) -> None:
        if self._block:
            self._emit_block(self._block)
            self._block.clear()

    def _begin_block(self) -> None:
        self._block_mode += 1

    def _end_block(self) -> None:
        self._flush_block()
        self._block_mode -= 1
        self.buf.append(TC_ENDBLOCKDATA)

    # ---- strings, class descriptors

    def _utf(self, s: str) -> None:
        b = modified_utf8(s)
        if len(b) > 0xFFFF:
            raise JavaWriteError(f"a class or field name of {len(b)} bytes")
        self.buf += struct.pack(">H", len(b)) + b

    def write_string(self, s: str) -> None:
        """``writeObject(String)``: shared by value (the string itself is its handle key: no other key is a str)."""
        if self._block:
            self._flush_block()
        h = self._handles.get(s)
        if h is not None:
            self._reference(h)
            return
        b = modified_utf8(s)
        n = len(b)
        self.buf += _PACK_STRING(TC_STRING, n) if n <= 0xFFFF else struct.pack(">BQ", TC_LONGSTRING, n)
        self.buf += b
        self._handles[s] = self._next
        self._next += 1

    def _class_desc(self, d: _Desc | None) -> None:
        if d is None:
            self.buf.append(TC_NULL)
            return
        handles = self._handles
        h = handles.get(d._key)
        if h is not None:
            self._reference(h)
            return
        blob = (d._blob if d._blob is not None else _desc_blob(d)) if self._dispatch else ()
        if blob:
            keys = blob[1]
            for k in keys:
                if k in handles:                    # a part written before: it must be a reference now
                    break
            else:
                self.buf += blob[0]                 # the bytes a fresh write gives, handles in the same order
                n = self._next
                for k in keys:
                    handles[k] = n
                    n += 1
                self._next = n
                return
        self._write_desc(d)

    def _write_desc(self, d: _Desc) -> None:
        """The descriptor in full. One whose fields name no class (no signature strings: boxes, arrays) has the
        same bytes up to its super class in every stream: those are made once (``_head``), the super class
        written after them (e.g. Long's after Integer's: a reference to Number)."""
        if self._dispatch and _desc_head(d):
            self.buf += d._head
            self._new_handle(d._key)
            self._class_desc(d.super)
            return
        self._write_desc_fields(d)
        self._class_desc(d.super)

    def _write_desc_fields(self, d: _Desc) -> None:
        """A descriptor without its super class: name, serialVersionUID, flags, fields, no annotations."""
        self.buf.append(TC_CLASSDESC)
        self._utf(d.name)
        self.buf += struct.pack(">qBH", d.suid, d.flags, len(d.fields))
        self._new_handle(d._key)
        for code, name, sig in d.fields:
            self.buf.append(ord(code))
            self._utf(name)
            if sig is not None:
                self.write_string(sig)
        self.buf.append(TC_ENDBLOCKDATA)           # no class annotations

    # ---- objects

    def write_object(self, value: Any) -> None:
        """``writeObject(value)`` for a supported value (see the module docstring)."""
        if self._block:
            self._flush_block()
        if self._depth >= MAX_WRITE_DEPTH:
            raise JavaWriteError(f"values nested more than {MAX_WRITE_DEPTH} deep")
        self._depth += 1
        try:
            fn = self._dispatch.get(type(value))
            if fn is not None:
                fn(self, value)
            else:
                self._write_other(value)
        except RecursionError:
            raise JavaWriteError("values nested too deep for this thread's stack") from None
        finally:
            self._depth -= 1

    # ---- fast paths: exact types, the bytes of the general route with fewer calls (see FAST_WRITERS)

    def _fast_null(self, v: None) -> None:
        self.buf.append(TC_NULL)

    def _fast_bytes(self, v: bytes) -> None:
        """``byte[]``: never shared (a Python bytes value has no identity Java would see twice)."""
        self.buf.append(TC_ARRAY)
        self._class_desc(_BYTE_ARRAY_DESC)
        self._next += 1
        self.buf += _PACK_I(len(v))
        self.buf += v

    def _fast_int(self, v: int) -> None:
        """Integer (Long past 32 bits); -128..127 shared by value as Integer.valueOf caches them."""
        if -128 <= v <= 127:
            key = _SMALL_INT_KEYS[v + 128]
            h = self._handles.get(key)
            if h is not None:
                self._reference(h)
                return
            self.buf.append(TC_OBJECT)
            self._class_desc(_INTEGER_DESC)
            self._handles[key] = self._next
            self._next += 1
            self.buf += _PACK_I(v)
        elif -(1 << 31) <= v < (1 << 31):
            self.buf.append(TC_OBJECT)
            self._class_desc(_INTEGER_DESC)
            self._next += 1
            self.buf += _PACK_I(v)
        else:
            self._box("Long", v)

    def _fast_float(self, v: float) -> None:
        self._box("Double", v)

    def _fast_bool(self, v: bool) -> None:
        self._box("Boolean", v)

    def _fast_tuple(self, v: tuple[Any, ...]) -> None:
        """``Object[]``, shared by identity."""
        key = ("id", id(v))
        h = self._handles.get(key)
        if h is not None:
            self._reference(h)
            return
        self.buf.append(TC_ARRAY)
        self._class_desc(_OBJECT_ARRAY_DESC)
        self._handles[key] = self._next
        self._next += 1
        self._keep.append(v)
        self.buf += _PACK_I(len(v))
        for x in v:
            self.write_object(x)

    def write_class_array(self, names: Sequence[str]) -> None:
        """``writeObject(Class[])`` of the classes ``names`` (a MethodCall's types): the bytes of
        ``write_object(JavaArray("[Ljava.lang.Class;", [JavaClass(n) ...]))`` without building those objects
        (a fresh array: nothing can refer to it again). The general writer takes that route instead."""
        if not self._dispatch:
            self.write_object(JavaArray("[Ljava.lang.Class;", [JavaClass(n) for n in names]))
            return
        if self._block:
            self._flush_block()
        self.buf.append(TC_ARRAY)
        self._class_desc(_CLASS_ARRAY_DESC)
        self._next += 1
        self.buf += _PACK_I(len(names))
        for name in names:
            self._class(name)

    def _fast_java_array(self, v: JavaArray) -> None:
        self._array(v.class_name, v.values, v)

    def _fast_typed(self, v: JavaObject) -> None:
        self._typed(v.type, v.value)

    def _fast_class(self, v: JavaClass) -> None:
        self._class(v.name)

    def _write_other(self, v: Any) -> None:
        if v is None:
            self.buf.append(TC_NULL)
        elif isinstance(v, str):
            self.write_string(v)
        elif isinstance(v, bool):
            self._box("Boolean", v)
        elif isinstance(v, (JLong, JShort, JByte, JFloat)):
            self._box(v.JAVA_TYPE, v)
        elif isinstance(v, int):
            self._box("Integer" if -(1 << 31) <= v < (1 << 31) else "Long", v)
        elif isinstance(v, float):
            self._box("Double", v)
        elif isinstance(v, JavaObject):
            self._typed(v.type, v.value)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self._array("[B", bytes(v), None)
        elif isinstance(v, JavaArray):
            self._array(v.class_name, v.values, v)
        elif isinstance(v, list):
            self._collection(_COLLECTIONS["java.util.ArrayList"], v, v)
        elif isinstance(v, tuple):
            self._array("[Ljava.lang.Object;", v, v)
        elif isinstance(v, dict):
            self._map(_MAPS["java.util.HashMap"], v, v)
        elif isinstance(v, (set, frozenset)):
            self._collection(_COLLECTIONS["java.util.HashSet"], v, v)
        elif isinstance(v, JavaCollection):
            d = _COLLECTIONS.get(v.class_name)
            if d is None:
                raise JavaWriteError(f"cannot write a {v.class_name}: use one of {sorted(_COLLECTIONS)}")
            self._collection(d, list(v.items), v)
        elif isinstance(v, JavaMap):
            d = _MAPS.get(v.class_name)
            if d is None:
                raise JavaWriteError(f"cannot write a {v.class_name}: use one of {sorted(_MAPS)}")
            self._map(d, v.entries, v)
        elif isinstance(v, JavaClass):
            self._class(v.name)
        elif isinstance(v, JavaThrowable):
            self._throwable(v)
        elif isinstance(v, BaseException):
            self._throwable(throwable_from_exception(v))
        elif hasattr(v, "write_external") and hasattr(v, "JAVA_DESC"):
            self._externalizable(v)
        elif hasattr(v, "serial_fields") and hasattr(v, "JAVA_DESC"):
            self._serializable(v)
        else:
            raise JavaWriteError(f"a {type(v).__name__} has no Java form (use str, int, float, bool, bytes, "
                                 "list, tuple, dict, set, None, JavaObject, JavaArray, JavaCollection, JavaMap)")

    def _typed(self, jtype: str, value: Any) -> None:
        if jtype == "null":
            self.buf.append(TC_NULL)
        elif jtype == "String":
            if not isinstance(value, str):
                raise JavaWriteError(f"JavaObject('String', ...) needs a str, not a {type(value).__name__}")
            self.write_string(value)
        elif jtype == "byte[]":
            self._array("[B", bytes(value), None)
        elif jtype in _BOXES:
            self._box(jtype, value)
        else:
            raise JavaWriteError(f"JavaObject({jtype!r}, ...) has no Java serialized form here")

    def _box(self, jtype: str, value: Any) -> None:
        desc, fmt = _BOXES[jtype]
        if jtype == "Character":
            if isinstance(value, str):
                if len(value) != 1 or ord(value) > 0xFFFF:
                    raise JavaWriteError(f"a Character is one UTF-16 unit, not {value!r}")
                value = ord(value)
        try:
            raw = struct.pack(fmt, value)
        except (struct.error, TypeError) as e:
            raise JavaWriteError(f"{value!r} is not a Java {jtype}: {e}") from None
        if jtype in ("Float", "Double") and isinstance(value, float) and math.isnan(value):
            raw = struct.pack(fmt, math.nan)            # Java's canonical NaN
        cached = _CACHED.get(jtype)
        key = None
        if cached is not None and cached[0] <= int(value) <= cached[1]:
            key = ("box", jtype, int(value))
            if self._shared(key):
                return
        self.buf.append(TC_OBJECT)
        self._class_desc(desc)
        self._new_handle(key)
        self.buf += raw

    def _class(self, name: str) -> None:
        key = ("class", name)
        if self._shared(key):
            return
        self.buf.append(TC_CLASS)
        self._class_desc(_class_object_desc(name))
        self._new_handle(key)

    def _array(self, class_name: str, values: Any, identity: Any) -> None:
        key = ("id", id(identity)) if identity is not None else None
        if key is not None and self._shared(key):
            return
        suid = _ARRAY_SUIDS.get(class_name)
        if suid is None:
            raise JavaWriteError(f"cannot write an array of class {class_name!r}: use one of {sorted(_ARRAY_SUIDS)}")
        self.buf.append(TC_ARRAY)
        self._class_desc(_ARRAY_DESCS[class_name])
        self._new_handle(key)
        if key is not None:
            self._keep.append(identity)
        values = list(values) if class_name != "[B" else bytes(values)
        self.buf += _PACK_I(len(values))
        fmt = _PRIM_ARRAY_FORMATS.get(class_name)
        if fmt == "b":
            self.buf += values
        elif fmt is not None:
            if fmt == "H":
                values = [ord(x) if isinstance(x, str) else x for x in values]
            try:
                self.buf += struct.pack(f">{len(values)}{fmt}", *values)
            except (struct.error, TypeError) as e:
                raise JavaWriteError(f"a value of {class_name} does not fit: {e}") from None
        elif class_name == "[Ljava.lang.String;":
            for x in values:
                if x is not None and not isinstance(x, str):
                    raise JavaWriteError(f"a String[] holds a {type(x).__name__}")
                self.write_object(x)
        elif class_name == "[Ljava.lang.Class;":
            for x in values:
                self.write_object(x if isinstance(x, JavaClass) or x is None else JavaClass(str(x)))
        else:
            for x in values:
                self.write_object(x)

    def _begin_object(self, d: _Desc, identity: Any) -> bool:
        """TC_OBJECT + descriptor + handle; False when ``identity`` was written before (a reference)."""
        key = ("id", id(identity))
        if self._shared(key):
            return False
        self.buf.append(TC_OBJECT)
        self._class_desc(d)
        self._new_handle(key)
        self._keep.append(identity)
        return True

    def _collection(self, d: _Desc, items: Any, identity: Any) -> None:
        if not self._begin_object(d, identity):
            return
        items = list(items)
        if d.name == "java.util.HashSet":
            items = [items[i] for i in _hash_order(items, _hashmap_capacity(len(items)))]
            cap = _hashmap_capacity(len(items))
            self._begin_block()
            self.write_raw(struct.pack(">ifi", cap, 0.75, len(items)))
        elif d.name == "java.util.Vector":                   # writeObject: writeFields() only
            self.buf += struct.pack(">ii", 0, len(items))     # capacityIncrement, elementCount
            self._array("[Ljava.lang.Object;", tuple(items), None)     # elementData (a clone: count long)
            self.buf.append(TC_ENDBLOCKDATA)
            return
        elif d.name == "java.util.ArrayList":
            self.buf += struct.pack(">i", len(items))         # field size
            self._begin_block()
            self.write_raw(struct.pack(">i", len(items)))     # capacity as Java writes it: the size
        else:                                                  # LinkedList
            self._begin_block()
            self.write_raw(struct.pack(">i", len(items)))
        for x in items:
            self.write_object(x)
        self._end_block()

    def _map(self, d: _Desc, entries: Mapping[Any, Any], identity: Any) -> None:
        if not self._begin_object(d, identity):
            return
        pairs = list(entries.items())
        n = len(pairs)
        if d.name == "java.util.TreeMap":
            try:
                pairs.sort(key=lambda kv: kv[0])
            except TypeError:
                raise JavaWriteError("a TreeMap's keys must be comparable with each other") from None
            self.buf.append(TC_NULL)                            # comparator: natural order
            self._begin_block()
            self.write_raw(struct.pack(">i", n))
        elif d.name == "java.util.HashMap":
            cap = _hashmap_capacity(n)
            pairs = [pairs[i] for i in _hash_order([k for k, _ in pairs], cap)]
            self.buf += struct.pack(">fi", 0.75, int(cap * 0.75))
            self._begin_block()
            self.write_raw(struct.pack(">ii", cap, n))
        else:                                                   # Hashtable(): 11 slots, rehashed as it grows
            cap = 11
            while n > int(cap * 0.75):
                cap = cap * 2 + 1
            self.buf += struct.pack(">fi", 0.75, int(cap * 0.75))
            self._begin_block()
            self.write_raw(struct.pack(">ii", cap, n))
        for k, val in pairs:
            self.write_object(k)
            self.write_object(val)
        self._end_block()

    def _throwable(self, t: JavaThrowable, _depth: int = 0) -> None:
        d = THROWABLES.get(t.class_name) or THROWABLES["java.lang.RuntimeException"]
        if not self._begin_object(d, t):
            return
        # Throwable's fields (no primitives): cause, detailMessage, stackTrace, suppressedExceptions
        if t.cause is None:
            self.write_object(t)            # "no cause" is cause == this: a reference to the object itself
        else:
            self.write_object(t.cause)
        self.write_object(t.message)
        self._stack_trace(t.stack_trace)
        self._empty_list()
        self._begin_block()                 # Throwable.writeObject: defaultWriteObject only
        self._end_block()

    def _stack_trace(self, frames: Sequence[StackFrame]) -> None:
        self.buf.append(TC_ARRAY)
        self._class_desc(_ARRAY_DESCS["[Ljava.lang.StackTraceElement;"])
        self._new_handle()
        self.buf += struct.pack(">i", len(frames))
        for f in frames:
            self.buf.append(TC_OBJECT)
            self._class_desc(_STACK_TRACE_ELEMENT)
            self._new_handle()
            self.buf += struct.pack(">bi", 0, int(f.line_number))
            for s in (None, f.declaring_class, f.file_name, f.method_name, None, None):
                self.write_object(s)

    def _empty_list(self) -> None:
        """Throwable's SUPPRESSED_SENTINEL (``Collections.emptyList()``): one object per stream."""
        if self._shared(("emptylist",)):
            return
        self.buf.append(TC_OBJECT)
        self._class_desc(_EMPTY_LIST)
        self._new_handle(("emptylist",))

    def _externalizable(self, v: Any) -> None:
        if not self._begin_object(v.JAVA_DESC, v):
            return
        self._begin_block()
        v.write_external(self)
        self._end_block()

    def _serializable(self, v: Any) -> None:
        """A Serializable object of a class without writeObject: ``v.serial_fields()`` gives its field values
        in its descriptor's field order (primitives first, then objects, as Java writes them)."""
        d = v.JAVA_DESC
        if not self._begin_object(d, v):
            return
        values = v.serial_fields()
        for (code, name, _sig), value in zip(d.fields, values):
            if code in _FIELD_FORMATS:
                try:
                    self.buf += struct.pack(_FIELD_FORMATS[code], value)
                except struct.error as e:
                    raise JavaWriteError(f"{d.name}.{name}: {e}") from None
            else:
                self.write_object(value)


#: per descriptor, what writing it (and its super classes) into a fresh stream gives, when that holds no
#: reference: (bytes, the handle keys it assigns in order); None when it does. Bounded: class names come from
#: callers (JavaClass), so at most _MAX_BLOBS descriptors are remembered
_DESC_BLOBS: dict[_Desc, tuple[bytes, tuple[Any, ...]] | tuple[()]] = {}
_MAX_BLOBS = 512


def _desc_blob(d: _Desc) -> tuple[bytes, tuple[Any, ...]] | tuple[()]:
    """What writing ``d`` into a fresh stream gives (``()`` when that holds a reference), remembered on ``d``
    itself and, for descriptors made anew per call, in the bounded :data:`_DESC_BLOBS`."""
    blob = _DESC_BLOBS.get(d)
    if blob is None:
        w = ObjectWriter(fast=False)
        w._write_desc(d)
        blob = () if w._refs else (bytes(w.buf[len(STREAM_HEADER):]),
                                   tuple(sorted(w._handles, key=w._handles.__getitem__)))
        if len(_DESC_BLOBS) < _MAX_BLOBS:
            _DESC_BLOBS[d] = blob
    object.__setattr__(d, "_blob", blob)
    return blob


def _desc_head(d: _Desc) -> bytes:
    """The bytes of ``d`` up to its super class (b"" when a field names a class: its signature string is an
    object, shared by value, so not the same bytes in every stream), made once and remembered on ``d``."""
    head: bytes | None = d._head
    if head is None:
        if any(sig is not None for _, _, sig in d.fields):
            head = b""
        else:
            w = ObjectWriter(fast=False)
            w._write_desc_fields(d)
            head = bytes(w.buf[len(STREAM_HEADER):])
        object.__setattr__(d, "_head", head)
    return head


def _class_object_desc(name: str) -> _Desc:
    """The descriptor ``writeObject(SomeClass.class)`` writes: flags and serialVersionUID as the JVM's
    ObjectStreamClass.lookupAny (non-serializable and primitive classes: 0, no fields). The same object for
    the same name (bounded: :data:`_MAX_BLOBS` names), so its remembered bytes are found without hashing."""
    d = _CLASS_OBJECT_DESCS.get(name)
    if d is None:
        d = _new_class_object_desc(name)
        if len(_CLASS_OBJECT_DESCS) < _MAX_BLOBS:
            _CLASS_OBJECT_DESCS[name] = d
    return d


_CLASS_OBJECT_DESCS: dict[str, _Desc] = {}


def _new_class_object_desc(name: str) -> _Desc:
    if name in _CLASS_SUIDS:
        if name in _COLLECTIONS or name in _MAPS:
            return _COLLECTIONS.get(name) or _MAPS[name]
        for d, _ in _BOXES.values():
            if d.name == name:
                return d
        if name == "java.lang.Number":
            return _NUMBER
        return _Desc(name, _CLASS_SUIDS[name])
    if name in THROWABLES:
        return THROWABLES[name]
    return _Desc(name, 0, 0)


def write_objects(*values: Any) -> bytes:
    """One object stream holding ``values`` (``writeObject`` each)."""
    w = ObjectWriter()
    for v in values:
        w.write_object(v)
    return w.getvalue()


def serialize(value: Any) -> bytes:
    """``ObjectOutputStream.writeObject(value)``'s bytes (stream header included)."""
    return write_objects(value)


# used by the MethodCall writer
SC_METHOD_CALL = _METHOD_CALL

_PACK_I = struct.Struct(">i").pack
_PACK_REF = struct.Struct(">Bi").pack
_PACK_STRING = struct.Struct(">BH").pack
_PACK_BB = struct.Struct(">BB").pack
_BYTE_ARRAY_DESC = _ARRAY_DESCS["[B"]
_OBJECT_ARRAY_DESC = _ARRAY_DESCS["[Ljava.lang.Object;"]
_CLASS_ARRAY_DESC = _ARRAY_DESCS["[Ljava.lang.Class;"]
_INTEGER_DESC = _BOXES["Integer"][0]
#: the handle keys of the Integers Java's valueOf caches (-128..127), made once
_SMALL_INT_KEYS = tuple(("box", "Integer", i) for i in range(-128, 128))

#: exact type -> the ObjectWriter method that writes it; what is not here (subclasses too) takes the general
#: isinstance route. Externalizable classes of other modules add themselves (MethodCall does)
FAST_WRITERS: dict[type, Any] = {
    str: ObjectWriter.write_string, bytes: ObjectWriter._fast_bytes, int: ObjectWriter._fast_int,
    type(None): ObjectWriter._fast_null, float: ObjectWriter._fast_float, bool: ObjectWriter._fast_bool,
    tuple: ObjectWriter._fast_tuple, JavaArray: ObjectWriter._fast_java_array, JavaClass: ObjectWriter._fast_class,
    JavaObject: ObjectWriter._fast_typed,
}

def c_writer_setup() -> dict[str, Any]:
    """What ``jgpy._core.mcall``'s MethodCall writer needs to write what this module writes: how to see a
    descriptor (its name, the bytes up to its super class, its super class), the descriptors it writes, the JLong
    type and Java's canonical NaN (``jgpy.blocks.methodcall`` passes them to its ``configure_writer``)."""
    def desc_parts(d: _Desc) -> tuple[str, bytes, _Desc | None]:
        return d.name, _desc_head(d), d.super
    return {"desc_info": desc_parts, "class_object_desc": _class_object_desc, "jlong_type": JLong,
            "object_array_desc": _OBJECT_ARRAY_DESC, "class_array_desc": _CLASS_ARRAY_DESC,
            "string_array_desc": _ARRAY_DESCS["[Ljava.lang.String;"], "byte_array_desc": _BYTE_ARRAY_DESC,
            "box_descs": {k: v[0] for k, v in _BOXES.items()}, "nan_bits": struct.pack(">d", math.nan)}


__all__ = ["BOXED_SUBCLASSES", "JavaClassDesc", "JByte", "JFloat", "JLong", "JShort", "JavaClass", "JavaCollection",
           "JavaMap", "JavaThrowable", "JavaWriteError", "MAX_BLOCK_SIZE", "c_writer_setup", "METHOD_CALL_CLASS",
           "ObjectWriter", "StackFrame", "THROWABLES", "java_hash", "serialize", "throwable_from_exception",
           "write_objects"]
