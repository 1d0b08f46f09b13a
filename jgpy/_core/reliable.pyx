# cython: language_level=3
"""What NAKACK's and UNICAST's cores share: windows behind one lock, and the hand-over of what a received batch
makes deliverable to the delivery executor in the order the windows released it.

:meth:`OrderedCore.receive_ordered` is that sequence, once for both: under ``lock`` the batch goes into the
windows and the deliverable run is queued on the executor (``SerialCore.enqueue``: so the queue keeps the
windows' order); after the lock, what the batch asks of the protocol (retransmission requests, ACKs, logging),
the OOB messages up, and then the queue runs in this thread if it may (relay delivery: ``run_pending``), never
under a protocol's lock. A core says what its windows make of a batch (``_add``) and what it does after the
lock (``_after``).

A protocol above may take some messages of a deliverable run at the ordering point (:class:`OrderedTap`):
``take`` runs under ``lock``, so what it takes keeps the windows' order, and ``drain`` after the lock, on the
receiving thread, before the run is delivered. (UNICAST applies it: SEQUENCER's coordinator relays members'
FORWARDs this way instead of behind every delivery on the delivery thread.)
"""

from jgpy._core.batch cimport split_by_header
from jgpy._core.serial cimport SerialCore
from jgpy._core.sync cimport Lock


cdef class Arrival:
    """What one received batch made of a core's windows (one per call: several threads receive at once)."""


cdef class OrderedTap:
    """Messages a protocol above handles at the ordering point instead of on the delivery executor."""

    cpdef list take(self, list run):
        """(``lock`` held) ``run`` without the messages taken (kept in order, for :meth:`drain`)."""
        return run

    cpdef int drain(self) except -1:
        """(no lock held, on the receiving thread) Handle what was taken, in order."""
        return 0


cdef class OrderedCore(ProtocolCore):
    """Base of the cores of NAKACK and UNICAST: ``lock`` and the ordered hand-over (see the module doc)."""

    def __cinit__(self):
        self.lock = Lock()

    def up_batch(self, list msgs):
        """The messages with our header go into the windows (``receive_ordered((mine, rest))``: ``_add`` may move
        some to ``rest``), the rest up (NAKACK classifies its batches itself)."""
        mine, rest = split_by_header(msgs, self.id)
        if mine:
            self.receive_ordered((mine, rest))
        if rest:
            self.up_prot.up_batch(rest)

    cdef int receive_ordered(self, object batch) except -1:
        cdef Arrival a
        cdef bint run = False
        cdef SerialCore ex = self.delivery
        self.lock.take()
        try:
            a = self._add(batch)
            if a.fn is not None and ex is not None:
                run = ex._enqueue(a.fn, a.args)
        finally:
            self.lock.give()
        try:
            self._after(a)
            if a.oob:
                self.up_prot.up_batch(a.oob)
        finally:
            if run:                       # what we queued must not wait for a thread nobody wakes
                ex._run_pending()
        return 0

    cdef Arrival _add(self, object batch):
        raise NotImplementedError

    cdef int _after(self, Arrival a) except -1:
        return 0
