"""The sdist and the manylinux2014 wheel as a user gets them.

Built once for this module by ``scripts/build_wheel.py`` (what ``make wheel`` runs): the sdist, then the wheel
from it in an isolated environment holding only the sdist's declared build dependencies, compiled by Zig's
clang for glibc 2.17 with both cores, checked and tagged by auditwheel. The wheel is then installed with plain
pip into a fresh venv and run from a directory outside the checkout (so the in-place build cannot be picked up):
``python -m jgpy --version``, two ``jgpy chat`` members exchanging a message, ``python -m jgpy check`` naming
the extra it needs.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import jgpy
from jgpy.testing.java import udp_props, unique_group
from tests.chat_driver import LineProcess

ROOT = Path(__file__).resolve().parents[1]
ARCH = platform.machine()
MODULES = sorted(p.stem for p in (ROOT / "jgpy" / "_core").glob("*.pyx"))

pytestmark = [pytest.mark.timeout(1200), pytest.mark.processes, pytest.mark.slow]


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return res


def _glibc_versions(auditwheel_show: str) -> set[tuple[int, ...]]:
    return {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", auditwheel_show)}


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """One build of the sdist and the wheel for the whole module (the wheel tests run on one xdist worker)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    t0 = time.monotonic()
    log = _run([sys.executable, ROOT / "scripts" / "build_wheel.py", "--out", out, "--jobs", "2"], cwd=ROOT,
               timeout=1100).stdout
    seconds = time.monotonic() - t0
    (sdist,) = out.glob("jgpy-*.tar.gz")
    (wheel,) = out.glob("jgpy-*.whl")
    return SimpleNamespace(sdist=sdist, wheel=wheel, seconds=seconds, log=log)


@pytest.fixture(scope="module")
def user_venv(dist, tmp_path_factory):
    """A fresh venv with the wheel installed by plain pip (its declared dependencies only), and a directory
    outside the checkout to run it from."""
    base = tmp_path_factory.mktemp("user")
    venv, work = base / "venv", base / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "venv", venv], env=env, timeout=300)
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", dist.wheel], cwd=work, env=env, timeout=300)
    return SimpleNamespace(py=py, bin=venv / "bin", work=work, env=env)


def test_the_wheel_keeps_to_manylinux2014(dist, figures):
    figures("sdist + wheel build (2 jobs) and auditwheel", dist.seconds, "s")
    cp = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    assert dist.wheel.name == f"jgpy-{jgpy.__version__}-{cp}-{cp}-manylinux2014_{ARCH}.manylinux_2_17_{ARCH}.whl"
    show = _run([Path(sys.executable).parent / "auditwheel", "show", dist.wheel]).stdout
    assert f'consistent with the following platform tag:\n"manylinux_2_17_{ARCH}"' in show, show
    versions = _glibc_versions(show)
    assert versions and max(versions) <= (2, 17), show          # the glibc floor: nothing newer than 2.17
    names = zipfile.ZipFile(dist.wheel).namelist()
    for mod in MODULES:
        assert any(re.fullmatch(rf"jgpy/_core/{mod}\.cpython-\d+-{ARCH}-linux-gnu\.so", n) for n in names), mod
        assert f"jgpy/_core/{mod}.pyx" in names
    assert "jgpy/conf/udp.xml" in names and "jgpy/py.typed" in names
    stubs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "jgpy" / "_core").glob("*.pyi"))
    assert stubs and set(stubs) <= set(names)                  # the types of the public Cython modules
    assert not [n for n in names if n.endswith(".c")]


def test_dependencies_are_declared_exactly(dist):
    """A channel needs nothing outside the standard library: every Requires-Dist belongs to an extra."""
    with zipfile.ZipFile(dist.wheel) as zf:
        meta = zf.read(f"jgpy-{jgpy.__version__}.dist-info/METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and all("extra ==" in r for r in requires), requires
    extras = {r.split("extra ==")[1].strip().strip("'\""): r.split(";")[0].strip() for r in requires}
    assert set(extras) == {"journal", "analysis", "security", "jms"}
    analysis = {r.split(";")[0].strip() for r in requires if "analysis" in r}
    assert {"pyspark", "pyarrow", "pandas<3", "matplotlib", "numpy"} <= analysis, analysis
    security = {r.split(";")[0].strip() for r in requires if "security" in r}
    assert {"cryptography", "pyjks"} <= security, security


def test_the_sdist_holds_the_sources(dist):
    with tarfile.open(dist.sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "scripts/build_wheel.py"} <= names
    generated = {"headers.pyx", "headers.pxd", "headers.pyi", "_codecs212.pxi"}   # from the dialect spec at build
    for mod in MODULES:
        assert (f"jgpy/_core/{mod}.pyx" in names) != (f"{mod}.pyx" in generated), mod
        assert f"jgpy/_core/{mod}.c" not in names                    # generated at build time (Cython)
    assert {"jgpy/_core/spec212.py", "jgpy/_core/wirespec.py", "jgpy/_core/codegen.py"} <= names
    assert not {f"jgpy/_core/{g}" for g in generated} & names
    assert not [n for n in names if n.endswith(".so")]
    # the wheel was built from this sdist in an isolated environment: it builds from source with its declared
    # build dependencies (pyproject.toml) and nothing else of this venv
    (cmd,) = [line for line in dist.log.splitlines() if line.startswith("+ ") and " -m build --wheel " in line]
    assert f" --wheel {dist.sdist} " in cmd and "--no-isolation" not in cmd, cmd


def test_the_installed_wheel_runs_from_anywhere(user_venv):
    u = user_venv
    listed = json.loads(_run([u.py, "-m", "pip", "list", "--format=json"], env=u.env).stdout)
    assert {p["name"].lower() for p in listed} <= {"jgpy", "pip", "setuptools"}, listed    # nothing undeclared
    out = _run([u.py, "-m", "jgpy", "--version"], cwd=u.work, env=u.env).stdout.strip()
    assert out == f"jgpy {jgpy.__version__} (JGroups 2.12.2.Final wire format)"
    probe = (
        "import importlib.util, jgpy\n"
        "from jgpy import Channel, DIALECT, Message, UUID\n"
        "from jgpy.headers import NakAckHeader\n"
        "assert 'site-packages' in jgpy.__file__, jgpy.__file__\n"
        "assert importlib.util.find_spec('numpy') is None\n"
        "m = Message(None, b'hi', UUID(1, 2)); m.put_header(15, NakAckHeader.msg(1))\n"
        "dg = DIALECT.decode_datagram(DIALECT.encode_message(m))\n"
        "assert dg.messages[0].buffer == b'hi' and dg.messages[0].get_header(15).seqno == 1\n"
        "print(Channel.__module__)\n"
    )
    assert _run([u.py, "-c", probe], cwd=u.work, env=u.env).stdout.strip() == "jgpy.channel"


def test_the_installed_wheel_checks_for_its_extra(user_venv):
    res = subprocess.run([str(user_venv.py), "-m", "jgpy", "check", str(user_venv.work)], cwd=user_venv.work,
                         env=user_venv.env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout.strip() == ("error: python -m jgpy check needs the analysis extra (missing: pyspark, pyarrow, "
                                  "numpy): pip install 'jgpy[analysis]'"), res.stdout + res.stderr


def test_two_installed_chat_members_exchange_a_message(user_venv, tmp_path):
    """Two members of the installed console script ``jgpy chat``: A on the Java jar's udp.xml when the jar is
    installed, B on the udp.xml shipped in the wheel (its jar does not exist: as on a server without Java)."""
    u = user_venv
    addr, port = unique_group()
    cluster = f"wheel-{os.getpid()}-{port}"
    opts = ["--cluster", cluster, *(f"-D{k}={v}" for k, v in udp_props(addr, port).items())]
    env_b = {**u.env, "JGPY_JGROUPS_JAR": str(tmp_path / "no-java-here.jar")}
    with LineProcess([u.bin / "jgpy", "chat", "--name", "A", *opts], cwd=str(u.work), env=u.env) as a:
        a.expect(r"^\*\* view: \[A\|0\]", 90)
        with LineProcess([u.bin / "jgpy", "chat", "--name", "B", *opts], cwd=str(u.work), env=env_b) as b:
            b.expect(r"^\*\* view: \[A\|\d+\] .*\[A, B\]$", 90)
            a.expect(r"^\*\* view: \[A\|\d+\] .*\[A, B\]$", 30)
            a.type("hello from A")
            b.expect(r"^\[A\]: hello from A$", 30)
            b.type("quit")
            assert b.finish(60) == 0, b.transcript
        a.expect(r"^\*\* view: \[A\|\d+\] .*\[A\]$", 60)
        assert a.finish(60) == 0, a.transcript


def test_cibuildwheel_config_builds_cpython_310_to_313_for_x86_64_and_aarch64():
    """The configuration a hosted CI with docker runs (cibuildwheel itself needs docker: not run here)."""
    cibuildwheel = Path(sys.executable).parent / "cibuildwheel"
    ids = _run([cibuildwheel, "--print-build-identifiers", "--platform", "linux"], cwd=ROOT).stdout.split()
    assert ids == [f"cp3{v}-manylinux_{arch}" for arch in ("x86_64", "aarch64") for v in (10, 11, 12, 13)]
    linux = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cibuildwheel"]["linux"]
    import cibuildwheel as cibw
    pinned = (Path(cibw.__file__).parent / "resources" / "pinned_docker_images.cfg").read_text()
    for arch in ("x86_64", "aarch64"):
        assert linux[f"manylinux-{arch}-image"] == "manylinux2014"          # glibc 2.17, as make wheel
        assert f"quay.io/pypa/manylinux2014_{arch}@" in pinned
