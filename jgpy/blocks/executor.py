"""ExecutionService and ExecutionRunner: tasks run by whichever member has a free consumer
(``org.jgroups.blocks.executor``, JGroups 2.12.2, over CENTRAL_EXECUTOR).

jgpy's tasks are named functions with JSON arguments, registered on the runners (a task never carries code)::

    runner = ExecutionRunner(ch, {"square": lambda x: x * x})
    runner.start(threads=2)                     # consumers on this member
    fut = ExecutionService(ch2).submit("square", 7)
    fut.result(timeout=10)                      # 49, computed wherever a consumer was free

The pairing of tasks with consumers is 2.12's and interoperates with Java coordinators and backups; the tasks
themselves run only between jgpy members (see :mod:`jgpy.protocols.executing`).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, Mapping

from jgpy.protocols.executing import ExecutionError, Executing, decode_task, encode_task


def _executing(channel: Any) -> Executing:
    prot = channel.stack.find(Executing)
    if not isinstance(prot, Executing):
        raise ExecutionError("the channel's configuration must include CENTRAL_EXECUTOR")
    return prot


class ExecutionService:
    """Submits tasks to the cluster (``ExecutionService``)."""

    def __init__(self, channel: Any) -> None:
        self.protocol = _executing(channel)

    def submit(self, task: str, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run the task registered as ``task`` on some runner with these (JSON) arguments: its result, or an
        :class:`ExecutionError` naming the runner's exception, arrives in the future."""
        return self.protocol.submit(encode_task(task, args, kwargs))

    def cancel(self, future: Future[Any]) -> bool:
        """Cancel a task that no consumer took yet."""
        return self.protocol.cancel(future)


class ExecutionRunner:
    """Consumers for the cluster's tasks (``ExecutionRunner``): ``tasks`` maps task names to functions."""

    #: how long a consumer stays offered before it offers itself again (s)
    OFFER_TIME = 10.0

    def __init__(self, channel: Any, tasks: Mapping[str, Callable[..., Any]]) -> None:
        self.protocol = _executing(channel)
        self.tasks = dict(tasks)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.completed = 0

    def start(self, threads: int = 1) -> ExecutionRunner:
        self._stop.clear()
        for i in range(threads):
            t = threading.Thread(target=self._run, name=f"jgpy-exec-runner-{i}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.protocol.wake_consumers()
        for t in self._threads:
            t.join(timeout)
        self._threads = [t for t in self._threads if t.is_alive()]

    def __enter__(self) -> ExecutionRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        prot = self.protocol
        while not self._stop.is_set() and prot.running:
            task = prot.take_task(self.OFFER_TIME, self._stop.is_set)
            if task is None:
                continue
            try:
                name, args, kwargs = decode_task(task.payload)
                fn = self.tasks.get(name)
                if fn is None:
                    raise ExecutionError(f"no task {name!r} on {prot.local_addr}")
                value = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - the task's failure is its client's result
                prot.task_done(task, error=e)
            else:
                prot.task_done(task, value)
            self.completed += 1
