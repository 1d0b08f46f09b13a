"""A member that only *looks* dead (SIGSTOP for a while, like a long GC pause) is suspected but not excluded.

FD_ALL (interval 500 ms, timeout 2000 ms) suspects the paused member; VERIFY_SUSPECT (timeout raised to
3000 ms) asks it ARE_YOU_DEAD; the member is resumed (SIGCONT) 3 s after it was stopped, answers
I_AM_NOT_DEAD from the datagram waiting in its socket, and the suspicion is dropped: the view never changes
and traffic goes on. The pause (3 s) is longer than FD_ALL's timeout plus one check interval (2.5 s), so the
suspicion is certain, and shorter than timeout + verification (5 s), so the answer is in time. Checked across
Java and jgpy both ways: a Java coordinator verifying a jgpy member, a jgpy coordinator verifying a Java
member, and jgpy only.
"""

from __future__ import annotations

import signal
import time

import pytest

from jgpy.testing.cluster import stock
from tests.conftest import require_java
from tests.test_crash import CrashCluster, check_traffic, reset_received, start_traffic

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop, pytest.mark.processes, pytest.mark.slow]

PAUSE = 3.0


def config():
    return (stock().remove("FD_SOCK").with_properties("FD_ALL", interval=500, timeout=2000)
            .with_properties("VERIFY_SUSPECT", timeout=3000))


@pytest.mark.parametrize("kinds,paused", [("Jp", "p1"), ("pJ", "J1"), ("pp", "p2")],
                         ids=["java-verifies-jgpy", "jgpy-verifies-java", "jgpy-only"])
def test_paused_member_is_suspected_but_not_excluded(figures, kinds, paused):
    require_java()
    c = CrashCluster(kinds, config())
    try:
        c.start()
        names = [m.name for m in c.members]
        vid = c.members[0].view_id()
        coord, victim = c.members[0], c.by_name(paused)
        before = victim.stats()["VERIFY_SUSPECT"] if victim.kind == "jgpy" else None
        coord_before = coord.stats()["VERIFY_SUSPECT"] if coord.kind == "jgpy" else None
        victim.node.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(PAUSE)
        finally:
            victim.node.proc.send_signal(signal.SIGCONT)
        time.sleep(4.0)                     # past the end of any verification that was started
        for m in c.members:
            assert m.view_names() == names and m.view_id() == vid, \
                f"{m.name} changed its view to {m.view_names()} {m.view_id()}: {paused} was excluded"
        # the suspicion happened and was dropped (jgpy's counters; Java does not count them)
        if victim.kind == "jgpy":
            st = victim.stats()["VERIFY_SUSPECT"]
            asked = st["num_are_you_dead_received"] - before["num_are_you_dead_received"]
            assert asked >= 1, f"{paused} was never asked ARE_YOU_DEAD: it was not suspected ({st})"
            figures(f"{coord.kind} coordinator: ARE_YOU_DEAD sent to paused {paused}", asked, "")
        if coord.kind == "jgpy":
            st = coord.stats()["VERIFY_SUSPECT"]
            assert st["num_unsuspected"] - coord_before["num_unsuspected"] >= 1, st
            assert st["num_confirmed"] == coord_before["num_confirmed"], st
            fd = coord.stats()["FD_ALL"]
            # as in Java's FD_ALL, the member stays in the suspected set until the next view
            assert fd["num_suspect_events"] >= 1 and paused in fd["suspected"], fd
        reset_received(c.members)
        threads, errors = start_traffic(c.members, 200, 20)
        check_traffic(c.members, threads, errors, 200, 20)
    finally:
        c.close()
