# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=False
# embedsignature is off here: Cython 3.3 misplaces the "*" of keyword-only __init__ arguments in the
# embedded signature; the class docstring starts with the right one.
# Every C index below is into an array allocated here with a size checked in __init__ (batch, capacity), and every
# ring offset is reduced modulo the ring size, which is what makes bounds and wraparound checking unnecessary.
"""The Bundler: coalesces small entries for one destination into datagrams ``prefix + e1 + ... + ek + suffix``
(at most ``max_size`` bytes), sent by a background thread with ``sendmmsg()`` and the GIL released.

Entries are copied into a preallocated ring; the sender's iovecs point straight into it. **Ordering:** entries
added by one thread are sent in the order they were added (``add`` calls are serialised by a mutex, waiting
adders are served first come, first served, and the ring is drained in order).

Locking rule (deadlock freedom): the Bundler's pthread mutex is never held while waiting for the GIL. Code that
holds the GIL takes the mutex with ``trylock`` and, if that fails, releases the GIL before blocking on it; the
sender thread takes the GIL (only to log) with the mutex released.
"""

import logging
import os
import threading

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.errno cimport errno, EAGAIN, EINTR, ENOBUFS, ETIMEDOUT
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy
from posix.time cimport timespec, CLOCK_MONOTONIC
from posix.uio cimport iovec

from jgpy._core.clock cimport SECOND_NS, deadline_timespec, monotonic_ns, sleep_us
from jgpy._core.sockets cimport (MAX_UDP_DATAGRAM, MAX_VLEN, MSG_DONTWAIT, POLLOUT_MS, SOCK_DGRAM, fill_sockaddr,
                                 sendmmsg, sock_fd, wait_writable)

_log = logging.getLogger("jgpy.udp")


cdef enum:
    _DG_SENT = 0
    _DG_FAILED = 1
    _DG_ABORTED = 2


cdef class Bundler:
    """Bundler(sock, dest, prefix, suffix, *, max_size=64000, capacity=8 << 20, max_entries=0, linger_us=100, max_delay_ms=30.0, batch=32, name="jgpy-bundler", log=None)

    Coalescing sender for one destination, drained by a daemon thread.

    Every datagram sent is ``prefix + e1 + ... + ek + suffix``: whole entries in the order they were
    added, at most ``max_size`` bytes in total.  An entry too big to share a datagram
    (``len(prefix) + len(entry) + len(suffix) > max_size``) goes alone in its own datagram if that is
    at most 65507 bytes; a bigger one makes :meth:`add` raise ValueError.

    :meth:`add` copies the entry into a ring of ``capacity`` bytes allocated once (its pages become
    resident as the ring wraps, so ``capacity`` is what it costs in RSS); ``max_entries`` bounds the
    entries queued (at most ``capacity``; 0: ``capacity // 64``, at least 4096).  When the ring or the
    entry slots are full it waits, with the GIL released, for room (``blocked_adds``); waiting adders
    are served in arrival order.  Entries from one thread are sent in the order they were added.  Entries added
    before :meth:`start` are queued and sent once it is called (an ``add`` that finds the ring full
    before ``start`` waits for it).

    The thread, with the GIL released, collects entries into datagrams; it sends when the next entry
    would not fit, when no entry arrived for ``linger_us`` microseconds, when ``max_delay_ms`` passed
    since the first entry of the datagram was seen, or at once when an adder is waiting for room, a
    :meth:`flush` is waiting or :meth:`stop` was called.  It sends up to ``batch`` datagrams per
    ``sendmmsg`` with iovecs pointing into the ring (prefix, entries, suffix; no copy).  EAGAIN and
    ENOBUFS are retried (after poll(POLLOUT)/a short sleep), never dropped; another error drops that
    datagram, counts ``send_errors`` and is logged on ``log`` (a ``jgpy.stack.logutil.RateLimitedLog``, or
    anything with its ``error``; None: only counted).
    """

    def __cinit__(self, *args, **kwargs):
        self._ring = NULL
        self._lens = NULL
        self._msgs = NULL
        self._iovs = NULL
        self._dg_pos = NULL
        self._dg_len = NULL
        self._dg_cnt = NULL
        self._dg_state = NULL
        self._sync_ok = False
        cdef pthread_condattr_t attr
        pthread_condattr_init(&attr)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)
        if (pthread_mutex_init(&self._mu, NULL) != 0 or pthread_cond_init(&self._data_cv, &attr) != 0
                or pthread_cond_init(&self._space_cv, &attr) != 0 or pthread_cond_init(&self._flush_cv, &attr) != 0):
            pthread_condattr_destroy(&attr)
            raise MemoryError("cannot initialise the Bundler's pthread mutex/condition variables")
        pthread_condattr_destroy(&attr)
        self._sync_ok = True

    def __init__(self, sock, dest, prefix, suffix, *, Py_ssize_t max_size=64000, Py_ssize_t capacity=8 << 20,
                 Py_ssize_t max_entries=0, long linger_us=100, double max_delay_ms=30.0, int batch=32,
                 str name="jgpy-bundler", log=None):
        if self._ring != NULL:
            raise RuntimeError("Bundler.__init__ called twice: create a new Bundler instead")
        self._prefix = bytes(prefix)
        self._suffix = bytes(suffix)
        self._prelen = len(self._prefix)
        self._suflen = len(self._suffix)
        self._pre = self._prefix
        self._suf = self._suffix
        if self._prelen + self._suflen >= MAX_UDP_DATAGRAM:
            raise ValueError(f"prefix ({self._prelen} bytes) + suffix ({self._suflen} bytes) leave no room "
                             f"for an entry in a {MAX_UDP_DATAGRAM}-byte datagram")
        if not <Py_ssize_t>(self._prelen + self._suflen) < max_size <= MAX_UDP_DATAGRAM:
            raise ValueError(f"max_size must be > len(prefix) + len(suffix) = {self._prelen + self._suflen} "
                             f"and <= {MAX_UDP_DATAGRAM}, got {max_size}")
        if capacity < 65536:
            raise ValueError(f"capacity must be at least 65536 bytes (the largest entry must fit), got {capacity}")
        if not 0 <= max_entries <= 1 << 30:
            raise ValueError(f"max_entries must be in 0..{1 << 30} (0: capacity // 64), got {max_entries}")
        if not 0 <= linger_us <= 60_000_000:
            raise ValueError(f"linger_us must be in 0..60000000, got {linger_us}")
        if not 0 <= max_delay_ms <= 60_000:
            raise ValueError(f"max_delay_ms must be in 0..60000, got {max_delay_ms}")
        if not 1 <= batch <= MAX_VLEN:
            raise ValueError(f"batch must be in 1..{MAX_VLEN} (the kernel's sendmmsg limit), got {batch}")
        self._fd = sock_fd(sock, SOCK_DGRAM)
        self._sock = sock
        fill_sockaddr(sock, dest, &self._dest, &self._destlen)
        self._dest_repr = repr(tuple(dest))
        self._name = name
        self._log = log
        self._max_size = max_size
        self._limit = max_size - self._prelen - self._suflen
        self._max_entry = MAX_UDP_DATAGRAM - self._prelen - self._suflen
        self._capacity = capacity
        # 0: entries of >= 64 bytes on average never wait for a slot
        self._mcap = min(max_entries, capacity) if max_entries > 0 else max(4096, capacity // 64)
        self._linger_ns = <uint64_t>linger_us * 1000
        self._max_delay_ns = <uint64_t>(max_delay_ms * 1e6)
        self._batch = batch
        self._ring = <char*>malloc(self._capacity)
        self._lens = <uint32_t*>malloc(self._mcap * sizeof(uint32_t))
        self._msgs = <mmsghdr*>calloc(batch, sizeof(mmsghdr))
        self._iovs = <iovec*>calloc(4 * batch, sizeof(iovec))
        self._dg_pos = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_len = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_cnt = <uint64_t*>calloc(batch, sizeof(uint64_t))
        self._dg_state = <int*>calloc(batch, sizeof(int))
        if (self._ring == NULL or self._lens == NULL or self._msgs == NULL or self._iovs == NULL
                or self._dg_pos == NULL or self._dg_len == NULL or self._dg_cnt == NULL or self._dg_state == NULL):
            raise MemoryError(f"cannot allocate a ring of {capacity} bytes")

    def __dealloc__(self):
        if self._sync_ok:
            pthread_cond_destroy(&self._data_cv)
            pthread_cond_destroy(&self._space_cv)
            pthread_cond_destroy(&self._flush_cv)
            pthread_mutex_destroy(&self._mu)
        free(self._ring)
        free(self._lens)
        free(self._msgs)
        free(self._iovs)
        free(self._dg_pos)
        free(self._dg_len)
        free(self._dg_cnt)
        free(self._dg_state)

    # -- locking with the GIL held: _lock/_unlock (inline, in udp.pxd) ------------------------------

    cdef int _check_ready(self) except -1:
        if self._ring == NULL:
            raise RuntimeError("Bundler was not initialised")
        return 0

    # -- producer side (_has_room: inline, in udp.pxd) ------------------------------------------------

    cdef void _put(self, const char* data, size_t n) noexcept nogil:
        """Copies one entry into the ring (mutex held, room checked)."""
        cdef uint64_t idx = self._wpos % self._capacity
        cdef uint64_t first = self._capacity - idx
        if first >= n:
            memcpy(self._ring + idx, data, n)
        else:
            memcpy(self._ring + idx, data, first)
            memcpy(self._ring, data + first, n - first)
        self._lens[self._wcount % self._mcap] = <uint32_t>n
        self._wpos += n
        self._wcount += 1
        if self._sender_waiting and self._wpos >= self._wake_pos:
            pthread_cond_signal(&self._data_cv)

    cdef int _put_waiting(self, const char* data, size_t n) noexcept nogil:
        """Slow path of add(): mutex held on entry, released on return.  0: queued; -1: the bundler stopped."""
        cdef uint64_t ticket = self._ticket_next
        self._ticket_next += 1
        self._st_blocked += 1
        self._space_waiters += 1
        if self._sender_waiting:
            pthread_cond_signal(&self._data_cv)     # an adder waits: the sender sends what it holds now
        while not self._dead and not (ticket == self._ticket_serving and self._has_room(n)):
            pthread_cond_wait(&self._space_cv, &self._mu)
        self._space_waiters -= 1
        if self._dead:
            pthread_cond_broadcast(&self._space_cv)
            pthread_mutex_unlock(&self._mu)
            return -1
        self._put(data, n)
        self._ticket_serving += 1
        if self._space_waiters > 0:
            pthread_cond_broadcast(&self._space_cv)  # the next ticket may fit too
        pthread_mutex_unlock(&self._mu)
        return 0

    def add(self, entry):
        """Queues one entry (any bytes-like object; it is copied).  Thread-safe.

        Waits, with the GIL released, while the ring is full.  Raises ValueError if the entry can never
        be sent (and queues nothing), RuntimeError after :meth:`stop`.
        """
        cdef Py_buffer view
        PyObject_GetBuffer(entry, &view, PyBUF_SIMPLE)
        try:
            self.add_raw(<const char*>view.buf, <size_t>view.len)
        finally:
            PyBuffer_Release(&view)

    cdef int add_raw(self, const char* data, size_t n) except -1:
        """:meth:`add` of ``n`` bytes at ``data`` (the C entry point; the caller keeps them valid: the GIL
        may be released while it waits for room)."""
        cdef int rc
        self._check_ready()
        if n > self._max_entry:
            raise ValueError(
                f"entry of {n} bytes does not fit a UDP datagram: prefix ({self._prelen}) + entry + suffix "
                f"({self._suflen}) > {MAX_UDP_DATAGRAM} bytes; configure fragmentation (FRAG/FRAG2 frag_size) "
                f"below max_bundle_size ({self._max_size}) so that no message is this big")
        if n == 0:
            return 0
        self._lock()
        if self._closing or self._dead:
            self._unlock()
            raise RuntimeError(f"{self._name}: add() after stop(): create a new Bundler")
        if self._space_waiters == 0 and self._has_room(n):
            self._put(data, n)
            self._unlock()
            return 0
        with nogil:
            rc = self._put_waiting(data, n)
        if rc != 0:
            raise RuntimeError(f"{self._name}: the bundler stopped while add() waited for room; "
                               f"the entry was not queued")
        return 0

    def flush(self, timeout=5.0):
        """Waits until every entry added before this call was handed to the kernel.

        Makes the sender send at once instead of lingering.  Entries dropped (a send error, or
        :meth:`stop` giving up) count as handled: see ``stats["dropped"]``.  Returns False on timeout,
        or at once if the bundler was never started.
        """
        cdef uint64_t target, deadline
        cdef timespec ts
        cdef bint ok
        cdef double t = timeout
        self._check_ready()
        if not t >= 0:
            raise ValueError(f"timeout must be >= 0, got {timeout}")
        deadline = <uint64_t>monotonic_ns() + <uint64_t>(t * 1e9)
        self._lock()
        target = self._wcount
        if self._rcount >= target:
            self._unlock()
            return True
        if not self._started or self._dead:
            self._unlock()
            return False
        with nogil:
            self._flush_waiters += 1
            if self._sender_waiting:
                pthread_cond_signal(&self._data_cv)
            deadline_timespec(deadline, &ts)
            while self._rcount < target and not self._dead:
                if pthread_cond_timedwait(&self._flush_cv, &self._mu, &ts) == ETIMEDOUT:
                    break
            self._flush_waiters -= 1
            ok = self._rcount >= target
            pthread_mutex_unlock(&self._mu)
        return ok

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self):
        """Starts the daemon sender thread (named ``name``).  Only once per object."""
        self._check_ready()
        self._lock()
        if self._started or self._closing:
            self._unlock()
            raise RuntimeError("Bundler.start() called twice or after stop(): create a new Bundler")
        self._started = True
        self._unlock()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._lock()
            self._dead = True
            pthread_cond_broadcast(&self._space_cv)
            self._unlock()
            raise

    def stop(self, timeout=2.0):
        """Sends what is queued (and what adders waiting for room add), then ends the thread.

        Waits at most ``timeout`` seconds; if the queue is not drained by then (the socket refuses to
        take datagrams), the rest is dropped (counted in ``dropped``).  Idempotent.  Later ``add``
        calls raise RuntimeError.  Entries queued on a bundler that was never started are dropped.
        Returns True if the thread has ended (or never started) and stop() dropped nothing.
        """
        self._check_ready()
        self._lock()
        self._closing = True
        if not self._started and not self._dead:
            self._dead = True
            self._stop_dropped = self._wcount != self._rcount
            self._st_dropped += self._wcount - self._rcount
            self._rpos = self._wpos
            self._rcount = self._wcount
            pthread_cond_broadcast(&self._space_cv)
            pthread_cond_broadcast(&self._flush_cv)
        pthread_cond_broadcast(&self._data_cv)
        self._unlock()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
            if t.is_alive():
                self._lock()
                self._abort = True
                pthread_cond_broadcast(&self._data_cv)
                self._unlock()
                t.join(max(1.0, timeout))
                if t.is_alive():
                    _log.error("%s: the sender thread did not end", self._name)
                    return False
        return not self._stop_dropped

    @property
    def stats(self):
        """Counters: entries (sent), datagrams, bytes (including prefix and suffix), send_errors (datagrams),
        max_entries_per_datagram, blocked_adds, plus dropped (entries lost to send errors or to stop),
        queued (entries) and queued_bytes."""
        self._check_ready()
        self._lock()
        d = {"entries": self._st_entries, "datagrams": self._st_datagrams, "bytes": self._st_bytes,
             "send_errors": self._st_send_errors, "max_entries_per_datagram": self._st_max_epd,
             "blocked_adds": self._st_blocked, "dropped": self._st_dropped,
             "queued": self._wcount - self._rcount, "queued_bytes": self._wpos - self._rpos}
        self._unlock()
        return d

    @property
    def running(self):
        """True while the sender thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def name(self):
        """The sender thread's name."""
        return self._name

    def __repr__(self):
        return f"<Bundler {self._name!r} dest={self._dest_repr} max_size={self._max_size} capacity={self._capacity}>"

    # -- sender thread -------------------------------------------------------------------------------

    def _run(self):
        with nogil:
            self._sender_loop()

    cdef void _sender_loop(self) noexcept nogil:
        cdef uint64_t scan_pos, scan_cnt, wc, length, now, deadline
        cdef uint64_t cur_pos = 0, cur_len = 0, cur_cnt = 0, first_ns = 0, last_new_ns = 0
        cdef unsigned int ndg = 0
        cdef unsigned int i
        cdef timespec ts
        pthread_mutex_lock(&self._mu)
        scan_pos = self._rpos
        scan_cnt = self._rcount
        while not self._abort:
            wc = self._wcount
            if scan_cnt == wc:
                if cur_cnt == 0:
                    # idle: nothing queued
                    if self._closing and self._space_waiters == 0:
                        break
                    self._sender_waiting = True
                    self._wake_pos = self._wpos + 1
                    deadline_timespec(monotonic_ns() + SECOND_NS, &ts)     # the timeout is only a safety net
                    pthread_cond_timedwait(&self._data_cv, &self._mu, &ts)
                    self._sender_waiting = False
                    continue
                # a partial datagram and nothing new: linger, unless someone waits for it
                if not (self._closing or self._flush_waiters > 0 or self._space_waiters > 0):
                    now = <uint64_t>monotonic_ns()
                    deadline = last_new_ns + self._linger_ns
                    if first_ns + self._max_delay_ns < deadline:
                        deadline = first_ns + self._max_delay_ns
                    if now < deadline:
                        self._sender_waiting = True
                        self._wake_pos = cur_pos + self._limit + 1     # enough to fill the datagram
                        deadline_timespec(deadline, &ts)
                        pthread_cond_timedwait(&self._data_cv, &self._mu, &ts)
                        self._sender_waiting = False
                        continue
                self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                cur_cnt = 0
            else:
                # new entries: pack them (the ring between scan and wc is stable: adders only append)
                pthread_mutex_unlock(&self._mu)
                now = <uint64_t>monotonic_ns()
                last_new_ns = now
                while scan_cnt < wc:
                    length = self._lens[scan_cnt % self._mcap]
                    if cur_cnt > 0 and cur_len + length > self._limit:
                        self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                        cur_cnt = 0
                        if ndg == self._batch:
                            break
                    if cur_cnt == 0:
                        cur_pos = scan_pos
                        cur_len = 0
                        first_ns = now
                    cur_len += length
                    cur_cnt += 1
                    scan_pos += length
                    scan_cnt += 1
                    if cur_len > self._limit:       # an oversized entry goes alone
                        self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                        cur_cnt = 0
                        if ndg == self._batch:
                            break
                if cur_cnt > 0 and ndg < self._batch and now - first_ns >= self._max_delay_ns:
                    self._close_datagram(&ndg, cur_pos, cur_len, cur_cnt)
                    cur_cnt = 0
                pthread_mutex_lock(&self._mu)
                if ndg == 0:
                    continue
            # send the closed datagrams (mutex released: adders keep appending meanwhile)
            pthread_mutex_unlock(&self._mu)
            self._send(ndg)
            pthread_mutex_lock(&self._mu)
            for i in range(ndg):
                if self._dg_state[i] == _DG_SENT:
                    self._st_entries += self._dg_cnt[i]
                    self._st_datagrams += 1
                    self._st_bytes += self._dg_len[i] + self._prelen + self._suflen
                    if self._dg_cnt[i] > self._st_max_epd:
                        self._st_max_epd = self._dg_cnt[i]
                else:
                    if self._dg_state[i] == _DG_FAILED:
                        self._st_send_errors += 1
                    else:
                        self._stop_dropped = True
                    self._st_dropped += self._dg_cnt[i]
                self._rcount += self._dg_cnt[i]
            self._rpos = self._dg_pos[ndg - 1] + self._dg_len[ndg - 1]
            ndg = 0
            if self._space_waiters > 0:
                pthread_cond_broadcast(&self._space_cv)
            if self._flush_waiters > 0:
                pthread_cond_broadcast(&self._flush_cv)
        # ended (drained, or aborted by stop()): whatever is left is dropped
        if self._wcount != self._rcount:
            self._stop_dropped = True
        self._st_dropped += self._wcount - self._rcount
        self._rcount = self._wcount
        self._rpos = self._wpos
        self._dead = True
        pthread_cond_broadcast(&self._space_cv)
        pthread_cond_broadcast(&self._flush_cv)
        pthread_mutex_unlock(&self._mu)

    cdef void _send(self, unsigned int ndg) noexcept nogil:
        """Sends datagrams 0..ndg-1 (mutex not held); sets _dg_state for each."""
        cdef unsigned int i, k
        cdef uint64_t idx, first
        cdef iovec* iov
        cdef int r, e
        for i in range(ndg):
            iov = &self._iovs[4 * i]
            k = 0
            if self._prelen:
                iov[k].iov_base = <void*>self._pre
                iov[k].iov_len = self._prelen
                k += 1
            idx = self._dg_pos[i] % self._capacity
            first = self._capacity - idx
            if first >= self._dg_len[i]:
                iov[k].iov_base = self._ring + idx
                iov[k].iov_len = self._dg_len[i]
                k += 1
            else:
                iov[k].iov_base = self._ring + idx
                iov[k].iov_len = first
                iov[k + 1].iov_base = self._ring
                iov[k + 1].iov_len = self._dg_len[i] - first
                k += 2
            if self._suflen:
                iov[k].iov_base = <void*>self._suf
                iov[k].iov_len = self._suflen
                k += 1
            self._msgs[i].msg_hdr.msg_name = &self._dest
            self._msgs[i].msg_hdr.msg_namelen = self._destlen
            self._msgs[i].msg_hdr.msg_iov = iov
            self._msgs[i].msg_hdr.msg_iovlen = k
            self._msgs[i].msg_hdr.msg_control = NULL
            self._msgs[i].msg_hdr.msg_controllen = 0
            self._msgs[i].msg_hdr.msg_flags = 0
            self._dg_state[i] = _DG_SENT
        i = 0
        while i < ndg:
            r = sendmmsg(self._fd, self._msgs + i, ndg - i, MSG_DONTWAIT)
            if r > 0:
                i += <unsigned int>r
                continue
            e = errno if r < 0 else EAGAIN
            if e == EINTR:
                continue
            if e == EAGAIN or e == ENOBUFS:
                if self._abort:
                    while i < ndg:
                        self._dg_state[i] = _DG_ABORTED
                        i += 1
                    break
                if wait_writable(self._fd, POLLOUT_MS) == 0 and e == ENOBUFS:
                    sleep_us(200)
                continue
            self._dg_state[i] = _DG_FAILED
            self._log_send_error(e, self._dg_len[i] + self._prelen + self._suflen, self._dg_cnt[i])
            i += 1

    cdef void _log_send_error(self, int err, uint64_t size, uint64_t entries) noexcept nogil:
        with gil:
            if self._log is None:
                return
            try:
                self._log.error("bundler-send", "%s: sendmmsg to %s failed: %s; dropped a datagram of %d bytes (%d "
                                "entries)", self._name, self._dest_repr, os.strerror(err), size, entries)
            except BaseException:
                pass
