"""TP: what every transport does (``org.jgroups.protocols.TP``).

Sending: every message gets the transport header (the cluster name) last; a copy of every multicast (and
of every unicast to ourselves) goes up to ourselves (``loopback``) and regular multicasts are bundled; unicasts are sent to the
physical address learned from discovery. Receiving: datagrams are decoded in batches, messages of other
clusters and our own multicasts (looped back by the kernel) are dropped, the rest go up as one batch.
Bad datagrams (another version, malformed bytes) are counted and logged, never fatal; a malformed message (a
header under a protocol id that does not carry its class) is dropped alone. Every log line a peer can trigger is
rate-limited, and what strangers can make the transport remember (destinations it asked discovery about,
mappings of non-members) is bounded.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from jgpy._core.address import IpAddress
from jgpy._core.headers import TpHeader
from jgpy._core.message import Message
from jgpy._core.sync import Handoff
from jgpy._core.transport import TransportCore
from jgpy._core.wire import utf_encode
from jgpy.stack.diagnostics import DiagnosticsHandler, TransportProbeHandler
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import Wakeup
from jgpy.stack.netutil import resolve_bind_addr
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import CoreProperty, Property, ignored, to_bool, to_int, to_size, to_str
from jgpy.stack.protocol import Protocol

OOB = Message.OOB
DONT_BUNDLE = Message.DONT_BUNDLE


class Loopback:
    """Our own messages, passed up in batches on a thread of their own.

    Java 2.12 hands each loopback copy to its thread pools; jgpy queues them and one thread passes
    everything queued so far up as one batch, so a fast sender pays an append per message, not a trip up
    the stack (own messages are delivered in the order they were sent). After a batch the thread dozes
    for ``DOZE`` seconds before it asks to be woken: a streaming sender then wakes it once per burst, not
    once per message (a wake-up is a futex call and a context switch on both sides).
    """

    DOZE = 0.0001

    def __init__(self, up: "TP", name: str) -> None:
        self.tp = up
        self._wakeup = Wakeup()
        self.queue = Handoff(self._wakeup)       # the transport's core puts into it with C calls
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _has_work(self) -> bool:
        return len(self.queue) > 0 or not self._running

    def _run(self) -> None:
        q, tp = self.queue, self.tp
        while True:
            if not len(q):
                if not self._running:
                    return
                self._wakeup.sleep_unless(self._has_work, self.DOZE)
                continue
            batch = q.take()
            try:
                tp.up_prot.up_batch(batch)
            except Exception:  # noqa: BLE001 - a failure above must not end loopback delivery
                tp.counters["up_errors"] += 1
                tp._rl.exception("loopback-failed", "%s: loopback delivery of %d message(s) failed",
                                 tp.local_addr, len(batch))

    def stop(self, timeout: float = 2.0) -> None:
        self._running = False
        self._wakeup.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


#: destinations without a physical address that discovery was asked about in the last WHO_HAS_INTERVAL
#: seconds, at most: a stranger that makes us answer made-up senders cannot grow the table
MAX_WHO_HAS = 1000
WHO_HAS_INTERVAL = 2.0


class TP(TransportCore, Protocol):
    """The per-message work of both directions is the C core this class derives from (``TransportCore``,
    ``jgpy/_core/transport.pyx``); the settings it reads are its fields (the ``CoreProperty`` s below), and so are
    the connection state (``tp_header``, ``cluster_utf``, ``own_addr``, ``dialect``, ``logical_addr_cache``) and
    the ways out the concrete transport opens (``bundler``, ``ucast_sender``, ``mcast_sender``, ...)."""

    IS_TRANSPORT = True

    bind_addr = Property(to_str, None, "interface to bind to (IP, host name, or LOOPBACK/SITE_LOCAL/GLOBAL/"
                         "NON_LOOPBACK); jgroups.bind_addr overrides it", system_property=("jgroups.bind_addr",
                                                                                           "bind.address"))
    bind_port = Property(to_int, 0, "port of the unicast socket (0: ephemeral)")
    port_range = Property(to_int, 50, "ports to try above bind_port when it is taken")
    loopback = CoreProperty(to_bool, True, "deliver own multicasts locally right away (and drop them when they "
                            "come back from the network)")
    discard_incompatible_packets = CoreProperty(to_bool, True, "drop datagrams of another JGroups major.minor "
                                                "version")
    enable_bundling = CoreProperty(to_bool, True, "bundle regular multicasts into bigger datagrams")
    enable_unicast_bundling = CoreProperty(to_bool, False, "bundle every regular unicast (false: only streams, see "
                                           "unicast_stream_gap_us)")
    unicast_stream_gap_us = CoreProperty(to_int, 20, "jgpy: regular unicasts to a member that follow each other by "
                                         "less than this are a stream and go through a bundler of that member's "
                                         "(sendmmsg, up to max_bundle_size per datagram); others are sent at once, "
                                         "alone (-1: never bundle unicasts unless enable_unicast_bundling; both "
                                         "need enable_bundling)",
                                         system_property=("jgpy.unicast_stream_gap_us",))
    multicast_stream_gap_us = CoreProperty(to_int, 20, "jgpy: a regular multicast that follows the previous one by "
                                           "this or more, while the bundler holds nothing, is sent at once, alone (an "
                                           "RPC to the group does not wait for the bundler); closer ones are a "
                                           "stream and bundled (-1: bundle every regular multicast; needs "
                                           "enable_bundling)",
                                           system_property=("jgpy.multicast_stream_gap_us",))
    enable_diagnostics = Property(to_bool, True, "answer probes (JGroups' probe tool, python -m jgpy probe) on "
                                  "diagnostics_addr:diagnostics_port (jgpy: joined on bind_addr's interface only)")
    diagnostics_addr = Property(to_str, "224.0.75.75", "multicast group of the probes")
    diagnostics_port = Property(to_int, 7500, "port of the probes")
    max_bundle_size = Property(to_size, 64000, "max size of a bundle datagram")
    max_bundle_timeout = Property(to_int, 20, "max ms a message waits in the bundler (jgpy sends as soon as the "
                                  "sender pauses, so this is only an upper bound)")
    logical_addr_cache_max_size = Property(to_int, 200, "max entries of the logical->physical address cache")
    logical_addr_cache_expiration = Property(to_int, 120000, "ms after which a non-member's mapping may go")
    log_discard_msgs = Property(to_bool, True, "log messages dropped because they belong to another cluster")
    bundler_capacity = Property(to_int, 20000, "max messages queued in the bundler")
    bundler_ring_size = Property(to_size, 2_000_000, "jgpy: bytes of the bundler's ring, which holds the queued "
                                 "messages as encoded (it is resident memory once it has wrapped; adders wait "
                                 "when it is full)")

    thread_pool_enabled = Property(to_bool, True, "deliver regular messages on the delivery thread (false: the "
                                   "receive thread delivers them itself while that thread is idle: lower latency, "
                                   "but a receive() that blocks holds up the socket)", name="thread_pool.enabled",
                                   aliases=("thread_pool_enabled",))
    oob_thread_pool_enabled = Property(to_bool, True, "deliver OOB messages on the OOB thread (false: the receive "
                                       "thread does while that thread is idle)", name="oob_thread_pool.enabled",
                                       aliases=("oob_thread_pool_enabled",))
    relay_delivery = Property(to_bool, True, "jgpy: with thread_pool.enabled, each socket has two receive threads; "
                              "the one that read a batch delivers its regular messages itself while the delivery "
                              "thread is idle, after handing the socket to the other (no thread switch per "
                              "message, and no socket waits for the application); false: one receive thread "
                              "per socket, which always hands over to the delivery thread",
                              system_property=("jgpy.relay_delivery",))
    relay_gap_us = Property(to_int, 20, "jgpy: relay delivery: a receive thread does not hand its socket over "
                            "again less than this after its previous hand-over (a stream: the delivery thread "
                            "delivers instead)", system_property=("jgpy.relay_gap_us",))

    IGNORED_PREFIXES = {
        "thread_pool.": ignored("jgpy delivers on one delivery thread, not a Java thread pool "
                                "(thread_pool.enabled is honoured)"),
        "oob_thread_pool.": ignored("jgpy delivers OOB messages on one OOB thread, not a Java thread pool "
                                    "(oob_thread_pool.enabled is honoured)"),
        "timer.": ignored("jgpy's timer is one thread running short tasks"),
    }
    DEPRECATED_PROPERTIES = ("end_port", "marshaller_pool_size", "num_timer_threads", "persistent_ports",
                             "persistent_ports_file", "pm_expiry_time", "prevent_port_reuse", "start_port",
                             "use_concurrent_stack", "use_incoming_packet_handler", "use_outgoing_packet_handler")
    IGNORED_PROPERTIES = {
        "thread_naming_pattern": ignored("thread names are fixed (jgpy-*)"),
        "timer_type": ignored("one timer implementation"),
        "bundler_type": ignored("one bundler: send when the sender pauses or max_bundle_size is reached"),
        "singleton_name": ignored("no shared transports"),
        "receive_on_all_interfaces": ignored("binds to bind_addr only"),
        "receive_interfaces": ignored("binds to bind_addr only"),
        "bind_interface": ignored("use bind_addr"),
        "bind_interface_str": ignored("use bind_addr"),
        "use_local_host": ignored("deprecated in 2.12"),
        "bind_to_all_interfaces": ignored("deprecated in 2.12"),
        # the Java field names 2.12's Configurator also accepts for the thread pool and timer properties
        **dict.fromkeys(("thread_pool_queue_enabled", "thread_pool_queue_max_size", "thread_pool_rejection_policy"),
                        ignored("jgpy delivers on one delivery thread, not a Java thread pool")),
        **dict.fromkeys(("oob_thread_pool_queue_enabled", "oob_thread_pool_queue_max_size",
                         "oob_thread_pool_rejection_policy"),
                        ignored("jgpy delivers OOB messages on one OOB thread, not a Java thread pool")),
        **dict.fromkeys(("tick_time", "timer_queue_max_size", "wheel_size"),
                        ignored("jgpy's timer is one thread running short tasks")),
    }

    def __init__(self) -> None:
        super().__init__()
        self.physical_addr: IpAddress | None = None
        self._cache_lock = threading.Lock()       # writes to logical_addr_cache (the core reads it)
        self.members: list = []
        self._who_has: dict[Any, float] = {}
        self._removal_times: dict[Any, float] = {}
        self._rl = RateLimitedLog(self.log)
        self._loopback: Loopback | None = None
        self.diagnostics: DiagnosticsHandler | None = None
        self.counters = {"msgs_sent": 0, "bytes_sent": 0, "msgs_received": 0, "datagrams_received": 0,
                         "dropped_version": 0, "dropped_malformed": 0, "dropped_other_cluster": 0,
                         "dropped_no_tp_header": 0, "dropped_own_mcast": 0, "dropped_no_physical_addr": 0,
                         "loopbacks": 0, "up_errors": 0, "dropped_own_bundles": 0}

    def start(self) -> None:
        port = self.physical_addr.port if self.physical_addr is not None else id(self)
        self._loopback = Loopback(self, f"jgpy-loopback-{port}")
        self.dialect = self.stack.dialect
        self.loopback_queue = self._loopback.queue
        if self.enable_diagnostics:
            self._start_diagnostics()

    def _start_diagnostics(self) -> None:
        handler = DiagnosticsHandler(self.diagnostics_addr, self.diagnostics_port,
                                     lambda: getattr(self.stack, "cluster_name", None))
        handler.register(TransportProbeHandler(self))
        try:
            handler.start(resolve_bind_addr(self.bind_addr))
        except OSError as e:
            self.log.warning("%s: no diagnostics (probe) responder on %s:%d: %s", self.NAME, self.diagnostics_addr,
                             self.diagnostics_port, e)
            return
        self.diagnostics = handler

    def register_probe_handler(self, handler) -> None:
        """Answer probes with ``handler`` too (the channel's: jmx, info, ...); nothing without diagnostics."""
        if self.diagnostics is not None:
            self.diagnostics.register(handler)

    def unregister_probe_handler(self, handler) -> None:
        if self.diagnostics is not None:
            self.diagnostics.unregister(handler)

    def stop(self) -> None:
        diag, self.diagnostics = self.diagnostics, None
        if diag is not None:
            diag.stop()
        lb, self._loopback = self._loopback, None
        self.loopback_queue = None
        if lb is not None:
            lb.stop()

    # ---- to be provided by the concrete transport ----

    def send_multicast_datagram(self, data: bytes) -> None:
        raise NotImplementedError

    def send_unicast_datagram(self, data: bytes, dest: IpAddress) -> None:
        raise NotImplementedError

    def bundle(self, entry: bytes) -> None:
        """Queue an encoded list entry into the multicast bundle."""
        raise NotImplementedError

    # ---- events ----

    def down(self, evt: Event) -> Any:
        t = evt.type
        if t == EventType.GET_PHYSICAL_ADDRESS:
            if evt.arg == self.local_addr:
                return self.physical_addr
            with self._cache_lock:
                return self.logical_addr_cache.get(evt.arg)
        if t == EventType.SET_PHYSICAL_ADDRESS:
            logical, physical = evt.arg
            self.add_physical_address(logical, physical)
            return None
        if t == EventType.GET_LOGICAL_PHYSICAL_MAPPINGS:
            with self._cache_lock:
                return dict(self.logical_addr_cache)
        if t == EventType.SET_LOCAL_ADDRESS:
            self.own_addr = evt.arg
            if self.physical_addr is not None:
                self.add_physical_address(evt.arg, self.physical_addr)
            self.handle_local_address(evt.arg)
            return None
        if t == EventType.CONNECT:
            cluster = str(evt.arg)          # a plain str: the C codecs refuse ConnectArg (connect(use_flush=False))
            self.stack.cluster_name = cluster
            self.dialect = self.stack.dialect
            self.cluster_utf = utf_encode(cluster)
            self.tp_header = TpHeader(cluster)
            return None
        if t in (EventType.VIEW_CHANGE, EventType.TMP_VIEW):
            self.members = list(evt.arg.members or ())
            if t == EventType.VIEW_CHANGE:
                self._expire_cache()
                self.retire_peer_bundlers(set(self.members))
            return None
        return None

    def handle_local_address(self, addr) -> None:
        """Hook: the transport learns its logical address (the bundle prefix names it)."""

    def retire_peer_bundlers(self, keep: set | None = None) -> None:
        """Hook: stop the unicast bundlers of members not in ``keep`` (None: all of them)."""

    def add_physical_address(self, logical, physical: IpAddress) -> None:
        if logical is None or physical is None:
            return
        with self._cache_lock:
            if self.logical_addr_cache.get(logical) != physical:
                self.logical_addr_cache.pop(logical, None)
                self.logical_addr_cache[logical] = physical
            self._who_has.pop(logical, None)
            while len(self.logical_addr_cache) > self.logical_addr_cache_max_size:
                victim = next((a for a in self.logical_addr_cache if a not in self.members
                               and a != self.local_addr), None)
                if victim is None:
                    break
                del self.logical_addr_cache[victim]
                self._removal_times.pop(victim, None)

    def _expire_cache(self) -> None:
        """Mappings of former members age out (JGroups' LazyRemovalCache); members' never do."""
        now = time.monotonic()
        with self._cache_lock:
            for a in list(self.logical_addr_cache):
                if a in self.members or a == self.local_addr:
                    self._removal_times.pop(a, None)
                    continue
                first = self._removal_times.setdefault(a, now)
                if (now - first) * 1000 >= self.logical_addr_cache_expiration:
                    del self.logical_addr_cache[a]
                    self._removal_times.pop(a, None)
            for a in [a for a in self._removal_times if a not in self.logical_addr_cache]:
                del self._removal_times[a]

    # ---- sending ----

    # down_msg: the core adds the TpHeader and src, queues the loopback copy, bundles regular multicasts, sends
    # unicasts to known members and hands everything else to _send_single; these are its slow paths:

    def _not_connected(self, msg: Message) -> None:
        self._rl.warning("not-connected", "%s: dropped a message sent before connect: %r", self.NAME, msg)

    def _send_physical(self, msg: Message) -> None:
        """A message addressed to a physical address (e.g. a TCPPING discovery request)."""
        dest, msg.dest = msg.dest, None
        self.counters["msgs_sent"] += 1
        self.counters["bytes_sent"] += msg.length
        self._send_single(msg, dest, False)

    def _send_single(self, msg: Message, dest, multicast: bool) -> None:
        dialect = self.stack.dialect
        if self.enable_bundling and multicast and not (msg.flags & (OOB | DONT_BUNDLE)):
            self.bundle(dialect.encode_list_entry(msg, self.local_addr))      # no bundler (yet): sent alone
            return
        data = dialect.encode_message(msg, multicast)
        if multicast:
            self.send_multicast_datagram(data)
            return
        physical = dest if isinstance(dest, IpAddress) else self.physical_for(dest)
        if physical is None:
            self.counters["dropped_no_physical_addr"] += 1
            return
        self.send_unicast_datagram(data, physical)

    def physical_for(self, dest) -> IpAddress | None:
        now = time.monotonic()
        with self._cache_lock:
            physical = self.logical_addr_cache.get(dest)
            if physical is not None:
                return physical
            ask = self._note_who_has(dest, now)
        if ask:
            self._rl.warning("no-phys", "%s: no physical address for %s, dropping message", self.local_addr, dest)
            try:
                self.up(Event(EventType.GET_PHYSICAL_ADDRESS, dest))
            except Exception:  # noqa: BLE001
                self._rl.exception("who-has", "%s: discovery request for %s failed", self.local_addr, dest)
        return None

    def _note_who_has(self, dest, now: float) -> bool:
        """True when discovery should be asked about ``dest`` (at most every WHO_HAS_INTERVAL per destination);
        the table keeps the MAX_WHO_HAS destinations asked about last (called under ``_cache_lock``)."""
        last = self._who_has.get(dest)
        if last is not None and now - last <= WHO_HAS_INTERVAL:
            return False
        self._who_has.pop(dest, None)
        self._who_has[dest] = now
        while len(self._who_has) > MAX_WHO_HAS:
            del self._who_has[next(iter(self._who_has))]
        return True

    # ---- receiving ----

    def read_while(self, pending: Callable[[], bool], timeout: float) -> bool:
        """A thread waiting for unicasts (an RPC caller, its answer) reads them itself while ``pending()``, at
        most ``timeout`` seconds (< 0: no limit); False: this transport cannot (the caller waits as usual).
        UDP with relay delivery can (``DatagramLoop.read_while``)."""
        return False

    def wake_reader(self) -> None:
        """Wake the thread in :meth:`read_while`, to look at what it waits for."""

    # receive_datagrams (receive_unicasts, receive_multicasts: the socket loops' handlers): the core decodes a
    # batch of datagrams, checks it and passes it up as one batch; the rare drops come back here:

    def _bad_datagram(self, kind: str, data, source, error: Exception) -> None:
        c = self.counters
        if kind == "version":
            c["dropped_version"] += 1
            self._rl.warning("version", "%s: dropped a datagram from %s: %s", self.local_addr, _src(source), error)
        elif kind == "malformed_msgs":       # counted by the receive core (dropped_malformed_msgs)
            self._rl.warning("malformed-msgs", "%s: dropped malformed message(s) of a datagram (%d bytes) from %s, "
                             "kept the rest: %s", self.local_addr, len(data), _src(source), error)
        else:
            c["dropped_malformed"] += 1
            self._rl.warning("malformed", "%s: dropped a malformed datagram (%d bytes) from %s: %s",
                             self.local_addr, len(data), _src(source), error)

    def _dropped(self, kind: str, count: int) -> None:
        self.counters[f"dropped_{kind}"] += count
        if kind == "no_tp_header":
            self._rl.error("no-tp-header", "%s: dropped %d message(s) without a transport header",
                           self.local_addr, count)
        elif kind == "other_cluster" and self.log_discard_msgs:
            self._rl.warning("other-cluster", "%s: discarded %d message(s) from a different cluster "
                             "(ours is %r)", self.local_addr, count, self.stack.cluster_name)

    def _up_failed(self, count: int, error: Exception) -> None:
        self.counters["up_errors"] += 1
        self._rl.exception("up-failed", "%s: failed passing %d message(s) up", self.local_addr, count, exc_info=error)

    def dump_stats(self) -> dict[str, Any]:
        d = dict(self.counters)
        d["datagrams_received"] += self.datagrams_received
        d["msgs_received"] += self.msgs_received
        d["dropped_malformed_msgs"] = self.dropped_malformed_msgs
        d["msgs_sent"] += self.msgs_sent
        d["bytes_sent"] += self.bytes_sent
        d["loopbacks"] = self.loopbacks
        d["pairs_sent"] = self.pairs_sent
        return d


def _src(source) -> str:
    try:
        host, port = source[:2]
        return f"{host}:{port}"
    except Exception:  # noqa: BLE001
        return "?"


log = logging.getLogger("jgpy.protocols.TP")
