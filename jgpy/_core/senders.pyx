# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# Every C index below is into an array allocated here for the n items; sendmany, which indexes Python objects,
# switches the checks back on.
"""Senders of single datagrams and bursts: :class:`DatagramSender` (one datagram, ``sendto`` without a GIL
hand-over) and :func:`sendmany` (a list of datagrams with as few ``sendmmsg()`` calls as possible)."""

cimport cython

import os

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport errno, EAGAIN, EBADF, EINTR, ENOBUFS, ENOTSOCK
from libc.stdlib cimport calloc, free
from posix.uio cimport iovec

from jgpy._core.clock cimport sleep_us
from jgpy._core.sockets cimport (MAX_VLEN, MSG_DONTWAIT, POLLOUT_MS, SOCK_DGRAM, c_sendto, fill_sockaddr, mmsghdr,
                                 sendmmsg, sock_fd, sockaddr, sockaddr_storage, socklen_t, wait_writable)
from jgpy._core.sockets import MAX_UDP_PAYLOAD


cdef int _sendmany_c(int fd, mmsghdr* msgs, Py_ssize_t n, Py_ssize_t* sent, int* fatal,
                     int* nfail, int* last_err, Py_ssize_t* last_idx) noexcept nogil:
    cdef Py_ssize_t i = 0
    cdef unsigned int vlen
    cdef int r, e
    while i < n:
        vlen = <unsigned int>(n - i if n - i < MAX_VLEN else MAX_VLEN)
        r = sendmmsg(fd, msgs + i, vlen, MSG_DONTWAIT)
        if r > 0:
            i += r
            sent[0] += r
            continue
        e = errno if r < 0 else EAGAIN
        if e == EINTR:
            continue
        if e == EAGAIN or e == ENOBUFS:
            if wait_writable(fd, POLLOUT_MS) != 0:
                fatal[0] = EBADF
                return -1
            if e == ENOBUFS:
                sleep_us(200)
            continue
        if e == EBADF or e == ENOTSOCK:
            fatal[0] = e
            return -1
        nfail[0] += 1
        last_err[0] = e
        last_idx[0] = i
        i += 1      # drop that datagram, send the rest
    return 0


@cython.boundscheck(True)
@cython.wraparound(True)
def sendmany(sock, items, log=None):
    """Sends ``items`` = [(data: bytes-like, (host, port)), ...] with as few sendmmsg calls as possible.

    The GIL is released while sending; EAGAIN/ENOBUFS are retried after poll(POLLOUT).  A datagram
    the kernel refuses (e.g. EMSGSIZE, EACCES) is skipped and logged on ``log`` (a
    ``jgpy.stack.logutil.RateLimitedLog``, or anything with its ``error``; None: not logged) and the rest is
    sent.  Returns the number of datagrams sent.  Raises OSError if the socket is closed, ValueError
    for a malformed item or destination (before anything is sent).
    """
    cdef int fd = sock_fd(sock, SOCK_DGRAM)
    cdef Py_ssize_t n
    cdef Py_ssize_t i, nviews = 0, sent = 0, last_idx = -1
    cdef Py_ssize_t naddr = 0
    cdef int fatal = 0, nfail = 0, last_err = 0
    cdef Py_buffer* views = NULL
    cdef mmsghdr* msgs = NULL
    cdef iovec* iovs = NULL
    cdef sockaddr_storage* addrs = NULL
    cdef socklen_t* addrlens = NULL
    items = list(items)     # our own copy: resolving a name releases the GIL, another thread may change items
    n = len(items)
    if n == 0:
        return 0
    views = <Py_buffer*>calloc(n, sizeof(Py_buffer))
    msgs = <mmsghdr*>calloc(n, sizeof(mmsghdr))
    iovs = <iovec*>calloc(n, sizeof(iovec))
    addrs = <sockaddr_storage*>calloc(n, sizeof(sockaddr_storage))
    addrlens = <socklen_t*>calloc(n, sizeof(socklen_t))
    try:
        if views == NULL or msgs == NULL or iovs == NULL or addrs == NULL or addrlens == NULL:
            raise MemoryError(f"cannot allocate headers for {n} datagrams")
        index = {}
        for i in range(n):
            item = items[i]
            try:
                data, dest = item
            except (TypeError, ValueError):
                raise ValueError(f"items[{i}] must be (data, (host, port)), got {item!r}") from None
            key = dest if type(dest) is tuple else tuple(dest)
            j = index.get(key)
            if j is None:
                fill_sockaddr(sock, key, &addrs[naddr], &addrlens[naddr])
                j = naddr
                index[key] = j
                naddr += 1
            PyObject_GetBuffer(data, &views[i], PyBUF_SIMPLE)
            nviews += 1
            iovs[i].iov_base = views[i].buf
            iovs[i].iov_len = <size_t>views[i].len
            msgs[i].msg_hdr.msg_iov = &iovs[i]
            msgs[i].msg_hdr.msg_iovlen = 1
            msgs[i].msg_hdr.msg_name = &addrs[<Py_ssize_t>j]
            msgs[i].msg_hdr.msg_namelen = addrlens[<Py_ssize_t>j]
        with nogil:
            _sendmany_c(fd, msgs, n, &sent, &fatal, &nfail, &last_err, &last_idx)
        if fatal:
            raise OSError(fatal, f"sendmany: {os.strerror(fatal)} (the socket was closed?) after {sent} of {n} "
                                 f"datagrams")
        if nfail and log is not None:
            log.error("sendmany", "sendmany: %d of %d datagrams refused by the kernel and skipped, the last one "
                      "(items[%d], %d bytes to %r): %s", nfail, n, last_idx, views[last_idx].len,
                      items[last_idx][1], os.strerror(last_err))
        return sent
    finally:
        for i in range(nviews):
            PyBuffer_Release(&views[i])
        free(views)
        free(msgs)
        free(iovs)
        free(addrs)
        free(addrlens)


cdef class DatagramSender:
    """Sends single datagrams from one socket, to destinations whose sockaddr it caches.

    A datagram first goes out with MSG_DONTWAIT while the GIL is held: on loopback that is a few
    microseconds and spares the thread the GIL hand-over a blocking ``socket.sendto`` costs (another
    thread takes the GIL and the sender waits to get it back). Only when the socket buffer is full does it
    wait for room, with the GIL released. Errors raise OSError with the kernel's errno."""

    def __init__(self, sock):
        self._sock = sock
        self._fd = sock_fd(sock, SOCK_DGRAM)
        self._addrs = {}

    cdef bytes _addr_of(self, object dest):
        cdef sockaddr_storage ss
        cdef socklen_t sl = 0
        cdef bytes blob = self._addrs.get(dest)
        if blob is None:
            fill_sockaddr(self._sock, dest if type(dest) is tuple else dest.sockaddr(), &ss, &sl)
            blob = PyBytes_FromStringAndSize(<char*>&ss, sl)
            if len(self._addrs) > 4096:
                self._addrs.clear()
            self._addrs[dest] = blob
        return blob

    def send(self, data, dest):
        """Send ``data`` (bytes-like) to ``dest`` = (host, port[, flowinfo, scope_id]), or to an object
        whose ``sockaddr()`` returns such a tuple (an IpAddress)."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            return self.send_raw(<const char*>view.buf, <size_t>view.len, dest)
        finally:
            PyBuffer_Release(&view)

    cdef Py_ssize_t send_raw(self, const char* buf, size_t n, object dest) except -1:
        """:meth:`send` of ``n`` bytes at ``buf`` (the C entry point; the caller keeps them valid: the GIL
        is released while it waits for room)."""
        cdef bytes blob = self._addr_of(dest)
        cdef const sockaddr* sa = <const sockaddr*><const char*>blob
        cdef socklen_t sl = <socklen_t>len(blob)
        cdef ssize_t rc
        cdef int err = 0
        cdef int tries = 0
        rc = c_sendto(self._fd, buf, n, MSG_DONTWAIT, sa, sl)
        if rc < 0:
            err = errno
        while rc < 0 and (err == EAGAIN or err == ENOBUFS or err == EINTR) and tries < 50:   # <= ~5 s
            tries += 1
            with nogil:
                if wait_writable(self._fd, 100) != 0:
                    err = EBADF                                 # the socket was closed meanwhile
                else:
                    rc = c_sendto(self._fd, buf, n, MSG_DONTWAIT, sa, sl)
                    err = errno if rc < 0 else 0
            if rc < 0 and err == EBADF:
                break
        if rc < 0:
            raise OSError(err, os.strerror(err))
        return rc
