#!/usr/bin/env python3
"""The soak: a mixed Java/jgpy cluster under a nemesis, every delivery journaled and checked by PySpark.

Members (default ``J,J,p,p``: two Java 2.12.2 processes, two jgpy processes) run the jar's udp.xml with
DISCARD above UDP (failure detection and merging shortened so that each fault resolves within the run) and
multicast numbered messages at ``--rate`` per member, plus unicasts to each other. A nemesis thread meanwhile, one
fault at a time:

* ``kill``: ``kill -9`` a random member, mark the crash in its journal, and a few seconds later start a new
  incarnation of it (a new name: ``J1``, ``J1r2``, ...) that joins and sends;
* ``partition``: split the live members into two random halves with DISCARD (kept across views) for a
  while, then heal; MERGE2 merges the subgroups;
* ``loss``: every member drops ``--loss`` (a range, e.g. 0.05-0.10) of what it sends and receives for a
  while.

At the end the traffic stops, the faults are healed, the members settle on one view and leave cleanly, and
the checker (``jgpy.analysis``, Spark local mode) reads every journal: the run passes with zero errors
(loss, gaps, duplicates, FIFO violations, view disagreement). A summary goes to ``RUN_DIR/soak.md``.

    python benchmarks/soak.py --minutes 20 [--members J,J,p,p] [--loss 0.05-0.10] [--dir build/soak] [--seed 1]

``make soak`` runs it (``SOAK_MINUTES``, ``SOAK_MEMBERS``). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.journal import mark_crash  # noqa: E402
from jgpy.testing.cluster import stock  # noqa: E402
from jgpy.testing.java import HarnessNode, JavaError, JavaNode, PyNode, udp_props, unique_group  # noqa: E402


def say(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def soak_config():
    """udp.xml with DISCARD above UDP; faults detected and merged within seconds, as in tests/test_merge.py."""
    return (stock().insert("DISCARD", {}, after="UDP")
            .with_properties("MERGE2", min_interval="3000", max_interval="6000")
            .with_properties("FD_ALL", interval="1000", timeout="6000")
            .with_properties("VERIFY_SUSPECT", timeout="1500"))


@dataclass
class Slot:
    """One place in the cluster; each (re)start is a new incarnation with a new name."""

    kind: str                    # "J" or "p"
    base: str
    incarnation: int = 0
    node: HarnessNode | None = None
    sent: int = 0
    alive: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return self.base if self.incarnation <= 1 else f"{self.base}r{self.incarnation}"


def loss_range(text: str) -> tuple[float, float]:
    """``--loss``: a rate ("0.05") or a range ("0.05-0.10")."""
    lo, _, hi = text.partition("-")
    return float(lo), float(hi or lo)


class Soak:
    def __init__(self, args):
        self.args = args
        self.rnd = random.Random(args.seed)
        self.run_dir = Path(args.dir) / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        self.run_dir.mkdir(parents=True)
        addr, port = unique_group()
        self.props = udp_props(addr, port)
        self.cluster = f"soak-{uuid.uuid4().hex[:8]}"
        self.config = self.run_dir / "soak.xml"
        self.config.write_text(soak_config().to_xml())
        counts: dict[str, int] = {}
        self.slots = []
        for k in args.members.split(","):
            counts[k] = counts.get(k, 0) + 1
            self.slots.append(Slot(k, ("J" if k == "J" else "P") + str(counts[k])))
        self.stop = threading.Event()
        self.faults: list[dict] = []
        self.partitioned = False
        self.loss = loss_range(args.loss)

    # ---- members ----

    def start_slot(self, slot: Slot) -> None:
        slot.incarnation += 1
        node = (JavaNode if slot.kind == "J" else PyNode)(name=slot.name)
        node.connect(str(self.config), self.cluster, self.props, receive="count", journal=str(self.run_dir),
                     timeout=120)
        with slot.lock:
            slot.node, slot.sent, slot.alive = node, 0, True
        threading.Thread(target=self.traffic, args=(slot, node), name=f"traffic-{slot.name}", daemon=True).start()

    def live(self) -> list[Slot]:
        return [s for s in self.slots if s.alive]

    def traffic(self, slot: Slot, node: HarnessNode) -> None:
        """Multicast numbered messages in batches, and after every fifth batch a batch of unicasts to another
        member. Each (sender, destination) stream is numbered on its own from 0; a destination that failed
        once (it left or crashed: incarnations never come back under the same name) gets nothing more, so no
        stream has a hole the checker would report as a gap."""
        batch, rounds = self.args.batch, 0
        ucast_next: dict[str, int] = {}
        gone: set[str] = set()
        pause = batch / self.args.rate if self.args.rate > 0 else 0.0
        while not self.stop.is_set() and slot.node is node:
            t0 = time.monotonic()
            try:
                node.send(payload=slot.name.encode(), count=batch, numbered=True, start=slot.sent, timeout=300)
            except (JavaError, RuntimeError, OSError):
                return                        # killed, or the run is over
            slot.sent += batch
            rounds += 1
            peers = [s.name for s in self.live() if s is not slot and s.name not in gone]
            if peers and rounds % 5 == 0:
                dest = self.rnd.choice(peers)
                k = ucast_next.get(dest, 0)
                try:
                    node.send(payload=slot.name.encode(), dest=dest, count=batch // 5, numbered=True, start=k,
                              timeout=300)
                    ucast_next[dest] = k + batch // 5
                except (JavaError, RuntimeError, KeyError, OSError):
                    gone.add(dest)
            self.stop.wait(max(0.0, pause - (time.monotonic() - t0)))

    def discard(self, slot: Slot, **kw) -> None:
        try:
            slot.node.call("discard", timeout=90, **kw)
        except (JavaError, RuntimeError, OSError) as e:
            say(f"  discard on {slot.name} failed: {e}")

    # ---- faults ----

    def kill(self) -> None:
        victims = self.live()
        if len(victims) <= 2:
            return
        slot = self.rnd.choice(victims)
        say(f"kill -9 {slot.name}")
        with slot.lock:
            slot.alive = False
            node, slot.node = slot.node, None
        t = time.monotonic_ns()
        node.proc.kill()
        node.proc.wait(30)
        mark_crash(self.run_dir, node.name, t)
        node.close()
        self.faults.append({"fault": "kill", "member": node.name, "t": time.time()})
        self.stop.wait(self.rnd.uniform(4, 10))
        self.start_slot(slot)
        say(f"  restarted as {slot.name}")

    def partition(self) -> None:
        live = self.live()
        if len(live) < 2:
            return
        self.rnd.shuffle(live)
        cut = self.rnd.randrange(1, len(live))
        halves = [live[:cut], live[cut:]]
        say(f"partition {[s.name for s in halves[0]]} | {[s.name for s in halves[1]]}")
        self.partitioned = True
        for half in halves:
            others = [s.name for s in live if s not in half]
            for s in half:
                self.discard(s, ignore=others, keep=True)
        self.faults.append({"fault": "partition", "halves": [[s.name for s in h] for h in halves], "t": time.time()})
        self.stop.wait(self.rnd.uniform(10, 20))
        self.heal()

    def heal(self) -> None:
        if self.partitioned:
            say("heal")
            for s in self.live():
                self.discard(s, ignore=[])
            self.partitioned = False

    def lossy(self) -> None:
        p = self.rnd.uniform(*self.loss)
        say(f"loss {p:.1%} up and down on every member")
        for s in self.live():
            self.discard(s, up=p, down=p)
        self.faults.append({"fault": "loss", "rate": p, "t": time.time()})
        self.stop.wait(self.rnd.uniform(15, 30))
        for s in self.live():
            self.discard(s, up=0, down=0)

    def nemesis(self) -> None:
        actions = [self.kill, self.partition, self.lossy]
        while not self.stop.wait(self.rnd.uniform(8, 15)):
            self.rnd.choice(actions)()
            self.stop.wait(self.args.settle)          # let the cluster merge and catch up before the next fault

    # ---- the run ----

    def settle(self, quiet: float, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            views = []
            for s in self.live():
                try:
                    v = s.node.call("view", timeout=30)
                    views.append((json.dumps(v["view_id"], sort_keys=True), tuple(sorted(v["names"] or ()))))
                except (JavaError, RuntimeError):
                    views.append(None)
            if views != last:
                last, since = views, time.monotonic()
            elif len(set(views)) == 1 and len(views[0][1]) == len(views) and time.monotonic() - since >= quiet:
                return True
            time.sleep(0.5)
        return False

    def run(self) -> int:
        say(f"run directory {self.run_dir}; members {[s.base for s in self.slots]}; {self.args.minutes} min")
        for s in self.slots:
            self.start_slot(s)
        nem = threading.Thread(target=self.nemesis, name="nemesis", daemon=True)
        t_end = time.monotonic() + self.args.minutes * 60
        nem.start()
        while time.monotonic() < t_end:
            time.sleep(10)
            say(f"  sent so far: {sum(s.sent for s in self.slots):,} (this incarnation of each member)")
        self.stop.set()
        nem.join(120)
        self.heal()
        for s in self.live():
            self.discard(s, up=0, down=0)
        say("traffic stopped; waiting for one view and quiet")
        settled = self.settle(15, 180)
        say(f"  settled: {settled}; waiting for the retransmissions to drain")
        time.sleep(20)
        for s in self.live():
            try:
                s.node.call("disconnect", timeout=120)
            except (JavaError, RuntimeError) as e:
                say(f"  disconnect of {s.name} failed: {e}")
        for s in self.slots:
            if s.node is not None:
                s.node.close()
        return self.check(settled)

    def title(self) -> str:
        return (f"{self.args.minutes:g} min, members {self.args.members}, {self.args.rate:g} multicasts/s per member, "
                f"seed {self.args.seed}")

    def check(self, settled: bool) -> int:
        from jgpy.analysis import check_run
        from jgpy.analysis.spark import get_session, stop_session
        say("checking the journals (PySpark, local mode)")
        spark = get_session(None, driver_memory=self.args.checker_memory)
        try:
            res = check_run(self.run_dir, spark=spark)
        finally:
            stop_session(spark)
        deliveries = sum(m.get("deliveries", 0) for m in res.stats["members"].values())
        errors = [f for f in res.findings if f.severity == "error"]
        kinds = {}
        for f in self.faults:
            kinds[f["fault"]] = kinds.get(f["fault"], 0) + 1
        lines = [f"### {time.strftime('%Y-%m-%d %H:%M')}: {self.title()}", "",
                 f"- deliveries checked: {deliveries:,} ({res.rows:,} journal rows, {len(res.stats['members'])} "
                 f"member incarnations); checker {res.seconds:.0f} s",
                 f"- faults: {', '.join(f'{k} x {v}' for k, v in sorted(kinds.items()))}; loss "
                 f"{self.loss[0]:.0%}-{self.loss[1]:.0%} while on",
                 f"- settled on one view at the end: {settled}",
                 f"- verdict: **{res.verdict}**; errors: {len(errors)}"]
        lines += [f"  - {f}" for f in res.findings]
        lines += [f"- report: `{res.report}`", ""]
        text = "\n".join(lines)
        (self.run_dir / "soak.md").write_text(text)
        (self.run_dir / "faults.json").write_text(json.dumps(self.faults, indent=1))
        print(text, flush=True)
        if not self.args.no_write:
            publish(text)
        return 0 if res.ok and settled else 1


class Recheck(Soak):
    """A finished run's journals checked again (``--recheck RUN_DIR``: after a checker fix); its summary is
    published as a new entry that says so."""

    def __init__(self, args, run_dir: Path):
        self.args, self.run_dir = args, run_dir
        summary = (run_dir / "soak.md").read_text()
        again = f" (journals of {run_dir.name} checked again)"
        self._title = summary.splitlines()[0].split(": ", 1)[1].removesuffix(again) + again
        self.settled = "settled on one view at the end: True" in summary
        self.faults = json.loads((run_dir / "faults.json").read_text())
        self.loss = loss_range(args.loss)

    def title(self) -> str:
        return self._title


def publish(text: str, keep: int = 6) -> None:
    """Put a run's summary at the top of ``benchmarks/SOAK.md`` (the last ``keep`` runs, passed or not) and
    ``benchmarks/RESULTS.md``'s soak section in step with it (``make bench`` copies the file in as well)."""
    old = SOAK_MD.read_text().split(RUN_SEP)[1:] if SOAK_MD.exists() else []
    runs = [text.strip().removeprefix("### ")] + [r.strip() for r in old]
    SOAK_MD.write_text(SOAK_HEAD + "".join(RUN_SEP + r + "\n" for r in runs[:keep]))
    results = ROOT / "benchmarks" / "RESULTS.md"
    if results.exists():
        md = results.read_text()
        cut = md.rfind("\nRaw figures:")
        body, tail = (md[:cut], md[cut:]) if cut >= 0 else (md, "")
        body = body.split("\n" + SECTION_TITLE)[0].rstrip("\n")
        results.write_text(body + "\n\n" + soak_section() + tail)


SOAK_MD = ROOT / "benchmarks" / "SOAK.md"
SECTION_TITLE = "## Soak (`make soak`: benchmarks/soak.py)"
SOAK_HEAD = ("# Soak runs\n\nThe latest runs of `make soak` (benchmarks/soak.py), newest first: a cluster under a "
             "nemesis (kill -9 and restart, partitions, loss), every delivery journaled and checked by PySpark.\n")
RUN_SEP = "\n### "


def soak_section() -> str:
    """The soak section of RESULTS.md: the runs of ``benchmarks/SOAK.md``."""
    if not SOAK_MD.exists():
        return ""
    runs = SOAK_MD.read_text().split(RUN_SEP)[1:]
    return SECTION_TITLE + "\n" + "".join(RUN_SEP + r.rstrip() + "\n" for r in runs) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--members", default="J,J,p,p", help="J: Java 2.12.2 process, p: jgpy process")
    ap.add_argument("--loss", default="0.05-0.10", help="loss rate (or range) while a loss fault is on")
    ap.add_argument("--batch", type=int, default=100, help="messages per send command")
    ap.add_argument("--rate", type=float, default=3000, help="multicasts per second per member (0: as fast as "
                    "flow control lets them)")
    ap.add_argument("--settle", type=float, default=20, help="seconds between the end of a fault and the next")
    ap.add_argument("--dir", default=str(ROOT / "build" / "soak"))
    ap.add_argument("--checker-memory", default="8g", help="the checker's Spark driver memory (a window holds one "
                    "stream of one member)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--no-write", action="store_true", help="do not update benchmarks/SOAK.md and RESULTS.md")
    ap.add_argument("--recheck", default="", help="check the journals of this finished run directory again")
    args = ap.parse_args(argv)
    if args.recheck:
        r = Recheck(args, Path(args.recheck))
        return r.check(r.settled)
    return Soak(args).run()


if __name__ == "__main__":
    sys.exit(main())
