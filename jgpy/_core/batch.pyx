# cython: language_level=3
"""Per-batch message helpers for the up path: C loops over a list of messages, so protocol code in
Python makes one call per batch instead of one per message."""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE

from jgpy._core.message cimport Message


cdef inline bint _has(Message m, int id):
    cdef int i
    for i in range(m._nh):
        if m._h[i].id == id:
            return True
    return False


cpdef tuple split_by_header(list msgs, int id):
    """``(messages with a header of protocol id, the others)``, both in the original order."""
    cdef list mine = [], rest = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if _has(m, id):
            mine.append(m)
        else:
            rest.append(m)
    return mine, rest


def has_header_any(list msgs, int id):
    """True if at least one message has a header of protocol ``id``."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    for i in range(n):
        if _has(<Message>PyList_GET_ITEM(msgs, i), id):
            return True
    return False


def total_length(list msgs, bint multicasts_only=False):
    """Sum of the payload lengths (``multicasts_only``: of the multicasts, ``dest`` None)."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs), total = 0
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m._buf is not None and not (multicasts_only and m.dest is not None):
            total += m._len
    return total


def unknown_multicast_sources(list msgs, members, known):
    """Senders of the batch's multicasts that are in neither ``members`` nor ``known`` (each once, in
    batch order)."""
    cdef list out = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    cdef object last = None           # a batch mostly comes from one sender: look each one up once in a row
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        src = m.src
        if m.dest is not None or src is None or src is last:
            continue
        last = src
        if src not in members and src not in known and src not in out:
            out.append(src)
    return out


def split_by_flag(list msgs, int flag):
    """``(messages with ``flag`` set, the others)``, each in the batch order."""
    cdef list with_flag = [], without = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m.flags & flag:
            with_flag.append(m)
        else:
            without.append(m)
    return with_flag, without


def group_by_sender(list msgs):
    """``{src: [messages]}`` in first-seen order, each list in the original order."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    cdef list lst
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        lst = out.get(m.src)
        if lst is None:
            out[m.src] = [m]
        else:
            lst.append(m)
    return out
