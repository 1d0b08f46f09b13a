# The Message type: flags, addresses, a zero-copy payload window and headers that are decoded lazily.
from cpython.object cimport PyObject
from libc.stdint cimport int16_t, int32_t, uint8_t

from jgpy._core.wire cimport Writer


cdef struct HdrRef:
    int16_t id          # protocol id
    int16_t magic       # header class magic (from the wire); -1 when not known yet
    Py_ssize_t off      # start of the header body in Message._raw, or -1 when only the object exists
    Py_ssize_t end      # end of the header body in Message._raw
    PyObject* obj       # the header object (a reference owned by the message), or NULL while only raw


cdef enum:
    INLINE_HDRS = 6


cdef class Message


cdef class WireDialect:
    """Base of a dialect: Message asks it to decode a header it kept as raw bytes; the transport's send
    path asks it to encode a message."""
    cdef object read_header_at(self, int magic, object raw, Py_ssize_t off, Py_ssize_t end)
    cdef int write_message(self, Writer w, Message m, bint no_addrs, object list_src) except -1
    cdef int write_single(self, Writer w, Message m, bint multicast) except -1
    cdef int write_list(self, Writer w, object dest, object src, list msgs, bint multicast) except -1
    cdef bytes marshal_message(self, Message m)
    cdef Message unmarshal_message(self, object buf, Py_ssize_t off, Py_ssize_t end)


cdef class Message:
    cdef public object dest
    cdef public object src
    cdef public uint8_t flags
    cdef public uint8_t transient_flags
    cdef Message _piggyback          # a message to send in the same datagram, before this one (UNICAST's ACK)
    cdef object _buf                 # bytes-like or None
    cdef Py_ssize_t _off
    cdef Py_ssize_t _len
    cdef object _raw                 # bytes holding raw header bodies (received messages), else None
    cdef WireDialect _dialect        # decodes raw header bodies on first access
    cdef HdrRef _inline[INLINE_HDRS]
    cdef HdrRef* _h
    cdef int _nh
    cdef int _cap

    cdef int _reserve(self, int n) except -1
    cdef int _find(self, int16_t id)
    cdef object _materialize(self, int i)
    cdef int add_raw_header(self, int16_t id, int16_t magic, Py_ssize_t off, Py_ssize_t end) except -1
    cdef int set_raw(self, object raw, WireDialect dialect) except -1
    cdef object header(self, int16_t id)
    cdef object built_header(self, int i)
    cdef int put(self, int16_t id, object hdr) except -1
    cdef int set_payload(self, object buf, Py_ssize_t off, Py_ssize_t length) except -1
    cpdef Message copy(self, bint copy_buffer=*, bint copy_headers=*)


cdef Message new_message()
