"""Shared fixtures: the real Java 2.12.2 peer and Spark, and :func:`require` for anything a test needs: skipped
on a user's machine without it (with the install hint), a failure with ``CI=true``."""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from types import ModuleType

import pytest

from jgpy.testing.java import JavaNode, java_unavailable_reason, udp_props, unique_group

IN_CI = os.environ.get("CI", "").lower() == "true"


def run_threads(target, n: int, timeout: float = 60.0) -> None:
    """Run ``target(0)`` ... ``target(n - 1)`` on threads of their own and wait (bounded) until they end."""
    threads = [threading.Thread(target=target, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout)


def require(missing: str | None) -> None:
    """Nothing when ``missing`` is None. Otherwise (``missing`` says what is missing and how to install it) the
    test is skipped on a user's machine and fails with ``CI=true``: CI runs every test or says why not. Also
    at a module's top level (the whole module is skipped, or its collection fails)."""
    if missing is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true and {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def require_module(name: str, install: str) -> ModuleType:
    """The module ``name``, imported; if it is not installed, :func:`require` with the ``install`` hint."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        require(f"{name} is not installed ({e}): {install}")


def require_java() -> None:
    reason = java_unavailable_reason()
    require(f"the Java 2.12.2 peer is not usable: {reason}" if reason else None)


@pytest.fixture(scope="session")
def java_codec():
    """One JVM for the encode/decode golden tests of the whole session (no channel connected)."""
    require_java()
    node = JavaNode(name="codec")
    try:
        yield node
    finally:
        node.close()


@pytest.fixture
def java_nodes():
    """Factory of Java nodes; every node started through it is closed (and reaped) after the test."""
    require_java()
    started: list[JavaNode] = []

    def start(name: str, **kw) -> JavaNode:
        node = JavaNode(name=name, **kw)
        started.append(node)
        return node

    try:
        yield start
    finally:
        for node in started:
            node.close()


@pytest.fixture
def udp_group():
    """A private multicast group and cluster name: (props for the jar's udp.xml, cluster name, (addr, port))."""
    addr, port = unique_group()
    return udp_props(addr, port), f"jgpy-{uuid.uuid4().hex[:10]}", (addr, port)


# ---- measured figures (suspicion-to-view times, merge times, peak RSS ...) --------------------------
# Tests that measure something record it with the ``figures`` fixture; the figures are printed in the
# terminal summary and written to build/test-figures.json, so a run's numbers can be quoted as taken.

_FIGURES: list[tuple[str, str, float, str]] = []


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (2 cores) for every test that needs one; stopped, with its JVM, at the end."""
    from jgpy.analysis.spark import get_session, spark_available, stop_session
    require(spark_available())
    s = get_session("local[2]", shuffle_partitions=4)
    yield s
    stop_session(s)


@pytest.fixture
def figures(request):
    """``figures(name, value, unit="")``: record a measured figure for this test."""
    def record(name: str, value: float, unit: str = "") -> None:
        _FIGURES.append((request.node.nodeid, name, float(value), unit))
    return record


def pytest_terminal_summary(terminalreporter):
    if not _FIGURES:
        return
    import json
    from pathlib import Path

    tr = terminalreporter
    tr.section("measured figures")
    for nodeid, name, value, unit in _FIGURES:
        tr.write_line(f"{nodeid.split('::', 1)[-1]}: {name} = {value:.6g} {unit}".rstrip())
    out = Path(__file__).resolve().parents[1] / "build" / "test-figures.json"
    try:
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps([{"test": n, "name": k, "value": v, "unit": u} for n, k, v, u in _FIGURES],
                                  indent=1))
    except OSError:
        pass
