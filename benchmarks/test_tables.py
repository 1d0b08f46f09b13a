"""Seqno-table micro-benchmarks (pytest-benchmark): the per-message paths of NAKACK and UNICAST.

Each round pushes 1,000,000 seqnos through a fresh table, called from Python the way a protocol
would: either one ``add`` per message followed by ``remove_many`` (NAKACK's handleMessage), or one
``add_many`` per received batch of 64 followed by ``remove_many``. The "late" variants delay 1% of
the seqnos by 100 positions, so every such seqno opens a gap (registered with the retransmitter)
that is filled later. ``extra_info["ns_per_seqno"]`` holds the mean cost per seqno. Nothing here
asserts a speed.
"""

from __future__ import annotations

import pytest

from jgpy._core.tables import AckReceiverWindow, AckSenderWindow, NakReceiverWindow

N = 1_000_000
BATCH = 64
ROUNDS = 5


def _late_order(n: int, every: int = 100, delay: int = 100) -> list[int]:
    """1..n with one seqno in every ``every`` arriving ``delay`` positions late."""
    order: list[int] = []
    held: list[tuple[int, int]] = []          # (seqno, release after this many in-order arrivals)
    for s in range(1, n + 1):
        if s % every == every // 2:
            held.append((s, s + delay))
            continue
        order.append(s)
        while held and held[0][1] <= s:
            order.append(held.pop(0)[0])
    order += [s for s, _ in held]
    return order


@pytest.fixture(scope="module")
def msgs() -> list[object]:
    """One distinct object per seqno (index = seqno), allocated outside the timed code."""
    return [object() for _ in range(N + 1)]


@pytest.fixture(scope="module", params=["in_order", "late_1pct"])
def order(request) -> list[int]:
    if request.param == "in_order":
        return list(range(1, N + 1))
    o = _late_order(N)
    assert sorted(o) == list(range(1, N + 1))
    return o


def _batches(order: list[int], msgs: list[object]) -> list[tuple[list[int], list[object]]]:
    out = []
    for i in range(0, len(order), BATCH):
        ss = order[i:i + BATCH]
        out.append((ss, [msgs[s] for s in ss]))
    return out


def _run(benchmark, setup, body, check):
    benchmark.pedantic(body, setup=setup, rounds=ROUNDS, iterations=1)
    check()
    if benchmark.stats is not None:       # None under --benchmark-disable
        benchmark.extra_info["ns_per_seqno"] = round(benchmark.stats.stats.mean * 1e9 / N, 1)


# ---------------------------------------------------------------------------------------------- NAKACK


def test_nak_add_remove(benchmark, order, msgs):
    """NakReceiverWindow: add() per message, then remove_many(discard_delivered_msgs=True)."""
    pairs = [(s, msgs[s]) for s in order]
    state = {}

    def setup():
        state["w"] = NakReceiverWindow()
        return (state["w"],), {}

    def body(w):
        add = w.add
        rm = w.remove_many
        for s, m in pairs:
            add(s, m, 0.0)
            rm(True)

    def check():
        w = state["w"]
        assert w.highest_delivered == N and w.size == 0 and w.pending_xmits == 0

    _run(benchmark, setup, body, check)


def test_nak_add_many_64(benchmark, order, msgs):
    """NakReceiverWindow: add_many() per batch of 64, then remove_many(True)."""
    batches = _batches(order, msgs)
    state = {}

    def setup():
        state["w"] = NakReceiverWindow()
        return (state["w"],), {}

    def body(w):
        add_many = w.add_many
        rm = w.remove_many
        for ss, ms in batches:
            add_many(ss, ms, 0.0)
            rm(True)

    def check():
        w = state["w"]
        assert w.highest_delivered == N and w.size == 0 and w.pending_xmits == 0

    _run(benchmark, setup, body, check)


def test_nak_add_keep_until_stable(benchmark, order, msgs):
    """NakReceiverWindow without discard_delivered_msgs: remove_many(False) and a stable() every 10,000."""
    pairs = [(s, msgs[s]) for s in order]
    state = {}

    def setup():
        state["w"] = NakReceiverWindow()
        return (state["w"],), {}

    def body(w):
        add = w.add
        rm = w.remove_many
        i = 0
        for s, m in pairs:
            add(s, m, 0.0)
            rm(False)
            i += 1
            if i % 10_000 == 0:
                w.stable(w.highest_delivered)
        w.stable(w.highest_delivered)

    def check():
        w = state["w"]
        assert w.highest_delivered == N and w.size == 0

    _run(benchmark, setup, body, check)


# ---------------------------------------------------------------------------------------------- UNICAST


def test_unicast_recv_add_remove(benchmark, order, msgs):
    """AckReceiverWindow: add() per message, then remove_many()."""
    pairs = [(s, msgs[s]) for s in order]
    state = {}

    def setup():
        state["w"] = AckReceiverWindow(1)
        return (state["w"],), {}

    def body(w):
        add = w.add
        rm = w.remove_many
        for s, m in pairs:
            add(s, m)
            rm()

    def check():
        w = state["w"]
        assert w.next_to_remove == N + 1 and w.size == 0

    _run(benchmark, setup, body, check)


def test_unicast_recv_add_many_64(benchmark, order, msgs):
    """AckReceiverWindow: add_many() per batch of 64, then remove_many()."""
    batches = _batches(order, msgs)
    state = {}

    def setup():
        state["w"] = AckReceiverWindow(1)
        return (state["w"],), {}

    def body(w):
        add_many = w.add_many
        rm = w.remove_many
        for ss, ms in batches:
            add_many(ss, ms)
            rm()

    def check():
        w = state["w"]
        assert w.next_to_remove == N + 1 and w.size == 0

    _run(benchmark, setup, body, check)


@pytest.mark.parametrize("ack_every", [1, 64])
def test_unicast_send_add_ack(benchmark, msgs, ack_every):
    """AckSenderWindow: add() per message (scheduling its retransmission), cumulative ack() every ack_every."""
    state = {}

    def setup():
        state["w"] = AckSenderWindow()
        return (state["w"],), {}

    def body(w):
        add = w.add
        ack = w.ack
        for s in range(1, N + 1):
            add(s, msgs[s], 0.0)
            if s % ack_every == 0:
                ack(s)
        ack(N)

    def check():
        w = state["w"]
        assert w.size == 0 and w.lowest_seqno == N + 1 and w.next_due() is None

    _run(benchmark, setup, body, check)


# ---------------------------------------------------------------------------------------------- baseline


class _Nop:
    def add(self, s, m, now):
        return True

    def remove_many(self, remove):
        return []


def test_baseline_python_loop(benchmark, msgs):
    """The same loop as test_nak_add_remove calling two no-op Python methods: the interpreter's share."""
    pairs = [(s, msgs[s]) for s in range(1, N + 1)]

    def body():
        w = _Nop()
        add = w.add
        rm = w.remove_many
        for s, m in pairs:
            add(s, m, 0.0)
            rm(True)

    _run(benchmark, None, body, lambda: None)
