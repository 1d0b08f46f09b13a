"""jgpy._core.tables: NAKACK's NakReceiverWindow + retransmitter, UNICAST's AckSenderWindow/AckReceiverWindow.

Unit tests pin JGroups 2.12.2's semantics (including its quirks, see the comments); the stateful
hypothesis tests drive each table against a small pure-Python reference model.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
import weakref

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from jgpy._core.tables import (
    MAX_WINDOW,
    PAGE_SLOTS,
    AckReceiverWindow,
    AckSenderWindow,
    NakReceiverWindow,
    Retransmitter,
)


class M:
    """A weak-referenceable stand-in for a message."""

    __slots__ = ("seqno", "__weakref__")

    def __init__(self, seqno):
        self.seqno = seqno

    def __repr__(self):
        return f"M({self.seqno})"


def seqnos(msgs):
    return [m.seqno for m in msgs]


# ------------------------------------------------------------------------------------------------ Retransmitter


class TestRetransmitterSchedule:
    def test_static_schedule_repeats_last_value(self):
        r = Retransmitter([300, 600, 1200])
        r.add(5, 5, 0)
        fired = []
        now = 0
        while now <= 6000:
            if r.due(now):
                fired.append(now)
            now += 50
        # 300, then +600, then +1200, then +1200 forever
        assert fired == [300, 900, 2100, 3300, 4500, 5700]

    def test_default_timeouts(self):
        assert Retransmitter().intervals == (300, 600, 1200)
        assert AckSenderWindow().intervals == (300, 600, 1200)
        assert NakReceiverWindow().retransmitter.intervals == (300, 600, 1200)

    def test_single_timeout(self):
        r = Retransmitter([100])
        r.add(1, 1, 0)
        assert r.due(99) == []
        assert r.due(100) == [(1, 1)]
        assert r.next_due() == 200
        assert r.due(200) == [(1, 1)]

    def test_exponential_backoff_doubles_and_caps(self):
        r = Retransmitter([1, 2, 3], exponential_backoff=1000)  # timeouts ignored
        assert r.intervals == (1000, 2000, 4000, 8000, 15000)
        r.add(1, 3, 0)
        times = []
        t = 0
        for _ in range(7):
            t = r.next_due()
            assert r.due(t) == [(1, 3)]
            times.append(t)
        assert times == [1000, 3000, 7000, 15000, 30000, 45000, 60000]

    def test_exponential_backoff_above_cap(self):
        # ExponentialInterval.next(): returns the value, then min(15000, 2*value)
        assert Retransmitter(exponential_backoff=20000).intervals == (20000, 15000)
        assert Retransmitter(exponential_backoff=15000).intervals == (15000,)
        assert Retransmitter(exponential_backoff=1).intervals[-2:] == (8192, 15000)
        assert AckSenderWindow(exponential_backoff=5000).intervals == (5000, 10000, 15000)

    def test_exponential_zero_or_negative_means_static(self):
        assert Retransmitter([10, 20], exponential_backoff=0).intervals == (10, 20)
        assert Retransmitter([10, 20], exponential_backoff=-5).intervals == (10, 20)

    def test_reschedule_is_relative_to_the_due_call(self):
        r = Retransmitter([300, 600])
        r.add(1, 1, 0)
        assert r.due(1000) == [(1, 1)]      # late timer
        assert r.next_due() == 1600
        assert r.due(1599) == []
        assert r.due(1600) == [(1, 1)]

    def test_each_range_has_its_own_schedule(self):
        r = Retransmitter([300, 600, 1200])
        r.add(1, 1, 0)
        r.add(10, 12, 100)
        assert r.due(300) == [(1, 1)]
        assert r.due(400) == [(10, 12)]
        assert r.next_due() == 900
        assert r.due(1000) == [(1, 1), (10, 12)]
        assert [x[3] for x in r.ranges()] == [2, 2]

    @pytest.mark.parametrize("bad", [[], [0], [300, -1]])
    def test_bad_timeouts(self, bad):
        with pytest.raises(ValueError):
            Retransmitter(bad)
        with pytest.raises(ValueError):
            AckSenderWindow(bad)
        with pytest.raises(ValueError):
            NakReceiverWindow(0, 0, bad)

    def test_float_and_int_time(self):
        r = Retransmitter([300])
        r.add(1, 1, 0.5)
        assert r.next_due() == 300.5
        assert r.due(300) == []
        assert r.due(300.5) == [(1, 1)]


class TestRetransmitterRanges:
    def test_add_remove_size(self):
        r = Retransmitter()
        assert r.size == 0 and len(r) == 0 and r.next_due() is None
        r.add(1, 10, 0)
        assert r.size == 10
        assert r.remove(5) == 0
        assert r.size == 9
        assert r.remove(5) == 0           # already received
        assert r.remove(11) == 0          # unknown
        assert r.remove(0) == 0
        assert r.size == 9

    def test_swapped_bounds(self):
        r = Retransmitter()
        r.add(10, 1, 0)                   # Java swaps them
        assert r.ranges()[0][:2] == (1, 10)

    def test_due_splits_around_holes_and_coalesces(self):
        r = Retransmitter([100])
        r.add(1, 10, 0)
        r.remove(5)
        assert r.due(100) == [(1, 4), (6, 10)]
        for s in (1, 2, 3, 4):
            r.remove(s)
        r.remove(8)
        assert r.due(200) == [(6, 7), (9, 10)]
        r.remove(10)
        assert r.due(300) == [(6, 7), (9, 9)]

    def test_due_across_word_boundaries(self):
        r = Retransmitter([1])
        r.add(0, 199, 0)
        for s in range(0, 200):
            if s % 64 not in (0, 63) and s not in (100, 101, 102):
                r.remove(s)
        expected = [(0, 0), (63, 64), (100, 102), (127, 128), (191, 192)]
        assert r.due(1) == expected
        assert r.size == sum(b - a + 1 for a, b in expected)

    def test_remove_returns_retransmission_count(self):
        r = Retransmitter([100])
        r.add(1, 3, 0)
        r.due(100)
        r.due(200)
        assert r.remove(2) == 2          # requested twice (range still has 1 and 3 missing)
        assert r.remove(2) == 0          # not missing any more
        r.due(300)
        assert r.remove(1) == 3
        assert r.remove(3) == 3          # last one: range dropped
        assert r.ranges() == [] and r.next_due() is None
        r.add(7, 7, 0)
        assert r.remove(7) == 0          # never retransmitted

    def test_range_dropped_when_complete(self):
        r = Retransmitter()
        r.add(1, 3, 0)
        r.add(5, 5, 0)
        for s in (1, 2, 3):
            r.remove(s)
        assert [x[:2] for x in r.ranges()] == [(5, 5)]
        r.remove(5)
        assert r.ranges() == [] and r.size == 0

    def test_overlapping_add_registers_only_the_new_parts(self):
        r = Retransmitter([300])
        r.add(5, 10, 0)
        r.add(20, 22, 0)
        r.add(1, 30, 100)
        assert [x[:2] for x in r.ranges()] == [(1, 4), (5, 10), (11, 19), (20, 22), (23, 30)]
        assert r.size == 30
        assert [x[4] for x in r.ranges()] == [400, 300, 400, 300, 400]
        r.add(6, 8, 200)                  # fully covered: nothing
        r.add(9, 12, 200)                 # covered: [9,10] by (5,10), [11,12] by (11,19)
        assert len(r.ranges()) == 5 and r.size == 30

    def test_overlap_with_received_part_is_not_reregistered(self):
        r = Retransmitter()
        r.add(5, 10, 0)
        r.remove(7)
        r.add(1, 12, 0)
        assert [x[:2] for x in r.ranges()] == [(1, 4), (5, 10), (11, 12)]
        assert r.size == 4 + 5 + 2

    def test_add_after_completed_range_registers_again(self):
        r = Retransmitter()
        r.add(1, 1, 0)
        r.remove(1)
        r.add(1, 1, 0)
        assert r.size == 1

    def test_remove_up_to(self):
        r = Retransmitter([100])
        r.add(1, 3, 0)
        r.add(5, 20, 0)
        r.add(30, 30, 0)
        r.remove(10)
        r.remove_up_to(12)
        assert [x[:3] for x in r.ranges()] == [(5, 20, 8), (30, 30, 1)]
        assert r.size == 9
        assert r.due(100) == [(13, 20), (30, 30)]
        r.remove_up_to(20)
        assert [x[:2] for x in r.ranges()] == [(30, 30)]
        r.remove_up_to(29)
        assert r.size == 1
        r.remove_up_to(1000)
        assert r.size == 0 and r.ranges() == [] and r.next_due() is None

    def test_next_due_after_drops(self):
        r = Retransmitter([100, 1000])
        r.add(1, 1, 0)
        r.add(3, 3, 50)
        assert r.next_due() == 100
        r.remove(1)
        assert r.next_due() == 150
        r.due(150)
        assert r.next_due() == 1150

    def test_clear(self):
        r = Retransmitter()
        r.add(1, 100, 0)
        r.clear()
        assert r.size == 0 and r.ranges() == [] and r.next_due() is None and r.due(10**9) == []

    def test_many_ranges_binary_search(self):
        r = Retransmitter([10])
        for i in range(1000):
            r.add(10 * i, 10 * i + 4, 0)
        assert r.size == 5000
        # out of order inserts
        r.add(-100, -90, 0)
        r.add(5005, 5008, 0)
        assert r.ranges()[0][:2] == (-100, -90)
        assert r.remove(5006) == 0 and r.size == 5000 + 11 + 3
        for i in range(1000):
            assert r.remove(10 * i + 2) == 0
        assert r.remove(10 * 999 + 5) == 0
        due = r.due(10)
        assert due[0] == (-100, -90)
        assert (5005, 5005) in due and (5007, 5008) in due

    def test_limits(self):
        r = Retransmitter()
        with pytest.raises(OverflowError):
            r.add(1, MAX_WINDOW + 1, 0)
        r.add(1, MAX_WINDOW, 0)            # exactly MAX_WINDOW seqnos is fine
        assert r.size == MAX_WINDOW
        with pytest.raises(OverflowError):
            r.add(2**63, 2**63, 0)
        r2 = Retransmitter()
        r2.add(2**63 - 3, 2**63 - 1, 0)      # int64 extremes
        r2.add(2**63 - 10, 2**63 - 1, 0)
        assert [x[:2] for x in r2.ranges()] == [(2**63 - 10, 2**63 - 4), (2**63 - 3, 2**63 - 1)]
        r2.remove_up_to(2**63 - 1)
        assert r2.size == 0


# ------------------------------------------------------------------------------------------------ NakReceiverWindow


class TestNakReceiverWindow:
    def test_initial_state(self):
        w = NakReceiverWindow()
        assert w.digest() == (0, 0, 0) and w.size == 0 and w.pending_xmits == 0 and w.running
        w = NakReceiverWindow(highest_delivered=10, lowest=5)
        assert (w.low, w.highest_delivered, w.highest_received) == (5, 10, 10)
        w = NakReceiverWindow(10, 20)       # low = min(lowest, highest_delivered)
        assert w.digest() == (10, 10, 10)

    def test_in_order(self):
        w = NakReceiverWindow()
        ms = [M(i) for i in range(1, 6)]
        for m in ms:
            assert w.add(m.seqno, m, 0)
        assert w.digest() == (0, 0, 5) and w.size == 5 and w.pending_xmits == 0
        assert w.remove_many(True) == ms
        assert w.digest() == (0, 5, 5) and w.size == 0
        assert w.remove_many(True) == []

    def test_four_cases_of_add(self):
        w = NakReceiverWindow(highest_delivered=10)
        assert w.add(11, M(11), 0)                # case 1
        assert not w.add(10, M(10), 0)            # case 2: delivered
        assert not w.add(3, M(3), 0)
        assert w.add(15, M(15), 0)                # case 4: gap 12..14
        assert w.digest() == (0, 10, 15) and w.pending_xmits == 3
        assert w.missing() == [(12, 14)]
        assert w.add(13, M(13), 0)                # case 3: a missing one
        assert not w.add(13, M(13), 0)            # ... and its duplicate
        assert not w.add(15, M(15), 0)            # duplicate of a gap-creating seqno
        assert not w.add(11, M(11), 0)            # duplicate, not yet delivered
        assert w.pending_xmits == 2 and w.missing() == [(12, 12), (14, 14)]
        assert seqnos(w.remove_many(True)) == [11]
        assert w.add(12, M(12), 0) and w.add(14, M(14), 0)
        assert w.pending_xmits == 0 and w.missing() == []
        assert seqnos(w.remove_many(True)) == [12, 13, 14, 15]
        assert w.digest() == (0, 15, 15)

    def test_first_seen_object_is_kept_for_duplicates(self):
        w = NakReceiverWindow()
        a, b = M(2), M(2)
        w.add(2, a, 0)
        assert not w.add(2, b, 0)
        assert w.get(2) is a

    def test_gap_registered_with_retransmitter(self):
        w = NakReceiverWindow(timeouts=[100, 200])
        w.add(1, M(1), 0)
        w.add(5, M(5), 10)
        assert w.xmit_due(109) == []
        assert w.xmit_due(110) == [(2, 4)]
        w.add(3, M(3), 120)
        assert w.xmit_due(310) == [(2, 2), (4, 4)]
        w.add(8, M(8), 320)
        assert w.missing() == [(2, 2), (4, 4), (6, 7)]
        assert w.retransmitter.next_due() == 420
        assert w.xmit_due(420) == [(6, 7)]

    def test_remove_many_max_results(self):
        w = NakReceiverWindow()
        for s in range(1, 11):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(True, 3)) == [1, 2, 3]
        assert seqnos(w.remove_many(False, 4)) == [4, 5, 6, 7]
        assert seqnos(w.remove_many(True, 0)) == [8, 9, 10]
        assert w.size == 4                         # 4..7 were not removed
        assert w.highest_delivered == 10

    def test_remove_many_stops_at_gap(self):
        w = NakReceiverWindow()
        for s in (1, 2, 4, 5):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(True)) == [1, 2]
        assert w.remove_many(True) == []
        w.add(3, M(3), 0)
        assert seqnos(w.remove_many(True)) == [3, 4, 5]

    def test_keep_delivered_until_stable(self):
        w = NakReceiverWindow()
        for s in range(1, 8):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(False)) == list(range(1, 8))
        assert w.size == 7 and w.get(3).seqno == 3
        assert seqnos(w.get_range(2, 4)) == [2, 3, 4]
        assert w.remove_many(False) == []          # already delivered: not again
        assert w.stable(4)
        assert w.low == 4 and w.size == 3 and w.get(4) is None and w.get(5).seqno == 5
        assert w.get_range(1, 100) == [w.get(5), w.get(6), w.get(7)]

    def test_stable_above_delivered_is_ignored(self):
        w = NakReceiverWindow()
        for s in range(1, 6):
            w.add(s, M(s), 0)
        w.remove_many(False, 2)
        assert not w.stable(3)                     # > highest_delivered (2)
        assert w.size == 5 and w.low == 0
        assert w.stable(2)
        assert w.size == 3 and w.low == 2
        assert w.stable(1)                         # lower: nothing more to purge, low stays
        assert w.low == 2 and w.size == 3

    def test_stable_drops_retransmitter_entries(self):
        w = NakReceiverWindow()
        w.add(1, M(1), 0)
        w.add(5, M(5), 0)                          # 2..4 missing
        w.remove_many(False)
        w.set_highest_delivered(3)                 # as if 2,3 had been delivered elsewhere
        assert w.stable(3)
        assert w.pending_xmits == 1 and w.retransmitter.ranges()[0][:3] == (2, 4, 1)
        assert w.missing() == [(4, 4)]

    def test_get_and_get_range(self):
        w = NakReceiverWindow()
        for s in (1, 2, 5, 9):
            w.add(s, M(s), 0)
        assert w.get(3) is None and w.get(100) is None and w.get(-5) is None and w.get(9).seqno == 9
        assert seqnos(w.get_range(2, 9)) == [2, 5, 9]
        assert w.get_range(9, 2) == [] and w.get_range(10, 20) == []
        assert seqnos(w.get_range(-(2**63), 2**63 - 1)) == [1, 2, 5, 9]

    def test_missing(self):
        w = NakReceiverWindow(highest_delivered=100)
        assert w.missing() == []
        w.add(103, M(103), 0)
        w.add(106, M(106), 0)
        assert w.missing() == [(101, 102), (104, 105)]
        w.add(101, M(101), 0)
        w.add(102, M(102), 0)
        assert w.missing() == [(104, 105)]

    def test_missing_with_unusual_bounds(self):
        w = NakReceiverWindow()
        w.add(3, M(3), 0)
        w.add(6, M(6), 0)
        w.set_highest_delivered(4)
        assert w.missing() == [(5, 5)]
        w.set_highest_delivered(-2)                # below everything stored
        assert w.missing() == [(-1, 2), (4, 5)]
        w2 = NakReceiverWindow()
        w2.add(1, M(1), 0)
        w2.remove_many(True)
        w2.add(5, M(5), 0)
        w2.remove_many(True)                       # nothing deliverable
        w2.set_highest_delivered(5)
        w2.remove_many(True)                       # 5 is not hd+1
        assert w2.missing() == []

    def test_set_highest_delivered(self):
        w = NakReceiverWindow()
        for s in range(1, 4):
            w.add(s, M(s), 0)
        assert w.set_highest_delivered(2) == 0
        assert seqnos(w.remove_many(True)) == [3]
        assert w.set_highest_delivered(10) == 3
        assert w.digest() == (0, 10, 3)
        # Java quirk: case 1 (seqno == highest_received + 1) wins over case 2 (seqno <= highest_delivered)
        assert w.add(4, M(4), 0)
        assert w.highest_received == 4 and w.get(4) is not None
        # ... and a discarded seqno still raises highest_received (Java updates it in a finally block)
        assert not w.add(8, M(8), 0)
        assert w.highest_received == 8 and w.get(8) is None
        assert w.remove_many(True) == []           # 11 is the next to deliver
        assert w.add(11, M(11), 0) and w.pending_xmits == 2    # gap 9..10 registered
        assert seqnos(w.remove_many(True)) == [11]

    def test_destroy(self):
        w = NakReceiverWindow(highest_delivered=5)
        w.add(6, M(6), 0)
        w.add(9, M(9), 0)
        w.destroy()
        assert w.digest() == (0, 0, 0) and w.size == 0 and w.pending_xmits == 0 and not w.running
        assert not w.add(1, M(1), 0)
        assert w.size == 0
        assert w.highest_received == 1             # Java: updated in the finally block even when not running
        assert w.remove_many(True) == []

    def test_add_many(self):
        w = NakReceiverWindow()
        ms = [M(s) for s in (1, 2, 3, 5, 5, 4, 0)]
        assert w.add_many([m.seqno for m in ms], ms, 0) == 5
        assert seqnos(w.remove_many(True)) == [1, 2, 3, 4, 5]
        assert w.add_many((6, 7), (M(6), M(7)), 0) == 2      # tuples are fine too
        assert w.add_many([], [], 0) == 0
        with pytest.raises(ValueError, match="2 seqnos but 1 messages"):
            w.add_many([8, 9], [M(8)], 0)

    def test_bad_input(self):
        w = NakReceiverWindow()
        with pytest.raises(ValueError, match="None"):
            w.add(1, None, 0)
        with pytest.raises(TypeError):
            w.add("1", M(1), 0)
        with pytest.raises(OverflowError, match="int64"):
            w.add(2**63, M(1), 0)
        with pytest.raises(OverflowError):
            NakReceiverWindow(highest_delivered=2**64)
        with pytest.raises(ValueError):
            w.add_many([1], [None], 0)
        assert w.digest() == (0, 0, 0) and w.size == 0

    def test_too_far_ahead(self):
        w = NakReceiverWindow()
        w.add(1, M(1), 0)
        with pytest.raises(OverflowError, match="MAX_WINDOW"):
            w.add(MAX_WINDOW + 5, M(0), 0)
        assert w.digest() == (0, 0, 1) and w.pending_xmits == 0 and w.size == 1
        w.remove_many(True)
        # an empty buffer has no span, but the gap is still limited by the retransmitter
        with pytest.raises(OverflowError, match="MAX_WINDOW"):
            w.add(MAX_WINDOW + 5, M(0), 0)
        assert w.digest() == (0, 1, 1) and w.pending_xmits == 0 and w.size == 0
        assert w.add(MAX_WINDOW + 1, M(0), 0)
        assert w.pending_xmits == MAX_WINDOW - 1 and w.missing() == [(2, MAX_WINDOW)]

    def test_wraparound_in_order(self):
        w = NakReceiverWindow(highest_delivered=1000)
        out = []
        for s in range(1001, 1001 + 1000):
            w.add(s, M(s), 0)
            if s % 37 == 0:
                out += w.remove_many(True)
        out += w.remove_many(True)
        assert seqnos(out) == list(range(1001, 2001))
        assert w.capacity == 0                         # every page released once empty

    def test_live_span_crossing_a_page_boundary(self):
        start = PAGE_SLOTS - 10
        w = NakReceiverWindow(highest_delivered=start)   # seqnos on both sides of a page boundary
        for s in range(start + 1, start + 61):
            if s % 7:
                w.add(s, M(s), 0)
        assert w.capacity == 2 * PAGE_SLOTS
        assert w.missing() == [(s, s) for s in range(start + 1, start + 61) if s % 7 == 0]
        for s in range(start + 1, start + 61):
            if s % 7 == 0:
                w.add(s, M(s), 0)
        assert seqnos(w.get_range(0, 10_000)) == list(range(start + 1, start + 61))
        assert seqnos(w.remove_many(True)) == list(range(start + 1, start + 61))
        assert w.pending_xmits == 0 and w.capacity == 0

    def test_growth_and_shrink(self):
        w = NakReceiverWindow()
        w.add(1, M(1), 0)
        w.add(10_000, M(10_000), 0)
        assert w.capacity == 2 * PAGE_SLOTS and w.pending_xmits == 9998   # pages only where messages are
        for s in range(9999, 1, -1):                   # fill the gap backwards
            assert w.add(s, M(s), 0)
        assert w.pending_xmits == 0 and w.capacity >= 10_000
        assert seqnos(w.get_range(1, 10_000)) == list(range(1, 10_001))
        assert seqnos(w.get_range(1, 10_000, 5)) == list(range(1, 6))
        assert seqnos(w.remove_many(True)) == list(range(1, 10_001))
        assert w.capacity == 0                         # pages released once empty

    def test_shrink_after_stable(self):
        w = NakReceiverWindow()
        for s in range(1, 5001):
            w.add(s, M(s), 0)
        w.remove_many(False)
        big = w.capacity
        assert big >= 5000
        w.stable(4990)
        assert w.capacity < big and w.size == 10
        assert seqnos(w.get_range(0, 10**6)) == list(range(4991, 5001))

    def test_negative_and_huge_seqnos(self):
        w = NakReceiverWindow(highest_delivered=-10, lowest=-20)
        assert w.digest() == (-20, -10, -10)
        for s in range(-9, 5):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(True)) == list(range(-9, 5))
        top = 2**63 - 1
        w = NakReceiverWindow(highest_delivered=top - 5)
        for s in range(top - 4, top + 1):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(False)) == list(range(top - 4, top + 1))
        assert w.stable(top) and w.size == 0

    def test_repr(self):
        w = NakReceiverWindow()
        w.add(2, M(2), 0)
        assert repr(w) == "<NakReceiverWindow [0 : 0 (2)] size=1 missing=1>"


# ------------------------------------------------------------------------------------------------ AckSenderWindow


class TestAckSenderWindow:
    def test_add_ack_cumulative(self):
        w = AckSenderWindow()
        ms = {s: M(s) for s in range(1, 11)}
        for s, m in ms.items():
            assert w.add(s, m, 0)
        assert w.size == 10 and w.highest == 10 and w.lowest_seqno == 1
        assert w.lowest() == (1, ms[1])
        assert w.ack(3) == 3
        assert w.lowest() == (4, ms[4]) and w.lowest_seqno == 4
        assert w.ack(2) == 0                    # below lowest: ignored
        assert w.ack(3) == 0
        assert w.get(3) is None and w.get(4) is ms[4]
        assert w.ack(100) == 7
        assert w.size == 0 and w.lowest() is None and w.lowest_seqno == 101
        assert w.due(10**9) == [] and w.next_due() is None

    def test_duplicate_and_acked_adds_are_refused(self):
        w = AckSenderWindow()
        a = M(1)
        assert w.add(1, a, 0)
        assert not w.add(1, M(1), 0)            # putIfAbsent
        assert w.get(1) is a
        w.ack(1)
        assert not w.add(1, M(1), 0)            # already acked
        assert w.size == 0

    def test_lowest_is_javas_getLowestMessage(self):
        w = AckSenderWindow()
        w.add(5, M(5), 0)                       # lowest unacked seqno is still 1
        assert w.lowest() is None
        assert w.ack(4) == 0
        assert w.lowest()[0] == 5

    def test_per_message_schedule(self):
        w = AckSenderWindow([100, 200, 400])
        ms = {s: M(s) for s in range(1, 5)}
        w.add(1, ms[1], 0)
        w.add(2, ms[2], 50)
        assert w.next_due() == 100
        assert w.due(99) == []
        assert w.due(100) == [(1, ms[1])]
        assert w.next_due() == 150
        assert w.due(150) == [(2, ms[2])]
        w.add(3, ms[3], 160)                    # due at 260
        assert w.due(300) == [(1, ms[1]), (3, ms[3])]   # 1: 100 + 200; next 1: 700, 3: 500
        assert w.due(350) == [(2, ms[2])]       # 150 + 200; next 750
        assert w.due(500) == [(3, ms[3])]       # next 900
        assert w.due(700) == [(1, ms[1])]       # next 1100 (400 repeats from now on)
        assert w.due(750) == [(2, ms[2])]       # next 1150
        assert w.due(1200) == [(1, ms[1]), (2, ms[2]), (3, ms[3])]   # late: all next at 1600
        assert w.ack(2) == 2
        assert w.next_due() == 1600
        assert w.due(1600) == [(3, ms[3])]
        assert w.next_due() == 2000

    def test_due_is_ascending_across_stages(self):
        w = AckSenderWindow([100, 10])
        for s in range(1, 6):
            w.add(s, M(s), 0)
        w.due(100)                              # all now on stage 1, due at 110
        w.add(6, M(6), 0)
        w.add(7, M(7), 0)
        # stage-0 entries (6, 7) and stage-1 entries (1..5) due together
        assert [s for s, _ in w.due(200)] == [1, 2, 3, 4, 5, 6, 7]

    def test_non_monotonic_now(self):
        w = AckSenderWindow([100])
        w.add(1, M(1), 500)
        w.add(2, M(2), 0)                       # earlier clock: sorted insert
        assert w.next_due() == 100
        assert [s for s, _ in w.due(100)] == [2]
        assert [s for s, _ in w.due(600)] == [1, 2]

    def test_exponential(self):
        w = AckSenderWindow(exponential_backoff=1000)
        w.add(1, M(1), 0)
        times = []
        for _ in range(6):
            t = w.next_due()
            assert len(w.due(t)) == 1
            times.append(t)
        assert times == [1000, 3000, 7000, 15000, 30000, 45000]

    def test_clear(self):
        w = AckSenderWindow()
        for s in range(1, 4):
            w.add(s, M(s), 0)
        w.ack(1)
        w.clear()
        assert w.size == 0 and w.lowest_seqno == 1 and w.due(10**9) == [] and w.next_due() is None
        assert w.add(1, M(1), 0)                # back to the first seqno
        assert w.highest == 3                   # Java's reset() keeps 'highest'

    def test_growth_wrap_and_bad_input(self):
        w = AckSenderWindow()
        for s in range(1, 20_001):
            w.add(s, M(s), s)
            if s % 100 == 0:
                assert w.ack(s - 50) == (100 if s > 100 else 50)
        assert w.size == 50
        with pytest.raises(ValueError):
            w.add(30_000, None, 0)
        with pytest.raises(OverflowError):
            w.add(MAX_WINDOW * 2, M(0), 0)
        assert w.size == 50


# ------------------------------------------------------------------------------------------------ AckReceiverWindow


class TestAckReceiverWindow:
    def test_add_codes(self):
        w = AckReceiverWindow(1)
        assert w.next_to_remove == 1
        assert w.add(1, M(1)) == 1
        assert w.add(1, M(1)) == 0
        assert w.add(3, M(3)) == 1
        assert w.add(0, M(0)) == -1
        msgs, highest = w.remove_many()
        assert seqnos(msgs) == [1] and highest == 1
        assert w.add(1, M(1)) == -1              # delivered: ack again
        assert w.remove_many() == ([], 0)
        assert w.add(2, M(2)) == 1
        msgs, highest = w.remove_many()
        assert seqnos(msgs) == [2, 3] and highest == 3 and w.next_to_remove == 4 and w.size == 0

    def test_initial_seqno(self):
        w = AckReceiverWindow(100)
        assert w.add(99, M(99)) == -1
        assert w.add(101, M(101)) == 1
        assert w.remove_many() == ([], 0)
        w.add(100, M(100))
        msgs, h = w.remove_many()
        assert seqnos(msgs) == [100, 101] and h == 101

    def test_max_results(self):
        w = AckReceiverWindow(1)
        for s in range(1, 11):
            w.add(s, M(s))
        msgs, h = w.remove_many(4)
        assert seqnos(msgs) == [1, 2, 3, 4] and h == 4
        msgs, h = w.remove_many(0)
        assert seqnos(msgs) == list(range(5, 11)) and h == 10

    def test_add_many(self):
        w = AckReceiverWindow(5)
        ms = [M(s) for s in (5, 6, 6, 3, 8, 4)]
        assert w.add_many([m.seqno for m in ms], ms) == (3, 4)
        assert w.add_many([9], [M(9)]) == (1, None)
        msgs, h = w.remove_many()
        assert seqnos(msgs) == [5, 6] and h == 6
        with pytest.raises(ValueError):
            w.add_many([1, 2], [M(1)])

    def test_clear_and_get(self):
        w = AckReceiverWindow(1)
        w.add(2, M(2))
        assert w.get(2).seqno == 2 and w.get(1) is None
        w.clear()
        assert w.size == 0 and w.next_to_remove == 1 and w.get(2) is None

    def test_wrap_and_growth(self):
        w = AckReceiverWindow(10**12)
        out = []
        base = 10**12
        order = list(range(base, base + 5000))
        # deliver in blocks of 200 arriving in reverse
        for i in range(0, 5000, 200):
            for s in reversed(order[i:i + 200]):
                w.add(s, M(s))
            msgs, h = w.remove_many()
            out += msgs
            assert h == order[i + 199]
        assert seqnos(out) == order
        assert w.size == 0 and w.capacity == 0

    def test_bad_input(self):
        w = AckReceiverWindow(1)
        with pytest.raises(ValueError):
            w.add(1, None)
        assert w.add(2, M(2)) == 1
        with pytest.raises(OverflowError, match="MAX_WINDOW"):
            w.add(2 + MAX_WINDOW, M(0))
        assert w.size == 1
        with pytest.raises(OverflowError):
            AckReceiverWindow(2**64)


# ------------------------------------------------------------------------------------------------ memory


def traced_growth(build):
    """(result of build(), bytes it left allocated) as seen by tracemalloc (which sees PyMem_Malloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        obj = build()
        gc.collect()
        return obj, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


SPREAD = [1, 2, 1000, MAX_WINDOW // 3, MAX_WINDOW // 2 + 17, MAX_WINDOW - 5, MAX_WINDOW]   # over 2^24 seqnos


class TestMemoryFollowsMessagesNotSpan:
    """Window memory grows with the messages held, not with the seqno span between them (issue 18: one
    crafted seqno far ahead used to allocate a slot per seqno of the span, up to 128 MB)."""

    LIMIT = 400_000

    def test_nak_window_with_a_handful_spread_over_max_window(self):
        msgs = [M(s) for s in SPREAD]

        def build():
            w = NakReceiverWindow()
            for m in msgs:
                assert w.add(m.seqno, m, 0)
            return w

        w, grown = traced_growth(build)
        assert w.size == len(SPREAD) and w.pending_xmits == MAX_WINDOW - len(SPREAD)
        assert grown < self.LIMIT and w.memory < self.LIMIT
        assert w.capacity == 5 * PAGE_SLOTS                      # 1, 2 and 1000 share a page
        assert w.retransmitter.num_runs == len(SPREAD) - 2     # the gaps between them (and 2..1000 is one)
        assert seqnos(w.get_range(0, 2**62)) == SPREAD
        assert w.missing()[0] == (3, 999) and len(w.missing()) == len(SPREAD) - 2
        # the real sender's messages still go through in order, and memory goes as they are delivered
        out = w.remove_many(True)
        assert seqnos(out) == [1, 2]
        for s in range(3, 1000):
            w.add(s, M(s), 0)
        assert seqnos(w.remove_many(True)) == list(range(3, 1001))
        w.stable(1000)
        assert w.capacity == 4 * PAGE_SLOTS

    def test_nak_gap_of_max_window_then_far_seqno(self):
        w = NakReceiverWindow()
        w.add(1, M(1), 0)
        w.remove_many(True)
        _, grown = traced_growth(lambda: w.add(MAX_WINDOW + 1, M(0), 0))
        assert grown < 50_000 and w.pending_xmits == MAX_WINDOW - 1    # one page, one range of one run
        with pytest.raises(OverflowError):
            w.add(2 * MAX_WINDOW + 2, M(0), 0)
        assert w.refused == 1

    def test_unicast_windows_with_a_handful_spread_over_max_window(self):
        msgs = [M(s) for s in SPREAD]

        def build():
            r = AckReceiverWindow(1)
            s = AckSenderWindow()
            for m in msgs:
                assert r.add(m.seqno, m) == 1
                assert s.add(m.seqno, m, 0)
            return r, s

        (r, s), grown = traced_growth(build)
        assert grown < 2 * self.LIMIT and r.memory < self.LIMIT and s.memory < self.LIMIT
        assert r.size == s.size == len(SPREAD)
        with pytest.raises(OverflowError):
            r.add(MAX_WINDOW + 1, M(0))
        assert r.refused == 1
        got, highest = r.remove_many()
        assert seqnos(got) == [1, 2] and highest == 2

    def test_retransmitter_range_memory_is_its_holes(self):
        def build():
            r = Retransmitter()
            r.add(1, MAX_WINDOW, 0)
            return r

        r, grown = traced_growth(build)
        assert r.size == MAX_WINDOW and grown < 10_000 and r.memory < 10_000
        for s in range(10, 10_000, 10):                 # 999 arrivals inside: 1000 runs
            assert r.remove(s) == 0
        assert r.num_runs == 1000 and r.memory < 100_000
        assert r.due(10**6, 25) == [(1, 9), (11, 19), (21, 27)]       # at most 25 seqnos per call
        r.remove_up_to(9_995)
        assert r.num_runs == 1 and r.size == MAX_WINDOW - 9_995


# ------------------------------------------------------------------------------------------------ references / leaks


class TestReferences:
    def test_refcounts_nak_window(self):
        m = M(1)
        base = sys.getrefcount(m)
        w = NakReceiverWindow()
        w.add(1, m, 0)
        assert sys.getrefcount(m) == base + 1
        w.add(1, m, 0)                              # duplicate: no extra reference
        assert sys.getrefcount(m) == base + 1
        assert w.remove_many(False) == [m]          # the temporary list is gone again
        assert sys.getrefcount(m) == base + 1
        assert w.get(1) is m and w.get_range(1, 1) == [m]
        assert sys.getrefcount(m) == base + 1
        w.stable(1)
        assert sys.getrefcount(m) == base
        w.add(2, m, 0)
        out = w.remove_many(True)
        assert sys.getrefcount(m) == base + 1       # only the list holds it
        del out
        assert sys.getrefcount(m) == base
        w.add(3, m, 0)
        w.add(5, m, 0)
        w.destroy()
        assert sys.getrefcount(m) == base
        w2 = NakReceiverWindow()
        w2.add(7, m, 0)
        del w2
        assert sys.getrefcount(m) == base

    def test_refcounts_unicast_windows(self):
        m = M(1)
        base = sys.getrefcount(m)
        s = AckSenderWindow()
        for i in range(1, 4):
            s.add(i, m, 0)
        assert sys.getrefcount(m) == base + 3
        due = s.due(1000)
        assert len(due) == 3
        del due
        assert sys.getrefcount(m) == base + 3
        s.ack(2)
        assert sys.getrefcount(m) == base + 1
        s.clear()
        assert sys.getrefcount(m) == base
        s.add(1, m, 0)
        del s
        assert sys.getrefcount(m) == base
        r = AckReceiverWindow(1)
        r.add(1, m)
        r.add(1, m)
        r.add(3, m)
        assert sys.getrefcount(m) == base + 2
        msgs, _ = r.remove_many()
        assert sys.getrefcount(m) == base + 2      # one in the window (3), one in the list (1)
        del msgs
        r.clear()
        assert sys.getrefcount(m) == base
        r.add(5, m)
        del r
        assert sys.getrefcount(m) == base

    def test_no_leak_100k(self):
        gc.collect()
        refs = []
        w = NakReceiverWindow()
        a = AckReceiverWindow(1)
        s = AckSenderWindow()
        delivered = 0
        n = 100_000
        for i in range(1, n + 1):
            seq = i + 1 if i % 100 == 1 else (i - 1 if i % 100 == 2 else i)   # swap pairs: gaps filled later
            m = M(seq)
            refs.append(weakref.ref(m))
            w.add(seq, m, i)
            w.add(seq, M(seq), i)                   # duplicates are dropped
            a.add(seq, m)
            s.add(i, m, i)
            if i % 64 == 0:
                delivered += len(w.remove_many(i % 128 == 0))
                a.remove_many()
                s.ack(i - 10)
                w.xmit_due(i + 1000)
                s.due(i + 1000)
            del m
        delivered += len(w.remove_many(False))
        assert delivered == n and w.highest_delivered == n
        w.stable(n // 2)
        assert any(r() is not None for r in refs)
        s.ack(n)
        a.remove_many()
        w.stable(n)
        assert a.size == 0 and s.size == 0 and w.size == 0
        assert all(r() is None for r in refs)
        # and the windows themselves go away cleanly
        for i in range(1, 1001):
            m = M(i)
            refs.append(weakref.ref(m))
            w.add(n + i, m, 0)
            a.add(n + i + 5, m)
            s.add(n + i, m, 0)
            del m
        del w, a, s
        gc.collect()
        assert all(r() is None for r in refs)


# ------------------------------------------------------------------------------------------------ stateful models


class NakModel:
    """Java's NakReceiverWindow with a dict and a set (RangeBasedRetransmitter reduced to its missing set)."""

    def __init__(self, hd, low):
        self.hd = self.hr = hd
        self.low = min(low, hd)
        self.msgs: dict[int, object] = {}
        self.xmit: set[int] = set()
        self.running = True

    def add(self, s, m):
        try:
            if not self.running:
                return False
            nxt = self.hr + 1
            if s == nxt:
                self.msgs[s] = m
                return True
            if s <= self.hd:
                return False
            if s < nxt:
                if s in self.msgs:
                    return False
                self.msgs[s] = m
                self.xmit.discard(s)
                return True
            self.msgs[s] = m
            self.xmit.update(range(nxt, s))
            return True
        finally:
            self.hr = max(self.hr, s)

    def remove_many(self, remove, max_results):
        out = []
        while self.hd + 1 in self.msgs:
            nxt = self.hd + 1
            out.append(self.msgs.pop(nxt) if remove else self.msgs[nxt])
            self.hd = nxt
            if max_results > 0 and len(out) >= max_results:
                break
        return out

    def stable(self, s):
        if s > self.hd:
            return False
        self.msgs = {k: v for k, v in self.msgs.items() if k > s}
        self.xmit = {k for k in self.xmit if k > s}
        self.low = max(self.low, s)
        return True

    def missing(self):
        return {s for s in range(self.hd + 1, self.hr + 1) if s not in self.msgs}


def runs(seqs):
    out = []
    for s in sorted(seqs):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


STATEFUL = settings(max_examples=100, stateful_step_count=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


class NakWindowMachine(RuleBasedStateMachine):
    """Random interleavings of add (any order, duplicates, gaps filled later), remove_many, stable."""

    set_hd_allowed = False

    @initialize(hd=st.sampled_from([0, 0, 5, 62, 1000, PAGE_SLOTS - 3, -PAGE_SLOTS - 7, 2**40, 2**63 - 300_000]),
                low_back=st.integers(0, 10))
    def init(self, hd, low_back):
        self.w = NakReceiverWindow(hd, hd - low_back, [100, 200, 400])
        self.m = NakModel(hd, hd - low_back)
        self.first = hd + 1
        self.delivered: list[int] = []
        self.now = 0
        self.hd_moved = False

    def _add(self, s):
        msg = M(s)
        assert self.w.add(s, msg, self.now) == self.m.add(s, msg)

    @rule(off=st.integers(-3, 40))
    def add_near(self, off):
        self._add(self.m.hd + off)

    @rule(off=st.integers(-3, 200))
    def add_far(self, off):
        self._add(self.m.hr + off)

    @precondition(lambda self: self.m.hr - self.m.hd < 4 * PAGE_SLOTS)     # keeps the model's sets small
    @rule(off=st.integers(PAGE_SLOTS - 2, 3 * PAGE_SLOTS + 2))
    def add_jump(self, off):
        """Far ahead: pages with nothing in them between the messages."""
        self._add(self.m.hr + off)

    @rule(data=st.data())
    def fill_gap(self, data):
        missing = sorted(self.m.missing())
        if missing:
            self._add(data.draw(st.sampled_from(missing)))

    @rule(data=st.data())
    def add_batch(self, data):
        offs = data.draw(st.lists(st.integers(-2, 30), max_size=20))
        ss = [self.m.hd + o for o in offs]
        ms = [M(s) for s in ss]
        expected = sum(self.m.add(s, m) for s, m in zip(ss, ms))
        assert self.w.add_many(ss, ms, self.now) == expected

    @rule(remove=st.booleans(), max_results=st.sampled_from([0, 0, 1, 3]))
    def remove_many(self, remove, max_results):
        got = self.w.remove_many(remove, max_results)
        exp = self.m.remove_many(remove, max_results)
        assert got == exp                              # identity of the stored objects (M has no __eq__)
        self.delivered += [g.seqno for g in got]

    @rule(back=st.integers(-2, 20))
    def stable(self, back):
        s = self.m.hd - back
        assert self.w.stable(s) == self.m.stable(s)

    @rule(dt=st.integers(0, 500))
    def tick(self, dt):
        self.now += dt
        for first, last in self.w.xmit_due(self.now):
            assert first <= last
            assert all(s in self.m.xmit for s in range(first, last + 1))

    @precondition(lambda self: self.set_hd_allowed)
    @rule(delta=st.integers(-3, 3))
    def set_hd(self, delta):
        new = self.m.hd + delta
        assert self.w.set_highest_delivered(new) == self.m.hd
        self.m.hd = new
        self.hd_moved = True

    @invariant()
    def agrees_with_model(self):
        w, m = self.w, self.m
        assert w.digest() == (m.low, m.hd, m.hr)
        assert w.size == len(m.msgs)
        assert w.pending_xmits == len(m.xmit)
        assert w.missing() == runs(m.missing())
        assert seqnos(w.get_range(-(2**63), 2**63 - 1)) == sorted(m.msgs)
        if not self.hd_moved:
            assert m.low <= m.hd <= m.hr
            assert self.delivered == list(range(self.first, m.hd + 1))    # exactly once, in order
            assert m.xmit == m.missing()                                    # retransmitter == missing
            assert w.pending_xmits == len(m.missing())
            assert w.retransmitter.size == sum(n for _, _, n, _, _ in w.retransmitter.ranges())


class NakWindowWithSetHdMachine(NakWindowMachine):
    set_hd_allowed = True


TestNakWindowStateful = NakWindowMachine.TestCase
TestNakWindowStateful.settings = STATEFUL
TestNakWindowStateful.pytestmark = [pytest.mark.slow]          # hundreds of long random runs
TestNakWindowWithSetHdStateful = NakWindowWithSetHdMachine.TestCase
TestNakWindowWithSetHdStateful.settings = STATEFUL
TestNakWindowWithSetHdStateful.pytestmark = [pytest.mark.slow]          # hundreds of long random runs


class XRangeModel:
    def __init__(self, first, last, now, iv):
        self.first, self.last = first, last
        self.missing = set(range(first, last + 1))
        self.nx = 0
        self.next = now + iv[0]
        self.stage = min(1, len(iv) - 1)
        self.resume = None          # the next seqno of a round a budget cut short


class RetransmitterMachine(RuleBasedStateMachine):
    """Retransmitter against a list of per-range models: add (overlapping), remove, remove_up_to, due."""

    @initialize(iv=st.sampled_from([[100], [100, 250, 50], [30, 60]]), exp=st.sampled_from([0, 0, 40]))
    def init(self, iv, exp):
        self.r = Retransmitter(iv, exp)
        self.iv = list(self.r.intervals)
        if exp:
            assert self.iv[0] == exp and self.iv[-1] == 15000
        else:
            assert self.iv == iv
        self.ranges: list[XRangeModel] = []
        self.now = 0

    @rule(first=st.integers(0, 80), length=st.integers(0, 15))
    def add(self, first, length):
        last = first + length
        covered = set()
        for x in self.ranges:
            covered.update(range(x.first, x.last + 1))
        for a, b in runs(set(range(first, last + 1)) - covered):
            self.ranges.append(XRangeModel(a, b, self.now, self.iv))
        self.ranges.sort(key=lambda x: x.first)
        if length % 3 == 0:
            self.r.add(last, first, self.now)   # swapped bounds are accepted
        else:
            self.r.add(first, last, self.now)

    @rule(s=st.integers(-1, 100))
    def remove(self, s):
        exp = 0
        for x in self.ranges:
            if s in x.missing:
                x.missing.discard(s)
                exp = x.nx
        self.ranges = [x for x in self.ranges if x.missing]
        assert self.r.remove(s) == exp

    @rule(s=st.integers(-1, 100))
    def remove_up_to(self, s):
        for x in self.ranges:
            x.missing = {k for k in x.missing if k > s}
        self.ranges = [x for x in self.ranges if x.missing]
        self.r.remove_up_to(s)

    @rule(dt=st.integers(0, 300), budget=st.sampled_from([0, 0, 1, 3, 7]))
    def due(self, dt, budget):
        """Lowest first; a range the budget cuts short stays due and goes on where it stopped."""
        self.now += dt
        exp = []
        left = budget or 10**9
        for x in self.ranges:
            if x.next <= self.now and left > 0:
                todo = sorted(k for k in x.missing if x.resume is None or k >= x.resume)
                if x.resume is None:
                    x.nx += 1
                taken = todo[:left]
                exp += runs(taken)
                left -= len(taken)
                if len(taken) < len(todo):
                    x.resume = taken[-1] + 1
                else:
                    x.resume = None
                    x.next = self.now + self.iv[x.stage]
                    x.stage = min(x.stage + 1, len(self.iv) - 1)
        assert self.r.due(self.now, budget) == exp

    @invariant()
    def agrees(self):
        assert self.r.size == sum(len(x.missing) for x in self.ranges)
        assert [(a, b, n, nx, t) for a, b, n, nx, t in self.r.ranges()] == \
               [(x.first, x.last, len(x.missing), x.nx, x.next) for x in self.ranges]
        assert self.r.next_due() == (min(x.next for x in self.ranges) if self.ranges else None)
        assert self.r.num_runs == sum(len(runs(x.missing)) for x in self.ranges)


TestRetransmitterStateful = RetransmitterMachine.TestCase
TestRetransmitterStateful.settings = STATEFUL


class AckReceiverMachine(RuleBasedStateMachine):
    @initialize(start=st.sampled_from([1, 1, 60, 10**9]))
    def init(self, start):
        self.w = AckReceiverWindow(start)
        self.start = start
        self.ntr = start
        self.msgs: dict[int, object] = {}
        self.delivered: list[int] = []

    def _model_add(self, s, m):
        if s < self.ntr:
            return -1
        if s in self.msgs:
            return 0
        self.msgs[s] = m
        return 1

    @rule(off=st.integers(-5, 40))
    def add(self, off):
        s = self.ntr + off
        m = M(s)
        assert self.w.add(s, m) == self._model_add(s, m)

    @rule(data=st.data())
    def add_batch(self, data):
        ss = [self.ntr + o for o in data.draw(st.lists(st.integers(-5, 30), max_size=16))]
        ms = [M(s) for s in ss]
        codes = [self._model_add(s, m) for s, m in zip(ss, ms)]
        old = [s for s, c in zip(ss, codes) if c == -1]
        assert self.w.add_many(ss, ms) == (codes.count(1), max(old) if old else None)

    @rule(max_results=st.sampled_from([0, 0, 1, 2, 5]))
    def remove_many(self, max_results):
        exp = []
        while self.ntr in self.msgs and (max_results <= 0 or len(exp) < max_results):
            exp.append(self.msgs.pop(self.ntr))
            self.ntr += 1
        got, highest = self.w.remove_many(max_results)
        assert got == exp
        assert highest == (self.ntr - 1 if exp else 0)
        self.delivered += [g.seqno for g in got]

    @invariant()
    def agrees(self):
        assert self.w.next_to_remove == self.ntr
        assert self.w.size == len(self.msgs)
        assert self.delivered == list(range(self.start, self.ntr))


TestAckReceiverStateful = AckReceiverMachine.TestCase
TestAckReceiverStateful.settings = STATEFUL


class AckSenderMachine(RuleBasedStateMachine):
    @initialize(iv=st.sampled_from([[100], [100, 200, 400], [50, 20]]))
    def init(self, iv):
        self.iv = iv
        self.w = AckSenderWindow(iv)
        self.lowest = 1
        self.next_seqno = 1
        self.msgs: dict[int, list] = {}       # seqno -> [msg, next_time, stage]
        self.now = 0

    @rule(n=st.integers(1, 5))
    def send(self, n):
        for _ in range(n):
            s = self.next_seqno
            self.next_seqno += 1
            m = M(s)
            assert self.w.add(s, m, self.now)
            self.msgs[s] = [m, self.now + self.iv[0], min(1, len(self.iv) - 1)]

    @rule(back=st.integers(0, 8))
    def add_again(self, back):
        s = self.next_seqno - 1 - back
        assert not self.w.add(s, M(s), self.now)     # present (duplicate) or already acked

    @rule(off=st.integers(-3, 6))
    def ack(self, off):
        s = min(self.lowest + off, self.next_seqno - 1)    # acks only cover what was sent
        exp = 0
        if s >= self.lowest:
            exp = sum(1 for k in self.msgs if k <= s)
            self.msgs = {k: v for k, v in self.msgs.items() if k > s}
            self.lowest = s + 1
        assert self.w.ack(s) == exp

    @rule(dt=st.integers(0, 250))
    def due(self, dt):
        self.now += dt
        exp = []
        for s in sorted(self.msgs):
            v = self.msgs[s]
            if v[1] <= self.now:
                exp.append((s, v[0]))
                v[1] = self.now + self.iv[v[2]]
                v[2] = min(v[2] + 1, len(self.iv) - 1)
        assert self.w.due(self.now) == exp

    @invariant()
    def agrees(self):
        assert self.w.size == len(self.msgs)
        assert self.w.lowest_seqno == self.lowest
        low = self.msgs.get(self.lowest)
        assert self.w.lowest() == ((self.lowest, low[0]) if low else None)
        assert self.w.next_due() == (min(v[1] for v in self.msgs.values()) if self.msgs else None)


TestAckSenderStateful = AckSenderMachine.TestCase
TestAckSenderStateful.settings = STATEFUL
