"""Events that travel up and down the protocol stack (``org.jgroups.Event``).

Messages do not travel as events: they use the dedicated ``down_msg``/``up_batch`` paths (see
:mod:`jgpy.stack.protocol`), so an event is always a control event with an optional argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class EventType:
    """Event type constants (names and meaning as in JGroups 2.12's ``Event``)."""

    CONNECT = "CONNECT"                            # arg: cluster name
    DISCONNECT = "DISCONNECT"                      # arg: local address
    VIEW_CHANGE = "VIEW_CHANGE"                    # arg: View
    TMP_VIEW = "TMP_VIEW"                          # arg: View (the coordinator's next view, before it is installed)
    SET_LOCAL_ADDRESS = "SET_LOCAL_ADDRESS"        # arg: UUID
    SUSPECT = "SUSPECT"                            # arg: Address
    UNSUSPECT = "UNSUSPECT"                        # arg: Address
    FIND_INITIAL_MBRS = "FIND_INITIAL_MBRS"        # arg: join promise or None; returns list[PingData]
    FIND_ALL_VIEWS = "FIND_ALL_VIEWS"              # returns list[PingData]
    GET_DIGEST = "GET_DIGEST"                      # returns Digest
    SET_DIGEST = "SET_DIGEST"                      # arg: Digest
    MERGE_DIGEST = "MERGE_DIGEST"                  # arg: Digest
    OVERWRITE_DIGEST = "OVERWRITE_DIGEST"          # arg: Digest
    BECOME_SERVER = "BECOME_SERVER"
    GET_PHYSICAL_ADDRESS = "GET_PHYSICAL_ADDRESS"  # arg: logical address; returns IpAddress or None
    SET_PHYSICAL_ADDRESS = "SET_PHYSICAL_ADDRESS"  # arg: (logical, physical)
    GET_LOGICAL_PHYSICAL_MAPPINGS = "GET_LOGICAL_PHYSICAL_MAPPINGS"
    STABLE = "STABLE"                              # arg: Digest (stability vector)
    SUSPEND_STABLE = "SUSPEND_STABLE"              # arg: max suspend time (ms)
    RESUME_STABLE = "RESUME_STABLE"
    CLOSE_BARRIER = "CLOSE_BARRIER"
    OPEN_BARRIER = "OPEN_BARRIER"
    GET_STATE = "GET_STATE"                        # arg: StateTransferInfo
    BLOCK = "BLOCK"
    UNBLOCK = "UNBLOCK"
    MERGE = "MERGE"                                # arg: {coordinator: View}
    PREPARE_VIEW = "PREPARE_VIEW"
    CONFIG = "CONFIG"                              # arg: dict
    INFO = "INFO"
    # ---- pbcast.FLUSH ----
    SUSPEND = "SUSPEND"                            # arg: participants (list) or None; returns True once flushed
    RESUME = "RESUME"                              # arg: members to send STOP_FLUSH to, or None (everybody)
    SUSPEND_BUT_FAIL = "SUSPEND_BUT_FAIL"          # down, no arg: START_FLUSH to the view and return at once (2.12:
    #                                                for testing a flush whose coordinator crashes mid-flush)
    REBROADCAST = "REBROADCAST"                    # down to NAKACK, arg: Digest (fetch what it says others have)
    # ---- state transfer (pbcast.STATE_TRANSFER, pbcast.STREAMING_STATE_TRANSFER, the channel) ----
    GET_APPLSTATE = "GET_APPLSTATE"                # up, arg: StateTransferInfo(state_id); returns StateTransferInfo(state)
    GET_STATE_OK = "GET_STATE_OK"                  # up, arg: StateTransferInfo(target=provider, state_id, state)
    STATE_TRANSFER_OUTPUTSTREAM = "STATE_TRANSFER_OUTPUTSTREAM"   # up, arg: StateTransferInfo(output_stream)
    STATE_TRANSFER_INPUTSTREAM = "STATE_TRANSFER_INPUTSTREAM"     # up, arg: StateTransferInfo(input_stream or None)
    STATE_TRANSFER_OUTPUTSTREAM_CLOSED = "STATE_TRANSFER_OUTPUTSTREAM_CLOSED"
    STATE_TRANSFER_INPUTSTREAM_CLOSED = "STATE_TRANSFER_INPUTSTREAM_CLOSED"
    # ---- locking (CENTRAL_LOCK, PEER_LOCK; jgpy.blocks.LockService) ----
    LOCK = "LOCK"                                  # arg: LockInfo; returns a bool for a try-lock
    UNLOCK = "UNLOCK"                              # arg: LockInfo
    UNLOCK_ALL = "UNLOCK_ALL"
    LOCK_AWAIT = "LOCK_AWAIT"                      # arg: LockInfo; returns the ms left with a timeout
    LOCK_SIGNAL = "LOCK_SIGNAL"                    # arg: AwaitInfo
    # jgpy: the NAKACK digest of what the layers above NAKACK (the application included) have finished
    # processing, rather than what NAKACK has handed to the delivery thread (GET_DIGEST); returns Digest
    GET_DELIVERED_DIGEST = "GET_DELIVERED_DIGEST"


class ConnectArg(str):
    """The argument of CONNECT: the cluster name (a ``str``, as every protocol reads it) with the options of
    2.12's CONNECT_USE_FLUSH / CONNECT_WITH_STATE_TRANSFER(_USE_FLUSH) events: ``use_flush`` (run FLUSH around
    our join if it is in the stack), ``state_transfer`` (the join is followed by a state transfer, which ends
    the join's flush)."""

    use_flush: bool
    state_transfer: bool

    def __new__(cls, cluster: str, use_flush: bool = True, state_transfer: bool = False) -> "ConnectArg":
        self = super().__new__(cls, cluster)
        self.use_flush = use_flush
        self.state_transfer = state_transfer
        return self


@dataclass(slots=True)
class StateTransferInfo:
    """The argument of the state transfer events (``org.jgroups.stack.StateTransferInfo``).

    ``target`` is the provider (GET_STATE, GET_STATE_OK) or the requester (GET_APPLSTATE, the output
    stream); ``timeout`` in ms; ``state`` the byte state; ``input_stream``/``output_stream`` the streams of
    pbcast.STREAMING_STATE_TRANSFER (binary file-like objects).
    """

    target: Any = None
    state_id: str | None = None
    timeout: int = 0
    state: bytes | None = None
    input_stream: Any = None
    output_stream: Any = None


@dataclass(slots=True)
class Event:
    type: str
    arg: Any = None

    def __repr__(self) -> str:
        return f"Event({self.type}{', ' + repr(self.arg) if self.arg is not None else ''})"
