"""The shared timer (``TimeScheduler``): one thread runs short tasks at their due time.

Retransmissions, heartbeats, gossip and timeouts all run here, so tasks must not block: anything that
waits (a join, a view installation collecting acks) runs on its own thread.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from typing import Callable

from jgpy._core.clock import now_ms

log = logging.getLogger("jgpy.timer")

__all__ = ["Task", "TimeScheduler", "now_ms"]


class Task:
    """A scheduled task; ``cancel()`` stops it (a running repetition finishes)."""

    __slots__ = ("fn", "interval", "cancelled", "name", "runs")

    def __init__(self, fn: Callable[[], object], interval: Callable[[], float] | None, name: str):
        self.fn = fn
        self.interval = interval          # None: one shot; else returns the next delay (ms), <= 0 stops
        self.cancelled = False
        self.name = name
        self.runs = 0

    def cancel(self) -> None:
        self.cancelled = True

    @property
    def done(self) -> bool:
        return self.cancelled or (self.interval is None and self.runs > 0)

    def __repr__(self) -> str:
        return f"Task({self.name}, runs={self.runs}{', cancelled' if self.cancelled else ''})"


class TimeScheduler:
    def __init__(self, name: str = "jgpy-timer"):
        self._heap: list[tuple[float, int, Task]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _push(self, due: float, task: Task) -> None:
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._seq), task))
            if self._heap[0][2] is task:
                self._cond.notify()

    def schedule(self, delay_ms: float, fn: Callable[[], object], name: str = "") -> Task:
        """Run ``fn`` once after ``delay_ms``."""
        task = Task(fn, None, name or getattr(fn, "__name__", "task"))
        self._push(now_ms() + max(0.0, delay_ms), task)
        return task

    def execute(self, fn: Callable[[], object], name: str = "") -> Task:
        """Run ``fn`` as soon as possible on the timer thread."""
        return self.schedule(0, fn, name)

    def schedule_with_fixed_delay(self, initial_ms: float, delay_ms: float, fn: Callable[[], object],
                                  name: str = "") -> Task:
        task = Task(fn, lambda: delay_ms, name or getattr(fn, "__name__", "task"))
        self._push(now_ms() + max(0.0, initial_ms), task)
        return task

    def schedule_dynamic(self, next_interval: Callable[[], float], fn: Callable[[], object], name: str = "") -> Task:
        """Run ``fn`` after ``next_interval()`` ms, again and again (a new interval each time)."""
        task = Task(fn, next_interval, name or getattr(fn, "__name__", "task"))
        self._push(now_ms() + max(0.0, next_interval()), task)
        return task

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._running and (not self._heap or self._heap[0][0] > now_ms()):
                    timeout = (self._heap[0][0] - now_ms()) / 1000.0 if self._heap else None
                    self._cond.wait(timeout if timeout is None else max(0.0005, timeout))
                if not self._running:
                    return
                _, _, task = heapq.heappop(self._heap)
            if task.cancelled:
                continue
            try:
                task.fn()
            except Exception:  # noqa: BLE001 - a failing task must not kill the timer
                log.exception("timer task %s failed", task.name)
            task.runs += 1
            if task.interval is not None and not task.cancelled:
                try:
                    delay = task.interval()
                except Exception:  # noqa: BLE001
                    log.exception("timer task %s: interval failed; stopping it", task.name)
                    continue
                if delay is not None and delay > 0:
                    self._push(now_ms() + delay, task)

    def size(self) -> int:
        with self._cond:
            return sum(1 for _, _, t in self._heap if not t.cancelled)

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._running = False
            self._heap.clear()
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
