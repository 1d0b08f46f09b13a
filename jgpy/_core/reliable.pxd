# The common base of the reliable protocols' cores, NAKACK and UNICAST (reliable.pyx).

from jgpy._core.sendpath cimport ProtocolCore
from jgpy._core.serial cimport SerialCore
from jgpy._core.sync cimport Lock


cdef class Arrival:
    cdef object fn                    # delivers the run: fn(*args) on the delivery executor (None: nothing)
    cdef tuple args
    cdef list oob                     # OOB messages to pass up at once (None: none)


cdef class OrderedTap:
    cpdef list take(self, list run)
    cpdef int drain(self) except -1


cdef class OrderedCore(ProtocolCore):
    cdef readonly Lock lock           # orders the windows and the hand-overs of what they release
    cdef public SerialCore delivery   # the stack's delivery executor while started (None: stopped)
    cdef public OrderedTap tap        # a protocol above that takes messages at the ordering point (None: none)

    cdef int receive_ordered(self, object batch) except -1
    cdef Arrival _add(self, object batch)
    cdef int _after(self, Arrival a) except -1
