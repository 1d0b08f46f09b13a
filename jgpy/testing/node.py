"""``python -m jgpy node``: a jgpy member in its own process, driven by JSON lines on stdin/stdout.

It speaks the command protocol of the Java harness (``interop/PROTOCOL.md``: connect, send, view, stats,
dump_stats, discard, disconnect, halt, exit, ...), so a test drives a jgpy member exactly like a Java one
and can kill it with SIGKILL for crash tests. Only protocol JSON goes to stdout; logging goes to stderr.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
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
        # state transfer (set_state_provider, get_state, get_log): see interop/PROTOCOL.md
        self.state_spec: StateSpec | None = None
        self.partial_specs: dict[str, StateSpec] = {}
        self.log_mode = False                      # the state is the log of delivered multicasts
        self.delivery_log: list[bytes] = []
        self.log_lock = threading.Lock()
        self.report_max = 65536                    # set_state events carry the state as hex up to this size
        self.expect_size = -1                      # set_state streams: read this many bytes, then close
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
                if node.log_mode and msg.dest is None:
                    with node.log_lock:
                        node.delivery_log.append(msg.buffer or b"")
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
                return node.provide_bytes(None)

            def get_partial_state(self, state_id):
                return node.provide_bytes(state_id)

            def get_state_stream(self, out, state_id):
                node.provide_stream(out, state_id)

            def set_state(self, state):
                node.install_bytes(None, state)

            def set_partial_state(self, state_id, state):
                node.install_bytes(state_id, state)

            def set_state_stream(self, inp, state_id):
                node.install_stream(inp, state_id)
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
        if c.get("journal"):                         # the delivery journal: a JOURNAL protocol on top
            from jgpy.protocols.journal import with_journal
            config = with_journal(config, c["journal"])
        self.channel = Channel(config, c.get("name"), c.get("props") or {}, self._receiver())
        if c.get("address") is not None:             # a chosen address (e.g. to decide who leads a merge)
            fixed = from_json(c["address"])
            self.channel.address_generator = lambda: fixed
        st = c.get("state")               # {"target", "state_id", "timeout"}: connect with a state transfer
        state = None
        if st is None:
            self.channel.connect(c["cluster"])
        else:
            target = from_json(st["target"]) if st.get("target") is not None else None
            state = self.channel.connect_with_state(c["cluster"], target, st.get("state_id"),
                                                    int(st.get("timeout") or 5000))
        ch = self.channel
        physical = ch.stack.transport.physical_addr
        return {"address": to_json(ch.address), "name": ch.name, "physical": to_json(physical),
                "view": self._view_body(ch.view), "state": state}

    def cmd_start_flush(self, c: dict) -> dict:
        ch = self._require()
        members = [self._resolve(m) for m in c["members"]] if c.get("members") is not None else None
        t0 = time.perf_counter()
        rc = ch.start_flush(members, bool(c.get("automatic_resume")))
        return {"result": rc, "seconds": time.perf_counter() - t0}

    def cmd_stop_flush(self, c: dict) -> dict:
        ch = self._require()
        members = [self._resolve(m) for m in c["members"]] if c.get("members") is not None else None
        t0 = time.perf_counter()
        ch.stop_flush(members)
        return {"seconds": time.perf_counter() - t0}

    def cmd_suspend_but_fail(self, c: dict) -> dict:
        from jgpy.stack.events import Event, EventType
        self._require().stack.down(Event(EventType.SUSPEND_BUT_FAIL))
        return {}

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

    # ---- state transfer ----

    def cmd_set_state_provider(self, c: dict) -> dict:
        spec = StateSpec.parse(c)
        partial = {k: StateSpec.parse(v) for k, v in (c.get("partial") or {}).items()}
        log = bool(c.get("log"))
        if log and not self.log_mode:
            with self.log_lock:
                self.delivery_log = []
        self.log_mode = log
        self.state_spec = spec
        self.partial_specs = partial
        return {}

    def cmd_get_state(self, c: dict) -> dict:
        ch = self._require()
        target = self._resolve(c.get("target"))
        self.report_max = int(c["report_max"]) if c.get("report_max") is not None else 65536
        self.expect_size = int(c["expect_size"]) if c.get("expect_size") is not None else -1
        timeout = c.get("timeout_ms", c.get("timeout"))      # timeout_ms: HarnessNode.call() takes "timeout"
        timeout = int(timeout) if timeout is not None else 5000
        t0 = time.perf_counter()
        rc = ch.get_state(target, timeout, c.get("state_id"))
        return {"result": rc, "seconds": time.perf_counter() - t0}

    def cmd_get_log(self, c: dict) -> dict:
        with self.log_lock:
            entries = [e.hex() for e in self.delivery_log]
        return {"count": len(entries), "entries": entries}

    def cmd_state_request_encode(self, c: dict) -> dict:
        from jgpy.javaser import state_request_bytes
        addr = from_json(c["address"]) if c.get("address") is not None else None
        return {"hex": state_request_bytes(c.get("state_id"), addr).hex()}

    def cmd_state_request_decode(self, c: dict) -> dict:
        from jgpy.javaser import ObjectInput
        inp = ObjectInput.from_bytes(bytes.fromhex(c["hex"]))
        sid, addr = inp.read_object(), inp.read_object()
        return {"state_id": sid, "address": to_json(addr) if addr is not None else None,
                "class": "org.jgroups.util.UUID" if addr is not None else None}

    def _spec_for(self, state_id):
        spec = self.partial_specs.get(state_id) if state_id is not None else None
        return spec if spec is not None else self.state_spec

    def encode_log(self) -> bytes:
        with self.log_lock:
            return b"".join(len(e).to_bytes(4, "big") + e for e in self.delivery_log)

    def install_log(self, state: bytes) -> None:
        entries, pos, mv = [], 0, memoryview(state)
        while pos < len(mv):
            n = int.from_bytes(mv[pos:pos + 4], "big")
            entries.append(mv[pos + 4:pos + 4 + n].tobytes())
            pos += 4 + n
        with self.log_lock:
            self.delivery_log = entries

    def _state_event(self, name, state_id, small, size, sha, t0) -> None:
        ev = {"event": name, "size": size, "sha256": sha, "seconds": time.perf_counter() - t0}
        if state_id is not None:
            ev["state_id"] = state_id
        if small is not None and len(small) <= self.report_max:
            ev["state"] = bytes(small).hex()
        if self.log_mode:
            with self.log_lock:
                ev["entries"] = len(self.delivery_log)
        self.emit(ev)

    def provide_bytes(self, state_id):
        t0 = time.perf_counter()
        spec = self._spec_for(state_id)
        s = spec.bytes(self) if spec is not None else None
        self._state_event("get_state", state_id, s, len(s) if s is not None else 0,
                          hashlib.sha256(s).hexdigest() if s is not None else None, t0)
        return s

    def provide_stream(self, out, state_id) -> None:
        t0 = time.perf_counter()
        spec = self._spec_for(state_id)
        small, n = None, 0
        if spec is not None and spec.gen is not None:
            for chunk in spec.gen.chunks(spec.size):
                out.write(chunk)
                n += len(chunk)
        elif spec is not None:
            small = spec.bytes(self)
            if small is not None:
                out.write(small)
                n = len(small)
        out.flush()
        self._state_event("get_state", state_id, small, n, hashlib.sha256(small).hexdigest() if small is not None
                          else None, t0)

    def install_bytes(self, state_id, state: bytes) -> None:
        t0 = time.perf_counter()
        if self.log_mode and state_id is None:       # the log is the full state; a partial one is only reported
            self.install_log(state)
        self._state_event("set_state", state_id, state, len(state) if state is not None else 0,
                          hashlib.sha256(state).hexdigest() if state is not None else None, t0)

    def install_stream(self, inp, state_id) -> None:
        """Chunks, hashed as they come: a big state is never held (only what is reported or logged)."""
        t0 = time.perf_counter()
        h = hashlib.sha256()
        limit = self.expect_size
        keep_max = float("inf") if self.log_mode else self.report_max
        kept: bytearray | None = bytearray()
        n = 0
        while limit < 0 or n < limit:
            want = 65536 if limit < 0 else min(65536, limit - n)
            chunk = inp.read(want)
            if not chunk:
                break
            h.update(chunk)
            if kept is not None:
                if n + len(chunk) <= keep_max:
                    kept += chunk
                else:
                    kept = None
            n += len(chunk)
        if self.log_mode and state_id is None and kept is not None:
            self.install_log(bytes(kept))
        self._state_event("set_state", state_id, kept, n, h.hexdigest(), t0)

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


GEN_BLOCK = 65536


class StateGen:
    """Deterministic state bytes, the same as the Java harness's ``StateGen``: 64 KiB blocks; block i is a
    64 KiB base block rotated left by ``(i*40503) mod 65536`` with its first 8 bytes replaced by i
    (big-endian); the base block is ``SHA-256(b"jgpy-state" + seed (8 bytes BE) + k (4 bytes BE))``, k=0..2047."""

    def __init__(self, seed: int = 0):
        sb = int(seed).to_bytes(8, "big", signed=True)
        base = b"".join(hashlib.sha256(b"jgpy-state" + sb + k.to_bytes(4, "big")).digest()
                        for k in range(GEN_BLOCK // 32))
        self.base2 = base + base

    def block(self, i: int) -> bytes:
        r = (i * 40503) & 0xFFFF
        return i.to_bytes(8, "big") + self.base2[r + 8:r + GEN_BLOCK]

    def chunks(self, size: int):
        done, i = 0, 0
        while done < size:
            b = self.block(i)
            n = min(GEN_BLOCK, size - done)
            yield b if n == GEN_BLOCK else b[:n]
            done += n
            i += 1

    def bytes(self, size: int) -> bytes:
        return b"".join(self.chunks(size))


def generated_sha256(size: int, seed: int = 0) -> str:
    """SHA-256 (hex) of the generated state ``{"size": size, "seed": seed}``."""
    h = hashlib.sha256()
    for c in StateGen(seed).chunks(size):
        h.update(c)
    return h.hexdigest()


class StateSpec:
    """A provider state of ``set_state_provider``: fixed bytes, generated bytes or the delivery log."""

    def __init__(self, fixed: bytes | None = None, gen: StateGen | None = None, size: int = 0, log: bool = False):
        self.fixed, self.gen, self.size, self.log = fixed, gen, size, log

    @classmethod
    def parse(cls, c: dict) -> "StateSpec | None":
        if c.get("generate") is not None:
            g = c["generate"]
            return cls(gen=StateGen(int(g.get("seed") or 0)), size=int(g["size"]))
        if c.get("log"):
            return cls(log=True)
        if c.get("state") is not None:
            return cls(fixed=bytes.fromhex(c["state"]))
        return None

    def bytes(self, node: Node) -> bytes | None:
        if self.log:
            return node.encode_log()
        if self.gen is not None:
            return self.gen.bytes(self.size)
        return self.fixed


def proc_memory(pid: int) -> dict:
    """``{"rss": VmRSS, "hwm": VmHWM}`` in bytes of a process (Linux /proc), or {} if unreadable."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, val = line.split(":", 1)
                    out["rss" if key == "VmRSS" else "hwm"] = int(val.split()[0]) * 1024
    except OSError:
        return {}
    return out


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (``echo 5 > /proc/<pid>/clear_refs``); False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _process_stats() -> dict:
    try:
        import psutil
        p = psutil.Process()
        mi = p.memory_info()
        return {"rss_bytes": mi.rss, "cpu_seconds": time.process_time()}    # all threads, ns resolution
    except Exception:  # noqa: BLE001
        return {}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    for name in filter(None, os.environ.get("JGPY_NODE_DEBUG", "").split(",")):
        logging.getLogger(name.strip()).setLevel(logging.DEBUG)     # e.g. jgpy.protocols.pbcast.gms
    out = sys.stdout
    sys.stdout = sys.stderr            # anything printed (e.g. the GMS banner) must not pollute the protocol
    node = Node(out)
    node.emit({"event": "ready", "jgpy": __version__, "pid": os.getpid()})
    # commands run one after the other on a worker thread, in the order they came; control commands (CONTROL)
    # run at once on the reader: a fault injected while a long send blocks on flow control must not wait for it
    work: queue.Queue = queue.Queue()
    worker = threading.Thread(target=_run_commands, args=(node, work), name="node-commands", daemon=True)
    worker.start()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            cmd = json.loads(line)
        except ValueError as e:
            node.emit({"reply": None, "ok": False, "error": f"{type(e).__name__}: {e}", "trace": ""})
            continue
        if cmd.get("cmd") in CONTROL:
            _run_command(node, cmd)
        else:
            work.put(cmd)
    work.put(None)
    worker.join()
    _close_journals()
    os._exit(0)


#: commands the reader runs at once, ahead of those still queued (fault injection, a crash)
CONTROL = frozenset({"discard", "halt"})


def _run_commands(node: Node, work: queue.Queue) -> None:
    while (cmd := work.get()) is not None:
        _run_command(node, cmd)


def _run_command(node: Node, cmd: dict) -> None:
    rid = None
    try:
        rid = cmd.get("id")
        name = cmd.get("cmd")
        if name == "halt":                       # a crash: no leave, no FD_SOCK goodbye
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "exit":
            _close_journals()
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


def _close_journals() -> None:
    """Write what the journals buffered (os._exit skips atexit); a SIGKILL (halt) loses it, as a crash does."""
    journal = sys.modules.get("jgpy.journal")     # loaded only by a member that journals (it needs pyarrow)
    if journal is not None:
        journal.close_all()


if __name__ == "__main__":
    sys.exit(main())
