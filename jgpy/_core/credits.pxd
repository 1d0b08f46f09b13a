from libc.stdint cimport int64_t

from jgpy._core.sendpath cimport ProtocolCore


cdef class CreditTable:
    cdef dict _credits
    cdef readonly int64_t max_credits
    cdef int64_t _lowest
    cdef int64_t _spent             # spent by multicasts, not yet folded into the stored values

    cdef void _recompute(self)
    cpdef bint spend_all(self, int64_t length)
    cpdef int spend(self, object member, int64_t length)
    cpdef bint add(self, object member, int64_t credits)


cdef class CreditCore(ProtocolCore):
    cdef public CreditTable table
    cdef public bint multicast            # MFC: multicasts spend credits; UFC: unicasts
    cdef public bint running
    cdef public object received           # the ReceiverCredits (None until the protocol's init)
    cdef public set _delivering           # the ids of the threads passing messages up through us (JGRP-465)
    cdef public bint ignore_synchronous_response
