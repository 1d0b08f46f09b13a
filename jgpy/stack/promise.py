"""A one-shot result that threads can wait for (``org.jgroups.util.Promise``)."""

from __future__ import annotations

import threading
import time
from typing import Any


class Promise:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._result: Any = None
        self._has = False

    def set(self, value: Any) -> None:
        with self._cond:
            self._result = value
            self._has = True
            self._cond.notify_all()

    def has_result(self) -> bool:
        return self._has

    def get(self, timeout_ms: float | None, reset: bool = True, stop: threading.Event | None = None) -> Any:
        """The result, waiting up to ``timeout_ms`` (giving up early once ``stop`` is set); None on timeout.
        Clears it unless ``reset`` is False."""
        deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms is not None else None
        with self._cond:
            while not self._has:
                if stop is not None and stop.is_set():
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(0.1 if stop is not None and (left is None or left > 0.1) else left)
            value = self._result if self._has else None
            if reset:
                self._has = False
                self._result = None
            return value

    def reset(self) -> None:
        with self._cond:
            self._has = False
            self._result = None
