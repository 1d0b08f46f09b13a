"""``org.jgroups.blocks.locking.LockService`` (2.12): cluster-wide locks over CENTRAL_LOCK or PEER_LOCK.

>>> service = LockService(ch)             # ch's stack has CENTRAL_LOCK (or PEER_LOCK) on top
>>> with service.get_lock("accounts"):   # lock() ... unlock()
...     ...

A lock belongs to the calling thread (Java: the Thread), as Java's LockService locks do: Java and jgpy members
lock the same names against each other. ``try_lock(timeout_ms)`` gives up after the timeout (None: only asks
once); a lock's condition (:meth:`Lock.new_condition`) waits and signals across the cluster.
"""

from __future__ import annotations

from typing import Any

from jgpy.channel import Channel
from jgpy.protocols.locking import ClientLock, Locking, current_owner


class Condition:
    """Java's lock Condition: ``await_`` releases the lock, waits for a signal, and takes it again."""

    def __init__(self, lock: Lock) -> None:
        self._lock = lock

    def await_(self, timeout_ms: int | None = None) -> bool:
        """Wait for :meth:`signal` (True) or ``timeout_ms`` (False); the lock is held again either way."""
        cl = self._lock._client(create=False)
        if cl is None or not cl.acquired:
            raise RuntimeError("await_() needs the lock held (IllegalMonitorStateException)")
        return cl.await_signal(timeout_ms)

    def signal(self) -> None:
        self._lock._prot.signal(self._lock.name, False)

    def signal_all(self) -> None:
        self._lock._prot.signal(self._lock.name, True)


class Lock:
    """One named cluster lock, held by the thread that locked it."""

    def __init__(self, service: LockService, name: str) -> None:
        self.name = name
        self._service = service
        self._prot = service.protocol

    def _client(self, create: bool = True) -> ClientLock | None:
        return self._prot.get_lock(self.name, current_owner(self._service.channel.address), create)

    def lock(self) -> None:
        cl = self._client()
        assert cl is not None
        cl.lock(current_owner(self._service.channel.address))

    def try_lock(self, timeout_ms: int | None = None) -> bool:
        """Take the lock if it is free (None), or within ``timeout_ms``; False if not."""
        cl = self._client()
        assert cl is not None
        return cl.try_lock(current_owner(self._service.channel.address), timeout_ms)

    def unlock(self) -> None:
        cl = self._client(create=False)
        if cl is not None:
            cl.unlock()

    def new_condition(self) -> Condition:
        return Condition(self)

    def __enter__(self) -> Lock:
        self.lock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.unlock()


class LockService:
    """Locks over ``channel``, whose stack must hold CENTRAL_LOCK or PEER_LOCK."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        prot = channel.stack.find(Locking)
        if not isinstance(prot, Locking):
            raise ValueError("the channel's stack has no locking protocol (CENTRAL_LOCK or PEER_LOCK)")
        self.protocol: Locking = prot

    def get_lock(self, name: str) -> Lock:
        return Lock(self, name)

    def unlock_all(self) -> None:
        self.protocol.unlock_all()

    def add_lock_listener(self, listener: Any) -> None:
        """``listener`` gets ``lockCreated(name)``, ``lockDeleted(name)``, ``locked(name, owner)``,
        ``unlocked(name, owner)``, ``awaiting(name, owner)``, ``awaited(name, owner)`` (Java's names), each
        optional."""
        self.protocol.add_lock_listener(listener)

    def remove_lock_listener(self, listener: Any) -> None:
        self.protocol.remove_lock_listener(listener)

    def print_locks(self) -> str:
        return self.protocol.print_locks()


__all__ = ["Condition", "Lock", "LockService"]
