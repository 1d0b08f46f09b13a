"""The exact messages the codec benchmarks use, identical to interop/.../CodecBench.java."""

from __future__ import annotations

from jgpy import DIALECT, Message, UUID
from jgpy.headers import NakAckHeader, TpHeader

SRC = UUID(0x0123456789ABCDEF, 0x0FEDCBA987654321)
PAYLOAD = bytes(i & 0xFF for i in range(1024))
CLUSTER = "bench"


def data_message(seqno: int = 1) -> Message:
    """A 1 KB multicast data message: NAKACK MSG header, then the UDP TpHeader."""
    m = Message(None, PAYLOAD, SRC)
    m.put_header(15, NakAckHeader.msg(seqno))
    m.put_header(21, TpHeader(CLUSTER))
    return m


def single_datagram() -> bytes:
    return DIALECT.encode_message(data_message(1), multicast=True)


def bundle(n: int = 64) -> list[Message]:
    return [data_message(k + 1) for k in range(n)]


def bundle_datagram(n: int = 64) -> bytes:
    return DIALECT.encode_bundle(bundle(n), dest=None, src=SRC, multicast=True)
