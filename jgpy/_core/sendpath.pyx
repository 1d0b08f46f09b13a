# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-message send path of the hot protocols, in C.

Each protocol that touches every sent message (FRAG2, UFC/MFC, UNICAST, NAKACK, the transport) owns one
of these *send cores* and installs the core's ``down_msg`` as its own: the core is the implementation of
that protocol's down path (there is no second, Python copy). A core does the per-message bookkeeping —
the size check, the credits, the seqno, the header, the retransmission window, the loopback copy, the
encoding — and calls back into its protocol's Python code only for the rare cases that need decisions or
waiting (fragmenting, blocking on credits, a first message to a new peer, a message without a route).
The next protocol is reached through the owner's ``down_prot.down_msg``, so Python protocols and cores mix freely.
"""

from cpython.bytes cimport PyBytes_GET_SIZE
from cpython.list cimport PyList_Append
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_acquire_lock, PyThread_release_lock, NOWAIT_LOCK, WAIT_LOCK)
from libc.stdint cimport int64_t, uint8_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from jgpy._core.message cimport Message, WireDialect, new_message
from jgpy._core.tables cimport NakReceiverWindow
from jgpy._core.udp cimport Bundler, DatagramSender
from jgpy._core.wire cimport Writer
from jgpy._core.headers cimport NakAckHeader, UnicastHeader
from jgpy._core.credits cimport CreditTable
from jgpy._core.journalbuf cimport RowBuffer

cdef int OOB = 1
cdef int DONT_BUNDLE = 2
cdef int NO_FC = 4
cdef int NO_RELIABILITY = 16
cdef int KEPT_FOR_XMIT = 2          # Message.transient_flags: set by NakackSend, consumed by TransportSend

DEF UNICAST_DATA = 0
DEF UNICAST_ACK = 1
DEF MAX_PAIR_PAYLOAD = 65000      # a DATA longer than this goes alone (a datagram holds 65,507 bytes)
DEF NAKACK_MSG = 1


cdef inline int64_t monotonic_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline double monotonic_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6


def now_ms() -> float:
    """Monotonic milliseconds (CLOCK_MONOTONIC: the clock of ``time.monotonic`` and ``jgpy.stack.timer``)."""
    return monotonic_ms()


cdef class Lock:
    """A mutex that send cores take with C calls and Python code with ``with`` (as ``threading.Lock``).

    Taken with the GIL held it never blocks holding the GIL: a try first, then a wait with the GIL released.
    Not reentrant. ``take``/``give`` (C) are in sendpath.pxd, for other modules' C code too."""

    def __cinit__(self):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def acquire(self) -> bool:
        self.take()
        return True

    def release(self) -> None:
        self.give()

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.give()
        return False


cdef class Handoff:
    """Items passed from any thread to one consumer thread, taken all at once.

    ``put`` (C) and ``add`` (Python) append; :meth:`take` returns everything added so far. ``wakeup`` is
    the consumer's :class:`jgpy.stack.executor.Wakeup`: a put wakes it only when it sleeps."""

    cdef list _items
    cdef readonly object wakeup

    def __init__(self, wakeup):
        self._items = []
        self.wakeup = wakeup

    cdef inline int put(self, object item) except -1:
        PyList_Append(self._items, item)        # no Python code runs in between: atomic under the GIL
        if self.wakeup.sleeping:                # read after the append (see Wakeup)
            self.wakeup.wake()
        return 0

    def add(self, item) -> None:
        self.put(item)

    def take(self) -> list:
        items = self._items
        self._items = []
        return items

    def __len__(self) -> int:
        return len(self._items)


cdef class SendCore:
    """Base of the cores: ``owner`` is the protocol; its ``down_prot.down_msg`` continues the path.

    The next step is looked up once, on the first message: a C call when the protocol below has a send core
    too, else its bound ``down_msg``. Rewiring the stack afterwards needs :meth:`relink`."""

    cdef public object owner
    cdef object _next_fn
    cdef SendCore _next_core

    def relink(self) -> None:
        """Forget the cached next step (after the protocol below or its ``down_msg`` changed)."""
        self._next_fn = None
        self._next_core = None

    cdef object _link(self):
        fn = self.owner.down_prot.down_msg
        target = getattr(fn, "__self__", None)
        if isinstance(target, SendCore) and getattr(fn, "__name__", None) == "down_msg":
            self._next_core = <SendCore>target
        else:
            self._next_fn = fn
        return fn

    cdef inline object _pass(self, Message msg):
        if self._next_core is not None:
            return self._next_core.down_msg(msg)
        if self._next_fn is None:
            self._link()
            if self._next_core is not None:
                return self._next_core.down_msg(msg)
        return self._next_fn(msg)

    cpdef object down_msg(self, Message msg):
        return self._pass(msg)


cdef class ChannelSend(SendCore):
    """``Channel.send`` in C for the common case: a ``bytes`` payload to an address or to the group (None), on
    a connected channel. Everything else (a prepared Message, a str, another buffer type, flags that are not
    a byte, a channel that is not connected) goes to ``general``, the channel's Python implementation, which
    also raises the errors."""

    cdef public bint connected
    cdef public object general            # (dest_or_msg, payload, oob, flags)

    def __init__(self, owner, general):
        self.owner = owner
        self.general = general

    def send(self, dest_or_msg, payload=None, *, bint oob=False, int flags=0):
        cdef Message msg
        if not self.connected or type(payload) is not bytes or type(dest_or_msg) is Message or flags & ~0xFF:
            return self.general(dest_or_msg, payload, oob, flags)
        msg = new_message()
        msg.dest = dest_or_msg
        msg.src = self.owner.address
        msg.flags = <uint8_t>(flags | (OOB if oob else 0))
        msg.set_payload(payload, 0, PyBytes_GET_SIZE(payload))
        self._pass(msg)


cdef class RecordSend(SendCore):
    """A down path that records every message as a ``kind`` row of ``rows`` and passes it on (the JOURNAL
    protocol)."""

    cdef RowBuffer rows
    cdef int kind

    def __init__(self, owner, RowBuffer rows not None, int kind):
        self.owner = owner
        self.rows = rows
        self.kind = kind

    cpdef object down_msg(self, Message msg):
        self.rows.record_message(self.kind, msg)
        return self._pass(msg)


# ---------------------------------------------------------------------------------------------
# FRAG2
# ---------------------------------------------------------------------------------------------

cdef class FragSend(SendCore):
    """FRAG2's down path: messages above ``frag_size`` go to ``fragment`` (Python), the rest pass."""

    cdef public Py_ssize_t frag_size
    cdef public object fragment
    cdef public int64_t num_sent_msgs

    def __init__(self, owner, Py_ssize_t frag_size, fragment):
        self.owner = owner
        self.frag_size = frag_size
        self.fragment = fragment

    cpdef object down_msg(self, Message msg):
        self.num_sent_msgs += 1
        if msg._len > self.frag_size:
            self.fragment(msg)
            return None
        return self._pass(msg)


# ---------------------------------------------------------------------------------------------
# UFC / MFC
# ---------------------------------------------------------------------------------------------

cdef class CreditSend(SendCore):
    """UFC's (``multicast`` False) or MFC's down path: spend credits, or wait in ``wait_for_credits``."""

    cdef public CreditTable table
    cdef public bint multicast
    cdef public bint running
    cdef public object wait_for_credits       # (msg, length): the protocol's slow path (blocks)

    def __init__(self, owner, CreditTable table, bint multicast, wait_for_credits):
        self.owner = owner
        self.table = table
        self.multicast = multicast
        self.wait_for_credits = wait_for_credits

    cpdef object down_msg(self, Message msg):
        cdef Py_ssize_t length = msg._len
        cdef bint ok
        if (msg.dest is None) == self.multicast and not (msg.flags & NO_FC) and length and self.running:
            if self.multicast:
                ok = self.table.spend_all(length)
            else:
                ok = self.table.spend(msg.dest, length) != 0
            if not ok:
                self.wait_for_credits(msg, length)
        return self._pass(msg)


# ---------------------------------------------------------------------------------------------
# UNICAST
# ---------------------------------------------------------------------------------------------

cdef class UnicastConnection:
    """The sending side of one UNICAST connection: conn id, next seqno, the unacked messages."""

    cdef public int conn_id
    cdef public int64_t next_seqno
    cdef public object win            # AckSenderWindow
    cdef public double created        # time.monotonic() seconds

    def __init__(self, int conn_id, win, double created):
        self.conn_id = conn_id
        self.next_seqno = 1
        self.win = win
        self.created = created


cdef class UnicastSend(SendCore):
    """UNICAST's down path: per destination, number the message, add the header, keep it until acked.

    A regular message to a member we owe a delayed ACK (``pending_acks``, the protocol's: dest -> [seqno,
    count]) takes the ACK along: the transport sends both in one datagram, the ACK first."""

    cdef public dict send_table           # dest -> UnicastConnection (shared with the protocol)
    cdef public dict pending_acks         # dest -> [highest seqno to ack, count] (shared; None: no piggybacking)
    cdef public int64_t acks_piggybacked
    cdef public object lock               # the protocol's lock over send_table
    cdef public bint started
    cdef public int prot_id
    cdef public object new_connection     # (dest) -> UnicastConnection: called with the lock held
    cdef public object not_started        # (msg): log and drop
    cdef public int64_t msgs_sent

    def __init__(self, owner, int prot_id, dict send_table, lock, new_connection, not_started):
        self.owner = owner
        self.prot_id = prot_id
        self.send_table = send_table
        self.lock = lock
        self.new_connection = new_connection
        self.not_started = not_started

    cpdef object down_msg(self, Message msg):
        cdef object dest = msg.dest
        cdef UnicastConnection conn
        cdef int64_t seq
        cdef Message ack = None
        cdef list pending
        if dest is None or msg.flags & NO_RELIABILITY:
            return self._pass(msg)
        if not self.started:
            self.not_started(msg)
            return None
        self.lock.acquire()
        try:
            conn = self.send_table.get(dest)
            if conn is None:
                conn = self.new_connection(dest)
            seq = conn.next_seqno
            msg.put(self.prot_id, UnicastHeader(UNICAST_DATA, seq, conn.conn_id, seq == 1))
            conn.win.add(seq, msg, monotonic_ms())
            conn.next_seqno = seq + 1
            if self.pending_acks and not (msg.flags & OOB):
                pending = self.pending_acks.pop(dest, None)
                if pending is not None:
                    ack = new_message()
                    ack.dest = dest
                    ack.put(self.prot_id, UnicastHeader(UNICAST_ACK, pending[0]))
        finally:
            self.lock.release()
        self.msgs_sent += 1
        if ack is None:
            return self._pass(msg)
        self.acks_piggybacked += 1
        msg._piggyback = ack
        try:
            return self._pass(msg)
        finally:
            msg._piggyback = None          # this message stays in the window: a retransmission carries no old ACK


# ---------------------------------------------------------------------------------------------
# pbcast.NAKACK
# ---------------------------------------------------------------------------------------------

cdef class NakackSend(SendCore):
    """NAKACK's down path: number our multicasts, add the header, keep them for retransmission."""

    cdef public dict windows              # sender -> NakReceiverWindow (shared with the protocol)
    cdef public Lock seqno_lock
    cdef public int64_t seqno
    cdef public bint running
    cdef public object local_addr
    cdef public int prot_id
    cdef public object cannot_send        # (msg, reason): log and drop
    cdef public int64_t msgs_sent

    def __init__(self, owner, int prot_id, dict windows, Lock seqno_lock not None, cannot_send):
        self.owner = owner
        self.prot_id = prot_id
        self.windows = windows
        self.seqno_lock = seqno_lock
        self.cannot_send = cannot_send

    cpdef object down_msg(self, Message msg):
        cdef int64_t seq
        cdef NakReceiverWindow win
        if msg.dest is not None or msg.flags & NO_RELIABILITY:
            msg.transient_flags &= ~KEPT_FOR_XMIT
            return self._pass(msg)
        if not self.running:
            self.cannot_send(msg, "not-running")
            return None
        me = self.local_addr
        if me is None:
            me = self.local_addr = self.owner.local_addr
        w = self.windows.get(me)
        if w is None:
            self.cannot_send(msg, "no-own-window")
            return None
        win = <NakReceiverWindow?>w
        if msg.src is None:
            msg.src = me
        cdef NakAckHeader hdr = NakAckHeader.__new__(NakAckHeader)
        hdr.type = NAKACK_MSG
        self.seqno_lock.take()
        try:
            seq = self.seqno + 1
            hdr.seqno = seq
            msg.put(self.prot_id, hdr)
            win.c_add(seq, msg, monotonic_ms())
            self.seqno = seq
        finally:
            self.seqno_lock.give()
        msg.transient_flags |= KEPT_FOR_XMIT
        self.msgs_sent += 1
        return self._pass(msg)


# ---------------------------------------------------------------------------------------------
# the transport
# ---------------------------------------------------------------------------------------------

cdef class PeerRoute:
    """What the transport's send core keeps per unicast destination: when it last sent there, and the
    bundler of its streams (None until a stream is seen)."""
    cdef public int64_t last_ns
    cdef public Bundler bundler
    cdef public object physical


cdef class TransportSend(SendCore):
    """The transport's down path: TpHeader, src, a loopback copy of multicasts and of unicasts to
    ourselves, then bundling (regular multicasts: encoded straight into the bundler's ring), a datagram to
    a member whose physical address is known (encoded and sent from C when the transport gave us its
    ``ucast_sender`` and ``physical_cache``), or else ``send_single`` (Python)."""

    cdef public object tp_header          # None until connected
    cdef public int prot_id
    cdef public object local_addr
    cdef public bint loopback
    cdef public Handoff loopback_queue    # or None
    cdef public bint enable_bundling
    cdef public Bundler bundler           # or None
    cdef public WireDialect dialect
    cdef public object not_connected      # (msg): log and drop
    cdef public object send_single        # (msg, dest, multicast): encode and send one datagram
    cdef public object send_physical      # (msg): a message addressed to a physical address
    cdef public object physical_type      # IpAddress
    cdef public int64_t msgs_sent
    cdef public int64_t bytes_sent
    cdef public int64_t loopbacks
    cdef public int64_t pairs_sent        # datagrams holding a piggybacked message and its carrier
    cdef public DatagramSender ucast_sender   # or None
    cdef public dict physical_cache       # logical -> physical address (the transport's; read-only here)
    cdef public object unicast_failed     # (OSError, size, physical): log
    cdef public int64_t stream_gap_ns     # unicasts to a member closer than this are a stream: bundled
                                          # (< 0: never; 0 with bundle_all_unicasts)
    cdef public bint bundle_all_unicasts  # enable_unicast_bundling: every regular unicast goes to a bundler
    cdef public object make_peer_bundler  # (dest, physical) -> Bundler or None (Python: starts its thread)
    cdef public dict peers                # dest -> PeerRoute
    cdef public int64_t unicasts_bundled
    cdef public DatagramSender mcast_sender   # or None: every regular multicast goes to the bundler
    cdef public object mcast_dest         # the group's (host, port)
    cdef public object multicast_failed   # (OSError, size): log
    cdef public int64_t mcast_gap_ns      # a regular multicast this long or longer after the previous one, with
                                          # the bundler empty, is sent at once, alone (< 0: never)
    cdef public int64_t mcast_last_ns
    cdef public int64_t multicasts_direct
    cdef Writer _spare                    # the encoding writer, reused; a second thread meanwhile makes its own

    def __init__(self, owner, int prot_id, dialect, not_connected, send_single, send_physical, physical_type):
        self.peers = {}
        self.stream_gap_ns = -1
        self.mcast_gap_ns = -1
        self.owner = owner
        self.prot_id = prot_id
        self.dialect = dialect
        self.not_connected = not_connected
        self.send_single = send_single
        self.send_physical = send_physical
        self.physical_type = physical_type

    cpdef object down_msg(self, Message msg):
        cdef object dest
        cdef bint multicast
        cdef Handoff lb
        cdef Message first = msg._piggyback
        cdef int kept = msg.transient_flags & KEPT_FOR_XMIT
        if first is not None:
            msg._piggyback = None
            if self._send_pair(first, msg):
                return None
            self.down_msg(first)          # no pair here (or a stream: both to its bundler), the ACK first
        msg.transient_flags &= ~KEPT_FOR_XMIT
        if self.tp_header is None:
            self.not_connected(msg)
            return None
        self._stamp(msg)
        dest = msg.dest
        if dest is not None and isinstance(dest, self.physical_type):
            self.send_physical(msg)
            return None
        multicast = dest is None
        if self.loopback and (multicast or (dest == self.local_addr and msg.src == self.local_addr)):
            self.loopbacks += 1
            lb = self.loopback_queue
            if lb is not None:                # NAKACK only reads the seqno of a multicast it keeps: no copy
                lb.put(msg if kept and multicast else msg.copy())
            if not multicast:
                return None
        self.msgs_sent += 1
        self.bytes_sent += msg._len
        if multicast and self.enable_bundling and not (msg.flags & (OOB | DONT_BUNDLE)) and self.bundler is not None:
            if self._sparse_multicast():
                self._send_multicast(msg)
            else:
                self._bundle_into(self.bundler, msg)
            return None
        if not multicast and self.ucast_sender is not None and self.physical_cache is not None:
            physical = self.physical_cache.get(dest)
            if physical is not None:
                bundler = self._stream_bundler(msg, dest, physical)
                if bundler is not None:
                    self.unicasts_bundled += 1
                    self._bundle_into(bundler, msg)
                else:
                    self._send_unicast(msg, physical)
                return None
        self.send_single(msg, dest, multicast)
        return None

    cdef inline Writer _writer(self, Message msg):
        cdef Writer w = self._spare
        self._spare = None
        if w is None:
            w = Writer(128 + msg._len)
        w._len = 0
        return w

    cdef inline void _keep(self, Writer w) noexcept:
        if w._cap <= 262144:              # a writer grown for a huge message is not kept
            self._spare = w

    cdef Bundler _stream_bundler(self, Message msg, object dest, object physical):
        """The bundler of ``dest`` when this regular unicast is part of a stream to it (it follows the previous
        one by less than ``stream_gap_ns``, or the bundler still holds earlier ones: they must not be
        overtaken), or with ``bundle_all_unicasts``; None: send it directly. A stream's datagrams carry up
        to max_bundle_size bytes of messages each: one ``sendmmsg`` for many messages instead of a
        ``sendto`` each, and fewer, fuller datagrams for the receiver."""
        cdef PeerRoute r
        cdef int64_t now, gap
        if self.stream_gap_ns < 0 or msg.flags & (OOB | DONT_BUNDLE) or self.make_peer_bundler is None:
            return None
        r = self.peers.get(dest)
        if r is None:
            r = PeerRoute()
            self.peers[dest] = r
        now = monotonic_ns()
        gap = now - r.last_ns
        r.last_ns = now
        if r.bundler is not None:
            if r.bundler.accepting() and (r.physical is physical or r.physical == physical):
                if r.bundler.pending() or gap < self.stream_gap_ns or self.bundle_all_unicasts:
                    return r.bundler
                return None
            r.bundler = None                  # stopped, or the member moved (the transport stops the old one)
        if gap < self.stream_gap_ns or self.bundle_all_unicasts:
            r.bundler = self.make_peer_bundler(dest, physical)
            r.physical = physical
        return r.bundler

    cdef bint _sparse_multicast(self) noexcept:
        """A regular multicast that is not part of a stream: it follows the previous one by ``mcast_gap_ns`` or
        more, and the bundler holds nothing it could overtake. It goes at once, alone, instead of waiting for the
        bundler's linger (an RPC to the group); the messages of a stream are bundled."""
        cdef int64_t now, gap
        if self.mcast_gap_ns < 0 or self.mcast_sender is None:
            return False
        now = monotonic_ns()
        gap = now - self.mcast_last_ns
        self.mcast_last_ns = now
        return gap >= self.mcast_gap_ns and not self.bundler.pending()

    cdef int _send_multicast(self, Message msg) except -1:
        """``msg`` as the bundler would send it alone (a LIST of one: its copy that the kernel loops back to
        us is recognised by the bundle prefix and dropped unread), but from this thread, now."""
        cdef Writer w = self._writer(msg)
        self.dialect.write_list(w, None, self.local_addr, [msg], True)
        self.multicasts_direct += 1
        try:
            self.mcast_sender.send_raw(<const char*>w._buf, <size_t>w._len, self.mcast_dest)
        except OSError as e:
            self.multicast_failed(e, w._len)
        self._keep(w)
        return 0

    cdef bint _send_pair(self, Message first, Message msg) except -1:
        """``first`` and ``msg``, unicasts to the same member, as one LIST datagram (``first`` first), when
        both take the direct unicast path; False (nothing sent) otherwise."""
        cdef object dest = msg.dest
        cdef object physical
        cdef Message m
        cdef Writer w
        cdef PeerRoute r
        if (self.tp_header is None or dest is None or first.dest != dest or self.ucast_sender is None
                or self.physical_cache is None or isinstance(dest, self.physical_type)
                or (self.loopback and dest == self.local_addr) or msg._len > MAX_PAIR_PAYLOAD):
            return False
        physical = self.physical_cache.get(dest)
        if physical is None:
            return False
        r = self.peers.get(dest)
        if self.bundle_all_unicasts or (r is not None and r.bundler is not None and r.bundler.pending()):
            return False                      # a stream: both go to its bundler, in order
        for m in (first, msg):
            self._stamp(m)
            self.msgs_sent += 1
            self.bytes_sent += m._len
        w = self._writer(msg)
        self.dialect.write_list(w, dest, self.local_addr, [first, msg], False)
        self.pairs_sent += 1
        self._send_written(w, physical)
        return True

    cdef int _send_unicast(self, Message msg, object physical) except -1:
        cdef Writer w = self._writer(msg)
        self.dialect.write_single(w, msg, False)
        self._send_written(w, physical)
        return 0

    cdef inline int _stamp(self, Message m) except -1:
        """The transport header (the cluster name) and our address as the source, unless already set."""
        if m._find(self.prot_id) < 0:
            m.put(self.prot_id, self.tp_header)
        if m.src is None:
            m.src = self.local_addr
        return 0

    cdef int _send_written(self, Writer w, object physical) except -1:
        """Send the datagram encoded in ``w`` to ``physical`` (a failure is logged), then keep ``w``."""
        try:
            self.ucast_sender.send_raw(<const char*>w._buf, <size_t>w._len, physical)
        except OSError as e:
            self.unicast_failed(e, w._len, physical)
        self._keep(w)
        return 0

    cdef int _bundle_into(self, Bundler bundler, Message msg) except -1:
        """One bundle entry: the 0x01 "more" byte, then ``writeToNoAddrs(local_addr)``; a datagram is then
        the bundler's prefix (the LIST header: destination, source, multicast flag) + entries + 0x00."""
        cdef Writer w = self._writer(msg)
        w.byte(1)
        self.dialect.write_message(w, msg, True, self.local_addr)
        try:
            bundler.add_raw(<const char*>w._buf, <size_t>w._len)
        except RuntimeError:              # the bundler was stopped under us: we are disconnecting
            pass
        self._keep(w)
        return 0
