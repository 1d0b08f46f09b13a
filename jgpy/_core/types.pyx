# cython: language_level=3
"""Membership and bookkeeping data: ViewId, View, MergeView, Digest, JoinRsp, MergeId, PingData, Range.

These mirror the 2.12 classes field by field. Equality here is structural (all fields), which is
what tests and dictionaries want; where Java's own ``equals`` differs (``ViewId.equals`` compares the
id only, ``View.equals`` the view id and members) a ``java_equals`` method gives Java's answer.
"""

cimport cython
from libc.stdint cimport int64_t
from jgpy._core.address cimport Address


cdef tuple _addr_tuple(object seq):
    if seq is None:
        return None
    t = tuple(seq)
    for a in t:
        if a is not None and not isinstance(a, Address):
            raise TypeError(f"expected an Address, got {type(a).__name__}")
    return t


@cython.no_gc          # an id and an address: not tracked by the cycle collector (SEQUENCER makes one a message)
cdef class ViewId:
    """``[coordinator|id]``: the id of a view; views are ordered by ``id`` only (as in Java)."""

    def __init__(self, coord_addr, int64_t id):
        self.coord_addr = coord_addr
        self.id = id

    @property
    def coordinator(self):
        return self.coord_addr

    def compare_to(self, ViewId other):
        """Java ``ViewId.compareTo``: compares ``id`` only."""
        if other is None:
            return 1
        return (self.id > other.id) - (self.id < other.id)

    def java_equals(self, other):
        return isinstance(other, ViewId) and self.id == (<ViewId>other).id

    def __eq__(self, other):
        if not isinstance(other, ViewId):
            return NotImplemented
        return self.id == (<ViewId>other).id and self.coord_addr == (<ViewId>other).coord_addr

    def __hash__(self):
        return hash((self.coord_addr, self.id))

    def __str__(self):
        return f"[{self.coord_addr}|{self.id}]"

    def __repr__(self):
        return f"ViewId({self.coord_addr!r}, {self.id})"

    def __reduce__(self):
        return (ViewId, (self.coord_addr, self.id))


cdef class View:
    """A group view: view id plus the ordered member list (coordinator first)."""

    def __init__(self, ViewId vid, members, payload=None):
        self.vid = vid
        self.members = _addr_tuple(members)
        self.payload = bytes(payload) if payload is not None else None

    @property
    def view_id(self):
        return self.vid

    @property
    def creator(self):
        return self.vid.coord_addr if self.vid is not None else None

    @property
    def coordinator(self):
        """The first member (the coordinator), or None for an empty view."""
        return self.members[0] if self.members else None

    def __len__(self):
        return len(self.members) if self.members is not None else 0

    def __iter__(self):
        return iter(self.members or ())

    def __contains__(self, addr):
        return self.members is not None and addr in self.members

    def _key(self):
        return (type(self), self.vid, self.members, self.payload)

    def __eq__(self, other):
        if not isinstance(other, View):
            return NotImplemented
        return self._key() == (<View>other)._key()

    def __hash__(self):
        return hash((self.vid, self.members))

    def java_equals(self, other):
        if not isinstance(other, View):
            return False
        cdef View o = <View>other
        if self.vid is None:
            return o.vid is None
        if self.vid.compare_to(o.vid) != 0:
            return False
        return self.members is not None and o.members is not None and self.members == o.members

    def __str__(self):
        mbrs = ", ".join(str(m) for m in (self.members or ()))
        return f"{self.vid} ({len(self)}) [{mbrs}]"

    def __repr__(self):
        return f"View({self.vid!r}, {list(self.members) if self.members is not None else None!r})"

    def __reduce__(self):
        return (View, (self.vid, self.members, self.payload))


cdef class MergeView(View):
    """The view installed after a merge; ``subgroups`` are the views that were merged."""

    def __init__(self, ViewId vid, members, subgroups, payload=None):
        View.__init__(self, vid, members, payload)
        if subgroups is None:
            self.subgroups = None
        else:
            self.subgroups = tuple(subgroups)
            for v in self.subgroups:
                if not isinstance(v, View):
                    raise TypeError("subgroups must be views")

    def _key(self):
        return (type(self), self.vid, self.members, self.payload, self.subgroups)

    def __str__(self):
        subs = ", ".join(str(v) for v in (self.subgroups or ()))
        return f"MergeView::{View.__str__(self)}, subgroups=[{subs}]"

    def __repr__(self):
        subs = list(self.subgroups) if self.subgroups is not None else None
        return f"MergeView({self.vid!r}, {list(self.members) if self.members is not None else None!r}, {subs!r})"

    def __reduce__(self):
        return (MergeView, (self.vid, self.members, self.subgroups, self.payload))


cdef class Digest:
    """Per-sender seqno bookkeeping: ``{address: (low, highest_delivered, highest_received)}``.

    Keeps insertion order (which is the wire order of a decoded digest). ``highest_received`` of -1
    means "unknown" (a joiner's entry in a join digest). ``low <= highest_delivered`` always holds,
    as Java's ``Digest.Entry`` insists.
    """

    def __init__(self, entries=None):
        self._entries = {}
        if entries is None:
            return
        if isinstance(entries, Digest):
            self._entries = dict((<Digest>entries)._entries)
            return
        items = entries.items() if isinstance(entries, dict) else entries
        for item in items:
            if isinstance(entries, dict):
                addr, seqnos = item
                self.set(addr, *seqnos)
            else:
                self.set(*item)

    def set(self, addr, int64_t low, int64_t highest_delivered, int64_t highest_received=0):
        """Add or replace the entry of ``addr``."""
        if addr is None or not isinstance(addr, Address):
            raise TypeError(f"a digest entry needs an Address, got {addr!r}")
        if low > highest_delivered:
            raise ValueError(f"low ({low}) is greater than highest_delivered ({highest_delivered}) for {addr}")
        self._entries[addr] = (low, highest_delivered, highest_received)

    def get(self, addr, default=None):
        """``(low, highest_delivered, highest_received)`` of ``addr``, or ``default``."""
        return self._entries.get(addr, default)

    def remove(self, addr):
        self._entries.pop(addr, None)

    def copy(self):
        return Digest(self)

    def items(self):
        return self._entries.items()

    def entries(self):
        """List of ``(address, low, highest_delivered, highest_received)`` in order."""
        return [(a, v[0], v[1], v[2]) for a, v in self._entries.items()]

    def members(self):
        return list(self._entries)

    def highest_delivered(self, addr):
        e = self._entries.get(addr)
        return e[1] if e is not None else None

    def highest_received(self, addr):
        e = self._entries.get(addr)
        return e[2] if e is not None else None

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def __contains__(self, addr):
        return addr in self._entries

    def __getitem__(self, addr):
        return self._entries[addr]

    def __eq__(self, other):
        """Equal when the same senders have the same seqnos (order does not matter)."""
        if not isinstance(other, Digest):
            return NotImplemented
        return self._entries == (<Digest>other)._entries

    def same_order(self, Digest other):
        """True when also the entry order is the same (for byte-exact comparisons)."""
        return list(self._entries.items()) == list(other._entries.items())

    __hash__ = None

    def __str__(self):
        return "{" + ", ".join(f"{a}: [{v[0]} : {v[1]} ({v[2]})]" for a, v in self._entries.items()) + "}"

    def __repr__(self):
        return f"Digest({self.entries()!r})"

    def __reduce__(self):
        return (Digest, (self.entries(),))


cdef class JoinRsp:
    """The coordinator's answer to a JOIN_REQ: the new view and the join digest, or a failure reason."""

    def __init__(self, View view=None, Digest digest=None, fail_reason=None):
        self.view = view
        self.digest = digest
        self.fail_reason = fail_reason

    def __eq__(self, other):
        if not isinstance(other, JoinRsp):
            return NotImplemented
        o = <JoinRsp>other
        return (self.view, self.digest, self.fail_reason) == (o.view, o.digest, o.fail_reason)

    __hash__ = None

    def __repr__(self):
        return f"JoinRsp(view={self.view!r}, digest={self.digest!r}, fail_reason={self.fail_reason!r})"

    def __reduce__(self):
        return (JoinRsp, (self.view, self.digest, self.fail_reason))


cdef class MergeId:
    """Identifies one merge: the initiating member plus a per-process counter."""

    def __init__(self, initiator, int id):
        self.initiator = initiator
        self.id = id

    def __eq__(self, other):
        if not isinstance(other, MergeId):
            return NotImplemented
        return self.id == (<MergeId>other).id and self.initiator == (<MergeId>other).initiator

    def __hash__(self):
        return hash((self.initiator, self.id))

    def __repr__(self):
        return f"MergeId({self.initiator!r}, {self.id})"

    def __str__(self):
        return f"{self.initiator}::{self.id}"

    def __reduce__(self):
        return (MergeId, (self.initiator, self.id))


cdef class PingData:
    """What a member says about itself in discovery (``org.jgroups.protocols.PingData``)."""

    def __init__(self, own_addr, View view=None, ViewId view_id=None, bint is_server=False,
                 logical_name=None, physical_addrs=None):
        self.own_addr = own_addr
        self.view = view
        self.view_id = view_id
        self.is_server = is_server
        self.logical_name = logical_name
        self.physical_addrs = _addr_tuple(physical_addrs)

    @property
    def coord_addr(self):
        """The coordinator the sender names: from its view id, else from its view."""
        if self.view_id is not None:
            return self.view_id.coord_addr
        if self.view is not None and self.view.vid is not None:
            return self.view.vid.coord_addr
        return None

    @property
    def has_coord(self):
        """True when the sender is a server and names a coordinator (``PingData.hasCoord``)."""
        return self.is_server and self.own_addr is not None and self.coord_addr is not None

    @property
    def is_coord(self):
        """True when the sender says it is the coordinator (``PingData.isCoord``)."""
        c = self.coord_addr
        return self.is_server and self.own_addr is not None and c is not None and self.own_addr == c

    def _key(self):
        return (self.own_addr, self.view, self.view_id, self.is_server, self.logical_name, self.physical_addrs)

    def __eq__(self, other):
        if not isinstance(other, PingData):
            return NotImplemented
        return self._key() == (<PingData>other)._key()

    __hash__ = None

    def __repr__(self):
        return ("PingData(own_addr={!r}, view={!r}, view_id={!r}, is_server={}, logical_name={!r}, "
                "physical_addrs={!r})").format(*self._key())

    def __reduce__(self):
        return (PingData, self._key())


cdef class Range:
    """An inclusive seqno range (``org.jgroups.util.Range``), e.g. in a NAKACK XMIT_REQ."""

    def __init__(self, int64_t low, int64_t high):
        self.low = low
        self.high = high

    def __eq__(self, other):
        if not isinstance(other, Range):
            return NotImplemented
        return self.low == (<Range>other).low and self.high == (<Range>other).high

    def __hash__(self):
        return hash((self.low, self.high))

    def __repr__(self):
        return f"Range({self.low}, {self.high})"

    def __reduce__(self):
        return (Range, (self.low, self.high))
