"""jgpy: a JGroups 2.12.2.Final-compatible group communication stack for Python.

The wire core is Cython (``jgpy._core``); protocols are Python modules named like their JGroups
counterparts (``jgpy.protocols``). This package speaks the 2.12 wire dialect byte for byte.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from jgpy.errors import ConfigError, IncompatibleVersionError, JgpyError, WireFormatError, UnknownMagicError
from jgpy._core.address import (Address, AdditionalDataUUID, IpAddress, PayloadUUID, TopologyUUID, UUID,
                                logical_name, set_logical_name)
from jgpy._core.types import Digest, JoinRsp, MergeId, MergeView, PingData, Range, View, ViewId
from jgpy._core.message import Message
from jgpy import headers
from jgpy._core.jg212 import (DIALECT, Datagram, JavaObject, object_from_buffer, object_to_buffer,
                              set_embedded_object_reader as _set_embedded_object_reader)
from jgpy.javaser import read_embedded_object as _read_embedded_object
from jgpy.stack.config import set_system_property

# the core reads Java object streams inside headers (Util.objectFromStream: PullHeader) through this bounded reader
_set_embedded_object_reader(_read_embedded_object)


if TYPE_CHECKING:     # what the lazy imports below give, for type checkers
    from jgpy.aio import AsyncChannel
    from jgpy.channel import Channel, ChannelError, Receiver


def __getattr__(name: str) -> Any:
    # the stack pulls in sockets and threads: import it on first use only
    if name in ("Channel", "Receiver", "ChannelError"):
        from jgpy import channel
        return getattr(channel, name)
    if name == "AsyncChannel":
        from jgpy.aio import AsyncChannel
        return AsyncChannel
    raise AttributeError(f"module 'jgpy' has no attribute {name!r}")

__all__ = [
    "AsyncChannel", "Channel", "ChannelError", "Receiver", "set_system_property",
    "Address", "AdditionalDataUUID", "ConfigError", "DIALECT", "Datagram", "Digest", "IncompatibleVersionError",
    "IpAddress", "JavaObject", "JgpyError", "JoinRsp", "MergeId", "MergeView", "Message", "PayloadUUID",
    "PingData", "Range", "TopologyUUID", "UUID", "UnknownMagicError", "View", "ViewId", "WireFormatError",
    "headers", "logical_name", "object_from_buffer", "object_to_buffer", "set_logical_name",
]
