"""COMPRESS's deflate and inflate of small payloads: libz called through ctypes *holding the GIL*.

Python's ``zlib`` releases the GIL around every call. For a 1 KB message deflating takes about 4 us, but giving
the GIL away lets the member's receive and delivery threads take it, and the sending thread waits for it again:
a jgpy sender on compress.xml spent 134 us per 1 KB multicast that way, 29 us with these calls (which also size
the window to the payload: setting up a 32 KB-window deflater costs 58 us). Payloads above
:data:`DIRECT_MAX` bytes (where the work dwarfs the hand-over) and machines without a loadable libz use ``zlib``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import zlib
from ctypes import c_char_p, c_int, c_uint, c_ulong, c_void_p
from typing import Any

#: payloads (to deflate) and claimed sizes (to inflate) up to this many bytes go through libz directly
DIRECT_MAX = 64 << 10

#: zlib's window sizes (log2) and the lookahead its window keeps free (MIN_LOOKAHEAD)
MIN_WBITS, MAX_WBITS, LOOKAHEAD = 9, 15, 262
Z_OK, Z_STREAM_END, Z_NO_FLUSH, Z_FINISH, Z_DEFLATED = 0, 1, 0, 4, 8


class _ZStream(ctypes.Structure):
    _fields_ = [("next_in", c_void_p), ("avail_in", c_uint), ("total_in", c_ulong),
                ("next_out", c_void_p), ("avail_out", c_uint), ("total_out", c_ulong),
                ("msg", c_char_p), ("state", c_void_p), ("zalloc", c_void_p), ("zfree", c_void_p),
                ("opaque", c_void_p), ("data_type", c_int), ("adler", c_ulong), ("reserved", c_ulong)]


def _load() -> Any:
    for name in ("libz.so.1", "libz.dylib", None):        # None: ask ctypes.util (it may run ldconfig)
        try:
            lib = ctypes.PyDLL(name or ctypes.util.find_library("z") or "libz.so")   # PyDLL: calls keep the GIL
            lib.zlibVersion.restype = c_char_p
            lib.zlibVersion()
            return lib
        except (OSError, AttributeError):
            continue
    return None


_LIB = _load()
_VERSION = _LIB.zlibVersion() if _LIB is not None else b""
_SIZE = ctypes.sizeof(_ZStream)


def window_bits(length: int) -> int:
    """The smallest window that holds ``length`` bytes and zlib's lookahead (at most 32 KB)."""
    return min(MAX_WBITS, max(MIN_WBITS, (length + LOOKAHEAD - 1).bit_length()))


def deflate(payload: Any, level: int) -> bytes | None:
    """A zlib stream of ``payload`` at ``level`` if it is smaller than the payload, else None."""
    length = len(payload)
    wbits = window_bits(length)
    if _LIB is None or length > DIRECT_MAX:
        deflater = zlib.compressobj(level, zlib.DEFLATED, wbits, max(1, wbits - 7))
        out = deflater.compress(payload) + deflater.flush()
        return out if len(out) < length else None
    src = bytes(payload)
    dst = ctypes.create_string_buffer(length)          # 2.12's rule: only a smaller result is used
    s = _ZStream()
    if _LIB.deflateInit2_(ctypes.byref(s), level, Z_DEFLATED, wbits, max(1, wbits - 7), 0, _VERSION, _SIZE) != Z_OK:
        raise MemoryError("deflateInit2 failed")
    try:
        s.next_in, s.avail_in = ctypes.cast(c_char_p(src), c_void_p), length
        s.next_out, s.avail_out = ctypes.addressof(dst), length
        done = _LIB.deflate(ctypes.byref(s), Z_FINISH) == Z_STREAM_END
        total = s.total_out
    finally:
        _LIB.deflateEnd(ctypes.byref(s))
    return ctypes.string_at(dst, total) if done and total < length else None


def inflate_at_most(payload: Any, limit: int) -> tuple[bytes | None, bool]:
    """``(what the zlib stream inflates to, at most limit bytes; whether the stream ended)``; ``(None, False)``
    for data that is not a zlib stream."""
    if _LIB is None or limit > DIRECT_MAX:
        inflater = zlib.decompressobj()
        try:
            return inflater.decompress(payload, limit), inflater.eof
        except zlib.error:
            return None, False
    src = bytes(payload)
    dst = ctypes.create_string_buffer(max(1, limit))
    s = _ZStream()
    if _LIB.inflateInit_(ctypes.byref(s), _VERSION, _SIZE) != Z_OK:
        raise MemoryError("inflateInit failed")
    try:
        s.next_in, s.avail_in = ctypes.cast(c_char_p(src), c_void_p), len(src)
        s.next_out, s.avail_out = ctypes.addressof(dst), limit
        rc = _LIB.inflate(ctypes.byref(s), Z_NO_FLUSH)
        total = s.total_out
    finally:
        _LIB.inflateEnd(ctypes.byref(s))
    if rc not in (Z_OK, Z_STREAM_END, -5):               # -5: Z_BUF_ERROR (no progress: truncated or no room)
        return None, False
    return ctypes.string_at(dst, total), rc == Z_STREAM_END
