"""The layer contracts of `make lint-imports` see the Cython modules: import-linter builds its graph from .py files
only, and scripts/importlinter_cython.py adds what it misses (the .pyx/.pxd modules, their imports and cimports, and
every import of a compiled module)."""

from __future__ import annotations

import logging
import sys
import textwrap

import pytest

from scripts.importlinter_cython import add_cython_imports
from tests.conftest import require_module


def test_the_graph_holds_the_cython_modules_and_their_imports():
    grimp = require_module("grimp", "pip install -r requirements-dev.txt")
    graph = grimp.build_graph("jgpy", cache_dir=None)
    assert "jgpy._core.jg212" not in graph.modules                  # what import-linter alone would check
    add_cython_imports(graph, {"jgpy"})
    edges = [("jgpy._core.jg212", "jgpy._core.wire"),               # cimport
             ("jgpy._core.jg212", "jgpy._core.address"),            # a parenthesised cimport over several lines
             ("jgpy._core.jg212", "jgpy._core.message"),            # from jgpy._core import message as ...
             ("jgpy._core.transport", "jgpy._core.bundler"),        # a .pyx cimporting from a .pxd
             ("jgpy._core.wire", "jgpy.errors"),                    # a .pyx importing a Python module
             ("jgpy.stack.stack", "jgpy._core.jg212")]              # a .py importing a compiled module
    for importer, imported in edges:
        assert graph.direct_import_exists(importer=importer, imported=imported), (importer, imported)
    assert not graph.direct_import_exists(importer="jgpy._core.wire", imported="jgpy._core.jg212")


@pytest.fixture
def loggers_kept():
    """import-linter's CLI configures logging with dictConfig, which disables every logger that exists (jgpy's
    among them) for the rest of the process: undone after the test."""
    before = {name: lg.disabled for name, lg in logging.root.manager.loggerDict.items()
              if isinstance(lg, logging.Logger)}
    yield
    for name, disabled in before.items():
        logging.getLogger(name).disabled = disabled


def test_an_import_in_a_pyx_breaks_a_contract(tmp_path, monkeypatch, loggers_kept):
    cli = require_module("importlinter.cli", "pip install -r requirements-dev.txt")
    pkg = tmp_path / "layered"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "top.py").write_text("from layered.core.fast import speed\n")
    fast = pkg / "core" / "fast.pyx"
    fast.write_text(textwrap.dedent("""\
        # cython: language_level=3
        from libc.stdint cimport int64_t
        from layered.top import (   # the core reaching up
            thing,
        )
        """))
    config = tmp_path / "contracts.ini"
    config.write_text(textwrap.dedent("""\
        [importlinter]
        root_package = layered
        contract_types =
            cython_forbidden: scripts.importlinter_cython.CythonForbiddenContract

        [importlinter:contract:core]
        name = the core imports nothing above it
        type = cython_forbidden
        source_modules = layered.core
        forbidden_modules = layered.top
        """))
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])       # lint_imports adds the cwd too: undone

    def lint() -> int:                    # debug mode: an error in the linter raises instead of returning 1
        return cli.lint_imports(config_filename=str(config), no_cache=True, no_logo=True, is_debug_mode=True)

    assert lint() == 1
    fast.write_text("from libc.stdint cimport int64_t\n")
    assert lint() == 0
