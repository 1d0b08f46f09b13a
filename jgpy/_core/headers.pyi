"""Types of jgpy._core.headers (Cython): the header classes of the JGroups 2.12 protocols, fields only.

The wire layout of each lives in the dialect; ``FIELDS`` names the fields in wire order, ``JAVA_CLASS`` the Java
@disjoint_base
class (without the ``org.jgroups.`` prefix), ``TYPE_NAMES`` the names of the ``type`` constants.
"""

from typing import Any, ClassVar, Iterable, Mapping

from typing_extensions import Self, disjoint_base

from jgpy._core.address import Address, IpAddress
from jgpy._core.types import Digest, JoinRsp, MergeId, PingData, Range, View, ViewId

class Header:
    FIELDS: ClassVar[tuple[str, ...]]
    TYPE_NAMES: ClassVar[dict[int, str]]
    def copy(self) -> Self: ...
    def type_name(self) -> str: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __reduce__(self) -> tuple[Any, ...]: ...

# ---- on every data message ----

@disjoint_base
class TpHeader(Header):
    JAVA_CLASS: ClassVar[str]
    channel_name: str
    def __init__(self, channel_name: str = "") -> None: ...

@disjoint_base
class NakAckHeader(Header):
    JAVA_CLASS: ClassVar[str]
    MSG: ClassVar[int]
    XMIT_REQ: ClassVar[int]
    XMIT_RSP: ClassVar[int]
    type: int
    seqno: int
    range: Range | None
    sender: Address | None
    def __init__(self, type: int = 1, seqno: int = -1, range: Range | None = None,
                 sender: Address | None = None) -> None: ...
    @staticmethod
    def msg(seqno: int) -> NakAckHeader: ...
    @staticmethod
    def xmit_req(low: int, high: int, original_sender: Address | None) -> NakAckHeader: ...
    @staticmethod
    def xmit_rsp(seqno: int) -> NakAckHeader: ...

@disjoint_base
class UnicastHeader(Header):
    JAVA_CLASS: ClassVar[str]
    DATA: ClassVar[int]
    ACK: ClassVar[int]
    SEND_FIRST_SEQNO: ClassVar[int]
    type: int
    seqno: int
    conn_id: int
    first: bool
    def __init__(self, type: int = 0, seqno: int = 0, conn_id: int = 0, first: bool = False) -> None: ...

@disjoint_base
class FragHeader(Header):
    JAVA_CLASS: ClassVar[str]
    id: int
    frag_id: int
    num_frags: int
    def __init__(self, id: int = 0, frag_id: int = 0, num_frags: int = 0) -> None: ...

@disjoint_base
class FcHeader(Header):
    JAVA_CLASS: ClassVar[str]
    REPLENISH: ClassVar[int]
    CREDIT_REQUEST: ClassVar[int]
    type: int
    def __init__(self, type: int = 1) -> None: ...

# ---- control headers ----

@disjoint_base
class PingHeader(Header):
    JAVA_CLASS: ClassVar[str]
    GET_MBRS_REQ: ClassVar[int]
    GET_MBRS_RSP: ClassVar[int]
    type: int
    data: PingData | None
    cluster_name: str | None
    view_id: ViewId | None
    def __init__(self, type: int = 1, data: PingData | None = None, cluster_name: str | None = None,
                 view_id: ViewId | None = None) -> None: ...

@disjoint_base
class GmsHeader(Header):
    JAVA_CLASS: ClassVar[str]
    JOIN_REQ: ClassVar[int]
    JOIN_RSP: ClassVar[int]
    LEAVE_REQ: ClassVar[int]
    LEAVE_RSP: ClassVar[int]
    VIEW: ClassVar[int]
    MERGE_REQ: ClassVar[int]
    MERGE_RSP: ClassVar[int]
    INSTALL_MERGE_VIEW: ClassVar[int]
    CANCEL_MERGE: ClassVar[int]
    VIEW_ACK: ClassVar[int]
    JOIN_REQ_WITH_STATE_TRANSFER: ClassVar[int]
    INSTALL_MERGE_VIEW_OK: ClassVar[int]
    GET_DIGEST_REQ: ClassVar[int]
    GET_DIGEST_RSP: ClassVar[int]
    INSTALL_DIGEST: ClassVar[int]
    type: int
    view: View | None
    mbr: Address | None
    mbrs: tuple[Address, ...] | None
    join_rsp: JoinRsp | None
    my_digest: Digest | None
    merge_id: MergeId | None
    merge_rejected: bool
    use_flush_if_present: bool
    def __init__(self, type: int = 0, view: View | None = None, mbr: Address | None = None,
                 mbrs: Iterable[Address] | None = None, join_rsp: JoinRsp | None = None,
                 my_digest: Digest | None = None, merge_id: MergeId | None = None, merge_rejected: bool = False,
                 use_flush_if_present: bool = False) -> None: ...

@disjoint_base
class Unicast2Header(Header):
    JAVA_CLASS: ClassVar[str]
    DATA: ClassVar[int]
    XMIT_REQ: ClassVar[int]
    SEND_FIRST_SEQNO: ClassVar[int]
    STABLE: ClassVar[int]
    type: int
    seqno: int
    high_seqno: int
    conn_id: int
    first: bool
    def __init__(self, type: int = 0, seqno: int = 0, high_seqno: int = 0, conn_id: int = 0,
                 first: bool = False) -> None: ...

@disjoint_base
class StableHeader(Header):
    JAVA_CLASS: ClassVar[str]
    STABLE_GOSSIP: ClassVar[int]
    STABILITY: ClassVar[int]
    type: int
    stable_digest: Digest | None
    def __init__(self, type: int = 1, stable_digest: Digest | None = None) -> None: ...

@disjoint_base
class FdHeader(Header):
    JAVA_CLASS: ClassVar[str]
    HEARTBEAT: ClassVar[int]
    HEARTBEAT_ACK: ClassVar[int]
    SUSPECT: ClassVar[int]
    type: int
    mbrs: tuple[Address, ...] | None
    from_: Address | None
    def __init__(self, type: int = 0, mbrs: Iterable[Address] | None = None, from_: Address | None = None) -> None: ...

class HeartbeatHeader(Header):
    JAVA_CLASS: ClassVar[str]
    def __init__(self) -> None: ...

@disjoint_base
class FdSockHeader(Header):
    JAVA_CLASS: ClassVar[str]
    SUSPECT: ClassVar[int]
    WHO_HAS_SOCK: ClassVar[int]
    I_HAVE_SOCK: ClassVar[int]
    GET_CACHE: ClassVar[int]
    GET_CACHE_RSP: ClassVar[int]
    type: int
    mbr: Address | None
    sock_addr: IpAddress | None
    cached_addrs: tuple[tuple[Address, IpAddress], ...] | None
    mbrs: tuple[Address, ...] | None
    def __init__(self, type: int = 10, mbr: Address | None = None, sock_addr: IpAddress | None = None,
                 cached_addrs: Mapping[Address, IpAddress] | Iterable[tuple[Address, IpAddress]] | None = None,
                 mbrs: Iterable[Address] | None = None) -> None: ...

@disjoint_base
class VerifyHeader(Header):
    JAVA_CLASS: ClassVar[str]
    ARE_YOU_DEAD: ClassVar[int]
    I_AM_NOT_DEAD: ClassVar[int]
    type: int
    from_: Address | None
    def __init__(self, type: int = 1, from_: Address | None = None) -> None: ...

@disjoint_base
class SfcHeader(Header):
    JAVA_CLASS: ClassVar[str]
    CREDIT_REQUEST: ClassVar[int]
    REPLENISH: ClassVar[int]
    URGENT_CREDIT_REQUEST: ClassVar[int]
    type: int
    def __init__(self, type: int = 1) -> None: ...

@disjoint_base
class StateHeader(Header):
    JAVA_CLASS: ClassVar[str]
    STATE_REQ: ClassVar[int]
    STATE_RSP: ClassVar[int]
    type: int
    id: int
    sender: Address | None
    my_digest: Digest | None
    state_id: str | None
    def __init__(self, type: int = 1, id: int = 0, sender: Address | None = None, my_digest: Digest | None = None,
                 state_id: str | None = None) -> None: ...

@disjoint_base
class StreamingStateHeader(Header):
    JAVA_CLASS: ClassVar[str]
    STATE_REQ: ClassVar[int]
    STATE_RSP: ClassVar[int]
    STATE_PART: ClassVar[int]
    type: int
    id: int
    sender: Address | None
    my_digest: Digest | None
    bind_addr: IpAddress | None
    state_id: str | None
    def __init__(self, type: int = 1, id: int = 0, sender: Address | None = None, my_digest: Digest | None = None,
                 bind_addr: IpAddress | None = None, state_id: str | None = None) -> None: ...

@disjoint_base
class FlushHeader(Header):
    JAVA_CLASS: ClassVar[str]
    START_FLUSH: ClassVar[int]
    STOP_FLUSH: ClassVar[int]
    FLUSH_COMPLETED: ClassVar[int]
    ABORT_FLUSH: ClassVar[int]
    FLUSH_BYPASS: ClassVar[int]
    FLUSH_RECONCILE: ClassVar[int]
    FLUSH_RECONCILE_OK: ClassVar[int]
    FLUSH_NOT_COMPLETED: ClassVar[int]
    type: int
    view_id: int
    flush_participants: tuple[Address, ...] | None
    digest: Digest | None
    def __init__(self, type: int = 0, view_id: int = 0, flush_participants: Iterable[Address] | None = None,
                 digest: Digest | None = None) -> None: ...

@disjoint_base
class SequencerHeader(Header):
    JAVA_CLASS: ClassVar[str]
    FORWARD: ClassVar[int]
    BCAST: ClassVar[int]
    WRAPPED_BCAST: ClassVar[int]
    type: int
    tag: ViewId | None
    def __init__(self, type: int = 1, tag: ViewId | None = None) -> None: ...

@disjoint_base
class CompressHeader(Header):
    JAVA_CLASS: ClassVar[str]
    original_size: int
    def __init__(self, original_size: int = 0) -> None: ...

@disjoint_base
class CoordAnnouncement(Header):
    JAVA_CLASS: ClassVar[str]
    view: View | None
    def __init__(self, view: View | None = None) -> None: ...

@disjoint_base
class RequestCorrelatorHeader(Header):
    JAVA_CLASS: ClassVar[str]
    REQ: ClassVar[int]
    RSP: ClassVar[int]
    type: int
    id: int
    rsp_expected: bool
    corr_id: int
    def __init__(self, type: int = 0, id: int = 0, rsp_expected: bool = False, corr_id: int = 201) -> None: ...

@disjoint_base
class MultiDestinationHeader(RequestCorrelatorHeader):
    exclusion_list: tuple[Address, ...] | None
    def __init__(self, type: int = 0, id: int = 0, rsp_expected: bool = False, corr_id: int = 201,
                 exclusion_list: Iterable[Address] | None = None) -> None: ...
