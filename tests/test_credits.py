"""CreditTable: the per-message credit bookkeeping of UFC/MFC (jgpy/_core/credits.pyx)."""

from __future__ import annotations

import threading

from jgpy import UUID
from jgpy._core.credits import CreditTable


def test_multicast_spends_only_when_every_member_has_enough():
    a, b, c = (UUID.random() for _ in range(3))
    t = CreditTable(1000)
    t.set_members([a, b, c])
    assert t.spend(b, 700) == 1 and t.lowest == 300
    assert not t.spend_all(400)                      # b has 300 left: nothing changes
    assert dict(t.items()) == {a: 1000, b: 300, c: 1000}
    assert t.spend_all(300) and dict(t.items()) == {a: 700, b: 0, c: 700} and t.lowest == 0


def test_unicast_results_and_credits_capped():
    a, b = UUID.random(), UUID.random()
    t = CreditTable(1000)
    t.set_members([a])
    assert t.spend(b, 1) == -1                       # not a member: nothing to count
    assert t.spend(a, 1001) == 0 and t.get(a) == 1000
    assert t.spend(a, 600) == 1 and t.lowest == 400
    assert t.add(a, 5000) and t.get(a) == 1000 and t.lowest == 1000
    assert not t.add(b, 10)
    assert t.below(1000) == [(a, 1000)] and t.below(999) == []


def test_members_come_and_go():
    a, b, c = (UUID.random() for _ in range(3))
    t = CreditTable(500)
    t.set_members([a, b])
    t.spend(a, 400)
    t.set_members([b, c])                            # a leaves: its low credit no longer holds multicasts back
    assert dict(t.items()) == {b: 500, c: 500} and t.lowest == 500 and a not in t and len(t) == 2


def test_concurrent_spending_and_credits_keep_the_books():
    members = [UUID.random() for _ in range(3)]
    t = CreditTable(10**9)
    t.set_members(members)
    n = 20000

    def spend():
        for _ in range(n):
            assert t.spend_all(10)

    def credit():
        for _ in range(n):
            for m in members:
                t.add(m, 10)
    threads = [threading.Thread(target=spend), threading.Thread(target=credit)]
    t.spend_all(10 * n)                              # room for the credits to come
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert all(v == 10**9 - 10 * n for _, v in t.items()), t


def test_random_operations_match_a_plain_model():
    """Multicasts are folded in lazily (``spend_all`` writes no member): every observable value must still be
    what a per-member model says."""
    import random
    rng = random.Random(7)
    pool = [UUID.random() for _ in range(5)]
    t, model, max_credits = CreditTable(10_000), {}, 10_000
    for _ in range(5000):
        op = rng.random()
        if op < 0.05:
            members = rng.sample(pool, rng.randint(1, 5))
            model = {m: model.get(m, max_credits) for m in members}
            t.set_members(members)
        elif op < 0.45:
            n = rng.randint(0, 3000)
            ok = bool(model) and min(model.values()) >= n
            assert t.spend_all(n) == (ok or not model)
            if ok:
                model = {m: c - n for m, c in model.items()}
        elif op < 0.7:
            m, n = rng.choice(pool), rng.randint(0, 3000)
            want = -1 if m not in model else int(model[m] >= n)
            assert t.spend(m, n) == want
            if want == 1:
                model[m] -= n
        else:
            m, n = rng.choice(pool), rng.randint(0, 4000)
            assert t.add(m, n) == (m in model)
            if m in model:
                model[m] = min(max_credits, model[m] + n)
        assert dict(t.items()) == model
        assert t.lowest == (min(model.values()) if model else max_credits)
        probe = rng.choice(pool)
        assert t.get(probe) == model.get(probe)
        assert sorted(t.below(2000), key=str) == sorted([(m, c) for m, c in model.items() if c <= 2000], key=str)


def test_receiver_credits_owe_a_sender_what_it_spent_once_it_drops_to_the_threshold():
    from jgpy._core.credits import ReceiverCredits
    rc = ReceiverCredits(1000, 400)
    rc.set_members(["A", "B"])
    assert rc.consumed("A", 500) == 0 and rc.left["A"] == 500
    assert rc.consumed("A", 100) == 600 and rc.left["A"] == 1000     # at the threshold: all it spent, replenished
    assert rc.consumed("A", 5000) == 1000 and rc.left["A"] == 1000   # overspent: never more than max_credits
    assert rc.consumed("C", 900) == 0 and "C" not in rc.left          # not a member: not counted
    assert rc.consumed("B", 0) == 0 and rc.left["B"] == 1000
    assert rc.consumed_all({"A": 300, "B": 700, "C": 50}) == [("B", 700)] and rc.left["A"] == 700
    assert rc.requested("A", 200) and rc.left["A"] == 900
    assert rc.requested("A", 5000) and rc.left["A"] == 1000           # capped
    assert not rc.requested("C", 10)
    rc.set_members(["B", "D"])
    assert rc.left == {"B": 1000, "D": 1000}


def test_a_batch_is_cut_after_each_message_that_takes_a_sender_to_its_threshold():
    """ReceiverCredits.delivery_chunks: the credits of a big batch fall due where Java's per-message accounting
    sends them; each chunk's counts are what consumed_all then turns into exactly one credit per cut."""
    from jgpy._core.credits import ReceiverCredits
    from jgpy._core.message import Message

    rc = ReceiverCredits(1000, 400)                      # a credit is owed once 600 bytes came from a sender
    rc.set_members(["A", "B"])

    def m(src, n, dest=None, flags=0):
        return Message(dest, b"x" * n, src, flags)

    few = [m("A", 100), m("B", 100)]
    assert rc.delivery_chunks(few, True, 4) == [(few, {"A": 100, "B": 100})]    # nobody there: one chunk, as is
    assert rc.delivery_chunks(few, True, 4)[0][0] is few
    batch = [m("A", 300), m("B", 200), m("A", 300),        # A reaches 600: cut after its second message
             m("A", 10, flags=4),                          # NO_FC: not counted
             m("A", 10, dest="me"),                        # a unicast: MFC does not count it
             m("C", 900),                                  # not a member: counted, never a cut
             m("B", 500),                                  # B reaches 700: cut
             m("A", 700)]                                  # A again (from a full window): cut, but it is the last
    chunks = rc.delivery_chunks(batch, True, 4)
    assert [c for c, _ in chunks] == [batch[:3], batch[3:7], batch[7:]]
    assert [counted for _, counted in chunks] == [{"A": 600, "B": 200}, {"C": 900, "B": 500}, {"A": 700}]
    assert rc.left == {"A": 1000, "B": 1000}               # the table itself is not touched
    owed = [rc.consumed_all(counted) for _, counted in chunks]
    assert owed == [[("A", 600)], [("B", 700)], [("A", 700)]]
    unicasts = rc.delivery_chunks(batch, False, 4)         # UFC counts the unicast only
    assert unicasts == [(batch, {"A": 10})]
