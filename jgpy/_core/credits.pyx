# cython: language_level=3, boundscheck=False, wraparound=False
"""Credit-based flow control in C (UFC, MFC): the core the protocols derive from, and its tables.

A ``CreditTable`` holds, per member, the bytes we may still send it. Spending is one call per message
(``spend_all`` for a multicast: every member's credit must cover the message; ``spend`` for a unicast) and
touches no Python objects beyond the member dict, so it is atomic under the GIL: the protocols need a lock
only to *wait* for credits (their slow path), not to spend them. :class:`CreditCore` is the down path of UFC
and MFC; ``ReceiverCredits`` counts what we owe the senders of a delivered batch, and cuts a batch where
credits fall due (``delivery_chunks``). ``CreditCore.up_batch`` passes a lone message up (a request or its
answer) and counts its credits in C; any other batch goes to the protocol's ``_up_batch``.
"""

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_FromUnsignedLong
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.set cimport PySet_Add, PySet_Contains, PySet_Discard
from libc.stdint cimport int64_t

from jgpy._core.message cimport Message

cdef int NO_FC = 4


cdef class CreditTable:
    """``{member: credits left}`` with the lowest value cached (multicasts need the lowest).

    A multicast spends the same amount with every member, so ``spend_all`` only adds it to ``_spent``: a
    member's credits are its stored value minus ``_spent`` (folded into the stored values whenever credits
    arrive or the members change). A multicast costs no dict write per member."""

    def __init__(self, int64_t max_credits):
        self._credits = {}
        self.max_credits = max_credits
        self._lowest = max_credits
        self._spent = 0

    cdef void _recompute(self):
        """Fold ``_spent`` into the stored values and recompute the lowest."""
        cdef int64_t low = self.max_credits
        cdef int64_t v, spent = self._spent
        cdef dict d = self._credits
        if spent:
            for m in list(d):
                d[m] = <int64_t>d[m] - spent
            self._spent = 0
        for v in d.values():
            if v < low:
                low = v
        self._lowest = low

    def set_members(self, members) -> None:
        """New members start with ``max_credits``; members not in ``members`` are removed."""
        keep = set(members)
        for m in members:
            if m not in self._credits:
                self._credits[m] = self.max_credits + self._spent
        for m in [m for m in self._credits if m not in keep]:
            del self._credits[m]
        self._recompute()

    cpdef bint spend_all(self, int64_t length):
        """Spend ``length`` with every member if every credit covers it (a multicast); else change nothing.
        Without members there is nothing to count."""
        if self._lowest < length:
            return False
        if not self._credits:
            return True
        self._spent += length
        self._lowest -= length
        return True

    cpdef int spend(self, object member, int64_t length):
        """A unicast: 1 spent, 0 not enough credits, -1 ``member`` is not a member (nothing to count)."""
        cdef object v = self._credits.get(member)
        if v is None:
            return -1
        cdef int64_t stored = <int64_t>v
        cdef int64_t left = stored - self._spent
        if left < length:
            return 0
        left -= length
        self._credits[member] = stored - length
        if left < self._lowest:
            self._lowest = left
        return 1

    cpdef bint add(self, object member, int64_t credits):
        """Credits from ``member`` (capped at ``max_credits``); False when it is not a member."""
        cdef object v = self._credits.get(member)
        if v is None:
            return False
        cdef int64_t left = <int64_t>v - self._spent + credits
        if left > self.max_credits:
            left = self.max_credits
        self._credits[member] = left + self._spent
        self._recompute()
        return True

    def get(self, member, default=None):
        v = self._credits.get(member)
        return default if v is None else v - self._spent

    @property
    def lowest(self) -> int:
        return self._lowest

    def below(self, int64_t threshold) -> list:
        """``[(member, credits)]`` of members at or below ``threshold`` (whom to ask for credits)."""
        cdef int64_t spent = self._spent
        return [(m, c - spent) for m, c in self._credits.items() if c - spent <= threshold]

    def items(self):
        cdef int64_t spent = self._spent
        return [(m, c - spent) for m, c in self._credits.items()]

    def __contains__(self, member) -> bool:
        return member in self._credits

    def __len__(self) -> int:
        return len(self._credits)

    def __repr__(self) -> str:
        return f"CreditTable({dict(self.items())}, lowest={self._lowest})"


cdef inline bint _counts(Message m, bint multicast, int skip_flags):
    """Whether ``m`` counts for credits: a multicast (``multicast``) or unicast with a payload and none of
    ``skip_flags``."""
    return (m.dest is None) == multicast and not (m.flags & skip_flags) and m._buf is not None and m._len != 0


cdef class ReceiverCredits:
    """What each sender may still send us before we owe it credits (the receiving half of UFC/MFC).

    ``left`` = {sender: bytes}; a sender that is not a member is not counted. Every method is one C call that
    releases no lock in between, so it is atomic under the GIL (no lock of its own)."""

    cdef public dict left
    cdef readonly int64_t max_credits
    cdef readonly int64_t min_credits

    def __init__(self, int64_t max_credits, int64_t min_credits):
        self.left = {}
        self.max_credits = max_credits
        self.min_credits = min_credits

    cpdef int64_t consumed(self, object sender, int64_t length):
        """Account ``length`` bytes from ``sender``; returns the credits to send back now (0: none)."""
        cdef object cur = self.left.get(sender)
        cdef int64_t left
        if cur is None or length == 0:
            return 0
        left = <int64_t>cur - length
        if left < 0:
            left = 0
        if left <= self.min_credits:
            self.left[sender] = self.max_credits
            return self.max_credits - left
        self.left[sender] = left
        return 0

    def consumed_all(self, dict counted):
        """:meth:`consumed` for each ``{sender: bytes}`` of a delivered batch: ``[(sender, credits to send)]``
        (usually empty)."""
        cdef list out = []
        cdef int64_t c
        for sender, length in counted.items():
            c = self.consumed(sender, length)
            if c > 0:
                out.append((sender, c))
        return out

    def delivery_chunks(self, list msgs, bint multicast, int skip_flags) -> list:
        """The batch ``msgs`` cut so that credits go out when Java's per-message accounting would send them:
        ``[(chunk, {sender: bytes counted in it})]``, each chunk but the last ending with the message that
        takes a sender to its threshold (``min_credits``). Deliver a chunk, then :meth:`consumed_all` its
        counts. A batch that takes nobody there stays whole. Only the multicasts (``multicast``) or unicasts
        without ``skip_flags`` count; the table itself is not changed."""
        cdef list out = []
        cdef dict counted = {}
        cdef dict sim = {}                       # sender -> simulated bytes left, for the senders seen
        cdef Py_ssize_t i, start = 0, n = PyList_GET_SIZE(msgs)
        cdef Message m
        cdef object cur, src
        cdef int64_t left
        cdef bint cut
        for i in range(n):
            m = <Message>PyList_GET_ITEM(msgs, i)
            if not _counts(m, multicast, skip_flags):
                continue
            src = m.src
            counted[src] = counted.get(src, 0) + m._len
            cur = sim.get(src)
            if cur is None:
                cur = self.left.get(src)
                if cur is None:                  # not a member: counted (consumed ignores it), never cut
                    continue
            left = <int64_t>cur - m._len
            cut = left <= self.min_credits
            sim[src] = self.max_credits if cut else (left if left > 0 else 0)
            if cut and i + 1 < n:
                out.append((msgs[start:i + 1], counted))
                counted = {}
                start = i + 1
        out.append((msgs if start == 0 else msgs[start:], counted))
        return out

    def requested(self, object sender, int64_t credits) -> bool:
        """A sender asked for ``credits``: it gets them (capped at max_credits); False for a non-member."""
        cdef object cur = self.left.get(sender)
        cdef int64_t v
        if cur is None:
            return False
        v = <int64_t>cur + credits
        self.left[sender] = v if v < self.max_credits else self.max_credits
        return True

    def set_members(self, mbrs) -> None:
        for m in mbrs:
            self.left.setdefault(m, self.max_credits)
        for m in [m for m in self.left if m not in mbrs]:
            del self.left[m]


cdef class CreditCore(ProtocolCore):
    """The core of UFC (``multicast`` False) and MFC. Down: a message spends its credits, or the protocol's
    ``wait_for_credits(msg, length)`` (its slow path, which blocks) waits for them; then it goes on. Up: a
    lone message without our header is passed up and counted here (:meth:`up_batch`)."""

    def up_batch(self, list msgs):
        """A batch from below. A lone message without our header (a request or its answer) goes up from here,
        as the protocol's general path (``_up_batch``) passes a batch: with this thread marked as delivering
        (JGRP-465: what it sends meanwhile is not blocked) when the message counts for credits, then its
        bytes are consumed and credits sent back when due (``send_credit``). Any other batch, or any batch
        before ``received`` is set: ``_up_batch``."""
        cdef Message m
        cdef int64_t length, owed
        cdef object src
        if PyList_GET_SIZE(msgs) != 1 or self.received is None:
            return self._up_batch(msgs)
        m = <Message>PyList_GET_ITEM(msgs, 0)
        if m._find(self.id) >= 0:
            return self._up_batch(msgs)
        if not _counts(m, self.multicast, NO_FC):
            self.up_prot.up_batch(msgs)          # nothing we grant credits for (e.g. unicasts, for MFC)
            return None
        length = m._len
        src = m.src
        try:
            self._up_delivering(msgs)
        finally:
            owed = (<ReceiverCredits>self.received).consumed(src, length)
            if owed > 0:
                self.send_credit(src, owed)
        return None

    def _up_delivering(self, list chunk):
        """Pass ``chunk`` up, this thread marked as delivering (JGRP-465: what it sends meanwhile is not blocked);
        a nested delivery on this thread leaves the mark to its outer one."""
        cdef object me = None
        if self.ignore_synchronous_response:
            me = PyLong_FromUnsignedLong(PyThread_get_thread_ident())
            if PySet_Contains(self._delivering, me):
                me = None
            else:
                PySet_Add(self._delivering, me)
        try:
            self.up_prot.up_batch(chunk)
        finally:
            if me is not None:
                PySet_Discard(self._delivering, me)

    cdef object _down(self, Message msg):
        cdef Py_ssize_t length = msg._len
        cdef bint ok
        if (msg.dest is None) == self.multicast and not (msg.flags & NO_FC) and length and self.running:
            if self.multicast:
                ok = self.table.spend_all(length)
            else:
                ok = self.table.spend(msg.dest, length) != 0
            if not ok:
                self.wait_for_credits(msg, length)
        return self._pass(msg)
