"""LockService: cluster-wide locks (``org.jgroups.blocks.locking.LockService``, JGroups 2.12.2).

The channel's stack needs a locking protocol (CENTRAL_LOCK or PEER_LOCK) towards the top::

    ch = Channel(config_with_central_lock)
    locks = LockService(ch)
    ch.connect("lock-cluster")
    with locks.get_lock("mylock"):      # lock() ... unlock()
        ...

A lock belongs to the thread that took it (the owner is this member's address and the thread), as in Java:
the thread that locks must unlock. As 2.12's, ``unlock()`` may be called more than once. Java members and jgpy
members share the same locks. Never lock from a receiver callback (the delivery thread brings the answer).
"""

from __future__ import annotations

from typing import Any

from jgpy.protocols.locking import AwaitInfo, LockInfo, Locking, LockingError, LockNotification
from jgpy.stack.events import Event, EventType


class LockService:
    """The locks of ``channel`` (``LockService(JChannel)``)."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        prot = channel.stack.find(Locking)
        if prot is None:
            raise LockingError("the channel's configuration must include a locking protocol (CENTRAL_LOCK or "
                               "PEER_LOCK)")
        self.protocol: Locking = prot

    def get_lock(self, name: str) -> Lock:
        return Lock(self, name)

    def unlock_all(self) -> None:
        """Release every lock of this member (all threads)."""
        self._down(EventType.UNLOCK_ALL)

    def add_lock_listener(self, listener: LockNotification) -> None:
        self.protocol.add_lock_listener(listener)

    def remove_lock_listener(self, listener: LockNotification) -> None:
        self.protocol.remove_lock_listener(listener)

    def print_locks(self) -> str:
        return self.protocol.print_locks()

    def _down(self, type_: str, arg: Any = None) -> Any:
        return self.channel.stack.down(Event(type_, arg))


class Lock:
    """A named cluster-wide lock (``LockService.LockImpl``); usable as a context manager."""

    def __init__(self, service: LockService, name: str) -> None:
        self.service = service
        self.name = name

    def lock(self) -> None:
        """Wait until this thread holds the lock (raises :class:`LockingError` if the channel disconnects)."""
        self.service._down(EventType.LOCK, LockInfo(self.name))

    def try_lock(self, timeout: float | None = None) -> bool:
        """Take the lock if the granting members can give it within ``timeout`` seconds (None: only if it is
        free now, as ``tryLock()``). True if this thread holds it."""
        if timeout is None:
            info = LockInfo(self.name, is_trylock=True)
        else:
            info = LockInfo(self.name, is_trylock=True, use_timeout=True, timeout=max(0, int(timeout * 1000)))
        return bool(self.service._down(EventType.LOCK, info))

    def unlock(self) -> None:
        self.service._down(EventType.UNLOCK, LockInfo(self.name))

    def new_condition(self) -> Condition:
        """The lock's condition (one per lock, as in 2.12)."""
        return Condition(self)

    def __enter__(self) -> Lock:
        self.lock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unlock()

    def __repr__(self) -> str:
        return f"Lock({self.name!r})"


class Condition:
    """A lock's condition (``LockService.ConditionImpl``): wait for a signal, releasing the lock meanwhile."""

    def __init__(self, lock: Lock) -> None:
        self.lock = lock

    def await_(self, timeout: float | None = None) -> bool:
        """Release the lock, wait for a signal (at most ``timeout`` seconds), take the lock again. False if the
        time ran out. ``await`` is a Python keyword, hence the underscore."""
        name = self.lock.name
        if timeout is None:
            self.lock.service._down(EventType.LOCK_AWAIT, LockInfo(name))
            return True
        left = self.lock.service._down(EventType.LOCK_AWAIT, LockInfo(name, use_timeout=True,
                                                                     timeout=max(0, int(timeout * 1000))))
        return left is not None and left > 0

    def signal(self) -> None:
        self.lock.service._down(EventType.LOCK_SIGNAL, AwaitInfo(self.lock.name, False))

    def signal_all(self) -> None:
        self.lock.service._down(EventType.LOCK_SIGNAL, AwaitInfo(self.lock.name, True))
