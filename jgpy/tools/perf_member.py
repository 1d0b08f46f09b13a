"""One jgpy member of the end-to-end benchmark: the twin of ``interop/.../PerfNode.java``.

Run as ``python -m jgpy perf --member --name P1 --cluster C [--config udp.xml] [--prop key=value ...]``.
It speaks the same JSON-line commands as the Java program (``connect`` with an optional ``use_flush``,
``await_view``, ``arm``, ``go``, ``stop``, ``exit``; see ``benchmarks/README.md``), builds the same payloads (int run id, phase byte, int
round, zeros) and reports the same result line, so both kinds run exactly the same workload.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import threading
import time
from typing import Any, TextIO

log = logging.getLogger("jgpy.perf")

WARM, MEASURED, REQUEST, RESPONSE = 0, 1, 2, 3
ROLES = ("sender", "receiver", "both", "requester", "responder", "idle")


class Run:
    """One armed measurement: its parameters and what the delivery thread counted."""

    def __init__(self, rid: int, role: str, size: int, count: int, warmup: int, expect: int, dest: Any,
                 timeout: float):
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
        if size < 9:
            raise ValueError("size must be >= 9 (run id, phase, round)")
        self.id, self.role, self.size, self.count, self.warmup = rid, role, size, count, warmup
        self.expect, self.dest, self.timeout = expect, dest, timeout
        tag = rid.to_bytes(4, "big", signed=True)
        self.heads = [tag + bytes([p]) for p in (WARM, MEASURED, REQUEST, RESPONSE)]
        self.pad = bytes(size - 9)
        self.receives = role in ("receiver", "both")
        self.sends = role in ("sender", "both")
        self.done = threading.Event()
        self.stopped = False
        self.received = self.warm_received = 0
        self.first_ns = self.last_ns = 0
        self.answered = 0
        self.waiting_round = -1
        self.response = threading.Lock()
        self.response.acquire()

    def payload(self, phase: int, rnd: int = 0) -> bytes:
        return self.heads[phase] + rnd.to_bytes(4, "big", signed=True) + self.pad

    def received_fields(self) -> dict:
        return {"received": self.received, "warmup_received": self.warm_received, "bytes": self.received * self.size,
                "recv_seconds": (self.last_ns - self.first_ns) / 1e9, "complete": self.received >= self.expect}


def quantile(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank quantile (the same rule as PerfNode.java)."""
    n = len(sorted_ns)
    idx = math.ceil(q * n) - 1
    return float(sorted_ns[max(0, min(n - 1, idx))])


def rtt_stats(ns: list[int]) -> dict:
    """Round-trip percentiles in microseconds and a 1001-point quantile list (the CDF)."""
    ns = sorted(ns)
    n = len(ns)
    if not n:
        return {"n": 0}
    return {"n": n, "min_us": ns[0] / 1e3, "median_us": quantile(ns, 0.5) / 1e3, "p90_us": quantile(ns, 0.9) / 1e3,
            "p99_us": quantile(ns, 0.99) / 1e3, "p999_us": quantile(ns, 0.999) / 1e3, "max_us": ns[-1] / 1e3,
            "mean_us": sum(ns) / n / 1e3,
            "cdf_us": [round(quantile(ns, i / 1000) / 100) / 10 for i in range(1001)]}


class Member:
    """The channel and the command loop of one benchmark member."""

    def __init__(self, name: str, cluster: str, config: str, props: dict[str, str], out: TextIO):
        self.name, self.cluster, self.config, self.props = name, cluster, config, props
        self.out = out
        self.out_lock = threading.Lock()
        self.ch = None
        self.me = None
        self.run: Run | None = None

    def emit(self, obj: dict) -> None:
        line = json.dumps(obj, allow_nan=False)
        with self.out_lock:
            self.out.write(line + "\n")
            self.out.flush()

    # ---- commands ----

    def cmd_connect(self, c: dict) -> dict:
        from jgpy import Channel

        use_flush = c.get("use_flush", True)
        if not isinstance(use_flush, bool):
            raise ValueError(f"use_flush must be true or false, got {use_flush!r}")
        t0 = time.monotonic()
        self.ch = Channel(self.config, self.name, self.props, _receiver(self))
        self.ch.connect(self.cluster, use_flush=use_flush)
        self.me = self.ch.address
        return {"view": len(self.ch.view.members), "seconds": time.monotonic() - t0}

    def cmd_await_view(self, c: dict) -> dict:
        from jgpy._core.address import logical_name

        members = int(c.get("members", 2))
        deadline = time.monotonic() + float(c.get("timeout", 60))
        while len(self.ch.view.members) < members and time.monotonic() < deadline:
            time.sleep(0.02)
        names = [logical_name(a) for a in self.ch.view.members]
        if len(names) < members:
            raise RuntimeError(f"view {names} has fewer than {members} members")
        return {"view": len(names), "members": names}

    def _member(self, name: str):
        from jgpy._core.address import logical_name

        for a in self.ch.view.members:
            if logical_name(a) == name:
                return a
        raise KeyError(f"no member named {name!r} in {self.ch.view}")

    def cmd_arm(self, c: dict) -> dict:
        dest = self._member(str(c["dest"])) if c.get("dest") is not None else None
        r = Run(int(c.get("run", 0)), str(c.get("role")), int(c.get("size", 1000)), int(c.get("count", 0)),
                int(c.get("warmup", 0)), int(c.get("expect", 0)), dest, float(c.get("timeout", 120)))
        self.run = r
        if (r.receives or r.role == "responder") and not r.sends:
            threading.Thread(target=self._wait_received, args=(r,), name="perf-wait", daemon=True).start()
        return {"run": r.id}

    def cmd_go(self, c: dict) -> dict:
        r = self.run
        if r is None or r.id != int(c.get("run", -1)):
            raise RuntimeError("run not armed")
        if r.sends:
            target = self._send_all
        elif r.role == "requester":
            target = self._request
        else:
            raise RuntimeError(f"role {r.role} has nothing to start")
        threading.Thread(target=target, args=(r,), name=f"perf-{r.role}", daemon=True).start()
        return {"run": r.id}

    def cmd_stats(self, c: dict) -> dict:
        """The stack's counters (``Channel.dump_stats``), for diagnostics between runs."""
        return {"stats": json.loads(json.dumps(self.ch.dump_stats(), default=str))}

    def cmd_stop(self, c: dict) -> dict:
        r = self.run
        if r is not None and r.id == int(c.get("run", -1)):
            r.stopped = True
            r.done.set()
            try:
                r.response.release()
            except RuntimeError:
                pass
        return {}

    # ---- workloads ----

    def _send_all(self, r: Run) -> None:
        res: dict = {"event": "result", "run": r.id, "role": r.role}
        send, dest = self.ch.send, r.dest
        try:
            warm, meas = r.payload(WARM), r.payload(MEASURED)
            for _ in range(r.warmup):
                send(dest, warm)
            t0 = time.perf_counter()
            n = 0
            while n < r.count and not r.stopped:       # the stop flag is looked at every 1,000 messages
                k = min(1000, r.count - n)
                for _ in range(k):
                    send(dest, meas)
                n += k
            res.update(sent=n, send_seconds=time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001 - reported to the driver
            res["error"] = f"send failed: {type(e).__name__}: {e}"
        if r.receives:
            r.done.wait(r.timeout)
            res.update(r.received_fields())
        self.emit(res)

    def _wait_received(self, r: Run) -> None:
        r.done.wait(r.timeout)
        res: dict = {"event": "result", "run": r.id, "role": r.role}
        if r.role == "responder":
            res.update(answered=r.answered, complete=r.answered >= r.expect)
        else:
            res.update(r.received_fields())
        self.emit(res)

    def _request(self, r: Run) -> None:
        res: dict = {"event": "result", "run": r.id, "role": r.role}
        send, dest, lock = self.ch.send, r.dest, r.response
        clock = time.perf_counter_ns
        rtt: list[int] = []
        try:
            for i in range(r.warmup + r.count):
                if r.stopped:
                    break
                req = r.payload(REQUEST, i)
                r.waiting_round = i
                t0 = clock()
                send(dest, req)
                if not lock.acquire(timeout=10):
                    res["error"] = f"no response to request {i} within 10 s"
                    break
                dt = clock() - t0
                if i >= r.warmup and not r.stopped:
                    rtt.append(dt)
        except Exception as e:  # noqa: BLE001 - reported to the driver
            res["error"] = f"request failed: {type(e).__name__}: {e}"
        res.update(round_trips=len(rtt), complete=len(rtt) == r.count, rtt=rtt_stats(rtt))
        self.emit(res)

    # ---- the loop ----

    def loop(self, inp: TextIO) -> int:
        self.emit({"event": "started", "kind": "jgpy", "pid": os.getpid(), "python": sys.version.split()[0]})
        for line in inp:
            line = line.strip()
            if not line:
                continue
            rid = None
            try:
                cmd = json.loads(line)
                rid = cmd.get("id")
                name = cmd.get("cmd")
                if name == "exit":                 # the run is over: no graceful leave (the whole cluster goes)
                    self.emit({"reply": rid, "ok": True})
                    os._exit(0)
                handler = getattr(self, f"cmd_{name}", None)
                if handler is None:
                    raise ValueError(f"unknown command {name!r}")
                self.emit({"reply": rid, "ok": True, **(handler(cmd) or {})})
            except Exception as e:  # noqa: BLE001 - every failure goes back to the driver
                self.emit({"reply": rid, "ok": False, "error": f"{type(e).__name__}: {e}"})
        os._exit(0)                                # stdin closed: the driver is gone


def _receiver(member: Member):
    """The application receiver: counts benchmark messages and answers requests (the delivery thread)."""
    from jgpy import Receiver

    clock = time.perf_counter_ns

    class PerfReceiver(Receiver):
        def receive(self, msg):
            r = member.run
            if r is None or msg.length != r.size:
                return
            raw, off = msg.raw_buffer, msg.offset
            head = raw[off:off + 5]
            heads = r.heads
            if head == heads[MEASURED]:
                if not r.receives or msg.src == member.me:
                    return
                now = clock()
                n = r.received = r.received + 1
                if n == 1:
                    r.first_ns = now
                r.last_ns = now
                if n >= r.expect:
                    r.done.set()
            elif head == heads[WARM]:
                if r.receives and msg.src != member.me:
                    r.warm_received += 1
            elif head == heads[REQUEST]:
                if r.role == "responder":
                    member.ch.send(msg.src, heads[RESPONSE] + bytes(raw[off + 5:off + 9]) + r.pad)
                    r.answered += 1
                    if r.answered >= r.expect:
                        r.done.set()
            elif head == heads[RESPONSE]:
                if r.role == "requester" and int.from_bytes(raw[off + 5:off + 9], "big", signed=True) == r.waiting_round:
                    try:
                        r.response.release()
                    except RuntimeError:
                        pass

        def receive_batch(self, msgs):
            """Measured messages counted in one pass, one clock reading per batch; the rest go to receive()."""
            r = member.run
            if r is None:
                return
            size, measured, counts, me = r.size, r.heads[MEASURED], r.receives, member.me
            start = clock() if counts and r.received == 0 else 0
            n = 0
            for m in msgs:
                if m.length != size:
                    continue
                off = m.offset
                if m.raw_buffer[off:off + 5] == measured:
                    if counts and m.src != me:
                        n += 1
                else:
                    self.receive(m)
            if n:
                now = clock()
                if r.received == 0:
                    r.first_ns = start
                r.last_ns = now
                r.received += n
                if r.received >= r.expect:
                    r.done.set()

        def view_accepted(self, view):
            member.emit({"event": "view", "size": len(view.members)})

    return PerfReceiver()


def main(name: str, cluster: str, config: str, props: list[str]) -> int:
    """Entry point of ``python -m jgpy perf --member``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    pmap = {}
    for p in props:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise SystemExit(f"--prop needs key=value, got {p!r}")
        pmap[k] = v
    out = sys.stdout
    sys.stdout = sys.stderr                        # the GMS banner etc. must not pollute the protocol
    return Member(name, cluster, config, pmap, out).loop(sys.stdin)
