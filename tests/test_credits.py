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
