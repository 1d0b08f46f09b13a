"""RateLimitedLog: one line per key and interval, a bounded key table, tracebacks rate-limited too."""

from __future__ import annotations

import logging

from jgpy.stack.logutil import RateLimitedLog


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def _log(name: str):
    logger = logging.getLogger(f"jgpy.test.logutil.{name}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    cap = _Capture()
    logger.addHandler(cap)
    return logger, cap


def test_one_line_per_key_and_interval_then_the_count():
    logger, cap = _log("count")
    rl = RateLimitedLog(logger, interval=60)
    assert rl.warning("k", "first %d", 1)
    for _ in range(5):
        assert not rl.warning("k", "again")
    assert rl.warning("other", "other key")
    assert [r.getMessage() for r in cap.records] == ["first 1", "other key"]
    rl.interval = 0
    assert rl.warning("k", "later")
    assert cap.records[-1].getMessage() == "later (and 5 more like this in the last 0s)"


def test_key_table_is_bounded_and_a_flood_of_keys_is_limited():
    logger, cap = _log("bounded")
    rl = RateLimitedLog(logger, interval=60, max_keys=8)
    for i in range(10_000):
        rl.warning(f"sender-{i}", "from a made-up sender %d", i)
    assert len(rl) == 8
    assert len(cap.records) == 8            # every key busy: the rest is suppressed, not logged
    assert rl.suppressed == 10_000 - 8


def test_quiet_keys_make_room():
    logger, cap = _log("room")
    rl = RateLimitedLog(logger, interval=0.0, max_keys=4)
    for i in range(100):
        assert rl.warning(f"k{i}", "line")
    assert len(rl) == 4 and len(cap.records) == 100


def test_exception_is_rate_limited_with_its_traceback():
    logger, cap = _log("exc")
    rl = RateLimitedLog(logger, interval=60)
    for _ in range(3):
        try:
            raise ValueError("bad header")
        except ValueError:
            rl.exception("bad", "handling failed")
    assert len(cap.records) == 1
    assert cap.records[0].exc_info[0] is ValueError


def test_disabled_level_costs_no_key():
    logger, cap = _log("disabled")
    logger.setLevel(logging.ERROR)
    rl = RateLimitedLog(logger)
    assert not rl.warning("k", "ignored")
    assert len(rl) == 0 and not cap.records
