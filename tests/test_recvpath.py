"""NAKACK's core, receive side (jgpy/_core/nakack.pyx): classify a batch, add to the windows, take the
deliverable runs out, OOB once."""

from __future__ import annotations

from jgpy import UUID, Message
from jgpy._core.nakack import NakackCore
from jgpy._core.tables import NakReceiverWindow
from jgpy.headers import NakAckHeader

PID = 15


def data(src, seqno, flags=0, htype=NakAckHeader.MSG):
    m = Message(None, b"x%d" % seqno, src, flags)
    m.put_header(PID, NakAckHeader(htype, seqno))
    return m


def core_with(windows: dict, me=None, max_batch=0, is_server=True) -> NakackCore:
    """A bare core under protocol id PID (a server, discarding delivered messages) with ``windows``."""
    core = NakackCore()
    core.id, core.own_addr, core.is_server = PID, me, is_server
    core.discard_delivered_msgs, core.max_msg_batch_size = True, max_batch
    core.windows.update(windows)
    return core


def run(core, msgs):
    d, control, unreliable = core.classify(msgs)
    return core.process(d, 0.0) + (control, unreliable)


def test_in_order_gaps_and_duplicates():
    a = UUID.random()
    core = core_with({a: NakReceiverWindow(0, 0)})
    deliver, marks, oob, no_window, bad, control, unreliable = run(core, [data(a, 1), data(a, 3), data(a, 2), data(a, 2)])
    assert [m.buffer for m in deliver] == [b"x1", b"x2", b"x3"]
    assert marks[0][0] == a and marks[0][2] == 3
    assert core.dropped_duplicate == 1 and core.msgs_received == 4 and core.msgs_delivered == 3
    assert not (oob or no_window or bad or control or unreliable)


def test_everything_deliverable_goes_even_beyond_max_batch():
    a = UUID.random()
    core = core_with({a: NakReceiverWindow(0, 0)}, max_batch=100)
    run(core, [data(a, s) for s in range(2, 251)])                      # 1 is missing: nothing deliverable
    deliver, *_ = run(core, [data(a, 1)])                               # the retransmission fills the gap
    assert [m.buffer for m in deliver] == [b"x%d" % s for s in range(1, 251)]


def test_oob_delivered_once_and_control_and_unreliable_pass():
    a, me = UUID.random(), UUID.random()
    core = core_with({a: NakReceiverWindow(0, 0), me: NakReceiverWindow(0, 0)})
    req = data(a, 0, htype=NakAckHeader.XMIT_REQ)
    unrel = Message(None, b"u", a, Message.NO_RELIABILITY)
    deliver, marks, oob, _, _, control, unreliable = run(core, [data(a, 2, Message.OOB), req, unrel, data(a, 1)])
    assert [m.buffer for m in oob] == [b"x2"] and [m.buffer for m in deliver] == [b"x1"]
    assert control == [(req, req.get_header(PID))] and unreliable == [unrel]
    # the retransmitted copy of an OOB message already delivered is not delivered again
    deliver, _, oob, *_ = run(core, [data(a, 2, Message.OOB)])
    assert oob == [] and deliver == []


def test_xmit_rsp_becomes_msg_and_no_window_and_not_server():
    a, stranger = UUID.random(), UUID.random()
    core = core_with({a: NakReceiverWindow(0, 0)})
    rsp = data(a, 1, htype=NakAckHeader.XMIT_RSP)
    rsp.dest = UUID.random()
    deliver, _, _, no_window, *_ = run(core, [rsp, data(stranger, 1), data(stranger, 2)])
    assert deliver == [rsp] and rsp.dest is None and rsp.get_header(PID).type == NakAckHeader.MSG
    assert no_window == [(stranger, 2)] and core.xmit_rsps_received == 1 and core.dropped_no_window == 2
    core.is_server = False
    d, control, unreliable = core.classify([data(a, 2)])
    assert not d and core.dropped_not_server == 1


def test_own_messages_are_delivered_from_the_window():
    me = UUID.random()
    win = NakReceiverWindow(0, 0)
    stored = [data(me, s) for s in (1, 2)]
    for i, m in enumerate(stored, 1):
        win.add(i, m, 0.0)
    core = core_with({me: win}, me=me)
    copies = [m.copy() for m in stored]
    deliver, *_ = run(core, copies)
    assert [id(m) for m in deliver] == [id(m) for m in stored]          # the stored ones, not the copies


def test_bad_seqno_is_reported_not_raised():
    a = UUID.random()
    core = core_with({a: NakReceiverWindow(0, 0)})
    deliver, _, _, _, bad, *_ = run(core, [data(a, 1), data(a, 1 << 62)])
    assert [m.buffer for m in deliver] == [b"x1"] and len(bad) == 1 and core.dropped_bad_seqno == 1
