"""SFC (2.12's simple flow control of multicasts): the jar's sfc.xml, unchanged, in mixed clusters both ways; a
slow receiver in a mixed cluster paces the sender without loss; what strangers' credit messages can do."""

from __future__ import annotations

import time
import uuid

import pytest

from jgpy import Message, UUID
from jgpy.headers import SfcHeader
from jgpy.testing.cluster import stock
from jgpy.testing.java import JavaNode, PyNode, udp_props, unique_group
from tests.conftest import require_java
from tests.fakestack import FakeStack
from tests.test_stack_interop import cluster_factory, exchange  # noqa: F401 - a fixture

SFC_ID = 30
MAX_CREDITS = 10_000_000                                     # sfc.xml's


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ", "PJP")] + ["PP"])
def test_sfc_xml_forms_mixed_clusters(cluster_factory, kinds):
    c = cluster_factory(kinds, config=stock("sfc.xml"))
    c.start()
    c.assert_agreement()
    exchange(c, 2000, unicasts=100)
    for m in (m for m in c.members if m.kind == "jgpy"):
        st = m.stats()["SFC"]                                # small messages: counted, credits never ran out
        assert st["bytes_sent"] > 0 and st["credits"] == MAX_CREDITS - st["bytes_sent"], st


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.parametrize("sender_kind,receiver_kind", [("P", "J"), ("J", "P")], ids=["jgpy-to-java", "java-to-jgpy"])
def test_a_slow_receiver_paces_the_sender_without_loss(sender_kind, receiver_kind):
    require_java()
    props = udp_props(*unique_group())
    cluster = f"sfc-slow-{uuid.uuid4().hex[:8]}"
    size, count, sleep_ms = 20_000, 1500, 2                # 30 MB: 3 times max_credits
    sender = (JavaNode if sender_kind == "J" else PyNode)(name="S")
    receiver = (JavaNode if receiver_kind == "J" else PyNode)(name="R")
    try:
        sender.call("connect", config="sfc.xml", cluster=cluster, name="S", props=props, receive="count",
                    timeout=60)
        receiver.call("connect", config="sfc.xml", cluster=cluster, name="R", props=props, receive="count",
                      receive_sleep_ms=sleep_ms, timeout=60)
        deadline = time.monotonic() + 30
        while len(sender.view()["names"]) != 2 or len(receiver.view()["names"]) != 2:
            assert time.monotonic() < deadline, "no cluster of two"
            time.sleep(0.1)
        t0 = time.monotonic()
        sender.send(payload=b"\x5a" * size, numbered=True, count=count, timeout=120)
        sent_s = time.monotonic() - t0
        deadline = time.monotonic() + 60
        while receiver.call("stats")["received"] < count and time.monotonic() < deadline:
            time.sleep(0.2)
        assert receiver.call("stats")["received"] == count
        # the receiver takes >= count * sleep_ms; the sender may run ahead by at most its credits
        assert sent_s >= (count - MAX_CREDITS // size) * sleep_ms / 1000.0 * 0.8, sent_s
        if sender_kind == "P":
            assert sender.protocol_stats()["SFC"]["blockings"] >= 1
    finally:
        sender.close()
        receiver.close()


def test_strangers_credit_messages_are_answered_or_ignored_never_remembered():
    from jgpy.protocols.sfc import SFC
    s = FakeStack(SFC(), connect=True)
    try:
        member = UUID.random()
        s.install_view([s.local_addr, member], 1, up=True)
        for _ in range(200):                                    # strangers asking: answered, not kept
            m = Message(None, None, UUID.random())
            m.put_header(SFC_ID, SfcHeader(SfcHeader.CREDIT_REQUEST))
            s.tp.inject([m])
        prot = s.prot
        assert prot.counters["ignored_non_member"] == 200 and len(prot._pending_requesters) == 0
        assert len(prot._received) == 2
        prot.credits = 0
        prot._pending_creditors = {member}
        bogus = Message(s.local_addr, None, UUID.random())      # a stranger's REPLENISH does not unblock us
        bogus.put_header(SFC_ID, SfcHeader(SfcHeader.REPLENISH))
        s.tp.inject([bogus])
        assert prot.credits == 0
        real = Message(s.local_addr, None, member)
        real.put_header(SFC_ID, SfcHeader(SfcHeader.REPLENISH))
        s.tp.inject([real])
        assert prot.credits == prot.max_credits
    finally:
        s.close()
