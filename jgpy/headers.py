"""Header types of the JGroups 2.12 protocols (fields only; the wire layout is in the dialect)."""

from jgpy._core.headers import (  # noqa: F401
    CompressHeader, CoordAnnouncement, FcHeader, FdHeader, FdSockHeader, FlushHeader, FragHeader, GmsHeader, Header,
    HeartbeatHeader, MultiDestinationHeader, NakAckHeader, PingHeader, RequestCorrelatorHeader, SequencerHeader,
    SfcHeader, StableHeader, StateHeader, StreamingStateHeader, TpHeader, Unicast2Header, UnicastHeader,
    VerifyHeader,
)

__all__ = [
    "CompressHeader", "CoordAnnouncement", "FcHeader", "FdHeader", "FdSockHeader", "FlushHeader", "FragHeader",
    "GmsHeader", "Header", "HeartbeatHeader", "MultiDestinationHeader", "NakAckHeader", "PingHeader",
    "RequestCorrelatorHeader", "SequencerHeader", "SfcHeader", "StableHeader", "StateHeader", "StreamingStateHeader",
    "TpHeader", "Unicast2Header", "UnicastHeader", "VerifyHeader",
]
