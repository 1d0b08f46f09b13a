# cython: boundscheck=False, wraparound=False, cdivision=True
"""The delivery journal's hot path (``jgpy.journal``): rows recorded with a CLOCK_MONOTONIC timestamp in a few
nanoseconds, and turned into columns (names, ids parsed from numbered payloads, CRC-32C) without Python work per
row. Only the GIL protects a buffer (nothing here releases it), so any thread may record."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_DecodeLatin1, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memmove
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import numpy as np

from jgpy._core.message cimport Message

cdef enum:
    MAX_ID_PAYLOAD = 256

# ---- CRC-32C (Castagnoli, java.util.zip.CRC32C): the SSE4.2 instruction when the CPU has it, else slicing by 8 ----

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <cpuid.h>
    __attribute__((target("sse4.2")))
    static uint32_t jgpy_crc32c_hw(const uint8_t* p, size_t n) {
        uint64_t c = 0xFFFFFFFFu;
        while (n >= 8) { uint64_t v; memcpy(&v, p, 8); c = __builtin_ia32_crc32di(c, v); p += 8; n -= 8; }
        uint32_t c32 = (uint32_t)c;
        while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
        return c32 ^ 0xFFFFFFFFu;
    }
    static int jgpy_has_sse42(void) {
        unsigned a, b, c, d;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
        return (c & bit_SSE4_2) != 0;
    }
    #else
    static uint32_t jgpy_crc32c_hw(const uint8_t* p, size_t n) { (void)p; (void)n; return 0; }
    static int jgpy_has_sse42(void) { return 0; }
    #endif
    """
    uint32_t jgpy_crc32c_hw(const uint8_t* p, size_t n) noexcept nogil
    int jgpy_has_sse42() noexcept nogil

cdef uint32_t _crc_table[8][256]
cdef bint _crc_hw = jgpy_has_sse42()


cdef void _crc_init() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = <uint32_t>i
        for k in range(8):
            c = (c >> 1) ^ 0x82F63B78u if c & 1 else c >> 1
        _crc_table[0][i] = c
    for i in range(256):
        for k in range(1, 8):
            _crc_table[k][i] = (_crc_table[k - 1][i] >> 8) ^ _crc_table[0][_crc_table[k - 1][i] & 0xFF]


_crc_init()


cdef uint32_t _crc32c_table(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint32_t c = 0xFFFFFFFFu
    cdef uint32_t a, b
    while n >= 8:
        a = (p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)) ^ c
        b = p[4] | (<uint32_t>p[5] << 8) | (<uint32_t>p[6] << 16) | (<uint32_t>p[7] << 24)
        c = (_crc_table[7][a & 0xFF] ^ _crc_table[6][(a >> 8) & 0xFF] ^ _crc_table[5][(a >> 16) & 0xFF]
             ^ _crc_table[4][a >> 24] ^ _crc_table[3][b & 0xFF] ^ _crc_table[2][(b >> 8) & 0xFF]
             ^ _crc_table[1][(b >> 16) & 0xFF] ^ _crc_table[0][b >> 24])
        p += 8
        n -= 8
    while n > 0:
        c = _crc_table[0][(c ^ p[0]) & 0xFF] ^ (c >> 8)
        p += 1
        n -= 1
    return c ^ 0xFFFFFFFFu


cdef inline uint32_t _crc32c(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if _crc_hw:
        return jgpy_crc32c_hw(p, <size_t>n)
    return _crc32c_table(p, n)


def crc32c(data, bint hardware=True) -> int:
    """CRC-32C of a bytes-like object (equal to Java's ``java.util.zip.CRC32C``); ``hardware=False`` forces the
    table implementation (tests compare the two)."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if hardware:
            return _crc32c(<const uint8_t*>view.buf, view.len)
        return _crc32c_table(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


def crc32c_hardware() -> bool:
    """True when CRC-32C runs on the CPU's SSE4.2 instruction."""
    return _crc_hw


cdef inline int64_t _now() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <int64_t>t.tv_sec * 1000000000 + t.tv_nsec


def monotonic_ns() -> int:
    """CLOCK_MONOTONIC in ns, as the buffer stamps rows (the same clock as ``time.monotonic_ns()``)."""
    return _now()


# ---- names and ids ----

cdef class _Names:
    """Names as indices into a list that only grows (a dictionary column), with a cache of recent id names."""

    def __cinit__(self):
        self.index = {}
        self.names = []
        self.recent = []

    cdef int32_t of(self, str name) except -2:
        cdef object i = self.index.get(name)
        if i is None:
            i = len(self.names)
            self.index[name] = i
            self.names.append(name)
        return <int32_t>i

    cdef int32_t of_bytes(self, const char* p, Py_ssize_t n) except -2:
        cdef tuple t
        cdef bytes b
        for t in self.recent:
            b = <bytes>t[0]
            if len(b) == n and memcmp(PyBytes_AS_STRING(b), p, n) == 0:
                return <int32_t>t[1]
        try:
            name = PyUnicode_DecodeUTF8(p, n, "strict")
        except UnicodeDecodeError:
            name = PyUnicode_DecodeLatin1(p, n, NULL)         # Java's setObject(String): the chars' low bytes
        cdef int32_t i = self.of(name)
        if len(self.recent) >= 16:
            self.recent.pop(0)
        self.recent.append((PyBytes_FromStringAndSize(p, n), i))
        return i


cdef int _parse_id(const uint8_t* p, Py_ssize_t n, Py_ssize_t* name_len, int64_t* seq) noexcept nogil:
    """``[0x12]<name>:<1..18 digits>``: 1 and the name length (after the optional tag) and number, else 0."""
    cdef Py_ssize_t end = n, colon = n - 1, start = 0
    cdef int64_t v = 0
    if n > 0 and p[0] == 0x12:
        start = 1
    while colon >= start and p[colon] != 58:         # the last ':'
        colon -= 1
    if colon < start or end - colon - 1 < 1 or end - colon - 1 > 18:
        return 0
    cdef Py_ssize_t i
    for i in range(colon + 1, end):
        if p[i] < 48 or p[i] > 57:
            return 0
        v = v * 10 + (p[i] - 48)
    name_len[0] = colon - start
    seq[0] = v
    return 1


# ---- the row buffer ----

cdef void* _resized(void* p, size_t n) except NULL:
    """``realloc`` that raises MemoryError (``p`` stays valid then)."""
    cdef void* q = realloc(p, n)
    if q == NULL:
        raise MemoryError()
    return q


cdef class RowBuffer:
    """Rows in recording order: a timestamp, a kind, the view key and, for messages, their columns.

    A message row's columns (sender and dest as indices into :attr:`names`, flags, size, CRC-32C, the id's number)
    are taken when it is recorded, while the message is hot in the CPU cache, and the message is not kept; view
    and other rows keep their object. ``addr_names`` (address -> name cache) and ``name_of(addr)`` (asked for an
    address not in it) must be set before a message is recorded."""

    def __cinit__(self):
        self._specials = []
        self._n = 0
        self._cap = 0
        self.view_index = -1
        self.addr_names = {}
        self.name_of = str
        self._names = _Names()

    def __dealloc__(self):
        free(self._ts)
        free(self._kind)
        free(self._view)
        free(self._cols)

    cdef int _grow(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = self._cap * 2 if self._cap else 1024
        while cap < need:
            cap *= 2
        # each array keeps its old block until its own realloc succeeds: a MemoryError leaves the buffer usable
        self._ts = <int64_t*>_resized(self._ts, cap * sizeof(int64_t))
        self._kind = <int8_t*>_resized(self._kind, cap * sizeof(int8_t))
        self._view = <int32_t*>_resized(self._view, cap * sizeof(int32_t))
        self._cols = <_Cols*>_resized(self._cols, cap * sizeof(_Cols))
        self._cap = cap
        return 0

    def __len__(self):
        return self._n

    @property
    def names(self) -> list:
        """The names the sender/dest indices refer to (it only grows)."""
        return self._names.names

    cdef int32_t _addr_index(self, object a) except -2:
        if a is None:
            return -1
        nm = self.addr_names.get(a)
        if nm is None:
            nm = self.name_of(a)
            if nm is None:
                return -1
        return self._names.of(nm)

    cdef int _extract(self, Message m, _Cols* c) except -1:
        """The columns of message ``m`` (may call ``name_of``, i.e. Python: before any row is touched)."""
        cdef object buf
        cdef const uint8_t* p
        cdef Py_buffer view
        cdef bint got_view = False
        cdef Py_ssize_t plen, name_len
        cdef int64_t s
        c.dest = self._addr_index(m.dest)
        c.flags = m.flags
        c.size = 0
        c.hash = 0
        c.seq = 0
        c.seq_ok = 0
        buf = m._buf
        if buf is None:
            c.sender = self._addr_index(m.src)
            return 0
        plen = m._len
        c.size = <int32_t>plen
        if type(buf) is bytes:
            p = <const uint8_t*>PyBytes_AS_STRING(buf) + m._off
        else:
            PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
            got_view = True
            p = <const uint8_t*>view.buf + m._off
        try:
            c.hash = _crc32c(p, plen)
            if plen <= MAX_ID_PAYLOAD and _parse_id(p, plen, &name_len, &s):
                c.sender = self._names.of_bytes(<const char*>p + (1 if plen > 0 and p[0] == 0x12 else 0), name_len)
                c.seq = s
                c.seq_ok = 1
        finally:
            if got_view:
                PyBuffer_Release(&view)
        if not c.seq_ok:                  # a numbered payload names its sender: no address lookup
            c.sender = self._addr_index(m.src)
        return 0

    cdef inline void _put(self, int kind, _Cols* c, int64_t ts) noexcept:
        # no Python code between here and the increment: rows from several threads never interleave
        cdef Py_ssize_t n = self._n
        self._ts[n] = ts
        self._kind[n] = <int8_t>kind
        self._view[n] = self.view_index
        self._cols[n] = c[0]
        self._n = n + 1

    cdef int _record(self, int kind, Message m, int64_t ts) except -1:
        cdef _Cols c
        self._extract(m, &c)
        if self._n == self._cap:
            self._grow(self._n + 1)
        self._put(kind, &c, ts)
        return 0

    cdef int record_message(self, int kind, Message m) except -1:
        """A message row (kind 0: deliver, 1: send) from C (JOURNAL's send path)."""
        return self._record(kind, m, _now())

    def record(self, int kind, obj):
        """Record a row: kind 0 (deliver) and 1 (send) take a Message, other kinds keep ``obj``."""
        cdef _Cols c
        if kind <= 1:
            self._record(kind, <Message?>obj, _now())
            return
        c.sender = c.dest = -1
        c.flags = c.size = 0
        c.hash = c.seq = 0
        c.seq_ok = 0
        if self._n == self._cap:
            self._grow(self._n + 1)
        self._specials.append((self._n, obj))
        self._put(kind, &c, _now())

    def record_batch(self, int kind, list msgs):
        """Record one message row (kind 0 or 1) per message of ``msgs``, all with the same timestamp (a batch
        reaches the top of the stack at once)."""
        cdef object m
        cdef int64_t ts = _now()
        if kind > 1:
            raise ValueError("record_batch records messages (kind 0 or 1)")
        for m in msgs:
            self._record(kind, <Message?>m, ts)

    def take(self, Py_ssize_t max_rows):
        """The oldest rows (at most ``max_rows``) as ``(objects, ts, kind, view, columns)``: ``objects`` maps the
        rows that are not messages to their object, the rest are numpy arrays; ``columns`` = ``(names, sender,
        dest, flags, size, hash, seq, seq_valid)`` with ``names`` a copy of :attr:`names` (sender/dest -1: null)."""
        cdef Py_ssize_t n = min(max_rows, self._n)
        ts = np.empty(n, np.int64)
        kind = np.empty(n, np.int8)
        view = np.empty(n, np.int32)
        sender = np.empty(n, np.int32)
        dest = np.empty(n, np.int32)
        flags = np.empty(n, np.int32)
        size = np.empty(n, np.int32)
        hsh = np.empty(n, np.int64)
        seq = np.empty(n, np.int64)
        seq_valid = np.empty(n, np.uint8)
        cdef int64_t[::1] tv = ts, hv = hsh, qv = seq
        cdef int8_t[::1] kv = kind
        cdef int32_t[::1] vv = view, sv = sender, dv = dest, fv = flags, zv = size
        cdef uint8_t[::1] okv = seq_valid
        cdef Py_ssize_t i
        for i in range(n):
            tv[i] = self._ts[i]
            kv[i] = self._kind[i]
            vv[i] = self._view[i]
            sv[i] = self._cols[i].sender
            dv[i] = self._cols[i].dest
            fv[i] = self._cols[i].flags
            zv[i] = self._cols[i].size
            hv[i] = self._cols[i].hash
            qv[i] = self._cols[i].seq
            okv[i] = self._cols[i].seq_ok
        objs = {}
        rest = []
        for pos, obj in self._specials:
            if pos < n:
                objs[pos] = obj
            else:
                rest.append((pos - n, obj))
        self._specials = rest
        if n < self._n:
            memmove(self._ts, self._ts + n, (self._n - n) * sizeof(int64_t))
            memmove(self._kind, self._kind + n, (self._n - n) * sizeof(int8_t))
            memmove(self._view, self._view + n, (self._n - n) * sizeof(int32_t))
            memmove(self._cols, self._cols + n, (self._n - n) * sizeof(_Cols))
        self._n -= n
        names = list(self._names.names)
        return objs, ts, kind, view, (names, sender, dest, flags, size, hsh, seq, seq_valid)
