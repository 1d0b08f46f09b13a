# pbcast.NAKACK's core (nakack.pyx): the protocol class derives from it.

from libc.stdint cimport int64_t

from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.sync cimport Lock


cdef class NakackArrival(Arrival):
    cdef list marks, no_window, bad


cdef class NakackCore(OrderedCore):
    # settings: NAKACK's properties are these fields
    cdef public bint discard_delivered_msgs
    cdef public Py_ssize_t max_msg_batch_size
    # state
    cdef readonly dict windows            # sender -> NakReceiverWindow (ours included)
    cdef readonly dict processed          # sender -> (window, highest seqno the layers above have processed)
    cdef readonly Lock seqno_lock         # numbers our multicasts
    cdef public int64_t seqno             # of our last multicast
    cdef public bint running
    cdef public bint is_server            # joined: messages count
    cdef public object own_addr           # our address (set at start and by SET_LOCAL_ADDRESS)
    cdef int64_t _null_senders_seen
    # counters
    cdef readonly int64_t msgs_sent, msgs_received, msgs_delivered, oob_delivered, xmit_rsps_received
    cdef readonly int64_t dropped_not_server, dropped_no_window, dropped_duplicate, dropped_bad_seqno
    cdef readonly int64_t dropped_null_sender

    cdef int _receive(self, list msgs) except -1
    cdef tuple _classify(self, list msgs)
    cdef tuple _process(self, dict data, double now)
