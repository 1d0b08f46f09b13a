"""CENTRAL_LOCK: locks granted by the coordinator (``org.jgroups.protocols.CENTRAL_LOCK``, JGroups 2.12.2).

Every member sends its lock and unlock requests to the coordinator (the first member of the view), which
queues them per lock and grants in order of arrival. ``num_backups`` members following the coordinator in the
view keep a copy of the lock table (CREATE_LOCK / DELETE_LOCK and CREATE_AWAITER / DELETE_AWAITER from the
coordinator; a new backup gets the whole table). When the coordinator leaves or crashes, the next member takes
over with its copy: the locks held stay held (those of members that left are released), and every member sends
the GRANT_LOCKs it still waits for to the new coordinator. The message format and the rest are
:mod:`jgpy.protocols.locking`'s.

A Java 2.12 coordinator has a race jgpy's has not: its ``Locking.handleLockRequest`` removes an emptied
ServerLock from the table after leaving the lock's monitor, so a release that empties a lock, handled while
another member's GRANT_LOCK for it waits on that monitor, can drop the lock just granted; the next GRANT_LOCK
then makes a new one and is granted too (fixed in Java by JGRP-1660, 3.4). jgpy members cannot prevent it;
jgpy's server handles a request and the table change under one lock.
"""

from __future__ import annotations

from typing import Any

from jgpy.protocols.central import CentralCoordinator
from jgpy.protocols.locking import Locking, Owner, RequestType
from jgpy.stack.properties import Property, to_int

T = RequestType


class CENTRAL_LOCK(Locking, CentralCoordinator):
    NAME = "CENTRAL_LOCK"

    num_backups = Property(to_int, 1, "Number of backups to the coordinator. Server locks get replicated to "
                                      "these nodes as well")

    def __init__(self) -> None:
        Locking.__init__(self)
        CentralCoordinator.__init__(self)

    # ---- where requests go ----

    def send_grant_lock_request(self, name: str, owner: Owner, timeout: int, is_trylock: bool) -> None:
        if self.coord is not None:
            self.send(self.coord, T.GRANT_LOCK, name, owner, timeout, is_trylock)

    def send_release_lock_request(self, name: str, owner: Owner) -> None:
        if self.coord is not None:
            self.send(self.coord, T.RELEASE_LOCK, name, owner)

    def send_await_condition_request(self, name: str, owner: Owner | None) -> None:
        self.send(self.coord, T.LOCK_AWAIT, name, owner)

    def send_signal_condition_request(self, name: str, all_: bool) -> None:
        self.send(self.coord, T.COND_SIG_ALL if all_ else T.COND_SIG, name, None)

    def send_delete_await_condition_request(self, name: str, owner: Owner | None) -> None:
        self.send(self.coord, T.DELETE_LOCK_AWAIT, name, owner)

    # ---- the coordinator's backups ----

    def notify(self, event: str, *args: Any) -> None:
        """2.12's CENTRAL_LOCK listens to its own lock events: the coordinator tells its backups."""
        if self.is_coord:
            update = _BACKUP_UPDATES.get(event)
            if update is not None:
                self._update_backups(update, *args)
        super().notify(event, *args)

    def _update_backups(self, type_: RequestType, name: str, owner: Owner) -> None:
        for backup in self.backups_now():
            self.send(backup, type_, name, owner)

    def handle_view(self, view: Any) -> None:
        super().handle_view(view)
        old_coord, added = self.update_coordinator(list(view.members or ()), self.local_addr, self.num_backups)
        if added:
            self._copy_locks_to(added)
        if old_coord is not None and old_coord != self.coord:
            with self.client_locks_lock:
                pending = [cl for owners in self.client_locks.values() for cl in owners.values()
                           if not cl.acquired and not cl.denied and cl.owner is not None]
            for cl in pending:
                self.send_grant_lock_request(cl.name, cl.owner, cl.timeout, cl.is_trylock)

    def _copy_locks_to(self, new_backups: list[Any]) -> None:
        with self.server_lock:
            copy = [(sl.name, sl.owner, list(sl.waiters)) for sl in self.server_locks.values()]
        for name, owner, waiters in copy:
            for backup in new_backups:
                if owner is not None:
                    self.send(backup, T.CREATE_LOCK, name, owner)
                for w in waiters:      # 2.12 sends these as LOCK_AWAIT to the coordinator (itself): a bug
                    self.send(backup, T.CREATE_AWAITER, name, w)

    def stop(self) -> None:
        super().stop()
        self.reset_coordinator()

    def dump_stats(self) -> dict[str, Any]:
        return {**super().dump_stats(), **self.coordinator_stats()}


_BACKUP_UPDATES = {"locked": T.CREATE_LOCK, "unlocked": T.DELETE_LOCK, "awaiting": T.CREATE_AWAITER,
                   "awaited": T.DELETE_AWAITER}
