"""The diagnostics responder (2.12's TP.DiagnosticsHandler) and ``python -m jgpy probe``: Java and jgpy members
on one diagnostics group answer the same probe in the same text format; what strangers send cannot stop the
responder or make it answer faster than its limit."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid

import pytest

from jgpy import Channel
from jgpy.stack.diagnostics import MAX_RESPONSES_PER_S, parse_response, probe
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import udp_props, unique_group
from tests.conftest import require_java


def _config(addr: str, port: int):
    return stock("udp.xml").with_properties("UDP", enable_diagnostics="true", diagnostics_addr=addr,
                                            diagnostics_port=str(port))


@pytest.mark.interop
def test_java_and_jgpy_members_answer_one_probe_alike():
    require_java()
    diag_addr, diag_port = unique_group()
    cfg = _config(diag_addr, diag_port)
    props = udp_props(*unique_group())
    cluster = f"diag-{uuid.uuid4().hex[:8]}"
    members = [make_member("J", "J1", cfg, props), make_member("P", "P1", cfg, props)]
    try:
        for m in members:
            m.connect(cluster)
        assert wait_all(lambda: all(m.view_names() == ["J1", "P1"] for m in members), 30)
        answers = [parse_response(t) for _, t in probe(["jmx", "info"], diag_addr, diag_port, timeout=2.0)]
        by_member = {a["local_addr"].split()[0]: a for a in answers if "local_addr" in a}
        assert set(by_member) == {"J1", "P1"}, answers
        for name, a in by_member.items():
            assert a["cluster"] == cluster and "J1" in a["view"] and "P1" in a["view"], a
            assert "UNICAST=" in a["jmx"] and "NAKACK" in a["jmx"], a["jmx"][:300]
            assert a["physical_addr"].startswith("127.0.0.1:")
        assert by_member["J1"]["version"].startswith("2.12.2") and "jgpy" in by_member["P1"]["version"]
        # one protocol's attributes, as 2.12 picks them: jmx=PROTOCOL.attr,attr
        picked = [parse_response(t) for _, t in probe(["jmx=UNICAST.msgs_sent"], diag_addr, diag_port, timeout=1.5)]
        jgpy_jmx = next(a["jmx"] for a in picked if a.get("local_addr", "").startswith("P1"))
        assert jgpy_jmx.startswith("UNICAST={msgs_sent=") and "acks_sent" not in jgpy_jmx
        # the CLI prints every answer
        out = subprocess.run([sys.executable, "-m", "jgpy", "probe", "--addr", diag_addr, "--port", str(diag_port),
                              "--timeout", "1.5", "keys"], capture_output=True, text=True, timeout=60).stdout
        assert "keys=" in out and "responses" in out and "dump" in out
    finally:
        for m in members:
            m.close()


def test_strangers_cannot_stop_the_responder_or_speed_it_up():
    diag_addr, diag_port = unique_group()
    ch = Channel(_config(diag_addr, diag_port), "P1", udp_props(*unique_group()))
    try:
        ch.connect(f"diag-{uuid.uuid4().hex[:8]}")
        diag = ch.stack.transport.diagnostics
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            for data in (b"\xff\xfe" * 700, b"jmx " * 2000, bytes(range(256)), b"op=STABLE.gc invoke=X.y"):
                s.sendto(data, (diag_addr, diag_port))
            t0 = time.monotonic()
            for _ in range(400):                         # a flood of probes, faster than the answers allowed
                s.sendto(b"jmx info", (diag_addr, diag_port))
            assert wait_all(lambda: diag.counters["requests"] >= 150, 20), diag.counters   # (the socket may drop some)
            elapsed = time.monotonic() - t0
        finally:
            s.close()
        sent = diag.counters["responses"]
        assert sent <= MAX_RESPONSES_PER_S * (elapsed + 2) and diag.counters["responses_dropped"] > 0, diag.counters
        time.sleep(1.1)                                  # the next second answers again
        answers = probe(["info"], diag_addr, diag_port, timeout=1.0)
        assert any("local_addr=P1" in t for _, t in answers), answers
    finally:
        ch.close()
