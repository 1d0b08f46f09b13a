"""Per-message error handling of the protocols' receive paths.

Hostile input is normal input: a message that makes a protocol's handler raise (a header a decoder let
through with odd fields, a state the sender has no business creating) is counted and logged, rate-limited,
with its traceback, and the other messages of the batch are handled as if it had not been there.
"""

from __future__ import annotations

from typing import Any, Callable

from jgpy.stack.logutil import RateLimitedLog


class MessageGuard:
    """Runs a protocol's handler on each message of a batch; ``failed`` counts the messages whose handling
    raised. ``rl`` is the protocol's :class:`RateLimitedLog` (one line per interval, whatever the sender)."""

    __slots__ = ("prot", "what", "rl", "failed")

    def __init__(self, prot: Any, what: str, rl: RateLimitedLog | None = None) -> None:
        self.prot = prot
        self.what = what
        self.rl = rl if rl is not None else RateLimitedLog(prot.log)
        self.failed = 0

    def each(self, msgs: list, handle: Callable[[Any], Any]) -> None:
        """``handle(msg)`` for every message of ``msgs``, each on its own."""
        for msg in msgs:
            try:
                handle(msg)
            except Exception:  # noqa: BLE001 - one bad message must not hurt the rest of the batch
                self.failure(msg)

    def each_mine(self, msgs: list, handle: Callable[[Any], Any]) -> None:
        """An ``up_batch`` for a protocol that handles its messages one by one: ``handle(msg)`` (guarded) for
        those with its header, the others go up."""
        mine, others = self.prot.split_mine(msgs)
        if mine:
            self.each(mine, handle)
        if others:
            self.prot.up_prot.up_batch(others)

    def failure(self, msg: Any) -> None:
        """Count and log (rate-limited) a message whose handling raised; call from an ``except`` block."""
        self.failed += 1
        self.rl.exception("message-failed", "%s: failed handling %s from %s (%d so far)", self.prot.local_addr,
                          self.what, getattr(msg, "src", None), self.failed)


#: accounted per held message beside its buffer (the Python objects that hold it)
MESSAGE_OVERHEAD = 256


def retained_bytes(msgs: list) -> int:
    """What holding ``msgs`` keeps alive: the buffers their payloads are windows into (a received message is a
    window into its whole datagram; a buffer shared by consecutive messages, a bundle, is counted once) plus
    :data:`MESSAGE_OVERHEAD` per message. A datagram padded around a tiny message costs what it weighs."""
    n = 0
    last = None
    for m in msgs:
        n += MESSAGE_OVERHEAD
        raw = m.raw_buffer
        if raw is not None and raw is not last:
            last = raw
            n += len(raw)
    return n
