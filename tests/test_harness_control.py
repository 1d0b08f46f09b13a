"""The member harnesses (the Java JgpyNode and ``python -m jgpy node``) run control commands at once.

A partition or loss injected with ``discard`` while a long command runs (a ``send`` blocked on flow control, in
a soak) must take effect now: queued behind the send, it left one side of a "partition" listening for seconds
(an asymmetric partition, which 2.12's UNICAST turns into duplicates). Ordinary commands still run one at a
time, in order.
"""

from __future__ import annotations

import threading
import time

import pytest

from jgpy.testing.cluster import diagnosis, stock
from jgpy.testing.java import JavaNode, PyNode, udp_props, unique_group
from tests.conftest import require_java

pytestmark = [pytest.mark.timeout(180), pytest.mark.interop, pytest.mark.processes]

#: enough 1-byte multicasts that sending them takes seconds on either side
LONG_SEND = 1_500_000


@pytest.mark.parametrize("kind", ["java", "jgpy"])
def test_discard_overtakes_a_running_send_and_commands_stay_in_order(kind, tmp_path):
    if kind == "java":
        require_java()
    config = tmp_path / "discard.xml"
    config.write_text(stock().insert("DISCARD", {}, after="UDP").to_xml())
    node = (JavaNode if kind == "java" else PyNode)(name=f"C{kind}")
    try:
        node.connect(str(config), f"ctl-{kind}-{time.monotonic_ns()}", udp_props(*unique_group()), receive="count",
                     timeout=120)
        done = threading.Event()
        result: dict = {}

        def long_send():
            try:
                result["send"] = node.send(payload=b"x", count=LONG_SEND, timeout=150)
            finally:
                done.set()

        sender = threading.Thread(target=long_send, daemon=True)
        sender.start()
        time.sleep(0.5)
        assert not done.is_set(), "the send finished before the discard could overtake it: raise LONG_SEND"
        t0 = time.monotonic()
        node.call("discard", timeout=30, up=0.0, down=0.0)
        took = time.monotonic() - t0
        assert not done.is_set(), f"discard returned only after the send ({took:.1f} s)"
        assert done.wait(150) and "send" in result
        # an ordinary command queued behind another runs after it: stats sees every message sent
        assert node.call("stats")["sent"] >= LONG_SEND
    finally:
        node.close()


def test_diagnosis_names_the_view_and_the_protocols_of_a_live_node_and_of_a_dead_one():
    """What a failed wait in a crash test reports of each survivor (``kill_mid_stream``): its view and its
    membership and delivery protocols' statistics, cut short; a node that cannot answer is named, not a new
    failure."""
    node = PyNode(name="D1")
    try:
        node.connect("udp.xml", f"diag-{time.monotonic_ns()}", udp_props(*unique_group()), receive="count",
                     timeout=120)
        text = diagnosis(node, per_protocol=50)
        assert text.startswith("D1 in view 0 ['D1']: UDP {"), text
        for name in ("FD_SOCK", "VERIFY_SUSPECT", "BARRIER", "pbcast.NAKACK", "UNICAST", "pbcast.GMS", "UFC", "MFC"):
            assert f", {name} {{" in text, (name, text)
        assert "TOTAL" not in text and len(text) < 12 * 60 + 40, text
        node.kill()
        assert diagnosis(node).startswith("D1: no diagnosis ("), diagnosis(node)
    finally:
        node.close()
