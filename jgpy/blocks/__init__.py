"""JGroups building blocks (``org.jgroups.blocks``), wire-compatible with Java 2.12's: MessageDispatcher and
RpcDispatcher over a RequestCorrelator (protocol id 201), MethodCall in every 2.12 mode; ReplicatedHashMap, NotificationBus,
LockService (over the CENTRAL_LOCK / PEER_LOCK protocols)."""

from jgpy.blocks.correlator import (GroupRequest, RequestCorrelator, RequestOptions, ResponseMode, Rsp, RspFilter,
                                    RspList, SuspectedError)
from jgpy.blocks.dispatcher import MessageDispatcher
from jgpy.blocks.locking import LockService
from jgpy.blocks.methodcall import MethodCall
from jgpy.blocks.notification_bus import NotificationBus
from jgpy.blocks.replicated_hashmap import ReplicatedHashMap
from jgpy.blocks.rpc import NoSuchMethodError, RpcDispatcher, rpc_method
from jgpy.javaser_values import JavaException

__all__ = ["GroupRequest", "JavaException", "LockService", "MessageDispatcher", "MethodCall", "NoSuchMethodError", "NotificationBus",
           "ReplicatedHashMap", "RequestCorrelator", "RequestOptions", "ResponseMode", "Rsp", "RspFilter", "RspList", "RpcDispatcher",
           "SuspectedError", "rpc_method"]
