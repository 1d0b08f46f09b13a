"""CENTRAL_EXECUTOR: the coordinator pairs tasks with consumers (``org.jgroups.protocols.CENTRAL_EXECUTOR``,
JGroups 2.12.2).

Clients and runners send their RUN_REQUEST / CONSUMER_READY to the coordinator (the first member of the view);
it keeps both queues and copies every change to ``num_backups`` members after it, so the next coordinator has
them. When the coordinator changes, every member sends its waiting run requests and ready consumers to the new
one. Everything else is :mod:`jgpy.protocols.executing`'s.
"""

from __future__ import annotations

from typing import Any

from jgpy.protocols.central import CentralCoordinator
from jgpy.protocols.executing import ExecType, Executing, TaskOwner
from jgpy.stack.properties import Property, to_int

E = ExecType


class CENTRAL_EXECUTOR(Executing, CentralCoordinator):
    NAME = "CENTRAL_EXECUTOR"

    num_backups = Property(to_int, 1, "Number of backups to the coordinator.  Queue State gets replicated to "
                                      "these nodes as well")

    def __init__(self) -> None:
        Executing.__init__(self)
        CentralCoordinator.__init__(self)

    def send_to_coordinator(self, type_: ExecType, request_id: int, address: Any) -> None:
        if self.is_coord:
            if type_ == E.RUN_REQUEST:
                self.handle_task_request(request_id, address)
            elif type_ == E.CONSUMER_READY:
                self.handle_consumer_ready(request_id, address)
            elif type_ == E.CONSUMER_UNREADY:
                self.handle_consumer_unready(request_id, address)
        elif self.coord is not None:
            self.send(self.coord, type_, request_id, address)

    def update_backups(self, type_: ExecType, owner: TaskOwner) -> None:
        if self.is_coord:
            for b in self.backups_now():
                self.send(b, type_, owner.request_id, owner.address)

    def handle_view(self, view: Any) -> None:
        mbrs = list(view.members or ())
        self.view, self.members = view, frozenset(mbrs)
        old_coord, added = self.update_coordinator(mbrs, self.local_addr, self.num_backups)
        if old_coord is not None and old_coord != self.coord:
            with self.client_lock:
                waiting = [t.request_id for t in self.awaiting_consumer]
            with self.handoff:
                ready = [cid for cid, task in self.idle_consumers.items() if task is None]
            for rid in waiting:
                self.send_to_coordinator(E.RUN_REQUEST, rid, self.local_addr)
            for cid in ready:
                self.send_to_coordinator(E.CONSUMER_READY, cid, self.local_addr)
        if added:
            with self.queue_lock:
                copies = [(E.CREATE_RUN_REQUEST, o) for o in self.run_requests] + \
                         [(E.CREATE_CONSUMER_READY, o) for o in self.consumers]
            for b in added:
                for type_, o in copies:
                    self.send(b, type_, o.request_id, o.address)
        super().handle_view(view)

    def stop(self) -> None:
        super().stop()
        self.reset_coordinator()

    def dump_stats(self) -> dict[str, Any]:
        return {**super().dump_stats(), **self.coordinator_stats()}
