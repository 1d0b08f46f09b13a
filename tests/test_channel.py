"""The channel API and the asyncio facade, on a jgpy-only cluster (the Java interop is tests/test_stack_interop.py)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from jgpy import AsyncChannel, Channel, ChannelError, Message, Receiver
from jgpy.headers import UnicastHeader
from jgpy.testing.cluster import IN_PROCESS, stock, wait_all
from jgpy.testing.java import udp_props, unique_group

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def props():
    return udp_props(*unique_group())


class Rec(Receiver):
    def __init__(self):
        self.msgs, self.views, self.lock = [], [], threading.Lock()
        self.threads = set()

    def receive(self, msg):
        with self.lock:
            self.msgs.append(msg)
            self.threads.add(threading.current_thread().name)

    def view_accepted(self, view):
        self.views.append(view)


def test_channel_life_cycle_and_payloads(props):
    cluster = f"ch-{uuid.uuid4().hex[:6]}"
    ra, rb = Rec(), Rec()
    with Channel("udp.xml", "A", props, ra) as a, Channel("udp.xml", "B", props, rb) as b:
        with pytest.raises(ChannelError, match="not connected"):
            a.send(None, b"early")
        a.connect(cluster)
        assert a.connect(cluster) is a                                  # idempotent
        with pytest.raises(ChannelError, match="already connected"):
            a.connect("other")
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        assert [str(m) for m in a.view.members] == ["A", "B"] and a.view == b.view
        a.send(None, b"raw")
        a.send(None, "java-string")                                      # travels as setObject(String)
        a.send(b.address, bytearray(b"unicast"))
        msg = Message(None, b"oob", None)
        a.send(msg, oob=True)
        with pytest.raises(ValueError, match="Latin-1"):
            a.send(None, "snowman \u2603")
        assert wait_all(lambda: len(rb.msgs) >= 4, 10)
        got = {m.buffer for m in rb.msgs}
        assert {b"raw", b"\x12java-string", b"unicast", b"oob"} <= got
        jstr = next(m for m in rb.msgs if m.buffer.startswith(b"\x12"))
        assert jstr.get_object() == "java-string"
        uni = next(m for m in rb.msgs if m.buffer == b"unicast")
        assert uni.dest == b.address and isinstance(uni.get_header(12), UnicastHeader)
        # the delivery threads, or a receive thread that handed its socket to its twin first (relay delivery)
        assert all(t.startswith(("jgpy-deliver", "jgpy-oob", "jgpy-ucast", "jgpy-mcast")) for t in rb.threads)
        stats = b.stack.transport.dump_stats()
        for t in rb.threads:
            if t.startswith(("jgpy-ucast", "jgpy-mcast")):        # its loop's threads: NAME, NAME-2
                loop = next(k for k in stats if k.startswith("jgpy-") and (t == k or t.startswith(k + "-")))
                assert stats[loop]["handovers"] > 0, (t, stats)
        b.disconnect()
        assert wait_all(lambda: [str(m) for m in a.view.members] == ["A"], 10)
        b.connect(cluster)                                               # reconnect works
        assert wait_all(lambda: len(a.view) == 2, 10)
    assert not a.is_open and not b.is_open
    with pytest.raises(ChannelError, match="closed"):
        a.connect(cluster)


@pytest.mark.parametrize("max_queued", [0, 5])
def test_asyncio_facade(props, max_queued):
    """Messages arrive in order; with ``max_queued`` the delivery thread waits for room (batches included)."""
    cluster = f"aio-{uuid.uuid4().hex[:6]}"
    n = 300

    async def main():
        async with AsyncChannel("udp.xml", "A", props) as a, \
                AsyncChannel("udp.xml", "B", props, max_queued=max_queued) as b:
            await a.connect(cluster)
            await b.connect(cluster)
            view = await b.next_view(10)
            while len(view) < 2:
                view = await b.next_view(10)
            await asyncio.gather(*(a.send(None, b"m%d" % i) for i in range(n)))
            got = []
            async for msg in b:
                got.append(msg.buffer)
                if max_queued:
                    assert b._messages.qsize() <= max_queued
                if len(got) == n:
                    break
            assert got == [b"m%d" % i for i in range(n)]
            await b.disconnect()
            return True

    assert asyncio.run(asyncio.wait_for(main(), 60))


def test_async_sends_leave_in_the_order_they_were_called():
    """Concurrent sends (gathered) run one at a time in call order, even when one send takes longer than the
    next (on the loop's default executor, a pool, they overtook each other: seen as a FIFO break in CI)."""
    order: list[int] = []

    def send(dest, payload, oob=False, flags=0):
        i = int(payload)
        time.sleep(0.002 if i % 3 == 0 else 0)         # a slow send must hold back the ones after it
        order.append(i)

    async def main():
        ch = AsyncChannel(IN_PROCESS, "A")
        ch.channel.send = send
        try:
            await asyncio.gather(*(ch.send(None, b"%d" % i) for i in range(60)))
        finally:
            await ch.close()

    asyncio.run(asyncio.wait_for(main(), 30))
    assert order == list(range(60))


def test_async_channel_state_transfer(props):
    """AsyncChannel.get_state: the provider's and the requester's state objects run on the delivery
    thread; the coroutine returns True once the state is installed, False when there is none."""
    cluster = f"aio-st-{uuid.uuid4().hex[:6]}"

    class Counter:
        def __init__(self, n):
            self.n = n

        def get_state(self):
            return None if self.n is None else str(self.n).encode()

        def set_state(self, state):
            self.n = int(state)

    class Partial(Counter):
        def get_partial_state(self, state_id):
            return f"{state_id}={self.n}".encode()

        def set_partial_state(self, state_id, state):
            self.n = state.decode()

    async def main():
        pa, pb = Partial(42), Partial(0)
        async with AsyncChannel("udp.xml", "A", props, state=pa) as a, \
                AsyncChannel("udp.xml", "B", props, state=pb) as b, \
                AsyncChannel("udp.xml", "C", props) as c:
            await a.connect(cluster)
            assert await a.get_state(None, 1000) is False            # the coordinator has nobody to ask
            await b.connect(cluster)
            assert await b.get_state(None, 5000) is True and pb.n == 42
            assert await b.get_state(a.address, 5000, "sub") is True and pb.n == "sub=42"
            await c.connect(cluster)
            assert await c.get_state(b.address, 5000) is True        # C keeps no state: Receiver's no-op
            pa.n = None
            assert await b.get_state(a.address, 2000) is False       # the provider has no state
            assert pb.n == "sub=42"
            return True

    assert asyncio.run(asyncio.wait_for(main(), 60))


def test_stack_stats_and_threads_stop(props):
    before = {t.name for t in threading.enumerate()}
    ch = Channel(stock(), "S", props)
    ch.connect(f"st-{uuid.uuid4().hex[:6]}")
    stats = ch.dump_stats()
    assert stats["UDP"]["msgs_sent"] >= 0 and "pbcast.NAKACK" in stats and stats["pbcast.GMS"]["role"] == "CoordGmsImpl"
    ch.close()
    assert wait_all(lambda: {t.name for t in threading.enumerate()} - before == set(), 10), \
        {t.name for t in threading.enumerate()} - before


def test_own_messages_loop_back_once_and_copied_unless_nakack_keeps_them(props, monkeypatch):
    """The transport loops our own multicasts back uncopied when NAKACK keeps them (it only reads their seqno
    and delivers the kept original); unreliable multicasts and unicasts to ourselves are copied, as Java does."""
    looped = []
    r = Rec()
    with Channel("udp.xml", "A", props, r) as a:
        a.connect(f"lb-{uuid.uuid4().hex[:6]}")
        bottom = a.stack.transport.up_prot           # what the loopback thread (and the sockets) pass up
        pass_up = bottom.up_batch

        def spy(msgs):
            looped.extend(msgs)
            return pass_up(msgs)
        monkeypatch.setattr(bottom, "up_batch", spy)
        reliable = Message(None, b"reliable", None)
        unreliable = Message(None, b"unreliable", None, Message.NO_RELIABILITY)
        to_self = Message(a.address, b"to-self", None)
        for m in (reliable, unreliable, to_self):
            a.send(m)
        assert wait_all(lambda: len(r.msgs) >= 3, 10)
        by_payload = {m.buffer: m for m in r.msgs}
        assert sorted(by_payload) == [b"reliable", b"to-self", b"unreliable"] and len(r.msgs) == 3
        assert by_payload[b"reliable"] is reliable                    # NAKACK delivers the original it keeps
        assert by_payload[b"unreliable"] is not unreliable and by_payload[b"to-self"] is not to_self
        assert all(m.transient_flags & Message.KEPT_FOR_XMIT == 0 for m in r.msgs)   # nothing leaks upwards
        assert any(m is reliable for m in looped)
        assert not any(m is unreliable or m is to_self for m in looped)
        assert {b"unreliable", b"to-self"} <= {m.buffer for m in looped if m.has_buffer()}


def test_receive_batch_gets_every_message_once_in_order(props, caplog):
    """A receiver that overrides receive_batch gets regular messages a batch per call, in per-sender order,
    OOB messages as batches of one, and its errors are logged without stopping delivery."""
    cluster = f"batch-{uuid.uuid4().hex[:6]}"

    class BatchRec(Receiver):
        def __init__(self):
            self.batches, self.lock = [], threading.Lock()

        def receive(self, msg):
            raise AssertionError("receive() must not be called when receive_batch is overridden")

        def receive_batch(self, msgs):
            with self.lock:
                self.batches.append(list(msgs))
            if any(m.buffer == b"boom" for m in msgs):
                raise RuntimeError("application error")

    rb = BatchRec()
    with Channel("udp.xml", "A", props) as a, Channel("udp.xml", "B", props, rb) as b:
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        n = 3000
        for i in range(n):
            a.send(None, b"m%d" % i)
            if i == 1000:
                a.send(None, b"boom")
        a.send(b.address, b"unicast")
        a.send(Message(b.address, b"oob"), oob=True)

        def payloads():
            with rb.lock:
                return [m.buffer for batch in rb.batches for m in batch]
        assert wait_all(lambda: len(payloads()) >= n + 3, 20)
        got = payloads()
        assert [p for p in got if p.startswith(b"m")] == [b"m%d" % i for i in range(n)]
        assert got.count(b"boom") == got.count(b"unicast") == got.count(b"oob") == 1
        with rb.lock:
            assert max(len(batch) for batch in rb.batches) > 1
            assert [len(batch) for batch in rb.batches if batch[0].buffer == b"oob"] == [1]
        assert "receive_batch() failed" in caplog.text


def test_send_fast_path_keeps_the_semantics_of_send(props):
    """Channel.send of a bytes payload or a prepared Message runs in C (ChannelSend); the source, flags, OOB,
    errors and a subclass's own send() behave as the general path."""
    cluster = f"send-{uuid.uuid4().hex[:6]}"
    sent = []

    class Recording(Channel):
        def send(self, dest_or_msg, payload=None, **kw):
            sent.append(payload)
            super().send(dest_or_msg, payload, **kw)

    rb = Rec()
    with Recording("udp.xml", "A", props) as a, Channel("udp.xml", "B", props, rb) as b:
        assert "send" in vars(b) and "send" not in vars(a)        # the C path, unless send() is overridden
        with pytest.raises(ChannelError, match="not connected"):
            b.send(None, b"early")
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        b.send(a.address, b"plain")
        b.send(None, b"flagged", oob=True, flags=Message.NO_FC | Message.DONT_BUNDLE)
        with pytest.raises(OverflowError):
            b.send(None, b"bad flags", flags=256)
        prepared = Message(None, b"prepared", a.address, Message.NO_FC)     # a source that is not ours
        b.send(prepared, oob=True, flags=Message.DONT_BUNDLE)
        assert prepared.src == b.address
        with pytest.raises(TypeError, match="no payload"):
            b.send(Message(a.address, b"x"), b"a second payload")
        a.send(b.address, b"from a subclass")
        assert sent == [b"from a subclass"]
        assert wait_all(lambda: any(m.buffer == b"prepared" for m in rb.msgs), 10)
        got = [m for m in rb.msgs if m.buffer == b"prepared"]
        assert len(got) == 1 and got[0].src == b.address
        assert got[0].flags == Message.NO_FC | Message.OOB | Message.DONT_BUNDLE
        assert wait_all(lambda: any(m.buffer == b"from a subclass" for m in rb.msgs), 10)
        mine = [m for m in rb.msgs if m.buffer == b"flagged"]                # our own multicast, looped back
        assert len(mine) == 1 and mine[0].flags == Message.OOB | Message.NO_FC | Message.DONT_BUNDLE
        assert mine[0].src == b.address
        b.disconnect()
        with pytest.raises(ChannelError, match="not connected"):
            b.send(None, b"late")


def test_channel_is_not_a_protocol(props):
    """The channel owns its stack through a private top protocol: users see the channel's API only, and the
    stack's top still passes views and messages to the receiver."""
    from jgpy.stack.protocol import Protocol
    r = Rec()
    with Channel("udp.xml", "A", props, r) as a:
        assert not isinstance(a, Protocol)
        for name in ("up", "down", "up_batch", "down_msg", "start", "stop", "init", "destroy", "up_prot",
                     "down_prot", "up_needs"):
            assert not hasattr(a, name), name
        top = a.stack.protocols[-1].up_prot
        assert isinstance(top, Protocol) and top is not a and top.down_prot is a.stack.protocols[-1]
        a.connect(f"np-{uuid.uuid4().hex[:6]}")
        assert a.address is not None and top.address == a.address
        a.send(None, b"self")
        assert wait_all(lambda: len(r.msgs) == 1 and len(r.views) == 1, 10)
        assert r.views[0] is a.view and r.msgs[0].src == a.address
        with pytest.raises(AttributeError):
            a.address = None                                            # assigned by connect() only


def test_a_lone_oob_unicast_is_delivered_by_the_receive_thread_that_read_it(props):
    """Relay delivery for OOB messages too (an RPC's response is one): a lone OOB unicast is delivered by the
    receive thread that read it, after it handed its socket to its twin, instead of waking the OOB thread (a
    thread switch on the caller's path of every synchronous call). Most of 20 paced unicasts: a hand-over is
    refused when a datagram is already waiting (an ACK, a heartbeat)."""
    cluster = f"ch-{uuid.uuid4().hex[:6]}"
    ra, rb = Rec(), Rec()
    with Channel("udp.xml", "A", props, ra) as a, Channel("udp.xml", "B", props, rb) as b:
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        where: list[str] = []

        class Where(Rec):
            def receive(self, msg):
                where.append(threading.current_thread().name)
        b.receiver = Where()
        for i in range(20):
            a.send(Message(b.address, b"oob-%d" % i), oob=True)
            time.sleep(0.02)
        assert wait_all(lambda: len(where) == 20, 10), where
        by_receive_thread = sum(t.startswith("jgpy-ucast") for t in where)
        assert by_receive_thread >= 10, where


def test_oob_interceptors_see_oob_messages_on_the_receive_thread_and_a_failing_one_drops_only_its_message(
        props, caplog):
    """``add_oob_interceptor``: an interceptor sees every OOB message (not the regular ones) on the receive
    thread that read it; True takes the message from delivery; one that raises drops that message alone (logged)
    and the receive thread goes on; removed, it sees nothing more."""
    cluster = f"ch-{uuid.uuid4().hex[:6]}"
    ra, rb = Rec(), Rec()
    seen: list = []

    def intercept(msg):
        seen.append((bytes(msg.buffer), threading.current_thread().name))
        if msg.buffer == b"boom":
            raise RuntimeError("interceptor bug")
        return msg.buffer == b"mine"
    with Channel("udp.xml", "A", props, ra) as a, Channel("udp.xml", "B", props, rb) as b:
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view) == 2 and len(b.view) == 2, 10)
        b.add_oob_interceptor(intercept)
        for p in (b"mine", b"boom", b"plain"):
            a.send(Message(b.address, p), oob=True)
        a.send(Message(b.address, b"regular"))
        assert wait_all(lambda: sorted(bytes(m.buffer) for m in rb.msgs) == [b"plain", b"regular"], 10), rb.msgs
        assert sorted(p for p, _ in seen) == [b"boom", b"mine", b"plain"]     # (two receive threads)
        assert all(t.startswith("jgpy-ucast") for _, t in seen), seen
        assert "an OOB interceptor failed" in caplog.text
        b.remove_oob_interceptor(intercept)
        a.send(Message(b.address, b"mine"), oob=True)
        assert wait_all(lambda: len(rb.msgs) == 3, 10) and len(seen) == 3
