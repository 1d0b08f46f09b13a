# Membership and bookkeeping data classes (org.jgroups.View, ViewId, util.Digest, ...). Codecs live in the dialect.
from libc.stdint cimport int32_t, int64_t


cdef class ViewId:
    cdef readonly object coord_addr
    cdef readonly int64_t id


cdef class View:
    cdef readonly ViewId vid
    cdef readonly tuple members        # None when the wire said "null"
    cdef readonly object payload       # bytes (a Java-serialised Map) or None


cdef class MergeView(View):
    cdef readonly tuple subgroups      # tuple of View/MergeView, or None


cdef class Digest:
    cdef dict _entries                 # Address -> (low, highest_delivered, highest_received)


cdef class JoinRsp:
    cdef readonly View view
    cdef readonly Digest digest
    cdef readonly object fail_reason


cdef class MergeId:
    cdef readonly object initiator
    cdef readonly int32_t id


cdef class PingData:
    cdef readonly object own_addr
    cdef readonly View view
    cdef readonly ViewId view_id
    cdef readonly bint is_server
    cdef readonly object logical_name
    cdef readonly tuple physical_addrs


cdef class Range:
    cdef readonly int64_t low
    cdef readonly int64_t high
