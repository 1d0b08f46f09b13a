"""A private ActiveMQ broker for the JMS transport's tests (Debian's ``activemq`` package, run in the foreground).

The broker gets a generated ``activemq.xml`` with one STOMP connector on 127.0.0.1 and a port of its own, no
persistence, no JMX, no advisories, and a data directory under the caller's work directory; it can be killed and
started again on the same port (a broker crash while members are connected).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from jgpy.testing.children import ChildProcesses
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
        conf = self.workdir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.workdir / "data").mkdir(exist_ok=True)
        self.config = conf / "activemq.xml"
        self.config.write_text(_CONFIG.format(data=self.workdir / "data", port=self.port))
        self.log = self.workdir / "broker.log"

    @property
    def url(self) -> str:
        return f"stomp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        """Start the broker and wait until its STOMP port accepts connections."""
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
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"ActiveMQ did not open 127.0.0.1:{self.port} within {timeout} s:\n{tail}")

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
