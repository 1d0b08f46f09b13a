"""The fuzzers inside the suite: a short deterministic atheris campaign over every decode entry point, and the
replay of every input a campaign ever found (``tests/fuzz_regressions/``). ``make fuzz`` runs the long one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "tests" / "fuzz_regressions"
SHORT_RUNS = 100_000


def _atheris() -> None:
    """atheris is a test dependency (requirements-dev.txt): missing, it fails the test with CI=true, else skips."""
    try:
        import atheris  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but atheris is not installed (pip install -r requirements-dev.txt)")
        pytest.skip("atheris is not installed (pip install -r requirements-dev.txt)")


@pytest.mark.processes
@pytest.mark.slow
def test_short_fuzz_campaign(tmp_path):
    """10^5 inputs from the seed corpus, seed 1, one process: nothing but success or the expected decode errors.
    (Coverage feedback from the Python code here; ``make fuzz`` adds the Cython core's, under ASan.)"""
    _atheris()
    from fuzz.campaign import run_campaign

    summary = run_campaign(SHORT_RUNS, jobs=1, native=False, corpus=tmp_path / "corpus", seed=1, max_time=300,
                           save=False)
    found = [(f, Path(f).read_bytes().hex()[:400]) if Path(f).exists() else f for f in summary.findings]
    assert not found, f"the fuzzer found inputs that break a decoder: {found}"
    assert summary.runs == SHORT_RUNS, summary
    assert summary.cov > 0 and summary.corpus > 0


REPLAY = """
import sys
from pathlib import Path
from fuzz.targets import one_input
from fuzz.seeds import corpus

for path in sys.argv[1:]:
    print(path, flush=True)                     # the last name printed is the one a crash happened on
    one_input(Path(path).read_bytes())
for data in corpus():
    one_input(data)
print("ok")
"""


@pytest.mark.processes
def test_fuzz_regressions_replay():
    """Every input a campaign found (and the seed corpus) through every target again, in a subprocess: a crash
    fails this test, and names its input."""
    files = sorted(str(p) for p in REGRESSIONS.glob("*.bin"))
    assert files, f"{REGRESSIONS} has no regression inputs"
    proc = subprocess.run([sys.executable, "-c", REPLAY, *files], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    last = proc.stdout.splitlines()[-1:] or ["(none)"]
    assert proc.returncode == 0 and last == ["ok"], (f"replay failed (rc {proc.returncode}) at {last[0]}:\n"
                                                     f"{proc.stderr[-3000:]}")
