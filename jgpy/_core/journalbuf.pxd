# The delivery journal's row buffer (journalbuf.pyx), declared for the JOURNAL protocol's C send path.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t

from jgpy._core.message cimport Message


cdef struct _Row:
    # one journal row as it is stored in memory and in a raw part (ROW_DTYPE mirrors this layout, 40 bytes)
    int64_t ts                  # CLOCK_MONOTONIC, ns
    int64_t seq                 # the number of a numbered payload (seq_ok)
    uint32_t hash               # CRC-32C of the payload
    int32_t view                # the view key (-1: none yet)
    int32_t sender, dest        # indices into the names (-1: null)
    int32_t size                # payload bytes
    uint16_t flags
    int8_t kind                 # 0 deliver, 1 send, 2 view, 3 other
    uint8_t seq_ok


cdef enum:
    RECENT_NAMES = 16
    RECENT_NAME_MAX = 40


cdef struct _Recent:
    int32_t index
    int32_t len
    char name[RECENT_NAME_MAX]


cdef class _Names:
    cdef dict index              # str -> index
    cdef list names
    cdef _Recent recent[RECENT_NAMES]    # the id names seen last, compared byte for byte
    cdef int n_recent, next_recent

    cdef int32_t of(self, str name) except -2
    cdef int32_t of_bytes(self, const char* p, Py_ssize_t n) except -2


cdef class _Chunk:
    cdef object arr              # the NumPy array (ROW_DTYPE) that owns the rows
    cdef _Row* rows
    cdef Py_ssize_t n, cap
    cdef list specials           # [[row, object]] of the rows that are not messages


cdef class RowBuffer:
    cdef _Chunk _cur                        # rows are recorded here
    cdef list _full                         # chunks filled up, not taken yet
    cdef Py_ssize_t _full_rows
    cdef list _spares                       # arrays given back by the writer
    cdef readonly Py_ssize_t chunk_rows
    cdef public int32_t view_index          # the view key of rows recorded from now on (-1: none yet)
    cdef public dict addr_names
    cdef public object name_of
    cdef _Names _names
    cdef int64_t _timed_ns, _timed_rows     # sampled recording time (see timing())
    cdef uint32_t _tick

    cdef _Chunk _new_chunk(self)
    cdef int _make_room(self) except -1
    cdef int32_t _addr_index(self, object a) except -2
    cdef int _extract(self, Message m, _Row* r) except -1
    cdef void _put(self, int kind, _Row* r, int64_t ts) noexcept
    cdef int _record(self, int kind, Message m, int64_t ts) except -1
    cdef void _time(self, int64_t ts, Py_ssize_t rows, uint32_t every) noexcept
    cdef int record_message(self, int kind, Message m) except -1
