"""Executing: the base of CENTRAL_EXECUTOR (``org.jgroups.protocols.Executing``, JGroups 2.12.2).

A member *submits* a task (:class:`jgpy.blocks.ExecutionService`); members that run tasks offer *consumers*
(threads of :class:`jgpy.blocks.ExecutionRunner`). The coordinator pairs them: a RUN_REQUEST (client) waits for
a CONSUMER_READY (runner) or the reverse, and the coordinator tells the client which consumer is free
(CONSUMER_FOUND); the client sends the task straight to that member (RUN_SUBMITTED), which answers with
RESULT_SUCCESS or RESULT_EXCEPTION (RUN_REJECTED when nobody takes it: the client asks again). The
coordinator's queues are copied to ``num_backups`` members (CREATE_/DELETE_RUN_REQUEST,
CREATE_/DELETE_CONSUMER_READY), which take over when it leaves.

Wire (2.12's): a regular message (DONT_BUNDLE when ``bypass_bundling``) with an empty ``ExecutorHeader``
(magic 85); its payload is ``Util.objectToByteBuffer`` of an ``Executing$Request`` (magic 86)::

    byte type                      ExecType ordinal
    object   a Streamable: short -1, then Util.writeGenericStreamable (an Address: the owner's)
             else:         int length, then Util.objectToByteBuffer(object) (null: one byte 0)
    long request                   a request id (client) or consumer id (runner)

**What interoperates with Java.** The pairing (every type but RUN_SUBMITTED and the results) carries
addresses and numbers only: a Java coordinator pairs jgpy clients with jgpy runners, a jgpy coordinator Java
ones, and backups of either kind take over. The task itself is a Java ``Runnable``/``Callable`` (Java
serialisation, or ``Executions$StreamableCallable``) that only a JVM can run, and jgpy's tasks are a task name
and arguments (JSON in a ``byte[]``) that only jgpy runs: so a task must go from a jgpy client to a jgpy runner
(a Java runner fails to read it and a Java client's task fails at a jgpy runner: RESULT_EXCEPTION). Results
are ``objectToByteBuffer`` values (null, Boolean, Integer/Long, Double, String, byte[]), as Java's would be;
an exception travels as a String (jgpy-only: a Java client expects a Throwable).

Where jgpy deviates (each closes a hole 2.12 has): requests from non-members are held until a view
names them, else dropped (:mod:`jgpy.protocols.requests`); the coordinator's queues are bounded (``max_queued``); a runner that has no idle consumer when a task arrives rejects it at once
(2.12 blocks the thread that delivered it for up to 1000 s); a task cannot be interrupted once it runs (Python
threads cannot be), only cancelled before a consumer took it; on a coordinator change a client asks again only
for tasks still waiting for a consumer (2.12 also for tasks running, which then run twice).
"""

from __future__ import annotations

import itertools
import json
import struct
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable

from jgpy._core.headers import ExecutorHeader
from jgpy._core.message import Message
from jgpy.errors import JgpyError
from jgpy.protocols.locking import Owner
from jgpy.protocols.requests import RequestProtocol
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int

REQUEST_MAGIC = 86              # Executing$Request in jg-magic-map.xml
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")

DROP_COUNTERS = ("dropped_queue_full", "rejected_no_consumer",
                 "interrupts_ignored")


class ExecutionError(JgpyError):
    """A task failed at the runner (the message names the exception), or could not be sent."""


class ExecType(IntEnum):
    """``Executing.Type``: the ordinal is the wire byte."""

    RUN_REQUEST = 0             # client -> coordinator: a task waits for a consumer
    CONSUMER_READY = 1          # runner -> coordinator: a consumer waits for a task
    CONSUMER_UNREADY = 2        # runner -> coordinator: that consumer stopped
    CONSUMER_FOUND = 3          # coordinator -> client: send your task to this consumer
    RUN_SUBMITTED = 4           # client -> runner: the task
    RUN_REJECTED = 5            # runner -> client: nobody took it
    RESULT_EXCEPTION = 6        # runner -> client
    RESULT_SUCCESS = 7          # runner -> client
    INTERRUPT_RUN = 8           # client -> runner
    CREATE_RUN_REQUEST = 9      # coordinator -> backups
    CREATE_CONSUMER_READY = 10
    DELETE_RUN_REQUEST = 11
    DELETE_CONSUMER_READY = 12


E = ExecType


class TaskOwner(Owner):
    """``Executing.Owner``: a member and a request (client) or consumer (runner) id; the lock Owner's shape."""

    __slots__ = ()

    @property
    def request_id(self) -> int:
        return self.thread_id


@dataclass(slots=True)
class ExecRequest:
    """``Executing.Request``: a type, an object (an address, a task, a result) and an id."""

    type: ExecType
    object: Any
    request: int

    def to_payload(self, dialect: Any) -> bytes:
        obj = self.object
        if obj is not None and hasattr(obj, "lsb"):             # an Address: a Streamable (its magic number)
            part = b"\xff\xff" + dialect.object_to_buffer(obj)[1:]
        else:
            buf = dialect.object_to_buffer(obj)
            part = _INT.pack(len(buf)) + buf
        body = bytes([int(self.type)]) + part + _LONG.pack(self.request)
        return dialect.object_to_buffer((REQUEST_MAGIC, body), "Streamable")

    @classmethod
    def from_payload(cls, dialect: Any, payload: Any) -> ExecRequest:
        obj = dialect.object_from_buffer(payload)
        if not isinstance(obj, tuple) or obj[0] != REQUEST_MAGIC:
            raise ValueError("not an Executing$Request")
        body: bytes = obj[1]
        if len(body) < 1 + 2 + 8 or body[0] >= len(ExecType):
            raise ValueError("truncated request or invalid type")
        middle = body[1:-8]
        if middle[:2] == b"\xff\xff":
            value = dialect.object_from_buffer(b"\x01" + middle[2:])
        else:
            (n,) = _INT.unpack_from(middle)
            if n < 1 or 4 + n != len(middle):
                raise ValueError("object length does not match")
            value = dialect.object_from_buffer(middle[4:])
        return cls(ExecType(body[0]), value, _LONG.unpack_from(body, len(body) - 8)[0])


def encode_task(name: str, args: tuple, kwargs: dict) -> bytes:
    """A jgpy task on the wire: JSON (task name and arguments), sent as a ``byte[]``."""
    return json.dumps({"task": name, "args": list(args), "kwargs": kwargs}).encode()


def decode_task(data: Any) -> tuple[str, list, dict]:
    d = json.loads(bytes(data))
    if not isinstance(d, dict) or not isinstance(d.get("task"), str) or not isinstance(d.get("args", []), list) \
            or not isinstance(d.get("kwargs", {}), dict):
        raise ValueError("not a jgpy task")
    return d["task"], d.get("args", []), d.get("kwargs", {})


class Task:
    """A submitted task (client side): what to send, and the future its result goes to."""

    __slots__ = ("payload", "future", "request_id")

    def __init__(self, payload: bytes, request_id: int) -> None:
        self.payload = payload
        self.future: Future[Any] = Future()
        self.request_id = request_id


@dataclass(slots=True)
class RunningTask:
    """A task handed to a consumer (runner side): who sent it, its id, its bytes."""

    source: Any
    request_id: int
    payload: Any


class Executing(RequestProtocol):
    """The base: clients, consumers, the coordinator's pairing. The subclass says where the coordinator is."""

    HEADER = ExecutorHeader
    REQUEST = ExecRequest
    WHAT = "executor request"

    max_queued = Property(to_int, 10000, "jgpy: run requests and ready consumers the coordinator (or a backup) "
                                         "keeps; beyond that a new one is dropped")

    _ids = itertools.count(1)

    def __init__(self) -> None:
        super().__init__(DROP_COUNTERS)
        self.view: Any = None
        self.members: frozenset[Any] = frozenset()
        self.running = False
        self.queue_lock = threading.Lock()                       # the coordinator's queues
        self.run_requests: deque[TaskOwner] = deque()
        self.consumers: deque[TaskOwner] = deque()
        self.client_lock = threading.Lock()
        self.awaiting_consumer: deque[Task] = deque()
        self.awaiting_return: dict[TaskOwner, Task] = {}
        self.handoff = threading.Condition()                     # consumers waiting for a task
        self.idle_consumers: dict[int, RunningTask | None] = {}  # consumer id -> the task handed to it

    # ---- life cycle ----

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False
        with self.client_lock:
            tasks = list(self.awaiting_consumer) + list(self.awaiting_return.values())
            self.awaiting_consumer.clear()
            self.awaiting_return.clear()
        for t in tasks:
            if not t.future.done():
                t.future.set_exception(ExecutionError("the channel disconnected"))
        with self.handoff:
            self.handoff.notify_all()
        with self.queue_lock:
            self.run_requests.clear()
            self.consumers.clear()
        self.clear_held()

    # ---- the client ----

    def submit(self, payload: bytes) -> Future[Any]:
        """Send a task (its wire bytes) to a free consumer somewhere: its result arrives in the future."""
        if not self.running:
            raise ExecutionError("the channel is not connected")
        task = Task(payload, next(self._ids))
        with self.client_lock:
            self.awaiting_consumer.append(task)
        self.send_to_coordinator(E.RUN_REQUEST, task.request_id, self.local_addr)
        return task.future

    def cancel(self, future: Future[Any]) -> bool:
        """Cancel a task no consumer took yet (2.12's TASK_CANCEL without interrupting)."""
        with self.client_lock:
            for t in self.awaiting_consumer:
                if t.future is future:
                    self.awaiting_consumer.remove(t)
                    return future.cancel()
        return False

    # ---- the runner ----

    def take_task(self, timeout: float, stopped: Callable[[], bool] = lambda: False) -> RunningTask | None:
        """Offer the calling thread as a consumer for up to ``timeout`` s, or until ``stopped()`` (checked when
        :meth:`wake_consumers` is called): the task it got, or None."""
        cid = next(self._ids)
        with self.handoff:
            self.idle_consumers[cid] = None
        self.send_to_coordinator(E.CONSUMER_READY, cid, self.local_addr)
        with self.handoff:
            self.handoff.wait_for(lambda: self.idle_consumers.get(cid) is not None or not self.running or stopped(),
                                  timeout)
            task = self.idle_consumers.pop(cid, None)
        if task is None and self.running:
            self.send_to_coordinator(E.CONSUMER_UNREADY, cid, self.local_addr)
        return task

    def wake_consumers(self) -> None:
        """Make every consumer waiting in :meth:`take_task` check its ``stopped``."""
        with self.handoff:
            self.handoff.notify_all()

    def task_done(self, task: RunningTask, value: Any = None, error: BaseException | None = None) -> None:
        """The result of ``task`` goes back to its client."""
        if error is not None:
            type_, obj = E.RESULT_EXCEPTION, f"{type(error).__name__}: {error}"
        else:
            try:
                self.stack.dialect.object_to_buffer(value)
                type_, obj = E.RESULT_SUCCESS, value
            except Exception:  # noqa: BLE001 - Java's NotSerializableException
                type_, obj = E.RESULT_EXCEPTION, f"NotSerializableException: {type(value).__name__}"
        if task.source == self.local_addr:
            self._result(task.source, task.request_id, type_, obj)
        else:
            self.send(task.source, type_, task.request_id, obj)

    # ---- the coordinator (where it is: the subclass) ----

    def send_to_coordinator(self, type_: ExecType, request_id: int, address: Any) -> None:
        raise NotImplementedError

    def update_backups(self, type_: ExecType, owner: TaskOwner) -> None:
        """The coordinator tells its backups of a queue change (CENTRAL_EXECUTOR)."""

    def handle_task_request(self, request_id: int, address: Any) -> None:
        self._pair(TaskOwner(address, request_id), True)

    def handle_consumer_ready(self, request_id: int, address: Any) -> None:
        self._pair(TaskOwner(address, request_id), False)

    def _pair(self, source: TaskOwner, is_client: bool) -> None:
        """2.12's handleTaskRequest / handleConsumerReadyRequest: a run request (``is_client``) takes the first
        ready consumer, a consumer the first run request; without one it waits in its own queue."""
        mine, theirs = (self.run_requests, self.consumers) if is_client else (self.consumers, self.run_requests)
        with self.queue_lock:
            other = theirs.popleft() if theirs else None
            if other is None and source not in mine and not self._queue_full():
                mine.append(source)
            # the backups' copy changes in the order of the queue's: 2.12 sends them after the lock, so a
            # DELETE (a consumer taking a request on another thread) can overtake its CREATE, and the request
            # stays in the backups' copy for ever (seen with the jar's ExecutionServiceDemo as coordinator)
            if other is None:
                self.update_backups(E.CREATE_RUN_REQUEST if is_client else E.CREATE_CONSUMER_READY, source)
            else:
                self.update_backups(E.DELETE_CONSUMER_READY if is_client else E.DELETE_RUN_REQUEST, other)
        if other is not None:
            client, consumer = (source, other) if is_client else (other, source)
            self.send(client.address, E.CONSUMER_FOUND, consumer.request_id, consumer.address)

    def handle_consumer_unready(self, request_id: int, address: Any) -> None:
        consumer = TaskOwner(address, request_id)
        with self.queue_lock:
            if consumer in self.consumers:
                self.consumers.remove(consumer)
            self.update_backups(E.DELETE_CONSUMER_READY, consumer)

    def _queue_full(self) -> bool:
        if len(self.run_requests) + len(self.consumers) < self.max_queued:
            return False
        self.counters["dropped_queue_full"] += 1
        self._rl.warning("queue-full", "%s: %d run requests and consumers queued: dropped one", self.local_addr,
                         len(self.run_requests) + len(self.consumers))
        return True

    # ---- sending ----

    def send(self, dest: Any, type_: ExecType, request: int, obj: Any) -> None:
        self.send_request(dest, ExecRequest(type_, obj, request))

    # ---- events and receiving ----

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.handle_view(evt.arg)
        return self.up_prot.up(evt)

    def handle_view(self, view: Any) -> None:
        self.view, self.members = view, frozenset(view.members or ())
        members = self.members
        with self.queue_lock:
            gone = [o for o in self.consumers if o.address not in members]
            for o in gone:
                self.consumers.remove(o)
            left = [o for o in self.run_requests if o.address not in members]
            for o in left:
                self.run_requests.remove(o)
        for o in gone:
            self.update_backups(E.DELETE_CONSUMER_READY, o)
        for o in left:
            self.update_backups(E.DELETE_RUN_REQUEST, o)
        with self.client_lock:                  # tasks a departed runner had: ask for another consumer
            lost = [(o, t) for o, t in self.awaiting_return.items() if o.address not in members]
            for o, t in lost:
                del self.awaiting_return[o]
                self.awaiting_consumer.append(t)
        for _, t in lost:
            self.send_to_coordinator(E.RUN_REQUEST, t.request_id, self.local_addr)
        self.replay_held(members)

    def receive_request(self, req: ExecRequest, msg: Message) -> None:
        src = msg.src
        if src not in self.members:
            self.hold(msg)      # until a view names the sender (a coordinator's copy to us, a joiner), or dropped
            return
        t, obj, rid = req.type, req.object, req.request
        needs_addr = t in (E.RUN_REQUEST, E.CONSUMER_READY, E.CONSUMER_UNREADY, E.CONSUMER_FOUND,
                           E.CREATE_RUN_REQUEST, E.CREATE_CONSUMER_READY, E.DELETE_RUN_REQUEST,
                           E.DELETE_CONSUMER_READY)
        if needs_addr and obj not in self.members:
            self.counters["dropped_non_member"] += 1       # an address that is not a member (or not an address)
            return
        if t == E.RUN_REQUEST:
            self.handle_task_request(rid, obj)
        elif t == E.CONSUMER_READY:
            self.handle_consumer_ready(rid, obj)
        elif t == E.CONSUMER_UNREADY:
            self.handle_consumer_unready(rid, obj)
        elif t == E.CONSUMER_FOUND:
            self._consumer_found(rid, obj)
        elif t == E.RUN_SUBMITTED:
            self._task_submitted(src, rid, obj)
        elif t == E.RUN_REJECTED:
            self._rejected(src, rid)
        elif t in (E.RESULT_SUCCESS, E.RESULT_EXCEPTION):
            self._result(src, rid, t, obj)
        elif t == E.INTERRUPT_RUN:
            self.counters["interrupts_ignored"] += 1
        else:
            self._backup_update(t, TaskOwner(obj, rid))

    def _consumer_found(self, consumer_id: int, address: Any) -> None:
        with self.client_lock:
            task = self.awaiting_consumer.popleft() if self.awaiting_consumer else None
            if task is not None:
                self.awaiting_return[TaskOwner(address, task.request_id)] = task
        if task is None:            # nothing to run any more: the consumer is free again (2.12 does the same)
            self.send_to_coordinator(E.CONSUMER_READY, consumer_id, address)
        elif address == self.local_addr:
            self._task_submitted(address, task.request_id, task.payload)
        else:
            self.send(address, E.RUN_SUBMITTED, task.request_id, task.payload)

    def _task_submitted(self, source: Any, request_id: int, payload: Any) -> None:
        with self.handoff:
            cid = next((c for c, t in self.idle_consumers.items() if t is None), None)
            if cid is not None:
                self.idle_consumers[cid] = RunningTask(source, request_id, payload)
                self.handoff.notify_all()
        if cid is None:
            self.counters["rejected_no_consumer"] += 1
            if source == self.local_addr:
                self._rejected(source, request_id)
            else:
                self.send(source, E.RUN_REJECTED, request_id, None)

    def _rejected(self, src: Any, request_id: int) -> None:
        with self.client_lock:
            task = self.awaiting_return.pop(TaskOwner(src, request_id), None)
            if task is not None:
                self.awaiting_consumer.append(task)
        if task is not None:
            self.send_to_coordinator(E.RUN_REQUEST, task.request_id, self.local_addr)

    def _result(self, src: Any, request_id: int, type_: ExecType, value: Any) -> None:
        with self.client_lock:
            task = self.awaiting_return.pop(TaskOwner(src, request_id), None)
        if task is None or task.future.done():
            return
        if type_ == E.RESULT_SUCCESS:
            task.future.set_result(value)
        else:
            task.future.set_exception(ExecutionError(str(value)))

    def _backup_update(self, t: ExecType, owner: TaskOwner) -> None:
        with self.queue_lock:
            q = self.run_requests if t in (E.CREATE_RUN_REQUEST, E.DELETE_RUN_REQUEST) else self.consumers
            if t in (E.CREATE_RUN_REQUEST, E.CREATE_CONSUMER_READY):
                if owner not in q and not self._queue_full():
                    q.append(owner)
            elif owner in q:
                q.remove(owner)

    def dump_stats(self) -> dict[str, Any]:
        with self.queue_lock:
            d: dict[str, Any] = {"run_requests": len(self.run_requests), "consumers": len(self.consumers)}
        with self.client_lock:
            d.update(awaiting_consumer=len(self.awaiting_consumer), awaiting_return=len(self.awaiting_return))
        d.update(self.counters, held_requests=self.held_count(), failed_msgs=self._guard.failed)
        return d
