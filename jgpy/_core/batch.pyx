# cython: language_level=3
"""Per-batch message helpers for the up path: C loops over a list of messages, so protocol code in
Python makes one call per batch instead of one per message."""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.string cimport memcmp

from jgpy._core.message cimport Message
from jgpy._core.headers cimport TpHeader
from jgpy._core.wire import utf_encode


cdef inline bint _has(Message m, int id):
    cdef int i
    for i in range(m._nh):
        if m._h[i].id == id:
            return True
    return False


def split_by_header(list msgs, int id):
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


def total_length(list msgs):
    """Sum of the payload lengths."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs), total = 0
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m._buf is not None:
            total += m._len
    return total


def lengths_by_sender(list msgs):
    """``{src: total payload bytes}`` of the batch (flow control credits)."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if m._buf is not None and m._len:
            out[m.src] = out.get(m.src, 0) + m._len
    return out


def credit_lengths(list msgs, bint multicast, int skip_flags):
    """``{src: total payload bytes}`` of the multicasts (``multicast``) or unicasts of the batch that have
    none of ``skip_flags`` (UFC/MFC count what they owe credits for)."""
    cdef dict out = {}
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Message m
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        if (m.dest is None) == multicast and not (m.flags & skip_flags) and m._buf is not None and m._len:
            out[m.src] = out.get(m.src, 0) + m._len
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


def filter_transport(list msgs, int tp_id, bytes cluster_utf, object drop_src, bint drop_own):
    """The transport's receive checks for a whole batch (TP.passMessageUp).

    Keeps messages that carry a transport header whose cluster name equals ``cluster_utf`` (the
    ``writeUTF`` bytes of our cluster name, compared without decoding) and, when ``drop_own``, that do
    not come from ``drop_src``. Returns ``(kept, no_header, other_cluster, own)`` counts with the kept list.
    """
    cdef list kept = []
    cdef Py_ssize_t i, n = PyList_GET_SIZE(msgs)
    cdef Py_ssize_t no_hdr = 0, other = 0, own = 0
    cdef Message m
    cdef int k, idx
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(cluster_utf)
    cdef const char* want = PyBytes_AS_STRING(cluster_utf)
    cdef const unsigned char* raw
    cdef object hdr
    for i in range(n):
        m = <Message>PyList_GET_ITEM(msgs, i)
        idx = -1
        for k in range(m._nh):
            if m._h[k].id == tp_id:
                idx = k
                break
        if idx < 0:
            no_hdr += 1
            continue
        hdr = m.built_header(idx)
        if hdr is not None:
            if not isinstance(hdr, TpHeader) or utf_encode((<TpHeader>hdr).channel_name) != cluster_utf:
                other += 1
                continue
        else:
            if type(m._raw) is not bytes or m._h[idx].end - m._h[idx].off != blen:
                other += 1
                continue
            raw = <const unsigned char*>PyBytes_AS_STRING(m._raw) + m._h[idx].off
            if memcmp(raw, want, blen) != 0:
                other += 1
                continue
        if drop_own and drop_src is not None and m.src == drop_src:
            own += 1
            continue
        kept.append(m)
    return kept, no_hdr, other, own
