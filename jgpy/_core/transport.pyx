# cython: language_level=3, boundscheck=False, wraparound=False
"""The transport's core (``TP``, which UDP and TCP derive from, is a subclass): its down and up paths in C.

Down (``_down``): the transport header, src, a loopback copy of multicasts and of unicasts to ourselves, then
bundling (regular multicasts: encoded straight into the bundler's ring), a datagram to a member whose physical
address is known (encoded and sent from C when the transport opened ``ucast_sender``), or else the protocol's
``_send_single`` (Python).

Up (:meth:`TransportCore.receive_datagrams`): the datagrams one socket read in a batch are decoded into
messages, the transport's checks run (:func:`filter_transport`) and what is kept goes up as one batch. The
common path's counters live here (``datagrams_received``, ``msgs_received``, and ``dropped_malformed_msgs``: the
messages the dialect dropped alone from datagrams it decoded otherwise). The other drops go to the protocol's
``_bad_datagram(kind, data, source, error)`` ("version" or "malformed": the whole datagram; "malformed_msgs": its
first dropped message's error), ``_dropped(kind, count)`` ("own_bundles", "no_tp_header", "other_cluster",
"own_mcast") and ``_up_failed(count, error)`` (the layer above raised).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t
from libc.string cimport memcmp

from jgpy._core.address cimport IpAddress
from jgpy._core.bundler cimport Bundler
from jgpy._core.clock cimport monotonic_ns
from jgpy._core.headers cimport TpHeader
from jgpy._core.message cimport Message
from jgpy._core.senders cimport DatagramSender
from jgpy._core.sync cimport Handoff
from jgpy._core.wire cimport Writer
from jgpy._core.wire import utf_encode
from jgpy.errors import IncompatibleVersionError, WireFormatError

cdef int OOB = 1
cdef int DONT_BUNDLE = 2
cdef int KEPT_FOR_XMIT = 2          # Message.transient_flags: set by NAKACK's core, consumed here

DEF MAX_PAIR_PAYLOAD = 65000      # a DATA longer than this goes alone (a datagram holds 65,507 bytes)


cdef class PeerRoute:
    """What the transport keeps per unicast destination: when it last sent there, and the bundler of its streams
    (None until a stream is seen)."""


cdef class TransportCore(ProtocolCore):
    """TP's core. Settings are the protocol's properties (these fields); the concrete transport sets the ways
    out as it opens its sockets. Hooks the protocol provides: ``_not_connected(msg)``, ``_send_single(msg,
    dest, multicast)``, ``_send_physical(msg)``, ``_unicast_failed(error, size, physical)``,
    ``_multicast_failed(error, size)`` and the receive side's ``_bad_datagram``, ``_dropped``, ``_up_failed``."""

    def __cinit__(self):
        self.peers = {}
        self.logical_addr_cache = {}
        self.cluster_utf = b""

    # ---- down ----

    cdef object _down(self, Message msg):
        cdef object dest
        cdef bint multicast
        cdef Handoff lb
        cdef Bundler bundler
        cdef Message first = msg._piggyback
        cdef int kept = msg.transient_flags & KEPT_FOR_XMIT
        if first is not None:
            msg._piggyback = None
            if self._send_pair(first, msg):
                return None
            self._down(first)             # no pair here (or a stream: both to its bundler), the ACK first
        msg.transient_flags &= ~KEPT_FOR_XMIT
        if self.tp_header is None:
            self._not_connected(msg)
            return None
        self._stamp(msg)
        dest = msg.dest
        if dest is not None and isinstance(dest, IpAddress):
            self._send_physical(msg)
            return None
        multicast = dest is None
        if self.loopback and (multicast or (dest == self.own_addr and msg.src == self.own_addr)):
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
        if not multicast and self.ucast_sender is not None:
            physical = self.logical_addr_cache.get(dest)
            if physical is not None:
                bundler = self._stream_bundler(msg, dest, physical)
                if bundler is not None:
                    self.unicasts_bundled += 1
                    self._bundle_into(bundler, msg)
                else:
                    self._send_unicast(msg, physical)
                return None
        self._send_single(msg, dest, multicast)
        return None

    cdef Writer _writer(self, Message msg):
        cdef Writer w = self._spare
        self._spare = None
        if w is None:
            w = Writer(128 + msg._len)
        w._len = 0
        return w

    cdef void _keep(self, Writer w) noexcept:
        if w._cap <= 262144:              # a writer grown for a huge message is not kept
            self._spare = w

    cdef Bundler _stream_bundler(self, Message msg, object dest, object physical):
        """The bundler of ``dest`` when this regular unicast is part of a stream to it (it follows the previous
        one by less than ``unicast_stream_gap_us``, or the bundler still holds earlier ones: they must not be
        overtaken), or with ``enable_unicast_bundling``; None: send it directly. A stream's datagrams carry up
        to max_bundle_size bytes of messages each: one ``sendmmsg`` for many messages instead of a ``sendto``
        each, and fewer, fuller datagrams for the receiver."""
        cdef PeerRoute r
        cdef int64_t now, gap
        cdef int64_t stream_gap_ns = <int64_t>self.unicast_stream_gap_us * 1000
        cdef bint every = self.enable_unicast_bundling
        if (not every and stream_gap_ns < 0) or msg.flags & (OOB | DONT_BUNDLE) or self.make_peer_bundler is None:
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
                if r.bundler.pending() or gap < stream_gap_ns or every:
                    return r.bundler
                return None
            r.bundler = None                  # stopped, or the member moved (the transport stops the old one)
        if gap < stream_gap_ns or every:
            r.bundler = self.make_peer_bundler(dest, physical)
            r.physical = physical
        return r.bundler

    cdef bint _sparse_multicast(self) noexcept:
        """A regular multicast that is not part of a stream: it follows the previous one by
        ``multicast_stream_gap_us`` or more, and the bundler holds nothing it could overtake. It goes at once,
        alone, instead of waiting for the bundler's linger (an RPC to the group); a stream's are bundled."""
        cdef int64_t now, gap
        if self.multicast_stream_gap_us < 0 or self.mcast_sender is None:
            return False
        now = monotonic_ns()
        gap = now - self._mcast_last_ns
        self._mcast_last_ns = now
        return gap >= <int64_t>self.multicast_stream_gap_us * 1000 and not self.bundler.pending()

    cdef int _send_multicast(self, Message msg) except -1:
        """``msg`` as the bundler would send it alone (a LIST of one: its copy that the kernel loops back to
        us is recognised by the bundle prefix and dropped unread), but from this thread, now."""
        cdef Writer w = self._writer(msg)
        self.dialect.write_list(w, None, self.own_addr, [msg], True)
        self.multicasts_direct += 1
        try:
            self.mcast_sender.send_raw(<const char*>w._buf, <size_t>w._len, self.mcast_dest)
        except OSError as e:
            self._multicast_failed(e, w._len)
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
                or isinstance(dest, IpAddress) or (self.loopback and dest == self.own_addr)
                or msg._len > MAX_PAIR_PAYLOAD):
            return False
        physical = self.logical_addr_cache.get(dest)
        if physical is None:
            return False
        r = self.peers.get(dest)
        if self.enable_unicast_bundling or (r is not None and r.bundler is not None and r.bundler.pending()):
            return False                      # a stream: both go to its bundler, in order
        for m in (first, msg):
            self._stamp(m)
            self.msgs_sent += 1
            self.bytes_sent += m._len
        w = self._writer(msg)
        self.dialect.write_list(w, dest, self.own_addr, [first, msg], False)
        self.pairs_sent += 1
        self._send_written(w, physical)
        return True

    cdef int _send_unicast(self, Message msg, object physical) except -1:
        cdef Writer w = self._writer(msg)
        self.dialect.write_single(w, msg, False)
        self._send_written(w, physical)
        return 0

    cdef int _stamp(self, Message m) except -1:
        """The transport header (the cluster name) and our address as the source, unless already set."""
        if m._find(self.id) < 0:
            m.put(self.id, self.tp_header)
        if m.src is None:
            m.src = self.own_addr
        return 0

    cdef int _send_written(self, Writer w, object physical) except -1:
        """Send the datagram encoded in ``w`` to ``physical`` (a failure is logged), then keep ``w``."""
        try:
            self.ucast_sender.send_raw(<const char*>w._buf, <size_t>w._len, physical)
        except OSError as e:
            self._unicast_failed(e, w._len, physical)
        self._keep(w)
        return 0

    cdef int _bundle_into(self, Bundler bundler, Message msg) except -1:
        """One bundle entry: the 0x01 "more" byte, then ``writeToNoAddrs(own_addr)``; a datagram is then
        the bundler's prefix (the LIST header: destination, source, multicast flag) + entries + 0x00."""
        cdef Writer w = self._writer(msg)
        w.byte(1)
        self.dialect.write_message(w, msg, True, self.own_addr)
        try:
            bundler.add_raw(<const char*>w._buf, <size_t>w._len)
        except RuntimeError:              # the bundler was stopped under us: we are disconnecting
            pass
        self._keep(w)
        return 0

    # ---- up ----

    def receive_datagrams(self, list datagrams, sources, bint multicast) -> None:
        """A batch of datagrams, all multicast or all unicast (``sources``: where each came from)."""
        self._receive(datagrams, sources, multicast)

    def receive_unicasts(self, list datagrams, sources) -> None:
        """The unicast socket's loop handler."""
        self._receive(datagrams, sources, False)

    def receive_multicasts(self, list datagrams, sources) -> None:
        """The multicast socket's loop handler."""
        self._receive(datagrams, sources, True)

    cdef int _receive(self, list datagrams, object sources, bint multicast) except -1:
        cdef Py_ssize_t i, n = PyList_GET_SIZE(datagrams)
        cdef Py_ssize_t skipped = 0
        cdef bytes own = None
        cdef list msgs = []
        cdef list rejected = []               # the errors of the messages the dialect dropped alone (one call's:
                                              # several threads receive through this object)
        cdef bint check = self.discard_incompatible_packets
        self.datagrams_received += n
        if self.tp_header is None:
            return 0
        decode = self.dialect.decode_messages
        if multicast and self.loopback:
            own = self.own_bundle_prefix
        for i in range(n):
            data = <object>PyList_GET_ITEM(datagrams, i)
            if own is not None and type(data) is bytes and data.startswith(own):
                skipped += 1                  # our own bundle back from the kernel: its messages went up
                continue                      # through loopback already
            try:
                decode(data, msgs, check, rejected)
            except IncompatibleVersionError as e:
                self._bad_datagram("version", data, _source(sources, i), e)
            except WireFormatError as e:
                self._bad_datagram("malformed", data, _source(sources, i), e)
            if PyList_GET_SIZE(rejected):
                self.dropped_malformed_msgs += PyList_GET_SIZE(rejected)
                error = rejected[0]
                del rejected[:]
                self._bad_datagram("malformed_msgs", data, _source(sources, i), error)
        if skipped:
            self._dropped("own_bundles", skipped)
        if not msgs:
            return 0
        kept, no_hdr, other, own_mcast = filter_transport(msgs, self.id, self.cluster_utf, self.own_addr,
                                                          self.loopback and multicast)
        if no_hdr:
            self._dropped("no_tp_header", no_hdr)
        if other:
            self._dropped("other_cluster", other)
        if own_mcast:
            self._dropped("own_mcast", own_mcast)
        if not kept:
            return 0
        self.msgs_received += PyList_GET_SIZE(<list>kept)
        try:
            self.up_prot.up_batch(kept)
        except Exception as e:                # never let a protocol error kill a receive thread
            self._up_failed(PyList_GET_SIZE(<list>kept), e)
        return 0


cdef object _source(sources, Py_ssize_t i):
    try:
        return sources[i]
    except Exception:
        return None


def filter_transport(list msgs, int tp_id, bytes cluster_utf, object drop_src, bint drop_own):
    """The transport's receive checks for a whole batch (TP.passMessageUp).

    Keeps messages that carry a transport header whose cluster name equals ``cluster_utf`` (the
    ``writeUTF`` bytes of our cluster name, compared without decoding) and, when ``drop_own``, that do
    not come from ``drop_src``. Returns ``(kept, no_header, other_cluster, own)`` counts with the kept list.
    """
    cdef list kept = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Py_ssize_t no_hdr = 0, other = 0, own = 0
    cdef Message m
    cdef int k, idx
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(cluster_utf)
    cdef const char* want = PyBytes_AS_STRING(cluster_utf)
    cdef const unsigned char* raw
    cdef object hdr
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        idx = -1
        for k in range(m._nh):
            if m._h[k].id == tp_id:
                idx = k
                break
        if idx < 0:
            no_hdr += 1
            continue
        hdr = m.built_header(idx)
        if hdr is not None:
            if not isinstance(hdr, TpHeader) or utf_encode((<TpHeader>hdr).channel_name) != cluster_utf:
                other += 1
                continue
        else:
            if type(m._raw) is not bytes or m._h[idx].end - m._h[idx].off != blen:
                other += 1
                continue
            raw = <const unsigned char*>PyBytes_AS_STRING(m._raw) + m._h[idx].off
            if memcmp(raw, want, blen) != 0:
                other += 1
                continue
        if drop_own and drop_src is not None and m.src == drop_src:
            own += 1
            continue
        kept.append(m)
    return kept, no_hdr, other, own
