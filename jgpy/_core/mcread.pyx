# cython: language_level=3, boundscheck=False, wraparound=False
# Every read below checks its bounds by hand (_need) before it touches the buffer.
"""A MethodCall's parts read straight from its Java object stream, in C: the reader behind
:mod:`jgpy.blocks.methodcall_read` (whose docstring says which shapes it takes and what it gives for the others).

The core imports nothing above it, so what it needs from :mod:`jgpy.javaser` (the modified UTF-8 decoder, the
depth limit) and the Python types of the boxed values come through :func:`configure`, called once by
``methodcall_read``. Any shape it does not know, or bytes that end early, make :func:`method_call_parts` return
None: the general reader then reads the stream from its start."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t
from libc.string cimport memcmp, memcpy

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
cdef object _PENDING = object()   # the handle of an array whose elements are being read (a reference to it: unsupported)

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
    cdef _Reader r
    cdef Desc d
    if _decode_mutf8 is None:
        raise RuntimeError("jgpy._core.mcread.configure() was not called (import jgpy.blocks.methodcall_read)")
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
    cdef Parts parts = method_call_parts(data, class_name)
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
