"""A private ActiveMQ broker for the JMS transport's tests (Debian's ``activemq`` package, run in the foreground).

The broker gets a generated ``activemq.xml`` with one STOMP connector on 127.0.0.1 and a port of its own, no
persistence, no JMX, no advisories, and a data directory under the caller's work directory; it can be killed and
started again on the same port (a broker crash while members are connected).

The broker counts as up once the STOMP port is listened on by the broker's own process (``/proc``), not merely
once something accepts there: a port chosen free can be taken by another test before the broker binds it, and
then the broker exits while the other listener answers. Its first start then moves to a fresh port.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import NoReturn

from jgpy.testing.children import ChildProcesses, listens_on
from jgpy.testing.java import free_port_block

ACTIVEMQ_HOME = Path("/usr/share/activemq")
ACTIVEMQ_JAR = ACTIVEMQ_HOME / "bin" / "activemq.jar"
_live = ChildProcesses()

_CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="jgpy-test" useJmx="false" persistent="false"
          advisorySupport="false" schedulerSupport="false" dataDirectory="{data}">
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


def unavailable_reason() -> str | None:
    """Why no broker can be started here (None: it can): the install hint."""
    if not ACTIVEMQ_JAR.is_file():
        return f"ActiveMQ is not installed ({ACTIVEMQ_JAR} is missing): sudo apt-get install -y activemq"
    if shutil.which("java") is None:
        return "no java on PATH for ActiveMQ: sudo apt-get install -y activemq (it depends on a JRE)"
    return None


class ActiveMQBroker:
    """One broker process on 127.0.0.1 (``url``: ``stomp://127.0.0.1:<port>``)."""

    def __init__(self, workdir: Path, heap: str = "256m") -> None:
        self.workdir = Path(workdir)
        self.port = free_port_block(1)
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = False                      # a restart keeps its port: the members know it
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.workdir / "data").mkdir(exist_ok=True)
        self.config = conf / "activemq.xml"
        self._write_config()
        self.log = self.workdir / "broker.log"

    def _write_config(self) -> None:
        self.config.write_text(_CONFIG.format(data=self.workdir / "data", port=self.port))

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0, attempts: int = 3) -> None:
        """Start the broker and wait until its own process listens on the STOMP port. On the first start, a
        port taken by another process meanwhile (the broker exits: it cannot bind) is replaced, ``attempts``
        times in all."""
        for attempt in range(attempts):
            if self._start_once(timeout):
                self._started = True
                return
            if self._started or attempt == attempts - 1:
                break
            self.port = free_port_block(1)
            self._write_config()
        self._fail(f"exited before listening on 127.0.0.1:{self.port}")

    def _start_once(self, timeout: float) -> bool:
        """One broker process: True once it listens on the port, False if it exited first; if neither happens
        within ``timeout`` s, it is stopped and RuntimeError raised."""
        base = self.workdir
        cmd = ["java", f"-Xmx{self.heap}", f"-Dactivemq.home={ACTIVEMQ_HOME}", f"-Dactivemq.base={base}",
               f"-Dactivemq.conf={base / 'conf'}", f"-Dactivemq.data={base / 'data'}",
               "-jar", str(ACTIVEMQ_JAR), "start", f"xbean:file:{self.config}"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=base)
        _live.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                return False
            if listens_on(self.proc.pid, self.port):
                return True
            time.sleep(0.2)
        self._fail(f"did not listen on 127.0.0.1:{self.port} within {timeout} s")

    def _fail(self, what: str) -> NoReturn:
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"ActiveMQ {what}:\n{tail}")

    def kill(self) -> None:
        """``kill -9`` (a broker crash): every connection drops at once."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        _live.discard(self)
        self.proc = None
