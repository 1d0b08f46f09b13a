"""What CENTRAL_LOCK and CENTRAL_EXECUTOR share: the coordinator (the view's first member) and the
``num_backups`` members after it that keep copies of its tables (2.12's ``Util.pickNext``)."""

from __future__ import annotations

import threading
from typing import Any


def pick_next(members: list[Any], after: Any, n: int) -> list[Any]:
    """``Util.pickNext``: the ``n`` members that follow ``after`` in ``members``, wrapping around."""
    if after not in members or n <= 0:
        return []
    i = members.index(after)
    return (members[i + 1:] + members[:i])[:n]


class CentralCoordinator:
    """The coordinator and its backups, as seen by one member (mixed into a protocol)."""

    def __init__(self) -> None:
        self.coord: Any = None
        self.is_coord = False
        self.backups: list[Any] = []
        self.backups_lock = threading.Lock()

    def update_coordinator(self, members: list[Any], me: Any, num_backups: int) -> tuple[Any, list[Any]]:
        """A new view: ``(the previous coordinator, backups that are new and need a copy of the tables)``. Only
        the coordinator has backups."""
        old = self.coord
        if members:
            self.coord = members[0]
            self.is_coord = self.coord == me
        new_backups = pick_next(members, me, num_backups) if self.is_coord else []
        with self.backups_lock:
            added = [b for b in new_backups if b not in self.backups]
            self.backups = new_backups
        return old, added

    def backups_now(self) -> list[Any]:
        with self.backups_lock:
            return list(self.backups)

    def reset_coordinator(self) -> None:
        self.coord, self.is_coord = None, False
        with self.backups_lock:
            self.backups = []

    def coordinator_stats(self) -> dict[str, Any]:
        return {"coord": str(self.coord) if self.coord is not None else None, "is_coord": self.is_coord,
                "backups": [str(b) for b in self.backups_now()]}
