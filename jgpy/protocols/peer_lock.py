"""PEER_LOCK: locks granted by every member (``org.jgroups.protocols.PEER_LOCK``, JGroups 2.12.2).

Lock requests are multicast; every member (the requester too) runs the server side and answers, and the
lock is held once every member of the view at the time of the request (still in the view) granted it.
Without a total order below (SEQUENCER), two members asking at once can deadlock, each granted by some:
use ``try_lock`` with a timeout and retries, as 2.12's documentation says. The message format and the rest
are :mod:`jgpy.protocols.locking`'s.
"""

from __future__ import annotations

from typing import Any

from jgpy.protocols.locking import ClientLock, Locking, Owner, RequestType

T = RequestType


class PeerLock(ClientLock):
    """A client lock granted when every member that was in the view when it was created granted it."""

    def __init__(self, prot: Locking, name: str, owner: Owner) -> None:
        super().__init__(prot, name, owner)
        self.grants: set[Any] = set(prot.view.members or ()) if prot.view is not None else set()

    def retain(self, members: frozenset) -> None:
        with self.cond:
            if not self.grants:
                return
            self.grants &= members
            if not self.grants:
                self.acquired = True
                self.cond.notify_all()

    def lock_granted(self, sender: Any) -> None:
        with self.cond:
            if not self.grants:
                return
            self.grants.discard(sender)
            if not self.grants:
                self.acquired = True
                self.cond.notify_all()


class PEER_LOCK(Locking):
    NAME = "PEER_LOCK"

    def create_lock(self, name: str, owner: Owner) -> ClientLock:
        return PeerLock(self, name, owner)

    def send_grant_lock_request(self, name: str, owner: Owner, timeout: int, is_trylock: bool) -> None:
        self.send(None, T.GRANT_LOCK, name, owner, timeout, is_trylock)

    def send_release_lock_request(self, name: str, owner: Owner) -> None:
        self.send(None, T.RELEASE_LOCK, name, owner)

    def send_await_condition_request(self, name: str, owner: Owner | None) -> None:
        self.send(None, T.LOCK_AWAIT, name, owner)

    def send_signal_condition_request(self, name: str, all_: bool) -> None:
        self.send(None, T.COND_SIG_ALL if all_ else T.COND_SIG, name, None)

    def send_delete_await_condition_request(self, name: str, owner: Owner | None) -> None:
        self.send(None, T.DELETE_LOCK_AWAIT, name, owner)

    def handle_view(self, view: Any) -> None:
        super().handle_view(view)
        members = frozenset(view.members or ())
        with self.client_locks_lock:
            locks = [cl for owners in self.client_locks.values() for cl in owners.values()]
        for cl in locks:
            if isinstance(cl, PeerLock):
                cl.retain(members)
