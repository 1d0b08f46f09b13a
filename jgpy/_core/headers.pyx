# cython: language_level=3
"""Header types of the JGroups 2.12 protocols.

Each class holds the fields of one Java header class (named in ``JAVA_CLASS``) and the type
constants the protocol uses. How a header looks on the wire is the business of the dialect
(:mod:`jgpy._core.jg212`), so protocol code only ever deals with these fields.
"""

cimport cython


cdef tuple _opt_tuple(object v):
    return tuple(v) if v is not None else None


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class Header:
    """Base class: structural equality, ``repr`` and ``copy`` over ``FIELDS``."""

    FIELDS = ()
    TYPE_NAMES = {}

    def _values(self):
        return tuple(getattr(self, f) for f in self.FIELDS)

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == (<Header>other)._values()

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def copy(self):
        """A shallow copy (headers are mutable; received headers may be shared between copies of a message)."""
        return type(self)(*self._values())

    def type_name(self):
        t = getattr(self, "type", None)
        return self.TYPE_NAMES.get(t, str(t))

    def __repr__(self):
        parts = []
        for f, v in zip(self.FIELDS, self._values()):
            if f == "type" and self.TYPE_NAMES:
                parts.append(f"type={self.type_name()}")
            elif v is not None:
                parts.append(f"{f}={v!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self):
        return (type(self), self._values())


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class TpHeader(Header):
    """Transport header: the cluster name, on every message (``protocols.TpHeader``)."""
    JAVA_CLASS = "protocols.TpHeader"
    FIELDS = ("channel_name",)

    def __init__(self, str channel_name=""):
        self.channel_name = channel_name


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class NakAckHeader(Header):
    """pbcast.NAKACK: seqno of a multicast, or a retransmission request (``protocols.pbcast.NakAckHeader``)."""
    JAVA_CLASS = "protocols.pbcast.NakAckHeader"
    FIELDS = ("type", "seqno", "range", "sender")
    MSG = 1
    XMIT_REQ = 2
    XMIT_RSP = 3
    TYPE_NAMES = {1: "MSG", 2: "XMIT_REQ", 3: "XMIT_RSP"}

    def __init__(self, int type=1, long long seqno=-1, range=None, sender=None):
        self.type = type
        self.seqno = seqno
        self.range = range
        self.sender = sender

    @staticmethod
    def msg(long long seqno):
        return NakAckHeader(1, seqno)

    @staticmethod
    def xmit_req(long long low, long long high, original_sender):
        from jgpy._core.types import Range
        return NakAckHeader(2, -1, Range(low, high), original_sender)

    @staticmethod
    def xmit_rsp(long long seqno):
        return NakAckHeader(3, seqno)


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class UnicastHeader(Header):
    """UNICAST: DATA seqno/conn_id/first, cumulative ACK, or SEND_FIRST_SEQNO (``UNICAST$UnicastHeader``)."""
    JAVA_CLASS = "protocols.UNICAST$UnicastHeader"
    FIELDS = ("type", "seqno", "conn_id", "first")
    DATA = 0
    ACK = 1
    SEND_FIRST_SEQNO = 2
    TYPE_NAMES = {0: "DATA", 1: "ACK", 2: "SEND_FIRST_SEQNO"}

    def __init__(self, int type=0, long long seqno=0, int conn_id=0, bint first=False):
        self.type = type
        self.seqno = seqno
        self.conn_id = conn_id
        self.first = first


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class FragHeader(Header):
    """FRAG/FRAG2: fragment ``frag_id`` of ``num_frags`` of message ``id`` (``protocols.FragHeader``)."""
    JAVA_CLASS = "protocols.FragHeader"
    FIELDS = ("id", "frag_id", "num_frags")

    def __init__(self, long long id=0, int frag_id=0, int num_frags=0):
        self.id = id
        self.frag_id = frag_id
        self.num_frags = num_frags


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class FcHeader(Header):
    """FC/MFC/UFC credit messages (``protocols.FcHeader``)."""
    JAVA_CLASS = "protocols.FcHeader"
    FIELDS = ("type",)
    REPLENISH = 1
    CREDIT_REQUEST = 2
    TYPE_NAMES = {1: "REPLENISH", 2: "CREDIT_REQUEST"}

    def __init__(self, int type=1):
        self.type = type


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class PingHeader(Header):
    """Discovery request/response (``protocols.PingHeader``; PING, MPING, TCPPING, ...)."""
    JAVA_CLASS = "protocols.PingHeader"
    FIELDS = ("type", "data", "cluster_name", "view_id")
    GET_MBRS_REQ = 1
    GET_MBRS_RSP = 2
    TYPE_NAMES = {1: "GET_MBRS_REQ", 2: "GET_MBRS_RSP"}

    def __init__(self, int type=1, data=None, cluster_name=None, view_id=None):
        self.type = type
        self.data = data
        self.cluster_name = cluster_name
        self.view_id = view_id


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class GmsHeader(Header):
    """pbcast.GMS membership messages (``protocols.pbcast.GMS$GmsHeader``)."""
    JAVA_CLASS = "protocols.pbcast.GMS$GmsHeader"
    FIELDS = ("type", "view", "mbr", "mbrs", "join_rsp", "my_digest", "merge_id", "merge_rejected",
              "use_flush_if_present")
    JOIN_REQ = 1
    JOIN_RSP = 2
    LEAVE_REQ = 3
    LEAVE_RSP = 4
    VIEW = 5
    MERGE_REQ = 6
    MERGE_RSP = 7
    INSTALL_MERGE_VIEW = 8
    CANCEL_MERGE = 9
    VIEW_ACK = 10
    JOIN_REQ_WITH_STATE_TRANSFER = 11
    INSTALL_MERGE_VIEW_OK = 12
    GET_DIGEST_REQ = 13
    GET_DIGEST_RSP = 14
    INSTALL_DIGEST = 15
    TYPE_NAMES = {1: "JOIN_REQ", 2: "JOIN_RSP", 3: "LEAVE_REQ", 4: "LEAVE_RSP", 5: "VIEW", 6: "MERGE_REQ",
                  7: "MERGE_RSP", 8: "INSTALL_MERGE_VIEW", 9: "CANCEL_MERGE", 10: "VIEW_ACK",
                  11: "JOIN_REQ_WITH_STATE_TRANSFER", 12: "INSTALL_MERGE_VIEW_OK", 13: "GET_DIGEST_REQ",
                  14: "GET_DIGEST_RSP", 15: "INSTALL_DIGEST"}

    def __init__(self, int type=0, view=None, mbr=None, mbrs=None, join_rsp=None, my_digest=None,
                 merge_id=None, bint merge_rejected=False, bint use_flush_if_present=False):
        self.type = type
        self.view = view
        self.mbr = mbr
        self.mbrs = _opt_tuple(mbrs)
        self.join_rsp = join_rsp
        self.my_digest = my_digest
        self.merge_id = merge_id
        self.merge_rejected = merge_rejected
        self.use_flush_if_present = use_flush_if_present


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class Unicast2Header(Header):
    """UNICAST2 (NAK-based unicast) (``protocols.UNICAST2$Unicast2Header``)."""
    JAVA_CLASS = "protocols.UNICAST2$Unicast2Header"
    FIELDS = ("type", "seqno", "high_seqno", "conn_id", "first")
    DATA = 0
    XMIT_REQ = 1
    SEND_FIRST_SEQNO = 2
    STABLE = 3
    TYPE_NAMES = {0: "DATA", 1: "XMIT_REQ", 2: "SEND_FIRST_SEQNO", 3: "STABLE"}

    def __init__(self, int type=0, long long seqno=0, long long high_seqno=0, int conn_id=0, bint first=False):
        self.type = type
        self.seqno = seqno
        self.high_seqno = high_seqno
        self.conn_id = conn_id
        self.first = first


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class StableHeader(Header):
    """pbcast.STABLE gossip and stability messages (``protocols.pbcast.STABLE$StableHeader``)."""
    JAVA_CLASS = "protocols.pbcast.STABLE$StableHeader"
    FIELDS = ("type", "stable_digest")
    STABLE_GOSSIP = 1
    STABILITY = 2
    TYPE_NAMES = {1: "STABLE_GOSSIP", 2: "STABILITY"}

    def __init__(self, int type=1, stable_digest=None):
        self.type = type
        self.stable_digest = stable_digest


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class FdHeader(Header):
    """FD heartbeats and suspicions (``protocols.FD$FdHeader``). ``from_`` is Java's ``from``."""
    JAVA_CLASS = "protocols.FD$FdHeader"
    FIELDS = ("type", "mbrs", "from_")
    HEARTBEAT = 0
    HEARTBEAT_ACK = 1
    SUSPECT = 2
    TYPE_NAMES = {0: "HEARTBEAT", 1: "HEARTBEAT_ACK", 2: "SUSPECT"}

    def __init__(self, int type=0, mbrs=None, from_=None):
        self.type = type
        self.mbrs = _opt_tuple(mbrs)
        self.from_ = from_


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class HeartbeatHeader(Header):
    """FD_ALL heartbeat: no fields (``protocols.FD_ALL$HeartbeatHeader``)."""
    JAVA_CLASS = "protocols.FD_ALL$HeartbeatHeader"
    FIELDS = ()

    def __init__(self):
        pass


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class FdSockHeader(Header):
    """FD_SOCK cache and suspicion messages (``protocols.FD_SOCK$FdHeader``)."""
    JAVA_CLASS = "protocols.FD_SOCK$FdHeader"
    FIELDS = ("type", "mbr", "sock_addr", "cached_addrs", "mbrs")
    SUSPECT = 10
    WHO_HAS_SOCK = 11
    I_HAVE_SOCK = 12
    GET_CACHE = 13
    GET_CACHE_RSP = 14
    TYPE_NAMES = {10: "SUSPECT", 11: "WHO_HAS_SOCK", 12: "I_HAVE_SOCK", 13: "GET_CACHE", 14: "GET_CACHE_RSP"}

    def __init__(self, int type=10, mbr=None, sock_addr=None, cached_addrs=None, mbrs=None):
        self.type = type
        self.mbr = mbr
        self.sock_addr = sock_addr
        if cached_addrs is not None:
            cached_addrs = tuple((k, v) for k, v in (cached_addrs.items() if isinstance(cached_addrs, dict)
                                                      else cached_addrs))
        self.cached_addrs = cached_addrs
        self.mbrs = _opt_tuple(mbrs)


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class VerifyHeader(Header):
    """VERIFY_SUSPECT probe and answer (``protocols.VERIFY_SUSPECT$VerifyHeader``)."""
    JAVA_CLASS = "protocols.VERIFY_SUSPECT$VerifyHeader"
    FIELDS = ("type", "from_")
    ARE_YOU_DEAD = 1
    I_AM_NOT_DEAD = 2
    TYPE_NAMES = {1: "ARE_YOU_DEAD", 2: "I_AM_NOT_DEAD"}

    def __init__(self, int type=1, from_=None):
        self.type = type
        self.from_ = from_


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class SfcHeader(Header):
    """SFC credit messages (``protocols.SFC$Header``); note the type values differ from FcHeader."""
    JAVA_CLASS = "protocols.SFC$Header"
    FIELDS = ("type",)
    CREDIT_REQUEST = 1
    REPLENISH = 2
    URGENT_CREDIT_REQUEST = 3
    TYPE_NAMES = {1: "CREDIT_REQUEST", 2: "REPLENISH", 3: "URGENT_CREDIT_REQUEST"}

    def __init__(self, int type=1):
        self.type = type


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class StateHeader(Header):
    """pbcast.STATE_TRANSFER request/response (``protocols.pbcast.STATE_TRANSFER$StateHeader``)."""
    JAVA_CLASS = "protocols.pbcast.STATE_TRANSFER$StateHeader"
    FIELDS = ("type", "id", "sender", "my_digest", "state_id")
    STATE_REQ = 1
    STATE_RSP = 2
    TYPE_NAMES = {1: "STATE_REQ", 2: "STATE_RSP"}

    def __init__(self, int type=1, long long id=0, sender=None, my_digest=None, state_id=None):
        self.type = type
        self.id = id
        self.sender = sender
        self.my_digest = my_digest
        self.state_id = state_id


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class StreamingStateHeader(Header):
    """pbcast.STREAMING_STATE_TRANSFER messages (``...STREAMING_STATE_TRANSFER$StateHeader``)."""
    JAVA_CLASS = "protocols.pbcast.STREAMING_STATE_TRANSFER$StateHeader"
    FIELDS = ("type", "id", "sender", "my_digest", "bind_addr", "state_id")
    STATE_REQ = 1
    STATE_RSP = 2
    STATE_PART = 3
    TYPE_NAMES = {1: "STATE_REQ", 2: "STATE_RSP", 3: "STATE_PART"}

    def __init__(self, int type=1, long long id=0, sender=None, my_digest=None, bind_addr=None, state_id=None):
        self.type = type
        self.id = id
        self.sender = sender
        self.my_digest = my_digest
        self.bind_addr = bind_addr
        self.state_id = state_id


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class FlushHeader(Header):
    """pbcast.FLUSH phases (``protocols.pbcast.FLUSH$FlushHeader``)."""
    JAVA_CLASS = "protocols.pbcast.FLUSH$FlushHeader"
    FIELDS = ("type", "view_id", "flush_participants", "digest")
    START_FLUSH = 0
    STOP_FLUSH = 2
    FLUSH_COMPLETED = 3
    ABORT_FLUSH = 5
    FLUSH_BYPASS = 6
    FLUSH_RECONCILE = 7
    FLUSH_RECONCILE_OK = 8
    FLUSH_NOT_COMPLETED = 9
    TYPE_NAMES = {0: "START_FLUSH", 2: "STOP_FLUSH", 3: "FLUSH_COMPLETED", 5: "ABORT_FLUSH",
                  6: "FLUSH_BYPASS", 7: "FLUSH_RECONCILE", 8: "FLUSH_RECONCILE_OK", 9: "FLUSH_NOT_COMPLETED"}

    def __init__(self, int type=0, long long view_id=0, flush_participants=None, digest=None):
        self.type = type
        self.view_id = view_id
        self.flush_participants = _opt_tuple(flush_participants)
        self.digest = digest


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class SequencerHeader(Header):
    """SEQUENCER total-order messages (``protocols.SEQUENCER$SequencerHeader``)."""
    JAVA_CLASS = "protocols.SEQUENCER$SequencerHeader"
    FIELDS = ("type", "tag")
    FORWARD = 1
    BCAST = 2
    WRAPPED_BCAST = 3
    TYPE_NAMES = {1: "FORWARD", 2: "BCAST", 3: "WRAPPED_BCAST"}

    def __init__(self, int type=1, tag=None):
        self.type = type
        self.tag = tag


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class CompressHeader(Header):
    """COMPRESS: size of the inflated payload (``protocols.COMPRESS$CompressHeader``)."""
    JAVA_CLASS = "protocols.COMPRESS$CompressHeader"
    FIELDS = ("original_size",)

    def __init__(self, int original_size=0):
        self.original_size = original_size


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class CoordAnnouncement(Header):
    """MERGE3 coordinator announcement (``protocols.MERGE3$CoordAnnouncement``)."""
    JAVA_CLASS = "protocols.MERGE3$CoordAnnouncement"
    FIELDS = ("view",)

    def __init__(self, view=None):
        self.view = view


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class RequestCorrelatorHeader(Header):
    """MessageDispatcher/RpcDispatcher request or response (``blocks.RequestCorrelator$Header``)."""
    JAVA_CLASS = "blocks.RequestCorrelator$Header"
    FIELDS = ("type", "id", "rsp_expected", "corr_id")
    REQ = 0
    RSP = 1
    TYPE_NAMES = {0: "REQ", 1: "RSP"}

    def __init__(self, int type=0, long long id=0, bint rsp_expected=False, int corr_id=201):
        self.type = type
        self.id = id
        self.rsp_expected = rsp_expected
        self.corr_id = corr_id


@cython.no_gc          # no cycles can pass through it: not tracked by the cycle collector
cdef class MultiDestinationHeader(RequestCorrelatorHeader):
    """A request with an exclusion list (``blocks.RequestCorrelator$MultiDestinationHeader``)."""
    JAVA_CLASS = "blocks.RequestCorrelator$MultiDestinationHeader"
    FIELDS = ("type", "id", "rsp_expected", "corr_id", "exclusion_list")

    def __init__(self, int type=0, long long id=0, bint rsp_expected=False, int corr_id=201, exclusion_list=None):
        RequestCorrelatorHeader.__init__(self, type, id, rsp_expected, corr_id)
        self.exclusion_list = _opt_tuple(exclusion_list)
