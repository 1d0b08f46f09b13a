"""GossipRouters for tests and benchmarks: Java's from the jar and jgpy's (``python -m jgpy gossip-router``), each in
a process of its own that is always reaped, and the system properties that point tunnel.xml/tcpgossip.xml at them."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from jgpy.testing.children import ChildProcesses, listens_on
from jgpy.testing.java import JGROUPS_JAR, REPO_ROOT, free_port_block

_live = ChildProcesses()


def router_props(ports: list[int]) -> dict[str, str]:
    """System properties for the jar's tunnel.xml and tcpgossip.xml (both read jgroups.tunnel.gossip_router_hosts)
    pointing at routers on 127.0.0.1 ``ports``."""
    hosts = ",".join(f"127.0.0.1[{p}]" for p in ports)
    return {"jgroups.tunnel.gossip_router_hosts": hosts, "jgroups.bind_addr": "127.0.0.1"}


class RouterProcess:
    """A GossipRouter process on 127.0.0.1:``port`` (a free one when None); ``kind`` "java" or "jgpy"."""

    def __init__(self, kind: str, port: int | None = None, extra: tuple[str, ...] = (), start_timeout: float = 30.0):
        self.kind = kind
        self.port = port if port is not None else free_port_block(1)
        self.extra = extra
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self._log = tempfile.NamedTemporaryFile(prefix=f"jgpy-router-{kind}-", suffix=".log", delete=False)
        self.start()

    def command(self) -> list[str]:
        if self.kind == "java":
            return ["java", "-Djava.net.preferIPv4Stack=true", "-cp", str(JGROUPS_JAR),
                    "org.jgroups.stack.GossipRouter", "-port", str(self.port), "-bindaddress", "127.0.0.1",
                    *self.extra]
        return [sys.executable, "-m", "jgpy", "gossip-router", "--port", str(self.port), "--bind-addr", "127.0.0.1",
                "--stats-interval", "0", *self.extra]

    def start(self) -> None:
        """Start (again, after :meth:`kill` or :meth:`stop`) and wait until its own process listens on the port
        (another process listening there does not count: the router then exits, unable to bind)."""
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        _live.add(self)
        deadline = time.monotonic() + self.start_timeout
        while not listens_on(self.proc.pid, self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} GossipRouter exited with {self.proc.returncode}: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.kind} GossipRouter did not listen on {self.port} in time")
            time.sleep(0.1)

    def log_tail(self, n: int = 3000) -> str:
        try:
            with open(self._log.name, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: a crash (members' connections break)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def close(self) -> None:
        self.kill()
        _live.discard(self)
        try:
            os.unlink(self._log.name)
        except OSError:
            pass

    def __enter__(self) -> "RouterProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
