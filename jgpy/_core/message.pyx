# cython: language_level=3
"""The message: destination, source, flags, a payload window and headers keyed by protocol id.

A received message keeps its payload as a window ``(buffer, offset, length)`` into the datagram it
arrived in (no copy), and its headers as ``(protocol id, magic, body offsets)``: a header object is
built only when somebody asks for it, and an untouched header is re-sent by copying its bytes.
Headers keep insertion order, which is the wire order (top-most protocol first, transport last).
"""

cimport cython
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF, Py_XINCREF
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

_object_codec = None   # set by the default dialect: (object_to_buffer, object_from_buffer)


cdef class WireDialect:
    cdef object read_header_at(self, int magic, object raw, Py_ssize_t off, Py_ssize_t end):
        raise NotImplementedError

    cdef int write_message(self, Writer w, Message m, bint no_addrs, object list_src) except -1:
        raise NotImplementedError

    cdef int write_single(self, Writer w, Message m, bint multicast) except -1:
        raise NotImplementedError

    cdef int write_list(self, Writer w, object dest, object src, list msgs, bint multicast) except -1:
        raise NotImplementedError

    cdef bytes marshal_message(self, Message m):
        """``Util.objectToByteBuffer(m)``: the message as a value of its own (SEQUENCER's FORWARD payload)."""
        raise NotImplementedError

    cdef Message unmarshal_message(self, object buf, Py_ssize_t off, Py_ssize_t end):
        """The inverse of :meth:`marshal_message`, read from ``buf[off:end]`` without a copy (the message's
        payload is a window into ``buf``); raises WireFormatError for anything else."""
        raise NotImplementedError


cdef Message new_message():
    return Message.__new__(Message)


_FLAG_NAMES = ((1, "OOB"), (2, "DONT_BUNDLE"), (4, "NO_FC"), (8, "SCOPED"), (16, "NO_RELIABILITY"),
               (32, "NO_TOTAL_ORDER"), (64, "NO_RELAY"))


def flags_to_string(int flags):
    names = [n for bit, n in _FLAG_NAMES if flags & bit]
    rest = flags & ~0x7F
    if rest:
        names.append(hex(rest))
    return "|".join(names)


# Not tracked by the cycle collector: no cycle can pass through a message, and its header objects are held in
# its C header array (no Python list per message), so a window of retained messages costs a collection nothing.
@cython.no_gc
cdef class Message:
    """A JGroups message (``org.jgroups.Message``).

    ``dest`` None means "to the whole cluster". The payload is raw bytes (``buffer``); use
    :meth:`set_object`/:meth:`get_object` for Java's tagged objects (``Message.setObject``).
    """

    OOB = 1
    DONT_BUNDLE = 2
    NO_FC = 4
    SCOPED = 8
    NO_RELIABILITY = 16
    NO_TOTAL_ORDER = 32
    NO_RELAY = 64
    # transient (local-only) flags
    OOB_DELIVERED = 1
    KEPT_FOR_XMIT = 2      # NAKACK keeps this multicast of ours; the transport's loopback passes it up uncopied

    def __cinit__(self):
        self._h = self._inline
        self._cap = INLINE_HDRS
        self._nh = 0
        self._off = 0
        self._len = 0

    def __init__(self, dest=None, buf=None, src=None, int flags=0):
        self.dest = dest
        self.src = src
        self.flags = flags
        if buf is not None:
            self.set_buffer(buf)

    def __dealloc__(self):
        cdef int i
        if self._h != NULL:
            for i in range(self._nh):
                Py_XDECREF(self._h[i].obj)
        if self._h != self._inline and self._h != NULL:
            PyMem_Free(self._h)

    # ---- payload ----

    cdef int set_payload(self, object buf, Py_ssize_t off, Py_ssize_t length) except -1:
        self._buf = buf
        self._off = off
        self._len = length
        return 0

    def set_buffer(self, buf, Py_ssize_t offset=0, Py_ssize_t length=-1):
        """Use ``buf[offset:offset+length]`` as payload without copying (None clears it)."""
        if buf is None:
            self._buf = None
            self._off = self._len = 0
            return
        if isinstance(buf, str):
            raise TypeError("a Message payload is bytes; use set_object() for a Java String or encode the text")
        n = len(memoryview(buf).cast("B")) if not isinstance(buf, bytes) else PyBytes_GET_SIZE(buf)
        if length < 0:
            length = n - offset
        if offset < 0 or length < 0 or offset + length > n:
            raise ValueError(f"window offset={offset} length={length} does not fit a buffer of {n} bytes")
        self._buf = buf
        self._off = offset
        self._len = length

    @property
    def buffer(self):
        """The payload as ``bytes`` (a copy when the payload is a window into a larger buffer), or None."""
        if self._buf is None:
            return None
        if type(self._buf) is bytes:
            if self._off == 0 and self._len == PyBytes_GET_SIZE(self._buf):
                return self._buf
            return PyBytes_FromStringAndSize(PyBytes_AS_STRING(self._buf) + self._off, self._len)
        return bytes(memoryview(self._buf).cast("B")[self._off:self._off + self._len])

    @buffer.setter
    def buffer(self, value):
        self.set_buffer(value)

    @property
    def payload(self):
        """Zero-copy read-only ``memoryview`` of the payload, or None."""
        if self._buf is None:
            return None
        return memoryview(self._buf).cast("B")[self._off:self._off + self._len].toreadonly()

    @property
    def piggyback(self):
        """A message the transport sends in the same datagram as this one, before it (UNICAST's pending ACK to
        the destination), or None; set only while the message travels down the stack."""
        return self._piggyback

    @property
    def raw_buffer(self):
        """The object holding the payload (see :attr:`offset` and :attr:`length`)."""
        return self._buf

    @property
    def offset(self):
        return self._off

    @property
    def length(self):
        """Payload length in bytes (0 when there is no payload)."""
        return self._len if self._buf is not None else 0

    def has_buffer(self):
        return self._buf is not None

    def set_object(self, obj):
        """Store ``obj`` the way Java's ``Message.setObject`` does (a 1-byte type tag, then the value)."""
        self.set_buffer(_object_codec[0](obj))

    def get_object(self):
        """Decode a payload written by Java's ``Message.setObject`` (see ``jgpy.java_object``)."""
        if self._buf is None:
            return None
        return _object_codec[1](self.payload)

    # ---- flags ----

    def set_flag(self, int flag):
        self.flags |= flag
        return self

    def clear_flag(self, int flag):
        self.flags &= ~flag
        return self

    def is_flag_set(self, int flag):
        return (self.flags & flag) == flag

    # ---- headers ----

    cdef int _reserve(self, int n) except -1:
        cdef HdrRef* nh
        if n <= self._cap:
            return 0
        cdef int cap = self._cap * 2
        while cap < n:
            cap *= 2
        nh = <HdrRef*>PyMem_Malloc(cap * sizeof(HdrRef))
        if nh == NULL:
            raise MemoryError()
        memcpy(nh, self._h, self._nh * sizeof(HdrRef))
        if self._h != self._inline:
            PyMem_Free(self._h)
        self._h = nh
        self._cap = cap
        return 0

    cdef int _find(self, int16_t id):
        cdef int i
        for i in range(self._nh):
            if self._h[i].id == id:
                return i
        return -1

    cdef int set_raw(self, object raw, WireDialect dialect) except -1:
        self._raw = raw
        self._dialect = dialect
        return 0

    cdef int add_raw_header(self, int16_t id, int16_t magic, Py_ssize_t off, Py_ssize_t end) except -1:
        self._reserve(self._nh + 1)
        self._h[self._nh].id = id
        self._h[self._nh].magic = magic
        self._h[self._nh].off = off
        self._h[self._nh].end = end
        self._h[self._nh].obj = NULL
        self._nh += 1
        return 0

    cdef object built_header(self, int i):
        """Header ``i`` if its object exists (put, or decoded already), else None (it is still raw bytes)."""
        if self._h[i].obj == NULL:
            return None
        return <object>self._h[i].obj

    cdef object _materialize(self, int i):
        cdef object hdr
        if self._h[i].obj != NULL:
            return <object>self._h[i].obj
        hdr = self._dialect.read_header_at(self._h[i].magic, self._raw, self._h[i].off, self._h[i].end)
        Py_INCREF(hdr)
        self._h[i].obj = <PyObject*>hdr
        return hdr

    cdef object header(self, int16_t id):
        cdef int i = self._find(id)
        if i < 0:
            return None
        return self._materialize(i)

    cdef int put(self, int16_t id, object hdr) except -1:
        if hdr is None:
            raise ValueError("header must not be None")
        if id <= 0:
            raise ValueError(f"protocol id {id} is invalid: Java drops headers with id <= 0")
        cdef int i = self._find(id)
        cdef PyObject* old = NULL
        if i < 0:
            self._reserve(self._nh + 1)
            i = self._nh
            self._nh += 1
        else:
            old = self._h[i].obj
        Py_INCREF(hdr)
        self._h[i].id = id
        self._h[i].magic = -1
        self._h[i].off = -1
        self._h[i].end = -1
        self._h[i].obj = <PyObject*>hdr
        Py_XDECREF(old)                  # last: its deallocation may run Python code
        return 0

    def put_header(self, int id, hdr):
        """Add ``hdr`` for protocol ``id``; an existing header of that id is replaced in place."""
        self.put(<int16_t>id, hdr)
        return self

    def put_header_if_absent(self, int id, hdr):
        """Add ``hdr`` unless protocol ``id`` already has a header; returns the header now present."""
        cdef int i = self._find(<int16_t>id)
        if i >= 0:
            return self._materialize(i)
        self.put(<int16_t>id, hdr)
        return hdr

    def get_header(self, int id):
        """The header of protocol ``id`` (decoded on first access), or None."""
        return self.header(<int16_t>id)

    def has_header(self, int id):
        return self._find(<int16_t>id) >= 0

    def remove_header(self, int id):
        """Remove and return the header of protocol ``id`` (None if absent)."""
        cdef int i = self._find(<int16_t>id)
        if i < 0:
            return None
        hdr = self._materialize(i)              # our own reference; the array's is dropped below
        cdef PyObject* held = self._h[i].obj
        cdef int j
        for j in range(i, self._nh - 1):
            self._h[j] = self._h[j + 1]
        self._nh -= 1
        Py_XDECREF(held)
        return hdr

    @property
    def headers(self):
        """``[(protocol id, header), ...]`` in wire order (decodes every header)."""
        return [(self._h[i].id, self._materialize(i)) for i in range(self._nh)]

    def header_ids(self):
        return [self._h[i].id for i in range(self._nh)]

    @property
    def num_headers(self):
        return self._nh

    def raw_header(self, int id):
        """``(magic, body bytes)`` of an undecoded received header, else None (for diagnostics)."""
        cdef int i = self._find(<int16_t>id)
        if i < 0 or self._h[i].off < 0:
            return None
        return (self._h[i].magic, bytes(memoryview(self._raw)[self._h[i].off:self._h[i].end]))

    def header_refs(self):
        """``[(protocol id, magic, body offset, body end)]``: where raw headers sit (-1 = object only)."""
        return [(self._h[i].id, self._h[i].magic, self._h[i].off, self._h[i].end) for i in range(self._nh)]

    # ---- copies and printing ----

    cpdef Message copy(self, bint copy_buffer=True, bint copy_headers=True):
        """A new message with the same addresses and flags; payload window and header objects are shared
        (as in Java's ``Message.copy``), raw header bytes too."""
        cdef Message m = Message.__new__(Message)
        cdef int i
        m.dest = self.dest
        m.src = self.src
        m.flags = self.flags
        m.transient_flags = self.transient_flags
        if copy_buffer:
            m._buf = self._buf
            m._off = self._off
            m._len = self._len
        if copy_headers and self._nh:
            m._reserve(self._nh)
            memcpy(m._h, self._h, self._nh * sizeof(HdrRef))
            m._nh = self._nh
            for i in range(m._nh):
                Py_XINCREF(m._h[i].obj)
            m._raw = self._raw
            m._dialect = self._dialect
        return m

    def __repr__(self):
        parts = [f"dst: {self.dest if self.dest is not None else '<all>'}",
                 f"src: {self.src}"]
        if self._nh:
            parts.append(f"({self._nh} headers)")
        parts.append(f"size={self.length} bytes")
        if self.flags:
            parts.append(f"flags={flags_to_string(self.flags)}")
        return "[" + ", ".join(parts) + "]"

    def __reduce__(self):
        return (_rebuild_message, (self.dest, self.src, self.flags, self.buffer, self.headers))


def _rebuild_message(dest, src, flags, buf, headers):
    m = Message(dest, buf, src, flags)
    for pid, hdr in headers:
        m.put_header(pid, hdr)
    return m
