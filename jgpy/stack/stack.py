"""The protocol stack: protocols built from a config, wired bottom to top, with shared services.

Services every protocol reaches through ``self.stack``: the timer, the delivery executors (regular and
OOB), the wire dialect and the local address. The top of the stack is the channel.

The wire dialect (``stack.dialect``) is everything that depends on the JGroups version: codecs and framing,
protocol ids, Java sizes (``message_size``), ``setObject`` payloads (``object_to_buffer``), the TCP
handshake. This is the one place that picks it (2.12 by default); protocols reach it only through the stack.
"""

from __future__ import annotations

import difflib
import importlib
import logging
from typing import Any, Iterable, Mapping

from jgpy._core import jg212
from jgpy._core.upgate import UP_EVERY, UpGate
from jgpy.errors import ConfigError
from jgpy.stack.config import StackConfig, load_config, resolve_properties
from jgpy.stack.events import Event
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.properties import apply_properties
from jgpy.stack.protocol import Protocol
from jgpy.stack.timer import TimeScheduler

log = logging.getLogger("jgpy.stack")

#: config name -> "module:Class"; one module per protocol
PROTOCOLS: dict[str, str] = {
    "UDP": "jgpy.protocols.udp:UDP",
    "PING": "jgpy.protocols.ping:PING",
    "TCP": "jgpy.protocols.tcp:TCP",
    "TCP_NIO": "jgpy.protocols.tcp_nio:TCP_NIO",
    "TCPPING": "jgpy.protocols.tcpping:TCPPING",
    "MPING": "jgpy.protocols.mping:MPING",
    "BPING": "jgpy.protocols.bping:BPING",
    "FILE_PING": "jgpy.protocols.file_ping:FILE_PING",
    "SHARED_LOOPBACK": "jgpy.protocols.shared_loopback:SHARED_LOOPBACK",
    "LOOPBACK": "jgpy.protocols.shared_loopback:LOOPBACK",
    "BSH": "jgpy.protocols.bsh:BSH",
    "SIZE": "jgpy.protocols.size:SIZE",
    "TRACE": "jgpy.protocols.trace:TRACE",
    "STATS": "jgpy.protocols.stats:STATS",
    "PERF": "jgpy.protocols.perf:PERF",
    "PRINTOBJS": "jgpy.protocols.printobjs:PRINTOBJS",
    "SFC": "jgpy.protocols.sfc:SFC",
    "TUNNEL": "jgpy.protocols.tunnel:TUNNEL",
    "TCPGOSSIP": "jgpy.protocols.tcpgossip:TCPGOSSIP",
    "JMS": "jgpy.protocols.jms:JMS",
    "MERGE2": "jgpy.protocols.merge2:MERGE2",
    "MERGE3": "jgpy.protocols.merge3:MERGE3",
    "MERGEFAST": "jgpy.protocols.mergefast:MERGEFAST",
    "FD_SOCK": "jgpy.protocols.fd_sock:FD_SOCK",
    "FD_ALL": "jgpy.protocols.fd_all:FD_ALL",
    "VERIFY_SUSPECT": "jgpy.protocols.verify_suspect:VERIFY_SUSPECT",
    "BARRIER": "jgpy.protocols.barrier:BARRIER",
    "pbcast.NAKACK": "jgpy.protocols.pbcast.nakack:NAKACK",
    "UNICAST": "jgpy.protocols.unicast:UNICAST",
    "UNICAST2": "jgpy.protocols.unicast2:UNICAST2",
    "pbcast.STABLE": "jgpy.protocols.pbcast.stable:STABLE",
    "pbcast.GMS": "jgpy.protocols.pbcast.gms:GMS",
    "UFC": "jgpy.protocols.flow_control:UFC",
    "MFC": "jgpy.protocols.flow_control:MFC",
    "FRAG2": "jgpy.protocols.frag2:FRAG2",
    "pbcast.STATE_TRANSFER": "jgpy.protocols.pbcast.state_transfer:STATE_TRANSFER",
    "DISCARD": "jgpy.protocols.discard:DISCARD",
    "FD": "jgpy.protocols.fd:FD",
    "FD_PING": "jgpy.protocols.fd_ping:FD_PING",
    "FD_ICMP": "jgpy.protocols.fd_icmp:FD_ICMP",
    "FC": "jgpy.protocols.fc:FC",
    "FRAG": "jgpy.protocols.frag:FRAG",
    "AUTH": "jgpy.protocols.auth:AUTH",
    "COMPRESS": "jgpy.protocols.compress:COMPRESS",
    "pbcast.STREAMING_STATE_TRANSFER": "jgpy.protocols.pbcast.streaming_state_transfer:STREAMING_STATE_TRANSFER",
    "JOURNAL": "jgpy.protocols.journal:JOURNAL",
    "TOTAL": "jgpy.protocols.total:TOTAL",
    "pbcast.PBCAST": "jgpy.protocols.pbcast.pbcast:PBCAST",
    "pbcast.FLUSH": "jgpy.protocols.pbcast.flush:FLUSH",
    "SEQUENCER": "jgpy.protocols.sequencer:SEQUENCER",
    "CENTRAL_LOCK": "jgpy.protocols.central_lock:CENTRAL_LOCK",
    "PEER_LOCK": "jgpy.protocols.peer_lock:PEER_LOCK",
    "CENTRAL_EXECUTOR": "jgpy.protocols.central_executor:CENTRAL_EXECUTOR",
    "ENCRYPT": "jgpy.protocols.encrypt:ENCRYPT",
    "SMACK": "jgpy.protocols.smack:SMACK",
    "FD_SIMPLE": "jgpy.protocols.fd_simple:FD_SIMPLE",
}

_ALIASES = {"org.jgroups.protocols." + k: k for k in PROTOCOLS}

#: properties of every protocol that the stack reads itself, before the protocol's own are set
STACK_PROPERTIES = {"id": "the protocol id its headers carry (default: 2.12's, from jg-protocol-ids.xml)"}


def protocol_class(name: str, where: str = "") -> type[Protocol]:
    key = _ALIASES.get(name, name)
    spec = PROTOCOLS.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, PROTOCOLS, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(f"{where}unknown protocol {name!r}: jgpy speaks the JGroups 2.12 dialect and implements "
                          f"{', '.join(sorted(PROTOCOLS))}{hint}")
    mod, _, cls = spec.partition(":")
    return getattr(importlib.import_module(mod), cls)


def register_protocol(name: str, spec: str) -> None:
    """Make a protocol class (``"package.module:Class"``) available to stack configs under ``name``."""
    PROTOCOLS[name] = spec


class ProtocolStack:
    """Protocols of one channel, bottom (transport) first."""

    def __init__(self, config: str | StackConfig, top: Protocol, overrides: Mapping[str, str] | None = None,
                 dialect=jg212.DIALECT):
        self.config = load_config(config)
        self.overrides = dict(overrides or {})
        self.dialect = dialect
        self.local_addr: Any = None                   # the member's UUID, set by the channel on connect
        self.cluster_name: str | None = None
        self.protocols: list[Protocol] = []
        for pc in self.config.protocols:
            cls = protocol_class(pc.name, pc.where)
            prot = cls()
            prot.stack = self
            props = resolve_properties(pc, self.overrides)
            prot.id = self._protocol_id(pc, props, getattr(cls, "WIRE_NAME", None) or pc.name)
            apply_properties(prot, props, pc.where, self.overrides)
            self.protocols.append(prot)
        if not self.protocols or not getattr(self.protocols[0], "IS_TRANSPORT", False):
            raise ConfigError(f"{self.config.source}: the first protocol must be a transport (e.g. UDP), "
                              f"not {self.config.protocols[0].name}")
        for lower, upper in zip(self.protocols, self.protocols[1:]):
            lower.up_prot, upper.down_prot = upper, lower
        self.top = top
        self.protocols[-1].up_prot = top
        top.down_prot = self.protocols[-1]
        self._bypass_pass_through()
        top.stack = self
        self.timer: TimeScheduler | None = None
        self.delivery: SerialExecutor | None = None
        self.oob_delivery: SerialExecutor | None = None

    def _bypass_pass_through(self) -> None:
        """Let messages skip protocols that do not handle them.

        A protocol that does not override ``down_msg`` (or ``up_batch``) would only pass the message on; its
        bound method is replaced by its neighbour's, so the caller calls the next protocol that cares
        directly (one Python call less per message and layer). Control events still visit every layer.

        Up, consecutive protocols that need only some batches (:meth:`Protocol.up_needs`) share an
        ``UpGate``: one C pass finds the first of them that needs the batch, so a data batch skips the
        failure detectors, discovery, the other reliable protocol and more without a Python call each."""
        for p in self.protocols[1:]:                      # bottom-up: a chain of pass-throughs collapses
            if "down_msg" not in vars(p) and type(p).down_msg is Protocol.down_msg:   # (a C send core is no
                p.down_msg = p.down_prot.down_msg                                     # pass-through)
        after: Protocol = self.top                        # the nearest protocol above that takes every batch
        run: list[Protocol] = []                          # protocols needing only some batches, up to `after`
        for p in reversed(self.protocols[1:]):            # top-down
            if "up_batch" in vars(p):
                run, after = [], p
            elif type(p).up_batch is Protocol.up_batch:
                p.up_batch = p.up_prot.up_batch
            elif p.up_needs() != UP_EVERY:
                run.insert(0, p)
                p.up_batch = UpGate([q.id for q in run], [q.up_needs() for q in run],
                                    [type(q).up_batch.__get__(q) for q in run], after).up_batch
            else:
                run, after = [], p

    def _protocol_id(self, pc, props: dict[str, str], wire_name: str) -> int:
        """``id`` as configured, else that of ``wire_name`` (the protocol's name, or the one whose headers a
        protocol class sends as its ``WIRE_NAME`` says) in the 2.12 table; 0 for none."""
        if "id" in props:
            raw = props.pop("id")
            try:
                return int(raw)
            except ValueError:
                raise ConfigError(f"{pc.where}{pc.name}: property id={raw!r} is not a number") from None
        try:
            return self.dialect.protocol_id(wire_name)
        except KeyError:
            return 0   # protocols without an id (MERGE2, BARRIER) send no headers, as in JGroups

    # ---- access ----

    @property
    def transport(self):
        return self.protocols[0]

    def find(self, name_or_cls) -> Protocol | None:
        for p in self.protocols:
            if (isinstance(name_or_cls, str) and p.NAME == name_or_cls) or \
                    (isinstance(name_or_cls, type) and isinstance(p, name_or_cls)):
                return p
        return None

    def __iter__(self) -> Iterable[Protocol]:
        return iter(self.protocols)

    def names(self) -> list[str]:
        return [p.NAME for p in self.protocols]

    # ---- life cycle ----

    def init(self) -> None:
        for p in self.protocols:
            p.init()

    def start(self, name: str) -> None:
        """Start the services and the protocols (top first, as JGroups does)."""
        self.timer = TimeScheduler(f"jgpy-timer-{name}")
        tp = self.transport                   # disabled "thread pools": the receive threads deliver when they can
        pooled = getattr(tp, "thread_pool_enabled", True)
        self.delivery = SerialExecutor(f"jgpy-deliver-{name}", caller_runs=not pooled,
                                       relay=pooled and getattr(tp, "relay_delivery", False))
        oob_pooled = getattr(tp, "oob_thread_pool_enabled", True)
        self.oob_delivery = SerialExecutor(f"jgpy-oob-{name}", caller_runs=not oob_pooled,
                                           relay=oob_pooled and getattr(tp, "relay_delivery", False))
        started = []
        try:
            for p in reversed(self.protocols):
                p.start()
                started.append(p)
        except Exception:
            for p in started:
                try:
                    p.stop()
                except Exception:  # noqa: BLE001
                    log.exception("stopping %s after a failed start", p.NAME)
            self._stop_services()
            raise

    def stop(self) -> None:
        for p in reversed(self.protocols):
            try:
                p.stop()
            except Exception:  # noqa: BLE001 - stop everything we can
                log.exception("%s.stop() failed", p.NAME)
        self._stop_services()

    def _stop_services(self) -> None:
        for svc in (self.timer, self.delivery, self.oob_delivery):
            if svc is not None:
                svc.stop()
        self.timer = self.delivery = self.oob_delivery = None

    def destroy(self) -> None:
        for p in self.protocols:
            try:
                p.destroy()
            except Exception:  # noqa: BLE001
                log.exception("%s.destroy() failed", p.NAME)

    # ---- entry points from the top ----

    def down(self, evt: Event) -> Any:
        return self.protocols[-1].down(evt)

    def down_msg(self, msg) -> Any:
        return self.protocols[-1].down_msg(msg)

    def dump_stats(self) -> dict[str, dict]:
        return {p.NAME: p.dump_stats() for p in self.protocols}
