"""Human-readable rendering of decoded JGroups datagrams and TCP streams (``python -m jgpy decode``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from jgpy import DIALECT, Message, WireFormatError
from jgpy._core import jg212
from jgpy._core.message import flags_to_string
from jgpy.errors import version_string
from jgpy.headers import AuthHeader, CompressHeader, EncryptHeader, ExecutorHeader, LockingHeader, SequencerHeader
from jgpy.protocols.compress import inflate
from jgpy.protocols.executing import ExecRequest
from jgpy.protocols.locking import LockRequest


def protocol_label(pid: int) -> str:
    name = jg212.PROTOCOL_NAMES.get(pid)
    return f"{name}({pid})" if name else f"id {pid}"


def describe_message(m, index: int | None = None, what: str = "") -> list[str]:
    head = f"{what}msg {index}: " if index is not None else f"{what}msg: "
    parts = [f"src={m.src}", f"dst={m.dest if m.dest is not None else '<all>'}"]
    if m.flags:
        parts.append(f"flags={flags_to_string(m.flags)}")
    if m.has_buffer():
        payload = m.buffer
        preview = payload[:32].hex() + ("..." if len(payload) > 32 else "")
        parts.append(f"payload={len(payload)} bytes {preview}")
    lines = [head + " ".join(parts)]
    for pid, hdr in m.headers:
        if isinstance(hdr, AuthHeader) and hdr.token is not None and isinstance(hdr.token[1], bytes):
            lines.append(f"    {protocol_label(pid)}: AuthHeader(token=({hdr.token[0]!r}, "
                         f"{len(hdr.token[1])} bytes {hdr.token[1][:16].hex()}...))")
        else:
            lines.append(f"    {protocol_label(pid)}: {hdr!r}")
        if isinstance(hdr, CompressHeader) and m.has_buffer():
            lines.append("      " + _describe_compressed(m.buffer, hdr.original_size))
        if isinstance(hdr, SequencerHeader) and hdr.type != SequencerHeader.BCAST and m.has_buffer() and not what:
            lines.extend(_describe_wrapped(m.buffer))           # one level: a wrapped message wraps nothing
        if isinstance(hdr, EncryptHeader):
            lines.append("      " + _describe_encrypt(hdr, m))
        if isinstance(hdr, (LockingHeader, ExecutorHeader)) and m.has_buffer():
            lines.append("      " + _describe_request(LockRequest if isinstance(hdr, LockingHeader) else ExecRequest,
                                                      m.buffer))
    return lines


def _describe_wrapped(payload: bytes) -> list[str]:
    """The message a SEQUENCER FORWARD/WRAPPED_BCAST carries (``Util.objectToByteBuffer(msg)``), indented."""
    try:
        inner = DIALECT.object_from_buffer(payload)
    except Exception as e:  # noqa: BLE001 - reported, never raised: the decoder shows hostile traffic too
        return [f"      wrapped: NOT DECODABLE: {e}"]
    if not isinstance(inner, Message):
        return [f"      wrapped: not a message: {inner!r}"[:200]]
    return ["      " + line for line in describe_message(inner, None, "wrapped ")]


#: what the payload of an ENCRYPT message is, by header type
_ENCRYPT_PAYLOADS = {EncryptHeader.ENCRYPT: "cipher text", EncryptHeader.KEY_REQUEST: "the requester's X.509 RSA "
                     "public key", EncryptHeader.SECRETKEY: "the group key, RSA-encrypted for the requester"}


def _describe_encrypt(hdr, m) -> str:
    """An ENCRYPT header: the key version as the bytes writeUTF sends (the raw string is mostly U+FFFD) and what
    the payload holds."""
    version = "none" if hdr.version is None else hdr.version.encode("utf-8", "surrogatepass").hex()
    what = _ENCRYPT_PAYLOADS.get(hdr.type, "?")
    if hdr.type == EncryptHeader.ENCRYPT and hdr.encrypt_entire_msg:
        what = "cipher text of the whole message"
    return f"key version {version}; payload: {what} ({m.length if m.has_buffer() else 0} bytes)"


#: the decoder inflates at most this much of a COMPRESS payload
MAX_INFLATE_SHOWN = 16 << 20


def _describe_compressed(payload: bytes, original_size: int) -> str:
    """What a COMPRESS payload inflates to (bounded as COMPRESS bounds it)."""
    data, (_, why) = inflate(payload, original_size, MAX_INFLATE_SHOWN)
    if data is None:
        return f"inflated: NOT INFLATABLE: {why}"
    return f"inflated: {len(data)} bytes {data[:32].hex()}{'...' if len(data) > 32 else ''}"


def _describe_request(kind, payload: bytes) -> str:
    """The ``Locking$Request`` (CENTRAL_LOCK/PEER_LOCK) or ``Executing$Request`` (CENTRAL_EXECUTOR) a message
    carries."""
    try:
        return f"request: {kind.from_payload(DIALECT, payload)}"
    except Exception as e:  # noqa: BLE001 - reported, never raised
        return f"request: NOT DECODABLE: {e}"[:200]


def describe_datagram(data: bytes, prefix: str = "") -> list[str]:
    """Lines describing one datagram (or TCP frame payload); decoding errors are reported, not raised."""
    try:
        dg = DIALECT.decode_datagram(data, check_version=False)
        for m in dg.messages:
            m.headers
    except WireFormatError as e:
        return [f"{prefix}{len(data)} bytes: NOT DECODABLE: {e}"]
    flags = "|".join(n for bit, n in ((1, "LIST"), (2, "MULTICAST"), (4, "OOB")) if dg.tp_flags & bit) or "0"
    lines = [f"{prefix}{len(data)} bytes, version {version_string(dg.version)}, flags {flags}, "
             f"{len(dg.messages)} message(s)" + (f", {dg.trailing} trailing bytes" if dg.trailing else "")]
    for i, m in enumerate(dg.messages, 1):
        lines.extend("  " + line for line in describe_message(m, i))
    return lines


@dataclass
class TcpDecode:
    """A decoded TCP stream: the handshake (if it starts one) and the datagrams of its frames."""

    handshake: tuple | None = None
    frames: list[bytes] = field(default_factory=list)
    rest: int = 0
    error: str | None = None


def decode_tcp_stream(data: bytes, max_frame: int = 64 << 20) -> TcpDecode:
    out = TcpDecode()
    pos = 0
    if data[:4] == jg212.TCP_COOKIE:
        try:
            version, addr, used = jg212.decode_tcp_handshake(data)
        except WireFormatError as e:
            out.error = str(e)
            return out
        out.handshake = (version, addr)
        pos = used
    dec = jg212.TcpFrameDecoder(max_frame)
    try:
        out.frames = dec.feed(data[pos:])
    except WireFormatError as e:
        out.error = str(e)
    out.rest = dec.pending
    return out
