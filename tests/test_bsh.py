"""BSH: the jar's bsh.xml, unchanged, in mixed clusters both ways (Java's BSH needs BeanShell: Debian's
libbsh-java on its classpath); jgpy's BSH opens no port unless allow_remote_eval, and then only evaluates
bounded lines on loopback."""

from __future__ import annotations

import functools
import socket
import uuid

import pytest

from jgpy import Channel
from jgpy.testing.cluster import JavaMember, stock
from jgpy.testing.java import BSH_JAR, JavaNode, udp_props, unique_group
from tests.test_stack_interop import cluster_factory, exchange  # noqa: F401 - a fixture

class BshJavaMember(JavaMember):
    node_class = functools.partial(JavaNode, extra_classpath=(str(BSH_JAR),))


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ")] + ["PP"])
def test_bsh_xml_forms_mixed_clusters(cluster_factory, kinds):
    c = cluster_factory(kinds, config=stock("bsh.xml"), java_member=BshJavaMember)
    c.start()
    c.assert_agreement()
    exchange(c, 500, unicasts=50)


def test_bsh_opens_nothing_unless_told_and_then_evaluates_on_loopback(caplog):
    cluster = f"bsh-{uuid.uuid4().hex[:8]}"
    props = udp_props(*unique_group())
    with caplog.at_level("INFO", logger="jgpy.protocols.BSH"):
        ch = Channel(stock("bsh.xml"), "B1", props)
        try:
            ch.connect(cluster)
            bsh = ch.stack.find("BSH")
            assert bsh.srv_sock is None and bsh.port is None
        finally:
            ch.close()
    assert "never runs code sent over the network" in caplog.text
    ch = Channel(stock("bsh.xml").with_properties("BSH", allow_remote_eval="true"), "B2", props)
    try:
        ch.connect(cluster)
        bsh = ch.stack.find("BSH")
        assert bsh.srv_sock.getsockname()[0] == "127.0.0.1"
        with socket.create_connection(("127.0.0.1", bsh.port), timeout=5) as s, s.makefile("rb") as f:
            s.sendall(b"bsh_prot.NAME + '!'\n1/0\n")
            assert f.readline() == b"'BSH!'\n"
            assert f.readline().startswith(b"ZeroDivisionError")
            s.sendall(b"x" * (70 * 1024) + b"\n")                # too long a line ends the connection
            assert f.readline() == b""
    finally:
        ch.close()
