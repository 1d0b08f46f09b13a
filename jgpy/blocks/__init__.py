"""JGroups building blocks (``org.jgroups.blocks``), wire-compatible with Java 2.12's."""

from jgpy.blocks.executor import ExecutionRunner, ExecutionService
from jgpy.blocks.locking import Condition, Lock, LockService
from jgpy.protocols.executing import ExecutionError
from jgpy.protocols.locking import LockingError, LockNotification, Owner

__all__ = ["Condition", "ExecutionError", "ExecutionRunner", "ExecutionService", "Lock", "LockNotification",
           "LockService", "LockingError", "Owner"]
