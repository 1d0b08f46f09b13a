"""What :class:`jgpy.javaser.ObjectInput` reads, as Python values (the inverse of :mod:`jgpy.javaser_write`).

Boxed numbers, booleans and characters become int, float, bool and str (a Long, Short, Byte or Float the int
and float subclasses JLong, JShort, JByte, JFloat, which the writer writes back as the same Java type); ``byte[]`` bytes; other arrays, lists
and ``LinkedList`` lists; sets sets; ``HashMap``/``Hashtable``/``TreeMap``/``LinkedHashMap`` dicts; a
``Throwable`` a :class:`JavaException` (class, message, stack trace, cause). What has no Python twin stays as the
reader gave it (:class:`~jgpy.javaser.JavaObject`, :class:`~jgpy.javaser.ClassDesc` for a ``Class``).
"""

from __future__ import annotations

from typing import Any

from jgpy.errors import JgpyError
from jgpy.javaser import ClassDesc, JavaArray, JavaEnum, JavaObject, ObjectInput
from jgpy.javaser_write import BOXED_SUBCLASSES, StackFrame

_BOXED = {"java.lang.Integer", "java.lang.Long", "java.lang.Short", "java.lang.Byte", "java.lang.Float",
          "java.lang.Double", "java.lang.Boolean", "java.lang.Character"}
_LISTS = {"java.util.ArrayList", "java.util.LinkedList", "java.util.Vector", "java.util.Stack",
          "java.util.concurrent.CopyOnWriteArrayList"}
_SETS = {"java.util.HashSet", "java.util.LinkedHashSet", "java.util.TreeSet"}
_MAPS = {"java.util.HashMap", "java.util.Hashtable", "java.util.TreeMap", "java.util.LinkedHashMap",
         "java.util.concurrent.ConcurrentHashMap", "java.util.Properties"}
_EMPTY = {"java.util.Collections$EmptyList": list, "java.util.Collections$EmptySet": set,
          "java.util.Collections$EmptyMap": dict}


class JavaException(JgpyError):
    """An exception thrown in Java (or any Throwable that crossed the wire): ``java_class``, ``message``,
    ``stack_trace`` (:class:`~jgpy.javaser_write.StackFrame` list) and ``cause`` (a JavaException or None)."""

    def __init__(self, java_class: str, message: str | None = None, stack_trace: list[StackFrame] | None = None,
                 cause: "JavaException | None" = None) -> None:
        super().__init__(f"{java_class}: {message}" if message is not None else java_class)
        self.java_class = java_class
        self.message = message
        self.stack_trace = stack_trace or []
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause


def _is_throwable(desc: ClassDesc | None) -> bool:
    while desc is not None:
        if desc.name == "java.lang.Throwable":
            return True
        desc = desc.super_desc
    return False


def _fields(obj: JavaObject) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for values in obj.fields.values():
        merged.update(values)
    return merged


def to_python(value: Any) -> Any:
    """``value`` (as read by ObjectInput) with JDK values turned into their Python twins."""
    return _Converter().convert(value)


class _Converter:
    def __init__(self) -> None:
        self._done: dict[int, Any] = {}          # id(read object) -> its Python value (shared objects, cycles)

    def convert(self, v: Any) -> Any:
        if v is None or isinstance(v, (str, int, float, bytes, ClassDesc, JavaEnum)):
            return v
        key = id(v)
        if key in self._done:
            return self._done[key]
        if isinstance(v, JavaArray):
            if isinstance(v.values, (bytes, bytearray)):
                out: Any = bytes(v.values)
                self._done[key] = out
                return out
            if v.class_name == "[C":
                lst: list[Any] = [chr(c) for c in v.values]
                self._done[key] = lst
                return lst
            if v.class_name == "[Z":
                lst = [bool(c) for c in v.values]
                self._done[key] = lst
                return lst
            lst = []
            self._done[key] = lst
            lst.extend(self.convert(x) for x in v.values)
            return lst
        if isinstance(v, JavaObject):
            return self._object(v)
        return v

    def _object(self, obj: JavaObject) -> Any:
        name = obj.class_name
        key = id(obj)
        if name in _BOXED:
            value = _fields(obj).get("value")
            if name == "java.lang.Character" and isinstance(value, int):
                value = chr(value)
            box = BOXED_SUBCLASSES.get(name[10:])
            if box is not None and value is not None:
                value = box(value)
            self._done[key] = value
            return value
        if name in _EMPTY:
            out = _EMPTY[name]()
            self._done[key] = out
            return out
        if name in ("java.util.Vector", "java.util.Stack"):     # writeFields(): the elements are a field
            f = _fields(obj)
            data, count = f.get("elementData"), f.get("elementCount")
            values = data.values if isinstance(data, JavaArray) and isinstance(data.values, list) else []
            n = count if isinstance(count, int) and 0 <= count <= len(values) else len(values)
            elements: list[Any] = []
            self._done[key] = elements
            elements.extend(self.convert(x) for x in values[:n])
            return elements
        objects = [o for _, objs in obj.annotations.values() for o in objs]
        if name in _LISTS:
            lst: list[Any] = []
            self._done[key] = lst
            lst.extend(self.convert(x) for x in objects)
            return lst
        if name in _SETS:
            items = [self.convert(x) for x in objects]
            try:
                out = set(items)
            except TypeError:          # unhashable elements (a set of lists): a list keeps them
                out = items
            self._done[key] = out
            return out
        if name in _MAPS:
            pairs = [(self.convert(objects[i]), self.convert(objects[i + 1])) for i in range(0, len(objects) - 1, 2)]
            try:
                out = dict(pairs)
            except TypeError:          # unhashable keys: the pairs
                out = pairs
            self._done[key] = out
            return out
        if name == "java.util.Arrays$ArrayList":
            return self.convert(_fields(obj).get("a"))
        if _is_throwable(obj.desc):
            return self._throwable(obj)
        return obj

    def _throwable(self, obj: JavaObject) -> JavaException:
        f = _fields(obj)
        msg = f.get("detailMessage")
        exc = JavaException(obj.class_name, msg if isinstance(msg, str) else None)
        self._done[id(obj)] = exc
        trace = f.get("stackTrace")
        if isinstance(trace, JavaArray) and isinstance(trace.values, list):
            for el in trace.values:
                if isinstance(el, JavaObject):
                    ef = _fields(el)
                    line = ef.get("lineNumber")
                    exc.stack_trace.append(StackFrame(str(ef.get("declaringClass")), str(ef.get("methodName")),
                                                      ef.get("fileName") if isinstance(ef.get("fileName"), str)
                                                      else None, line if isinstance(line, int) else -1))
        cause = f.get("cause")
        if cause is not None and cause is not obj:
            c = self.convert(cause)
            if isinstance(c, JavaException) and c is not exc:
                exc.cause = c
                exc.__cause__ = c
        return exc


def deserialize(data: bytes) -> Any:
    """One object from a Java object stream (``ObjectInputStream.readObject``), as a Python value; the bytes
    bound everything read (see :class:`~jgpy.javaser.ObjectInput`)."""
    return to_python(ObjectInput.from_bytes(data).read_object())


__all__ = ["JavaException", "deserialize", "to_python"]
