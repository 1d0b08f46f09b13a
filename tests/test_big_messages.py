"""10 MB messages under 5 % loss (issue 4, item 4): FRAG2 + NAKACK/UNICAST retransmission + MFC/UFC.

Two members in their own processes (Java and jgpy, or two jgpy), on the jar's udp.xml with DISCARD right
above UDP: once the view is formed, every member drops 5 % of the messages it receives from the other
(Java's own DISCARD in the Java node, jgpy's in jgpy's). Only receive loss is used: Java's DISCARD never
drops what a member sends while ``excludeItself=true`` (its default: the source of every message sent is
the member itself), jgpy's does, so a ``down`` rate would not mean the same on both sides.

Each member multicasts one 10 MB message and unicasts one to the other, one transfer at a time so each is
timed on its own. A payload is random bytes from a seed; receivers report it in full and its SHA-256 and
length are compared with the sender's, so a lost, duplicated or misplaced fragment fails the test.
Multicasts are checked at the sender too (its own copy). Measured: the time of each transfer (from the
sender's send loop starting to the last receiver's ``receive()``) and the retransmissions it took.

A lost *last* fragment of a multicast is only noticed through STABLE (a digest shows the sender's highest
seqno; JGroups 2.12 has no other way): once the 4 MB ``max_bytes`` trigger has passed, that is the random
gossip timer, up to 2 x members x ``desired_avg_gossip`` = 200 s with udp.xml's 50 s. The config lowers
``desired_avg_gossip`` to 2 s to keep that case short.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import time
import uuid

import pytest

from jgpy.testing.cluster import stock
from jgpy.testing.java import JavaNode, PyNode, udp_props, unique_group
from tests.conftest import require_java

pytestmark = [pytest.mark.timeout(240), pytest.mark.interop, pytest.mark.processes, pytest.mark.slow]

SIZE = 10 * 1024 * 1024
LOSS = 0.05
GOSSIP = 2000              # STABLE desired_avg_gossip (ms); stock: 50000


@pytest.fixture
def lossy_pair():
    """``start(kinds)``: two connected members ("J"/"P") on udp.xml + DISCARD; closed after the test."""
    require_java()
    started: list = []
    cfg = tempfile.NamedTemporaryFile("w", suffix=".xml", prefix="jgpy-big-", delete=False)
    cfg.write(stock().insert("DISCARD", {}, after="UDP").with_properties("pbcast.STABLE", desired_avg_gossip=GOSSIP)
              .to_xml())
    cfg.close()

    def start(kinds: str):
        props = udp_props(*unique_group())
        cluster = f"big-{uuid.uuid4().hex[:8]}"
        nodes = []
        for i, k in enumerate(kinds):
            node = (JavaNode if k == "J" else PyNode)(name=f"{k}{i + 1}")
            started.append(node)
            nodes.append(node)
        for n in nodes:
            n.connect(cfg.name, cluster, props)
        deadline = time.monotonic() + 30
        while any(len(n.view()["names"]) != len(nodes) for n in nodes):
            assert time.monotonic() < deadline, "the members did not form a cluster"
            time.sleep(0.1)
        for n in nodes:
            n.call("discard", up=LOSS, down=0.0)
        return nodes
    yield start
    for n in started:
        n.close()
    os.unlink(cfg.name)


def payload(seed: int) -> bytes:
    return random.Random(seed).randbytes(SIZE)


def wait_msg(node, src_name: str, timeout: float) -> dict:
    return node.wait_event(lambda e: e.get("event") == "msg" and e.get("src_name") == src_name, timeout)


def retransmissions(node) -> dict:
    st = node.protocol_stats()
    nak = st.get("NAKACK") or st.get("pbcast.NAKACK") or {}
    uni = st.get("UNICAST") or {}
    disc = st.get("DISCARD") or {}
    if node.KIND == "java":
        return {"xmit_reqs_sent": int(nak.get("xmit_reqs_sent", 0)), "unicast_xmits": int(uni.get("num_xmits", 0)),
                        "discarded": int(disc.get("num_up", 0) or 0)}
    return {"xmit_reqs_sent": nak.get("xmit_reqs_sent", 0), "unicast_xmits": uni.get("xmits", 0),
            "discarded": disc.get("num_up", 0)}


def transfer(sender, receivers, data: bytes, dest: str | None, figures, label: str) -> float:
    """Send ``data`` once; every receiver must get exactly these bytes. Returns the transfer time (s)."""
    for r in receivers:
        r.drain_events()
        r.call("reset_stats")
    rep = sender.send(payload=data, dest=dest, timeout=180)
    t_start = time.monotonic() - rep["seconds"]          # when the sender's send loop began (our clock)
    digest = hashlib.sha256(data).hexdigest()
    ends = []
    for r in receivers:
        ev = wait_msg(r, sender.name, timeout=150)
        got = bytes.fromhex(ev["payload"])
        assert len(got) == len(data), f"{r.name} got {len(got)} bytes of {len(data)} from {sender.name}"
        assert hashlib.sha256(got).hexdigest() == digest, f"{r.name} got different bytes from {sender.name}"
        assert (ev.get("dest") is None) == (dest is None)
        st = r.call("stats")
        assert st["received"] == 1, f"{r.name} received {st['received']} messages (expected exactly one)"
        ends.append(st["last_recv_ns"] / 1e9)        # System.nanoTime / monotonic_ns: CLOCK_MONOTONIC, as ours
    seconds = max(ends) - t_start
    figures(f"{label}: 10 MB transfer with {LOSS:.0%} loss", seconds, "s")
    figures(f"{label}: throughput", SIZE / 1e6 / seconds, "MB/s")
    return seconds


@pytest.mark.parametrize("kinds", ["JP", "PJ", "PP"], ids=["java-coord", "jgpy-coord", "jgpy-only"])
def test_10mb_both_ways_multicast_and_unicast_under_loss(lossy_pair, figures, kinds):
    a, b = lossy_pair(kinds)
    before = {n.name: retransmissions(n) for n in (a, b)}
    for i, (sender, other) in enumerate(((a, b), (b, a))):
        data = payload(1000 * i + 1)
        transfer(sender, [other, sender], data, None, figures,
                 f"multicast {sender.KIND} {sender.name} -> {other.KIND} {other.name}")
        data = payload(1000 * i + 2)
        transfer(sender, [other], data, other.name, figures,
                 f"unicast {sender.KIND} {sender.name} -> {other.KIND} {other.name}")
    after = {n.name: retransmissions(n) for n in (a, b)}
    for n in (a, b):
        delta = {k: after[n.name][k] - before[n.name][k] for k in after[n.name]}
        assert delta["discarded"] > 0, f"{n.name}: DISCARD dropped nothing: {delta}"
        assert delta["xmit_reqs_sent"] > 0, f"{n.name}: no multicast retransmission was asked for: {delta}"
        assert delta["unicast_xmits"] > 0, f"{n.name}: no unicast was retransmitted: {delta}"
        figures(f"{n.KIND} {n.name}: dropped by DISCARD / xmit requests / unicast xmits",
                delta["discarded"], f"/ {delta['xmit_reqs_sent']} / {delta['unicast_xmits']}")
