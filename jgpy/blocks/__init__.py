"""JGroups building blocks (``org.jgroups.blocks``), wire-compatible with Java 2.12's: MessageDispatcher and
RpcDispatcher over a RequestCorrelator (protocol id 201), MethodCall in every 2.12 mode; ReplicatedHashMap,
DistributedQueue, ReplicatedTree, NotificationBus, LockService (over CENTRAL_LOCK / PEER_LOCK), ExecutionService (over CENTRAL_EXECUTOR)."""

from jgpy.blocks.correlator import (GroupRequest, RequestCorrelator, RequestOptions, ResponseMode, Rsp, RspFilter,
                                    RspList, SuspectedError)
from jgpy.blocks.dispatcher import MessageDispatcher
from jgpy.blocks.distributed_queue import DistributedQueue
from jgpy.blocks.executor import ExecutionRunner, ExecutionService
from jgpy.blocks.locking import Condition, Lock, LockService
from jgpy.blocks.methodcall import MethodCall
from jgpy.blocks.notification_bus import NotificationBus
from jgpy.blocks.replicated_hashmap import ReplicatedHashMap
from jgpy.blocks.replicated_tree import ReplicatedTree
from jgpy.blocks.rpc import NoSuchMethodError, RpcDispatcher, rpc_method
from jgpy.javaser_values import JavaException
from jgpy.protocols.executing import ExecutionError
from jgpy.protocols.locking import LockingError, LockNotification, Owner

__all__ = ["Condition", "DistributedQueue", "ExecutionError", "ExecutionRunner", "ExecutionService", "GroupRequest", "JavaException",
           "Lock", "LockNotification", "LockService", "LockingError", "MessageDispatcher", "MethodCall",
           "NoSuchMethodError", "NotificationBus", "Owner", "ReplicatedHashMap", "ReplicatedTree", "RequestCorrelator",
           "RequestOptions", "ResponseMode", "Rsp", "RspFilter", "RspList", "RpcDispatcher", "SuspectedError",
           "rpc_method"]
