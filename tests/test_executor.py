"""The delivery executor (jgpy.stack.executor.SerialExecutor): FIFO order, no lost wake-ups, drain and stop."""

from __future__ import annotations

import threading
import time

from jgpy.stack.executor import SerialExecutor


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

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
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
