"""import-linter contracts that see Cython modules (``make lint-imports``; contracts in pyproject.toml).

import-linter's graph (grimp) is built from ``.py`` files only: it knows nothing of ``jgpy/_core/*.pyx`` and drops
every import of a compiled module (``from jgpy._core.jg212 import DIALECT`` in a protocol leaves no edge). So a
contract on the core, or on who imports the dialect, would pass whatever the code does. The contract types here
first add what grimp left out to their copy of the graph: a module per ``.pyx``/``.pxd``, their ``import`` and
``cimport`` statements, and the imports of compiled modules in the ``.py`` files; then they check as the built-in
type does (ignore_imports and indirect chains included).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

from grimp import ImportGraph
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.contract import ContractCheck

# `from a.b cimport x`, `from a.b import (x, y`, `import a.b`, `cimport a.b as c`: the statement's first line
_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+(.*)|c?import\s+([\w.][\w.\s,]*?)(?:\s+as\s+\w+)?)\s*$")


def _package_dir(root: str) -> Path:
    spec = importlib.util.find_spec(root)           # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{root} is not a package on sys.path")
    return Path(list(spec.submodule_search_locations)[0])


def _module_name(root: str, base: Path, path: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root, *parts])


def _statements(text: str) -> list[tuple[int, str]]:
    """Logical lines of Cython source (a parenthesised name list joined to its first line), with line numbers."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, line = i + 1, lines[i].split("#", 1)[0]
        while line.count("(") > line.count(")") and i + 1 < len(lines):
            i += 1
            line += " " + lines[i].split("#", 1)[0]
        out.append((start, line))
        i += 1
    return out


def _cython_imports(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, module, imported names) of every import/cimport statement."""
    found = []
    for number, line in _statements(text):
        m = _CYTHON_IMPORT.match(line)
        if m is None:
            continue
        if m.group(1):
            names = [n.split(" as ")[0].strip() for n in m.group(2).strip("() ").split(",")]
            found.append((number, m.group(1), [n for n in names if n]))
        else:
            for module in m.group(3).split(","):
                found.append((number, module.strip(), []))
    return found


def _python_imports(path: Path, module: str) -> list[tuple[int, str, list[str]]]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base, [a.name for a in node.names]))
    return found


def add_cython_imports(graph: ImportGraph, roots: set[str]) -> None:
    """Add the compiled modules of ``roots`` and the imports grimp could not see to ``graph``."""
    compiled: dict[str, list[Path]] = {}
    python: dict[str, Path] = {}
    for root in roots:
        base = _package_dir(root)
        for path in sorted(base.rglob("*")):
            if path.suffix in (".pyx", ".pxd"):
                compiled.setdefault(_module_name(root, base, path), []).append(path)
            elif path.suffix == ".py":
                python[_module_name(root, base, path)] = path
    for module in compiled:
        if module not in graph.modules:
            graph.add_module(module)

    def add(importer: str, number: int, target: str, names: list[str], source: Path) -> None:
        candidates = [f"{target}.{n}" for n in names] + [target]
        for imported in candidates:
            if imported == importer or imported.split(".")[0] not in roots:
                continue
            if imported in compiled or (imported in graph.modules and importer in compiled):
                graph.add_import(importer=importer, imported=imported, line_number=number,
                                 line_contents=source.read_text().splitlines()[number - 1].strip())
                if imported != target:       # `from pkg import submodule`: not the package itself
                    return

    for importer, paths in compiled.items():
        for path in paths:
            for number, target, names in _cython_imports(path.read_text()):
                add(importer, number, target, names, path)
    for importer, path in python.items():
        for number, target, names in _python_imports(path, importer):
            if target in compiled or any(f"{target}.{n}" in compiled for n in names):
                add(importer, number, target, names, path)


class CythonForbiddenContract(ForbiddenContract):
    """The ``forbidden`` contract on a graph that includes the Cython modules."""

    type_name = "cython_forbidden"

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        roots = {m.split(".")[0] for m in graph.modules}
        add_cython_imports(graph, roots)
        return super().check(graph, verbose)
