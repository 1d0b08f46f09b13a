"""The base of 2.12's Locking and Executing: requests travel as a Streamable in the payload
(``Util.objectToByteBuffer``) of a message that carries the protocol's empty header; received messages are
decoded one by one, and one that cannot be read is counted and dropped alone.

A request from a sender outside the view is not handled (jgpy: 2.12 handles anything from anybody); one that
arrives before the view that adds its sender (a coordinator's copy of its tables to a joiner, a joiner's request
overtaking the view) is held, at most ``max_held_requests`` for ``held_requests_timeout`` ms, and handled once
a view names the sender (:meth:`RequestProtocol.hold`, :meth:`RequestProtocol.replay_held`)."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, ClassVar

from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool, to_int
from jgpy.stack.protocol import UP_HEADER, Protocol


class RequestProtocol(Protocol):
    """``HEADER``: the protocol's (empty) header class; ``REQUEST``: its request class, with
    ``from_payload(dialect, payload)`` and ``to_payload(dialect)``; ``WHAT``: how logs name a request."""

    HEADER: ClassVar[type]
    REQUEST: ClassVar[Any]
    WHAT: ClassVar[str] = "request"

    bypass_bundling = Property(to_bool, True, "bypasses message bundling if set")
    max_held_requests = Property(
        to_int, 100, "jgpy: requests from senders not (yet) in the view kept until a view names them")
    held_requests_timeout = Property(
        to_int, 5000, "jgpy: ms such a request is kept before it is dropped")

    def __init__(self, counters: tuple[str, ...]) -> None:
        super().__init__()
        self.counters = dict.fromkeys(("dropped_malformed", "dropped_non_member", "held_requests_dropped") +
                                      counters, 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a " + self.WHAT, self._rl)
        self._held: deque[tuple[float, Message]] = deque()
        self._held_lock = threading.Lock()

    # ---- requests from senders the view does not name (yet) ----

    def hold(self, msg: Message, when: float | None = None) -> None:
        """Keep ``msg`` (its sender is not in the view) until a view names its sender; dropped (counted) when
        ``max_held_requests`` are held already."""
        with self._held_lock:
            if len(self._held) < self.max_held_requests:
                self._held.append((time.monotonic() if when is None else when, msg))
                return
        self.counters["dropped_non_member"] += 1
        self._rl.warning("non-member", "%s: dropped a %s from non-member %s (%d so far)", self.local_addr, self.WHAT,
                         msg.src, self.counters["dropped_non_member"])

    def replay_held(self, members: frozenset) -> None:
        """A view: handle the held requests whose sender it names, keep the others until they time out."""
        with self._held_lock:
            held = list(self._held)
            self._held.clear()
        now = time.monotonic()
        for when, msg in held:
            if msg.src in members:
                self._guard.each([msg], self.receive_message)
            elif now - when < self.held_requests_timeout / 1000:
                self.hold(msg, when)
            else:
                self.counters["held_requests_dropped"] += 1

    def clear_held(self) -> None:
        with self._held_lock:
            self._held.clear()

    def held_count(self) -> int:
        with self._held_lock:
            return len(self._held)

    def send_request(self, dest: Any, req: Any) -> bool:
        """Send ``req`` to ``dest`` (None: everybody); a failure is logged, as 2.12 does."""
        msg = Message(dest, req.to_payload(self.stack.dialect))
        msg.put_header(self.id, self.HEADER())
        if self.bypass_bundling:
            msg.set_flag(Message.DONT_BUNDLE)
        try:
            self.down_prot.down_msg(msg)
            return True
        except Exception:  # noqa: BLE001 - as 2.12: logged, the caller goes on
            self._rl.exception("send-failed", "%s: failed sending %s", self.local_addr, req.type.name)
            return False

    def up_needs(self) -> int:
        return UP_HEADER

    def up_batch(self, msgs: list) -> None:
        self._guard.each_mine(msgs, self.receive_message)

    def receive_message(self, msg: Message) -> None:
        try:
            req = self.REQUEST.from_payload(self.stack.dialect, msg.payload)
            self.check_request(req)
        except Exception as e:  # noqa: BLE001 - anything unreadable is a malformed request
            self.counters["dropped_malformed"] += 1
            self._rl.warning("malformed", "%s: dropped a malformed %s from %s: %s (%d so far)", self.local_addr,
                             self.WHAT, msg.src, e, self.counters["dropped_malformed"])
            return
        self.receive_request(req, msg)

    def check_request(self, req: Any) -> None:
        """Raise on a request that was read but is not acceptable (malformed)."""

    def receive_request(self, req: Any, msg: Message) -> None:
        raise NotImplementedError
