"""COMPRESS: deflates payloads on the way down, inflates them on the way up (``org.jgroups.protocols.COMPRESS``,
JGroups 2.12.2).

Down: a message whose payload has at least ``min_size`` bytes is compressed with zlib at ``compression_level``
(a zlib stream, header and Adler-32 included, as ``java.util.zip.Deflater`` writes by default); when the result is
smaller than the payload, the payload is replaced by it and a ``CompressHeader`` carries the original size;
otherwise the message goes down unchanged. As in 2.12 the message itself is changed (not a copy).

2.12 deflates with a 32 KB window whatever the payload's size (and reuses pooled Deflaters, which Python cannot
reset); jgpy sizes the window (and zlib's memory level) to the payload: a window at least as large as the
payload finds every match the 32 KB one would, any Inflater reads the stream, and setting up a fresh deflater
for 1 KB takes 4 us instead of 58 us. Only the zlib header's window field can differ from 2.12's bytes. Small
payloads are deflated and inflated without releasing the GIL (:mod:`jgpy.protocols.zlib_direct`).

Up: a message with a ``CompressHeader`` is inflated into a copy that goes up in its place.

Where jgpy deviates (each closes a hole 2.12 has; nothing changes on the wire):

* 2.12 allocates ``original_size`` bytes before it inflates anything: a 4-byte header makes a member allocate up
  to 2 GB (a negative size throws on the receive thread). jgpy checks the claim first: at most
  ``max_uncompressed_size`` and at most what deflate can possibly produce from the bytes received (1032 times
  their length, deflate's largest ratio, plus a little), and inflates into no more than the claimed size + 1, so
  a deflate bomb stops at the claim;
* 2.12 delivers what it inflated padded with zeros to the claimed size when the stream is shorter or truncated,
  cut to the claimed size when it is longer, and passes the *compressed* message up when the stream is corrupt.
  jgpy delivers only a complete stream that inflates to exactly the claimed size; anything else is counted and
  dropped (``dropped_bad_size``, ``dropped_corrupt``, ``dropped_size_mismatch``), with a rate-limited log line.
"""

from __future__ import annotations

from typing import Any

from jgpy._core.headers import CompressHeader
from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.protocols.zlib_direct import deflate, inflate_at_most
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, ignored, to_int, to_size
from jgpy.stack.protocol import UP_HEADER, Protocol

#: deflate's largest compression ratio (a run of one byte: 1032:1) and zlib's header/trailer: a stream of n
#: bytes cannot inflate to more than this
MAX_DEFLATE_RATIO = 1032
ZLIB_OVERHEAD = 64

DROP_COUNTERS = ("dropped_bad_size", "dropped_corrupt", "dropped_size_mismatch")


def inflate(payload: Any, original_size: int, max_size: int) -> tuple[bytes | None, tuple[str, str]]:
    """``(the payload inflated, ("", ""))`` if it is a complete zlib stream of exactly ``original_size`` bytes, else
    ``(None, (drop counter, why))``; never inflates more than ``original_size`` + 1 bytes, nor anything when the
    claim is negative, above ``max_size`` or above what deflate can produce from ``len(payload)`` bytes."""
    length = len(payload)
    if original_size < 0 or original_size > max_size or original_size > length * MAX_DEFLATE_RATIO + ZLIB_OVERHEAD:
        return None, ("dropped_bad_size", f"claims {original_size} bytes from {length}")
    data, complete = inflate_at_most(payload, original_size + 1)        # never more than the claim + 1
    if data is None:
        return None, ("dropped_corrupt", "not a zlib stream")
    if len(data) != original_size or not complete:
        more = "more than " if len(data) > original_size else ""
        return None, ("dropped_size_mismatch", f"inflates to {more}{len(data)} bytes "
                      f"({'complete' if complete else 'incomplete'}), claims {original_size}")
    return data, ("", "")


class COMPRESS(Protocol):
    NAME = "COMPRESS"
    IGNORED_PROPERTIES = {"pool_size": ignored("2.12's pool of Deflaters/Inflaters; jgpy uses a fresh zlib object "
                                               "per message (no lock, no wait)")}

    compression_level = Property(to_int, 9, "Compression level 0-9 (0=no compression, 9=best compression). "
                                            "Default is 9")
    min_size = Property(to_size, 500, "Minimal payload size of a message (in bytes) for compression to kick in. "
                                      "Default is 500 bytes")
    max_uncompressed_size = Property(
        to_size, 64 << 20, "jgpy: the largest original size a received CompressHeader may claim; a message claiming "
        "more is dropped before anything is inflated (2.12 allocates whatever the header claims)")

    def __init__(self) -> None:
        super().__init__()
        self.compressed_msgs = self.uncompressed_msgs = self.skipped_msgs = 0
        self.counters = dict.fromkeys(DROP_COUNTERS, 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a compressed message", self._rl)

    def init(self) -> None:
        if not -1 <= self.compression_level <= 9:
            raise ValueError(f"COMPRESS: compression_level={self.compression_level} is not in 0..9")

    def dump_stats(self) -> dict[str, Any]:
        d: dict[str, Any] = {"compressed": self.compressed_msgs, "uncompressed": self.uncompressed_msgs,
                             "not_smaller": self.skipped_msgs, "failed_msgs": self._guard.failed}
        d.update(self.counters)
        return d

    # ---- down ----

    def down_msg(self, msg: Message) -> Any:
        length = msg.length
        if length >= self.min_size and length > 0:
            compressed = deflate(msg.payload, self.compression_level)
            if compressed is not None:             # JGRP-1000: only when it saves something
                msg.set_buffer(compressed)
                msg.put_header(self.id, CompressHeader(length))
                self.compressed_msgs += 1
            else:
                self.skipped_msgs += 1
        return self.down_prot.down_msg(msg)

    # ---- up ----

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        pid = self.id
        out: list = []
        for msg in msgs:
            try:
                hdr = msg.get_header(pid)
                if hdr is None or not msg.length:       # 2.12 passes a header without a payload up as it is
                    out.append(msg)
                    continue
                inflated = self._inflate(msg, hdr.original_size)
                if inflated is not None:
                    out.append(inflated)
            except Exception:  # noqa: BLE001 - one bad message must not hurt the rest of the batch
                self._guard.failure(msg)
        if out:
            self.up_prot.up_batch(out)

    def _inflate(self, msg: Message, original_size: int) -> Message | None:
        data, problem = inflate(msg.payload, original_size, self.max_uncompressed_size)
        if data is None:
            counter, why = problem
            return self._drop(counter, msg, why)
        copy = msg.copy(False)                      # 2.12 copies too (JGRP-867): the received one stays as it was
        copy.set_buffer(data)
        self.uncompressed_msgs += 1
        return copy

    def _drop(self, counter: str, msg: Message, why: str) -> None:
        self.counters[counter] += 1
        self._rl.warning(counter, "%s: dropped a compressed message from %s: %s (%d so far)", self.local_addr,
                         msg.src, why, self.counters[counter])
        return None
