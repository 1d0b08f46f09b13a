"""The delivery executors (jgpy.stack.executor): FIFO order, no lost wake-ups, drain and stop;
submitters that run tasks themselves: caller_runs (thread pools disabled) and relay (receive threads)."""

from __future__ import annotations

import threading
import time

import pytest

from jgpy._core.sync import Handoff, Lock
from jgpy.stack.executor import SerialExecutor, Wakeup, register_relay
from tests.conftest import run_threads


def test_fifo_from_several_threads_and_no_lost_wakeups():
    """4 threads submit 20,000 tasks each, with pauses that let the executor fall asleep between bursts: every
    task runs once, each thread's tasks in submission order, and drain() returns only when all have run."""
    ex = SerialExecutor("test-exec")
    seen: dict[int, list[int]] = {t: [] for t in range(4)}

    def task(t: int, i: int) -> None:
        seen[t].append(i)

    def producer(t: int) -> None:
        for i in range(20_000):
            ex.submit(task, t, i)
            if i % 997 == 0:
                time.sleep(0.001)                # the executor empties its queue and sleeps

    try:
        run_threads(producer, 4)
        assert ex.drain(timeout=30)
        assert all(seen[t] == list(range(20_000)) for t in range(4))
        # one task after a pause: the sleeping thread is woken for it
        time.sleep(0.05)
        done = threading.Event()
        ex.submit(done.set)
        assert done.wait(5)
    finally:
        ex.stop()


def test_drain_waits_for_the_running_task_and_failures_do_not_stop_the_thread(caplog):
    ex = SerialExecutor("test-exec")
    gate = threading.Event()
    ran: list[str] = []
    try:
        ex.submit(lambda: gate.wait(5) and ran.append("slow"))
        ex.submit(lambda: 1 / 0)
        ex.submit(lambda: ran.append("after"))
        assert not ex.drain(timeout=0.2)         # the first task is still running
        gate.set()
        assert ex.drain(timeout=5)
        assert ran == ["slow", "after"]
        assert "task" in caplog.text and "ZeroDivisionError" in caplog.text
        assert ex.drain(timeout=0) and ex.pending == 0
    finally:
        ex.stop()


def test_stop_drops_or_runs_what_is_queued():
    for drain, expect in ((False, []), (True, [1, 2])):
        ex = SerialExecutor("test-exec")
        gate = threading.Event()
        ran: list[int] = []
        ex.submit(gate.wait, 5)
        ex.submit(ran.append, 1)
        ex.submit(ran.append, 2)
        stopper = threading.Thread(target=ex.stop, kwargs={"timeout": 5, "drain": drain})
        stopper.start()
        time.sleep(0.1)
        gate.set()
        stopper.join(10)
        assert not ex._thread.is_alive()
        assert ran == expect
        ex.submit(ran.append, 3)                 # after stop: ignored
        assert ran == expect


def test_handoff_with_a_dozing_consumer_loses_nothing_and_keeps_order():
    """The loopback's hand-off (C appends, take-all) with a consumer that dozes before it asks to be woken:
    4 producers with pauses, every item arrives once, each producer's items in order, and the consumer
    was woken far fewer times than items were put."""
    wakeup = Wakeup()
    wakes = [0]
    real_wake = wakeup.wake

    class CountingWakeup:                       # Handoff reads .sleeping and calls .wake()
        @property
        def sleeping(self) -> bool:
            return wakeup.sleeping

        def wake(self) -> None:
            wakes[0] += 1
            real_wake()

    q = Handoff(CountingWakeup())
    got: dict[int, list[int]] = {t: [] for t in range(4)}
    stop = threading.Event()

    def consumer() -> None:
        while not (stop.is_set() and not len(q)):
            if not len(q):
                wakeup.sleep_unless(lambda: len(q) > 0 or stop.is_set(), 0.0001)
                continue
            for t, i in q.take():
                got[t].append(i)

    def producer(t: int) -> None:
        for i in range(20_000):
            q.add((t, i))
            if i % 2_000 == 0:
                time.sleep(0.002)               # the consumer empties the queue and sleeps

    c = threading.Thread(target=consumer)
    c.start()
    try:
        run_threads(producer, 4)
    finally:
        stop.set()
        wakeup.wake()
        c.join(10)
    assert not c.is_alive()
    assert all(got[t] == list(range(20_000)) for t in range(4))
    assert wakes[0] < 20_000, wakes[0]


def test_send_core_lock_excludes_and_never_blocks_holding_the_gil():
    """sync.Lock (the cores' lock): mutual exclusion between Python (with) users; a thread waiting for it lets others run."""
    lock = Lock()
    assert lock.acquire() is True
    ran = threading.Event()
    entered = threading.Event()

    def waiter() -> None:
        with lock:
            entered.set()

    t = threading.Thread(target=waiter)
    t.start()
    other = threading.Thread(target=ran.set)       # runs while the waiter blocks: the GIL is free
    other.start()
    assert ran.wait(5)
    assert not entered.wait(0.1)
    lock.release()
    assert entered.wait(5)
    t.join(5)
    other.join(5)
    counter = [0]

    def bump() -> None:
        for _ in range(20_000):
            with lock:
                v = counter[0]
                time.sleep(0) if v % 5_000 == 0 else None
                counter[0] = v + 1

    run_threads(lambda _t: bump(), 3)
    assert counter[0] == 60_000



@pytest.mark.parametrize("mode", ["caller_runs", "relay"])
def test_submitters_run_tasks_one_at_a_time_in_order(mode, caplog):
    """caller_runs (thread_pool.enabled="false": every submitter may run tasks) and relay (the pools enabled: only
    receive threads that registered a relay may, between hand_over and take_back). 4 threads submit 5,000
    tasks each; in relay mode threads 0 and 1 have a relay, 2 and 3 do not. Every task runs once, each thread's
    in order, never two at a time; tasks run in the submitters that may run them, else on the executor's thread;
    a relay thread runs tasks only while its socket is handed over; a failing task is logged."""
    ex = SerialExecutor("test-exec-run", caller_runs=mode == "caller_runs", relay=mode == "relay")
    seen: dict[int, list[int]] = {t: [] for t in range(4)}
    where: dict[str, int] = {}
    active = [0]
    overlaps = [0]
    handed: dict[str, int] = {}              # relay thread name -> 1 between its hand_over and take_back
    outside = [0]                            # tasks a relay thread ran while its socket was not handed over

    def task(t: int, i: int) -> None:
        active[0] += 1
        if active[0] > 1:
            overlaps[0] += 1
        assert ex.in_thread()
        name = threading.current_thread().name
        where[name] = where.get(name, 0) + 1
        if name in handed and not handed[name]:
            outside[0] += 1
        if i % 50 == 0:
            time.sleep(0.0002)               # releases the GIL inside a task: others must queue meanwhile
        seen[t].append(i)
        active[0] -= 1
        if i == 4999 and t == 0:
            raise RuntimeError("boom")

    def producer(t: int) -> None:
        name = threading.current_thread().name
        if mode == "relay" and t < 2:
            handed[name] = 0
            register_relay(lambda: handed.__setitem__(name, handed[name] + 1) or True,
                           lambda: handed.__setitem__(name, handed[name] - 1))
        for i in range(5000):
            ex.submit(task, t, i)
            if i % 499 == 0:
                time.sleep(0.001)            # the executor goes idle

    try:
        if mode == "caller_runs":
            me = threading.current_thread().name
            ran = []
            ex.submit(lambda: ran.append((threading.current_thread().name, ex.in_thread())))
            assert ran == [(me, True)] and not ex.in_thread()
        run_threads(producer, 4)
        assert ex.drain(timeout=30)
        assert all(seen[t] == list(range(5000)) for t in range(4))
        assert overlaps[0] == 0 and outside[0] == 0
        assert all(v == 0 for v in handed.values())          # every hand_over was taken back
        in_submitters = sum(n for name, n in where.items() if name != "test-exec-run")
        assert in_submitters > 0, where
        if mode == "relay":                  # threads 2 and 3 hand over to the executor's thread (whose tasks a
            assert set(where) - {"test-exec-run"} <= set(handed), where     # relay thread may run while it drains)
            ran = []
            ex.submit(lambda: ran.append(threading.current_thread().name))
            assert ex.drain(timeout=5) and ran == ["test-exec-run"]
        assert "boom" in caplog.text
        order = []
        ex.submit(lambda: (ex.submit(order.append, "nested"), order.append("outer")))
        assert ex.drain(timeout=5) and order == ["outer", "nested"]     # nested: queued, runs after
    finally:
        ex.stop()


def test_a_relay_thread_that_refuses_to_hand_over_leaves_the_task_to_the_executor():
    """hand_over() returns False (its socket has a backlog): the task runs on the executor's thread, in order after
    what was queued, and take_back() is not called."""
    ex = SerialExecutor("test-exec-refuse", relay=True)
    calls: list[str] = []
    ran: list[tuple[str, int]] = []

    def receive_thread() -> None:
        register_relay(lambda: calls.append("hand_over") or False, lambda: calls.append("take_back"))
        for i in range(3):
            ex.submit(lambda i=i: ran.append((threading.current_thread().name, i)))

    try:
        run_threads(lambda _t: receive_thread(), 1)
        assert ex.drain(timeout=5)
        assert ran == [("test-exec-refuse", 0), ("test-exec-refuse", 1), ("test-exec-refuse", 2)]
        assert "take_back" not in calls and calls.count("hand_over") >= 1
    finally:
        ex.stop()


def test_enqueue_under_a_lock_keeps_its_order_and_runs_outside_it():
    """The ordering protocols hand over under the lock that orders their windows (enqueue) and run what is queued
    once they have released it (run_pending): two relay threads that number their tasks under one lock see them
    run in that order, and no task runs while its thread holds the lock."""
    ex = SerialExecutor("test-exec-order", relay=True)
    lock = threading.Lock()
    state = {"next": 0}
    ran: list[int] = []
    inside = threading.local()
    under_lock = [0]

    def task(n: int) -> None:
        if getattr(inside, "held", False):
            under_lock[0] += 1
        ran.append(n)
        if n % 97 == 0:
            time.sleep(0.0005)                   # the other thread queues meanwhile

    def receive_thread(_t: int) -> None:
        register_relay(lambda: True, lambda: None)
        for _ in range(3000):
            with lock:
                inside.held = True
                n = state["next"]
                state["next"] = n + 1
                run = ex.enqueue(task, n)
                inside.held = False
            if run:
                ex.run_pending()

    try:
        run_threads(receive_thread, 2)
        assert ex.drain(timeout=30)
        assert ran == list(range(6000)) and under_lock[0] == 0
    finally:
        ex.stop()


def test_a_relay_thread_running_tasks_does_not_hand_over_again_for_another_executor():
    """A receive thread that runs one executor's tasks between hand_over and take_back (a regular delivery) and
    queues a task on another relay executor (an OOB message) from inside one of them does not run it there: a
    nested take_back would take its socket back while the outer tasks still run. The task runs after the outer
    ones, on the other executor's thread or on this one once it is out (with a hand-over of its own)."""
    regular = SerialExecutor("test-exec-regular", relay=True)
    oob = SerialExecutor("test-exec-oob", relay=True)
    calls: list[str] = []
    ran: list[str] = []
    in_regular = threading.local()

    def oob_task(n: int) -> None:
        ran.append(f"oob-{n}" + (" nested" if getattr(in_regular, "on", False) else ""))

    def regular_task() -> None:
        in_regular.on = True
        try:
            ran.append("regular")
            oob.submit(oob_task, 1)
        finally:
            in_regular.on = False

    def receive_thread(_t: int) -> None:
        register_relay(lambda: calls.append("hand_over") or True, lambda: calls.append("take_back"))
        regular.submit(regular_task)
        oob.submit(oob_task, 2)

    try:
        run_threads(receive_thread, 1)
        assert regular.drain(timeout=5) and oob.drain(timeout=5)
        assert ran == ["regular", "oob-1", "oob-2"]
        assert calls[:2] == ["hand_over", "take_back"] and calls.count("hand_over") == calls.count("take_back")
        assert "hand_over" not in calls[2:] or calls[2:] == ["hand_over", "take_back"]
    finally:
        regular.stop()
        oob.stop()
