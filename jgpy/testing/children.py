"""Child processes (Java and jgpy members of tests, benchmarks and the perf tool) killed at interpreter exit, so a
driver that dies or is interrupted never leaves members running."""

from __future__ import annotations

import atexit
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
