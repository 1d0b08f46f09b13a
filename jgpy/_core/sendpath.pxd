# The chain of send cores (see sendpath.pyx): the base classes every core module cimports.

from jgpy._core.message cimport Message


cdef class SendCore:
    cdef object _next_fn              # the next step as a Python callable (None: not linked yet)
    cdef SendCore _next_core          # ... or as a core, called in C

    cdef object _below(self)
    cdef object _link(self)
    cdef object _down(self, Message msg)

    cdef inline object _pass(self, Message msg):
        """Continue the down path with the next step."""
        if self._next_core is not None:
            return self._next_core._down(msg)
        if self._next_fn is None:
            self._link()
            if self._next_core is not None:
                return self._next_core._down(msg)
        return self._next_fn(msg)


cdef class ProtocolCore(SendCore):
    cdef object _down_prot
    cdef public object up_prot
    cdef public int id


cdef class OwnedSendCore(SendCore):
    cdef public object owner
