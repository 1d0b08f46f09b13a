# cython: language_level=3, boundscheck=False, wraparound=False
"""The chain of send cores: the per-message down path in C.

Each protocol that touches every sent message (FRAG2, UFC/MFC, UNICAST, NAKACK, the transport) is a subclass of
its C core (``jgpy._core.frag2``, ``credits``, ``unicast``, ``nakack``, ``transport``), and the core's
``down_msg`` is the protocol's down path (there is no second, Python copy). A core does the per-message
bookkeeping and calls its protocol's Python methods only for what needs a decision or a wait.

A core passes a message on to the layer below: a C call when that layer is a core too (and does not override
``down_msg`` in Python), else its ``down_msg``. The step is looked up on the first message and again after
the layer below changes. Python protocols and cores mix freely.

:class:`ProtocolCore` is the base of a protocol's core: the protocol's neighbours (``down_prot``, ``up_prot``)
and id are the core's own fields, which the stack sets as it sets any protocol's. :class:`OwnedSendCore` is
the base of a core that an object which is not itself a core owns (the channel's :class:`ChannelSend`,
JOURNAL's :class:`RecordSend`): it continues below its owner.
"""

from cpython.bytes cimport PyBytes_GET_SIZE
from libc.stdint cimport uint8_t

from jgpy._core.message cimport Message, new_message
from jgpy._core.journalbuf cimport RowBuffer

cdef int OOB = 1


cdef class SendCore:
    """Base of the send cores: ``_down`` (C) is the core's down path, :meth:`down_msg` its Python entry."""

    def down_msg(self, msg):
        """Send ``msg`` down through this core."""
        return self._down(<Message?>msg)

    cdef object _down(self, Message msg):
        return self._pass(msg)

    def relink(self) -> None:
        """Forget the cached next step (after the layer below or its ``down_msg`` changed)."""
        self._next_fn = None
        self._next_core = None

    cdef object _below(self):
        raise NotImplementedError

    cdef object _link(self):
        fn = self._below().down_msg
        target = getattr(fn, "__self__", None)
        if isinstance(target, SendCore) and getattr(fn, "__func__", None) is _DOWN_MSG:
            self._next_core = <SendCore>target     # a core whose down_msg is not overridden: a C call
        else:
            self._next_fn = fn
        return fn


_DOWN_MSG = SendCore.__dict__["down_msg"]


cdef class ProtocolCore(SendCore):
    """The C base of a protocol with a core: its neighbours and id are fields (set by the stack; a new
    ``down_prot`` relinks the down path)."""

    @property
    def down_prot(self):
        return self._down_prot

    @down_prot.setter
    def down_prot(self, value):
        self._down_prot = value
        self._next_fn = None
        self._next_core = None

    cdef object _below(self):
        return self._down_prot


cdef class OwnedSendCore(SendCore):
    """A core owned by an object that is not a core itself: it continues with its owner's ``down_prot``."""

    cdef object _below(self):
        return self.owner.down_prot


cdef class ChannelSend(OwnedSendCore):
    """``Channel.send`` in C for the common cases on a connected channel: a ``bytes`` payload to an address or to
    the group (None), and a prepared Message (its source set to ours, as the Python path does). Everything
    else (a str, another buffer type, a Message with a payload argument, flags that are not a byte, a channel
    that is not connected) goes to ``general``, the channel's Python implementation, which also raises the
    errors."""

    cdef public bint connected
    cdef public object general            # (dest_or_msg, payload, oob, flags)

    def __init__(self, owner, general):
        self.owner = owner
        self.general = general

    def send(self, dest_or_msg, payload=None, *, bint oob=False, int flags=0):
        cdef Message msg
        if not self.connected or flags & ~0xFF:
            return self.general(dest_or_msg, payload, oob, flags)
        if type(dest_or_msg) is Message:
            if payload is not None:
                return self.general(dest_or_msg, payload, oob, flags)
            msg = <Message>dest_or_msg
            msg.src = self.owner.address
            msg.flags |= <uint8_t>(flags | (OOB if oob else 0))
            self._pass(msg)
            return
        if type(payload) is not bytes:
            return self.general(dest_or_msg, payload, oob, flags)
        msg = new_message()
        msg.dest = dest_or_msg
        msg.src = self.owner.address
        msg.flags = <uint8_t>(flags | (OOB if oob else 0))
        msg.set_payload(payload, 0, PyBytes_GET_SIZE(payload))
        self._pass(msg)


cdef class RecordSend(OwnedSendCore):
    """A down path that records every message as a ``kind`` row of ``rows`` and passes it on (the JOURNAL
    protocol)."""

    cdef RowBuffer rows
    cdef int kind

    def __init__(self, owner, RowBuffer rows not None, int kind):
        self.owner = owner
        self.rows = rows
        self.kind = kind

    cdef object _down(self, Message msg):
        self.rows.record_message(self.kind, msg)
        return self._pass(msg)
