# Reader/Writer with java.io.DataInput/DataOutput semantics (big-endian, fixed width, modified UTF-8).
from libc.stdint cimport int8_t, uint8_t, int16_t, uint16_t, int32_t, int64_t
from cpython.buffer cimport Py_buffer


cdef class Reader:
    cdef object _owner              # keeps the underlying memory alive
    cdef Py_buffer _view
    cdef bint _has_view
    cdef const unsigned char* _data  # start of the whole buffer (offsets are relative to it)
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _end

    cdef int _underflow(self, Py_ssize_t n, const char* field) except -1
    cdef inline int need(self, Py_ssize_t n, const char* field) except -1:
        if n < 0 or self._end - self._pos < n:
            return self._underflow(n, field)
        return 0

    cdef int8_t byte(self, const char* field) except? -1
    cdef uint8_t ubyte(self, const char* field) except? 0xFF
    cdef bint boolean(self, const char* field) except? -1
    cdef int16_t short(self, const char* field) except? -1
    cdef uint16_t ushort(self, const char* field) except? 0xFFFF
    cdef int32_t int32(self, const char* field) except? -1
    cdef int64_t int64(self, const char* field) except? -1
    cdef float float32(self, const char* field) except? -1
    cdef double float64(self, const char* field) except? -1
    cdef bytes take(self, Py_ssize_t n, const char* field)
    cdef int skip(self, Py_ssize_t n, const char* field) except -1
    cdef str utf(self, const char* field)
    cdef object string(self, const char* field)
    cdef object byte_buffer(self, const char* field)
    cdef bint presence(self, const char* field) except? -1
    cdef int fail(self, str reason, const char* field, Py_ssize_t offset) except -1


cdef class Writer:
    cdef unsigned char* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap

    cdef int _grow(self, Py_ssize_t extra) except -1
    cdef inline int ensure(self, Py_ssize_t extra) except -1:
        if self._cap - self._len < extra:
            return self._grow(extra)
        return 0

    cdef int byte(self, int v) except -1
    cdef int boolean(self, bint v) except -1
    cdef int short(self, int v) except -1
    cdef int int32(self, int32_t v) except -1
    cdef int int64(self, int64_t v) except -1
    cdef int float32(self, float v) except -1
    cdef int float64(self, double v) except -1
    cdef int raw(self, const unsigned char* p, Py_ssize_t n) except -1
    cdef int buffer(self, object obj, Py_ssize_t offset, Py_ssize_t length) except -1
    cdef int utf(self, str s) except -1
    cdef int string(self, object s) except -1
    cdef int byte_buffer(self, object b) except -1
    cdef int put_short_at(self, Py_ssize_t pos, int v) except -1
    cdef int put_int_at(self, Py_ssize_t pos, int32_t v) except -1


cdef int mutf8_encode(Writer w, str s) except -1
cdef str mutf8_decode(const unsigned char* p, Py_ssize_t n, Py_ssize_t base, const char* field)
cdef object new_wire_error(str reason, const char* field, Py_ssize_t offset)
