"""FD_PING: failure detection by running a ping command (``org.jgroups.protocols.FD_PING`` of 2.12): ``cmd``
with the neighbour's host address appended; exit code 0 is an answer. See :mod:`jgpy.protocols.fd_probe`.

Deviations from 2.12, which runs the command on the timer thread and waits for it without bound: the command runs
on the probe thread, in a session of its own, and is killed (with all its children) after ``timeout`` ms, which
counts as no answer (Linux's ``ping HOST``, 2.12's default ``cmd``, never ends: use e.g. ``ping -c 1 -W 1``).
A ``cmd`` that cannot be parsed or whose program is not found is a ConfigError when the stack is made (2.12 logs
an error at every probe and never suspects anyone). 2.12 splits ``cmd`` at white space; jgpy splits it as a shell
would (quotes group words) but runs no shell.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess

from jgpy.errors import ConfigError
from jgpy.protocols.fd_probe import ProbeError, ProbingFD
from jgpy.stack.properties import Property, to_bool, to_str

MAX_LOGGED_OUTPUT = 500          # characters of the command's output logged (at DEBUG, when verbose)


def parse_cmd(cmd: str | None) -> list[str]:
    """``cmd`` as an argument list whose program exists; ConfigError naming FD_PING otherwise."""
    try:
        argv = shlex.split(cmd or "")
    except ValueError as e:
        raise ConfigError(f"FD_PING: cmd={cmd!r} cannot be parsed ({e}): give a command such as "
                          f"\"ping -c 1 -W 1\"") from None
    if not argv:
        raise ConfigError("FD_PING: cmd is empty: give a command such as \"ping -c 1 -W 1\"")
    if shutil.which(argv[0]) is None:
        raise ConfigError(f"FD_PING: cmd={cmd!r}: {argv[0]!r} is not an executable program (or not on the PATH): "
                          f"install it or give its full path")
    return argv


class FD_PING(ProbingFD):  # noqa: N801 - the JGroups name
    NAME = "FD_PING"

    cmd = Property(to_str, "ping", "command (script or executable) that pings a host, given the host's address as "
                   "its last argument: exit code 0 means it answered (e.g. \"ping -c 1 -W 1\"; jgpy: killed after "
                   "timeout ms, which counts as no answer)")
    verbose = Property(to_bool, True, "log the command's output (at DEBUG)")

    def __init__(self) -> None:
        super().__init__()
        self._argv: list[str] = []

    def init(self) -> None:
        super().init()
        self._argv = parse_cmd(self.cmd)

    def probe(self, host: str) -> bool:
        argv = (self._argv or parse_cmd(self.cmd)) + [host]
        log_output = self.verbose and self.log.isEnabledFor(logging.DEBUG)
        out = subprocess.PIPE if log_output else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as e:
            raise ProbeError(f"running {argv}: {e}") from None
        with proc:
            try:
                output, _ = proc.communicate(timeout=self.timeout / 1000.0)
            except subprocess.TimeoutExpired:
                self._kill_session(proc)
                self.log.debug("%s: %s did not end within %d ms: no answer", self.me, argv, self.timeout)
                return False
        if log_output:
            self.log.debug("%s: %s -> %d: %s", self.me, " ".join(argv), proc.returncode,
                           (output or b"")[:MAX_LOGGED_OUTPUT].decode("utf-8", "replace"))
        return proc.returncode == 0

    @staticmethod
    def _kill_session(proc: subprocess.Popen) -> None:
        """Kill the command and whatever it started (its session), then reap it."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:     # a child that left the session still holds the pipe: give it up
            pass
