# cython: language_level=3
"""FRAG2's core (``FRAG2`` is a subclass): messages above ``frag_size`` go to the protocol's ``fragment(msg)``
(Python: it cuts them into windows of the payload), the rest pass on in C."""

from libc.stdint cimport int64_t

from jgpy._core.message cimport Message
from jgpy._core.sendpath cimport ProtocolCore


cdef class FragCore(ProtocolCore):
    """``frag_size`` is FRAG2's property (this field); ``num_sent_msgs`` counts the messages sent down."""

    cdef public Py_ssize_t frag_size
    cdef readonly int64_t num_sent_msgs

    cdef object _down(self, Message msg):
        self.num_sent_msgs += 1
        if msg._len > self.frag_size:
            self.fragment(msg)
            return None
        return self._pass(msg)
