"""The base of 2.12's Locking and Executing: requests travel as a Streamable in the payload
(``Util.objectToByteBuffer``) of a message that carries the protocol's empty header; received messages are
decoded one by one, and one that cannot be read is counted and dropped alone."""

from __future__ import annotations

from typing import Any, ClassVar

from jgpy._core.message import Message
from jgpy.protocols.guard import MessageGuard
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_bool
from jgpy.stack.protocol import UP_HEADER, Protocol


class RequestProtocol(Protocol):
    """``HEADER``: the protocol's (empty) header class; ``REQUEST``: its request class, with
    ``from_payload(dialect, payload)`` and ``to_payload(dialect)``; ``WHAT``: how logs name a request."""

    HEADER: ClassVar[type]
    REQUEST: ClassVar[Any]
    WHAT: ClassVar[str] = "request"

    bypass_bundling = Property(to_bool, True, "bypasses message bundling if set")

    def __init__(self, counters: tuple[str, ...]) -> None:
        super().__init__()
        self.counters = dict.fromkeys(("dropped_malformed",) + counters, 0)
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "a " + self.WHAT, self._rl)

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
