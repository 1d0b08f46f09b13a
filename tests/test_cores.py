"""A protocol and its C core are one object: properties live in the core's fields, the down path links core to
core in C (honouring a Python override and a new ``down_prot``), and what a reliable core queued for delivery
runs even when the protocol's work after its lock fails."""

from __future__ import annotations

import pytest

from jgpy import UUID, Message
from jgpy._core.frag2 import FragCore
from jgpy._core.headers import UnicastHeader
from jgpy.protocols.frag2 import FRAG2
from jgpy.protocols.pbcast.nakack import NAKACK
from jgpy.protocols.udp import UDP
from jgpy.protocols.unicast import UNICAST
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.properties import CoreProperty, apply_properties, to_int
from jgpy.stack.protocol import Protocol
from tests.fakestack import FakeStack, wait_until


def test_core_properties_are_the_core_fields_with_no_second_copy():
    f = FRAG2()
    assert f.frag_size == 1500 and FragCore.frag_size.__get__(f) == 1500        # the default, in the C field
    apply_properties(f, {"frag_size": "100"})
    assert FragCore.frag_size.__get__(f) == 100 and "frag_size" not in vars(f)
    n, u, t = NAKACK(), UNICAST(), UDP()
    apply_properties(n, {"max_msg_batch_size": "7", "discard_delivered_msgs": "true"})
    apply_properties(u, {"ack_threshold": "3", "nonmember_window": "5"})
    apply_properties(t, {"loopback": "false", "unicast_stream_gap_us": "-1"})
    assert (n.max_msg_batch_size, n.discard_delivered_msgs, u.ack_threshold, u.nonmember_window) == (7, True, 3, 5)
    assert (t.loopback, t.unicast_stream_gap_us, t.multicast_stream_gap_us) == (False, -1, 20)
    for p, names in ((n, ("max_msg_batch_size", "discard_delivered_msgs")), (u, ("ack_threshold",)),
                     (t, ("loopback", "unicast_stream_gap_us"))):
        assert not set(names) & set(vars(p)), f"{type(p).__name__} keeps a Python copy of {names}"


def test_a_core_property_needs_a_core_field():
    with pytest.raises((TypeError, RuntimeError)) as raised:       # Python 3.11 wraps __set_name__'s error
        class NoField(FRAG2):
            not_a_field = CoreProperty(to_int, 1, "there is no C field of this name")
    error = raised.value.__cause__ or raised.value
    assert isinstance(error, TypeError) and "core field" in str(error)


class Recorder(Protocol):
    """The bottom: records what comes down."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Message] = []

    def down_msg(self, msg):
        self.sent.append(msg)


class CountingFrag2(FRAG2):
    """A core whose down_msg is overridden in Python: the core above must call the override, not the C path."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def down_msg(self, msg):
        self.calls += 1
        return super().down_msg(msg)


def test_cores_link_in_c_honour_python_overrides_and_follow_a_new_down_prot():
    upper, middle, bottom, other = FRAG2(), CountingFrag2(), Recorder(), Recorder()
    upper.down_prot, middle.down_prot = middle, bottom
    for i in range(3):
        upper.down_msg(Message(None, b"m%d" % i))
    assert middle.calls == 3 and [m.buffer for m in bottom.sent] == [b"m0", b"m1", b"m2"]
    assert upper.num_sent_msgs == middle.num_sent_msgs == 3
    upper.down_prot = other                       # rewired: the cached next step goes with the old neighbour
    upper.down_msg(Message(None, b"m3"))
    assert [m.buffer for m in other.sent] == [b"m3"] and middle.calls == 3


def test_what_a_receive_thread_queued_runs_even_when_the_work_after_the_lock_fails():
    """A thread that may deliver (pools disabled: caller_runs) queues the run under UNICAST's lock and must run it
    after: when sending the ACK fails, the exception still reaches the caller, and the message is delivered, not
    left in a queue that no thread is woken for."""
    s = FakeStack(UNICAST(), connect=True)
    direct = SerialExecutor("test-direct", caller_runs=True)
    try:
        s.prot.ack_delay_ms = 0                   # ACK at once, after the lock
        s.prot.delivery = direct

        def failing_ack(dest, seqno):
            raise RuntimeError("the ACK could not be sent")

        s.prot._send_ack = failing_ack
        p = UUID.random()
        m = Message(s.local_addr, b"payload", p)
        m.put_header(s.prot.id, UnicastHeader(UnicastHeader.DATA, 1, 7, True))
        with pytest.raises(RuntimeError, match="ACK"):
            s.tp.inject([m])
        wait_until(lambda: s.top.messages, timeout=2.0, msg="the queued message delivered")
        assert [x.buffer for x in s.top.messages] == [b"payload"] and direct.pending == 0
    finally:
        direct.stop()
        s.close()
