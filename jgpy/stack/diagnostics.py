"""The transport's diagnostics responder (2.12's ``TP.DiagnosticsHandler``) and a probe client.

A member with ``enable_diagnostics`` listens on ``diagnostics_addr:diagnostics_port`` (224.0.75.75:7500) for a
probe: a datagram of whitespace-separated keys (``jmx``, ``jmx=UNICAST``, ``info``, ``keys``, ``uuids``,
``dump``, ``socks``...). Every registered probe handler (the transport's, the channel's) answers the keys it
knows with a map, sent back as its own datagram of ``key=value\\r\\n`` lines, with ``cluster`` added: the text
2.12 sends, so JGroups' probe tool and ``python -m jgpy probe`` read Java and jgpy members alike.

Where jgpy deviates (a probe is anybody's datagram): the group is joined on ``bind_addr``'s interface only
(2.12: on every interface); at most ``MAX_RESPONSES_PER_S`` answers leave per second and none is longer than
``MAX_RESPONSE`` bytes (a short spoofed request must not make a member flood a victim); a request is read from at
most ``MAX_REQUEST`` bytes and ``MAX_KEYS`` keys; 2.12's ``invoke``/``op`` keys (call any protocol method) are
answered with a refusal.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import Callable, Iterable, Protocol as TypingProtocol

from jgpy.stack.logutil import RateLimitedLog

log = logging.getLogger("jgpy.diagnostics")

MAX_REQUEST = 1500
MAX_KEYS = 32
MAX_RESPONSE = 60000
MAX_RESPONSES_PER_S = 50


class ProbeHandler(TypingProtocol):
    def handle_probe(self, keys: list[str]) -> dict[str, str]: ...

    def supported_keys(self) -> list[str]: ...


def format_response(values: dict[str, str]) -> bytes:
    """2.12's response text: ``key=value\\r\\n`` per entry (cut at MAX_RESPONSE bytes)."""
    data = "".join(f"{k}={v}\r\n" for k, v in values.items()).encode("utf-8", "replace")
    return data[:MAX_RESPONSE]


def _java_str(v) -> str:
    """A value as Java's ``toString`` shows it (maps ``{k=v, ...}``, lists ``[a, b]``, null, true/false)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_java_str(k)}={_java_str(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ", ".join(_java_str(x) for x in v) + "]"
    return str(v)


def map_to_string(values: dict) -> str:
    """2.12's ``Util.mapToString``: ``key=value\\n`` per entry."""
    return "".join(f"{k}={_java_str(v)}\n" for k, v in values.items())


class DiagnosticsHandler:
    """The responder: one multicast socket, one thread, the registered handlers."""

    def __init__(self, addr: str, port: int, cluster: Callable[[], str | None]) -> None:
        self.addr, self.port = addr, port
        self._cluster = cluster
        self.handlers: list[ProbeHandler] = []
        self.sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._window = [0.0, 0]                      # [second it counts, answers sent in it]
        self._rl = RateLimitedLog(log)
        self.counters = {"requests": 0, "responses": 0, "responses_dropped": 0, "bad_requests": 0}

    def register(self, handler: ProbeHandler) -> None:
        if handler not in self.handlers:
            self.handlers.append(handler)

    def unregister(self, handler: ProbeHandler) -> None:
        if handler in self.handlers:
            self.handlers.remove(handler)

    def start(self, interface: str) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.addr, self.port))        # only this group's datagrams (as 2.12 on Linux)
            except OSError:
                s.bind(("", self.port))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                         socket.inet_aton(self.addr) + socket.inet_aton(interface))
        except BaseException:
            s.close()
            raise
        self.sock = s
        self._thread = threading.Thread(target=self._run, args=(s,), name=f"jgpy-diagnostics-{self.port}",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        s, self.sock = self.sock, None
        if s is not None:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(2.0)

    def _run(self, s: socket.socket) -> None:
        while self.sock is s:
            try:
                data, sender = s.recvfrom(MAX_REQUEST)
            except OSError:
                if self.sock is not s:
                    return
                continue
            if not data:
                continue
            try:
                self.handle(data, sender, s)
            except Exception:  # noqa: BLE001 - a probe must never end the responder
                self.counters["bad_requests"] += 1
                self._rl.exception("probe", "failed answering a probe from %s", sender)

    def _may_answer(self) -> bool:
        now = time.monotonic()
        if now - self._window[0] >= 1.0:
            self._window = [now, 0]
        if self._window[1] >= MAX_RESPONSES_PER_S:
            return False
        self._window[1] += 1
        return True

    def handle(self, request: bytes, sender, s: socket.socket) -> None:
        self.counters["requests"] += 1
        keys = request.decode("latin-1").split()[:MAX_KEYS]
        for handler in list(self.handlers):
            values = handler.handle_probe(keys)
            if not values:
                continue
            values.setdefault("cluster", self._cluster() or "n/a")
            if not self._may_answer():
                self.counters["responses_dropped"] += 1
                self._rl.warning("rate", "more than %d probe responses a second: dropped one to %s",
                                 MAX_RESPONSES_PER_S, sender)
                continue
            s.sendto(format_response(values), sender)
            self.counters["responses"] += 1

    def supported_keys(self) -> list[str]:
        return [k for h in self.handlers for k in h.supported_keys()]


def probe(keys: Iterable[str], addr: str = "224.0.75.75", port: int = 7500, bind_addr: str = "127.0.0.1",
          ttl: int = 0, timeout: float = 2.0) -> list[tuple[tuple[str, int], str]]:
    """Send a probe of ``keys`` to the group and collect the answers for ``timeout`` seconds: ``[(sender,
    text)]`` (as JGroups' Probe tool: one request, every answer that comes back)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out = []
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("b", ttl))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(bind_addr))
        s.bind((bind_addr, 0))
        s.sendto((" ".join(keys) + " ").encode("latin-1"), (addr, port))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                data, sender = s.recvfrom(65535)
            except socket.timeout:
                break
            out.append((sender, data.decode("utf-8", "replace")))
    finally:
        s.close()
    return out


def parse_response(text: str) -> dict[str, str]:
    """A response's ``key=value`` entries (a value may span lines: it runs to the next ``\\r\\n``)."""
    out = {}
    for entry in text.split("\r\n"):
        if "=" in entry:
            k, _, v = entry.partition("=")
            out[k] = v
    return out


def _thread_dump() -> str:
    import sys
    import traceback
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f"\"{names.get(ident, ident)}\":\n" + "".join(traceback.format_stack(frame, limit=12)))
    return "\n".join(parts)


class TransportProbeHandler:
    """The transport's keys (2.12: dump, keys, uuids, info)."""

    def __init__(self, tp) -> None:
        self.tp = tp

    def supported_keys(self) -> list[str]:
        return ["dump", "keys", "uuids", "info"]

    def handle_probe(self, keys: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for key in keys:
            if key == "dump":
                out["dump"] = _thread_dump()
            elif key == "uuids":
                cache = dict(self.tp.logical_addr_cache)
                out["uuids"] = "".join(f"{k.to_string_long() if hasattr(k, 'to_string_long') else k}: {v}\n"
                                       for k, v in cache.items())
                out.setdefault("local_addr", str(self.tp.local_addr))
            elif key == "keys":
                diag = self.tp.diagnostics
                out["keys"] = " ".join(diag.supported_keys() if diag is not None else self.supported_keys()) + " "
        return out


class ChannelProbeHandler:
    """The channel's keys (2.12's ``JChannel.MyProbeHandler``): jmx[=PROTOCOL[.attr,attr]], info, socks; every
    answer also names version, view, local_addr, physical_addr and cluster. ``invoke``/``op`` are refused."""

    def __init__(self, channel, version: str) -> None:
        self.channel = channel
        self.version = version

    def supported_keys(self) -> list[str]:
        return ["jmx", "info", "socks"]

    def _jmx(self, key: str) -> str:
        stats = self.channel.dump_stats()
        if "=" in key:
            spec = key.split("=", 1)[1]
            name, _, attrs = spec.partition(".")
            chosen = stats.get(name)
            if chosen is None:
                return "null"
            if attrs:
                wanted = [a.strip() for a in attrs.split(",") if a.strip()]
                chosen = {a: chosen.get(a) for a in wanted}
            stats = {name: chosen}
        return map_to_string(stats)

    def handle_probe(self, keys: list[str]) -> dict[str, str]:
        ch = self.channel
        out: dict[str, str] = {}
        for key in keys:
            if key.startswith("jmx"):
                out["jmx"] = self._jmx(key)
            elif key == "info":
                out["info"] = map_to_string({"name": ch.name, "state": getattr(ch, "_state", None)})
            elif key == "socks":
                tp = ch.stack.transport
                out["socks"] = f"{getattr(tp, 'physical_addr', None)} {tp.NAME} [jgpy]\n"
            elif key.startswith("invoke") or key.startswith("op"):
                out[key.split("=", 1)[0]] = "refused: jgpy does not invoke operations from probes"
        out["version"] = self.version
        if ch.view is not None:
            out["view"] = str(ch.view)
        addr = ch.address
        uuid = addr.to_string_long() if hasattr(addr, "to_string_long") else addr
        out["local_addr"] = f"{addr} [{uuid}]"
        physical = getattr(ch.stack.transport, "physical_addr", None)
        if physical is not None:
            out["physical_addr"] = str(physical)
        out["cluster"] = ch.cluster_name or "n/a"
        return out
