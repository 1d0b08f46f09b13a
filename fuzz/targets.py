"""The decode entry points a peer reaches, as fuzz targets.

An input's first byte selects the target (:data:`TARGET_NAMES`), the rest is what a peer sent. A target may
only succeed or raise one of :data:`EXPECTED`; anything else (another exception, a crash, a hang, a huge
allocation) is a bug the fuzzers report. Targets decode the way the stack does and then touch everything a
protocol could touch: every header is built, every payload read, ``setObject`` payloads decoded and decoded
values encoded again (a member re-sends what it received, e.g. NAKACK retransmissions).
"""

from __future__ import annotations

from jgpy import (DIALECT, AdditionalDataUUID, Digest, IpAddress, JoinRsp, MergeId, MergeView, Message, PayloadUUID,
                  PingData, Range, TopologyUUID, UUID, View, ViewId, WireFormatError)
from jgpy._core import jg212
from jgpy.blocks.methodcall import decode_method_call
from jgpy.javaser import JavaSerializationError, ObjectInput, read_state_request

#: the errors that say "malformed input": every other outcome is a failure
EXPECTED = (WireFormatError, JavaSerializationError)

#: what the state socket's reader may consume in the javaser target, and the TCP target's largest frame
MAX_STREAM = 1 << 20


def _touch_message(m: Message) -> None:
    m.headers                                   # decodes every lazily kept header
    m.buffer
    DIALECT.encode_message(m)                   # re-sent as received (untouched headers are copied)
    if m.length:
        try:
            m.get_object()                      # a Message.setObject payload, if it is one
        except WireFormatError:
            pass


def decode_datagram(data: bytes) -> None:
    """A UDP datagram (or TCP frame payload), as the transport core (``TP.receive_datagrams``) decodes it."""
    dg = DIALECT.decode_datagram(data, check_version=False)
    for m in dg.messages:
        _touch_message(m)


def decode_object(data: bytes) -> None:
    """A ``Message.setObject`` payload (``Util.objectFromByteBuffer``)."""
    value = jg212.object_from_buffer(data, typed=True).value
    if isinstance(value, Message):
        _touch_message(value)


def decode_java_stream(data: bytes) -> None:
    """A Java object stream: the state socket's request (read in odd chunks, as a socket gives them), and
    every object the bytes hold."""
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        n = min(n, 1 + pos % 7)
        chunk = data[pos:pos + n]
        pos += len(chunk)
        return chunk
    try:
        read_state_request(read, MAX_STREAM)
    except JavaSerializationError:
        pass
    try:
        decode_method_call(data)                # an RPC server's reader: methodcall_read, else ObjectInput
    except JavaSerializationError:
        pass
    inp = ObjectInput.from_bytes(data)
    for _ in range(16):
        if not inp.remaining:
            break
        inp.read_object()


def decode_tcp(data: bytes) -> None:
    """A connecting peer's byte stream: the ``bela`` handshake, then length-prefixed frames."""
    _version, _addr, used = jg212.decode_tcp_handshake(data)
    dec = jg212.TcpFrameDecoder(MAX_STREAM)
    for frame in dec.feed(data[used:]):
        try:
            decode_datagram(frame)
        except WireFormatError:
            pass


#: what the value target decodes: data classes, then every header class by magic
VALUE_KINDS = [UUID, IpAddress, PayloadUUID, AdditionalDataUUID, TopologyUUID, View, MergeView, ViewId, Digest, JoinRsp,
               MergeId, PingData, Range, Message] + [t for _, t in sorted(DIALECT.header_types().items())]


def value_kind_index(value) -> int:
    return VALUE_KINDS.index(type(value))


def decode_value(data: bytes) -> None:
    """One value of a class the first byte picks (a header body, a View, a Digest ...), encoded again."""
    if not data:
        return
    value = DIALECT.decode(VALUE_KINDS[data[0] % len(VALUE_KINDS)], data[1:], exact=False)
    if isinstance(value, Message):
        _touch_message(value)
    elif value is not None:
        DIALECT.encode(value)


TARGETS = {"datagram": decode_datagram, "object": decode_object, "javaser": decode_java_stream,
           "tcp": decode_tcp, "value": decode_value}
TARGET_NAMES = list(TARGETS)


def target_of(data: bytes) -> str:
    return TARGET_NAMES[data[0] % len(TARGET_NAMES)] if data else "datagram"


def one_input(data: bytes) -> None:
    """The fuzzers' entry point: run the selected target, accept :data:`EXPECTED`, let anything else out."""
    if not data:
        return
    try:
        TARGETS[target_of(data)](data[1:])
    except EXPECTED:
        pass
