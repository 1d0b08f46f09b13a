# UNICAST's core (unicast.pyx): the protocol class derives from it.

from libc.stdint cimport int64_t

from jgpy._core.message cimport Message
from jgpy._core.reliable cimport Arrival, OrderedCore
from jgpy._core.tables cimport AckReceiverWindow


cdef class UnicastConnection:
    cdef public int conn_id
    cdef public int64_t next_seqno
    cdef public object win            # AckSenderWindow
    cdef public double created        # monotonic seconds


cdef class UnicastReceiver:
    cdef readonly int conn_id
    cdef readonly AckReceiverWindow win
    cdef public bint member
    cdef public double last_used      # monotonic seconds


cdef class UnicastArrival(Arrival):
    cdef list acks, events


cdef class UnicastCore(OrderedCore):
    # settings: UNICAST's properties are these fields
    cdef public Py_ssize_t max_msg_batch_size
    cdef public int64_t ack_threshold
    cdef public Py_ssize_t max_nonmember_connections
    cdef public int64_t nonmember_window
    # state, guarded by lock
    cdef readonly dict send_table         # dest -> UnicastConnection
    cdef readonly dict recv_table         # sender -> UnicastReceiver
    cdef readonly dict pending_acks       # sender -> [highest seqno to ack, messages it covers]
    cdef readonly dict nonmembers         # sender -> UnicastReceiver of non-members, least recently used first
    cdef readonly frozenset member_set    # the view's members
    cdef public bint started
    cdef public int ack_delay_ms          # the effective ack_delay (0: every batch is acked at once, as 2.12)
    cdef public object ack_task           # the timer task that sends the delayed ACKs (None: none scheduled)
    # counters
    cdef readonly int64_t msgs_sent, acks_piggybacked, msgs_received, acks_received, duplicates
    cdef readonly int64_t dropped_unknown_conn, dropped_bad_seqno, dropped_nonmember_window, nonmembers_evicted

    cdef UnicastReceiver _open(self, object sender, int conn_id, int64_t seq, dict acks)
    cdef object _forget(self, object sender)
    cdef tuple _process(self, list mine, list rest)
    cdef list _decide_acks(self, dict acks)
