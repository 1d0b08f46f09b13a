"""The guarantee checker: PySpark jobs over the delivery journals of a run (``python -m jgpy check RUN_DIR``).

>>> res = check_run("journals/run=demo")          # local[*]; check_run(..., master="spark://host:7077")
>>> res.ok, res.verdict, res.report
(True, 'PASS', PosixPath('journals/run=demo/check/report.md'))

See :mod:`jgpy.analysis.checks` for what is checked, :mod:`jgpy.journal` for the journals,
:mod:`jgpy.analysis.synth` for synthetic journals.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("jgpy.analysis")

__all__ = ["CheckError", "CheckResult", "Finding", "JournalError", "Options", "check_run"]


def __getattr__(name: str):
    # the checker's modules need the analysis extra (pyarrow, PySpark): imported on first use, so that importing
    # jgpy.analysis.cli (python -m jgpy builds its parser from it) does not need the extra
    if name in ("Finding", "Options"):
        from jgpy.analysis import checks
        return getattr(checks, name)
    if name == "JournalError":
        from jgpy.journal import JournalError
        return JournalError
    raise AttributeError(f"module 'jgpy.analysis' has no attribute {name!r}")


class CheckError(Exception):
    """The check itself failed (Spark could not run it); the message says why, without a Java stack trace."""


@dataclass
class CheckResult:
    run_dir: Path
    master: str
    findings: list[Finding]
    stats: dict[str, Any]
    rows: int
    seconds: float
    total_order: bool
    flush: bool
    throughput: list = field(default_factory=list)
    view_marks: list = field(default_factory=list)
    report: Path | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def verdict(self) -> str:
        return "FAIL" if self.errors else "PASS with warnings" if self.warnings else "PASS"

    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}


def check_run(run_dir: str | Path, master: str | None = None, *, out_dir: str | Path | None = None,
              options: Options | None = None, spark=None, report: bool = True) -> CheckResult:
    """Check the journals in ``run_dir`` and write the report (default ``run_dir/check/``).

    Raises :class:`JournalError` for bad input (naming the file) and :class:`CheckError` if Spark fails.
    ``spark``: an existing SparkSession to use (else one is created for ``master``, default ``local[*]``).
    """
    from jgpy.analysis.load import discover
    from jgpy.journal import JournalError

    t0 = time.perf_counter()
    run = discover(run_dir)
    if spark is None:
        from jgpy.analysis.spark import get_session, spark_available
        why = spark_available()
        if why:
            raise CheckError(why)
        spark = get_session(master)
    from jgpy.analysis.checks import Checker
    try:
        ck = Checker(spark, run, options).run()
    except JournalError:
        raise
    except Exception as e:  # noqa: BLE001 - Py4J/Spark errors: one readable line, not a Java trace
        raise CheckError(_spark_message(e)) from None
    res = CheckResult(Path(run_dir), spark.sparkContext.master, ck.findings, ck.stats, run.rows,
                      time.perf_counter() - t0, ck.total_order, ck.flush, ck.throughput, ck.view_marks)
    if report:
        from jgpy.analysis.report import write_report
        res.report = write_report(res, Path(out_dir) if out_dir else Path(run_dir) / "check")
    res.seconds = time.perf_counter() - t0
    return res


def _spark_message(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "...", "Traceback", "py4j", "JVM stacktrace")):
            text = line
            break
    if len(text) > 500:
        text = text[:500] + " ..."
    return f"Spark failed: {type(e).__name__}: {text}"
