# The delivery journal's row buffer (journalbuf.pyx), declared for the JOURNAL protocol's C send path.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

from jgpy._core.message cimport Message


cdef struct _Cols:
    int32_t sender, dest, flags, size
    int64_t hash, seq
    uint8_t seq_ok


cdef class _Names:
    cdef dict index              # str -> index
    cdef list names
    cdef list recent             # [(bytes, index)]: the id names seen last, compared byte for byte

    cdef int32_t of(self, str name) except -2
    cdef int32_t of_bytes(self, const char* p, Py_ssize_t n) except -2


cdef class RowBuffer:
    cdef list _specials                     # [(row, object)] of the rows that are not messages
    cdef int64_t* _ts
    cdef int8_t* _kind
    cdef int32_t* _view
    cdef _Cols* _cols
    cdef Py_ssize_t _n, _cap
    cdef public int32_t view_index          # the view key of rows recorded from now on (-1: none yet)
    cdef public dict addr_names
    cdef public object name_of
    cdef _Names _names

    cdef int _grow(self, Py_ssize_t need) except -1
    cdef int32_t _addr_index(self, object a) except -2
    cdef int _extract(self, Message m, _Cols* c) except -1
    cdef void _put(self, int kind, _Cols* c, int64_t ts) noexcept
    cdef int _record(self, int kind, Message m, int64_t ts) except -1
    cdef int record_message(self, int kind, Message m) except -1
