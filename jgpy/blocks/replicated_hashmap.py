"""``org.jgroups.blocks.ReplicatedHashMap`` (2.12): a dict whose every change is replayed on every member.

Wire-compatible with the Java class, so Java and jgpy members share one map: each change is an RpcDispatcher
call in ID mode to every member (this one too), with 2.12's method ids (1 ``_put``, 2 ``_putIfAbsent``,
3 ``_putAll``, 4 ``_remove``, 5 ``_remove(key, value)``, 6 ``_replace(key, value)``, 7 ``_replace(key, old,
new)``, 8 ``_clear``), GET_NONE by default (``blocking_updates=True``: GET_ALL, ``timeout`` ms). A member
alone applies changes locally, as Java's does. A joiner fetches the whole map with the channel's state transfer
(:meth:`start`): the state is ``Util.objectToByteBuffer(HashMap)``, so keys and values must be what
:mod:`jgpy.javaser_write` can write (and what a Java member can load). Changes from several members are not
ordered with each other (Java's neither): use one writer per key, or a total-order stack, for agreement.

Notifications (Java's ``ReplicatedHashMap.Notification``): objects with ``entry_set(key, value)``,
``entry_removed(key)``, ``view_change(view, joined, left)``, ``contents_set(entries)`` and
``contents_cleared()``, called on the delivery thread; each method is optional.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterator, Mapping, MutableMapping

from jgpy._core.address import Address
from jgpy._core.types import View
from jgpy.blocks.correlator import RequestOptions, ResponseMode, marshal_value, unmarshal_value
from jgpy.blocks.methodcall import MethodCall
from jgpy.blocks.rpc import RpcDispatcher
from jgpy.channel import Channel, Receiver

log = logging.getLogger(__name__)

PUT, PUT_IF_ABSENT, PUT_ALL, REMOVE, REMOVE_IF_EQUALS, REPLACE_IF_EXISTS, REPLACE_IF_EQUALS, CLEAR = range(1, 9)
_MISSING = object()


class StateReceiver(Receiver):
    """A replicated structure's view and state callbacks (``owner._view``, ``owner._get_state``,
    ``owner._set_state``); everything else goes to the application's receiver. Shared by the replicated
    building blocks (ReplicatedHashMap, DistributedQueue, ReplicatedTree)."""

    def __init__(self, owner: Any, inner: Receiver) -> None:
        self.owner = owner
        self.inner = inner
        self.state_set = threading.Event()

    def receive(self, msg: Any) -> None:
        self.inner.receive(msg)

    def view_accepted(self, view: View) -> None:
        self.owner._view(view)
        self.inner.view_accepted(view)

    def suspect(self, addr: Address) -> None:
        self.inner.suspect(addr)

    def get_state(self) -> bytes | None:
        state: bytes | None = self.owner._get_state()
        return state

    def set_state(self, state: bytes) -> None:
        try:
            self.owner._set_state(state)
        finally:
            self.state_set.set()

    def fetch_state(self, channel: Channel, state_timeout: int) -> bool:
        """The state from the coordinator (``channel.getState(null, timeout)``), applied before returning;
        False when this member is the first."""
        self.state_set.clear()
        if not channel.get_state(None, state_timeout):
            return False
        if not self.state_set.wait(state_timeout / 1000.0):
            log.warning("the state arrived but set_state() did not run within %d ms", state_timeout)
        return True


def encode_state(value: Any, channel: Channel, what: str) -> bytes | None:
    """``Util.objectToByteBuffer(value)`` for a state; None (logged, as Java: no state rather than a broken
    one) when ``what`` cannot be written."""
    try:
        data: bytes = marshal_value(value, channel.stack.dialect)
        return data
    except Exception:  # noqa: BLE001 - any failure: no state
        log.exception("%s cannot be written as Java objects", what)
        return None


def decode_state(state: bytes, channel: Channel, what: str) -> Any:
    """The value of a state (``Util.objectFromByteBuffer``); None (logged) when it cannot be read: the caller
    keeps what it has, as Java does."""
    try:
        return unmarshal_value(memoryview(state), channel.stack.dialect)
    except Exception:  # noqa: BLE001 - any failure: keep what we have
        log.exception("the state of %s cannot be read", what)
        return None


class Notifiers:
    """Listener objects of a replicated structure: each event is an optional method, called with the event's
    arguments; a failing one is logged and does not stop the others."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._list: list[Any] = []

    def add(self, n: Any) -> None:
        if n is not None and n not in self._list:
            self._list.append(n)

    def remove(self, n: Any) -> None:
        if n in self._list:
            self._list.remove(n)

    def __bool__(self) -> bool:
        return bool(self._list)

    def notify(self, event: str, *args: Any) -> None:
        for n in list(self._list):
            fn = getattr(n, event, None)
            if fn is not None:
                try:
                    fn(*args)
                except Exception:  # noqa: BLE001 - a notifier must not break replication
                    log.exception("%s notifier %s failed", self.what, event)


class ReplicatedHashMap(MutableMapping[Any, Any]):
    """A replicated dict over a connected ``channel`` (call :meth:`start` to fetch the current contents)."""

    def __init__(self, channel: Channel, blocking_updates: bool = False, timeout: int = 5000,
                 receiver: Receiver | None = None) -> None:
        self.channel = channel
        self.timeout = timeout
        self.update_mode = ResponseMode.GET_ALL if blocking_updates else ResponseMode.GET_NONE
        self._map: dict[Any, Any] = {}
        self._lock = threading.RLock()
        self._notifiers = Notifiers("ReplicatedHashMap")
        self._members: list[Address] = list(channel.view.members or ()) if channel.view is not None else []
        methods: dict[int, Callable[..., Any]] = {
            PUT: self._put, PUT_IF_ABSENT: self._put_if_absent, PUT_ALL: self._put_all, REMOVE: self._remove,
            REMOVE_IF_EQUALS: self._remove_if_equals, REPLACE_IF_EXISTS: self._replace,
            REPLACE_IF_EQUALS: self._replace_if_equals, CLEAR: self._clear}
        self._receiver = StateReceiver(self, receiver if receiver is not None else channel.receiver)
        self.disp = RpcDispatcher(channel, None, self._receiver, method_lookup=methods.get)

    # ---- life cycle

    def start(self, state_timeout: int = 5000) -> bool:
        """Fetch the map from the coordinator (state transfer); False when this member is the first."""
        return self._receiver.fetch_state(self.channel, state_timeout)

    def stop(self) -> None:
        """Stop replicating (the channel stays open)."""
        self.disp.stop()

    @property
    def blocking_updates(self) -> bool:
        return self.update_mode == ResponseMode.GET_ALL

    @blocking_updates.setter
    def blocking_updates(self, on: bool) -> None:
        self.update_mode = ResponseMode.GET_ALL if on else ResponseMode.GET_NONE

    def add_notifier(self, n: Any) -> None:
        self._notifiers.add(n)

    def remove_notifier(self, n: Any) -> None:
        self._notifiers.remove(n)

    # ---- replicated changes

    def _replicated(self) -> bool:
        return len(self._members) > 1

    def _send(self, method_id: int, *args: Any) -> None:
        self.disp.call_remote_methods(None, MethodCall.with_id(method_id, list(args)),
                                      options=RequestOptions(self.update_mode, self.timeout))

    def put(self, key: Any, value: Any) -> Any:
        """Set ``key`` everywhere; returns the value it had here before."""
        if not self._replicated():
            return self._put(key, value)
        prev = self._map.get(key)
        self._send(PUT, key, value)
        return prev

    def put_if_absent(self, key: Any, value: Any) -> Any:
        if not self._replicated():
            return self._put_if_absent(key, value)
        prev = self._map.get(key)
        self._send(PUT_IF_ABSENT, key, value)
        return prev

    def put_all(self, entries: Mapping[Any, Any]) -> None:
        if not self._replicated():
            self._put_all(dict(entries))
            return
        self._send(PUT_ALL, dict(entries))

    def remove(self, key: Any, value: Any = _MISSING) -> Any:
        """Remove ``key`` everywhere (with ``value``: only where it maps to it; returns whether it did here)."""
        if value is not _MISSING:
            if not self._replicated():
                return self._remove_if_equals(key, value)
            removed = key in self._map and value is not None and self._map[key] == value
            self._send(REMOVE_IF_EQUALS, key, value)
            return removed
        if not self._replicated():
            return self._remove(key)
        prev = self._map.get(key)
        self._send(REMOVE, key)
        return prev

    def replace(self, key: Any, value: Any, new_value: Any = _MISSING) -> Any:
        """``replace(key, value)``: set it where the key exists; ``replace(key, old, new)``: where it maps to
        ``old`` (returns whether it did here)."""
        if new_value is not _MISSING:
            if not self._replicated():
                return self._replace_if_equals(key, value, new_value)
            replaced = key in self._map and value is not None and self._map[key] == value
            self._send(REPLACE_IF_EQUALS, key, value, new_value)
            return replaced
        if not self._replicated():
            return self._replace(key, value)
        prev = self._map.get(key)
        self._send(REPLACE_IF_EXISTS, key, value)
        return prev

    def clear(self) -> None:
        if not self._replicated():
            self._clear()
            return
        self._send(CLEAR)

    # ---- the mapping (reads are local)

    def __getitem__(self, key: Any) -> Any:
        return self._map[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        if key not in self._map:
            raise KeyError(key)
        self.remove(key)

    def __iter__(self) -> Iterator[Any]:
        with self._lock:
            return iter(list(self._map))

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def snapshot(self) -> dict[Any, Any]:
        with self._lock:
            return dict(self._map)

    # ---- what the calls do on every member (Java's _put, _putIfAbsent, ...)

    def _notify(self, event: str, *args: Any) -> None:
        self._notifiers.notify(event, *args)

    def _put(self, key: Any, value: Any) -> Any:
        with self._lock:
            prev = self._map.get(key)
            self._map[key] = value
        self._notify("entry_set", key, value)
        return prev

    def _put_if_absent(self, key: Any, value: Any) -> Any:
        with self._lock:
            prev = self._map.get(key)
            if key not in self._map:
                self._map[key] = value
        self._notify("entry_set", key, value)                 # as Java: notified either way
        return prev

    def _put_all(self, entries: Any) -> None:
        if not entries:
            return
        entries = dict(entries)
        with self._lock:
            self._map.update(entries)
        self._notify("contents_set", entries)

    def _clear(self) -> None:
        with self._lock:
            self._map.clear()
        self._notify("contents_cleared")

    def _remove(self, key: Any) -> Any:
        with self._lock:
            prev = self._map.pop(key, None)
        if prev is not None:
            self._notify("entry_removed", key)
        return prev

    def _remove_if_equals(self, key: Any, value: Any) -> bool:
        with self._lock:
            removed = key in self._map and self._map[key] == value
            if removed:
                del self._map[key]
        if removed:
            self._notify("entry_removed", key)
        return removed

    def _replace(self, key: Any, value: Any) -> Any:
        with self._lock:
            prev = self._map.get(key)
            if key in self._map:
                self._map[key] = value
        self._notify("entry_set", key, value)                 # as Java: notified either way
        return prev

    def _replace_if_equals(self, key: Any, old: Any, new: Any) -> bool:
        with self._lock:
            replaced = key in self._map and self._map[key] == old
            if replaced:
                self._map[key] = new
        if replaced:
            self._notify("entry_set", key, new)
        return replaced

    # ---- membership and state

    def _view(self, view: View) -> None:
        new = list(view.members or ())
        old = self._members
        if self._notifiers and old and new:
            joined = [m for m in new if m not in old]
            left = [m for m in old if m not in new]
            self._notify("view_change", view, joined, left)
        self._members = new

    def _get_state(self) -> bytes | None:
        return encode_state(self.snapshot(), self.channel, "ReplicatedHashMap's map")

    def _set_state(self, state: bytes) -> None:
        entries = decode_state(state, self.channel, "ReplicatedHashMap")
        if isinstance(entries, dict):
            self._put_all(entries)


__all__ = ["Notifiers", "ReplicatedHashMap", "StateReceiver", "decode_state", "encode_state"]
