"""A one-shot result that threads can wait for (``org.jgroups.util.Promise``)."""

from __future__ import annotations

import threading
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

    def get(self, timeout_ms: float, reset: bool = True) -> Any:
        """The result, waiting up to ``timeout_ms``; None on timeout. Clears it unless ``reset`` is False."""
        with self._cond:
            self._cond.wait_for(lambda: self._has, timeout_ms / 1000.0 if timeout_ms is not None else None)
            value = self._result if self._has else None
            if reset:
                self._has = False
                self._result = None
            return value

    def reset(self) -> None:
        with self._cond:
            self._has = False
            self._result = None
