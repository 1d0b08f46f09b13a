"""DatagramLoop.read_while: a waiting thread (an RPC caller) reads the socket itself as the relay's guest.

What it must do: handle what comes while it waits on its own thread, give the socket back to the loop's threads
afterwards (nothing lost, nothing read twice), end promptly when what it waits for is settled elsewhere
(wake_reader), when its time is up (even under a flood from a stranger) or when the loop stops, survive bad
datagrams, and never let two threads be the guest at once."""

from __future__ import annotations

import threading
import time

import pytest

from tests.test_udp_core import Collector, Net, net  # noqa: F401 - net: the sockets and loops fixture

pytestmark = pytest.mark.timeout(120)


class ByThread(Collector):
    """Records which thread handled each datagram; ``raise_on`` datagrams make the handler fail."""

    def __init__(self, raise_on: bytes | None = None):
        super().__init__()
        self.threads: dict[bytes, int] = {}
        self.raise_on = raise_on

    def __call__(self, datagrams, sources):
        for d in datagrams:
            self.threads[d] = threading.get_ident()
        super().__call__(datagrams, sources)
        if self.raise_on is not None and self.raise_on in datagrams:
            raise RuntimeError("a handler that fails on a bad datagram")


def guest_loop(net: Net, handler, **kw):
    rx, tx = net.udp(), net.udp()
    loop = net.loop(rx, handler, threads=2, guest=True, name="guest-test", relay_gap_us=0, **kw)
    return loop, rx, tx


def send_later(tx, dest, datagrams, delay: float, loop=None) -> threading.Thread:
    """Send ``datagrams`` after ``delay`` seconds; with ``loop``, not before a thread waits in its read_while
    (a loaded machine may start the waiter late)."""
    def run():
        deadline = time.monotonic() + 10
        while loop is not None and loop.stats["guest_waits"] == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(delay)
        for d in datagrams:
            tx.sendto(d, dest)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_the_waiting_thread_handles_what_comes_and_the_loop_reads_again_afterwards(net):
    h = ByThread()
    loop, rx, tx = guest_loop(net, h)
    dest = rx.getsockname()
    sender = send_later(tx, dest, [b"reply"], 0.01, loop)
    t0 = time.monotonic()
    assert loop.read_while(lambda: b"reply" not in h.threads, 10.0) is True
    assert time.monotonic() - t0 < 5
    sender.join(5)
    assert h.threads[b"reply"] == threading.get_ident()          # handled on the waiting thread itself
    assert loop.stats["guest_waits"] >= 1
    for i in range(20):                                           # the socket is the loop's again
        tx.sendto(b"after%d" % i, dest)
        time.sleep(0.0005)
    assert h.wait_count(21)
    assert all(h.threads[b"after%d" % i] != threading.get_ident() for i in range(20))
    assert sorted(h.datagrams) == sorted([b"reply"] + [b"after%d" % i for i in range(20)])   # none lost or twice


def test_something_already_there_ends_the_wait_at_once_and_nothing_is_read(net):
    h = ByThread()
    loop, rx, _ = guest_loop(net, h, poll_ms=10000)
    t0 = time.monotonic()
    assert loop.read_while(lambda: False, 10.0) is True
    assert time.monotonic() - t0 < 1 and h.datagrams == []


def test_no_guest_one_at_a_time_and_not_before_start(net):
    rx = net.udp()
    plain = net.loop(rx, Collector(), threads=2)
    assert plain.read_while(lambda: True, 1.0) is False           # no guest: wait as usual
    with pytest.raises(ValueError, match="guest needs relay mode"):
        net.loop(net.udp(), Collector(), threads=1, guest=True, start=False)
    idle = net.loop(net.udp(), Collector(), threads=2, guest=True, start=False)
    assert idle.read_while(lambda: True, 1.0) is False            # not running
    h = ByThread()
    loop, rx2, tx = guest_loop(net, h, poll_ms=10000)
    inside = threading.Event()
    release = threading.Event()

    def first():
        loop.read_while(lambda: inside.set() or not release.is_set(), 20.0)
    t = threading.Thread(target=first, daemon=True)
    t.start()
    assert inside.wait(5)
    t0 = time.monotonic()
    assert loop.read_while(lambda: True, 5.0) is False           # the guest is taken: at once
    assert time.monotonic() - t0 < 1
    release.set()
    loop.wake_reader()
    t.join(5)
    assert not t.is_alive()
    assert loop.read_while(lambda: False, 1.0) is True            # free again


def test_the_time_limit_holds_with_a_long_poll_and_under_a_flood(net):
    h = ByThread()
    loop, rx, tx = guest_loop(net, h, poll_ms=10000)
    t0 = time.monotonic()
    assert loop.read_while(lambda: True, 0.2) is True
    assert 0.15 <= time.monotonic() - t0 < 2
    stop = threading.Event()

    def flood():
        dest = rx.getsockname()
        n = 0
        while not stop.is_set() and n < 2_000_000:
            tx.sendto(b"junk", dest)
            n += 1
    f = threading.Thread(target=flood, daemon=True)
    f.start()
    try:
        time.sleep(0.05)
        t0 = time.monotonic()
        assert loop.read_while(lambda: True, 0.3) is True
        assert time.monotonic() - t0 < 3
    finally:
        stop.set()
        f.join(10)


def test_wake_reader_ends_the_wait_when_another_thread_settles_it(net):
    """poll_ms=10 s: only wake_reader can end the wait soon. A wake-up while it is still pending does not
    make the guest spin: it waits again."""
    h = ByThread()
    loop, rx, tx = guest_loop(net, h, poll_ms=10000)
    settled = threading.Event()
    loop.wake_reader()                                             # nobody waits: nothing happens

    def settle():
        time.sleep(0.05)
        loop.wake_reader()                                         # spurious: still pending
        time.sleep(0.1)
        settled.set()
        loop.wake_reader()
    t = threading.Thread(target=settle, daemon=True)
    t.start()
    t0 = time.monotonic()
    assert loop.read_while(lambda: not settled.is_set(), 30.0) is True
    assert time.monotonic() - t0 < 5
    assert loop.stats["guest_waits"] <= 4
    t.join(5)


def test_the_guest_survives_a_failing_handler_and_ends_when_the_loop_stops(net):
    h = ByThread(raise_on=b"bad")
    loop, rx, tx = guest_loop(net, h, poll_ms=10000)
    sender = send_later(tx, rx.getsockname(), [b"bad", b"reply"], 0.05)
    assert loop.read_while(lambda: b"reply" not in h.threads, 10.0) is True
    sender.join(5)
    assert loop.stats["handler_errors"] == 1
    done = threading.Event()
    t = threading.Thread(target=lambda: loop.read_while(lambda: True, -1) and done.set(), daemon=True)
    t.start()
    time.sleep(0.1)
    assert not done.is_set()
    assert loop.stop() is True
    t.join(5)
    assert done.is_set() and not t.is_alive()                     # no limit, but the loop stopped
    assert loop.read_while(lambda: True, 1.0) is False


def test_the_guest_ends_when_its_socket_is_closed(net):
    h = ByThread()
    loop, rx, tx = guest_loop(net, h, poll_ms=50)
    done = threading.Event()
    t = threading.Thread(target=lambda: loop.read_while(lambda: True, 30.0) and done.set(), daemon=True)
    t.start()
    time.sleep(0.1)
    rx.close()
    t.join(5)
    assert done.is_set() and not t.is_alive()
