"""The protocol base class: a layer with ``up``/``down`` neighbours, properties and a life cycle.

Control events travel with :meth:`Protocol.up` / :meth:`Protocol.down` (an :class:`Event`).
Messages have their own paths, built for speed:

* down: :meth:`Protocol.down_msg` (one message; the caller's thread),
* up: :meth:`Protocol.up_batch` (a list of messages, all received together: one call per protocol per
  batch, as JGroups 3.3+ does with ``MessageBatch``).

A protocol that does not care about a message passes it on unchanged; the default implementations do
exactly that, so a protocol overrides only what it handles.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from jgpy._core.batch import split_by_header
from jgpy._core.upgate import UP_EVERY, UP_HEADER, UP_MULTICASTS, UP_UNICASTS
from jgpy.stack.events import Event, EventType
from jgpy.stack.properties import (CoreProperty, LogLevelProperty, Property, ignored, properties_of, to_bool,
                                   to_log_level)

if TYPE_CHECKING:
    from jgpy.stack.stack import ProtocolStack


class Protocol:
    """Base class of every protocol. Subclasses set ``NAME`` to the name used in XML configs."""

    NAME: ClassVar[str] = ""
    #: JGroups properties accepted (with a warning) but not acted upon, with the reason
    IGNORED_PREFIXES: ClassVar[dict[str, str]] = {}
    IGNORED_PROPERTIES: ClassVar[dict[str, str]] = {
        "name": ignored("jgpy names a protocol by its class, so one stack holds each protocol once"),
    }

    #: names 2.12 declares with ``@DeprecatedProperty`` (on the class or a base): accepted, ignored, logged
    DEPRECATED_PROPERTIES: ClassVar[tuple[str, ...]] = ("down_thread", "down_thread_prio", "up_thread",
                                                        "up_thread_prio")

    stats = Property(to_bool, True, "collect statistics")
    ergonomics = Property(to_bool, True, "let the protocol adjust some of its properties to the cluster size")
    level = LogLevelProperty(to_log_level, None, "the level of this protocol's logger: trace, debug, info, warn, "
                             "error or fatal (2.12's names; java.util.logging's are accepted too)")

    def __init__(self) -> None:
        for prop in properties_of(type(self)).values():      # defaults as instance attributes (fast reads)
            if isinstance(prop, CoreProperty):
                setattr(self, prop.attr, prop.fresh_default())   # a field of the protocol's C core
            else:
                self.__dict__.setdefault(prop.attr, prop.fresh_default())
        self.up_prot: Protocol | None = None
        self.down_prot: Protocol | None = None
        self.stack: ProtocolStack | None = None
        self.id: int = 0
        self.log = logging.getLogger("jgpy.protocols." + (self.NAME or type(self).__name__))

    # ---- life cycle (init after properties are set; start/stop around connect/disconnect) ----

    def init(self) -> None:
        """Check properties and prepare; called once, bottom-up, after properties are set."""

    def start(self) -> None:
        """Called on connect, top-down."""

    def stop(self) -> None:
        """Called on disconnect, top-down."""

    def destroy(self) -> None:
        """Called when the channel is closed."""

    # ---- events ----

    def up(self, evt: Event) -> Any:
        return self.up_prot.up(evt) if self.up_prot is not None else None

    def down(self, evt: Event) -> Any:
        return self.down_prot.down(evt) if self.down_prot is not None else None

    # ---- messages ----

    def down_msg(self, msg) -> Any:
        return self.down_prot.down_msg(msg)

    def up_batch(self, msgs: list) -> None:
        self.up_prot.up_batch(msgs)

    def up_needs(self) -> int:
        """Which batches :meth:`up_batch` must see: those with a message that carries this protocol's header
        (``UP_HEADER``), with a multicast (``UP_MULTICASTS``), with a unicast (``UP_UNICASTS``); by default
        all of them (``UP_EVERY``). A protocol that needs less promises to pass every other batch up unchanged
        and without side effects, and the stack lets such batches skip it (``jgpy._core.upgate.UpGate``).
        Asked once, when the stack is built."""
        return UP_EVERY

    def up_msg(self, msg) -> None:
        """Pass a single message up (convenience for protocols that deliver one message at a time)."""
        self.up_prot.up_batch([msg])

    # ---- helpers ----

    def split_mine(self, msgs: list) -> tuple[list, list]:
        """``(messages with my header, the others)`` preserving order."""
        return split_by_header(msgs, self.id)

    @property
    def transport(self):
        return self.stack.transport

    @property
    def timer(self):
        return self.stack.timer

    @property
    def local_addr(self):
        return self.stack.local_addr if self.stack is not None else None

    def dump_stats(self) -> dict[str, Any]:
        """Counters of this protocol (for diagnostics and tests)."""
        return {}

    def __repr__(self) -> str:
        return f"<{self.NAME}>"


__all__ = ["Event", "EventType", "Protocol", "UP_EVERY", "UP_HEADER", "UP_MULTICASTS", "UP_UNICASTS"]
