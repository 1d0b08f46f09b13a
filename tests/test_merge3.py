"""MERGE3 (2.12's merging by coordinator announcements) in MERGE2's place: a mixed cluster split in two halves
by DISCARD forms two views and merges back once healed, with Java coordinators, jgpy coordinators and one of
each; what a stranger's announcement can make a coordinator do."""

from __future__ import annotations

import pytest

from jgpy import UUID, Message, View, ViewId
from jgpy.headers import CoordAnnouncement
from jgpy.protocols.merge3 import MERGE3
from jgpy.stack.events import EventType
from tests.fakestack import FakeStack
from tests.test_merge import merge_config, merge_views, proc_clusters

MERGE3_ID = 34


def merge3_config():
    return merge_config().replace("MERGE2", "MERGE3", {"min_interval": "1000", "max_interval": "3000"})


@pytest.fixture
def merge3_cluster():
    yield from proc_clusters(merge3_config())


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("kinds", ["JpJp", "pJpJ", "JppJ"], ids=["java-coords", "jgpy-coords", "one-of-each"])
def test_partition_and_merge_with_merge3(merge3_cluster, kinds):
    c = merge3_cluster(kinds)
    c.start()
    assert c.agree(c.members, 30), {m.name: m.view_names() for m in c.members}
    assert all("MERGE3" in m.stats() or m.kind == "java" for m in c.members)
    sides = [c.members[:2], c.members[2:]]
    c.partition(sides)
    for side in sides:
        assert c.agree(side, 60), {m.name: m.view_names() for m in c.members}
    before = {m.name: len(merge_views(m)) for m in c.members}
    c.heal()
    assert c.agree(c.members, 90), f"no merge after healing: {({m.name: m.view_names() for m in c.members})}"
    assert all(len(merge_views(m)) > before[m.name] for m in c.members)
    for m in (m for m in c.members if m.kind == "jgpy"):
        st = m.stats()["MERGE3"]
        assert st["announcements_sent"] + st["announcements_received"] > 0, st


def test_announcements_move_only_a_coordinator_and_only_so_often():
    prot = MERGE3()
    prot.min_interval, prot.max_interval = 60_000, 120_000
    s = FakeStack(prot, connect=True)
    try:
        events = []
        orig = s.top.up

        def up(evt):
            if evt.type == EventType.MERGE:
                events.append(evt.arg)
            return orig(evt)
        s.top.up = up
        other = UUID.random()
        s.install_view([s.local_addr, UUID.random()], 3, up=False)

        def announce(src, coord, vid=7):
            m = Message(None, None, src)
            m.put_header(MERGE3_ID, CoordAnnouncement(View(ViewId(coord, vid), [coord])))
            s.tp.inject([m])
        announce(other, UUID.random())                    # names somebody else as coordinator: dropped
        assert prot.counters["dropped_bad"] == 1 and not events
        announce(other, other)                            # a real other coordinator: one MERGE
        assert len(events) == 1 and set(events[0]) == {s.local_addr, other}
        for i in range(50):                               # a flood: no more MERGEs within min_interval
            announce(other, other, 8 + i)
        assert len(events) == 1 and prot.counters["merges_suppressed"] == 50
    finally:
        s.close()
