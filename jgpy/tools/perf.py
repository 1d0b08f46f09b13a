"""End-to-end throughput and latency on loopback: Java JGroups 2.12.2 and jgpy members side by side.

Every member is its own process: a Java member is ``org.jgpy.interop.PerfNode`` (``interop/``), a jgpy
member is ``python -m jgpy perf --member`` (:mod:`jgpy.tools.perf_member`); both take the same JSON-line
commands, so both kinds run exactly the same workload. This module starts clusters of them (Java-only,
jgpy-only and mixed, each on a private multicast group and cluster name), runs :class:`Workload` s in them
and collects what the members report plus what ``/proc`` says about them (CPU seconds, peak RSS).

``python -m jgpy perf`` runs a quick subset with a readable table; ``benchmarks/e2e.py`` runs the full
suite (``make bench``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from jgpy.stack.config import load_config
from jgpy.testing.java import (JGROUPS_JAR, REPO_ROOT, ensure_compiled, interop_classes_dir, java_unavailable_reason,
                               private_tcp, udp_props, unique_group)
from jgpy.testing.children import ChildProcesses

log = logging.getLogger("jgpy.perf")

KINDS = {"J": "java", "P": "jgpy"}
#: stacks without GMS whose members connect with ``JChannel.connect(cluster, false)`` (2.12's default connect sends
#: CONNECT_USE_FLUSH, which SMACK ignores: its sender window is never made and every multicast fails) and send a first
#: multicast alone (2.12's SMACK makes a sender's receive window without a lock: two first multicasts arriving
#: together can make two windows, and what the dropped one held is never delivered); see jgpy.protocols.smack
NO_FLUSH_PROTOCOLS = ("SMACK",)
RTT_PATTERNS = ("rtt", "mrtt")           # request/response round trips: a requester and a responder
_live = ChildProcesses()
_CLK_TCK = os.sysconf("SC_CLK_TCK")


class PerfError(RuntimeError):
    """A member that failed a command, died, or did not answer in time."""


# ---------------------------------------------------------------------------------------------
# one member process
# ---------------------------------------------------------------------------------------------

class MemberProcess:
    """A benchmark member (Java PerfNode or jgpy perf member) driven by JSON lines. Always reaped."""

    def __init__(self, kind: str, name: str, cluster: str, config: str, props: dict[str, str],
                 jvm_args: Iterable[str] = ()):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}")
        self.kind, self.name = kind, name
        args = ["--name", name, "--cluster", cluster, "--config", config]
        for k, v in props.items():
            args += ["--prop", f"{k}={v}"]
        env = dict(os.environ)
        if kind == "J":
            cp = os.pathsep.join([str(interop_classes_dir()), str(JGROUPS_JAR)])
            cmd = ["java", "-Djava.net.preferIPv4Stack=true", *jvm_args, "-cp", cp, "org.jgpy.interop.PerfNode", *args]
        else:
            cmd = [sys.executable, "-m", "jgpy", "perf", "--member", *args]
            root = str(REPO_ROOT)
            env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._log = tempfile.NamedTemporaryFile(prefix=f"jgpy-perf-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env)
        _live.add(self)
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self.views: list[int] = []
        self._reader = threading.Thread(target=self._read, name=f"perf-{name}", daemon=True)
        self._reader.start()

    @property
    def label(self) -> str:
        return KINDS[self.kind]

    def _read(self) -> None:
        try:
            self._read_lines()
        except (OSError, ValueError):          # stdout closed under us: the member is gone anyway
            pass

    def _read_lines(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("{"):
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            rid = obj.get("reply")
            if rid is not None:
                with self._lock:
                    q = self._replies.get(rid)
                if q is not None:
                    q.put(obj)
            elif obj.get("event") == "view":
                self.views.append(obj.get("size", 0))
            else:
                self.events.put(obj)
        self.events.put({"event": "_eof"})

    def log_tail(self, n: int = 3000) -> str:
        try:
            data = Path(self._log.name).read_bytes()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def send(self, cmd: str, **args: Any) -> int:
        rid = next(self._ids)
        line = json.dumps({"cmd": cmd, "id": rid, **args}) + "\n"
        with self._lock:
            self._replies[rid] = queue.Queue()
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except OSError as e:
            raise PerfError(f"member {self.name} is gone ({e}); log:\n{self.log_tail()}") from None
        return rid

    def reply(self, rid: int, timeout: float) -> dict:
        with self._lock:
            q = self._replies[rid]
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    rep = q.get(timeout=0.2)
                    break
                except queue.Empty:
                    if self.proc.poll() is not None:
                        raise PerfError(f"member {self.name} exited ({self.proc.returncode}); log:\n"
                                        f"{self.log_tail()}") from None
                    if time.monotonic() > deadline:
                        raise PerfError(f"member {self.name}: no reply within {timeout:g} s; log:\n"
                                        f"{self.log_tail()}") from None
        finally:
            with self._lock:
                self._replies.pop(rid, None)
        if not rep.get("ok"):
            raise PerfError(f"member {self.name}: {rep.get('error')}")
        return rep

    def call(self, cmd: str, wait: float = 30.0, **args: Any) -> dict:
        """Send ``cmd`` with ``args`` and wait up to ``wait`` seconds for the reply."""
        return self.reply(self.send(cmd, **args), wait)

    def wait_event(self, pred: Callable[[dict], bool], timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                ev = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if ev.get("event") == "_eof":
                self.events.put(ev)
                return None
            if pred(ev):
                return ev

    # ---- what /proc says ----

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the whole process (all threads) so far."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            return (int(fields[11]) + int(fields[12])) / _CLK_TCK
        except (OSError, ValueError, IndexError):
            return float("nan")

    def memory(self) -> dict[str, float]:
        """``{"rss_mb": VmRSS, "peak_rss_mb": VmHWM}`` (MB = 10^6 bytes)."""
        out = {}
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out["rss_mb"] = int(line.split()[1]) * 1024 / 1e6
                elif line.startswith("VmHWM:"):
                    out["peak_rss_mb"] = int(line.split()[1]) * 1024 / 1e6
        except (OSError, ValueError, IndexError):
            pass
        return out

    def reset_peak_rss(self) -> bool:
        """VmHWM back to the current RSS (``clear_refs``), so the next peak is this measurement's."""
        try:
            with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Exit at once (no graceful leave: the whole cluster goes); kill if it does not. Always reaps."""
        if self.proc.poll() is None:
            try:
                self.send("exit")
            except PerfError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(timeout=5)          # it reads to EOF; closing stdout under it breaks its read
        for s in (self.proc.stdin, self.proc.stdout):
            try:
                s.close()
            except OSError:
                pass
        _live.discard(self)
        try:
            os.unlink(self._log.name)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------
# workloads and clusters
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """What to measure. ``pattern``: ``mcast`` (one sender multicasts to the others), ``all`` (every member
    multicasts), ``unicast`` (one sender to one receiver), ``rtt`` (request/response round trips, unicasts both
    ways), ``mrtt`` (round trips of a multicast request and a unicast response, as an RPC to the group; 2
    members)."""

    key: str
    title: str
    pattern: str
    size: int
    count: int
    warmup: int
    members: int = 2

    def scaled(self, factor: float) -> "Workload":
        """The same workload with ``factor`` times the messages (at least 20 measured, 10 warm-up)."""
        return Workload(self.key, self.title, self.pattern, self.size, max(20, int(self.count * factor)),
                        max(10, int(self.warmup * factor)), self.members)

    def timeout(self) -> float:
        """Generous: 60 s plus 2 ms per message plus 20 s per 100 MB."""
        n = self.count + self.warmup
        return 60.0 + n * 0.002 + n * self.size / 5e6


@dataclass
class Measurement:
    """The outcome of one workload run in one cluster (one repetition)."""

    workload: str
    cluster: str
    senders: list[str]
    complete: bool
    recv_msgs_per_s: float | None = None        # mean over the receivers
    recv_msgs_per_s_min: float | None = None
    recv_mb_per_s: float | None = None
    send_msgs_per_s: float | None = None        # mean over the senders (measured messages / send time)
    rtt: dict | None = None
    members: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Cluster:
    """Members of the given kinds (``"JP"``: a Java member J1 and a jgpy member P1), on a private group.

    The first member is the coordinator. Use as a context manager: every process is reaped on exit."""

    def __init__(self, kinds: str, config: str = "udp.xml", jvm_args: Iterable[str] = (),
                 props: dict[str, str] | None = None):
        """``props``: more system properties for every member (e.g. tunnel.xml's router hosts)."""
        self.kinds = kinds
        self.config = config
        self._config_file: str | None = None
        stack = load_config(config)
        self.use_flush = not any(p.name.rsplit(".", 1)[-1] in NO_FLUSH_PROTOCOLS for p in stack.protocols)
        #: whether every member knows the others' logical names (no discovery, e.g. SMACK: no names, so no
        #: unicast workloads, which address a member by name); set by :meth:`start`
        self.named = True
        if stack.protocols and stack.protocols[0].name.rsplit(".", 1)[-1] in ("TCP", "TCP_NIO"):
            stack, self.props, _ = private_tcp(stack, len(kinds))     # a block of free ports of our own
            with tempfile.NamedTemporaryFile("w", prefix="jgpy-perf-cfg-", suffix=".xml", delete=False) as f:
                f.write(stack.to_xml())
            self.config = self._config_file = f.name
        else:
            addr, port = unique_group()
            self.props = udp_props(addr, port)
        self.props.update(props or {})
        self.cluster = f"perf-{uuid.uuid4().hex[:10]}"
        counts: dict[str, int] = {}
        self.names = []
        for k in kinds:
            counts[k] = counts.get(k, 0) + 1
            self.names.append(f"{k}{counts[k]}")
        self.members: list[MemberProcess] = []
        self.jvm_args = tuple(jvm_args)
        self._runs = itertools.count(1)
        self.baseline: dict[str, dict] = {}

    @property
    def label(self) -> str:
        kinds = set(self.kinds)
        return "java" if kinds == {"J"} else "jgpy" if kinds == {"P"} else "mixed"

    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 90.0) -> None:
        for k, name in zip(self.kinds, self.names):
            self.members.append(MemberProcess(k, name, self.cluster, self.config, self.props, self.jvm_args))
        for m in self.members:
            if m.wait_event(lambda e: e.get("event") == "started", timeout) is None:
                raise PerfError(f"member {m.name} did not start; log:\n{m.log_tail()}")
        # the coordinator first; the others join it together
        how = {} if self.use_flush else {"use_flush": False}
        self.members[0].call("connect", wait=timeout, **how)
        rids = [(m, m.send("connect", **how)) for m in self.members[1:]]
        for m, rid in rids:
            m.reply(rid, timeout)
        for m in self.members:
            rep = m.call("await_view", wait=timeout + 5, members=len(self.members), timeout=timeout)
            self.named = self.named and None not in rep.get("members", ())
        # a member reports its view from its delivery thread, after the channel has it: wait for the reports (else
        # one that comes late counts as a view change during the first measurement)
        deadline = time.monotonic() + 10
        while any(m.views[-1:] != [len(self.members)] for m in self.members) and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self.use_flush:
            self.first_multicasts_alone()
        for m in self.members:
            self.baseline[m.name] = {"rss_mb": m.memory().get("rss_mb"), "cpu_s": m.cpu_seconds()}

    def first_multicasts_alone(self) -> None:
        """Every member multicasts one message alone, each in turn once every other member has the previous one (see
        :data:`NO_FLUSH_PROTOCOLS`: a 2.12 SMACK member may lose a new sender's first multicasts that arrive
        together)."""
        first = Workload("first_mcast", "a first multicast alone", "mcast", 100, 1, 0, len(self.members))
        for name in self.names:
            m = self.measure(first, name)
            if not m.complete:
                raise PerfError(f"{name}'s first multicast did not reach every member: {'; '.join(m.errors)[:500]}")

    def close(self) -> None:
        for m in self.members:
            try:
                m.send("exit")
            except PerfError:
                pass
        for m in self.members:
            m.close()
        if self._config_file is not None:
            try:
                os.unlink(self._config_file)
            except OSError:
                pass
            self._config_file = None

    def member(self, name: str) -> MemberProcess:
        return next(m for m in self.members if m.name == name)

    def measure(self, w: Workload, sender: str | None = None, receiver: str | None = None) -> Measurement:
        """Run ``w`` once. ``sender``: the sending (requesting) member; ``receiver``: the unicast/rtt peer."""
        if w.members != len(self.members):
            raise ValueError(f"{w.key} needs {w.members} members, the cluster has {len(self.members)}")
        sender = sender or self.names[0]
        if w.pattern in ("unicast", *RTT_PATTERNS):
            if not self.named:
                raise ValueError(f"{w.key}: the members do not know each other's names (a stack without "
                                 "discovery): no unicast workloads")
            receiver = receiver or next(n for n in self.names if n != sender)
        if w.pattern == "mrtt" and len(self.names) != 2:
            raise ValueError(f"{w.key}: a multicast round trip needs 2 members (one response per request)")
        roles: dict[str, dict] = {}
        for n in self.names:
            if w.pattern == "all":
                roles[n] = {"role": "both", "expect": w.count * (len(self.names) - 1)}
            elif w.pattern == "mcast":
                roles[n] = {"role": "sender"} if n == sender else {"role": "receiver", "expect": w.count}
            elif w.pattern == "unicast":
                roles[n] = ({"role": "sender", "dest": receiver} if n == sender else
                            {"role": "receiver", "expect": w.count} if n == receiver else {"role": "idle"})
            elif w.pattern in RTT_PATTERNS:
                dest = receiver if w.pattern == "rtt" else None          # None: the request is a multicast
                roles[n] = ({"role": "requester", "dest": dest} if n == sender else
                            {"role": "responder", "expect": w.count + w.warmup} if n == receiver else {"role": "idle"})
            else:
                raise ValueError(f"unknown pattern {w.pattern!r}")
        senders = [n for n, r in roles.items() if r["role"] in ("sender", "both", "requester")]
        run = next(self._runs)
        timeout = w.timeout()
        cpu0 = {}
        for m in self.members:
            m.reset_peak_rss()
            cpu0[m.name] = m.cpu_seconds()
            while not m.events.empty():                  # leftovers of an earlier, failed run
                ev = m.events.get_nowait()
                if ev.get("event") == "_eof":            # keep the end-of-output marker: the member is gone
                    m.events.put(ev)
                    break
        views0 = {m.name: len(m.views) for m in self.members}
        for m in self.members:
            m.call("arm", run=run, size=w.size, count=w.count, warmup=w.warmup, timeout=timeout,
                   **{"dest": None, "expect": 0, **roles[m.name]})
        t0 = time.monotonic()
        for n in senders:
            self.member(n).call("go", run=run)
        results: dict[str, dict] = {}
        errors: list[str] = []
        waiting = [m for m in self.members if roles[m.name]["role"] != "idle"]
        deadline = time.monotonic() + timeout + 5
        stopped = False
        while waiting:
            m = waiting[0]
            ev = m.wait_event(lambda e: e.get("event") == "result" and e.get("run") == run,
                              max(0.1, deadline - time.monotonic()))
            if ev is not None:
                results[m.name] = ev
                waiting.pop(0)
                continue
            if m.proc.poll() is not None:
                errors.append(f"{m.name} died ({m.proc.returncode}): {m.log_tail(800)}")
                waiting.pop(0)
                continue
            if stopped:
                errors.append(f"{m.name}: no result, even after stop")
                waiting.pop(0)
                continue
            errors.append(f"timed out after {timeout:.0f} s: stopping the run")
            for x in self.members:
                try:
                    x.call("stop", wait=10, run=run)
                except PerfError as e:
                    errors.append(str(e)[:300])
            stopped = True
            deadline = time.monotonic() + 15
        seconds = time.monotonic() - t0
        for n, r in results.items():
            if r.get("error"):
                errors.append(f"{n}: {r['error']}")
        for m in self.members:
            if len(m.views) != views0[m.name]:
                errors.append(f"{m.name} saw a view change during the run (views of {m.views[views0[m.name]:]})")
        expected = [n for n in roles if roles[n]["role"] != "idle"]
        complete = (not errors and len(results) == len(expected)
                    and all(r.get("complete", True) for r in results.values()))
        out = Measurement(w.key, self.label, senders, complete=complete, errors=errors, seconds=seconds)
        # throughput
        recv = [r for r in results.values() if r.get("received") is not None]
        rates = [(r["received"] - 1) / r["recv_seconds"] for r in recv if r.get("recv_seconds") and r["received"] > 1]
        if rates:
            out.recv_msgs_per_s = statistics.mean(rates)
            out.recv_msgs_per_s_min = min(rates)
            out.recv_mb_per_s = statistics.mean(
                [r["received"] * w.size / r["recv_seconds"] / 1e6 for r in recv if r.get("recv_seconds")])
        srates = [r["sent"] / r["send_seconds"] for r in results.values() if r.get("send_seconds")]
        if srates:
            out.send_msgs_per_s = statistics.mean(srates)
        for r in results.values():
            if r.get("rtt"):
                out.rtt = r["rtt"]
        # per member: CPU per 1,000 messages it sent or received (round trips for rtt), peak RSS
        for m in self.members:
            r = results.get(m.name, {})
            role = roles[m.name]["role"]
            if w.pattern in RTT_PATTERNS:
                msgs = (w.count + w.warmup) if role != "idle" else 0
            else:
                msgs = (r.get("sent", 0) + (w.warmup if role in ("sender", "both") else 0)
                        + r.get("received", 0) + r.get("warmup_received", 0))
            cpu = m.cpu_seconds() - cpu0[m.name]
            mem = m.memory()
            out.members.append({"name": m.name, "kind": m.label, "role": role, "cpu_s": cpu, "msgs": msgs,
                                "cpu_s_per_1k": cpu / msgs * 1000 if msgs else None, **mem})
        return out


# ---------------------------------------------------------------------------------------------
# a suite: clusters x workloads x repetitions
# ---------------------------------------------------------------------------------------------

#: the columns of a result table: (key, title)
COLUMNS = [("java", "Java"), ("jgpy", "jgpy"), ("mixed_j", "mixed, Java sends"), ("mixed_p", "mixed, jgpy sends"),
           ("mixed", "mixed")]


def directions(kinds: str, w: Workload) -> list[tuple[str, str | None]]:
    """(column, sender name) pairs to run ``w`` with in a cluster of ``kinds``: pure clusters once, mixed
    clusters once per sender kind (``all``: once)."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
        first.setdefault(k, f"{k}{counts[k]}")
    if len(set(kinds)) == 1:
        return [("java" if kinds[0] == "J" else "jgpy", first[kinds[0]])]
    if w.pattern == "all":
        return [("mixed", None)]
    return [("mixed_j", first["J"]), ("mixed_p", first["P"])]


def receiver_for(kinds: str, sender: str | None) -> str | None:
    """The unicast/rtt peer of ``sender``: in a mixed cluster the first member of the other kind."""
    if sender is None:
        return None
    other = "P" if sender[0] == "J" else "J"
    if other in kinds:
        return f"{other}1"
    return next(f"{sender[0]}{i + 1}" for i in range(len(kinds)) if f"{sender[0]}{i + 1}" != sender)


def summarize(values: list[float]) -> dict | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def warm_up(c: Cluster, progress: Callable[[str], None] = print, scale: float = 1.0) -> None:
    """Unrecorded runs through the code paths of every workload (multicast, unicast, round trips) in each
    direction, so that the JVMs have compiled their hot paths before anything is measured."""
    ws = [Workload("warmup_mcast", "warm-up", "mcast", 1000, 20_000, 1000, len(c.members))]
    if len(c.members) == 2 and c.named:
        ws += [Workload("warmup_unicast", "warm-up", "unicast", 1000, 10_000, 1000, 2),
               Workload("warmup_rtt", "warm-up", "rtt", 100, 2000, 100, 2)]
    t0 = time.monotonic()
    for w in ws:
        w = w.scaled(scale)
        for _, sender in directions(c.kinds, w):
            m = c.measure(w, sender, receiver_for(c.kinds, sender))
            if not m.complete:
                progress(f"warm-up {w.pattern} in {c.kinds} incomplete: {'; '.join(m.errors)[:300]}")
    progress(f"cluster {c.kinds} warmed up in {time.monotonic() - t0:.1f} s")


def run_suite(groups: list[tuple[list[str], list[Workload]]], reps: int = 3, config: str = "udp.xml",
              progress: Callable[[str], None] = print, warmup: float = 1.0,
              props: dict[str, str] | None = None) -> list[dict]:
    """Run every workload of each group in each of the group's clusters (started together), ``reps`` times,
    the kinds interleaved per repetition. Returns one record per (workload, column) with every
    repetition's :class:`Measurement` and the median/min/max of the headline figure. ``warmup``: the scale
    of a short unrecorded pass through every cluster first (:func:`warm_up`; 0: none); ``props``: more system
    properties for every member."""
    total = sum(reps * sum(len(directions(k, w)) for k in kinds) for kinds, ws in groups for w in ws)
    done = 0
    started = time.monotonic()
    records: list[dict] = []
    for kinds_list, workloads in groups:
        progress(f"starting clusters {', '.join(kinds_list)} ...")
        clusters: list[Cluster] = []
        try:
            for kinds in kinds_list:
                c = Cluster(kinds, config, props=props)
                clusters.append(c)
                c.start()
            if warmup > 0:
                for c in clusters:
                    warm_up(c, progress, warmup)
            for w in workloads:
                recs: dict[str, dict] = {}
                for rep in range(reps):
                    for c in clusters:
                        for column, sender in directions(c.kinds, w):
                            m = c.measure(w, sender, receiver_for(c.kinds, sender))
                            done += 1
                            rec = recs.setdefault(column, {"workload": w.key, "title": w.title, "column": column,
                                                           "cluster": c.kinds, "pattern": w.pattern, "size": w.size,
                                                           "count": w.count, "warmup": w.warmup,
                                                           "members": w.members, "runs": []})
                            rec["runs"].append(m.to_dict())
                            elapsed = time.monotonic() - started
                            eta = elapsed / done * (total - done)
                            progress(f"({done}/{total}, ~{eta / 60:.1f} min left) {w.title} | {column} | rep "
                                     f"{rep + 1}/{reps}: {describe(m)}")
                for rec in recs.values():
                    finish_record(rec)
                    records.append(rec)
        finally:
            for c in clusters:
                c.close()
    return records


def describe(m: Measurement) -> str:
    parts = []
    if m.rtt:
        parts.append(f"rtt median {m.rtt.get('median_us', 0):,.0f} us, p99 {m.rtt.get('p99_us', 0):,.0f} us")
    if m.recv_msgs_per_s:
        parts.append(f"{m.recv_msgs_per_s:,.0f} msgs/s ({m.recv_mb_per_s:,.1f} MB/s)")
    if m.send_msgs_per_s and not m.rtt:
        parts.append(f"sender {m.send_msgs_per_s:,.0f} msgs/s")
    if not m.complete:
        parts.append("INCOMPLETE " + "; ".join(e[:200] for e in m.errors))
    return ", ".join(parts) or "no figures"


def finish_record(rec: dict) -> None:
    """Median/min/max over the repetitions of the record's figures."""
    runs = [Measurement(**r) for r in rec["runs"]]
    rec["complete"] = all(r.complete for r in runs)
    rec["recv_msgs_per_s"] = summarize([r.recv_msgs_per_s for r in runs])
    rec["recv_mb_per_s"] = summarize([r.recv_mb_per_s for r in runs])
    rec["send_msgs_per_s"] = summarize([r.send_msgs_per_s for r in runs])
    for q in ("median_us", "p99_us", "p999_us"):
        rec[f"rtt_{q}"] = summarize([r.rtt.get(q) if r.rtt else None for r in runs])
    per_kind: dict[str, dict] = {}
    for role_kind in {(mb["kind"], mb["role"]) for r in runs for mb in r.members if mb["role"] != "idle"}:
        kind, role = role_kind
        sel = [mb for r in runs for mb in r.members if (mb["kind"], mb["role"]) == role_kind]
        per_kind[f"{kind} {role}"] = {"peak_rss_mb": summarize([mb.get("peak_rss_mb") for mb in sel]),
                                      "cpu_s_per_1k": summarize([mb.get("cpu_s_per_1k") for mb in sel])}
    rec["per_member"] = per_kind


# ---------------------------------------------------------------------------------------------
# python -m jgpy perf
# ---------------------------------------------------------------------------------------------

def quick_workloads(scale: float = 1.0, size: int = 1000) -> list[Workload]:
    ws = [Workload("mcast_1k_2", f"{size:,} B multicast, 1 sender, 2 members", "mcast", size, 50_000, 5_000),
          Workload("unicast_1k", f"{size:,} B unicast stream, 2 members", "unicast", size, 30_000, 3_000),
          Workload("rtt_100", "100 B request/response round trip", "rtt", 100, 5_000, 1_000),
          Workload("mrtt_100", "100 B multicast request, unicast response", "mrtt", 100, 300, 30)]
    return [w.scaled(scale) for w in ws]


def figure_of(rec: dict) -> str:
    if rec["pattern"] in RTT_PATTERNS:
        s = rec.get("rtt_p99_us")
        med = rec.get("rtt_median_us")
        return f"{med['median']:,.0f} / {s['median']:,.0f} us" if s and med else "-"
    s = rec.get("recv_msgs_per_s")
    return f"{s['median']:,.0f} msgs/s" if s else "-"


def print_table(records: list[dict], out: Callable[[str], None] = print) -> None:
    cols = [c for c in COLUMNS if any(r["column"] == c[0] for r in records)]
    out("| workload | " + " | ".join(t for _, t in cols) + " | jgpy / Java |")
    out("|---|" + "---:|" * (len(cols) + 1))
    by = {}
    for r in records:
        by.setdefault(r["workload"], {})[r["column"]] = r
    for key, row in by.items():
        title = next(iter(row.values()))["title"]
        ratio = "-"
        j, p = row.get("java"), row.get("jgpy")
        if j and p:
            if j["pattern"] in RTT_PATTERNS and j.get("rtt_p99_us") and p.get("rtt_p99_us"):
                ratio = f"{p['rtt_p99_us']['median'] / j['rtt_p99_us']['median']:.2f} (p99)"
            elif j.get("recv_msgs_per_s") and p.get("recv_msgs_per_s"):
                ratio = f"{p['recv_msgs_per_s']['median'] / j['recv_msgs_per_s']['median']:.2f}"
        cells = [figure_of(row[c]) + ("" if row[c]["complete"] else " (incomplete)") if c in row else "-"
                 for c, _ in cols]
        out(f"| {title} | " + " | ".join(cells) + f" | {ratio} |")
    out("")
    out("throughput: the receiver's rate (msgs/s, median of the repetitions); round trip: median / p99 "
        "(mixed: the sending kind is the requester)")


def run_pair(sender_kind: str, receiver_kind: str, count: int, size: int, config: str = "udp.xml",
             timeout: float = 120.0) -> "Outcome":
    """One sender multicasting ``count`` messages of ``size`` bytes to one receiver (2 members)."""
    label = f"{KINDS[sender_kind] if sender_kind == 'P' else 'Java'} -> {KINDS[receiver_kind] if receiver_kind == 'P' else 'Java'}"
    w = Workload("pair", label, "mcast", size, count, max(10, count // 10))
    with Cluster(sender_kind + receiver_kind, config) as c:
        m = c.measure(w, c.names[0])
    recv = [mb for mb in m.members if mb["role"] == "receiver"]
    received = recv[0]["msgs"] - (w.warmup if m.complete else 0) if recv else 0
    return Outcome(label, m.recv_msgs_per_s or 0.0, m.recv_mb_per_s or 0.0,
                   count if m.complete else max(0, received), count,
                   count / m.send_msgs_per_s if m.send_msgs_per_s else None)


@dataclass
class Outcome:
    label: str
    msgs_per_s: float
    mb_per_s: float
    received: int
    expected: int
    send_seconds: float | None = None

    @property
    def complete(self) -> bool:
        return self.received >= self.expected


def main(args: argparse.Namespace) -> int:
    if args.member:
        from jgpy.tools.perf_member import main as member_main
        return member_main(args.name, args.cluster, args.config, args.prop)
    reason = java_unavailable_reason()
    kinds = ["JJ", "PP", "JP"]
    if reason:
        print(f"Java members are not available ({reason}): running jgpy only")
        kinds = ["PP"]
    else:
        ensure_compiled()
    scale = args.scale if args.scale else (0.2 if args.quick else 1.0)
    ws = quick_workloads(scale, args.size)
    if args.count:
        ws[0] = Workload(ws[0].key, ws[0].title, "mcast", args.size, args.count, max(10, args.count // 10))

    def progress(msg: str) -> None:
        print(f"[perf {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    records = run_suite([(kinds, ws)], reps=args.reps, config=args.config, progress=progress, warmup=min(1.0, scale))
    print()
    print_table(records)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2))
        print(f"wrote {args.json}")
    return 0 if all(r["complete"] for r in records) else 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="fewer messages (a few seconds per measurement)")
    p.add_argument("--scale", type=float, default=0.0, help="multiply every message count by this")
    p.add_argument("--reps", type=int, default=1, help="repetitions of each measurement (default 1)")
    p.add_argument("--size", type=int, default=1000, help="payload bytes of the throughput runs (default 1000)")
    p.add_argument("--count", type=int, default=0, help="messages of the multicast run (default 50000)")
    p.add_argument("--config", default="udp.xml", help="stack config (default: the jar's udp.xml)")
    p.add_argument("--json", default="", help="write the results to this file")
    p.add_argument("--member", action="store_true", help=argparse.SUPPRESS)     # a member process
    p.add_argument("--name", default="P1", help=argparse.SUPPRESS)
    p.add_argument("--cluster", default="perf", help=argparse.SUPPRESS)
    p.add_argument("--prop", action="append", default=[], help=argparse.SUPPRESS)
