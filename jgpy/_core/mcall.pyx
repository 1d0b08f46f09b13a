# cython: language_level=3, boundscheck=False, wraparound=False
# Every read below checks its bounds by hand (_need) before it touches the buffer.
"""A MethodCall both ways in C, for the shapes remote calls send: read straight from its Java object stream (the
reader behind :mod:`jgpy.blocks.methodcall_read`, whose docstring says which shapes it takes and what it gives
for the others), and written (:func:`method_call_stream`, behind ``MethodCall.to_stream``).

The core imports nothing above it: what the reader needs from :mod:`jgpy.javaser` (the modified UTF-8 decoder,
the depth limit) comes through :func:`configure`, called by ``methodcall_read``; what the writer needs from
:mod:`jgpy.javaser_write` (the class descriptors, the types of the values) through :func:`configure_writer`,
called by :mod:`jgpy.blocks.methodcall`. Anything either does not know gives None: the general reader or writer
then does the whole stream, and gives its value, its bytes or its error."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_FromVoidPtr
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.list cimport PyList_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeASCII
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

cdef extern from "Python.h":
    int PyUnicode_IS_ASCII(object o)

cdef enum:
    TC_NULL = 0x70
    TC_REFERENCE = 0x71
    TC_CLASSDESC = 0x72
    TC_OBJECT = 0x73
    TC_STRING = 0x74
    TC_ARRAY = 0x75
    TC_CLASS = 0x76
    TC_BLOCKDATA = 0x77
    TC_ENDBLOCKDATA = 0x78
    BASE_WIRE_HANDLE = 0x7E0000
    SC_SERIALIZABLE = 0x02
    SC_EXTERNALIZABLE = 0x04
    SC_BLOCK_DATA = 0x08

#: how long a descriptor's super class chain may be here (Integer -> Number: 2); longer: the general reader
MAX_SUPER_CHAIN = 4
cdef int _MAX_SUPER_CHAIN = MAX_SUPER_CHAIN
cdef bytes _STREAM_HEADER = b"\xac\xed\x00\x05"
#: descriptors read before: key (name .. field count, as written) -> (the descriptor's bytes, the handles it took,
#: the Desc); only descriptors without back-references, at most _MAX_SPAN bytes each and _MAX_SPANS in all (a
#: stranger's descriptors can fill it, never grow it)
cdef dict _SPANS = {}
cdef Py_ssize_t _MAX_SPANS = 256
cdef Py_ssize_t _MAX_SPAN = 1024
cdef object _PENDING = object()   # the handle of an array being read (a reference to it: unsupported)

# set by configure()
cdef object _decode_mutf8 = None
cdef object _text_error = None    # what _decode_mutf8 raises for text that is not modified UTF-8
cdef int _max_depth = 64
cdef dict _BOXES = {}             # class name -> _Box

cdef enum BoxKind:
    BOX_INT
    BOX_LONG
    BOX_DOUBLE
    BOX_BOOL


cdef class _Box:
    cdef str code                 # the value field's type code
    cdef BoxKind kind
    cdef object pytype            # what the general reader's value becomes
    cdef object super_name        # the super class it must have (java.lang.Number), or None


def configure(decode_mutf8, text_error, int max_depth, object long_type) -> None:
    """What the reader takes from the layers above: ``jgpy.javaser``'s modified UTF-8 decoder, the error it
    raises, and the depth limit, and the Python type of a boxed Long (``jgpy.javaser_write.JLong``)."""
    global _decode_mutf8, _text_error, _max_depth
    _decode_mutf8 = decode_mutf8
    _text_error = text_error
    _max_depth = max_depth
    _BOXES.clear()
    for name, code, kind, pytype, sup in (("java.lang.Integer", "I", BOX_INT, int, "java.lang.Number"),
                                          ("java.lang.Long", "J", BOX_LONG, long_type, "java.lang.Number"),
                                          ("java.lang.Double", "D", BOX_DOUBLE, float, "java.lang.Number"),
                                          ("java.lang.Boolean", "Z", BOX_BOOL, bool, None)):
        b = _Box()
        b.code, b.kind, b.pytype, b.super_name = code, kind, pytype, sup
        _BOXES[name] = b


class _Unsupported(Exception):
    """Not a shape this reader knows: the general reader decides."""


cdef class Desc:
    """A class descriptor as read: name, flags, fields ((type code, name), ...), super class, and how many classes
    its chain holds (0 while it is being read: a reference to it then would make a loop)."""

    cdef public str name
    cdef public int flags
    cdef public tuple fields
    cdef public Desc super
    cdef public int chain

    def __init__(self, str name, int flags):
        self.name = name
        self.flags = flags
        self.fields = ()
        self.super = None
        self.chain = 0


class Names(list):
    """The names of a ``Class[]`` or ``String[]`` of types."""


cdef class Parts:
    """What a MethodCall's writeExternal wrote: its block data (joined) and its objects, as Python values
    (arguments: a list; types: a :class:`Names`; the declaring class: a :class:`Desc`)."""

    cdef public bytes block
    cdef public list objects

    def __init__(self, bytes block, list objects):
        self.block = block
        self.objects = objects


cdef class _Reader:
    cdef bytes data
    cdef const unsigned char* buf
    cdef Py_ssize_t n
    cdef Py_ssize_t pos
    cdef list handles
    cdef Py_ssize_t refs              # back-references resolved (a remembered span has none)

    def __cinit__(self, bytes data, Py_ssize_t pos):
        self.data = data
        self.buf = <const unsigned char*>PyBytes_AS_STRING(data)
        self.n = PyBytes_GET_SIZE(data)
        self.pos = pos
        self.handles = []
        self.refs = 0

    # ---- primitives (past the end: _Unsupported, the caller falls back)

    cdef inline int _need(self, Py_ssize_t k) except -1:
        if k < 0 or self.pos + k > self.n:
            raise _Unsupported
        return 0

    cdef inline int u1(self) except -1:
        self._need(1)
        self.pos += 1
        return self.buf[self.pos - 1]

    cdef inline uint16_t u2(self) except? 0xFFFF:
        cdef const unsigned char* p
        self._need(2)
        p = self.buf + self.pos
        self.pos += 2
        return <uint16_t>((p[0] << 8) | p[1])

    cdef inline int32_t i4(self) except? -1:
        cdef const unsigned char* p
        self._need(4)
        p = self.buf + self.pos
        self.pos += 4
        return <int32_t>((<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | p[3])

    cdef inline uint64_t u8(self) except? 0:
        cdef const unsigned char* p
        cdef uint64_t v = 0
        cdef int i
        self._need(8)
        p = self.buf + self.pos
        self.pos += 8
        for i in range(8):
            v = (v << 8) | p[i]
        return v

    cdef bytes take(self, Py_ssize_t k):
        self._need(k)
        self.pos += k
        return PyBytes_FromStringAndSize(<const char*>self.buf + self.pos - k, k)

    cdef str text(self):
        cdef Py_ssize_t k = self.u2()
        cdef const unsigned char* p
        cdef Py_ssize_t i
        self._need(k)
        p = self.buf + self.pos
        self.pos += k
        for i in range(k):
            if p[i] >= 0x80:
                return _decode_mutf8(PyBytes_FromStringAndSize(<const char*>p, k))
        return PyUnicode_DecodeASCII(<const char*>p, k, NULL)

    cdef object ref(self):
        cdef Py_ssize_t h
        self.refs += 1
        h = <Py_ssize_t>self.i4() - BASE_WIRE_HANDLE
        if not 0 <= h < PyList_GET_SIZE(self.handles):
            raise _Unsupported
        v = self.handles[h]
        if v is _PENDING:
            raise _Unsupported
        return v

    # ---- class descriptors

    cdef Desc desc(self, int chain=0):
        """A descriptor (TC_CLASSDESC, a reference to one, or null), handles taken in the general reader's order:
        the descriptor's, then its fields' signature strings, then its super class's. One read before with the
        same bytes (and no reference inside) is taken from _SPANS."""
        cdef int tc = self.u1()
        cdef Py_ssize_t p, klen, first, refs
        cdef bytes span
        cdef tuple hit
        if tc == TC_REFERENCE:
            d = self.ref()
            if not isinstance(d, Desc) or not (<Desc>d).chain:      # not a descriptor, or one still being read
                raise _Unsupported
            return <Desc>d
        if tc == TC_NULL:
            return None
        if tc != TC_CLASSDESC or chain >= _MAX_SUPER_CHAIN:
            raise _Unsupported
        p = self.pos
        if p + 2 > self.n:
            raise _Unsupported
        klen = 13 + ((self.buf[p] << 8) | self.buf[p + 1])           # name, serialVersionUID, flags, field count
        if klen > self.n - p:
            klen = self.n - p
        key = PyBytes_FromStringAndSize(<const char*>self.buf + p, klen)
        hit = _SPANS.get(key)
        if hit is not None:
            span = <bytes>hit[0]
            if PyBytes_GET_SIZE(span) <= self.n - p and memcmp(PyBytes_AS_STRING(span), self.buf + p,
                                                                PyBytes_GET_SIZE(span)) == 0:
                self.pos = p + PyBytes_GET_SIZE(span)
                self.handles.extend(<tuple>hit[1])
                return <Desc>hit[2]
        first, refs = PyList_GET_SIZE(self.handles), self.refs
        d = self._new_desc(chain)
        if self.refs == refs and self.pos - p <= _MAX_SPAN and len(_SPANS) < _MAX_SPANS:
            _SPANS[key] = (PyBytes_FromStringAndSize(<const char*>self.buf + p, self.pos - p),
                           tuple(self.handles[first:]), d)
        return d

    cdef Desc _new_desc(self, int chain):
        cdef str name = self.text()
        cdef Desc d, sup
        cdef int code, tc
        cdef Py_ssize_t i, count
        self._need(8)
        self.pos += 8                                   # serialVersionUID: the general reader keeps, never checks it
        d = Desc(name, self.u1())
        self.handles.append(d)
        fields = []
        count = self.u2()
        for i in range(count):
            code = self.u1()
            fname = self.text()
            if code == 0x4C or code == 0x5B:            # 'L', '[': an object's type signature, a String
                tc = self.u1()
                if tc == TC_STRING:
                    self.handles.append(self.text())
                elif tc != TC_REFERENCE or not isinstance(self.ref(), str):
                    raise _Unsupported
            elif code not in (0x42, 0x43, 0x44, 0x46, 0x49, 0x4A, 0x53, 0x5A):     # B C D F I J S Z
                raise _Unsupported
            fields.append((chr(code), fname))
        d.fields = tuple(fields)
        if self.u1() != TC_ENDBLOCKDATA:                # class annotations
            raise _Unsupported
        sup = self.desc(chain + 1)
        d.super = sup
        d.chain = 1 + (sup.chain if sup is not None else 0)
        if d.chain > _max_depth:                        # the general reader refuses such chains
            raise _Unsupported
        return d

    # ---- values

    cdef object value(self):
        """An argument: null, a String, a byte[], a boxed Integer/Long/Boolean/Double, or a reference to one."""
        cdef int tc = self.u1()
        cdef Desc d
        cdef Py_ssize_t h
        if tc == TC_STRING:
            s = self.text()
            self.handles.append(s)
            return s
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            v = self.ref()
            if isinstance(v, (Desc, Names, list)):
                raise _Unsupported
            return v
        if tc == TC_ARRAY:
            d = self.desc()
            if d is None or d.name != "[B":
                raise _Unsupported
            h = PyList_GET_SIZE(self.handles)
            self.handles.append(_PENDING)
            v = self.take(self.i4())
            self.handles[h] = v
            return v
        if tc == TC_OBJECT:
            return self.box(self.desc())
        raise _Unsupported

    cdef object box(self, Desc d):
        """A boxed value whose descriptors have exactly the JDK's layout (what the general reader's fields
        would hold: the one ``value`` field, nothing from the super class)."""
        cdef _Box spec
        cdef Desc sup
        cdef uint64_t bits
        cdef double dv
        if d is None:
            raise _Unsupported
        spec = _BOXES.get(d.name)
        if spec is None or d.flags != SC_SERIALIZABLE or d.fields != ((spec.code, "value"),):
            raise _Unsupported
        sup = d.super
        if spec.super_name is None:
            if sup is not None:
                raise _Unsupported
        elif (sup is None or sup.name != spec.super_name or sup.flags != SC_SERIALIZABLE or sup.fields
              or sup.super is not None):
            raise _Unsupported
        if spec.kind == BOX_INT:
            v = spec.pytype(self.i4())
        elif spec.kind == BOX_LONG:
            v = spec.pytype(<int64_t>self.u8())
        elif spec.kind == BOX_DOUBLE:
            bits = self.u8()
            memcpy(&dv, &bits, 8)
            v = spec.pytype(dv)
        else:
            v = spec.pytype(self.u1() != 0)
        self.handles.append(v)
        return v

    cdef object array(self):
        """An array among the call's objects: the arguments (Object[]), or the types (Class[], String[])."""
        cdef Desc d = self.desc()
        cdef Py_ssize_t h, k, i
        cdef object out                  # a list, or Names (a list subclass)
        if d is None:
            raise _Unsupported
        h = PyList_GET_SIZE(self.handles)
        self.handles.append(_PENDING)
        k = self.i4()
        if k < 0 or k > self.n - self.pos:              # every element takes a byte at least
            raise _Unsupported
        if d.name == "[Ljava.lang.Object;":
            out = [self.value() for i in range(k)]
        elif d.name == "[Ljava.lang.Class;":
            out = Names([self.class_name() for i in range(k)])
        elif d.name == "[Ljava.lang.String;":
            out = Names([self.string() for i in range(k)])
        else:
            raise _Unsupported
        self.handles[h] = out
        return out

    cdef str class_name(self):
        """A Class object's name (TC_CLASS and its descriptor, or a reference to a class or descriptor)."""
        cdef int tc = self.u1()
        cdef Desc d
        if tc == TC_CLASS:
            d = self.desc()
            if d is None:
                raise _Unsupported
            self.handles.append(d)
            return d.name
        if tc == TC_REFERENCE:
            v = self.ref()
            if isinstance(v, Desc):
                return (<Desc>v).name
            if isinstance(v, str):
                return v
        raise _Unsupported

    cdef str string(self):
        v = self.value()
        if not isinstance(v, str):
            raise _Unsupported
        return v

    cdef Parts external(self):
        """The MethodCall's writeExternal: block data and objects until TC_ENDBLOCKDATA."""
        cdef list blocks = []
        cdef list objects = []
        cdef int tc
        cdef Desc d
        while True:
            tc = self.u1()
            if tc == TC_BLOCKDATA:
                blocks.append(self.take(self.u1()))
            elif tc == TC_ENDBLOCKDATA:
                return Parts(b"".join(blocks), objects)
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


def method_call_parts(data, str class_name):
    """The block data and objects of the MethodCall in ``data`` (a Java object stream, bytes), or None when the
    stream is not of the shape this reader takes (see :mod:`jgpy.blocks.methodcall_read`)."""
    return _parts(data, class_name)


cdef Parts _parts(data, str class_name):
    cdef _Reader r
    cdef Desc d
    if _decode_mutf8 is None:
        raise RuntimeError("jgpy._core.mcall.configure() was not called (import jgpy.blocks.methodcall_read)")
    if type(data) is not bytes:
        data = bytes(data)
    if PyBytes_GET_SIZE(data) < 5 or memcmp(PyBytes_AS_STRING(data), PyBytes_AS_STRING(_STREAM_HEADER), 4) != 0 \
            or (<const unsigned char*>PyBytes_AS_STRING(data))[4] != TC_OBJECT:
        return None
    r = _Reader(data, 5)
    try:
        d = r.desc()
        if (d is None or d.name != class_name or d.super is not None
                or d.flags & (SC_EXTERNALIZABLE | SC_BLOCK_DATA) != SC_EXTERNALIZABLE | SC_BLOCK_DATA):
            return None
        r.handles.append(_PENDING)                      # the MethodCall itself
        return r.external()
    except (_Unsupported, _text_error):
        return None         # the general reader reads it, or gives its own error


cdef enum:
    MODE_OLD = 1
    MODE_METHOD = 2
    MODE_TYPES = 3
    MODE_SIGNATURE = 4
    MODE_ID = 5


def method_call_fields(data, str class_name):
    """What :func:`method_call_parts` reads, assembled as ``MethodCall.readExternal`` does: ``(mode, name,
    args, types, method_id, declaring_class)``; None for a stream of another shape, for block data that ends
    early, a mode that is not 1..5, or objects that do not fit the mode (the general reader then gives the value
    or the error)."""
    cdef Parts parts = _parts(data, class_name)
    cdef _Reader b
    cdef list objects
    cdef int mode
    cdef int method_id = 0
    cdef object name = None, types = None, declaring = None, args
    if parts is None:
        return None
    b = _Reader(parts.block, 0)
    objects = parts.objects
    try:
        if b.u1():
            name = b.text()
        else:
            method_id = <short>b.u2()
        if not objects:
            return None
        raw_args = objects[0]
        if raw_args is None:
            args = []
        elif type(raw_args) is list:
            args = raw_args
        else:
            return None
        mode = <short>b.u2()
        if mode == MODE_METHOD or mode == MODE_TYPES or mode == MODE_SIGNATURE:
            if len(objects) < 2 or not isinstance(objects[1], Names):
                return None
            types = list(objects[1])
            if mode == MODE_METHOD:
                if len(objects) < 3 or not isinstance(objects[2], Desc):
                    return None
                declaring = (<Desc>objects[2]).name
        elif mode != MODE_OLD and mode != MODE_ID:
            return None
    except (_Unsupported, _text_error):
        return None
    return mode, name, args, types, method_id, declaring


def spans_held() -> int:
    """How many descriptors are remembered (bounded by 256, whatever a stranger sends)."""
    return len(_SPANS)


# ---- writing ------------------------------------------------------------------------------------------------

cdef enum:
    MAX_BLOCK = 1024              # the general writer's block data size (ObjectOutputStream's)
    NAMED_INLINE = 8              # descriptor / Class handles a stream keeps in C arrays (a call has 3-6)
    HOT_DESCS = 64                # a direct-mapped cache of _DESC_INFO by the descriptor's address
    MAX_DESC_INFO = 512           # descriptors remembered (class objects of type names: the writer's own bound)

# set by configure_writer()
cdef object _desc_info = None     # a descriptor -> (name, head bytes or b"" (fields with signatures), super)
cdef object _class_object_desc = None
cdef object _java_object_type = None
cdef object _jlong_type = None
cdef object _mc_desc = None       # org.jgroups.blocks.MethodCall
cdef object _object_array_desc = None
cdef object _class_array_desc = None
cdef object _string_array_desc = None
cdef object _byte_array_desc = None
cdef dict _box_descs = {}         # "Integer" ... -> descriptor
cdef uint64_t _nan_bits = 0       # Java's canonical NaN, as the general writer writes it
cdef dict _CLASS_DESCS = {}       # type name -> the descriptor of its Class object (bounded by MAX_DESC_INFO)
cdef PyObject* _hot_desc[HOT_DESCS]   # owned references: a descriptor and its _DESC_INFO entry, by address
cdef PyObject* _hot_info[HOT_DESCS]


cdef void _hot_clear() noexcept:
    cdef int i
    for i in range(HOT_DESCS):
        Py_XDECREF(_hot_desc[i])
        Py_XDECREF(_hot_info[i])
        _hot_desc[i] = _hot_info[i] = NULL


cdef tuple _desc_info_of(object d):
    """``(name, head bytes, super, d)`` of descriptor ``d``: from the hot cache, else _DESC_INFO, else the layer
    above (``desc_info``)."""
    cdef size_t slot = (<size_t><PyObject*>d >> 4) % HOT_DESCS
    cdef tuple info
    cdef PyObject* old_d
    cdef PyObject* old_i
    if _hot_desc[slot] == <PyObject*>d:
        return <tuple><object>_hot_info[slot]
    key = PyLong_FromVoidPtr(<void*>d)            # id(d)
    info = _DESC_INFO.get(key)
    if info is None or info[3] is not d:
        info = (*_desc_info(d), d)
        if len(_DESC_INFO) < MAX_DESC_INFO:
            _DESC_INFO[key] = info
    old_d, old_i = _hot_desc[slot], _hot_info[slot]
    Py_INCREF(d)
    Py_INCREF(info)
    _hot_desc[slot], _hot_info[slot] = <PyObject*>d, <PyObject*>info
    Py_XDECREF(old_d)                              # last: a deallocation may run Python code
    Py_XDECREF(old_i)
    return info
cdef dict _DESC_INFO = {}         # id(descriptor) -> (name, head, super, descriptor): by identity, as a frozen
#                                   dataclass's hash is Python code (five lookups per call); the entry keeps it alive


def configure_writer(desc_info, class_object_desc, java_object_type, jlong_type, method_call_desc,
                     object_array_desc, class_array_desc, string_array_desc, byte_array_desc, dict box_descs,
                     bytes nan_bits) -> None:
    """What the writer takes from ``jgpy.javaser_write`` and ``jgpy.blocks.methodcall``: how to see a descriptor
    (``desc_info(d)`` -> (name, the bytes of its fields part or b"", its super class)), the descriptor of a
    ``Class`` object by name, the value types (JavaObject, JLong), the descriptors it writes, and the NaN."""
    global _desc_info, _class_object_desc, _java_object_type, _jlong_type, _mc_desc, _object_array_desc
    global _class_array_desc, _string_array_desc, _byte_array_desc, _box_descs, _nan_bits
    _desc_info, _class_object_desc = desc_info, class_object_desc
    _java_object_type, _jlong_type = java_object_type, jlong_type
    _mc_desc, _object_array_desc, _class_array_desc = method_call_desc, object_array_desc, class_array_desc
    _string_array_desc, _byte_array_desc = string_array_desc, byte_array_desc
    _box_descs = dict(box_descs)
    _nan_bits = int.from_bytes(nan_bits, "big")
    _DESC_INFO.clear()
    _CLASS_DESCS.clear()
    _hot_clear()


class _NotHere(Exception):
    """Not a call this writer writes: the general writer does the whole stream."""


cdef struct _Named:
    int n                         # entries in name/handle (the rest are in the stream's dict)
    PyObject* name[NAMED_INLINE]  # owned references
    int handle[NAMED_INLINE]


cdef int _named_find(_Named* t, dict more, str name) except -2:
    """The handle of ``name`` in ``t`` (or ``more``, past its first NAMED_INLINE), else -1."""
    cdef int i
    for i in range(t.n):
        if <str><object>t.name[i] == name:              # (identity first, then the text)
            return t.handle[i]
    if more:
        h = more.get(name)
        if h is not None:
            return <int>h
    return -1


cdef int _named_add(_Named* t, dict more, str name, int handle) except -1:
    if t.n < NAMED_INLINE:
        Py_INCREF(name)
        t.name[t.n] = <PyObject*>name
        t.handle[t.n] = handle
        t.n += 1
    else:
        more[name] = handle
    return 0


cdef void _named_clear(_Named* t) noexcept:
    cdef int i
    for i in range(t.n):
        Py_DECREF(<object>t.name[i])
    t.n = 0


cdef class _Out:
    """The stream being written, with the general writer's handles: strings by value, descriptors by name,
    Class objects by name, the cached boxes (-128..127, booleans) by value; everything else gets a fresh one.
    Descriptor and Class handles are looked up by name in small C arrays (dicts past NAMED_INLINE)."""

    cdef char* buf
    cdef Py_ssize_t n, cap
    cdef int next
    cdef dict strings, descs, classes, boxes
    cdef _Named _descs, _classes
    cdef char block[MAX_BLOCK]
    cdef Py_ssize_t blen

    def __cinit__(self):
        self.cap = 512
        self.buf = <char*>PyMem_Malloc(self.cap)
        if self.buf == NULL:
            raise MemoryError()
        self.n = 0
        self.next = BASE_WIRE_HANDLE
        self.strings, self.descs, self.classes, self.boxes = {}, {}, {}, {}
        self._descs.n = self._classes.n = 0
        self.blen = 0

    def __dealloc__(self):
        _named_clear(&self._descs)
        _named_clear(&self._classes)
        PyMem_Free(self.buf)

    cdef int room(self, Py_ssize_t k) except -1:
        cdef Py_ssize_t cap = self.cap
        cdef char* nb
        if self.n + k <= cap:
            return 0
        while cap < self.n + k:
            cap *= 2
        nb = <char*>PyMem_Realloc(self.buf, cap)
        if nb == NULL:
            raise MemoryError()
        self.buf, self.cap = nb, cap
        return 0

    cdef int put(self, const char* p, Py_ssize_t k) except -1:
        self.room(k)
        memcpy(self.buf + self.n, p, k)
        self.n += k
        return 0

    cdef int put1(self, int b) except -1:
        self.room(1)
        self.buf[self.n] = <char>b
        self.n += 1
        return 0

    cdef int put_be(self, uint64_t v, int width) except -1:
        cdef int i
        self.room(width)
        for i in range(width):
            self.buf[self.n + i] = <char>((v >> (8 * (width - 1 - i))) & 0xFF)
        self.n += width
        return 0

    cdef int ref(self, int handle) except -1:
        self.flush_block()
        self.put1(TC_REFERENCE)
        self.put_be(<uint64_t><uint32_t>handle, 4)
        return 0

    # ---- block data (the MethodCall's writeExternal primitives)

    cdef int raw(self, const char* p, Py_ssize_t k) except -1:
        if self.blen + k > MAX_BLOCK:
            raise _NotHere                      # the general writer splits long block data
        memcpy(self.block + self.blen, p, k)
        self.blen += k
        return 0

    cdef int flush_block(self) except -1:
        if self.blen:
            if self.blen > 0xFF:
                raise _NotHere                  # TC_BLOCKDATALONG: the general writer
            self.put1(TC_BLOCKDATA)
            self.put1(<int>self.blen)
            self.put(self.block, self.blen)
            self.blen = 0
        return 0

    # ---- descriptors, strings, values

    cdef int desc(self, object d) except -1:
        cdef tuple info
        cdef int h
        if d is None:
            self.put1(TC_NULL)
            return 0
        info = _desc_info_of(d)
        h = _named_find(&self._descs, self.descs, <str?>info[0])
        if h >= 0:
            return self.ref(h)
        if not PyBytes_GET_SIZE(<bytes>info[1]):
            raise _NotHere                      # fields that name classes: signature strings, shared by value
        self.put(PyBytes_AS_STRING(<bytes>info[1]), PyBytes_GET_SIZE(<bytes>info[1]))
        _named_add(&self._descs, self.descs, <str?>info[0], self.next)
        self.next += 1
        return self.desc(info[2])

    cdef int string(self, str s) except -1:
        cdef Py_ssize_t k
        cdef const char* p
        cdef object h = self.strings.get(s)
        self.flush_block()
        if h is not None:
            return self.ref(h)
        if not PyUnicode_IS_ASCII(s) or "\0" in s:
            raise _NotHere                      # modified UTF-8 beyond ASCII: the general writer
        p = PyUnicode_AsUTF8AndSize(s, &k)
        if k > 0xFFFF:
            raise _NotHere                      # TC_LONGSTRING
        self.put1(TC_STRING)
        self.put_be(<uint64_t>k, 2)
        self.put(p, k)
        self.strings[s] = self.next
        self.next += 1
        return 0

    cdef int byte_array(self, bytes v) except -1:
        self.put1(TC_ARRAY)
        self.desc(_byte_array_desc)
        self.next += 1
        self.put_be(<uint64_t><uint32_t>PyBytes_GET_SIZE(v), 4)
        self.put(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v))
        return 0

    cdef int box(self, str jtype, uint64_t bits, int width, bint cached, object key) except -1:
        """TC_OBJECT, the box's descriptor, a handle (remembered by ``key`` when the JVM caches the value) and the
        value's ``width`` bytes."""
        cdef object h
        if cached:
            h = self.boxes.get(key)
            if h is not None:
                return self.ref(h)
        self.put1(TC_OBJECT)
        self.desc(_box_descs[jtype])
        if cached:
            self.boxes[key] = self.next
        self.next += 1
        self.put_be(bits, width)
        return 0

    cdef int integer(self, str jtype, object v) except -1:
        cdef int64_t x
        if type(v) is not int and type(v) is not _jlong_type:
            raise _NotHere
        if not -(1 << 63) <= v < (1 << 63):
            raise _NotHere                      # no Java long: the general writer's error
        x = v
        if jtype == "Integer":
            if not -(1 << 31) <= x < (1 << 31):
                raise _NotHere
            return self.box(jtype, <uint64_t><uint32_t><int32_t>x, 4, -128 <= x <= 127, (jtype, x))
        return self.box(jtype, <uint64_t>x, 8, -128 <= x <= 127, (jtype, x))

    cdef int double(self, object v) except -1:
        cdef double dv
        cdef uint64_t bits
        if type(v) is not float:
            raise _NotHere
        dv = v
        if dv != dv:
            bits = _nan_bits
        else:
            memcpy(&bits, &dv, 8)
        return self.box("Double", bits, 8, False, None)

    cdef int boolean(self, bint v) except -1:
        return self.box("Boolean", v, 1, True, ("Boolean", <int>v))

    cdef int value(self, object v) except -1:
        """One argument of the Object[] (what ``java_args`` gave)."""
        cdef type t = type(v)
        self.flush_block()
        if v is None:
            return self.put1(TC_NULL)
        if t is str:
            return self.string(<str>v)
        if t is bytes:
            return self.byte_array(<bytes>v)
        if t is bool:
            return self.boolean(v)
        if t is int:
            if -(1 << 31) <= v < (1 << 31):
                return self.integer("Integer", v)
            return self.integer("Long", v)
        if t is float:
            return self.double(v)
        if t is _jlong_type:
            return self.integer("Long", v)
        if t is _java_object_type:
            jtype, jv = v.type, v.value
            if jtype == "Integer" or jtype == "Long":
                if type(jv) is bool:
                    raise _NotHere
                return self.integer(jtype, jv)
            if jtype == "Double":
                return self.double(jv)
            if jtype == "Boolean" and type(jv) is bool:
                return self.boolean(jv)
            if jtype == "String" and type(jv) is str:
                return self.string(<str>jv)
        raise _NotHere

    cdef int class_object(self, str name) except -1:
        cdef int h = _named_find(&self._classes, self.classes, name)
        self.flush_block()
        if h >= 0:
            return self.ref(h)
        self.put1(TC_CLASS)
        d = _CLASS_DESCS.get(name)
        if d is None:
            d = _class_object_desc(name)
            if len(_CLASS_DESCS) < MAX_DESC_INFO:
                _CLASS_DESCS[name] = d
        self.desc(d)
        _named_add(&self._classes, self.classes, name, self.next)
        self.next += 1
        return 0

    cdef int utf(self, str s) except -1:
        """``writeUTF`` into the block data (ASCII without NUL only: the rest is the general writer's)."""
        cdef Py_ssize_t k
        cdef const char* p
        cdef char hdr[2]
        if not PyUnicode_IS_ASCII(s) or "\0" in s:
            raise _NotHere
        p = PyUnicode_AsUTF8AndSize(s, &k)
        hdr[0] = <char>((k >> 8) & 0xFF)
        hdr[1] = <char>(k & 0xFF)
        self.raw(hdr, 2)
        return self.raw(p, k)

    cdef bytes getvalue(self):
        return PyBytes_FromStringAndSize(self.buf, self.n)


def method_call_stream(int mode, name, method_id, tuple args, types, declaring):
    """The Java object stream of a MethodCall (``AC ED 00 05 ...``), as ``ObjectWriter().write_object(call)``
    writes it, ``args`` already in their Java form (``MethodCall.java_args``); None when the call holds what only
    the general writer writes (another value type, text beyond ASCII, long block data ...)."""
    cdef _Out o = _Out()
    cdef char b[3]
    cdef int mid
    if _mc_desc is None:
        raise RuntimeError("jgpy._core.mcall.configure_writer() was not called (import jgpy.blocks.methodcall)")
    if mode < MODE_OLD or mode > MODE_ID or type(method_id) is not int or not -32768 <= method_id <= 32767:
        return None
    mid = method_id
    try:
        o.put(PyBytes_AS_STRING(_STREAM_HEADER), 4)
        o.put1(TC_OBJECT)
        o.desc(_mc_desc)
        o.next += 1                                     # the MethodCall itself
        if mode != MODE_ID:
            if type(name) is not str:
                return None
            o.raw(b"\x01", 1)
            o.utf(<str>name)
        else:
            b[0], b[1], b[2] = 0, <char>((mid >> 8) & 0xFF), <char>(mid & 0xFF)
            o.raw(b, 3)
        o.flush_block()
        o.put1(TC_ARRAY)                                # the arguments: an Object[] of its own
        o.desc(_object_array_desc)
        o.next += 1
        o.put_be(<uint64_t>len(args), 4)
        for a in args:
            o.value(a)
        b[0], b[1] = 0, <char>mode
        o.raw(b, 2)
        if mode == MODE_METHOD or mode == MODE_TYPES:
            if types is None:
                types = ()
            o.flush_block()
            o.put1(TC_ARRAY)
            o.desc(_class_array_desc)
            o.next += 1
            o.put_be(<uint64_t>len(types), 4)
            for t in types:
                if type(t) is not str:
                    return None
                o.class_object(<str>t)
            if mode == MODE_METHOD:
                declaring = declaring or "java.lang.Object"
                if type(declaring) is not str:
                    return None
                o.class_object(<str>declaring)
        elif mode == MODE_SIGNATURE:
            o.flush_block()
            o.put1(TC_ARRAY)
            o.desc(_string_array_desc)
            o.next += 1
            types = () if types is None else types
            o.put_be(<uint64_t>len(types), 4)
            for t in types:
                if t is None:
                    o.put1(TC_NULL)
                elif type(t) is str:
                    o.string(<str>t)
                else:
                    return None
        o.raw(b"\x00", 1)                               # no payload (deprecated)
        o.flush_block()
        o.put1(TC_ENDBLOCKDATA)
        return o.getvalue()
    except (_NotHere, OverflowError):
        return None
