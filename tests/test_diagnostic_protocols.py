"""SIZE, TRACE and STATS (2.12's diagnostic protocols) and jgpy's PERF and PRINTOBJS (seed 002's) in a stack: they pass everything, log or count it, and
STATS' per-peer tables stay bounded whatever senders a batch names."""

from __future__ import annotations

import logging
import uuid

from jgpy import Channel, Message, Receiver, UUID
from jgpy.stack.config import load_config
from jgpy.testing.cluster import wait_all

CONFIG = load_config("shared-loopback.xml").insert("STATS", {}, after="SHARED_LOOPBACK") \
    .insert("SIZE", {"print_msg": "true"}, after="FRAG2").insert("TRACE", {}, after="SIZE") \
    .insert("PERF", {}, after="TRACE").insert("PRINTOBJS", {}, after="PERF")


class Count(Receiver):
    def __init__(self) -> None:
        self.n = 0

    def receive(self, msg) -> None:
        self.n += 1


def test_they_pass_everything_and_log_or_count_it(caplog):
    cluster = f"diag-{uuid.uuid4().hex[:8]}"
    a, b = Channel(CONFIG, "A"), Channel(CONFIG, "B")
    try:
        b.receiver = Count()
        a.connect(cluster)
        b.connect(cluster)
        assert wait_all(lambda: len(a.view.members) == 2 == len(b.view.members), 10)
        with caplog.at_level(logging.DEBUG, logger="jgpy.protocols"):
            for i in range(20):
                a.send(None, b"x" * 100)
            a.send(b.address, b"y" * 50)
            a.send(None, "an object")                               # a Java String: PRINTOBJS shows the value
            assert wait_all(lambda: b.receiver.n == 22, 10)
        size = a.stack.find("SIZE")
        m = Message(None, b"x" * 100, a.address)
        assert f"size of serialized message is {size.serialized_size(m)}" in caplog.text
        assert "headers are" in caplog.text and "sent: " in caplog.text and "received: " in caplog.text
        st = a.stack.find("STATS").dump_stats()
        assert st["sent_mcasts"] >= 20 and st["sent_ucasts"] >= 1 and st["sent_mcast_bytes"] >= 2000
        text = a.stack.find("STATS").print_stats()
        assert "<mcast dest>" in text and "received:" in text
        assert b.stack.find("SIZE").dump_stats()["msgs_up"] >= 21
        perf = b.stack.find("PERF").dump_stats()
        assert perf["up_msgs"] >= 21 and perf["up_us_per_msg"] > 0 and "us/msg above" in b.stack.find("PERF").print_stats()
        assert "received from A: 'an object'" in caplog.text and "received from A: 100 bytes 7878" in caplog.text
    finally:
        a.close()
        b.close()


def test_stats_keeps_per_peer_tables_bounded():
    from jgpy.protocols.stats import MAX_PEERS, STATS

    class Top:
        def up_batch(self, msgs) -> None:
            pass

    s = STATS()
    s.up_prot = Top()
    for _ in range(5):
        s.up_batch([Message(None, b"z", UUID.random()) for _ in range(MAX_PEERS)])
    assert len(s.received) <= MAX_PEERS + 1
    assert s.counters["received_msgs"] == 5 * MAX_PEERS
