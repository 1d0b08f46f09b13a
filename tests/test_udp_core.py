"""The UDP core (jgpy._core.recvloop, relay, bundler, senders): the receive loop, the bundler and sendmany, over
loopback (127.0.0.1, and ::1 when present).

Every socket binds to port 0 (no collisions with parallel runs), every wait is bounded, and the ``net``
fixture stops every loop/bundler and closes every socket after the test (and checks that no thread is left).
Nothing asserts a speed; waits have generous upper bounds so a loaded machine only makes the tests slower.
"""

from __future__ import annotations

import logging
import random
import select
import socket
import struct
import threading
import time

import pytest

from jgpy._core.bundler import Bundler
from jgpy._core.recvloop import DatagramLoop
from jgpy._core.senders import DatagramSender, sendmany
from jgpy._core.sockets import MAX_UDP_PAYLOAD
from jgpy.stack.logutil import RateLimitedLog
from tests.conftest import require

pytestmark = pytest.mark.timeout(120)

RCVBUF = 4 << 20    # capped by net.core.rmem_max; plenty for the windows used below


def require_ipv6() -> None:
    """The IPv6 loopback ``::1`` is usable (else skip, or fail with ``CI=true``)."""
    why = None if socket.has_ipv6 else "Python was built without IPv6"
    if why is None:
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
                s.bind(("::1", 0))
        except OSError as e:
            why = f"no IPv6 loopback ({e}): enable it (sysctl net.ipv6.conf.lo.disable_ipv6=0)"
    require(why)


class Collector:
    """A DatagramLoop handler that records everything and lets the test wait for a condition."""

    def __init__(self, on_batch=None):
        self.cv = threading.Condition()
        self.datagrams: list[bytes] = []
        self.sources: list = []
        self.batches: list[int] = []
        self.nbytes = 0
        self.sent = 0       # bytes producers have added (receiver pacing; see Producer)
        self.on_batch = on_batch

    def __call__(self, datagrams, sources):
        assert type(datagrams) is list and type(sources) is list and len(datagrams) == len(sources)
        with self.cv:
            self.datagrams.extend(datagrams)
            self.sources.extend(sources)
            self.batches.append(len(datagrams))
            self.nbytes += sum(map(len, datagrams))
            self.cv.notify_all()
        if self.on_batch is not None:
            self.on_batch(datagrams)

    def wait_for(self, predicate, timeout=30.0) -> bool:
        with self.cv:
            return self.cv.wait_for(predicate, timeout)

    def wait_count(self, n, timeout=30.0) -> bool:
        return self.wait_for(lambda: len(self.datagrams) >= n, timeout)


class Net:
    def __init__(self):
        self.socks: list[socket.socket] = []
        self.objs: list = []
        #: where the loops and bundlers log (as a transport passes its own): one line per second and kind
        self.log = RateLimitedLog(logging.getLogger("jgpy.udp"), interval=1.0)

    def udp(self, family=socket.AF_INET, rcvbuf=RCVBUF) -> socket.socket:
        s = socket.socket(family, socket.SOCK_DGRAM)
        self.socks.append(s)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.bind(("127.0.0.1" if family == socket.AF_INET else "::1", 0))
        return s

    def loop(self, sock, handler, start=True, **kw) -> DatagramLoop:
        loop = DatagramLoop(sock, handler, **{"log": self.log, **kw})
        self.objs.append(loop)
        if start:
            loop.start()
        return loop

    def bundler(self, sock, dest, prefix=b"<P>", suffix=b"</S>", start=True, **kw) -> Bundler:
        b = Bundler(sock, dest, prefix, suffix, **{"log": self.log, **kw})
        self.objs.insert(0, b)      # bundlers stop before loops (they drain into them)
        if start:
            b.start()
        return b

    def close(self):
        for obj in self.objs:
            obj.stop(timeout=5.0)
        for s in self.socks:
            s.close()
        for obj in self.objs:
            assert not obj.running, f"{obj!r} still running after stop()"


@pytest.fixture
def net():
    n = Net()
    try:
        yield n
    finally:
        n.close()


def payload(i: int, size: int) -> bytes:
    """Datagram i of a stream: its number then a pattern that depends on i (corruption shows)."""
    head = struct.pack(">I", i)
    body = bytes((i + k) & 0xFF for k in range(min(size - 4, 256)))
    body = (body * (size // max(len(body), 1) + 1))[: size - 4] if size > 4 else b""
    return head + body


# ---------------------------------------------------------------------------------------------------
# DatagramLoop
# ---------------------------------------------------------------------------------------------------

def test_loop_receives_10000_datagrams_intact_in_order(net):
    rx = net.udp()
    tx = net.udp()
    got = Collector()
    loop = net.loop(rx, got)
    rng = random.Random(1)
    sizes = [rng.choice((rng.randint(4, 200), rng.randint(4, 9000), 60000 if rng.random() < 0.01 else 1400))
             for _ in range(10000)]
    expected = [payload(i, n) for i, n in enumerate(sizes)]
    window = 64         # datagrams in flight: far below what SO_RCVBUF holds, so the kernel drops nothing
    dest = rx.getsockname()
    for i, d in enumerate(expected):
        if i >= window:
            assert got.wait_count(i - window, timeout=30), f"stalled at {len(got.datagrams)} of {i} sent"
        tx.sendto(d, dest)
    assert got.wait_count(len(expected), timeout=30), f"{len(got.datagrams)} of {len(expected)} arrived"
    assert got.datagrams == expected
    assert set(got.sources) == {tx.getsockname()}
    st = loop.stats
    assert st["datagrams"] == len(expected) and st["bytes"] == sum(sizes)
    assert st["batches"] == len(got.batches) and sum(got.batches) == len(expected)
    assert st["handler_errors"] == st["recv_errors"] == st["truncated"] == 0


def test_loop_reads_full_batches(net):
    """While the handler is busy, datagrams queue up in the socket; the next recvmmsg takes `batch` of them."""
    rx = net.udp()
    tx = net.udp()
    entered, release = threading.Event(), threading.Event()

    def block_first(datagrams):
        if not entered.is_set():
            entered.set()
            release.wait(20)

    got = Collector(on_batch=block_first)
    loop = net.loop(rx, got, batch=16)
    tx.sendto(payload(0, 100), rx.getsockname())
    assert entered.wait(10)
    for i in range(1, 101):
        tx.sendto(payload(i, 100), rx.getsockname())
    release.set()
    assert got.wait_count(101)
    assert got.datagrams == [payload(i, 100) for i in range(101)]
    assert max(got.batches) == 16
    assert loop.stats["batches"] == len(got.batches) < 101


@pytest.mark.parametrize("coalesce_us", [0, 500])
def test_loop_coalesces_a_dense_stream_only(net, coalesce_us):
    """A stream of datagrams 50 us apart: with coalesce_us=500 the loop sleeps between batches and reads several
    per wake-up; without, it is not told to. Datagrams 5 ms apart (sparse) are never delayed by a sleep."""
    rx = net.udp()
    tx = net.udp()
    got = Collector()
    loop = net.loop(rx, got, coalesce_us=coalesce_us)
    dest = rx.getsockname()
    for i in range(400):                                  # dense: about 20-40 ms in all
        tx.sendto(payload(i, 100), dest)
        t = time.perf_counter() + 50e-6
        while time.perf_counter() < t:
            pass
    assert got.wait_count(400)
    dense = loop.stats
    if coalesce_us:                                       # (a loaded machine may deliver the stream in clumps
        assert dense["batches"] < 300, dense              # that are read whole: then there is nothing to coalesce)
        assert dense["coalesced"] > 0 or dense["batches"] <= 400 // 16, dense
    else:
        assert dense["coalesced"] == 0, dense
    time.sleep(0.05)
    for i in range(400, 420):                             # sparse: each one read alone, without a sleep first
        tx.sendto(payload(i, 100), dest)
        assert got.wait_count(i + 1, timeout=10)
        time.sleep(0.005)
    assert loop.stats["coalesced"] == dense["coalesced"]
    assert got.datagrams == [payload(i, 100) for i in range(420)]
    with pytest.raises(ValueError, match="coalesce_us"):
        DatagramLoop(rx, got, coalesce_us=-1)


def test_loop_does_not_coalesce_pairs_of_datagrams(net):
    """A Java requester sends its ACK and the next request a few microseconds apart, then waits for the response:
    pairs of close datagrams separated by gaps are not a dense stream, so no request waits for a coalescing
    sleep (which lasts coalesce_us plus the timer slack, ~100 us here)."""
    rx = net.udp()
    tx = net.udp()
    got = Collector()
    loop = net.loop(rx, got, coalesce_us=500)
    dest = rx.getsockname()
    for i in range(30):
        tx.sendto(payload(2 * i, 100), dest)              # the ACK ...
        tx.sendto(payload(2 * i + 1, 100), dest)          # ... and the request right behind it
        assert got.wait_count(2 * i + 2, timeout=10)
        time.sleep(0.003)                                 # the response's round trip
    assert loop.stats["coalesced"] == 0, loop.stats
    assert got.datagrams == [payload(i, 100) for i in range(60)]


def test_loop_survives_a_failing_handler(net, caplog):
    rx = net.udp()
    tx = net.udp()
    calls = []

    def handler(datagrams, sources):
        calls.append(list(datagrams))
        if len(calls) % 2 == 0:
            raise RuntimeError("handler failure for the test")

    got = Collector()
    loop = net.loop(rx, lambda d, s: (got(d, s), handler(d, s)))
    caplog.set_level(logging.ERROR, logger="jgpy.udp")
    t0 = time.monotonic()
    for i in range(200):
        tx.sendto(payload(i, 64), rx.getsockname())
        assert got.wait_count(i + 1), f"datagram {i} not delivered"     # one datagram per handler call
    elapsed = time.monotonic() - t0
    assert [d for batch in calls for d in batch] == [payload(i, 64) for i in range(200)]
    assert loop.stats["handler_errors"] == len(calls) // 2 == 100
    assert loop.running
    lines = [r for r in caplog.records if r.name == "jgpy.udp"]
    assert 1 <= len(lines) <= int(elapsed) + 2, f"{len(lines)} log lines in {elapsed:.1f} s: not rate-limited"
    assert "handler" in lines[0].getMessage() and lines[0].exc_info is not None
    loop.stop()
    # every error is logged or counted as suppressed (the next line logged says how many)
    assert len(lines) + net.log.suppressed == 100


@pytest.mark.parametrize("threads", [1, 2])
def test_loop_stop_is_prompt_and_idempotent(net, threads):
    rx = net.udp()
    loop = net.loop(rx, Collector(), poll_ms=10000, name="prompt-stop", threads=threads)
    assert loop.name == "prompt-stop" and loop.running
    assert "prompt-stop" in [t.name for t in threading.enumerate()]
    time.sleep(0.05)
    t0 = time.monotonic()
    assert loop.stop() is True
    assert time.monotonic() - t0 < 2.0      # a wake-up pipe, not the 10 s poll timeout
    assert not loop.running
    assert loop.stop() is True
    with pytest.raises(RuntimeError):
        loop.start()
    never_started = net.loop(rx, Collector(), start=False)
    assert never_started.stop() is True


@pytest.mark.parametrize("threads", [1, 2])
def test_loop_ends_quietly_when_the_socket_is_closed(net, caplog, threads):
    rx = net.udp()
    loop = net.loop(rx, Collector(), poll_ms=50, threads=threads)
    caplog.set_level(logging.ERROR, logger="jgpy.udp")
    rx.close()
    deadline = time.monotonic() + 10
    while loop.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not loop.running
    assert loop.stop() is True
    assert loop.stats["recv_errors"] == 0
    assert not [r for r in caplog.records if r.name == "jgpy.udp"]


def test_loop_counts_and_drops_truncated_datagrams(net):
    rx = net.udp()
    tx = net.udp()
    got = Collector()
    loop = net.loop(rx, got, bufsize=1024)
    tx.sendto(b"A" * 2000, rx.getsockname())
    tx.sendto(b"B" * 1024, rx.getsockname())
    tx.sendto(b"C" * 1025, rx.getsockname())
    tx.sendto(b"small", rx.getsockname())
    assert got.wait_for(lambda: b"small" in got.datagrams)
    assert got.datagrams == [b"B" * 1024, b"small"]
    assert loop.stats["truncated"] == 2
    assert loop.stats["datagrams"] == 2


def test_loop_ipv6_sources(net):
    require_ipv6()
    rx = net.udp(socket.AF_INET6)
    tx = net.udp(socket.AF_INET6)
    got = Collector()
    net.loop(rx, got)
    tx.sendto(b"six", rx.getsockname()[:2])
    assert got.wait_count(1)
    assert got.datagrams == [b"six"] and got.sources == [("::1", tx.getsockname()[1])]


class RelayHandler:
    """A relay-mode handler: a datagram b"block" makes its thread hand the socket over and block until released
    (as a receive thread running the application); records which thread read what."""

    def __init__(self):
        self.pairs: dict[str, tuple] = {}
        self.got = Collector()
        self.by_thread: dict[str, list[bytes]] = {}
        self.blocked = threading.Event()
        self.release = threading.Event()
        self.handed: list[bool] = []

    def on_thread(self, hand_over, take_back):
        self.pairs[threading.current_thread().name] = (hand_over, take_back)

    def __call__(self, datagrams, sources):
        name = threading.current_thread().name
        self.by_thread.setdefault(name, []).extend(datagrams)
        self.got(datagrams, sources)
        twice = b"twice" in datagrams              # a short hand-over first, then "block" in the same batch
        if twice:
            hand_over, take_back = self.pairs[name]
            if hand_over():
                take_back()                        # its epoll_ctl calls are still to be made by the loop
        if twice or b"block" in datagrams:
            hand_over, take_back = self.pairs[name]
            ok = hand_over()
            self.handed.append(ok)
            if ok:
                try:
                    self.blocked.set()
                    self.release.wait(30)
                finally:
                    take_back()


def _release_and_check_taken_back(h, tx, dest, total: int) -> None:
    """Release the blocked handler, send 20 datagrams c0..c19 (``total`` datagrams so far with them): the
    first thread, which took the socket back, reads all 20."""
    h.release.set()
    time.sleep(0.05)
    n = len(h.by_thread["relay"])
    for i in range(20):
        tx.sendto(b"c%d" % i, dest)
        time.sleep(0.0005)
    assert h.got.wait_count(total)
    assert len(h.by_thread["relay"]) == n + 20            # taken back: the first thread reads again


def test_relay_loop_reads_with_one_thread_until_it_hands_the_socket_over(net):
    """threads=2: without a hand-over only the owner reads; while it blocks after hand_over() the other thread
    reads every datagram that comes; after take_back() the first thread owns the socket again. Nothing is lost."""
    rx, tx = net.udp(), net.udp()
    h = RelayHandler()
    loop = net.loop(rx, h, threads=2, on_thread=h.on_thread, name="relay", relay_gap_us=0)
    assert loop.threads == 2
    assert "relay" in [t.name for t in threading.enumerate()] and "relay-2" in [t.name for t in threading.enumerate()]
    deadline = time.monotonic() + 10
    while len(h.pairs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    dest = rx.getsockname()
    for i in range(50):
        tx.sendto(b"a%d" % i, dest)
        time.sleep(0.0005)
    assert h.got.wait_count(50)
    assert list(h.by_thread) == ["relay"]                 # the owner read everything
    time.sleep(0.01)                                      # the owner sleeps in epoll_wait: no backlog
    tx.sendto(b"block", dest)
    assert h.blocked.wait(10) and h.handed == [True]
    for i in range(50):
        tx.sendto(b"b%d" % i, dest)
    assert h.got.wait_count(101)
    assert h.by_thread["relay-2"] == [b"b%d" % i for i in range(50)]   # read while the first thread blocks
    _release_and_check_taken_back(h, tx, dest, 121)
    assert sorted(h.got.datagrams) == sorted([b"a%d" % i for i in range(50)] + [b"block"] +
                                             [b"b%d" % i for i in range(50)] + [b"c%d" % i for i in range(20)])
    assert loop.stats["handovers"] == 1
    assert loop.stop() is True and not loop.running


def test_relay_loop_hands_over_again_before_the_loop_has_re_armed_after_take_back(net):
    """take_back() leaves the epoll_ctl calls to the loop (after the GIL is released): a second hand_over() in
    the same batch carries them out first, so the twin reads while the handler blocks and the first thread
    owns the socket again afterwards. Nothing is lost."""
    rx, tx = net.udp(), net.udp()
    h = RelayHandler()
    loop = net.loop(rx, h, threads=2, on_thread=h.on_thread, name="relay", relay_gap_us=0)
    deadline = time.monotonic() + 10
    while len(h.pairs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    dest = rx.getsockname()
    tx.sendto(b"twice", dest)                             # hand over, take back, hand over again and block
    assert h.blocked.wait(10) and h.handed == [True]
    assert h.by_thread.get("relay-2") is None
    for i in range(30):
        tx.sendto(b"b%d" % i, dest)
    assert h.got.wait_count(31)
    assert h.by_thread["relay-2"] == [b"b%d" % i for i in range(30)]   # the twin reads while the owner blocks
    _release_and_check_taken_back(h, tx, dest, 51)
    assert loop.stats["handovers"] == 2
    assert loop.stop() is True and not loop.running


@pytest.mark.parametrize("gap_us", [0, 1_000_000])
def test_relay_loop_refuses_hand_overs_that_follow_each_other_closely(net, gap_us):
    """A hand-over less than relay_gap_us after the previous one (deliveries of a stream) is refused: hand_over()
    returns False and hands nothing over, so the two threads do not take turns for every batch of a stream."""
    rx, tx = net.udp(), net.udp()
    pairs: dict[str, tuple] = {}
    results: list[bool] = []
    got = Collector()

    def handler(datagrams, sources):
        hand_over, take_back = pairs[threading.current_thread().name]
        ok = hand_over()
        results.append(ok)
        if ok:
            take_back()
        got(datagrams, sources)

    loop = net.loop(rx, handler, threads=2, on_thread=lambda h, t: pairs.__setitem__(threading.current_thread().name,
                                                                                       (h, t)),
                    relay_gap_us=gap_us)
    deadline = time.monotonic() + 10
    while len(pairs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    for i in range(5):
        tx.sendto(b"d%d" % i, rx.getsockname())
        time.sleep(0.002)
    assert got.wait_count(5)
    if gap_us:
        assert results[0] and not any(results[1:])
        assert loop.stats["stream_refusals"] == len(results) - 1 and loop.stats["handovers"] == 1
    else:
        assert all(results) and loop.stats["handovers"] == len(results) and loop.stats["stream_refusals"] == 0


def test_relay_loop_refuses_a_hand_over_while_a_datagram_waits(net):
    """relay_gap_us=0: a hand-over is still refused when a datagram is already waiting on the socket (the twin
    would be woken at once: a backlog, not a request/response); with nothing waiting it is made."""
    rx, tx = net.udp(), net.udp()
    pairs: dict[str, tuple] = {}
    results: list[tuple[bytes, bool]] = []
    got = Collector()
    dest = rx.getsockname()

    def handler(datagrams, sources):
        hand_over, take_back = pairs[threading.current_thread().name]
        if datagrams[0] == b"first":
            tx.sendto(b"second", dest)              # waiting on the socket before the hand-over
            deadline = time.monotonic() + 5
            while not select.select([rx], [], [], 0)[0] and time.monotonic() < deadline:
                time.sleep(0.001)
        ok = hand_over()
        results.append((datagrams[0], ok))
        if ok:
            take_back()
        got(datagrams, sources)

    loop = net.loop(rx, handler, threads=2, relay_gap_us=0,
                    on_thread=lambda h, t: pairs.__setitem__(threading.current_thread().name, (h, t)))
    deadline = time.monotonic() + 10
    while len(pairs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    tx.sendto(b"first", dest)
    assert got.wait_count(2)
    assert results == [(b"first", False), (b"second", True)]
    assert loop.stats["stream_refusals"] == 1 and loop.stats["handovers"] == 1


def _spin(seconds: float) -> int:
    """Iterations a pure-Python loop makes in a thread of its own (the caller waits in join, GIL released)."""
    out = []

    def run():
        n = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            n += 1
        out.append(n)

    t = threading.Thread(target=run)
    t.start()
    t.join(seconds + 30)
    return out[0]


def test_idle_loop_and_bundler_release_the_gil(net):
    """With the GIL held in poll()/condvar waits, the busy thread would stall for whole poll periods."""
    rx = net.udp()
    baseline, loaded = [], []
    for _ in range(3):
        baseline.append(_spin(0.3))
    net.loop(rx, Collector(), poll_ms=100)
    net.bundler(net.udp(), rx.getsockname())
    for _ in range(3):
        loaded.append(_spin(0.3))
    ratio = max(loaded) / max(baseline)
    assert ratio > 0.5, f"busy thread ran at {ratio:.0%} of its speed beside the idle loop and bundler"


# ---------------------------------------------------------------------------------------------------
# Bundler
# ---------------------------------------------------------------------------------------------------

PRE, SUF = b"<PREFIX>", b"</SUFFIX>"


def entry(tid: int, seq: int, size: int) -> bytes:
    """Self-delimiting entry of `size` >= 7 bytes: thread id, sequence number, total length, pattern."""
    head = struct.pack(">BIH", tid, seq, size)
    return head + bytes(((seq * 7 + tid + k) & 0xFF) for k in range(size - 7))


def split_entries(body: bytes) -> list[tuple[int, int, bytes]]:
    out, p = [], 0
    while p < len(body):
        tid, seq, size = struct.unpack_from(">BIH", body, p)
        assert size >= 7 and p + size <= len(body), f"entry boundary broken at offset {p}"
        out.append((tid, seq, body[p:p + size]))
        p += size
    return out


def strip(d: bytes, max_size: int) -> bytes:
    assert d.startswith(PRE) and d.endswith(SUF), f"datagram without prefix/suffix: {d[:20]!r}...{d[-20:]!r}"
    assert len(d) <= max_size
    return d[len(PRE):len(d) - len(SUF)]


class Producer(threading.Thread):
    """Adds entries of random size; optionally keeps at most `window` bytes unreceived (receiver pacing)."""

    def __init__(self, bundler, tid, count, got=None, window=1 << 20, lo=7, hi=3000):
        super().__init__(name=f"producer-{tid}", daemon=True)
        rng = random.Random(tid * 1000 + count)
        self.entries = [entry(tid, i, rng.randint(lo, hi)) for i in range(count)]
        self.bundler, self.got, self.window = bundler, got, window
        self.error = None

    def run(self):
        got = self.got
        try:
            for e in self.entries:
                if got is not None:     # all producers share got.sent: the bytes in flight stay below the window
                    with got.cv:
                        assert got.cv.wait_for(lambda: got.sent - got.nbytes < self.window, 30), "stalled"
                        got.sent += len(e)
                self.bundler.add(e)
        except BaseException as exc:        # reported by the test
            self.error = exc


def check_streams(datagrams, producers, max_size):
    per_thread: dict[int, list[bytes]] = {p.entries[0][0]: [] for p in producers}
    counts = []
    for d in datagrams:
        parts = split_entries(strip(d, max_size))
        counts.append(len(parts))
        for tid, _seq, e in parts:
            per_thread[tid].append(e)
    for p in producers:
        tid = p.entries[0][0]
        assert len(per_thread[tid]) == len(p.entries), f"thread {tid}: {len(per_thread[tid])} of {len(p.entries)}"
        assert per_thread[tid] == p.entries, f"thread {tid}: entries out of order, lost, duplicated or corrupted"
    return counts


@pytest.mark.parametrize("max_size", [64000, 8000])
def test_bundler_two_threads_in_order_nothing_lost(net, max_size):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, max_size=max_size)
    producers = [Producer(b, tid, 2500, got=got, window=512 << 10) for tid in (1, 2)]
    for p in producers:
        p.start()
    for p in producers:
        p.join(60)
        assert not p.is_alive() and p.error is None, p.error
    assert b.flush(timeout=30)
    total = sum(len(e) for p in producers for e in p.entries)
    nent = sum(len(p.entries) for p in producers)
    st = b.stats
    assert got.wait_count(st["datagrams"])
    counts = check_streams(got.datagrams, producers, max_size)
    assert st["entries"] == nent and st["datagrams"] == len(got.datagrams)
    assert st["bytes"] == got.nbytes == total + len(got.datagrams) * (len(PRE) + len(SUF))
    assert st["send_errors"] == st["dropped"] == st["queued"] == st["queued_bytes"] == 0
    assert st["max_entries_per_datagram"] == max(counts)
    assert len(got.datagrams) < nent / 4, "entries were hardly bundled"


def test_bundler_many_tiny_entries_one_thread(net):
    """1-4 byte entries: thousands per datagram (the ring gives one iovec per datagram, not one per entry)."""
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, linger_us=20000)
    rng = random.Random(5)
    entries = [bytes([rng.randrange(256)] * rng.randint(1, 4)) for _ in range(30000)]
    for e in entries:
        b.add(e)
    b.add(bytearray(b"bytearray"))
    b.add(memoryview(b"--memoryview--")[2:-2])
    b.add(b"")          # ignored
    assert b.flush()
    st = b.stats
    assert got.wait_count(st["datagrams"])
    body = b"".join(strip(d, 64000) for d in got.datagrams)
    assert body == b"".join(entries) + b"bytearraymemoryview"
    assert st["entries"] == len(entries) + 2
    assert st["max_entries_per_datagram"] > 1024


def test_bundler_oversized_entry_goes_alone_and_too_large_raises(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, max_size=4000, linger_us=50000)
    small1, big, small2 = b"a" * 100, b"B" * 10000, b"c" * 100
    biggest = b"D" * (MAX_UDP_PAYLOAD - len(PRE) - len(SUF))
    with pytest.raises(ValueError, match="fragmentation"):
        b.add(b"E" * (len(biggest) + 1))
    for e in (small1, big, small2, biggest, small1):
        b.add(e)
    assert b.flush()
    assert got.wait_count(b.stats["datagrams"])
    bodies = [strip(d, MAX_UDP_PAYLOAD) for d in got.datagrams]
    assert b"".join(bodies) == small1 + big + small2 + biggest + small1
    assert big in bodies and biggest in bodies          # each alone in its datagram
    assert all(len(d) <= 4000 for d, body in zip(got.datagrams, bodies) if body not in (big, biggest))
    assert b.stats["entries"] == 5


def test_bundler_small_ring_blocks_adders_and_loses_nothing(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    cap = 64 << 10
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, capacity=cap, start=False)
    # adders start before the sender: they must block once 64 KB are queued (entries queue before start())
    producers = [Producer(b, tid, 400, lo=500, hi=3000) for tid in (1, 2)]   # ~1.4 MB through a 64 KB ring
    for p in producers:
        p.start()
    deadline = time.monotonic() + 10
    while b.stats["blocked_adds"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    st = b.stats
    assert st["blocked_adds"] >= 2 and 0 < st["queued_bytes"] <= cap and st["datagrams"] == 0
    b.start()
    peak = 0
    while any(p.is_alive() for p in producers) and time.monotonic() < deadline + 60:
        peak = max(peak, b.stats["queued_bytes"])
        time.sleep(0.001)
    for p in producers:
        p.join(10)
        assert p.error is None, p.error
    assert peak <= cap
    assert b.flush(timeout=30)
    assert got.wait_count(b.stats["datagrams"])
    check_streams(got.datagrams, producers, 64000)
    st = b.stats
    assert st["entries"] == 800 and st["dropped"] == 0 and st["blocked_adds"] >= 2


def test_bundler_max_entries_bounds_the_queue(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, capacity=1 << 20, max_entries=10, start=False)
    producer = Producer(b, 1, 50, lo=10, hi=20)     # tiny entries: the entry limit, not the ring, is full first
    producer.start()
    deadline = time.monotonic() + 10
    while b.stats["blocked_adds"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    st = b.stats
    assert st["blocked_adds"] == 1 and st["queued"] == 10 and st["queued_bytes"] < 300, st
    b.start()
    producer.join(10)
    assert producer.error is None, producer.error
    assert b.flush(timeout=10)
    assert got.wait_count(b.stats["datagrams"])
    check_streams(got.datagrams, [producer], 64000)
    assert b.stats["entries"] == 50 and b.stats["dropped"] == 0


def test_bundler_flush_sends_without_lingering(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, linger_us=20_000_000, max_delay_ms=60_000)
    assert b.flush(timeout=1) is True           # nothing queued
    for i in range(10):
        b.add(b"%d;" % i)
    t0 = time.monotonic()
    assert b.flush(timeout=10) is True
    assert time.monotonic() - t0 < 5           # not the 20 s linger
    assert got.wait_count(1)
    assert strip(got.datagrams[0], 64000) == b"0;1;2;3;4;5;6;7;8;9;"


def test_bundler_flush_before_start_returns_false(net):
    rx = net.udp()
    b = net.bundler(net.udp(), rx.getsockname(), start=False)
    b.add(b"queued")
    assert b.flush(timeout=0.1) is False
    assert b.stats["queued"] == 1
    assert b.stop() is False                    # never started: the entry is dropped
    assert b.stats["dropped"] == 1


def test_bundler_max_delay_bounds_the_wait(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, linger_us=30_000_000, max_delay_ms=100)
    t0 = time.monotonic()
    b.add(b"x")
    assert got.wait_count(1, timeout=10)
    elapsed = time.monotonic() - t0
    assert 0.09 <= elapsed < 10, elapsed      # held for max_delay, not for the 30 s linger


def test_bundler_linger_sends_a_lone_entry_soon(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF)     # linger 100 us, max_delay 30 ms
    for i in range(5):
        b.add(b"ping%d" % i)
        assert got.wait_count(i + 1, timeout=10)
    assert [strip(d, 64000) for d in got.datagrams] == [b"ping%d" % i for i in range(5)]


def test_bundler_stop_drains_then_rejects(net):
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    b = net.bundler(net.udp(), rx.getsockname(), PRE, SUF, linger_us=10_000_000, max_delay_ms=60_000)
    entries = [entry(1, i, 7 + i % 500) for i in range(2000)]     # ~500 KB
    for e in entries:
        b.add(e)
    assert b.stop(timeout=10) is True
    assert not b.running
    st = b.stats
    assert st["entries"] == 2000 and st["queued"] == 0
    assert got.wait_count(st["datagrams"])
    assert [e for d in got.datagrams for _, _, e in split_entries(strip(d, 64000))] == entries
    with pytest.raises(RuntimeError, match="stop"):
        b.add(b"late")
    assert b.stop() is True
    with pytest.raises(RuntimeError):
        b.start()


def test_bundler_send_error_is_counted_logged_and_survived(net, caplog):
    tx = net.udp()
    caplog.set_level(logging.ERROR, logger="jgpy.udp")
    # the limited broadcast address without SO_BROADCAST: the kernel refuses every datagram (EACCES)
    b = net.bundler(tx, ("255.255.255.255", 9), max_size=1000)
    for i in range(50):
        b.add(b"y" * 300)
    assert b.flush(timeout=10)             # dropped entries count as handled
    st = b.stats
    assert st["send_errors"] >= 1 and st["dropped"] == 50 and st["entries"] == 0
    assert b.running
    msgs = [r.getMessage() for r in caplog.records if r.name == "jgpy.udp"]
    assert msgs and "sendmmsg" in msgs[0] and len(msgs) <= 3


def test_bundler_bad_arguments(net):
    tx, rx = net.udp(), net.udp()
    dest = rx.getsockname()
    with pytest.raises(ValueError, match="capacity"):
        Bundler(tx, dest, b"", b"", capacity=1000)
    with pytest.raises(ValueError, match="max_entries"):
        Bundler(tx, dest, b"", b"", max_entries=-1)
    with pytest.raises(ValueError, match="max_size"):
        Bundler(tx, dest, b"x" * 10, b"", max_size=10)
    with pytest.raises(ValueError, match="max_size"):
        Bundler(tx, dest, b"", b"", max_size=70000)
    with pytest.raises(ValueError, match="destination"):
        Bundler(tx, ("127.0.0.1",), b"", b"")
    with pytest.raises(TypeError):
        Bundler(tx, dest, b"", b"", 1000)       # the options are keyword-only
    with pytest.raises(ValueError, match="batch"):
        DatagramLoop(rx, print, batch=0)
    with pytest.raises(TypeError, match="callable"):
        DatagramLoop(rx, None)
    with pytest.raises(ValueError, match="threads"):
        DatagramLoop(rx, print, threads=0)
    with pytest.raises(TypeError, match="on_thread"):
        DatagramLoop(rx, print, on_thread=42)
    with pytest.raises(ValueError, match="relay_gap_us"):
        DatagramLoop(rx, print, relay_gap_us=-1)


def test_bundler_ipv6(net):
    require_ipv6()
    rx = net.udp(socket.AF_INET6)
    got = Collector()
    net.loop(rx, got)
    tx = net.udp(socket.AF_INET6)
    b = net.bundler(tx, rx.getsockname()[:2], PRE, SUF)
    b.add(b"over six")
    assert b.flush()
    assert got.wait_count(1)
    assert got.datagrams == [PRE + b"over six" + SUF] and got.sources == [tx.getsockname()[:2]]


# ---------------------------------------------------------------------------------------------------
# sendmany
# ---------------------------------------------------------------------------------------------------

def test_sendmany_500_datagrams_to_3_destinations(net):
    receivers = [net.udp() for _ in range(3)]
    collectors = [Collector() for _ in receivers]
    for r, c in zip(receivers, collectors):
        net.loop(r, c)
    tx = net.udp()
    items, expected = [], [[] for _ in receivers]
    for i in range(500):
        d = payload(i, 4 + (i * 37) % 1400)
        k = i % 3
        items.append((d if i % 2 else bytearray(d), receivers[k].getsockname()))
        expected[k].append(d)
    assert sendmany(tx, items) == 500
    for c, exp in zip(collectors, expected):
        assert c.wait_count(len(exp))
        assert c.datagrams == exp
        assert set(c.sources) == {tx.getsockname()}
    assert sendmany(tx, []) == 0


def test_sendmany_skips_refused_datagrams_and_validates(net, caplog):
    rx, tx = net.udp(), net.udp()
    got = Collector()
    net.loop(rx, got)
    caplog.set_level(logging.ERROR, logger="jgpy.udp")
    dest = rx.getsockname()
    items = [(b"one", dest), (b"refused", ("255.255.255.255", 9)), (b"two", list(dest))]
    assert sendmany(tx, items, net.log) == 2
    assert got.wait_count(2)
    assert got.datagrams == [b"one", b"two"]
    assert any("sendmany" in r.getMessage() for r in caplog.records if r.name == "jgpy.udp")
    with pytest.raises(ValueError, match="items"):
        sendmany(tx, [b"no destination"])
    with pytest.raises(ValueError, match="port"):
        sendmany(tx, [(b"x", ("127.0.0.1", 0))])
    closed = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        sendmany(closed, [(b"x", dest)])


# ---------------------------------------------------------------------------------------------------
# DatagramSender
# ---------------------------------------------------------------------------------------------------

def test_sender_delivers_to_several_destinations_in_order(net):
    receivers = [net.udp() for _ in range(2)]
    collectors = [Collector() for _ in receivers]
    for r, c in zip(receivers, collectors):
        net.loop(r, c)
    tx = net.udp()
    sender = DatagramSender(tx)
    expected = [[], []]
    for i in range(400):
        d = payload(i, 4 + (i * 53) % 1400)
        k = i % 2
        assert sender.send(d if i % 3 else memoryview(bytearray(d)), receivers[k].getsockname()) == len(d)
        expected[k].append(d)
    for c, exp in zip(collectors, expected):
        assert c.wait_count(len(exp))
        assert c.datagrams == exp
        assert set(c.sources) == {tx.getsockname()}


def test_sender_errors_name_the_problem(net):
    tx = net.udp()
    sender = DatagramSender(tx)
    with pytest.raises(OSError):
        sender.send(b"x", ("255.255.255.255", 9))        # broadcast without SO_BROADCAST: EACCES
    with pytest.raises(ValueError, match="port"):
        sender.send(b"x", ("127.0.0.1", 0))
    with pytest.raises(OSError):
        sender.send(b"x" * 70000, tx.getsockname())        # larger than a UDP datagram: EMSGSIZE
    rx = net.udp()
    got = Collector()
    net.loop(rx, got)
    assert sender.send(b"after errors", rx.getsockname()) == 12   # the sender is still usable
    assert got.wait_count(1)


def test_long_datagrams_are_their_receive_buffers_and_stay_intact(net):
    """At least ``adopt_min`` bytes: the datagram is the slot's buffer itself (shrunk), and the slot gets a new
    one, so later receives never overwrite a datagram already handed over; shorter ones are copies."""
    got = Collector()
    rx, tx = net.udp(), net.udp()
    net.loop(rx, got, batch=4, adopt_min=1000)
    sizes = [999, 1000, 60000, 5, 30000, 1000, 65507, 1, 2000] * 6
    expected = [payload(i, n) for i, n in enumerate(sizes)]
    for data in expected:
        tx.sendto(data, rx.getsockname())
    assert got.wait_count(len(expected), 30)
    assert got.datagrams == expected                           # every one intact after all the later receives
    assert all(type(d) is bytes for d in got.datagrams)
    with pytest.raises(ValueError, match="adopt_min"):
        DatagramLoop(rx, got, adopt_min=0)
