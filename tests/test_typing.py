"""The public API as a type checker sees it: the README's example and a misusing script, checked by mypy through
the .pyi stubs of the Cython types (the public modules themselves are checked strictly by `make typecheck`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import require_module

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory):
    """Run mypy (in this process) on a script as a user's project would: this tree's jgpy is read for its types but
    not judged (as an installed package is), the script is checked with ``flags``. Returns (exit code, output)."""
    api = require_module("mypy.api", "pip install -r requirements-dev.txt")
    work = tmp_path_factory.mktemp("mypy")
    config = work / "mypy.ini"
    config.write_text(f"[mypy]\nmypy_path = {ROOT}\nfollow_imports = silent\nshow_error_codes = true\n")

    def run(source: str, *flags: str) -> tuple[int, str]:
        script = work / "user_script.py"
        script.write_text(source)
        out, err, code = api.run(["--config-file", str(config), "--cache-dir", str(work / "cache"),
                                  "--no-error-summary", *flags, str(script)])
        return code, out + err
    return run


def readme_member_example() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    member = [b for b in blocks if b.startswith("# member.py")]
    assert len(member) == 1, "the README's member example (a ```python block starting with '# member.py') is gone"
    return member[0]


def test_readme_member_example_type_checks(mypy_run):
    code, out = mypy_run(readme_member_example(), "--check-untyped-defs")
    assert code == 0, out


def test_misuse_of_the_public_api_is_reported(mypy_run):
    """Types come through (the stubs, the typed Receiver and Channel): each misuse below is an error, at its line."""
    script = '''\
from jgpy import Channel, Message, Receiver, View, UUID
from jgpy.headers import UnicastHeader

class R(Receiver):
    def view_accepted(self, view: int) -> None: ...                     # 5 override

ch = Channel("udp.xml")
ch.up(None)                                                           # 8 attr-defined
ch.send(None, 42)                                                     # 9 arg-type
size: int = Message(None, b"x").buffer                                # 10 assignment
print(ch.view.members)                                                # 11 union-attr
UnicastHeader(seqno="1")                                              # 12 arg-type
u: UUID = UUID.random()
u.msb = 3                                                             # 14 misc (read-only)
View(None, [])                                                        # 15 arg-type
'''
    code, out = mypy_run(script, "--strict")
    found = {(int(line), kind) for line, kind in re.findall(r"user_script\.py:(\d+): error: .*\[([a-z-]+)\]", out)}
    expected = {(5, "override"), (8, "attr-defined"), (9, "arg-type"), (10, "assignment"), (11, "union-attr"),
                (12, "arg-type"), (14, "misc"), (15, "arg-type")}
    assert code == 1 and expected <= found, out
