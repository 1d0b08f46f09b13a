"""Drive ``python -m jgpy chat`` (or any line-oriented program) from a test: type lines, wait for output lines."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from typing import Mapping


class LineProcess:
    """A child whose stdin the test types into and whose stdout+stderr lines it waits for; always reaped
    (use it as a context manager)."""

    def __init__(self, cmd: list[str], cwd: str | None = None, env: Mapping[str, str] | None = None) -> None:
        self.cmd = [str(c) for c in cmd]
        self.lines: list[str] = []
        self._queue: "queue.Queue[str | None]" = queue.Queue()
        self._next = 0
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=cwd,
                                     env=dict(env) if env is not None else None)
        self._reader = threading.Thread(target=self._read, name="line-process-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    @property
    def transcript(self) -> str:
        return "\n".join(self.lines)

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, pattern: str, timeout: float = 60.0) -> re.Match:
        """The first output line from the last one matched on that matches ``pattern`` (a regex, searched)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            while self._next < len(self.lines):
                m = rx.search(self.lines[self._next])
                self._next += 1
                if m:
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line matching {pattern!r} within {timeout} s from {self.cmd[:4]}; "
                                     f"output:\n{self.transcript[-4000:]}")
            try:
                line = self._queue.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if line is None:
                self._queue.put(None)
                raise AssertionError(f"{self.cmd[:4]} ended ({self.proc.wait(5)}) before a line matched {pattern!r};"
                                     f" output:\n{self.transcript[-4000:]}")
            self.lines.append(line)

    def finish(self, timeout: float = 60.0) -> int:
        """Close stdin (end of input), wait for the exit and the last output; the exit status."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        rc = self.proc.wait(timeout)
        self._reader.join(10)
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return rc
            if line is not None:
                self.lines.append(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def __enter__(self) -> "LineProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
