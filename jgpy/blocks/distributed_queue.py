"""``org.jgroups.blocks.DistributedQueue`` (2.12): a FIFO queue every member holds a copy of.

Wire-compatible with the Java class, so Java and jgpy members share one queue: each change is an RpcDispatcher
call by name and parameter types (TYPES mode) to every member, this one too, with GET_ALL: ``_add(Object)``,
``_addAtHead(Object)``, ``_addAll(Collection)``, ``_reset()`` (no timeout, as 2.12) and ``_remove()`` (10 s),
which takes the head of every copy and answers it; the caller returns the first answer. A joiner fetches the
contents with the channel's state transfer (:meth:`start`): the state is ``Util.objectToByteBuffer`` of a
``java.util.Vector``, so elements must be what :mod:`jgpy.javaser_write` can write (and a Java member load).
Calls from several members are not ordered with each other (Java's neither): a total-order stack keeps the
copies equal under concurrent writers.

Notifications (Java's ``DistributedQueue.Notification``): objects with ``entry_add(value)``,
``entry_removed(value)``, ``view_change(joined, left)`` (Java calls it with these two lists),
``contents_cleared()`` and ``contents_set(values)``, called on the delivery thread; each method is optional.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Iterable

from jgpy._core.address import Address
from jgpy._core.types import View
from jgpy.blocks.correlator import RequestOptions, ResponseMode
from jgpy.blocks.replicated_hashmap import Notifiers, StateReceiver, decode_state, encode_state
from jgpy.blocks.rpc import RpcDispatcher, rpc_method
from jgpy.channel import Channel, Receiver
from jgpy.javaser_write import JavaCollection

#: 2.12's internal_timeout: how long a remove() waits for the members' answers (ms)
REMOVE_TIMEOUT = 10000


class DistributedQueue:
    """A replicated FIFO queue over ``channel`` (2.12 builds it before connecting; either works here): call
    :meth:`start` once connected to fetch the current contents."""

    def __init__(self, channel: Channel, receiver: Receiver | None = None, timeout: int = 0) -> None:
        self.channel = channel
        #: ms the changes wait for every member's answer (0: for ever, as 2.12)
        self.timeout = timeout
        self._queue: deque[Any] = deque()
        self._cond = threading.Condition()
        self._notifiers = Notifiers("DistributedQueue")
        self._members: list[Address] = list(channel.view.members or ()) if channel.view is not None else []
        self._stopped = False
        self._receiver = StateReceiver(self, receiver if receiver is not None else channel.receiver)
        self.disp = RpcDispatcher(channel, self, self._receiver)

    # ---- life cycle

    def start(self, state_timeout: int = 5000) -> bool:
        """Fetch the queue from the coordinator (state transfer); False when this member is the first."""
        return self._receiver.fetch_state(self.channel, state_timeout)

    def stop(self) -> None:
        """Stop replicating (the channel stays open; 2.12 closes it) and wake :meth:`remove` waiters."""
        with self._cond:
            self._queue.clear()
            self._stopped = True
            self._cond.notify_all()
        self.disp.stop()

    def add_notifier(self, n: Any) -> None:
        self._notifiers.add(n)

    def remove_notifier(self, n: Any) -> None:
        self._notifiers.remove(n)

    # ---- replicated changes

    def _call(self, name: str, args: list[Any], types: list[str], timeout: int) -> list[Any]:
        rsps = self.disp.call_remote_methods(None, name, args, types,
                                             RequestOptions(ResponseMode.GET_ALL, timeout))
        return rsps.get_results()

    def add(self, value: Any) -> None:
        """Append ``value`` at every member."""
        self._call("_add", [value], ["java.lang.Object"], self.timeout)

    def add_at_head(self, value: Any) -> None:
        self._call("_addAtHead", [value], ["java.lang.Object"], self.timeout)

    def add_all(self, values: Iterable[Any]) -> None:
        self._call("_addAll", [list(values)], ["java.util.Collection"], self.timeout)

    def reset(self) -> None:
        """Empty the queue everywhere."""
        self._call("_reset", [], [], self.timeout)

    def remove(self, timeout: float | None = None) -> Any:
        """Take the head everywhere and return it (None if the queue was empty). With ``timeout`` (seconds;
        0 or less: for ever) wait for an element as 2.12's ``remove(long)`` does: ask again whenever the local
        copy changes."""
        if timeout is None:
            return self._remove_once()
        deadline = None if timeout <= 0 else time.monotonic() + timeout
        while True:
            with self._cond:
                version = self._version
            value = self._remove_once()
            if value is not None or self._stopped:
                return value
            with self._cond:
                while self._version == version and not self._stopped:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return None
                    self._cond.wait(left if left is not None else 1.0)

    def _remove_once(self) -> Any:
        results = self._call("_remove", [], [], REMOVE_TIMEOUT)
        return results[0] if results else None

    # ---- reads are local

    def contents(self) -> list[Any]:
        with self._cond:
            return list(self._queue)

    def size(self) -> int:
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def peek(self) -> Any:
        with self._cond:
            return self._queue[0] if self._queue else None

    def __repr__(self) -> str:
        return f"DistributedQueue({self.contents()!r})"

    # ---- what the calls do on every member (Java's _add, _addAtHead, ...)

    _version = 0            # bumped on every change: remove(timeout) waits for one

    def _changed(self) -> None:
        self._version += 1
        self._cond.notify_all()

    @rpc_method("_add", ["java.lang.Object"])
    def _add(self, value: Any) -> None:
        with self._cond:
            self._queue.append(value)
            self._changed()
        self._notifiers.notify("entry_add", value)

    @rpc_method("_addAtHead", ["java.lang.Object"])
    def _add_at_head(self, value: Any) -> None:
        with self._cond:
            self._queue.appendleft(value)
            self._changed()
        self._notifiers.notify("entry_add", value)

    @rpc_method("_addAll", ["java.util.Collection"])
    def _add_all(self, values: Any) -> None:
        items = list(values) if isinstance(values, (list, tuple, set, frozenset)) else []
        with self._cond:
            self._queue.extend(items)
            self._changed()
        self._notifiers.notify("contents_set", items)

    @rpc_method("_reset", [])
    def _reset(self) -> None:
        with self._cond:
            self._queue.clear()
            self._changed()
        self._notifiers.notify("contents_cleared")

    @rpc_method("_remove", [])
    def _remove(self) -> Any:
        with self._cond:
            if not self._queue:
                return None
            value = self._queue.popleft()
            self._changed()
        self._notifiers.notify("entry_removed", value)
        return value

    # ---- membership and state (StateReceiver's callbacks)

    def _view(self, view: View) -> None:
        new = list(view.members or ())
        old = self._members
        if old and new:
            self._notifiers.notify("view_change", [m for m in new if m not in old], [m for m in old if m not in new])
        self._members = new

    def _get_state(self) -> bytes | None:
        return encode_state(JavaCollection("java.util.Vector", self.contents()), self.channel,
                            "DistributedQueue's queue")

    def _set_state(self, state: bytes) -> None:
        items = decode_state(state, self.channel, "DistributedQueue")
        if isinstance(items, list):
            with self._cond:
                self._queue.clear()
            self._add_all(items)


__all__ = ["DistributedQueue"]
