# cython: language_level=3
"""Synchronisation shared by the cores: :class:`Lock` (taken from C and from Python) and :class:`Handoff`
(items for one consumer thread)."""

from cpython.list cimport PyList_Append
from cpython.pythread cimport PyThread_allocate_lock, PyThread_free_lock


cdef class Lock:
    """A mutex that cores take with C calls and Python code with ``with`` (as ``threading.Lock``).

    Taken with the GIL held it never blocks holding the GIL: a try first, then a wait with the GIL released.
    Not reentrant. ``take``/``give`` (C) are in sync.pxd, for other modules' C code too."""

    def __cinit__(self):
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError("cannot allocate a lock")

    def __dealloc__(self):
        if self._lock != NULL:
            PyThread_free_lock(self._lock)

    def acquire(self) -> bool:
        self.take()
        return True

    def release(self) -> None:
        self.give()

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.give()
        return False


cdef class Handoff:
    """Items passed from any thread to one consumer thread, taken all at once.

    ``put`` (C) and ``add`` (Python) append; :meth:`take` returns everything added so far. ``wakeup`` is
    the consumer's :class:`jgpy.stack.executor.Wakeup`: a put wakes it only when it sleeps."""

    def __init__(self, wakeup):
        self._items = []
        self.wakeup = wakeup

    cdef int put(self, object item) except -1:
        PyList_Append(self._items, item)        # no Python code runs in between: atomic under the GIL
        if self.wakeup.sleeping:                # read after the append (see Wakeup)
            self.wakeup.wake()
        return 0

    def add(self, item) -> None:
        self.put(item)

    def take(self) -> list:
        items = self._items
        self._items = []
        return items

    def __len__(self) -> int:
        return len(self._items)
