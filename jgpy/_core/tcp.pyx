# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# Every C index below is into the receive buffer, whose size is checked before each write into it, or into
# an iovec array of _MAX_IOV entries filled at most that far.
"""TCP hot paths: the frame reader of one connection and its frame writer.

JGroups' TCP transport (``BasicTCP`` / ``TCPConnectionMap`` of 2.12) sends every datagram as a frame: a
4-byte big-endian length, then the datagram bytes. Nothing here knows more than that: the transport makes
the connections (and the ``bela`` handshake) with Python's :mod:`socket` module and hands the connected
sockets to these classes.

* :class:`StreamReader` -- the receive loop of one connection: ``recv()`` into a buffer with the GIL released,
  then the GIL is taken *once per read* to hand ``handler(frames, sources, multicast)`` the complete frames
  as ``bytes``, in runs of consecutive multicast or unicast frames (the MULTICAST bit of the datagram's
  flags), so the transport's batches stay all-multicast or all-unicast and frames keep their order.
* :class:`StreamWriter` -- writes frames (the length and the datagram in one ``sendmsg``, many frames in one
  call), serialised by a lock, with the GIL released while the kernel takes the bytes.
"""

cimport cython

import os

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_GET_SIZE, PyList_GET_ITEM
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memmove, memset
from libc.stdint cimport uint8_t, uint32_t, int64_t
from libc.errno cimport errno, EINTR, EAGAIN
from posix.uio cimport iovec

from jgpy._core.sync cimport Lock
from jgpy.errors import WireFormatError


cdef extern from "<sys/socket.h>" nogil:
    ssize_t c_recv "recv" (int fd, void* buf, size_t n, int flags)
    struct msghdr:
        void* msg_name
        unsigned int msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags
    ssize_t sendmsg(int fd, const msghdr* msg, int flags)
    enum: MSG_NOSIGNAL

cdef extern from "<arpa/inet.h>" nogil:
    uint32_t htonl(uint32_t)
    uint32_t ntohl(uint32_t)


cdef enum:
    _MULTICAST = 2              # TP flag of the datagram (the byte after the version short)
    _MAX_IOV = 1024             # IOV_MAX on Linux: 512 frames per sendmsg
    _MIN_READ = 16384           # read at least this much per recv() (the buffer grows for longer frames)


#: a frame longer than this closes the connection (what a peer can make us allocate)
DEFAULT_MAX_FRAME = 1024 * 1024


cdef int _sock_fd(sock) except -1:
    fd = sock.fileno()
    if fd < 0:
        raise OSError(9, "the socket is closed")
    return fd


cdef class SameSource:
    """``sources[i]`` for every frame of a connection: its peer (the transport logs it with a bad datagram)."""

    cdef readonly object peer

    def __init__(self, peer):
        self.peer = peer

    def __getitem__(self, i):
        return self.peer

    def __repr__(self):
        return f"SameSource({self.peer!r})"


cdef class StreamReader:
    """StreamReader(sock, handler, sources=None, *, bufsize=262144, max_frame=DEFAULT_MAX_FRAME)

    Reads frames from one connected stream socket until it ends; call :meth:`run` on the thread that is to
    read. The buffer starts at ``bufsize`` bytes; it grows (doubling) only as far as the bytes of a frame
    really arrive, never beyond what a frame of ``max_frame`` bytes needs, and goes back to ``bufsize`` once
    what is left of the stream fits in half of that: a peer holds at most about twice its longest frame. ``handler(frames, sources, multicast)`` is called with each run of complete frames (``bytes``); an
    exception it raises is passed to ``on_error(exc)`` (the loop goes on). :meth:`run` returns why it stopped:
    ``"eof"`` (the peer closed), ``"error: ..."`` (the socket failed, e.g. because the transport shut it down)
    or ``"frame length N ..."`` (a length outside 0..max_frame: the stream cannot be trusted any more)."""

    cdef object _sock
    cdef int _fd
    cdef object handler
    cdef object sources
    cdef public object on_error
    cdef char* _buf
    cdef Py_ssize_t _cap, _start, _end, _bufsize
    cdef readonly Py_ssize_t max_frame
    cdef readonly int64_t frames_received
    cdef readonly int64_t bytes_received
    cdef readonly int64_t reads

    def __init__(self, sock, handler, sources=None, *, Py_ssize_t bufsize=262144,
                 Py_ssize_t max_frame=DEFAULT_MAX_FRAME):
        if bufsize < _MIN_READ:
            bufsize = _MIN_READ
        if max_frame < 0:
            raise ValueError(f"max_frame={max_frame}: must be >= 0")
        self._sock = sock
        self._fd = _sock_fd(sock)
        self.handler = handler
        self.sources = sources
        self.max_frame = max_frame
        self._buf = <char*>malloc(bufsize)
        if self._buf == NULL:
            raise MemoryError()
        self._cap = self._bufsize = bufsize

    def __dealloc__(self):
        free(self._buf)

    @property
    def pending(self):
        """Bytes of an incomplete frame read so far."""
        return self._end - self._start

    @property
    def capacity(self):
        """Bytes of the receive buffer now."""
        return self._cap

    def feed(self, data):
        """Process ``data`` as if it had been read from the socket (bytes that came with the handshake, and
        tests); returns None, or why the stream must be closed."""
        cdef Py_buffer view
        cdef Py_ssize_t n
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            n = view.len
            if self._room(n) < 0:
                raise MemoryError()
            memmove(self._buf + self._end, view.buf, n)
            self._end += n
        finally:
            PyBuffer_Release(&view)
        return self._deliver()

    cdef int _room(self, Py_ssize_t want) noexcept:
        """Make room for ``want`` more bytes after ``_end`` (moving the partial frame to the front, growing
        the buffer to at least twice its size, but never past what a frame of max_frame needs); -1 if
        memory ran out."""
        cdef Py_ssize_t used = self._end - self._start
        cdef Py_ssize_t cap, limit
        cdef char* grown
        if self._cap - self._end >= want:
            return 0
        if self._start > 0:
            memmove(self._buf, self._buf + self._start, used)
            self._start, self._end = 0, used
            if self._cap - self._end >= want:
                return 0
        limit = self.max_frame + 4 + _MIN_READ
        cap = 2 * self._cap
        if cap > limit:
            cap = limit
        if cap < used + want:
            cap = used + want
        grown = <char*>realloc(self._buf, cap)
        if grown == NULL:
            return -1
        self._buf, self._cap = grown, cap
        return 0

    cdef void _shrink(self) noexcept:
        """Back to ``bufsize`` once the rest of the stream fits in half of it (after a long frame)."""
        cdef Py_ssize_t used = self._end - self._start
        cdef char* smaller
        if self._cap <= self._bufsize or used > self._bufsize // 2:
            return
        if self._start > 0:
            memmove(self._buf, self._buf + self._start, used)
            self._start, self._end = 0, used
        smaller = <char*>realloc(self._buf, self._bufsize)
        if smaller != NULL:
            self._buf, self._cap = smaller, self._bufsize

    cdef object _deliver(self):
        """Hand the complete frames in the buffer to the handler; None, or why the stream is unusable."""
        cdef Py_ssize_t pos = self._start, end = self._end
        cdef uint32_t raw
        cdef long n
        cdef bint mcast, run_mcast = False
        cdef list run = None
        cdef bytes f
        cdef object verdict = None
        while end - pos >= 4:
            raw = (<uint8_t>self._buf[pos] << 24) | (<uint8_t>self._buf[pos + 1] << 16) | \
                  (<uint8_t>self._buf[pos + 2] << 8) | <uint8_t>self._buf[pos + 3]
            n = <long><int>raw                # Java's readInt: signed
            if n < 0 or n > self.max_frame:
                verdict = f"frame length {n} outside 0..{self.max_frame}"
                break
            if end - pos - 4 < n:
                break
            f = PyBytes_FromStringAndSize(self._buf + pos + 4, n)
            mcast = n >= 3 and (<uint8_t>self._buf[pos + 6] & _MULTICAST) != 0
            if run is not None and mcast != run_mcast:
                self._hand(run, run_mcast)
                run = None
            if run is None:
                run, run_mcast = [], mcast
            run.append(f)
            pos += 4 + n
            self.frames_received += 1
        self._start = pos
        if self._start == self._end:
            self._start = self._end = 0
        self._shrink()
        if run is not None:
            self._hand(run, run_mcast)
        return verdict

    cdef void _hand(self, list frames, bint multicast):
        try:
            self.handler(frames, self.sources, multicast)
        except BaseException as e:        # never let the layer above end a connection's receive loop
            if self.on_error is not None:
                try:
                    self.on_error(e)
                except BaseException:
                    pass

    def run(self):
        """Read until the stream ends (see the class docstring for what is returned)."""
        cdef ssize_t rc
        cdef int err
        cdef Py_ssize_t want
        cdef int fd = self._fd
        while True:
            want = self._cap - self._end
            if want < _MIN_READ:
                if self._room(_MIN_READ) < 0:
                    return "error: out of memory for the receive buffer"
                want = self._cap - self._end
            with nogil:
                rc = c_recv(fd, self._buf + self._end, <size_t>want, 0)
                err = errno if rc < 0 else 0
            if rc == 0:
                return "eof"
            if rc < 0:
                if err == EINTR or err == EAGAIN:
                    continue
                return f"error: {os.strerror(err)}"
            self._end += rc
            self.bytes_received += rc
            self.reads += 1
            verdict = self._deliver()
            if verdict is not None:
                return verdict


cdef class StreamWriter:
    """StreamWriter(sock)

    Writes frames to one connected stream socket (blocking). Calls from several threads are serialised by a
    lock; the GIL is released while waiting for it and while the kernel takes the bytes. Errors raise
    OSError with the kernel's errno (the connection is then unusable)."""

    cdef object _sock
    cdef int _fd
    cdef Lock _lock
    cdef readonly int64_t frames_sent
    cdef readonly int64_t bytes_sent
    cdef readonly int64_t writes

    def __init__(self, sock):
        self._sock = sock
        self._fd = _sock_fd(sock)
        self._lock = Lock()

    def send(self, data):
        """Write one frame carrying ``data`` (bytes-like)."""
        self.send_many([data])

    def send_many(self, list datagrams):
        """Write one frame per datagram of ``datagrams``, in order, with as few ``sendmsg`` calls as possible."""
        cdef Py_ssize_t count = PyList_GET_SIZE(datagrams)
        cdef Py_ssize_t i = 0, j, k, chunk
        cdef Py_buffer* views
        cdef uint32_t* lengths
        cdef iovec* iov
        cdef int nviews = 0
        cdef int err = 0
        cdef size_t total
        if count == 0:
            return
        chunk = count if count < _MAX_IOV // 2 else _MAX_IOV // 2
        views = <Py_buffer*>malloc(chunk * sizeof(Py_buffer))
        lengths = <uint32_t*>malloc(chunk * sizeof(uint32_t))
        iov = <iovec*>malloc(2 * chunk * sizeof(iovec))
        if views == NULL or lengths == NULL or iov == NULL:
            free(views); free(lengths); free(iov)
            raise MemoryError()
        self._lock.take()
        try:
            while i < count and err == 0:
                k = count - i if count - i < chunk else chunk
                total = 0
                nviews = 0
                for j in range(k):
                    PyObject_GetBuffer(<object>PyList_GET_ITEM(datagrams, i + j), &views[j], PyBUF_SIMPLE)
                    nviews += 1
                    lengths[j] = htonl(<uint32_t>views[j].len)
                    iov[2 * j].iov_base = &lengths[j]
                    iov[2 * j].iov_len = 4
                    iov[2 * j + 1].iov_base = views[j].buf
                    iov[2 * j + 1].iov_len = <size_t>views[j].len
                    total += 4 + <size_t>views[j].len
                with nogil:
                    err = _write_all(self._fd, iov, <int>(2 * k))
                for j in range(nviews):
                    PyBuffer_Release(&views[j])
                nviews = 0
                if err == 0:
                    self.frames_sent += k
                    self.bytes_sent += total
                    self.writes += 1
                i += k
        finally:
            for j in range(nviews):
                PyBuffer_Release(&views[j])
            self._lock.give()
            free(views); free(lengths); free(iov)
        if err != 0:
            raise OSError(err, os.strerror(err))


cdef int _write_all(int fd, iovec* iov, int cnt) noexcept nogil:
    """sendmsg until every byte of ``iov[0:cnt]`` is written (advancing past partial writes; MSG_NOSIGNAL: a
    closed peer is EPIPE, not SIGPIPE); 0 or an errno."""
    cdef ssize_t rc
    cdef size_t left
    cdef msghdr m
    memset(&m, 0, sizeof(m))
    while cnt > 0:
        m.msg_iov = iov
        m.msg_iovlen = <size_t>cnt
        rc = sendmsg(fd, &m, MSG_NOSIGNAL)
        if rc < 0:
            if errno == EINTR:
                continue
            return errno
        left = <size_t>rc
        while cnt > 0 and left >= iov[0].iov_len:
            left -= iov[0].iov_len
            iov += 1
            cnt -= 1
        if cnt > 0 and left:
            iov[0].iov_base = <char*>iov[0].iov_base + left
            iov[0].iov_len -= left
    return 0
