# The transport's core (transport.pyx): TP's down and up paths in C; UDP and TCP derive from it through TP.

from libc.stdint cimport int64_t

from jgpy._core.bundler cimport Bundler
from jgpy._core.message cimport Message, WireDialect
from jgpy._core.senders cimport DatagramSender
from jgpy._core.sendpath cimport ProtocolCore
from jgpy._core.sync cimport Handoff
from jgpy._core.wire cimport Writer


cdef class PeerRoute:
    cdef public int64_t last_ns
    cdef public Bundler bundler
    cdef public object physical


cdef class TransportCore(ProtocolCore):
    # settings: TP's properties (CoreProperty) are these fields
    cdef public bint loopback
    cdef public bint enable_bundling
    cdef public bint enable_unicast_bundling
    cdef public bint discard_incompatible_packets
    cdef public int unicast_stream_gap_us
    cdef public int multicast_stream_gap_us
    # what connecting sets
    cdef public object tp_header          # TpHeader of our cluster; None until connected
    cdef public bytes cluster_utf         # the writeUTF bytes of our cluster name
    cdef public object own_addr           # our logical address (SET_LOCAL_ADDRESS)
    cdef public WireDialect dialect
    cdef public bytes own_bundle_prefix   # the first bytes of every bundle we multicast
    cdef public dict logical_addr_cache   # logical -> physical address (TP's, under its _cache_lock for writes)
    cdef public dict peers                # dest -> PeerRoute
    # the ways out the concrete transport opens (None: the Python slow path, _send_single)
    cdef public Handoff loopback_queue
    cdef public Bundler bundler
    cdef public DatagramSender ucast_sender
    cdef public DatagramSender mcast_sender
    cdef public object mcast_dest         # the group's (host, port)
    cdef public object make_peer_bundler  # (dest, physical) -> Bundler or None (starts its thread)
    # counters
    cdef public int64_t msgs_sent, bytes_sent, loopbacks, pairs_sent, unicasts_bundled, multicasts_direct
    cdef public int64_t datagrams_received, msgs_received, dropped_malformed_msgs
    cdef int64_t _mcast_last_ns
    cdef Writer _spare                    # the encoding writer, reused; a second thread meanwhile makes its own

    cdef int _receive(self, list datagrams, object sources, bint multicast) except -1
    cdef Writer _writer(self, Message msg)
    cdef void _keep(self, Writer w) noexcept
    cdef Bundler _stream_bundler(self, Message msg, object dest, object physical)
    cdef bint _sparse_multicast(self) noexcept
    cdef int _send_multicast(self, Message msg) except -1
    cdef bint _send_pair(self, Message first, Message msg) except -1
    cdef int _send_unicast(self, Message msg, object physical) except -1
    cdef int _stamp(self, Message m) except -1
    cdef int _send_written(self, Writer w, object physical) except -1
    cdef int _bundle_into(self, Bundler bundler, Message msg) except -1
