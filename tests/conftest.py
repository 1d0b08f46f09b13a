"""Shared fixtures: the real Java 2.12.2 peer (skipped on a user's machine without it, a failure in CI)."""

from __future__ import annotations

import os
import uuid

import pytest

from jgpy.testing.java import JavaNode, java_unavailable_reason, udp_props, unique_group

IN_CI = os.environ.get("CI", "").lower() == "true"


def require_java() -> None:
    reason = java_unavailable_reason()
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true and the Java 2.12.2 peer is not usable: {reason}", pytrace=False)
        pytest.skip(f"Java peer not available: {reason}")


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
