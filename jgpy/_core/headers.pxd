# Header types of the 2.12 stacks. Only fields live here; the wire layout of each is in the dialect.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t


cdef class Header:
    pass


# ---- hot headers: on every data message ----

cdef class TpHeader(Header):
    cdef public str channel_name


cdef class NakAckHeader(Header):
    cdef public int8_t type
    cdef public int64_t seqno
    cdef public object range          # Range, for XMIT_REQ
    cdef public object sender         # original sender, for XMIT_REQ


cdef class UnicastHeader(Header):
    cdef public int8_t type
    cdef public int64_t seqno
    cdef public int16_t conn_id
    cdef public bint first


cdef class FragHeader(Header):
    cdef public int64_t id
    cdef public int32_t frag_id
    cdef public int32_t num_frags


cdef class FcHeader(Header):
    cdef public int8_t type


# ---- control headers ----

cdef class PingHeader(Header):
    cdef public int8_t type
    cdef public object data           # PingData
    cdef public object cluster_name
    cdef public object view_id        # ViewId


cdef class GmsHeader(Header):
    cdef public int8_t type
    cdef public object view
    cdef public object mbr
    cdef public object mbrs           # tuple of addresses or None
    cdef public object join_rsp
    cdef public object my_digest
    cdef public object merge_id
    cdef public bint merge_rejected
    cdef public bint use_flush_if_present


cdef class Unicast2Header(Header):
    cdef public int8_t type
    cdef public int64_t seqno
    cdef public int64_t high_seqno
    cdef public int16_t conn_id
    cdef public bint first


cdef class StableHeader(Header):
    cdef public int32_t type
    cdef public object stable_digest


cdef class FdHeader(Header):
    cdef public int8_t type
    cdef public object mbrs
    cdef public object from_


cdef class HeartbeatHeader(Header):
    pass


cdef class FdSockHeader(Header):
    cdef public int8_t type
    cdef public object mbr
    cdef public object sock_addr      # IpAddress
    cdef public object cached_addrs   # tuple of (Address, IpAddress) or None
    cdef public object mbrs           # tuple of addresses or None


cdef class VerifyHeader(Header):
    cdef public int16_t type
    cdef public object from_


cdef class SfcHeader(Header):
    cdef public int8_t type


cdef class StateHeader(Header):
    cdef public int8_t type
    cdef public int64_t id
    cdef public object sender
    cdef public object my_digest
    cdef public object state_id


cdef class StreamingStateHeader(Header):
    cdef public int8_t type
    cdef public int64_t id
    cdef public object sender
    cdef public object my_digest
    cdef public object bind_addr      # IpAddress of the state server socket
    cdef public object state_id


cdef class FlushHeader(Header):
    cdef public int8_t type
    cdef public int64_t view_id
    cdef public object flush_participants
    cdef public object digest


cdef class SequencerHeader(Header):
    cdef public int8_t type
    cdef public object tag            # ViewId(original sender, seqno)


cdef class CompressHeader(Header):
    cdef public int32_t original_size


cdef class CoordAnnouncement(Header):
    cdef public object view


cdef class RequestCorrelatorHeader(Header):
    cdef public int8_t type
    cdef public int64_t id
    cdef public bint rsp_expected
    cdef public int16_t corr_id


cdef class MultiDestinationHeader(RequestCorrelatorHeader):
    cdef public object exclusion_list
