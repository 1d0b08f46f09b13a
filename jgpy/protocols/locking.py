"""Locking: the base of CENTRAL_LOCK and PEER_LOCK (``org.jgroups.protocols.Locking``, JGroups 2.12.2).

Applications use :class:`jgpy.blocks.LockService`, which talks to the locking protocol on top of the stack with
the events LOCK, UNLOCK, UNLOCK_ALL, LOCK_AWAIT and LOCK_SIGNAL (args :class:`LockInfo`, :class:`AwaitInfo`).
A lock is owned by an :class:`Owner`: a member's address and a thread id (see the deviations below).

Each member has two sides. The *client* side keeps a :class:`ClientLock` per (lock name, owner) and asks the
members that grant locks (the subclass decides which: the coordinator, or everybody) with GRANT_LOCK /
RELEASE_LOCK requests, then waits for LOCK_GRANTED or LOCK_DENIED. The *server* side keeps a
:class:`ServerLock` per lock name: its current owner and a FIFO queue of waiting GRANT_LOCKs, plus the waiters
of its condition.

Wire (2.12's): a regular message (DONT_BUNDLE when ``bypass_bundling``) carrying an empty ``LockingHeader``
(magic 81) under the protocol's id; its payload is ``Util.objectToByteBuffer`` of a ``Locking$Request``, a
Streamable without a magic number, so written by class name::

    byte 1 (TYPE_STREAMABLE), byte 1 (present), bool false (no magic), writeUTF "org.jgroups.protocols.Locking$Request"
    byte type                   RequestType ordinal
    Util.writeString lock_name
    Util.writeStreamable owner  byte presence, then Util.writeAddress + long thread id
    long timeout                ms (GRANT_LOCK of a tryLock with a timeout)
    bool is_trylock

Where jgpy deviates from 2.12 (nothing changes on the wire; 2.12 accepts anything from anybody):

* requests from a sender outside the view are dropped (counted); those that arrive before the view that adds
  their sender (a joiner's multicast overtaking the view) are held, at most ``max_held_requests`` for
  ``held_requests_timeout`` ms, and handled once a view names the sender;
* GRANT_LOCK, RELEASE_LOCK, LOCK_AWAIT and DELETE_LOCK_AWAIT must name their sender as the owner's address
  (a member cannot lock or release for another), responses must name this member; a request that cannot be
  read, has an unknown type, misses its owner or has a name longer than ``max_lock_name_length`` is dropped;
* the server lock table holds at most ``max_server_locks`` locks and all their queues together at most
  ``max_queued_requests`` requests and waiters: beyond that a GRANT_LOCK is denied (LOCK_DENIED) and a backup
  copy dropped;
* the thread id in the owner of a client's requests is a fresh number per client lock (a lock() or try-lock
  until its unlock), not the thread's: late answers to a try-lock that timed out cannot be taken for answers
  to the next request (:func:`new_owner_id`); locks still belong to threads here, as in Java;
* a client waiting for a lock gives up with :class:`LockingError` when the channel disconnects (2.12 waits for
  ever); an interrupt does not exist in Python, so lockInterruptibly is lock().
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from jgpy._core.headers import LockingHeader
from jgpy._core.message import Message
from jgpy._core.wire import Reader, Writer
from jgpy.errors import JgpyError
from jgpy.protocols.requests import RequestProtocol
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import Property, to_int

#: the Java class the Request is written under (no magic number in 2.12's map)
REQUEST_CLASS = "org.jgroups.protocols.Locking$Request"

#: how often a client waiting without a timeout checks that the protocol still runs (s)
_WAIT_SLICE = 0.5

DROP_COUNTERS = ("dropped_spoofed_owner", "dropped_table_full", "denied_table_full")


class LockingError(JgpyError):
    """A lock operation could not complete (the channel disconnected, no locking protocol, ...)."""


class RequestType(IntEnum):
    """``Locking.Type``: the ordinal is the wire byte."""

    GRANT_LOCK = 0          # client -> server: acquire
    LOCK_GRANTED = 1        # server -> client
    LOCK_DENIED = 2         # server -> client (a tryLock that cannot be granted at once)
    RELEASE_LOCK = 3        # client -> server
    CREATE_LOCK = 4         # coordinator -> backups (CENTRAL_LOCK)
    DELETE_LOCK = 5         # coordinator -> backups
    LOCK_AWAIT = 6          # client -> server: release the lock and wait on its condition
    COND_SIG = 7            # client -> server: signal one waiter
    COND_SIG_ALL = 8        # client -> server: signal all waiters
    SIG_RET = 9             # server -> waiter: you were signalled
    DELETE_LOCK_AWAIT = 10  # client -> server: stop waiting
    CREATE_AWAITER = 11     # coordinator -> backups
    DELETE_AWAITER = 12     # coordinator -> backups


T = RequestType
#: requests whose owner must be their sender (a member acts for its own threads only)
_OWN_REQUESTS = frozenset((T.GRANT_LOCK, T.RELEASE_LOCK, T.LOCK_AWAIT, T.DELETE_LOCK_AWAIT))
#: responses: their owner is this member
_RESPONSES = frozenset((T.LOCK_GRANTED, T.LOCK_DENIED, T.SIG_RET))
#: requests that need an owner at all
_NEED_OWNER = _OWN_REQUESTS | _RESPONSES | {T.CREATE_LOCK, T.CREATE_AWAITER, T.DELETE_AWAITER}


@dataclass(frozen=True, slots=True)
class Owner:
    """``org.jgroups.blocks.locking.Owner``: who holds a lock, a member's address and a thread id."""

    address: Any
    thread_id: int

    def __str__(self) -> str:
        return f"{self.address}::{self.thread_id}"


@dataclass(slots=True)
class LockRequest:
    """``Locking.Request``: one lock request or response (the payload of a locking message)."""

    type: RequestType
    lock_name: str | None
    owner: Owner | None = None
    timeout: int = 0
    is_trylock: bool = False

    def to_payload(self, dialect: Any) -> bytes:
        """``Util.objectToByteBuffer(request)``."""
        w = Writer()
        w.write_byte(int(self.type))
        w.write_string(self.lock_name)
        if self.owner is None:
            w.write_byte(0)
        else:
            w.write_byte(1)
            dialect.write_address_to(w, self.owner.address)
            w.write_long(self.owner.thread_id)
        w.write_long(self.timeout)
        w.write_bool(self.is_trylock)
        return dialect.object_to_buffer((REQUEST_CLASS, w.getvalue()), "Streamable")

    @classmethod
    def from_payload(cls, dialect: Any, payload: Any) -> LockRequest:
        """Read a request (raises ``ValueError``/``WireFormatError`` on anything 2.12 would not read). Trailing
        bytes are ignored, as ``objectFromByteBuffer`` does."""
        obj = dialect.object_from_buffer(payload)
        if not isinstance(obj, tuple) or obj[0] != REQUEST_CLASS:
            raise ValueError("not a Locking$Request")
        r = Reader(obj[1])
        t = r.read_byte("Request.type")
        if not 0 <= t < len(RequestType):
            raise ValueError(f"request type {t} is invalid")
        name = r.read_string("Request.lock_name")
        owner = None
        if r.read_bool("Request.owner"):
            addr = dialect.read_address_from(r)
            owner = Owner(addr, r.read_long("Owner.thread_id"))
        return cls(RequestType(t), name, owner, r.read_long("Request.timeout"), r.read_bool("Request.is_trylock"))

    def __str__(self) -> str:
        return f"{self.type.name} [{self.lock_name}, owner={self.owner}{', trylock' if self.is_trylock else ''}" \
               f"{f' (timeout={self.timeout})' if self.timeout > 0 else ''}]"


@dataclass(frozen=True, slots=True)
class LockInfo:
    """The argument of LOCK, UNLOCK and LOCK_AWAIT (``LockInfo``): ``timeout`` in ms when ``use_timeout``."""

    name: str
    is_trylock: bool = False
    use_timeout: bool = False
    timeout: int = 0


@dataclass(frozen=True, slots=True)
class AwaitInfo:
    """The argument of LOCK_SIGNAL (``AwaitInfo``): signal one waiter or all."""

    name: str
    all: bool = False


class LockNotification:
    """Lock listener (``LockNotification``): override what you need. Called on the thread that handles the
    request (the delivery thread for server events; the caller's for ``lock_deleted``), as in 2.12."""

    def lock_created(self, name: str) -> None:
        """A server lock was created here."""

    def lock_deleted(self, name: str) -> None:
        """A client lock was released here."""

    def locked(self, lock_name: str, owner: Owner) -> None:
        """This member granted ``lock_name`` to ``owner``."""

    def unlocked(self, lock_name: str, owner: Owner) -> None:
        """``owner`` released ``lock_name`` (or left) here."""

    def awaiting(self, lock_name: str, owner: Owner) -> None:
        """``owner`` waits on the condition of ``lock_name``."""

    def awaited(self, lock_name: str, owner: Owner) -> None:
        """``owner`` stopped waiting (signalled, or gave up)."""


_ids = itertools.count(1)
_local = threading.local()


def current_thread_id() -> int:
    """This thread's id: small, unique in this process and never reused (Java's ``Thread.getId()``; Python's
    native ids are reused). Client locks are kept per thread under it."""
    tid = getattr(_local, "tid", None)
    if tid is None:
        tid = _local.tid = next(_ids)
    return tid


def new_owner_id() -> int:
    """The thread id a new client lock's requests carry: a fresh number each time, never the thread's own.

    2.12 writes the thread's id, so the answers to a try-lock that timed out (LOCK_GRANTED, LOCK_DENIED: no
    request id tells them apart) are taken for the answers to that thread's next request for the lock, which
    then believes it holds a lock a server gave to somebody else: two holders (seen with PEER_LOCK within a
    few hundred try-locks, and possible with CENTRAL_LOCK). A number per client lock (a lock() or a try-lock
    until the unlock) makes such a late answer name an owner nobody waits for any more: it is ignored. Peers
    only compare owners, so nothing changes for a Java member; a Java client keeps 2.12's behaviour."""
    return next(_ids)


# ---------------------------------------------------------------------------------------------
# server side
# ---------------------------------------------------------------------------------------------

class ServerLock:
    """A lock this member grants: its owner, the queue of waiting requests and the condition's waiters. Every
    method runs with the protocol's ``server_lock`` held."""

    __slots__ = ("prot", "name", "owner", "queue", "waiters")

    def __init__(self, prot: Locking, name: str, owner: Owner | None = None) -> None:
        self.prot = prot
        self.name = name
        self.owner = owner
        self.queue: list[LockRequest] = []
        self.waiters: deque[Owner] = deque()

    def is_unused(self) -> bool:
        return self.owner is None and not self.queue and not self.waiters

    def size(self) -> int:
        """Requests and waiters held (what counts against ``max_queued_requests``)."""
        return len(self.queue) + len(self.waiters)

    def handle(self, req: LockRequest) -> None:
        t = req.type
        if t == T.GRANT_LOCK:
            if self.owner is None:
                self.set_owner(req.owner)
                self.prot.send_response(T.LOCK_GRANTED, req.owner, self.name)
            elif self.owner == req.owner:
                self.prot.send_response(T.LOCK_GRANTED, req.owner, self.name)
            elif req.is_trylock and req.timeout <= 0:
                self.prot.send_response(T.LOCK_DENIED, req.owner, self.name)
            else:
                self.enqueue(req)
        elif t == T.RELEASE_LOCK or t == T.LOCK_AWAIT:
            if self.owner is None:
                return
            if self.owner == req.owner:
                self.set_owner(None)
            else:
                self.enqueue(req)
        elif t == T.COND_SIG or t == T.COND_SIG_ALL:
            self.signal(t == T.COND_SIG_ALL)
        self.process_queue()

    def enqueue(self, req: LockRequest) -> None:
        """2.12's addToQueue: a GRANT_LOCK waits (once per owner); a RELEASE_LOCK cancels the owner's waiting
        GRANT_LOCK (a tryLock that timed out)."""
        if req.type == T.GRANT_LOCK:
            if any(q.owner == req.owner for q in self.queue):
                return
            if not self.prot.reserve(1):
                self.prot.send_response(T.LOCK_DENIED, req.owner, self.name)
                return
            self.queue.append(req)
        elif req.type == T.RELEASE_LOCK and self.queue:
            before = len(self.queue)
            self.queue = [q for q in self.queue if q.owner != req.owner]
            self.prot.release(before - len(self.queue))

    def process_queue(self) -> None:
        if self.owner is None and self.queue:
            req = self.queue.pop(0)
            self.prot.release(1)
            self.set_owner(req.owner)
            self.prot.send_response(T.LOCK_GRANTED, req.owner, self.name)

    def set_owner(self, owner: Owner | None) -> None:
        prev, self.owner = self.owner, owner
        if owner is not None:
            self.prot.notify("locked", self.name, owner)
        elif prev is not None:
            self.prot.notify("unlocked", self.name, prev)

    def add_waiter(self, owner: Owner) -> None:
        if owner in self.waiters or not self.prot.reserve(1):
            return
        self.prot.notify("awaiting", self.name, owner)
        self.waiters.append(owner)

    def remove_waiter(self, owner: Owner) -> None:
        if owner in self.waiters:
            self.waiters.remove(owner)
            self.prot.release(1)
            self.prot.notify("awaited", self.name, owner)

    def signal(self, all_: bool) -> None:
        while self.waiters:
            owner = self.waiters.popleft()
            self.prot.release(1)
            self.prot.notify("awaited", self.name, owner)
            self.prot.send_response(T.SIG_RET, owner, self.name)
            if not all_:
                break

    def retain(self, members: frozenset) -> None:
        """A view: the owner and the waiting requests and waiters of members that left are dropped."""
        if self.owner is not None and self.owner.address not in members:
            self.prot.log.debug("unlocked %r because owner %s left", self.name, self.owner)
            self.set_owner(None)
        before = self.size()
        self.queue = [q for q in self.queue if q.owner.address in members]
        self.waiters = deque(w for w in self.waiters if w.address in members)
        self.prot.release(before - self.size())
        self.process_queue()

    def __repr__(self) -> str:
        q = " ".join(f"{'TL' if r.is_trylock else 'L'}({r.owner})" for r in self.queue)
        return f"{self.owner}{', queue: ' + q if q else ''}{f', waiters: {len(self.waiters)}' if self.waiters else ''}"


# ---------------------------------------------------------------------------------------------
# client side
# ---------------------------------------------------------------------------------------------

class ClientLock:
    """A lock one of this member's threads asked for (``Locking.ClientLock``). ``owner`` is the owner its
    requests name: this member and a number of its own (see :func:`new_owner_id`)."""

    def __init__(self, prot: Locking, name: str, owner: Owner) -> None:
        self.prot = prot
        self.name = name
        self.owner = owner
        self.acquired = False
        self.denied = False
        self.is_trylock = False
        self.timeout = 0
        self.cond = threading.Condition()
        self.signalled = False          # the condition's SIG_RET arrived

    # ---- responses (delivery thread) ----

    def lock_granted(self, sender: Any) -> None:
        with self.cond:
            self.acquired = True
            self.cond.notify_all()

    def lock_denied(self) -> None:
        with self.cond:
            self.denied = True
            self.cond.notify_all()

    def signal_received(self) -> None:
        with self.cond:
            self.signalled = True
            self.cond.notify_all()

    # ---- the caller's thread ----

    def lock(self) -> None:
        with self.cond:
            if self.acquired:
                return
            self.prot.send_grant_lock_request(self.name, self.owner, 0, False)
            while not self.acquired:
                self._wait(_WAIT_SLICE)

    def try_lock(self, timeout_ms: int | None) -> bool:
        """2.12's acquireTryLock: ``timeout_ms`` None waits for the answer (the server answers at once)."""
        with self.cond:
            if self.denied:
                return False
            if not self.acquired:
                self.is_trylock = True
                self.timeout = timeout_ms or 0
                self.prot.send_grant_lock_request(self.name, self.owner, self.timeout, True)
                deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
                while not self.acquired and not self.denied:
                    if deadline is None:
                        self._wait(_WAIT_SLICE)
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.timeout = int(left * 1000)
                    self._wait(min(left, _WAIT_SLICE))
            ok = self.acquired and not self.denied
            if not ok:
                self._unlock(True)
            return ok

    def unlock(self) -> None:
        with self.cond:
            self._unlock(False)

    def _unlock(self, force: bool) -> None:
        if not self.acquired and not self.denied and not force:
            return
        self.timeout = 0
        self.is_trylock = False
        self.prot.send_release_lock_request(self.name, self.owner)
        self.prot.remove_client_lock(self)
        self.acquired = self.denied = False
        self.cond.notify_all()
        self.prot.notify("lock_deleted", self.name)

    def await_signal(self, timeout_ms: int | None) -> int | None:
        """The condition's await (the lock must be held): release the lock, wait for a signal (at most
        ``timeout_ms``), take the lock again. Returns the ms left (None without a timeout)."""
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        with self.cond:
            owner = self.owner
            if not self.signalled:
                self.acquired = False
                self.prot.send_await_condition_request(self.name, owner)
                while not self.signalled:
                    left = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._wait(min(left, _WAIT_SLICE))
            signalled, self.signalled = self.signalled, False
            if not signalled:
                self.prot.send_delete_await_condition_request(self.name, owner)
        self.lock()
        return None if deadline is None else int((deadline - time.monotonic()) * 1000)

    def _wait(self, seconds: float) -> None:
        self.cond.wait(seconds)
        if not self.prot.running:
            raise LockingError(f"the channel disconnected while waiting for lock {self.name!r}")

    def __repr__(self) -> str:
        return f"{self.name} (locked={self.acquired})"


# ---------------------------------------------------------------------------------------------
# the protocol
# ---------------------------------------------------------------------------------------------

class Locking(RequestProtocol):
    """Base of CENTRAL_LOCK and PEER_LOCK: the events, the server and client tables, the messages.

    A subclass says where requests go (``send_grant_lock_request`` and its siblings) and may make its own
    client locks (``create_lock``)."""

    HEADER = LockingHeader
    REQUEST = LockRequest
    WHAT = "lock request"

    max_server_locks = Property(
        to_int, 10000, "jgpy: locks this member keeps as a server (granting or as a backup); beyond that a new "
        "lock's GRANT_LOCK is denied and a backup copy dropped")
    max_queued_requests = Property(
        to_int, 100000, "jgpy: waiting lock requests and condition waiters of all server locks together")
    max_lock_name_length = Property(
        to_int, 4096, "jgpy: the longest lock name accepted from a peer (characters); longer: dropped")

    def __init__(self) -> None:
        super().__init__(DROP_COUNTERS)
        self.server_lock = threading.RLock()                     # server_locks and their queues
        self.server_locks: dict[str, ServerLock] = {}
        self.queued = 0                                          # requests + waiters of all server locks
        self.client_locks_lock = threading.Lock()
        self.client_locks: dict[str, dict[int, ClientLock]] = {}    # name -> thread id -> lock
        self._by_owner: dict[Owner, ClientLock] = {}                # what the answers name
        self.lock_listeners: list[LockNotification] = []
        self.view: Any = None
        self.members: frozenset = frozenset()
        self.running = False
        self.requests_received = self.requests_sent = 0

    # ---- listeners ----

    def add_lock_listener(self, listener: LockNotification) -> None:
        if listener is not None and listener not in self.lock_listeners:
            self.lock_listeners.append(listener)

    def remove_lock_listener(self, listener: LockNotification) -> None:
        if listener in self.lock_listeners:
            self.lock_listeners.remove(listener)

    def notify(self, event: str, *args: Any) -> None:
        """Call ``event`` (a :class:`LockNotification` method name) on every listener; failures are logged."""
        for listener in list(self.lock_listeners):
            try:
                getattr(listener, event)(*args)
            except Exception:  # noqa: BLE001 - a listener must not break the protocol
                self._rl.exception("listener-failed", "%s: lock listener %s failed in %s", self.local_addr,
                                   listener, event)

    # ---- life cycle ----

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False
        with self.client_locks_lock:
            locks = [cl for owners in self.client_locks.values() for cl in owners.values()]
            self.client_locks.clear()
            self._by_owner.clear()
        for cl in locks:                 # wake waiters: they raise LockingError
            with cl.cond:
                cl.cond.notify_all()
        with self.server_lock:
            self.server_locks.clear()
            self.queued = 0
        self.clear_held()
        self.view, self.members = None, frozenset()

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.LOCK:
            info: LockInfo = evt.arg
            lock = self.get_lock(info.name)
            if not info.is_trylock:
                lock.lock()
                return None
            return lock.try_lock(info.timeout if info.use_timeout else None)
        if t == EventType.UNLOCK:
            lock = self.get_lock(evt.arg.name, create=False)
            if lock is not None:
                lock.unlock()
            return None
        if t == EventType.UNLOCK_ALL:
            self.unlock_all()
            return None
        if t == EventType.LOCK_AWAIT:
            info = evt.arg
            lock = self.get_lock(info.name, create=False)
            if lock is None or not lock.acquired:
                raise LockingError(f"lock {info.name!r} is not held by this thread")
            return lock.await_signal(info.timeout if info.use_timeout else None)
        if t == EventType.LOCK_SIGNAL:
            ainfo: AwaitInfo = evt.arg
            lock = self.get_lock(ainfo.name, create=False)
            if lock is None or not lock.acquired:
                raise LockingError(f"lock {ainfo.name!r} is not held by this thread")
            self.send_signal_condition_request(ainfo.name, ainfo.all)
            return None
        return self.down_prot.down(evt)

    def up(self, evt: Event) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.handle_view(evt.arg)
        return self.up_prot.up(evt)

    def handle_view(self, view: Any) -> None:
        members = frozenset(view.members or ())
        with self.server_lock:
            self.view, self.members = view, members
            for name, sl in list(self.server_locks.items()):
                sl.retain(members)
                if sl.is_unused():
                    del self.server_locks[name]
        self.replay_held(members)

    # ---- client side ----

    def create_lock(self, name: str, owner: Owner) -> ClientLock:
        return ClientLock(self, name, owner)

    def get_lock(self, name: str, create: bool = True) -> ClientLock | None:
        """The calling thread's client lock ``name`` (made if ``create``)."""
        tid = current_thread_id()
        with self.client_locks_lock:
            threads = self.client_locks.get(name)
            lock = threads.get(tid) if threads is not None else None
            if lock is None and create:
                if not self.running:
                    raise LockingError("the channel is not connected")
                lock = self.create_lock(name, Owner(self.local_addr, new_owner_id()))
                self.client_locks.setdefault(name, {})[tid] = lock
                self._by_owner[lock.owner] = lock
            return lock

    def client_lock_of(self, name: str, owner: Owner) -> ClientLock | None:
        """The client lock an answer for ``owner`` is meant for."""
        lock = self._by_owner.get(owner)
        return lock if lock is not None and lock.name == name else None

    def remove_client_lock(self, lock: ClientLock) -> None:
        with self.client_locks_lock:
            if self._by_owner.get(lock.owner) is not lock:
                return
            del self._by_owner[lock.owner]
            threads = self.client_locks.get(lock.name, {})
            for tid, cl in list(threads.items()):
                if cl is lock:
                    del threads[tid]
            if not threads:
                self.client_locks.pop(lock.name, None)

    def unlock_all(self) -> None:
        """Release every lock this member's threads hold or wait for."""
        with self.client_locks_lock:
            locks = [cl for owners in self.client_locks.values() for cl in owners.values()]
        for cl in locks:
            cl.unlock()

    def print_locks(self) -> str:
        with self.server_lock:
            server = "".join(f"{n}: {sl!r}\n" for n, sl in self.server_locks.items())
        with self.client_locks_lock:
            mine = ", ".join(f"{n} ({', '.join(_client_state(cl) for cl in threads.values())})"
                             for n, threads in self.client_locks.items())
        return f"server locks:\n{server}\nmy locks: {mine}"

    # where requests go: the subclass decides

    def send_grant_lock_request(self, name: str, owner: Owner, timeout: int, is_trylock: bool) -> None:
        raise NotImplementedError

    def send_release_lock_request(self, name: str, owner: Owner) -> None:
        raise NotImplementedError

    def send_await_condition_request(self, name: str, owner: Owner | None) -> None:
        raise NotImplementedError

    def send_signal_condition_request(self, name: str, all_: bool) -> None:
        raise NotImplementedError

    def send_delete_await_condition_request(self, name: str, owner: Owner | None) -> None:
        raise NotImplementedError

    # ---- sending ----

    def send(self, dest: Any, type_: RequestType, name: str, owner: Owner | None, timeout: int = 0,
             is_trylock: bool = False) -> None:
        if self.send_request(dest, LockRequest(type_, name, owner, timeout, is_trylock)):
            self.requests_sent += 1

    def send_response(self, type_: RequestType, dest: Owner, name: str) -> None:
        self.send(dest.address, type_, name, dest)

    # ---- the server table's budget ----

    def reserve(self, n: int) -> bool:
        """Count ``n`` more queued requests or waiters, if the budget allows (server lock held)."""
        if self.queued + n > self.max_queued_requests:
            self.counters["dropped_table_full"] += 1
            self._rl.warning("queue-full", "%s: %d lock requests queued already: dropped one", self.local_addr,
                             self.queued)
            return False
        self.queued += n
        return True

    def release(self, n: int) -> None:
        self.queued -= n

    # ---- receiving ----

    def check_request(self, req: LockRequest) -> None:
        if req.type in _NEED_OWNER and (req.owner is None or req.owner.address is None):
            raise ValueError("no owner")
        if req.lock_name is None or len(req.lock_name) > self.max_lock_name_length:
            raise ValueError("lock name missing or too long")

    def receive_request(self, req: LockRequest, msg: Message) -> None:
        src = msg.src
        if src not in self.members:
            self.hold(msg)
            return
        if (req.type in _OWN_REQUESTS and req.owner.address != src and src != self.local_addr) or \
                (req.type in _RESPONSES and req.owner.address != self.local_addr):
            self.counters["dropped_spoofed_owner"] += 1
            self._rl.warning("spoofed", "%s: dropped a lock request whose owner is not its sender or us",
                             self.local_addr)
            return
        self.requests_received += 1
        self.handle_request(req, src)

    def handle_request(self, req: LockRequest, src: Any) -> None:
        t = req.type
        if t in (T.GRANT_LOCK, T.RELEASE_LOCK):
            self.handle_lock_request(req)
        elif t == T.LOCK_GRANTED:
            lock = self.client_lock_of(req.lock_name, req.owner)
            if lock is not None:
                lock.lock_granted(src)
        elif t == T.LOCK_DENIED:
            lock = self.client_lock_of(req.lock_name, req.owner)
            if lock is not None:
                lock.lock_denied()
        elif t == T.SIG_RET:
            lock = self.client_lock_of(req.lock_name, req.owner)
            if lock is not None:
                lock.signal_received()
        elif t in (T.COND_SIG, T.COND_SIG_ALL):
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is not None:
                    sl.handle(req)
        elif t == T.LOCK_AWAIT:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is not None:
                    sl.add_waiter(req.owner)
                self.handle_lock_request(req)
        elif t == T.DELETE_LOCK_AWAIT:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is not None:
                    sl.remove_waiter(req.owner)
                    self._drop_if_unused(sl)
        elif t == T.CREATE_LOCK:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is None:
                    if not self._room_for_lock():
                        return
                    self.server_locks[req.lock_name] = ServerLock(self, req.lock_name, req.owner)
                else:
                    sl.owner = req.owner
        elif t == T.DELETE_LOCK:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)     # 2.12 fails on a lock it does not have
                if sl is not None:
                    sl.owner = None
                    self._drop_if_unused(sl)
        elif t == T.CREATE_AWAITER:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is None:                                # 2.12 adds it to a lock it then forgets
                    return
                if req.owner not in sl.waiters and self.reserve(1):
                    sl.waiters.append(req.owner)
        elif t == T.DELETE_AWAITER:
            with self.server_lock:
                sl = self.server_locks.get(req.lock_name)
                if sl is not None and req.owner in sl.waiters:
                    sl.waiters.remove(req.owner)
                    self.release(1)
                    self._drop_if_unused(sl)

    def handle_lock_request(self, req: LockRequest) -> None:
        """GRANT_LOCK, RELEASE_LOCK, LOCK_AWAIT: the server lock (created for a GRANT_LOCK) handles it."""
        with self.server_lock:
            sl = self.server_locks.get(req.lock_name)
            if sl is None:
                if req.type != T.GRANT_LOCK:
                    return
                if not self._room_for_lock():
                    self.counters["denied_table_full"] += 1
                    self.send_response(T.LOCK_DENIED, req.owner, req.lock_name)
                    return
                sl = self.server_locks[req.lock_name] = ServerLock(self, req.lock_name)
                self.notify("lock_created", req.lock_name)
            sl.handle(req)
            self._drop_if_unused(sl)

    def _room_for_lock(self) -> bool:
        if len(self.server_locks) < self.max_server_locks:
            return True
        self.counters["dropped_table_full"] += 1
        self._rl.warning("table-full", "%s: %d server locks already: refused another", self.local_addr,
                         len(self.server_locks))
        return False

    def _drop_if_unused(self, sl: ServerLock) -> None:
        if sl.is_unused() and self.server_locks.get(sl.name) is sl:
            del self.server_locks[sl.name]

    # ---- diagnostics ----

    def dump_stats(self) -> dict[str, Any]:
        with self.server_lock:
            d: dict[str, Any] = {"server_locks": len(self.server_locks), "queued": self.queued,
                                 "held_requests": self.held_count()}
        with self.client_locks_lock:
            d["client_locks"] = sum(len(o) for o in self.client_locks.values())
        d.update(self.counters, requests_received=self.requests_received, requests_sent=self.requests_sent,
                 failed_msgs=self._guard.failed)
        return d


def _client_state(lock: ClientLock) -> str:
    return f"{lock.owner}" + ("" if lock.acquired and not lock.denied else ", unlocked")
