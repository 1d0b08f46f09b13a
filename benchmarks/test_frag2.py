"""FRAG2 micro-benchmarks (pytest-benchmark): split and reassemble a 10 MB message.

FRAG2 sits between two stub layers (no threads, no sockets). ``frag_size`` 61440 is udp.xml's ``60K``
(163 fragments); 1500 is FRAG2's default (6,667 fragments), where the per-fragment cost shows.

* ``split``: one ``down_msg`` of the 10 MB message (fragments are windows into its payload);
* ``reassemble``: the fragments go up in batches of 64 (as a receive batch would bring them) until the
  whole message comes out;
* ``wire``: split, encode each fragment to a datagram (with the UDP TpHeader), decode every datagram,
  reassemble: FRAG2's share of sending and receiving a 10 MB message, without the network.

``extra_info["MB_per_s"]`` holds the payload rate of the mean round. Nothing here asserts a speed.
"""

from __future__ import annotations

import pytest

from jgpy import DIALECT, UUID, Message
from jgpy.headers import TpHeader
from jgpy.protocols.frag2 import FRAG2
from jgpy.stack.protocol import Protocol

SIZE = 10_000_000
FRAG_ID, TP_ID = 5, 21
BATCH = 64
ROUNDS = 5
A, B = UUID(1, 2), UUID(3, 4)
PAYLOAD = bytes(i & 0xFF for i in range(SIZE))


class Bottom(Protocol):
    """Keeps what FRAG2 sends down."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Message] = []

    def down_msg(self, msg):
        self.sent.append(msg)

    def down(self, evt):
        return None


class Top(Protocol):
    """Keeps what FRAG2 delivers up."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[Message] = []

    def up_batch(self, msgs):
        self.got.extend(msgs)

    def up(self, evt):
        return None


def wired(frag_size: int) -> tuple[FRAG2, Bottom, Top]:
    f, bottom, top = FRAG2(), Bottom(), Top()
    f.frag_size = frag_size
    f.id = FRAG_ID
    f.down_prot, f.up_prot = bottom, top
    f.init()
    return f, bottom, top


def big_message() -> Message:
    return Message(B, PAYLOAD, A)


def _info(benchmark) -> None:
    if benchmark.stats is not None:       # None under --benchmark-disable
        benchmark.extra_info["MB_per_s"] = round(SIZE / benchmark.stats.stats.mean / 1e6, 1)


def up_in_batches(f: FRAG2, frags: list[Message]) -> None:
    for i in range(0, len(frags), BATCH):
        f.up_batch(frags[i:i + BATCH])


@pytest.mark.parametrize("frag_size", [61440, 1500])
def test_frag2_split_10mb(benchmark, frag_size):
    f, bottom, _ = wired(frag_size)

    def setup():
        bottom.sent.clear()
        return (big_message(),), {}

    benchmark.pedantic(f.down_msg, setup=setup, rounds=ROUNDS, iterations=1)
    assert len(bottom.sent) == -(-SIZE // frag_size)
    _info(benchmark)


@pytest.mark.parametrize("frag_size", [61440, 1500])
def test_frag2_reassemble_10mb(benchmark, frag_size):
    f, bottom, top = wired(frag_size)
    f.down_msg(big_message())
    frags = list(bottom.sent)

    def setup():
        top.got.clear()
        return (f, frags), {}

    benchmark.pedantic(up_in_batches, setup=setup, rounds=ROUNDS, iterations=1)
    assert len(top.got) == 1 and top.got[0].length == SIZE and top.got[0].buffer == PAYLOAD
    _info(benchmark)


@pytest.mark.parametrize("frag_size", [61440, 1500])
def test_frag2_wire_10mb(benchmark, frag_size):
    """Split, encode every fragment, decode every datagram, reassemble."""
    f, bottom, top = wired(frag_size)
    tp = TpHeader("bench")

    def run():
        bottom.sent.clear()
        top.got.clear()
        f.down_msg(big_message())
        datagrams = []
        for m in bottom.sent:
            m.put_header(TP_ID, tp)
            datagrams.append(DIALECT.encode_message(m, False))
        decoded: list[Message] = []
        for d in datagrams:
            DIALECT.decode_messages(d, decoded)
        for m in decoded:
            m.remove_header(TP_ID)
        up_in_batches(f, decoded)

    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    assert len(top.got) == 1 and top.got[0].buffer == PAYLOAD
    _info(benchmark)
