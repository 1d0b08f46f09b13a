"""``python -m jgpy node``: a jgpy member in its own process, driven by JSON lines on stdin/stdout.

It speaks the command protocol of the Java harness (``interop/PROTOCOL.md``: connect, send, view, stats,
dump_stats, discard, disconnect, halt, exit, ...), so a test drives a jgpy member exactly like a Java one
and can kill it with SIGKILL for crash tests. Only protocol JSON goes to stdout; logging goes to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from jgpy import __version__
from jgpy._core.address import logical_name
from jgpy._core.jg212 import object_to_buffer
from jgpy.testing.javajson import from_json, to_json


class Node:
    def __init__(self, out) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.channel = None
        self.count_only = False
        self.sleep_ms = 0
        self.received = 0
        self.received_bytes = 0
        self.sent = 0
        self.first_ns = 0
        self.last_ns = 0
        self.state_provider: bytes | None = None
        self.partition: list = []          # members ignored for good (discard keep=true)

    def emit(self, obj: dict) -> None:
        line = json.dumps(obj, allow_nan=False)
        with self.lock:
            self.out.write(line + "\n")
            self.out.flush()

    # ---- the receiver ----

    def _receiver(self):
        from jgpy import Receiver
        node = self

        class R(Receiver):
            def receive(self, msg):
                now = time.monotonic_ns()
                node.received += 1
                if node.received == 1:
                    node.first_ns = now
                node.last_ns = now
                node.received_bytes += msg.length
                if node.sleep_ms:
                    time.sleep(node.sleep_ms / 1000.0)
                if node.count_only:
                    return
                node.emit({"event": "msg", "src": to_json(msg.src), "src_name": logical_name(msg.src),
                           "dest": to_json(msg.dest), "flags": msg.flags,
                           "payload": msg.buffer.hex() if msg.has_buffer() else None,
                           "headers": [[pid, type(h).__name__, repr(h)] for pid, h in msg.headers]})

            def view_accepted(self, view):
                if node.partition:                 # keep a partition across views (DISCARD forgets non-members)
                    node.channel.stack.find("DISCARD").set_ignored(node.partition)
                node.emit({"event": "view", **node._view_body(view)})

            def suspect(self, addr):
                node.emit({"event": "suspect", "member": to_json(addr), "name": logical_name(addr)})

            def block(self):
                node.emit({"event": "block"})

            def unblock(self):
                node.emit({"event": "unblock"})

            def get_state(self):
                node.emit({"event": "get_state"})
                return node.state_provider

            def set_state(self, state):
                node.emit({"event": "set_state", "state": state.hex() if state is not None else None})
        return R()

    @staticmethod
    def _view_body(view) -> dict:
        if view is None:
            return {"view_id": None, "members": None, "names": None, "merge": False, "subgroups": None}
        from jgpy._core.types import MergeView
        return {"view_id": to_json(view.vid), "members": [to_json(a) for a in view.members],
                "names": [logical_name(a) for a in view.members], "merge": isinstance(view, MergeView),
                "subgroups": [to_json(v) for v in view.subgroups] if isinstance(view, MergeView) and view.subgroups
                else None}

    # ---- commands ----

    def _require(self):
        if self.channel is None or not self.channel.is_connected:
            raise RuntimeError("not connected")
        return self.channel

    def _resolve(self, dest: Any):
        if dest is None:
            return None
        if isinstance(dest, str):
            ch = self._require()
            for a in ch.view.members:
                if logical_name(a) == dest:
                    return a
            from jgpy._core.address import logical_names
            for a, n in logical_names().items():
                if n == dest:
                    return a
            raise KeyError(f"no member named {dest!r} in the current view {ch.view}")
        return from_json(dest)

    def cmd_connect(self, c: dict) -> dict:
        from jgpy import Channel
        self.count_only = c.get("receive", "events") == "count"
        self.sleep_ms = int(c.get("receive_sleep_ms") or 0)
        config = c["config"]
        self.channel = Channel(config, c.get("name"), c.get("props") or {}, self._receiver())
        if c.get("address") is not None:             # a chosen address (e.g. to decide who leads a merge)
            fixed = from_json(c["address"])
            self.channel.address_generator = lambda: fixed
        self.channel.connect(c["cluster"])
        ch = self.channel
        physical = ch.stack.transport.physical_addr
        return {"address": to_json(ch.address), "name": ch.name, "physical": to_json(physical),
                "view": self._view_body(ch.view)}

    def cmd_send(self, c: dict) -> dict:
        from jgpy import Message
        from jgpy.testing.javajson import from_json as fj
        ch = self._require()
        dest = self._resolve(c.get("dest"))
        count = int(c.get("count", 1))
        numbered, start = bool(c.get("numbered")), int(c.get("start", 0))
        if c.get("payload") is not None:
            base: Any = bytes.fromhex(c["payload"])
        elif c.get("text") is not None:
            base = c["text"].encode()
        elif "object" in c:
            base = fj(c["object"])
        else:
            base = None
        flags = int(c.get("flags") or 0) | (Message.OOB if c.get("oob") else 0)
        t0 = time.perf_counter()
        for i in range(count):
            if numbered:
                suffix = f":{start + i}"
                if isinstance(base, (bytes, bytearray)) or base is None:
                    payload = (base or b"") + suffix.encode()
                else:
                    payload = object_to_buffer(type(base)(base.type, base.value + suffix))
            else:
                payload = base if isinstance(base, (bytes, bytearray)) or base is None else object_to_buffer(base)
            msg = Message(dest, payload)
            msg.flags = flags
            ch.send(msg)
            self.sent += 1
        return {"seconds": time.perf_counter() - t0}

    def cmd_view(self, c: dict) -> dict:
        return self._view_body(self._require().view)

    def cmd_stats(self, c: dict) -> dict:
        return {"received": self.received, "received_bytes": self.received_bytes, "sent": self.sent,
                "first_recv_ns": self.first_ns, "last_recv_ns": self.last_ns, **_process_stats()}

    def cmd_reset_stats(self, c: dict) -> dict:
        self.received = self.received_bytes = self.sent = self.first_ns = self.last_ns = 0
        return {}

    def cmd_dump_stats(self, c: dict) -> dict:
        return {"stats": json.loads(json.dumps(self._require().dump_stats(), default=str))}

    def cmd_discard(self, c: dict) -> dict:
        ch = self._require()
        d = ch.stack.find("DISCARD")
        if d is None:
            raise RuntimeError("no DISCARD protocol in the stack: add it to the config")
        if "ignore" in c:
            ignored = [self._resolve(x) for x in c["ignore"]]
            d.set_ignored(ignored)
            self.partition = ignored if c.get("keep") else []
        if c.get("discard_all") is not None:
            d.discard_all = bool(c["discard_all"])
        if c.get("up") is not None:
            d.up_loss = float(c["up"])
        if c.get("down") is not None:
            d.down_loss = float(c["down"])
        return {}

    def cmd_set_state_provider(self, c: dict) -> dict:
        self.state_provider = bytes.fromhex(c["state"]) if c.get("state") is not None else None
        return {}

    def cmd_disconnect(self, c: dict) -> dict:
        if self.channel is not None:
            self.channel.disconnect()
        return {}

    def cmd_close(self, c: dict) -> dict:
        if self.channel is not None:
            self.channel.close()
        return {}

    def cmd_ping(self, c: dict) -> dict:
        return {}


def _process_stats() -> dict:
    try:
        import psutil
        p = psutil.Process()
        mi = p.memory_info()
        return {"rss_bytes": mi.rss, "cpu_seconds": sum(p.cpu_times()[:2])}
    except Exception:  # noqa: BLE001
        return {}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    out = sys.stdout
    sys.stdout = sys.stderr            # anything printed (e.g. the GMS banner) must not pollute the protocol
    node = Node(out)
    node.emit({"event": "ready", "jgpy": __version__, "pid": os.getpid()})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        rid = None
        try:
            cmd = json.loads(line)
            rid = cmd.get("id")
            name = cmd.get("cmd")
            if name == "halt":                       # a crash: no leave, no FD_SOCK goodbye
                os.kill(os.getpid(), signal.SIGKILL)
            if name == "exit":
                node.emit({"reply": rid, "ok": True})
                os._exit(0)
            handler = getattr(node, f"cmd_{name}", None)
            if handler is None:
                raise ValueError(f"unknown command {name!r}")
            node.emit({"reply": rid, "ok": True, **(handler(cmd) or {})})
        except BaseException as e:  # noqa: BLE001 - report every failure to the driver
            import traceback
            node.emit({"reply": rid, "ok": False, "error": f"{type(e).__name__}: {e}",
                       "trace": traceback.format_exc()})
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
