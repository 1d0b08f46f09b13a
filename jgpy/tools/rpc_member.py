"""One jgpy member of the RPC benchmark: the twin of ``interop/src/org/jgpy/interop/RpcNode.java``.

Run as ``python -m jgpy.tools.rpc_member`` with ``-Dkey=value`` style group properties as ``--prop key=value``.
It speaks RpcNode's JSON-line commands that the benchmark uses (``connect {config, cluster, name}``,
``bench {dests, count, size, warmup, async, rsp, anycast}``, ``served``, ``exit``) and serves the same method,
``echoBytes(byte[])``, so both kinds run exactly the same calls (``benchmarks/rpc.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from jgpy.blocks import MethodCall, RequestOptions, ResponseMode, RpcDispatcher, rpc_method
from jgpy.channel import Channel

_MODES = {"GET_ALL": ResponseMode.GET_ALL, "GET_FIRST": ResponseMode.GET_FIRST,
          "GET_MAJORITY": ResponseMode.GET_MAJORITY, "GET_NONE": ResponseMode.GET_NONE}


class EchoServer:
    def __init__(self) -> None:
        self.served = 0

    @rpc_method("echoBytes", ["[B"])
    def echo_bytes(self, b: bytes) -> bytes:
        self.served += 1
        return b


class Member:
    def __init__(self, props: dict[str, str]) -> None:
        self.props = props
        self.ch: Channel | None = None
        self.disp: RpcDispatcher | None = None
        self.server = EchoServer()
        self.out_lock = threading.Lock()
        self.out = sys.stdout                 # protocol lines only: everything else printed goes to stderr
        sys.stdout = sys.stderr

    def emit(self, obj: dict) -> None:
        with self.out_lock:
            self.out.write(json.dumps(obj) + "\n")
            self.out.flush()

    def connect(self, cmd: dict) -> dict:
        self.ch = Channel(cmd.get("config", "udp.xml"), cmd["name"], self.props)
        self.ch.connect(cmd["cluster"])
        self.disp = RpcDispatcher(self.ch, self.server)
        return {"address": str(self.ch.address)}

    def _dests(self, names: list[str] | None) -> list | None:
        if names is None:
            return None
        assert self.ch is not None and self.ch.view is not None
        by_name = {str(m): m for m in self.ch.view.members}
        return [by_name[n] for n in names]

    def bench(self, cmd: dict) -> dict:
        assert self.disp is not None
        dests = self._dests(cmd.get("dests"))
        count, warmup = int(cmd["count"]), int(cmd.get("warmup", 0))
        opts = RequestOptions(_MODES[cmd.get("rsp", "GET_ALL")], 10000, anycasting=bool(cmd.get("anycast")))
        # as RpcNode: one MethodCall, marshalled again by every call (callRemoteMethods does)
        mc = MethodCall.with_types("echoBytes", [bytes(int(cmd["size"]))], ["[B"])
        call = self.disp.call_remote_methods
        for _ in range(warmup):
            call(dests, mc, options=opts)
        if not cmd.get("async"):
            ns, missing = [], 0
            t0 = time.perf_counter_ns()
            for _ in range(count):
                s = time.perf_counter_ns()
                r = call(dests, mc, options=opts)
                ns.append(time.perf_counter_ns() - s)
                missing += r.num_received == 0
            return {"ns": ns, "total_ns": time.perf_counter_ns() - t0, "missing": missing}
        t0 = time.perf_counter_ns()
        send = self.disp.call_remote_methods_with_future
        reqs = [send(dests, mc, options=opts) for _ in range(count)]
        missing = sum(1 for r in reqs if r.result(30).num_received == 0)
        return {"total_ns": time.perf_counter_ns() - t0, "missing": missing}

    def run(self, cmd: dict) -> dict:
        c = cmd["cmd"]
        if c == "connect":
            return self.connect(cmd)
        if c == "bench":
            return self.bench(cmd)
        if c == "served":
            return {"served": self.server.served}
        raise ValueError(f"unknown command {c}")

    def loop(self) -> None:
        self.emit({"event": "ready"})
        for line in sys.stdin:
            if not line.strip():
                continue
            cmd = json.loads(line)
            rid = cmd.get("id")
            if cmd.get("cmd") == "exit":
                self.emit({"reply": rid, "ok": True})
                break
            threading.Thread(target=self._one, args=(cmd, rid), daemon=True).start()
        if self.ch is not None:
            self.ch.close()

    def _one(self, cmd: dict, rid: Any) -> None:
        try:
            rep = self.run(cmd)
            rep["ok"] = True
        except Exception as e:  # noqa: BLE001 - reported to the driver
            rep = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        rep["reply"] = rid
        self.emit(rep)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prop", action="append", default=[], help="key=value (a -D option of a Java member)")
    args = ap.parse_args(argv)
    props = dict(p.split("=", 1) for p in args.prop)
    Member(props).loop()


if __name__ == "__main__":
    main()
