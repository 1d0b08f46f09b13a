# cython: boundscheck=False, wraparound=False, cdivision=True
"""The delivery journal's hot path (``jgpy.journal``): a message becomes a 40-byte row (CLOCK_MONOTONIC timestamp,
names as indices, the id parsed from a numbered payload, CRC-32C) in C, stored in place in a NumPy chunk that the
writer saves as it is. Only the GIL protects a buffer (nothing here releases it), so any thread may record.

NumPy is imported when the first buffer is made (or :data:`ROW_DTYPE` is asked for), not with the module: the send
path cimports this module, and a channel without a journal must not need NumPy (it is not a dependency of jgpy)."""

from cpython.bytes cimport PyBytes_AS_STRING
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.unicode cimport PyUnicode_DecodeLatin1, PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memcmp, memcpy
from jgpy._core.clock cimport monotonic_ns

from jgpy._core.message cimport Message

cdef enum:
    MAX_ID_PAYLOAD = 256

# ---- CRC-32C (Castagnoli, java.util.zip.CRC32C): the SSE4.2 instruction (three lanes) when the CPU has it, else
#      slicing by 8 ----

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* The CRC register after n zero bytes is linear in the register: jgpy_zeros[i][k][b] is what byte b in
       byte position k of the register becomes after JGPY_LANE[i] zero bytes. */
    static const size_t JGPY_LANE[2] = {256, 32};
    static uint32_t jgpy_zeros[2][4][256];
    static void jgpy_crc_zeros_init(const uint32_t* t0) {
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                for (uint32_t b = 0; b < 256; b++) {
                    uint32_t c = b << (8 * k);
                    for (size_t z = 0; z < JGPY_LANE[i]; z++) c = t0[c & 0xFF] ^ (c >> 8);
                    jgpy_zeros[i][k][b] = c;
                }
    }
    static inline uint32_t jgpy_crc_shift(int i, uint32_t c) {
        return jgpy_zeros[i][0][c & 0xFF] ^ jgpy_zeros[i][1][(c >> 8) & 0xFF]
             ^ jgpy_zeros[i][2][(c >> 16) & 0xFF] ^ jgpy_zeros[i][3][c >> 24];
    }
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <cpuid.h>
    /* newer clang (Zig's, for the manylinux wheels) keeps the CRC32 instruction apart from SSE4.2 */
    #if defined(__clang__) && __clang_major__ >= 14
    #define JGPY_CRC_TARGET __attribute__((target("sse4.2,crc32")))
    #else
    #define JGPY_CRC_TARGET __attribute__((target("sse4.2")))
    #endif
    /* three lanes of len bytes each in parallel (the instruction's latency is three times its throughput),
       joined by shifting the first two over the zeros of the lanes that follow them */
    JGPY_CRC_TARGET
    static inline uint64_t jgpy_crc_lanes(uint64_t c0, const uint8_t* p, int i) {
        size_t len = JGPY_LANE[i];
        uint64_t c1 = 0, c2 = 0, v0, v1, v2;
        for (const uint8_t* end = p + len; p < end; p += 8) {
            memcpy(&v0, p, 8); memcpy(&v1, p + len, 8); memcpy(&v2, p + 2 * len, 8);
            c0 = __builtin_ia32_crc32di(c0, v0);
            c1 = __builtin_ia32_crc32di(c1, v1);
            c2 = __builtin_ia32_crc32di(c2, v2);
        }
        c0 = jgpy_crc_shift(i, (uint32_t)c0) ^ c1;
        return jgpy_crc_shift(i, (uint32_t)c0) ^ c2;
    }
    JGPY_CRC_TARGET
    static uint32_t jgpy_crc32c_hw(const uint8_t* p, size_t n) {
        uint64_t c = 0xFFFFFFFFu;
        for (int i = 0; i < 2; i++)
            while (n >= 3 * JGPY_LANE[i]) { c = jgpy_crc_lanes(c, p, i); p += 3 * JGPY_LANE[i]; n -= 3 * JGPY_LANE[i]; }
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
    void jgpy_crc_zeros_init(const uint32_t* t0) noexcept nogil

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
jgpy_crc_zeros_init(_crc_table[0])


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


# ---- names and ids ----

cdef class _Names:
    """Names as indices into a list that only grows (a dictionary column), with a C cache of recent id names."""

    def __cinit__(self):
        self.index = {}
        self.names = []
        self.n_recent = 0
        self.next_recent = 0

    cdef int32_t of(self, str name) except -2:
        cdef object i = self.index.get(name)
        if i is None:
            i = len(self.names)
            self.index[name] = i
            self.names.append(name)
        return <int32_t>i

    cdef int32_t of_bytes(self, const char* p, Py_ssize_t n) except -2:
        cdef int k
        cdef _Recent* r
        for k in range(self.n_recent):
            r = &self.recent[k]
            if r.len == n and memcmp(r.name, p, n) == 0:
                return r.index
        try:
            name = PyUnicode_DecodeUTF8(p, n, "strict")
        except UnicodeDecodeError:
            name = PyUnicode_DecodeLatin1(p, n, NULL)         # Java's setObject(String): the chars' low bytes
        cdef int32_t i = self.of(name)
        if n <= RECENT_NAME_MAX:
            r = &self.recent[self.next_recent]
            r.index = i
            r.len = <int32_t>n
            memcpy(r.name, p, n)
            self.next_recent = (self.next_recent + 1) % RECENT_NAMES
            if self.n_recent < RECENT_NAMES:
                self.n_recent += 1
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

cdef object np = None              # numpy, once imported by _numpy()
cdef object _ROW_DTYPE = None


cdef object _numpy():
    """NumPy, imported on first use, with the row dtype made and checked against :c:type:`_Row`."""
    global np, _ROW_DTYPE
    if np is None:
        import numpy
        dtype = numpy.dtype({"names": ["ts", "seq", "hash", "view", "sender", "dest", "size", "flags", "kind",
                                       "seq_ok"],
                             "formats": ["<i8", "<i8", "<u4", "<i4", "<i4", "<i4", "<i4", "<u2", "i1", "u1"],
                             "offsets": [0, 8, 16, 20, 24, 28, 32, 36, 38, 39], "itemsize": 40})
        _check_layout(dtype)
        _ROW_DTYPE = dtype
        np = numpy
    return np


cdef _check_layout(dtype):
    cdef _Row r
    cdef char* b = <char*>&r
    offsets = [<char*>&r.ts - b, <char*>&r.seq - b, <char*>&r.hash - b, <char*>&r.view - b, <char*>&r.sender - b,
               <char*>&r.dest - b, <char*>&r.size - b, <char*>&r.flags - b, <char*>&r.kind - b, <char*>&r.seq_ok - b]
    if sizeof(_Row) != dtype.itemsize or offsets != [dtype.fields[f][1] for f in dtype.names]:
        raise ImportError(f"journalbuf: the row layout {offsets} / {sizeof(_Row)} bytes does not match ROW_DTYPE")


def __getattr__(name):
    # ROW_DTYPE, the NumPy dtype of _Row (a raw part stores the rows in this layout, little-endian), made on first use
    if name == "ROW_DTYPE":
        _numpy()
        return _ROW_DTYPE
    raise AttributeError(f"module 'jgpy._core.journalbuf' has no attribute {name!r}")


cdef class _Chunk:
    """A block of rows in a NumPy array: recorded into in place, written out as it is."""

    def __cinit__(self, arr):
        cdef Py_ssize_t addr = arr.ctypes.data
        self.arr = arr
        self.rows = <_Row*>addr
        self.n = 0
        self.cap = len(arr)
        self.specials = []


cdef class RowBuffer:
    """Rows in recording order, in chunks of ``chunk_rows`` rows that are written out as they are (no copy).

    A message row's columns (sender and dest as indices into :attr:`names`, flags, size, CRC-32C, the id's number)
    are taken when it is recorded, while the message is hot in the CPU cache, and the message is not kept; view
    and other rows keep their object. ``addr_names`` (address -> name cache) and ``name_of(addr)`` (asked for an
    address not in it) must be set before a message is recorded. Only the GIL protects the buffer: a row is
    stored by C code that runs no Python between taking its slot and filling it, so any thread may record."""

    def __cinit__(self, Py_ssize_t chunk_rows=65536):
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")
        self.chunk_rows = chunk_rows
        self._full = []
        self._full_rows = 0
        self._spares = []
        self.view_index = -1
        self.addr_names = {}
        self.name_of = str
        self._names = _Names()
        self._timed_ns = self._timed_rows = 0
        self._tick = 0
        self._cur = self._new_chunk()

    cdef _Chunk _new_chunk(self):
        arr = self._spares.pop() if self._spares else _numpy().empty(self.chunk_rows, _ROW_DTYPE)
        return _Chunk(arr)

    cdef int _make_room(self) except -1:
        """Retire the current chunk if it is full: the new one is made first (Python), the swap is plain C."""
        if self._cur.n < self._cur.cap:
            return 0
        cdef _Chunk fresh = self._new_chunk()
        if self._cur.n < self._cur.cap:          # another thread swapped while this one ran Python
            self._spares.append(fresh.arr)
            return 0
        self._full.append(self._cur)             # PyList_Append: runs no Python code
        self._full_rows += self._cur.n
        self._cur = fresh
        return 0

    def __len__(self):
        return self._full_rows + self._cur.n

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

    cdef int _extract(self, Message m, _Row* r) except -1:
        """The columns of message ``m`` (may call ``name_of``, i.e. Python: before a slot is taken)."""
        cdef object buf
        cdef const uint8_t* p
        cdef Py_buffer view
        cdef bint got_view = False
        cdef Py_ssize_t plen, name_len
        cdef int64_t s
        r.dest = self._addr_index(m.dest)
        r.flags = m.flags
        r.size = 0
        r.hash = 0
        r.seq = 0
        r.seq_ok = 0
        buf = m._buf
        if buf is None:
            r.sender = self._addr_index(m.src)
            return 0
        plen = m._len
        r.size = <int32_t>plen
        if type(buf) is bytes:
            p = <const uint8_t*>PyBytes_AS_STRING(buf) + m._off
        else:
            PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
            got_view = True
            p = <const uint8_t*>view.buf + m._off
        try:
            r.hash = _crc32c(p, plen)
            if plen <= MAX_ID_PAYLOAD and _parse_id(p, plen, &name_len, &s):
                r.sender = self._names.of_bytes(<const char*>p + (1 if plen > 0 and p[0] == 0x12 else 0), name_len)
                r.seq = s
                r.seq_ok = 1
        finally:
            if got_view:
                PyBuffer_Release(&view)
        if not r.seq_ok:                  # a numbered payload names its sender: no address lookup
            r.sender = self._addr_index(m.src)
        return 0

    cdef inline void _put(self, int kind, _Row* r, int64_t ts) noexcept:
        # call right after _make_room, with no Python code in between: the slot is this thread's
        cdef _Chunk c = self._cur
        r.ts = ts
        r.kind = <int8_t>kind
        r.view = self.view_index
        c.rows[c.n] = r[0]
        c.n += 1

    cdef int _record(self, int kind, Message m, int64_t ts) except -1:
        cdef _Row r
        self._extract(m, &r)
        self._make_room()
        self._put(kind, &r, ts)
        return 0

    cdef void _time(self, int64_t ts, Py_ssize_t rows, uint32_t every) noexcept:
        """Every ``every``-th call (a power of 2): add the time since ``ts`` (when the rows' clock was read) to
        the sample, unless the thread was evidently preempted meanwhile."""
        cdef int64_t took
        self._tick += 1
        if self._tick & (every - 1) == 0:
            took = monotonic_ns() - ts
            if took < 20000 * rows:
                self._timed_ns += took
                self._timed_rows += rows

    cdef int record_message(self, int kind, Message m) except -1:
        """A message row (kind 0: deliver, 1: send) from C (JOURNAL's send path)."""
        cdef int64_t ts = monotonic_ns()
        self._record(kind, m, ts)
        self._time(ts, 1, 64)
        return 0

    def record(self, int kind, obj):
        """Record a row: kind 0 (deliver) and 1 (send) take a Message, other kinds keep ``obj``."""
        cdef _Row r
        cdef int64_t ts = monotonic_ns()
        if kind <= 1:
            self._record(kind, <Message?>obj, ts)
            return
        r.sender = r.dest = -1
        r.flags = 0
        r.size = 0
        r.hash = 0
        r.seq = 0
        r.seq_ok = 0
        entry = [0, obj]                  # made before the slot is taken (making objects may run the GC)
        self._make_room()
        entry[0] = self._cur.n            # an int: not tracked by the GC, runs no Python
        self._cur.specials.append(entry)
        self._put(kind, &r, ts)

    def record_batch(self, int kind, list msgs):
        """Record one message row (kind 0 or 1) per message of ``msgs``, all with the same timestamp (a batch
        reaches the top of the stack at once)."""
        cdef object m
        cdef int64_t ts = monotonic_ns()
        if kind > 1:
            raise ValueError("record_batch records messages (kind 0 or 1)")
        for m in msgs:
            self._record(kind, <Message?>m, ts)
        if msgs:
            self._time(ts, len(msgs), 16)

    def timing(self) -> tuple:
        """``(ns, rows)``: the wall time a sample of the message rows took to record (every 16th batch, every
        64th single row, from the clock read on), measured where it runs: an upper bound of the recording's
        CPU cost per row (on a shared VM wall time includes stolen time)."""
        return self._timed_ns, self._timed_rows

    def take(self, bint partial=True) -> list:
        """The rows recorded so far, oldest first, as ``[(rows, specials)]`` per chunk: ``rows`` a ROW_DTYPE
        array, ``specials`` ``[[row, object]]`` for the rows that are not messages. Only full chunks unless
        ``partial``. Pass each array back with :meth:`give_back` once written."""
        cdef _Chunk fresh = None
        cdef _Chunk c
        if partial and self._cur.n:
            fresh = self._new_chunk()
        cdef list done = self._full
        cdef list empty = []
        self._full = empty
        self._full_rows = 0
        if fresh is not None and self._cur.n:
            done.append(self._cur)
            self._cur = fresh
        elif fresh is not None:
            self._spares.append(fresh.arr)
        return [(c.arr[:c.n], c.specials) for c in done]

    def give_back(self, rows) -> None:
        """A written array from :meth:`take` may be recorded into again (up to two are kept)."""
        base = rows.base if rows.base is not None else rows
        if len(self._spares) < 2 and isinstance(base, np.ndarray) and base.dtype == _ROW_DTYPE \
                and len(base) == self.chunk_rows:
            self._spares.append(base)
