# cython: language_level=3
"""FRAG2's core (``FRAG2`` is a subclass): messages above ``frag_size`` go to the protocol's ``fragment(msg)``
(Python: it cuts them into windows of the payload), the rest pass on in C. Up, a lone message without
FRAG2's header passes here too; other batches go to the protocol's ``_up_batch``."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t

from jgpy._core.message cimport Message
from jgpy._core.sendpath cimport ProtocolCore


cdef class FragCore(ProtocolCore):
    """``frag_size`` is FRAG2's property (this field); ``num_sent_msgs`` counts the messages sent down,
    ``num_received_msgs`` the messages passed up."""

    cdef public Py_ssize_t frag_size
    cdef readonly int64_t num_sent_msgs
    cdef public int64_t num_received_msgs

    def up_batch(self, list msgs):
        """A lone message without our header (a request or its answer) goes up from here, counted; any other
        batch goes to the protocol's ``_up_batch``."""
        if PyList_GET_SIZE(msgs) == 1 and (<Message>PyList_GET_ITEM(msgs, 0))._find(self.id) < 0:
            self.num_received_msgs += 1
            self.up_prot.up_batch(msgs)
            return None
        return self._up_batch(msgs)

    cdef object _down(self, Message msg):
        self.num_sent_msgs += 1
        if msg._len > self.frag_size:
            self.fragment(msg)
            return None
        return self._pass(msg)
