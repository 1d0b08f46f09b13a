"""CENTRAL_LOCK and PEER_LOCK (``org.jgroups.protocols.Locking`` and subclasses, 2.12): cluster-wide locks.

Put one of them on top of the stack (Java does the same: ``<CENTRAL_LOCK/>`` above FRAG2) and use
:class:`jgpy.blocks.locking.LockService`. Wire: a regular message (DONT_BUNDLE when ``bypass_bundling``) with an
empty ``LockingHeader`` (magic 81) under the protocol's id, whose payload is ``Util.objectToByteBuffer`` of a
``Locking$Request`` (a Streamable written by class name: byte type, ``Util.writeString`` lock name,
``Util.writeStreamable`` Owner (address, thread id), long timeout, boolean trylock).

CENTRAL_LOCK: the coordinator grants and keeps the locks (``num_backups`` members after it get a copy, and one
of them serves them when it takes over); clients ask the coordinator. PEER_LOCK: every member grants; a lock is
held once every member granted it. The lock of a member that leaves is released; clients ask a new coordinator
again for the locks they still wait for.

Hostile input (jgpy's bounds; Java 2.12 has none): a request from a sender outside the view, or one that cannot
be read, is counted and dropped.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from typing import Any, Callable

from jgpy._core.headers import LockingHeader
from jgpy._core.message import Message
from jgpy.stack.events import EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol

REQUEST_CLASS = "org.jgroups.protocols.Locking$Request"
(GRANT_LOCK, LOCK_GRANTED, LOCK_DENIED, RELEASE_LOCK, CREATE_LOCK, DELETE_LOCK, LOCK_AWAIT, COND_SIG, COND_SIG_ALL,
 SIG_RET, DELETE_LOCK_AWAIT, CREATE_AWAITER, DELETE_AWAITER) = range(13)
TYPE_NAMES = ("GRANT_LOCK", "LOCK_GRANTED", "LOCK_DENIED", "RELEASE_LOCK", "CREATE_LOCK", "DELETE_LOCK", "LOCK_AWAIT",
              "COND_SIG", "COND_SIG_ALL", "SIG_RET", "DELETE_LOCK_AWAIT", "CREATE_AWAITER", "DELETE_AWAITER")
_TAIL = struct.Struct(">qq?")              # Owner's thread id, then the request's timeout and trylock flag


class Owner(tuple):
    """``org.jgroups.blocks.locking.Owner``: a member's address and a thread id."""

    __slots__ = ()

    def __new__(cls, address: Any, thread_id: int) -> "Owner":
        return tuple.__new__(cls, (address, thread_id))

    @property
    def address(self) -> Any:
        return self[0]

    @property
    def thread_id(self) -> int:
        return self[1]

    def __repr__(self) -> str:
        return f"{self[0]}::{self[1]}"


def current_owner(addr: Any) -> Owner:
    """The Owner of the calling thread (Java: the Thread's id)."""
    return Owner(addr, threading.get_ident() & 0x7FFFFFFFFFFFFFFF)


class Request:
    __slots__ = ("type", "lock_name", "owner", "timeout", "is_trylock")

    def __init__(self, type_: int, lock_name: str | None, owner: Owner | None, timeout: int = 0,
                 is_trylock: bool = False) -> None:
        self.type, self.lock_name, self.owner, self.timeout, self.is_trylock = (type_, lock_name, owner, timeout,
                                                                                is_trylock)

    def encode(self, dialect: Any) -> bytes:
        out = bytearray([self.type])
        if self.lock_name is None:
            out.append(0)
        else:
            name = self.lock_name.encode("utf-8", "surrogatepass")   # writeUTF: modified UTF-8 (same for BMP text)
            out += b"\x01" + struct.pack(">H", len(name)) + name
        if self.owner is None:
            out.append(0)
            out += struct.pack(">q?", self.timeout, self.is_trylock)
        else:
            out += b"\x01" + dialect.encode_address(self.owner.address)
            out += _TAIL.pack(self.owner.thread_id, self.timeout, self.is_trylock)
        return bytes(dialect.object_to_buffer((REQUEST_CLASS, bytes(out)), "Streamable"))

    @classmethod
    def decode(cls, payload: bytes, dialect: Any) -> "Request":
        """The Request of a message payload; ValueError for anything else."""
        value = dialect.object_from_buffer(payload)
        if not isinstance(value, tuple) or value[0] != REQUEST_CLASS:
            raise ValueError("not a Locking$Request")
        body: bytes = value[1]
        if len(body) < 2 or body[0] >= len(TYPE_NAMES):
            raise ValueError("a Locking$Request without a valid type")
        pos = 2
        name = None
        if body[1]:
            if len(body) < 4:
                raise ValueError("truncated lock name")
            n = struct.unpack_from(">H", body, 2)[0]
            if 4 + n > len(body):
                raise ValueError("truncated lock name")
            try:
                name = body[4:4 + n].decode("utf-8")        # readUTF (modified UTF-8; BMP text is the same)
            except UnicodeDecodeError:
                raise ValueError("a lock name that is not UTF-8") from None
            pos = 4 + n
        if pos >= len(body):
            raise ValueError("truncated owner")
        if body[pos] == 0:
            if len(body) != pos + 10:
                raise ValueError("bad length after a null owner")
            timeout, trylock = struct.unpack_from(">q?", body, pos + 1)
            return cls(body[0], name, None, timeout, trylock)
        end = len(body) - _TAIL.size
        if end <= pos + 1:
            raise ValueError("truncated owner")
        address = dialect.decode_address(body[pos + 1:end])
        thread_id, timeout, trylock = _TAIL.unpack_from(body, end)
        return cls(body[0], name, Owner(address, thread_id), timeout, trylock)

    def __repr__(self) -> str:
        return f"{TYPE_NAMES[self.type]} [{self.lock_name}, owner={self.owner}]"


class _ServerCondition:
    def __init__(self) -> None:
        self.queue: deque[Owner] = deque()


class _ServerLock:
    """The granting side of one lock (Java's ServerLock); guarded by the protocol's server lock."""

    def __init__(self, prot: Locking, name: str, owner: Owner | None = None) -> None:
        self.prot = prot
        self.name = name
        self.current_owner = owner
        self.queue: list[Request] = []
        self.condition = _ServerCondition()

    def handle_request(self, req: Request) -> None:
        t = req.type
        if t == GRANT_LOCK:
            if self.current_owner is None:
                self._set_owner(req.owner)
                self.prot._send_response(LOCK_GRANTED, req.owner, req.lock_name)
            elif self.current_owner == req.owner:
                self.prot._send_response(LOCK_GRANTED, req.owner, req.lock_name)
            elif req.is_trylock and req.timeout <= 0:
                self.prot._send_response(LOCK_DENIED, req.owner, req.lock_name)
            else:
                self._add_to_queue(req)
        elif t in (RELEASE_LOCK, LOCK_AWAIT):
            if self.current_owner is None:
                return
            if self.current_owner == req.owner:
                self._set_owner(None)
            else:
                self._add_to_queue(req)
        elif t in (COND_SIG, COND_SIG_ALL):
            self._signal(t == COND_SIG_ALL)
        self._process_queue()

    def handle_view(self, members: set) -> None:
        if self.current_owner is not None and self.current_owner.address not in members:
            self._set_owner(None)
        self.queue = [r for r in self.queue if r.owner is not None and r.owner.address in members]
        self.condition.queue = deque(o for o in self.condition.queue if o.address in members)
        self._process_queue()

    def _add_to_queue(self, req: Request) -> None:
        if not self.queue:
            if req.type == GRANT_LOCK:
                self.queue.append(req)
            return                                   # a release on an empty queue is dropped, as Java
        if req.type == GRANT_LOCK:
            if not any(r.type == GRANT_LOCK and r.owner == req.owner for r in self.queue):
                self.queue.append(req)
        elif req.type == RELEASE_LOCK:
            self.queue = [r for r in self.queue if not (r.type == GRANT_LOCK and r.owner == req.owner)]

    def _process_queue(self) -> None:
        if self.current_owner is not None:
            return
        while self.queue:
            req = self.queue.pop(0)
            if req.type == GRANT_LOCK:
                self._set_owner(req.owner)
                self.prot._send_response(LOCK_GRANTED, req.owner, req.lock_name)
                break

    def _set_owner(self, owner: Owner | None) -> None:
        if owner is None:
            if self.current_owner is not None:
                prev, self.current_owner = self.current_owner, None
                self.prot._notify("unlocked", self.name, prev)
        else:
            self.current_owner = owner
            self.prot._notify("locked", self.name, owner)

    def _signal(self, all_: bool) -> None:
        while self.condition.queue:
            waiter = self.condition.queue.popleft()
            self.prot._notify("awaited", self.name, waiter)
            self.prot._send_response(SIG_RET, waiter, self.name)
            if not all_:
                break

    def is_idle(self) -> bool:
        return not self.queue and self.current_owner is None and not self.condition.queue


class ClientLock:
    """The asking side of one lock for one owner (Java's ClientLock)."""

    def __init__(self, prot: Locking, name: str) -> None:
        self.prot = prot
        self.name = name
        self.owner: Owner | None = None
        self.acquired = False
        self.denied = False
        self.is_trylock = False
        self.timeout = 0
        self._cond = threading.Condition()
        self.signaled = False                   # the condition's signal (SIG_RET) came

    def lock(self, owner: Owner) -> None:
        with self._cond:
            if self.acquired:
                return
            self.owner = owner
            self.prot._send_grant(self.name, owner, 0, False)
            self._cond.wait_for(lambda: self.acquired)

    def try_lock(self, owner: Owner, timeout_ms: int | None) -> bool:
        with self._cond:
            if self.denied:
                return False
            if not self.acquired:
                self.is_trylock = True
                self.timeout = timeout_ms or 0
                self.owner = owner
                self.prot._send_grant(self.name, owner, self.timeout, True)
                self._cond.wait_for(lambda: self.acquired or self.denied,
                                    timeout_ms / 1000.0 if timeout_ms is not None else None)
            ok = self.acquired and not self.denied
        if not ok:
            self._unlock(force=True)
        return ok

    def unlock(self) -> None:
        self._unlock(force=False)

    def _unlock(self, force: bool) -> None:
        with self._cond:
            if not self.acquired and not self.denied and not force:
                return
            self.timeout = 0
            self.is_trylock = False
            owner = self.owner
            if owner is not None:
                self.prot._send_release(self.name, owner)
            self.acquired = self.denied = False
            self._cond.notify_all()
            self.owner = None
        if owner is not None:
            self.prot._remove_client_lock(self.name, owner)

    def granted(self, sender: Any) -> None:
        with self._cond:
            self.acquired = True
            self._cond.notify_all()

    def lock_denied(self) -> None:
        with self._cond:
            self.denied = True
            self._cond.notify_all()

    # ---- the lock's condition (Java's ClientCondition)

    def await_signal(self, timeout_ms: int | None) -> bool:
        """Release the lock, wait for a signal (or ``timeout_ms``), take the lock again; True if signalled."""
        with self._cond:
            if not self.acquired or self.owner is None:
                raise RuntimeError("await() needs the lock held (IllegalMonitorStateException)")
            owner = self.owner
            got = self.signaled
            if not got:
                self.acquired = False
                self.prot._send_to_granter(LOCK_AWAIT, self.name, owner)
                got = self._cond.wait_for(lambda: self.signaled,
                                          timeout_ms / 1000.0 if timeout_ms is not None else None)
                if not got:
                    self.prot._send_to_granter(DELETE_LOCK_AWAIT, self.name, owner)
            self.signaled = False
        self.lock(owner)
        return got

    def signal_received(self) -> None:
        with self._cond:
            self.signaled = True
            self._cond.notify_all()


class Locking(Protocol):
    """The base of CENTRAL_LOCK and PEER_LOCK: server locks (granting) and client locks (asking)."""

    bypass_bundling = Property(to_bool, True, "bypasses message bundling if set")

    def __init__(self) -> None:
        super().__init__()
        self.view_members: list = []
        self.server_locks: dict[str, _ServerLock] = {}
        self.client_locks: dict[str, dict[Owner, ClientLock]] = {}
        self._server_lock = threading.RLock()
        self._client_lock = threading.Lock()
        self.listeners: list[Any] = []
        self._rl = RateLimitedLog(self.log)
        self.dropped_non_member = 0
        self.dropped_malformed = 0

    def up_needs(self) -> int:
        return UP_HEADER

    # ---- listeners (Java's LockNotification: lockCreated, lockDeleted, locked, unlocked, awaiting, awaited)

    def add_lock_listener(self, listener: Any) -> None:
        if listener is not None and listener not in self.listeners:
            self.listeners.append(listener)

    def remove_lock_listener(self, listener: Any) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    def _notify(self, event: str, *args: Any) -> None:
        for listener in list(self.listeners):
            fn: Callable[..., Any] | None = getattr(listener, event, None)
            if fn is not None:
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - a listener must not break locking
                    self.log.exception("lock listener %s failed", event)

    # ---- the client API (jgpy.blocks.locking.LockService)

    def get_lock(self, name: str, owner: Owner, create: bool = True) -> ClientLock | None:
        with self._client_lock:
            owners = self.client_locks.get(name)
            if owners is None:
                if not create:
                    return None
                owners = self.client_locks[name] = {}
            lock = owners.get(owner)
            if lock is None and create:
                lock = owners[owner] = self._create_lock(name)
            return lock

    def _create_lock(self, name: str) -> ClientLock:
        return ClientLock(self, name)

    def _remove_client_lock(self, name: str, owner: Owner) -> None:
        with self._client_lock:
            owners = self.client_locks.get(name)
            if owners is not None and owners.pop(owner, None) is not None and not owners:
                del self.client_locks[name]
        self._notify("lockDeleted", name)

    def unlock_all(self) -> None:
        with self._client_lock:
            locks = [lk for owners in self.client_locks.values() for lk in owners.values()]
        for lk in locks:
            lk.unlock()

    def print_locks(self) -> str:
        with self._server_lock:
            server = "\n".join(f"{n}: {lk.current_owner}" for n, lk in self.server_locks.items())
        with self._client_lock:
            mine = ", ".join(f"{n} ({', '.join(map(repr, owners))})" for n, owners in self.client_locks.items())
        return f"server locks:\n{server}\n\nmy locks: {mine}"

    # ---- sending

    def _send(self, dest: Any, req: Request) -> None:
        msg = Message(dest, req.encode(self.stack.dialect), self.local_addr,
                      Message.DONT_BUNDLE if self.bypass_bundling else 0)
        msg.put_header(self.id, self._header())
        try:
            self.down_prot.down_msg(msg)
        except Exception as e:  # noqa: BLE001 - as Java: logged
            self._rl.warning("send", "failed sending %s: %s", TYPE_NAMES[req.type], e)

    def _header(self) -> Any:
        return LockingHeader()

    def _send_response(self, type_: int, owner: Owner | None, lock_name: str) -> None:
        if owner is not None:
            self._send(owner.address, Request(type_, lock_name, owner, 0))

    def _send_grant(self, name: str, owner: Owner, timeout: int, trylock: bool) -> None:
        raise NotImplementedError

    def _send_release(self, name: str, owner: Owner) -> None:
        raise NotImplementedError

    def _send_to_granter(self, type_: int, name: str, owner: Owner | None) -> None:
        raise NotImplementedError

    def signal(self, name: str, all_: bool) -> None:
        self._send_to_granter(COND_SIG_ALL if all_ else COND_SIG, name, None)

    # ---- receiving

    def up_batch(self, msgs: list) -> None:
        mine, rest = self.split_mine(msgs)
        for m in mine:
            self._receive(m)
        if rest:
            self.up_prot.up_batch(rest)

    def _receive(self, msg: Message) -> None:
        members = self.view_members
        if members and msg.src not in members:
            self.dropped_non_member += 1
            self._rl.warning("non-member", "dropped a lock request from a non-member")
            return
        payload = msg.payload
        try:
            req = Request.decode(bytes(payload) if payload is not None else b"", self.stack.dialect)
        except Exception as e:  # noqa: BLE001 - a malformed request is counted and dropped
            self.dropped_malformed += 1
            self._rl.warning("malformed", "dropped a malformed lock request: %s", e)
            return
        t = req.type
        if t in (GRANT_LOCK, RELEASE_LOCK):
            self._handle_lock_request(req)
        elif t == LOCK_GRANTED:
            lk = self.get_lock(req.lock_name or "", req.owner, False) if req.owner is not None else None
            if lk is not None:
                lk.granted(msg.src)
        elif t == LOCK_DENIED:
            lk = self.get_lock(req.lock_name or "", req.owner, False) if req.owner is not None else None
            if lk is not None:
                lk.lock_denied()
        elif t == CREATE_LOCK:
            with self._server_lock:
                self.server_locks[req.lock_name or ""] = _ServerLock(self, req.lock_name or "", req.owner)
        elif t == DELETE_LOCK:
            with self._server_lock:
                lk2 = self.server_locks.get(req.lock_name or "")
                if lk2 is not None:
                    if not lk2.condition.queue:
                        del self.server_locks[req.lock_name or ""]
                    else:
                        lk2.current_owner = None
        elif t in (COND_SIG, COND_SIG_ALL):
            with self._server_lock:
                lk2 = self.server_locks.get(req.lock_name or "")
                if lk2 is not None:
                    lk2.handle_request(req)
        elif t == LOCK_AWAIT:
            with self._server_lock:
                lk2 = self.server_locks.get(req.lock_name or "")
                if lk2 is not None and req.owner is not None:
                    self._notify("awaiting", lk2.name, req.owner)
                    lk2.condition.queue.append(req.owner)
            self._handle_lock_request(req)
        elif t == DELETE_LOCK_AWAIT:
            with self._server_lock:
                lk2 = self.server_locks.get(req.lock_name or "")
                if lk2 is not None and req.owner in lk2.condition.queue:
                    self._notify("awaited", lk2.name, req.owner)
                    lk2.condition.queue.remove(req.owner)
        elif t == SIG_RET:
            lk = self.get_lock(req.lock_name or "", req.owner, False) if req.owner is not None else None
            if lk is not None:
                lk.signal_received()
        elif t == CREATE_AWAITER:
            with self._server_lock:
                name = req.lock_name or ""
                lk2 = self.server_locks.get(name)
                if lk2 is None:
                    lk2 = self.server_locks[name] = _ServerLock(self, name)
                if req.owner is not None:
                    lk2.condition.queue.append(req.owner)
        elif t == DELETE_AWAITER:
            with self._server_lock:
                lk2 = self.server_locks.get(req.lock_name or "")
                if lk2 is not None:
                    if req.owner in lk2.condition.queue:
                        lk2.condition.queue.remove(req.owner)
                    if lk2.is_idle():
                        del self.server_locks[lk2.name]

    def _handle_lock_request(self, req: Request) -> None:
        name = req.lock_name or ""
        with self._server_lock:
            lk = self.server_locks.get(name)
            if lk is None:
                lk = self.server_locks[name] = _ServerLock(self, name)
                self._notify("lockCreated", name)
            lk.handle_request(req)
            if lk.is_idle():
                self.server_locks.pop(name, None)

    # ---- views

    def up(self, evt: Any) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.handle_view(evt.arg)
        return self.up_prot.up(evt)

    def down(self, evt: Any) -> Any:
        if evt.type == EventType.VIEW_CHANGE:
            self.handle_view(evt.arg)
        return self.down_prot.down(evt)

    def handle_view(self, view: Any) -> None:
        members = list(view.members or ())
        if members == self.view_members:
            return
        self.view_members = members
        mset = set(members)
        with self._server_lock:
            for lk in list(self.server_locks.values()):
                lk.handle_view(mset)
            for name in [n for n, lk in self.server_locks.items() if not lk.queue and lk.current_owner is None]:
                del self.server_locks[name]

    def dump_stats(self) -> dict[str, Any]:
        return {"server_locks": len(self.server_locks), "client_locks": len(self.client_locks),
                "dropped_non_member": self.dropped_non_member, "dropped_malformed": self.dropped_malformed}


class CENTRAL_LOCK(Locking):  # noqa: N801 - the JGroups name
    """The coordinator grants every lock; ``num_backups`` members after it keep a copy."""

    NAME = "CENTRAL_LOCK"
    num_backups = Property(to_int, 1, "Number of backups to the coordinator. Server locks get replicated to these "
                                      "nodes as well")

    def __init__(self) -> None:
        super().__init__()
        self.coord: Any = None
        self.is_coord = False
        self.backups: list = []
        self.add_lock_listener(_BackupUpdater(self))

    def _send_grant(self, name: str, owner: Owner, timeout: int, trylock: bool) -> None:
        if self.coord is not None:
            self._send(self.coord, Request(GRANT_LOCK, name, owner, timeout, trylock))

    def _send_release(self, name: str, owner: Owner) -> None:
        if self.coord is not None:
            self._send(self.coord, Request(RELEASE_LOCK, name, owner, 0, False))

    def _send_to_granter(self, type_: int, name: str, owner: Owner | None) -> None:
        self._send(self.coord, Request(type_, name, owner, 0, False))

    def handle_view(self, view: Any) -> None:
        old_members = self.view_members
        super().handle_view(view)
        if self.view_members is old_members:
            return
        old_coord = self.coord
        members = self.view_members
        if members:
            self.coord = members[0]
            self.is_coord = self.coord == self.local_addr
        if self.is_coord and self.num_backups > 0:
            i = members.index(self.local_addr) if self.local_addr in members else 0
            new_backups = [m for m in members[i + 1:] + members[:i] if m != self.local_addr][:self.num_backups]
            if new_backups != self.backups:
                added = [b for b in new_backups if b not in self.backups]
                self.backups = new_backups
                if added:
                    self._copy_locks_to(added)
        if old_coord is not None and old_coord != self.coord:
            with self._client_lock:
                locks = [lk for owners in self.client_locks.values() for lk in owners.values()]
            for lk in locks:
                if not lk.acquired and not lk.denied and lk.owner is not None:
                    self._send_grant(lk.name, lk.owner, lk.timeout, lk.is_trylock)

    def _update_backups(self, type_: int, name: str, owner: Owner) -> None:
        if self.is_coord:
            for b in list(self.backups):
                self._send(b, Request(type_, name, owner, 0, False))

    def _copy_locks_to(self, joiners: list) -> None:
        with self._server_lock:
            copy = list(self.server_locks.items())
        for name, lk in copy:
            for j in joiners:
                if lk.current_owner is not None:
                    self._send(j, Request(CREATE_LOCK, name, lk.current_owner, 0, False))
                for waiter in list(lk.condition.queue):
                    self._send(self.coord, Request(LOCK_AWAIT, name, waiter, 0, False))


class _BackupUpdater:
    """CENTRAL_LOCK's own lock listener: the coordinator tells its backups about every change."""

    def __init__(self, prot: CENTRAL_LOCK) -> None:
        self.prot = prot

    def locked(self, name: str, owner: Owner) -> None:
        self.prot._update_backups(CREATE_LOCK, name, owner)

    def unlocked(self, name: str, owner: Owner) -> None:
        self.prot._update_backups(DELETE_LOCK, name, owner)

    def awaiting(self, name: str, owner: Owner) -> None:
        self.prot._update_backups(CREATE_AWAITER, name, owner)

    def awaited(self, name: str, owner: Owner) -> None:
        self.prot._update_backups(DELETE_AWAITER, name, owner)


class _PeerLock(ClientLock):
    """PEER_LOCK's client lock: held once every member granted it."""

    def __init__(self, prot: Locking, name: str) -> None:
        super().__init__(prot, name)
        self.grants = list(prot.view_members)

    def retain(self, members: set) -> None:
        with self._cond:
            if not self.grants:
                return
            self.grants = [g for g in self.grants if g in members]
            if not self.grants:
                self.acquired = True
                self._cond.notify_all()

    def granted(self, sender: Any) -> None:
        with self._cond:
            if not self.grants:
                return
            if sender in self.grants:
                self.grants.remove(sender)
            if not self.grants:
                self.acquired = True
                self._cond.notify_all()


class PEER_LOCK(Locking):  # noqa: N801 - the JGroups name
    """Every member grants every lock (multicast requests)."""

    NAME = "PEER_LOCK"

    def _create_lock(self, name: str) -> ClientLock:
        return _PeerLock(self, name)

    def _send_grant(self, name: str, owner: Owner, timeout: int, trylock: bool) -> None:
        self._send(None, Request(GRANT_LOCK, name, owner, timeout, trylock))

    def _send_release(self, name: str, owner: Owner) -> None:
        self._send(None, Request(RELEASE_LOCK, name, owner, 0, False))

    def _send_to_granter(self, type_: int, name: str, owner: Owner | None) -> None:
        self._send(None, Request(type_, name, owner, 0, False))

    def handle_view(self, view: Any) -> None:
        super().handle_view(view)
        mset = set(self.view_members)
        with self._client_lock:
            locks = [lk for owners in self.client_locks.values() for lk in owners.values()]
        for lk in locks:
            if isinstance(lk, _PeerLock):
                lk.retain(mset)


__all__ = ["CENTRAL_LOCK", "ClientLock", "Locking", "Owner", "PEER_LOCK", "Request", "current_owner"]
