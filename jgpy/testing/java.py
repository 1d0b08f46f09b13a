"""Drive a real Java JGroups 2.12.2 node (the ``interop/`` harness) from Python.

A :class:`JavaNode` is one JVM running ``org.jgpy.interop.JgpyNode`` against Debian's
``/usr/share/java/jgroups.jar``; commands and events are JSON lines (``interop/PROTOCOL.md``).
Nodes are always reaped: use them as context managers, or call :meth:`JavaNode.close`.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from jgpy.testing.children import ChildProcesses

log = logging.getLogger(__name__)

JGROUPS_JAR = Path(os.environ.get("JGPY_JGROUPS_JAR", "/usr/share/java/jgroups.jar"))
#: BeanShell (Debian's libbsh-java): the jar's BSH protocol links against it
BSH_JAR = Path("/usr/share/java/bsh.jar")
REPO_ROOT = Path(__file__).resolve().parents[2]
INTEROP_SRC = REPO_ROOT / "interop" / "src"
MAIN_CLASS = "org.jgpy.interop.JgpyNode"
INSTALL_HINT = ("install the Java peer with: sudo apt-get install -y default-jdk-headless libjgroups-java "
                "(or run `make test`, which does it when run as root)")

_live_nodes = ChildProcesses()
_compile_lock = threading.Lock()


class JavaError(RuntimeError):
    """A command that the Java node answered with ``ok: false``, or a node that died."""


def interop_classes_dir() -> Path:
    """Where the compiled harness classes are (``JGPY_INTEROP_CLASSES`` or ``interop/build/classes``)."""
    return Path(os.environ.get("JGPY_INTEROP_CLASSES", REPO_ROOT / "interop" / "build" / "classes"))


def java_unavailable_reason() -> str | None:
    """None when a Java 2.12.2 peer can be started here, else why not (with the fix)."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        return f"no java/javac on PATH; {INSTALL_HINT}"
    if not JGROUPS_JAR.is_file():
        return f"{JGROUPS_JAR} is missing; {INSTALL_HINT}"
    try:
        ensure_compiled()
    except Exception as e:  # noqa: BLE001 - report any build failure as the reason
        return f"could not compile the interop harness: {e}"
    return None


def ensure_compiled() -> Path:
    """Compile ``interop/src`` with javac when the classes are missing or older than the sources."""
    out = interop_classes_dir()
    sources = sorted(INTEROP_SRC.rglob("*.java"))
    if not sources:
        if (out / "org" / "jgpy" / "interop" / "JgpyNode.class").is_file():
            return out
        raise FileNotFoundError(f"no harness sources under {INTEROP_SRC} and no compiled classes in {out}")
    with _compile_lock:
        stamp = out / ".stamp"
        newest = max(p.stat().st_mtime for p in sources)
        if stamp.is_file() and stamp.stat().st_mtime >= newest:
            return out
        out.mkdir(parents=True, exist_ok=True)
        cmd = ["javac", "-nowarn", "-Xlint:-options", "-encoding", "UTF-8", "-d", str(out),
               "-cp", str(JGROUPS_JAR)] + [str(p) for p in sources]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise RuntimeError(f"javac failed:\n{res.stderr[-4000:]}")
        stamp.touch()
    return out


_group_counter = itertools.count()


def unique_group() -> tuple[str, int]:
    """A multicast address and port of our own, so parallel tests never share a group."""
    rnd = random.Random(os.getpid() * 1000003 + next(_group_counter) * 7919 + time.monotonic_ns())
    return f"232.{rnd.randrange(1, 255)}.{rnd.randrange(1, 255)}.{rnd.randrange(1, 255)}", rnd.randrange(20000, 60000)


def udp_props(mcast_addr: str, mcast_port: int) -> dict[str, str]:
    """System properties that put the jar's ``udp.xml`` on a private group on loopback."""
    return {"jgroups.udp.mcast_addr": mcast_addr, "jgroups.udp.mcast_port": str(mcast_port),
            "jgroups.udp.ip_ttl": "0", "jgroups.bind_addr": "127.0.0.1"}


def _ports_outside_ephemeral_range(count: int) -> tuple[int, int]:
    """Where a block of ``count`` ports starts: below the kernel's ephemeral range (no connect gets one of them as
    its source port meanwhile, and a connect to one nobody listens on yet cannot connect to itself), unless that
    range leaves too little room below it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    if low - count > 12000:
        return 10000, low - count
    return 20000, 60000 - count


def free_port_block(count: int, attempts: int = 50) -> int:
    """The first of ``count`` consecutive TCP ports that are free on 127.0.0.1 right now (TCP clusters of
    parallel tests each get their own block), outside the ephemeral range where it leaves room."""
    import socket
    rnd = random.Random(os.getpid() * 7919 + time.monotonic_ns())
    lo, hi = _ports_outside_ephemeral_range(count)
    for _ in range(attempts):
        base = rnd.randrange(lo, hi)
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no block of {count} free TCP ports found in {attempts} attempts")


def tcp_props(base_port: int, members: int) -> dict[str, str]:
    """System properties that point the jar's ``tcp.xml`` (with TCP bind_port=``base_port``) at the ports
    ``base_port`` .. ``base_port + members`` on loopback."""
    hosts = ",".join(f"127.0.0.1[{p}]" for p in range(base_port, base_port + max(1, members)))
    return {"jgroups.tcpping.initial_hosts": hosts, "jgroups.bind_addr": "127.0.0.1"}


def private_tcp(config, members: int):
    """``config`` (a StackConfig whose transport is TCP) on a block of free ports of its own: TCP's bind_port
    moved to the block's first port, and the system properties that point TCPPING at the block. Returns
    ``(config, props, first port)``."""
    base = free_port_block(members + 2)
    return (config.with_properties(config.protocols[0].name, bind_port=str(base)), tcp_props(base, members),
            base)


class HarnessNode:
    """A member process driven by JSON lines (``interop/PROTOCOL.md``): Java (:class:`JavaNode`) or jgpy
    (:class:`PyNode`). Always reaped: use it as a context manager or call :meth:`close`. Its stderr log is
    deleted on close unless ``JGPY_KEEP_NODE_LOGS`` is set."""

    KIND = "?"

    def __init__(self, name: str | None = None, start_timeout: float = 30.0):
        self.name = name
        self._ids = itertools.count(1)
        self._replies: dict[int, "queue.Queue[dict]"] = {}
        self._lock = threading.Lock()
        self.events: "queue.Queue[dict]" = queue.Queue()
        self._log = tempfile.NamedTemporaryFile(prefix=f"jgpy-{self.KIND}-{name or 'node'}-", suffix=".log",
                                                delete=False)
        # buffered pipes: the reader thread must get whole lines per system call (a byte-wise reader is
        # starved by GIL contention on a loaded machine); commands are flushed explicitly
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     env=self.environment())
        _live_nodes.add(self)
        self._reader = threading.Thread(target=self._read_loop, name=f"{self.KIND}-node-{name}", daemon=True)
        self._reader.start()
        self.ready = self.wait_event(lambda e: e.get("event") == "ready", start_timeout)
        self.address = None
        self.physical = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str] | None:
        return None

    # ---- plumbing ----

    def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                log.warning("java node %s printed a non-JSON line on stdout: %r", self.name, line[:200])
                continue
            rid = obj.get("reply")
            if rid is not None:
                with self._lock:
                    q = self._replies.get(rid)
                if q is not None:
                    q.put(obj)
            else:
                obj["_t"] = time.monotonic()        # arrival time (crash tests time views from it)
                self.events.put(obj)
        self.events.put({"event": "_eof"})

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self._log.name, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def call(self, cmd: str, timeout: float = 30.0, **args: Any) -> dict:
        """Send a command and wait for its reply; raises :class:`JavaError` if it failed."""
        rid = next(self._ids)
        q: "queue.Queue[dict]" = queue.Queue()
        with self._lock:
            self._replies[rid] = q
        line = json.dumps({"cmd": cmd, "id": rid, **args}, allow_nan=False) + "\n"
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise JavaError(f"java node {self.name} is gone ({e}); log:\n{self.log_tail()}") from None
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    rep = q.get(timeout=min(0.5, max(0.01, deadline - time.monotonic())))
                    break
                except queue.Empty:
                    if self.proc.poll() is not None:
                        raise JavaError(f"java node {self.name} exited ({self.proc.returncode}) during {cmd}; "
                                        f"log:\n{self.log_tail()}") from None
                    if time.monotonic() >= deadline:
                        raise JavaError(f"no reply to {cmd} from java node {self.name} within {timeout}s") from None
        finally:
            with self._lock:
                self._replies.pop(rid, None)
        if not rep.get("ok"):
            raise JavaError(f"{cmd} failed in java node {self.name}: {rep.get('error')}\n{rep.get('trace', '')}")
        return rep

    def wait_event(self, pred: Callable[[dict], bool], timeout: float = 30.0) -> dict:
        """Wait for the first event matching ``pred`` (events before it are discarded)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise JavaError(f"timed out after {timeout}s waiting for an event from java node {self.name}; "
                                f"log:\n{self.log_tail()}")
            try:
                ev = self.events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if ev.get("event") == "_eof":
                self.events.put(ev)
                raise JavaError(f"java node {self.name} closed its output; log:\n{self.log_tail()}")
            if pred(ev):
                return ev

    def drain_events(self) -> list[dict]:
        out = []
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return out
            if ev.get("event") != "_eof":
                out.append(ev)

    # ---- commands ----

    def connect(self, config: str, cluster: str, props: dict[str, str] | None = None, receive: str = "events",
                timeout: float = 60.0, **extra: Any) -> dict:
        rep = self.call("connect", timeout=timeout, config=config, cluster=cluster, name=self.name,
                        props=props or {}, receive=receive, **extra)
        self.address = rep.get("address")
        self.physical = rep.get("physical")
        return rep

    def send(self, payload: bytes | None = None, dest: Any = None, oob: bool = False, text: str | None = None,
             count: int = 1, flags: int = 0, timeout: float = 60.0, numbered: bool = False, start: int = 0,
             java_string: str | None = None) -> dict:
        """Send from the Java node: raw ``payload`` bytes, ``text`` (UTF-8 bytes) or ``java_string``
        (``setObject(String)``); ``numbered`` appends ``":<n>"`` (n from ``start``) to each of ``count`` copies."""
        args: dict[str, Any] = {"dest": dest, "oob": oob, "count": count, "flags": flags, "numbered": numbered,
                                "start": start}
        if java_string is not None:
            args["object"] = {"class": "JavaObject", "type": "String", "value": java_string}
        elif text is not None:
            args["text"] = text
        else:
            args["payload"] = (payload or b"").hex()
        return self.call("send", timeout=timeout, **args)

    def protocol_stats(self) -> dict:
        """``JChannel.dumpStats()`` of the Java node: {protocol: {statistic: value}}."""
        return self.call("dump_stats")["stats"]

    def encode(self, kind: str, value: Any) -> bytes:
        return bytes.fromhex(self.call("encode", kind=kind, value=value)["hex"])

    def decode(self, kind: str, data: bytes) -> dict:
        return self.call("decode", kind=kind, hex=bytes(data).hex())

    def view(self) -> dict:
        return self.call("view")

    def halt(self) -> None:
        """Kill the JVM abruptly (``Runtime.halt``), as a crash."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps({"cmd": "halt", "id": next(self._ids)}) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def close(self, timeout: float = 15.0) -> None:
        """Disconnect and exit; kill the JVM if it does not go in time. Always reaps the process."""
        if self.proc.poll() is None:
            try:
                self.call("exit", timeout=timeout)
            except JavaError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        _live_nodes.discard(self)
        if os.environ.get("JGPY_KEEP_NODE_LOGS"):
            log.warning("kept the log of %s node %s: %s", self.KIND, self.name, self._log.name)
            return
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def kill(self) -> None:
        """SIGKILL: a crash without any goodbye."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def __enter__(self) -> "HarnessNode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, pid={self.proc.pid})"


class JavaNode(HarnessNode):
    """One JVM running the interop harness against Debian's jgroups.jar.

    >>> with JavaNode(name="J1") as j:
    ...     j.connect("udp.xml", "cluster-x", props=udp_props(*unique_group()))
    """

    KIND = "java"

    def __init__(self, name: str | None = None, jvm_args: tuple[str, ...] = (), start_timeout: float = 30.0,
                 extra_classpath: tuple[str, ...] = ()):
        reason = java_unavailable_reason()
        if reason:
            raise JavaError(reason)
        self.jvm_args = jvm_args
        self.extra_classpath = extra_classpath
        super().__init__(name, start_timeout)

    def command(self) -> list[str]:
        cp = os.pathsep.join([str(interop_classes_dir()), str(JGROUPS_JAR), *self.extra_classpath])
        return ["java", "-Djava.net.preferIPv4Stack=true", "-Djgroups.bind_addr=127.0.0.1", "-Xss512k",
                *java_debug_args(), *self.jvm_args, "-cp", cp, MAIN_CLASS]


def java_debug_args() -> list[str]:
    """JVM arguments that log the Java loggers named in ``JGPY_JAVA_DEBUG`` (comma-separated, for example
    ``org.jgroups.protocols.pbcast.GMS``) at debug level to the node's stderr log; none when it is unset.
    JGroups 2.12 logs through java.util.logging when log4j is not on the class path, and its debug is FINE."""
    names = [n for n in os.environ.get("JGPY_JAVA_DEBUG", "").split(",") if n]
    if not names:
        return []
    conf = Path(tempfile.gettempdir()) / f"jgpy-jul-{os.getpid()}.properties"
    lines = ["handlers=java.util.logging.ConsoleHandler", "java.util.logging.ConsoleHandler.level=FINE",
             "java.util.logging.SimpleFormatter.format=%1$tT.%1$tL %4$s %3$s %5$s%6$s%n", ".level=WARNING",
             *(f"{n}.level=FINE" for n in names)]
    conf.write_text("\n".join(lines) + "\n")
    return [f"-Djava.util.logging.config.file={conf}"]


class PyNode(HarnessNode):
    """A jgpy member in its own process (``python -m jgpy node``), driven like a :class:`JavaNode`."""

    KIND = "jgpy"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "jgpy", "node"]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(REPO_ROOT)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env
