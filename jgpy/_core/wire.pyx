# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# Every pointer access below is preceded by an explicit length check (Reader.need / Writer.ensure),
# which is what makes bounds/wraparound checking unnecessary in this module.
"""Java ``DataInputStream``/``DataOutputStream`` semantics over a byte buffer.

All integers are big-endian and fixed width; strings use Java's *modified UTF-8* (``writeUTF``);
``string``/``byte_buffer`` follow ``org.jgroups.util.Util.writeString``/``writeByteBuffer``.
Reading past the end, a malformed string or a negative length raises
:class:`jgpy.errors.WireFormatError` with the field name and the offset — never a crash.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Malloc, PyMem_Realloc, PyMem_Free
from libc.string cimport memcpy, memchr
from libc.stdint cimport uint32_t, uint64_t

from jgpy.errors import WireFormatError

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF16(const char* s, Py_ssize_t size, const char* errors, int* byteorder)
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object u, Py_ssize_t* size) except NULL
    bint PyUnicode_IS_ASCII(object u)
    Py_ssize_t PyUnicode_GET_LENGTH(object u)
    unsigned int PyUnicode_READ_CHAR(object u, Py_ssize_t index)  # a Py_UCS4 code point


cdef object new_wire_error(str reason, const char* field, Py_ssize_t offset):
    return WireFormatError(reason, field.decode("ascii") if field != NULL else None, offset)


cdef class Reader:
    """Sequential reader over a bytes-like object; offsets are relative to the buffer start."""

    def __cinit__(self, object data, Py_ssize_t start=0, object end=None):
        cdef Py_ssize_t size
        self._has_view = False
        self._owner = data
        if type(data) is bytes:
            self._data = <const unsigned char*>PyBytes_AS_STRING(data)
            size = PyBytes_GET_SIZE(data)
        else:
            PyObject_GetBuffer(data, &self._view, PyBUF_SIMPLE)
            self._has_view = True
            self._data = <const unsigned char*>self._view.buf
            size = self._view.len
        if end is None:
            self._end = size
        else:
            self._end = end
        if start < 0 or self._end > size or start > self._end:
            raise ValueError(f"window [{start}, {end}) does not fit a buffer of {size} bytes")
        self._pos = start

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)

    cdef int fail(self, str reason, const char* field, Py_ssize_t offset) except -1:
        raise new_wire_error(reason, field, offset)

    cdef int _underflow(self, Py_ssize_t n, const char* field) except -1:
        if n < 0:
            return self.fail(f"negative length {n}", field, self._pos)
        return self.fail(f"truncated: need {n} bytes, {self._end - self._pos} left", field, self._pos)

    cdef int8_t byte(self, const char* field) except? -1:
        self.need(1, field)
        self._pos += 1
        return <int8_t>self._data[self._pos - 1]

    cdef uint8_t ubyte(self, const char* field) except? 0xFF:
        self.need(1, field)
        self._pos += 1
        return self._data[self._pos - 1]

    cdef bint boolean(self, const char* field) except? -1:
        # DataInputStream.readBoolean: any non-zero byte is true
        self.need(1, field)
        self._pos += 1
        return self._data[self._pos - 1] != 0

    cdef bint presence(self, const char* field) except? -1:
        # the "present" byte of Util.writeString / writeByteBuffer: only 1 means present
        self.need(1, field)
        self._pos += 1
        return self._data[self._pos - 1] == 1

    cdef int16_t short(self, const char* field) except? -1:
        self.need(2, field)
        cdef const unsigned char* p = self._data + self._pos
        self._pos += 2
        return <int16_t>((<uint32_t>p[0] << 8) | p[1])

    cdef uint16_t ushort(self, const char* field) except? 0xFFFF:
        self.need(2, field)
        cdef const unsigned char* p = self._data + self._pos
        self._pos += 2
        return <uint16_t>((<uint32_t>p[0] << 8) | p[1])

    cdef int32_t int32(self, const char* field) except? -1:
        self.need(4, field)
        cdef const unsigned char* p = self._data + self._pos
        self._pos += 4
        return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])

    cdef int64_t int64(self, const char* field) except? -1:
        self.need(8, field)
        cdef const unsigned char* p = self._data + self._pos
        self._pos += 8
        return <int64_t>((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40) |
                         (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16) |
                         (<uint64_t>p[6] << 8) | p[7])

    cdef float float32(self, const char* field) except? -1:
        cdef uint32_t bits = <uint32_t>self.int32(field)
        cdef float f
        memcpy(&f, &bits, 4)
        return f

    cdef double float64(self, const char* field) except? -1:
        cdef uint64_t bits = <uint64_t>self.int64(field)
        cdef double d
        memcpy(&d, &bits, 8)
        return d

    cdef bytes take(self, Py_ssize_t n, const char* field):
        self.need(n, field)
        self._pos += n
        return PyBytes_FromStringAndSize(<const char*>self._data + self._pos - n, n)

    cdef int skip(self, Py_ssize_t n, const char* field) except -1:
        self.need(n, field)
        self._pos += n
        return 0

    cdef str utf(self, const char* field):
        cdef Py_ssize_t start = self._pos
        cdef uint16_t n = self.ushort(field)
        self.need(n, field)
        self._pos += n
        return mutf8_decode(self._data + start + 2, n, start + 2, field)

    cdef object string(self, const char* field):
        if self.presence(field):
            return self.utf(field)
        return None

    cdef object byte_buffer(self, const char* field):
        if not self.presence(field):
            return None
        cdef int32_t n = self.int32(field)
        return self.take(n, field)

    # ---- Python API (used by Python codecs registered through the dialect hook, and by tests) ----

    @property
    def pos(self):
        """Current offset, relative to the start of the buffer."""
        return self._pos

    @property
    def remaining(self):
        return self._end - self._pos

    def read_byte(self, str field=None):
        return self.byte(_cfield(field))

    def read_ubyte(self, str field=None):
        return self.ubyte(_cfield(field))

    def read_bool(self, str field=None):
        return self.boolean(_cfield(field))

    def read_short(self, str field=None):
        return self.short(_cfield(field))

    def read_ushort(self, str field=None):
        return self.ushort(_cfield(field))

    def read_int(self, str field=None):
        return self.int32(_cfield(field))

    def read_long(self, str field=None):
        return self.int64(_cfield(field))

    def read_float(self, str field=None):
        return self.float32(_cfield(field))

    def read_double(self, str field=None):
        return self.float64(_cfield(field))

    def read_bytes(self, Py_ssize_t n, str field=None):
        return self.take(n, _cfield(field))

    def read_utf(self, str field=None):
        return self.utf(_cfield(field))

    def read_string(self, str field=None):
        return self.string(_cfield(field))

    def read_byte_buffer(self, str field=None):
        return self.byte_buffer(_cfield(field))

    def skip_bytes(self, Py_ssize_t n, str field=None):
        self.skip(n, _cfield(field))

    def peek_rest(self):
        """The bytes not read yet, without reading them."""
        return PyBytes_FromStringAndSize(<const char*>self._data + self._pos, self._end - self._pos)


cdef const char* _cfield(str field) except? NULL:
    if field is None:
        return NULL
    return PyUnicode_AsUTF8AndSize(field, NULL)


cdef str mutf8_decode(const unsigned char* p, Py_ssize_t n, Py_ssize_t base, const char* field):
    """Decode Java modified UTF-8 exactly as DataInputStream.readUTF does (including its errors)."""
    cdef Py_ssize_t i = 0, k = 0
    cdef unsigned int c, c2, c3
    # fast path: 7-bit bytes (readUTF accepts a raw 0x00 as U+0000 too)
    while i < n and p[i] < 0x80:
        i += 1
    if i == n:
        return PyUnicode_DecodeASCII(<const char*>p, n, NULL)
    cdef unsigned char* units = <unsigned char*>PyMem_Malloc(2 * n)
    if units == NULL:
        raise MemoryError()
    try:
        i = 0
        while i < n:
            c = p[i]
            if c < 0x80:
                i += 1
            elif (c >> 4) == 12 or (c >> 4) == 13:
                if i + 2 > n:
                    raise new_wire_error("malformed modified UTF-8: partial character at end", field, base + i)
                c2 = p[i + 1]
                if (c2 & 0xC0) != 0x80:
                    raise new_wire_error("malformed modified UTF-8 around byte", field, base + i + 1)
                c = ((c & 0x1F) << 6) | (c2 & 0x3F)
                i += 2
            elif (c >> 4) == 14:
                if i + 3 > n:
                    raise new_wire_error("malformed modified UTF-8: partial character at end", field, base + i)
                c2 = p[i + 1]
                c3 = p[i + 2]
                if (c2 & 0xC0) != 0x80 or (c3 & 0xC0) != 0x80:
                    raise new_wire_error("malformed modified UTF-8 around byte", field, base + i + 1)
                c = ((c & 0x0F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F)
                i += 3
            else:
                raise new_wire_error("malformed modified UTF-8 around byte", field, base + i)
            units[2 * k] = c & 0xFF          # UTF-16LE code units
            units[2 * k + 1] = (c >> 8) & 0xFF
            k += 1
        # joins valid surrogate pairs into one code point, keeps lone surrogates like Java strings do
        return PyUnicode_DecodeUTF16(<const char*>units, 2 * k, "surrogatepass", NULL)
    finally:
        PyMem_Free(units)


cdef int mutf8_encode(Writer w, str s) except -1:
    """Encode like DataOutputStream.writeUTF: unsigned short byte count, then modified UTF-8."""
    cdef Py_ssize_t size, i, n, start
    cdef const char* utf8
    cdef unsigned int cp
    cdef unsigned int u, hi, lo
    if PyUnicode_IS_ASCII(s):
        utf8 = PyUnicode_AsUTF8AndSize(s, &size)
        if memchr(utf8, 0, size) == NULL:
            if size > 65535:
                raise WireFormatError(f"string of {size} bytes is too long for writeUTF (max 65535)", "utf")
            w.short(<int>size)
            return w.raw(<const unsigned char*>utf8, size)
    n = PyUnicode_GET_LENGTH(s)
    start = w._len
    w.short(0)  # patched below
    for i in range(n):
        cp = PyUnicode_READ_CHAR(s, i)
        if cp > 0xFFFF:  # outside the BMP: two surrogates, 3 bytes each (CESU-8 style)
            hi = 0xD800 + ((cp - 0x10000) >> 10)
            lo = 0xDC00 + ((cp - 0x10000) & 0x3FF)
            _put_unit(w, hi)
            _put_unit(w, lo)
        else:
            _put_unit(w, cp)
    size = w._len - start - 2
    if size > 65535:
        w._len = start
        raise WireFormatError(f"string of {size} encoded bytes is too long for writeUTF (max 65535)", "utf")
    return w.put_short_at(start, <int>size)


cdef inline int _put_unit(Writer w, unsigned int u) except -1:
    if 0 < u < 0x80:
        return w.byte(u)
    w.ensure(3)
    if u < 0x800:  # includes U+0000, written as C0 80
        w._buf[w._len] = 0xC0 | ((u >> 6) & 0x1F)
        w._buf[w._len + 1] = 0x80 | (u & 0x3F)
        w._len += 2
    else:
        w._buf[w._len] = 0xE0 | ((u >> 12) & 0x0F)
        w._buf[w._len + 1] = 0x80 | ((u >> 6) & 0x3F)
        w._buf[w._len + 2] = 0x80 | (u & 0x3F)
        w._len += 3
    return 0


cdef class Writer:
    """Growable big-endian output buffer (DataOutputStream semantics)."""

    def __cinit__(self, Py_ssize_t capacity=256):
        if capacity < 16:
            capacity = 16
        self._buf = <unsigned char*>PyMem_Malloc(capacity)
        if self._buf == NULL:
            raise MemoryError()
        self._cap = capacity
        self._len = 0

    def __dealloc__(self):
        if self._buf != NULL:
            PyMem_Free(self._buf)

    cdef int _grow(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self._cap * 2
        if extra < 0:
            raise ValueError("negative length")
        while cap - self._len < extra:
            cap *= 2
        cdef unsigned char* nb = <unsigned char*>PyMem_Realloc(self._buf, cap)
        if nb == NULL:
            raise MemoryError()
        self._buf = nb
        self._cap = cap
        return 0

    cdef int byte(self, int v) except -1:
        self.ensure(1)
        self._buf[self._len] = <unsigned char>(v & 0xFF)
        self._len += 1
        return 0

    cdef int boolean(self, bint v) except -1:
        return self.byte(1 if v else 0)

    cdef int short(self, int v) except -1:
        self.ensure(2)
        self._buf[self._len] = (v >> 8) & 0xFF
        self._buf[self._len + 1] = v & 0xFF
        self._len += 2
        return 0

    cdef int int32(self, int32_t v) except -1:
        self.ensure(4)
        cdef uint32_t u = <uint32_t>v
        cdef unsigned char* p = self._buf + self._len
        p[0] = u >> 24
        p[1] = (u >> 16) & 0xFF
        p[2] = (u >> 8) & 0xFF
        p[3] = u & 0xFF
        self._len += 4
        return 0

    cdef int int64(self, int64_t v) except -1:
        self.ensure(8)
        cdef uint64_t u = <uint64_t>v
        cdef unsigned char* p = self._buf + self._len
        p[0] = u >> 56
        p[1] = (u >> 48) & 0xFF
        p[2] = (u >> 40) & 0xFF
        p[3] = (u >> 32) & 0xFF
        p[4] = (u >> 24) & 0xFF
        p[5] = (u >> 16) & 0xFF
        p[6] = (u >> 8) & 0xFF
        p[7] = u & 0xFF
        self._len += 8
        return 0

    cdef int float32(self, float v) except -1:
        cdef uint32_t bits
        memcpy(&bits, &v, 4)
        return self.int32(<int32_t>bits)

    cdef int float64(self, double v) except -1:
        cdef uint64_t bits
        memcpy(&bits, &v, 8)
        return self.int64(<int64_t>bits)

    cdef int raw(self, const unsigned char* p, Py_ssize_t n) except -1:
        self.ensure(n)
        memcpy(self._buf + self._len, p, n)
        self._len += n
        return 0

    cdef int buffer(self, object obj, Py_ssize_t offset, Py_ssize_t length) except -1:
        """Append ``length`` bytes of any bytes-like ``obj`` starting at ``offset``."""
        cdef Py_buffer view
        if type(obj) is bytes:
            if offset < 0 or length < 0 or offset + length > PyBytes_GET_SIZE(obj):
                raise ValueError("buffer window out of range")
            return self.raw(<const unsigned char*>PyBytes_AS_STRING(obj) + offset, length)
        PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE)
        try:
            if offset < 0 or length < 0 or offset + length > view.len:
                raise ValueError("buffer window out of range")
            self.raw(<const unsigned char*>view.buf + offset, length)
        finally:
            PyBuffer_Release(&view)
        return 0

    cdef int utf(self, str s) except -1:
        return mutf8_encode(self, s)

    cdef int string(self, object s) except -1:
        if s is None:
            return self.byte(0)
        self.byte(1)
        return mutf8_encode(self, s)

    cdef int byte_buffer(self, object b) except -1:
        if b is None:
            return self.byte(0)
        self.byte(1)
        cdef Py_ssize_t n = len(b)
        self.int32(<int32_t>n)
        return self.buffer(b, 0, n)

    cdef int put_short_at(self, Py_ssize_t pos, int v) except -1:
        if pos < 0 or pos + 2 > self._len:
            raise IndexError("put_short_at out of range")
        self._buf[pos] = (v >> 8) & 0xFF
        self._buf[pos + 1] = v & 0xFF
        return 0

    cdef int put_int_at(self, Py_ssize_t pos, int32_t v) except -1:
        if pos < 0 or pos + 4 > self._len:
            raise IndexError("put_int_at out of range")
        cdef uint32_t u = <uint32_t>v
        self._buf[pos] = u >> 24
        self._buf[pos + 1] = (u >> 16) & 0xFF
        self._buf[pos + 2] = (u >> 8) & 0xFF
        self._buf[pos + 3] = u & 0xFF
        return 0

    # ---- Python API ----

    def __len__(self):
        return self._len

    def getvalue(self):
        """The bytes written so far."""
        return PyBytes_FromStringAndSize(<const char*>self._buf, self._len)

    def clear(self):
        self._len = 0

    def write_byte(self, int v):
        self.byte(v)

    def write_bool(self, bint v):
        self.boolean(v)

    def write_short(self, int v):
        self.short(v)

    def write_int(self, long long v):
        self.int32(<int32_t>v)

    def write_long(self, long long v):
        self.int64(v)

    def write_float(self, float v):
        self.float32(v)

    def write_double(self, double v):
        self.float64(v)

    def write_bytes(self, object b):
        self.buffer(b, 0, len(b))

    def write_utf(self, str s):
        self.utf(s)

    def write_string(self, s):
        self.string(s)

    def write_byte_buffer(self, b):
        self.byte_buffer(b)


def utf_encode(str s) -> bytes:
    """``DataOutputStream.writeUTF(s)`` as bytes (length prefix included)."""
    cdef Writer w = Writer(len(s) * 3 + 2)
    mutf8_encode(w, s)
    return w.getvalue()


def utf_decode(data) -> str:
    """Inverse of :func:`utf_encode`: read one ``writeUTF`` string that fills ``data`` exactly."""
    cdef Reader r = Reader(data)
    s = r.utf(b"utf")
    if r._pos != r._end:
        raise WireFormatError(f"{r._end - r._pos} trailing bytes after string", "utf", r._pos)
    return s
