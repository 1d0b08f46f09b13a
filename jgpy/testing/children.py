"""Child processes (Java and jgpy members of tests, benchmarks and the perf tool) killed at interpreter exit, so a
driver that dies or is interrupted never leaves members running; :func:`listens_on` tells whether a child's own
socket listens on a port (a port chosen free can be taken by another process before the child binds it)."""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Any


class ChildProcesses:
    """A weak set of objects with a ``proc`` (``subprocess.Popen``); at exit every one still running is killed."""

    def __init__(self) -> None:
        self._live: "weakref.WeakSet[Any]" = weakref.WeakSet()
        atexit.register(self.kill_all)

    def add(self, owner: Any) -> None:
        self._live.add(owner)

    def discard(self, owner: Any) -> None:
        self._live.discard(owner)

    def kill_all(self) -> None:
        for owner in list(self._live):
            try:
                if owner.proc.poll() is None:
                    owner.proc.kill()
                    owner.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on TCP ``port`` (any address, IPv4 or IPv6: /proc/net/tcp, tcp6)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                        inodes.add(fields[9])
        except OSError:
            continue
    return inodes


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on TCP ``port``."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False
