"""The atheris (libFuzzer) driver of :func:`fuzz.targets.one_input`: ``python fuzz/run.py [libFuzzer flags]
[corpus dirs]``.

The Python code of the targets and of :mod:`jgpy.javaser` is instrumented for coverage here; the Cython core
has coverage too when the ``jgpy`` that is imported was compiled with ``-fsanitize=fuzzer-no-link`` (``make
fuzz`` builds such a copy and preloads atheris' ASan runtime with libFuzzer in it). Usually started by
:mod:`fuzz.campaign`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))       # after PYTHONPATH: an instrumented jgpy there wins over the worktree's

with atheris.instrument_imports(include=["fuzz", "jgpy.javaser"]):
    from fuzz import targets


def main() -> None:
    atheris.Setup(sys.argv, targets.one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
