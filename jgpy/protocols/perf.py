"""PERF: where the time goes above this layer (seed 002's PERF; not in the 2.12 jar, so a jgpy protocol without
a header: nothing changes on the wire, and Java members need not have it).

Placed anywhere in a stack, it times every batch it passes up (the time the layers above and the application take
for it, on the delivering thread) and every message it passes down (the time of the layers below, on the sending
thread), and counts messages and bytes both ways. ``dump_stats`` gives counts, totals and the slowest batch and
send; ``print_stats`` a line per direction. Old JGroups' PERF put timestamps into a header of every message to
time the layers between two members; a capture (``python -m jgpy sniff``) and the delivery journals do that
here."""

from __future__ import annotations

import time
from typing import Any

from jgpy.stack.protocol import Protocol


class PERF(Protocol):
    NAME = "PERF"

    def __init__(self) -> None:
        super().__init__()
        self.reset_stats()

    def reset_stats(self) -> None:
        self.up_batches = self.up_msgs = self.up_bytes = self.down_msgs = self.down_bytes = 0
        self.up_ns = self.down_ns = self.max_up_ns = self.max_down_ns = 0

    def up_batch(self, msgs: list) -> None:
        t0 = time.perf_counter_ns()
        try:
            self.up_prot.up_batch(msgs)
        finally:
            dt = time.perf_counter_ns() - t0
            self.up_batches += 1
            self.up_msgs += len(msgs)
            self.up_bytes += sum(m.length for m in msgs)
            self.up_ns += dt
            if dt > self.max_up_ns:
                self.max_up_ns = dt

    def down_msg(self, msg) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return self.down_prot.down_msg(msg)
        finally:
            dt = time.perf_counter_ns() - t0
            self.down_msgs += 1
            self.down_bytes += msg.length
            self.down_ns += dt
            if dt > self.max_down_ns:
                self.max_down_ns = dt

    def dump_stats(self) -> dict[str, Any]:
        return {"up_batches": self.up_batches, "up_msgs": self.up_msgs, "up_bytes": self.up_bytes,
                "up_us_per_msg": self.up_ns / 1000 / self.up_msgs if self.up_msgs else 0.0,
                "max_up_batch_us": self.max_up_ns / 1000, "down_msgs": self.down_msgs, "down_bytes": self.down_bytes,
                "down_us_per_msg": self.down_ns / 1000 / self.down_msgs if self.down_msgs else 0.0,
                "max_down_us": self.max_down_ns / 1000}

    def print_stats(self) -> str:
        s = self.dump_stats()
        return (f"up: {s['up_msgs']} msgs in {s['up_batches']} batches, {s['up_us_per_msg']:.2f} us/msg above, "
                f"slowest batch {s['max_up_batch_us']:.0f} us\n"
                f"down: {s['down_msgs']} msgs, {s['down_us_per_msg']:.2f} us/msg below, slowest "
                f"{s['max_down_us']:.0f} us")
