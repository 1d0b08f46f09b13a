# UNICAST2's core (unicast2.pyx): the protocol class derives from it.

from libc.stdint cimport int64_t

from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.tables cimport AckSenderWindow, NakReceiverWindow


cdef class Unicast2Sender:
    cdef readonly int conn_id
    cdef public int64_t next_seqno
    cdef readonly AckSenderWindow win    # what we sent, kept until the receiver's STABLE covers it
    cdef readonly double created         # monotonic seconds


cdef class Unicast2Receiver:
    cdef readonly int conn_id
    cdef readonly NakReceiverWindow win
    cdef public bint member
    cdef public double last_used         # monotonic seconds
    cdef public int64_t received_bytes   # since our last STABLE to the sender (max_bytes)
    cdef public int64_t last_highest     # highest received when we last sent a STABLE (max_stable_msgs)
    cdef public int num_stable_msgs


cdef class Unicast2Arrival(Arrival):
    cdef list events


cdef class Unicast2Core(OrderedCore):
    # settings: UNICAST2's properties are these fields
    cdef public Py_ssize_t max_msg_batch_size
    cdef public int64_t max_bytes
    cdef public Py_ssize_t max_nonmember_connections
    cdef public int64_t nonmember_window
    cdef public object xmit_timeouts     # the receive windows' XMIT_REQ schedule (ms)
    # state, guarded by lock
    cdef readonly dict send_table        # dest -> Unicast2Sender
    cdef readonly dict recv_table        # sender -> Unicast2Receiver
    cdef readonly dict nonmembers        # sender -> Unicast2Receiver of non-members, least recently used first
    cdef readonly frozenset member_set
    cdef public bint started
    # counters
    cdef readonly int64_t msgs_sent, msgs_received, bytes_received, duplicates
    cdef readonly int64_t dropped_unknown_conn, dropped_bad_seqno, dropped_nonmember_window, nonmembers_evicted

    cdef Unicast2Receiver _open(self, object sender, int conn_id, int64_t seqno)
    cdef object _drop_receiver(self, object sender)
    cdef list _process(self, list mine, list rest, list deliver, list oob)
