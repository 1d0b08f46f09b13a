"""Shared fixtures: the real Java 2.12.2 peer and Spark, and :func:`require` for anything a test needs: skipped
on a user's machine without it (with the install hint), a failure with ``CI=true``.

Test tiers (markers registered in pyproject.toml; ``make test`` runs them all, ``make test-quick`` the unit tier):
``interop`` needs the Java peer, ``spark`` needs PySpark, ``processes`` starts processes (members, the CLI, a
compiler), ``slow`` takes long; ``unit`` is everything else and is added here. A test gets ``interop`` and
``spark`` from its fixtures (:data:`TIER_FIXTURES`) or from a mark of its own; a unit test that reaches the Java
peer, Spark or a process anyway fails and says which mark it needs, so no test hides in the wrong tier.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import threading
import uuid
from types import ModuleType

import pytest

from jgpy.testing.java import JavaNode, java_unavailable_reason, udp_props, unique_group

IN_CI = os.environ.get("CI", "").lower() == "true"
_in_unit_test = threading.local()          # .active while a unit-tier test runs (see the test tiers below)


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
    if getattr(_in_unit_test, "active", False):     # the unit tier's needs are all in requirements-dev.txt
        pytest.fail(f"a unit test needs what is missing: {missing}", pytrace=False)
    if IN_CI:
        pytest.fail(f"CI=true and {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def require_module(name: str, install: str) -> ModuleType:
    """The module ``name``, imported; if it is not installed, :func:`require` with the ``install`` hint."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        require(f"{name} is not installed ({e}): {install}")


# ---- test tiers -------------------------------------------------------------------------------------------

TIERS = ("interop", "spark", "processes", "slow")
#: fixtures that put a test in a tier (their dependants included: pytest lists a test's fixtures transitively)
TIER_FIXTURES = {"java_codec": "interop", "java_nodes": "interop", "spark": "spark"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture in item.fixturenames:
            tier = TIER_FIXTURES.get(fixture)
            if tier is not None and item.get_closest_marker(tier) is None:
                item.add_marker(tier)
        if item.get_closest_marker("unit") is not None:
            raise pytest.UsageError(f"{item.nodeid}: `unit` is not a mark to set: it is what a test without "
                                    f"{', '.join(TIERS)} is")
        if not any(item.get_closest_marker(t) for t in TIERS):
            item.add_marker("unit")


def _unit_violation(what: str, mark: str) -> None:
    pytest.fail(f"a unit test may not {what}: mark it @pytest.mark.{mark} (see tests/conftest.py, test tiers)",
                pytrace=False)


@pytest.fixture(autouse=True)
def _unit_tier_guard(request, monkeypatch):
    """In a unit test, starting a process (a member, Spark's JVM, a compiler) or needing the Java peer or anything
    missing fails the test."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    real_popen = subprocess.Popen

    class NoProcesses(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *a, **kw):
            _unit_violation(f"start a process ({args!r})", "processes")

    monkeypatch.setattr(subprocess, "Popen", NoProcesses)
    _in_unit_test.active = True
    try:
        yield
    finally:
        _in_unit_test.active = False


def require_java() -> None:
    if getattr(_in_unit_test, "active", False):
        _unit_violation("need the Java peer", "interop")
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
