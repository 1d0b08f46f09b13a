"""Spark sessions for the checker: ``local[*]`` by default, or a standalone cluster (``spark://host:port``).

:class:`StandaloneCluster` starts a Spark standalone master and one worker from the pip ``pyspark`` package on
127.0.0.1 (free ports, private pid/log/work directories) and stops exactly those daemons again: the benchmark
uses it to show the path to a real cluster.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("jgpy.analysis")

DEFAULT_SHUFFLE_PARTITIONS = 16


def _env() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")      # else Spark binds to the external interface
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_available() -> str | None:
    """None if PySpark and Java can run the checker here, else why not (with the fix)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "PySpark is not installed: pip install pyspark pyarrow 'pandas<3' (or make deps)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs Java: install a JDK (e.g. apt-get install -y default-jdk-headless)"
    return None


def get_session(master: str | None = None, *, app: str = "jgpy-check", shuffle_partitions: int | None = None,
                driver_memory: str | None = None, executor_memory: str | None = None, conf: dict | None = None):
    """A SparkSession (``master`` default ``local[*]``), quiet, without UI. An active session of the same master
    is reused; ``driver_memory`` only applies when the JVM is started by this call."""
    _env()
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    active = SparkSession.getActiveSession()
    if active is not None:
        if active.sparkContext.master == master:
            return active
        active.stop()
    b = (SparkSession.builder.master(master).appName(app)
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.shuffle.partitions", str(shuffle_partitions or DEFAULT_SHUFFLE_PARTITIONS))
         .config("spark.sql.adaptive.enabled", "true")
         # a window partition (one member's deliveries of one stream) is buffered whole: keep it in memory
         # instead of spilling from 4096 rows on (Spark's default)
         .config("spark.sql.windowExec.buffer.in.memory.threshold", "4000000")
         .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
         .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"]))
    b = b.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_quiet_log4j()}")
    if driver_memory:
        b = b.config("spark.driver.memory", driver_memory)
    if executor_memory:
        b = b.config("spark.executor.memory", executor_memory)
    for k, v in (conf or {}).items():
        b = b.config(k, str(v))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_session(spark=None, jvm: bool = True) -> None:
    """Stop ``spark`` (default: the active session) and, with ``jvm``, the driver JVM that PySpark started, so no
    Spark process outlives the caller's use of it (a later :func:`get_session` starts a new one)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    try:
        spark = spark or SparkSession.getActiveSession()
        if spark is not None:
            spark.stop()
    except Exception as e:  # noqa: BLE001 - the JVM is gone already (killed, or stopped by another user)
        log.debug("stopping the Spark session: %s", e)
    gw = SparkContext._gateway
    if not jvm or gw is None:
        return
    proc = getattr(gw, "proc", None)
    try:
        gw.shutdown()
    except Exception:  # noqa: BLE001 - the JVM may be gone already
        pass
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None:
        try:
            proc.terminate()
            proc.wait(timeout=20)
        except Exception:  # noqa: BLE001
            proc.kill()
            proc.wait(timeout=10)


_LOG4J = """status = error
# errors only; org.apache.spark configured explicitly: PySpark prints a banner when its shell level (that
# logger's, or WARN) differs from the root's
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration that keeps Spark's JVM to errors (no banners or INFO lines on the console)."""
    p = Path(tempfile.gettempdir()) / "jgpy-spark-log4j2.properties"
    if not p.is_file() or p.read_text() != _LOG4J:
        tmp = p.with_name(f".{p.name}.{os.getpid()}")
        tmp.write_text(_LOG4J)
        os.replace(tmp, p)
    return str(p)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A Spark standalone master + one worker on 127.0.0.1, started from the pyspark package; a context manager.

    >>> with StandaloneCluster(cores=2, memory="4g") as c:
    ...     spark = get_session(c.url)
    """

    MASTER = "org.apache.spark.deploy.master.Master"
    WORKER = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, cores: int = 2, memory: str = "4g", start_timeout: float = 90.0):
        _env()
        import pyspark
        self.home = Path(pyspark.__file__).parent
        self.cores, self.memory, self.start_timeout = cores, memory, start_timeout
        self.tmp = Path(tempfile.mkdtemp(prefix="jgpy-spark-"))
        self.port, self.ui_port, self.worker_ui_port = _free_port(), _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.started: list[str] = []

    def _daemon(self, action: str, cls: str, *args: str) -> None:
        env = dict(os.environ, SPARK_HOME=str(self.home), SPARK_PID_DIR=str(self.tmp / "pids"),
                   SPARK_LOG_DIR=str(self.tmp / "logs"), SPARK_WORKER_DIR=str(self.tmp / "work"),
                   SPARK_IDENT_STRING="jgpy")
        env.pop("SPARK_NO_DAEMONIZE", None)
        cmd = ["bash", str(self.home / "sbin" / "spark-daemon.sh"), action, cls, "1", *args]
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        if res.returncode != 0 and action == "start":
            raise RuntimeError(f"could not start {cls}: {res.stdout}{res.stderr}")

    def _wait(self, what: str, pred) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Spark {what} did not come up within {self.start_timeout:.0f} s; logs in {self.tmp / 'logs'}")

    def _port_open(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _worker_registered(self) -> bool:
        for p in (self.tmp / "logs").glob("*Worker*.out"):
            try:
                if "Successfully registered with master" in p.read_text(errors="replace"):
                    return True
            except OSError:
                pass
        return False

    def start(self) -> "StandaloneCluster":
        try:
            self._daemon("start", self.MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                         "--webui-port", str(self.ui_port))
            self.started.append(self.MASTER)
            self._wait("master", self._port_open)
            self._daemon("start", self.WORKER, "--host", "127.0.0.1", "--webui-port", str(self.worker_ui_port),
                         "--cores", str(self.cores), "--memory", self.memory, self.url)
            self.started.append(self.WORKER)
            self._wait("worker", self._worker_registered)
        except BaseException:
            self.stop()
            raise
        return self

    def pids(self) -> list[int]:
        out = []
        for p in (self.tmp / "pids").glob("*.pid"):
            try:
                out.append(int(p.read_text().strip()))
            except (OSError, ValueError):
                pass
        return out

    def stop(self) -> None:
        """Stop the worker, then the master (and kill them by their pid files if they linger)."""
        pids = self.pids()
        for cls in reversed(self.started):
            try:
                self._daemon("stop", cls)
            except Exception as e:  # noqa: BLE001
                log.warning("stopping %s: %s", cls, e)
        self.started.clear()
        deadline = time.monotonic() + 20
        for pid in pids:
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.2)
            if _alive(pid):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:                                     # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
