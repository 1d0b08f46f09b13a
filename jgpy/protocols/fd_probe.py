"""The base of FD_PING and FD_ICMP: FD whose monitor probes the neighbour's host instead of sending it heartbeats.

Every ``timeout`` ms the monitor probes the host of ``ping_dest`` (the neighbour's physical address, from the
transport) on a thread of its own: a probe may take up to ``timeout`` ms, one runs at a time and the timer thread
never waits for it. A probe that gets no answer counts as a miss, an answer (or any message from ``ping_dest``, as
in FD) resets the count, and at ``max_tries`` misses in a row ``ping_dest`` is suspected, as FD suspects (the
Broadcaster, VERIFY_SUSPECT above). A probe that cannot be run at all (the command vanished, no physical address
yet) is logged and counts neither way, as 2.12 logs an exception of its monitor. FD's heartbeat answering and
SUSPECT handling are unchanged, so a Java member running FD next to a jgpy FD_PING still gets its answers.

Deviation: 2.12 probes ``ping_dest.toString()`` (FD_PING) or refuses anything but an IpAddress (FD_ICMP); since
2.12's members have logical (UUID) addresses, its FD_PING passes the member's logical name to the command (useful
only where names are host names) and its FD_ICMP throws on every probe and never suspects. jgpy probes the host of
the member's physical address, which is what both were meant to do.

On the wire: 2.12's jg-protocol-ids.xml has no id for FD_PING and FD_ICMP, so a 2.12 stack holding one fails on
every message it receives (``getHeader(0)``: "An ID of 0 is invalid. Add the protocol which calls getHeader() to
jg-protocol-ids.xml") and forms no cluster; it runs once its ``jgroups.conf.protocol_id_file`` gives them an id.
jgpy sends and reads their FdHeaders under FD's id, 2 (``WIRE_NAME``; the ``id`` property overrides it), so a
Java member whose id file maps FD_PING / FD_ICMP to 2 interoperates (its FD_ICMP still never suspects: see above).
"""

from __future__ import annotations

import threading

from jgpy.protocols.fd import FD
from jgpy.stack.events import Event, EventType


class ProbeError(Exception):
    """The probe could not be run (not: the host did not answer)."""


class ProbingFD(FD):
    """FD with :meth:`probe` in place of the heartbeat; a subclass implements :meth:`probe`."""

    WIRE_NAME = "FD"                     # the protocol id and header of FD (see the module's docstring)

    def __init__(self) -> None:
        super().__init__()
        self._probing = False
        self.num_probe_failures = 0
        self.num_probe_errors = 0

    def probe(self, host: str) -> bool:
        """Whether ``host`` answered within about ``timeout`` ms; :class:`ProbeError` when it cannot be probed."""
        raise NotImplementedError

    def dump_stats(self) -> dict:
        return dict(super().dump_stats(), num_probe_failures=self.num_probe_failures,
                    num_probe_errors=self.num_probe_errors)

    def host_of(self, member) -> str | None:
        physical = self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, member))
        return getattr(physical, "host", None)

    def _monitor_run(self) -> None:
        with self._lock:
            dest = self.ping_dest
            if dest is None or self._probing:
                return
            self._probing = True
        try:
            threading.Thread(target=self._probe_and_judge, args=(dest,), daemon=True,
                             name=f"jgpy-{self.NAME}-probe").start()
        except RuntimeError:                      # no thread to be had (interpreter shutting down)
            with self._lock:
                self._probing = False

    def _probe_and_judge(self, dest) -> None:
        try:
            ok = self._probe_member(dest)
            if ok is not None:
                self._judge(dest, ok)
        finally:
            with self._lock:
                self._probing = False

    def _probe_member(self, dest) -> bool | None:
        """The probe's answer, or None when it could not be run."""
        host = self.host_of(dest)
        if host is None:
            self.num_probe_errors += 1
            self._rl.warning("no-host", "%s: %s has no physical address (yet): not probed", self.me, dest)
            return None
        try:
            return self.probe(host)
        except ProbeError as e:
            self.num_probe_errors += 1
            self._rl.warning("probe-error", "%s: could not probe %s at %s: %s", self.me, dest, host, e)
        except Exception:  # noqa: BLE001 - a bug in a probe must not end failure detection
            self.num_probe_errors += 1
            self._rl.exception("probe-bug", "%s: probing %s at %s failed", self.me, dest, host)
        return None

    def _judge(self, dest, ok: bool) -> None:
        suspect = False
        with self._lock:
            self.num_heartbeats += 1
            if dest != self.ping_dest or self._monitor is None:   # the neighbour changed, or we stopped
                return
            if ok:
                self.num_tries = 0
                return
            self.num_probe_failures += 1
            self.num_tries += 1
            self.log.debug("%s: %s did not answer a probe (tries=%d)", self.me, dest, self.num_tries)
            if self.num_tries >= self.max_tries:
                self.log.debug("%s: %s did not answer %d probes: suspecting it", self.me, dest, self.num_tries)
                self.num_tries = 0
                suspect = True
        if suspect:
            if self.stats:
                self.num_suspect_events += 1
                self.suspect_history.append(dest)
            self._add_suspected(dest)
