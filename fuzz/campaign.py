"""Fuzzing campaigns: ``python -m fuzz.campaign build|run`` (what ``make fuzz`` does) and :func:`run_campaign`
(the short run of ``tests/test_fuzz.py``).

* ``build``: a copy of ``jgpy`` in ``build/fuzz/native`` whose Cython core is compiled by clang with
  ``-fsanitize=address,fuzzer-no-link``: libFuzzer sees the coverage of the generated C and ASan checks
  every memory access it makes.
* ``run``: the seed corpus (:func:`fuzz.seeds.corpus`) is added to ``build/fuzz/corpus``, then ``--jobs``
  fuzzer processes (``fuzz/run.py``) share that corpus until ``--runs`` inputs were run in all. With
  ``--native`` they import the instrumented copy, with atheris' ``asan_with_fuzzer.so`` preloaded. A process
  that stops on a finding (a crash, an uncaught exception, a timeout, an out-of-memory) has its input saved
  to ``tests/fuzz_regressions/`` (each file there is replayed by ``tests/test_fuzz.py``) and is restarted
  for the runs it has left. The summary (inputs, exec/s, libFuzzer's cov/ft of the final corpus, findings)
  is printed and written to ``build/fuzz/last-run.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "fuzz"
NATIVE = BUILD / "native"
REGRESSIONS = ROOT / "tests" / "fuzz_regressions"
DRIVER = ROOT / "fuzz" / "run.py"
SANITIZE = "-fsanitize=address,fuzzer-no-link"
#: libFuzzer options of every run: a slow input (10 s) or a big allocation is a finding, like a crash
FUZZER_FLAGS = ["-max_len=16384", "-timeout=10", "-rss_limit_mb=3072", "-malloc_limit_mb=512",
                "-print_final_stats=1", "-reload=1"]
#: findings after which a campaign gives up (each one stops a fuzzer process, which is then restarted)
MAX_FINDINGS = 20


@dataclass
class JobResult:
    runs: int = 0
    exec_per_sec: int = 0
    findings: list = field(default_factory=list)
    rc: int = 0


@dataclass
class Summary:
    native: bool
    jobs: int
    runs: int = 0
    seconds: float = 0.0
    exec_per_sec: float = 0.0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    findings: list = field(default_factory=list)
    job_results: list = field(default_factory=list)


# ---- the instrumented build --------------------------------------------------------------------------------

def asan_runtime() -> Path:
    """atheris' ASan runtime with libFuzzer linked in (present when atheris was built from source with clang)."""
    import atheris

    return Path(atheris.path()) / "asan_with_fuzzer.so"


def build_native(python: str = sys.executable) -> Path:
    """Copy ``jgpy`` (Python files) to ``build/fuzz/native`` and compile its Cython core with clang and
    ``-fsanitize=address,fuzzer-no-link``; only what changed is rebuilt."""
    src = ROOT / "jgpy"
    dst = NATIVE / "jgpy"
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if path.is_dir() or "__pycache__" in rel.parts or path.suffix in (".so", ".c", ".html"):
            continue
        target = dst / rel
        if not target.exists() or target.stat().st_mtime < path.stat().st_mtime:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    env = dict(os.environ, CC="clang", CXX="clang++", LDSHARED="clang -shared", CFLAGS=f"{SANITIZE} -g",
               LDFLAGS=SANITIZE)
    subprocess.run([python, "setup.py", "-q", "build_ext", "-b", str(NATIVE), "-t", str(BUILD / "tmp")],
                   cwd=ROOT, env=env, check=True)
    return NATIVE


# ---- running ----------------------------------------------------------------------------------------------

def write_seeds(corpus: Path) -> int:
    """Add the seed corpus (named by content, so existing files stay); returns how many seeds there are."""
    from fuzz.seeds import corpus as seed_corpus

    corpus.mkdir(parents=True, exist_ok=True)
    seeds = seed_corpus()
    for data in seeds:
        path = corpus / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
    return len(seeds)


def _env(native: bool) -> dict:
    env = dict(os.environ)
    paths = [str(NATIVE)] if native else []
    env["PYTHONPATH"] = os.pathsep.join(paths + [str(ROOT)])
    if native:
        env["LD_PRELOAD"] = str(asan_runtime())
        # no symbolizing of the native stack of a finding: it can outlast libFuzzer's alarm, which then kills the
        # process before it saves the input (the Python traceback says where it happened)
        env["ASAN_OPTIONS"] = "detect_leaks=0:handle_abort=1:symbolize=0"
        env["PYTHONMALLOC"] = "malloc"          # every Python object in ASan's heap: overflows are seen
    return env


_STAT = re.compile(r"stat::(\w+):\s+(\d+)")
_PROGRESS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")


def _parse(output: str) -> tuple[dict, list[str], tuple | None]:
    stats = {k: int(v) for k, v in _STAT.findall(output)}
    artifacts = _ARTIFACT.findall(output)
    progress = _PROGRESS.findall(output)
    return stats, artifacts, (tuple(map(int, progress[-1])) if progress else None)


def save_finding(artifact: Path) -> Path:
    """Copy a finding to ``tests/fuzz_regressions/<target>-<sha1>.bin`` (replayed by tests/test_fuzz.py)."""
    from fuzz.targets import target_of

    data = artifact.read_bytes()
    REGRESSIONS.mkdir(parents=True, exist_ok=True)
    dest = REGRESSIONS / f"{target_of(data)}-{hashlib.sha1(data).hexdigest()[:16]}.bin"
    dest.write_bytes(data)
    return dest


def _fuzzer(corpus: Path, artifacts: Path, runs: int, seed: int, native: bool, max_time: int,
            python: str, log_path: Path) -> subprocess.Popen:
    args = [python, str(DRIVER), str(corpus), f"-runs={runs}", f"-seed={seed}", f"-artifact_prefix={artifacts}/",
            *FUZZER_FLAGS]
    if max_time:
        args.append(f"-max_total_time={max_time}")
    with open(log_path, "wb") as out:      # a file, not a pipe: nobody has to drain it while the others run
        return subprocess.Popen(args, cwd=ROOT, env=_env(native), stdout=out, stderr=subprocess.STDOUT)


def run_campaign(runs: int, jobs: int = 1, native: bool = False, corpus: Path | None = None, seed: int = 1,
                 max_time: int = 0, save: bool = True, python: str = sys.executable, log=None) -> Summary:
    """Run ``runs`` inputs in all over ``jobs`` processes sharing ``corpus`` (default build/fuzz/corpus).
    ``max_time`` (s) bounds each process; ``save`` copies findings to tests/fuzz_regressions."""
    corpus = corpus or BUILD / "corpus"
    artifacts = corpus.parent / "artifacts"
    logs = corpus.parent / "logs"
    artifacts.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    write_seeds(corpus)
    summary = Summary(native=native, jobs=jobs)
    left = [runs // jobs + (1 if j < runs % jobs else 0) for j in range(jobs)]
    results = [JobResult() for _ in range(jobs)]
    start = time.monotonic()
    procs: dict[int, tuple[subprocess.Popen, Path]] = {}
    started = 0
    while True:
        for j in range(jobs):
            if j not in procs and left[j] > 0 and len(summary.findings) < MAX_FINDINGS:
                log_path = logs / f"job{j}-{started}.log"
                procs[j] = (_fuzzer(corpus, artifacts, left[j], seed + 1000 * j + started, native, max_time, python,
                                    log_path), log_path)
                started += 1
        if not procs:
            break
        ended = [j for j, (p, _) in procs.items() if p.poll() is not None]
        if not ended:
            time.sleep(0.2)
            continue
        j = ended[0]
        proc, log_path = procs.pop(j)
        output = log_path.read_text(errors="replace")
        stats, found, progress = _parse(output)
        done = stats.get("number_of_executed_units") or (progress[0] if progress else 0)
        res = results[j]
        res.runs += done
        res.rc = proc.returncode
        res.exec_per_sec = stats.get("average_exec_per_sec", res.exec_per_sec)
        left[j] -= max(done, 1)
        for a in found:
            path = Path(a)
            saved = str(save_finding(path) if save else path) if path.exists() else a
            if saved not in summary.findings:          # a restarted process may find the same input again
                res.findings.append(saved)
                summary.findings.append(saved)
        if log is not None:
            log(f"job {j}: {done} runs, rc={proc.returncode}, findings={found}")
        if proc.returncode != 0 and not found:
            summary.findings.append(f"job {j} exited with {proc.returncode} without an artifact:\n{output[-3000:]}")
            left[j] = 0
        if max_time and time.monotonic() - start > max_time:
            left[j] = 0
    summary.seconds = time.monotonic() - start
    summary.runs = sum(r.runs for r in results)
    summary.exec_per_sec = summary.runs / summary.seconds if summary.seconds else 0.0
    summary.job_results = [asdict(r) for r in results]
    summary.cov, summary.ft, summary.corpus = measure_corpus(corpus, native, python)
    return summary


def measure_corpus(corpus: Path, native: bool, python: str = sys.executable) -> tuple[int, int, int]:
    """libFuzzer's ``cov``/``ft`` of a corpus (what loading it covers) and its size, from a run of 0 inputs."""
    out = subprocess.run([python, str(DRIVER), str(corpus), "-runs=0", *FUZZER_FLAGS], cwd=ROOT, env=_env(native),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace").stdout
    _stats, _found, progress = _parse(out)
    return (progress[1], progress[2], progress[3]) if progress else (0, 0, 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz.campaign")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="compile the instrumented copy of jgpy (build/fuzz/native)")
    run = sub.add_parser("run", help="run a campaign")
    run.add_argument("--runs", type=int, default=10_000_000)
    run.add_argument("--jobs", type=int, default=2)
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--native", action="store_true", help="fuzz the instrumented build (with ASan)")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        build_native()
        return 0
    if args.native and not asan_runtime().exists():
        print(f"{asan_runtime()} is missing: atheris must be built from source with clang (make fuzz-deps)",
              file=sys.stderr)
        return 2
    summary = run_campaign(args.runs, args.jobs, args.native, seed=args.seed, log=print)
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "last-run.json").write_text(json.dumps(asdict(summary), indent=2))
    print(f"fuzz: {summary.runs} inputs in {summary.seconds:.0f} s ({summary.exec_per_sec:.0f} exec/s, "
          f"{summary.jobs} jobs, native={summary.native}); final corpus: {summary.corpus} inputs, "
          f"cov {summary.cov}, ft {summary.ft}; findings: {len(summary.findings)}")
    for f in summary.findings:
        print("  finding:", f)
    return 1 if summary.findings else 0


if __name__ == "__main__":
    sys.exit(main())
