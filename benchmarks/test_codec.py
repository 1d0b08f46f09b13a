"""Codec micro-benchmarks (pytest-benchmark): encode/decode of a 1 KB data message and of a 64-message bundle.

The same operations are timed in Java by interop/src/org/jgpy/interop/CodecBench.java (which, like the
``*_reuse`` cases here, writes into a reused buffer); ``benchmarks/run.py`` runs both in one invocation
and writes the ratios. Nothing here asserts a speed.
"""

from __future__ import annotations

from jgpy import DIALECT
from jgpy._core.wire import Writer
from benchmarks import workloads as W


def test_encode_1k(benchmark):
    """Encode to a new bytes object."""
    m = W.data_message(1)
    benchmark(DIALECT.encode_message, m, True)


def test_encode_1k_reuse(benchmark):
    """Encode into a reused writer (the transport's send path; what CodecBench times in Java)."""
    m = W.data_message(1)
    w = Writer(4096)

    def run():
        w.clear()
        DIALECT.write_datagram(w, m, True)
    benchmark(run)


def test_decode_1k_lazy(benchmark):
    """Decode a datagram: messages, payload window, headers located but not built (the receive path)."""
    data = W.single_datagram()
    benchmark(lambda: DIALECT.decode_messages(data, []))


def _decode_full(data: bytes) -> list:
    out = []
    DIALECT.decode_messages(data, out)
    for m in out:
        m.headers
    return out


def test_decode_1k_full(benchmark):
    """Decode and build every header object, as Java's readFrom does."""
    benchmark(_decode_full, W.single_datagram())


def test_encode_bundle64_reuse(benchmark):
    msgs = W.bundle(64)
    w = Writer(80000)

    def run():
        w.clear()
        DIALECT.write_bundle(w, msgs, None, W.SRC, True)
    benchmark(run)


def test_decode_bundle64_lazy(benchmark):
    data = W.bundle_datagram(64)
    benchmark(lambda: DIALECT.decode_messages(data, []))


def test_decode_bundle64_full(benchmark):
    benchmark(_decode_full, W.bundle_datagram(64))
