"""Exceptions raised by jgpy."""

from __future__ import annotations


class JgpyError(Exception):
    """Base class of every error jgpy raises on purpose."""


class WireFormatError(JgpyError, ValueError):
    """Bytes that are not a valid JGroups message (or not of the dialect we speak).

    ``field`` names what was being read and ``offset`` is the byte offset in the buffer where
    reading it failed, so a bad datagram can be located in a hex dump.
    """

    def __init__(self, message: str, field: str | None = None, offset: int | None = None):
        self.reason = message
        self.field = field
        self.offset = offset
        where = []
        if field:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class IncompatibleVersionError(WireFormatError):
    """A datagram from a JGroups version whose wire format we do not speak."""

    def __init__(self, version: int, expected: int, offset: int = 0):
        self.version = version
        self.expected = expected
        super().__init__(
            f"JGroups wire version {version_string(version)} is not binary compatible with "
            f"{version_string(expected)} (major and minor must match)",
            "version",
            offset,
        )


class UnknownMagicError(WireFormatError):
    """A header or object class id that is not in the magic map of our dialect."""


class ConfigError(JgpyError):
    """A stack configuration that cannot be used as written."""


def version_string(v: int) -> str:
    """Render a JGroups version short (``(major << 11) + (minor << 6) + micro``) as text."""
    v &= 0xFFFF
    return f"{v >> 11}.{(v >> 6) & 0x1F}.{v & 0x3F}"
