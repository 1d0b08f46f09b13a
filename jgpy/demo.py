"""The demo behind ``make demo`` / ``python -m jgpy demo``: a mixed Python/Java cluster on loopback.

A Java JGroups 2.12.2 member (the jar's unchanged ``udp.xml``) starts the cluster; two jgpy members join
it; everybody multicasts numbered messages and sends a few unicasts; each member checks it got
everything, in order, without duplicates. A tap on the multicast group meanwhile decodes the traffic with
jgpy's codec and re-encodes it byte for byte. Then a short throughput run, and a clean shutdown.
"""

from __future__ import annotations

import collections
import threading
import time
import uuid
from pathlib import Path

from jgpy import DIALECT, WireFormatError
from jgpy._core import jg212
from jgpy.testing.cluster import JavaMember, JgpyMember, check_fifo, stock, wait_all
from jgpy.testing.java import java_unavailable_reason, udp_props, unique_group
from jgpy.tools.capture import MulticastTap


def _say(msg: str = "") -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}" if msg else "", flush=True)


def _views(member) -> str:
    return ", ".join(member.view_names())


def _check_journals(run_dir: Path) -> tuple[bool, str]:
    """The run's delivery journals through the PySpark checker (local mode): says the verdict and the report."""
    from jgpy.analysis.spark import spark_available
    _say()
    why = spark_available()
    if why:
        _say(f"the delivery journals in {run_dir} are not checked: {why}")
        return True, f"not checked ({why})"
    _say(f"checking this run's delivery journals with PySpark, local mode (python -m jgpy check {run_dir}) ...")
    from jgpy.analysis import CheckError, JournalError, check_run
    from jgpy.analysis.spark import get_session, stop_session
    try:
        spark = get_session(None)
        try:
            res = check_run(run_dir, spark=spark)
        finally:
            stop_session(spark)
    except (JournalError, CheckError) as e:
        _say(f"  the journal check failed: {e}")
        return False, f"the check failed: {e}"
    for f in res.findings:
        _say(f"  {f}")
    lat = res.stats.get("latency_overall") or {}
    _say(f"  {res.rows:,} journal rows of {len(res.stats['members'])} members in {res.seconds:.1f} s; latency p50 "
         f"{lat.get('p50_us') or 0:,.0f} us, p99 {lat.get('p99_us') or 0:,.0f} us")
    _say(f"  verdict: {res.verdict}; report: {res.report}")
    return res.ok, f"{res.verdict} ({len(res.findings)} findings), report `{res.report}`"


def run_demo(args) -> int:
    reason = java_unavailable_reason()
    if reason:
        _say(f"cannot run: {reason}")
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    group, port = unique_group()
    props = udp_props(group, port)
    cluster = f"demo-{uuid.uuid4().hex[:6]}"
    config = stock("udp.xml").with_properties("pbcast.GMS", print_local_addr="false")
    journals = out_dir / "journals" / f"run={cluster}"     # every member's delivery journal (python -m jgpy check)
    from jgpy.protocols.journal import with_journal
    config = with_journal(config, journals)
    import logging
    logging.getLogger("jgpy.config").setLevel(logging.ERROR)            # the stock file's Java-only knobs
    logging.getLogger("jgpy.protocols.UDP").setLevel(logging.ERROR)     # socket buffer sizes capped by the OS
    n = args.messages
    ok = True
    _say(f"cluster {cluster!r} on multicast group {group}:{port} (loopback), config: the jar's udp.xml")
    _say()
    members: list = []
    tap = MulticastTap(group, port)
    try:
        java = JavaMember("J1", "udp.xml", props)
        members.append(java)
        java.connect(cluster, journal=str(journals))
        _say(f"Java member J1 started: it is the coordinator.        view: [{_views(java)}]")
        for name in ("P1", "P2"):
            p = JgpyMember(name, config, props)
            members.append(p)
            t0 = time.monotonic()
            p.connect(cluster)
            _say(f"jgpy member {name} joined in {1000 * (time.monotonic() - t0):.0f} ms.          view: [{_views(p)}]")
        if not wait_all(lambda: all(m.view_names() == ["J1", "P1", "P2"] for m in members), 20):
            ok = False
        _say(f"every member has the same view: {members[0].view_id()} [{_views(members[0])}]")
        _say()
        _say(f"each member multicasts {n} numbered messages (half bytes, half Java Strings) and sends 100 "
             "unicasts to the next member ...")
        t0 = time.monotonic()
        errors = []

        def send(i, m):
            try:
                m.send_numbered(n // 2)
                m.send_numbered(n - n // 2, java_string=True, start=n // 2)
                m.send_numbered(100, dest_name=members[(i + 1) % len(members)].name)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{m.name}: {e}")
        threads = [threading.Thread(target=send, args=(i, m)) for i, m in enumerate(members)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for m in members:
            m.wait_received(3 * n, timeout=60)
            m.wait_received(100, unicast=True, timeout=30)
        elapsed = time.monotonic() - t0
        expected = {m.name: n for m in members}
        for i, m in enumerate(members):
            prev = members[(i - 1) % len(members)].name
            problems = check_fifo(m.received.by_sender, expected) + \
                check_fifo(m.received.unicast_by_sender, {prev: 100})
            got = ", ".join(f"{s}: {len(v)}" for s, v in sorted(m.received.by_sender.items()))
            verdict = "all in order, no gaps, no duplicates" if not problems else "; ".join(problems)
            ok = ok and not problems
            _say(f"  {m.name} ({m.kind:4}) received multicasts {{{got}}}, unicasts from {prev}: "
                 f"{len(m.received.unicast_by_sender.get(prev, []))} -> {verdict}")
        _say(f"  {3 * n * 3 + 300} deliveries in {elapsed:.1f} s")
        _say()
        _say("shutting down: P2 leaves, then P1, then J1")
        for m in (members[2], members[1]):
            m.close()
            members.remove(m)
            wait_all(lambda: all(x.view_names() == [y.name for y in members] for x in members), 10)
            _say(f"  {m.name} left.  view of J1: [{_views(members[0])}]")
        members[0].close()
        members.clear()
        _say("  J1 stopped.")
    finally:
        for m in members:
            try:
                m.close()
            except Exception:  # noqa: BLE001
                pass
        tap.close()

    packets = [p for p in tap.packets() if p.src[1] == port]
    exact = bad = 0
    counts: collections.Counter = collections.Counter()
    for p in packets:
        try:
            dg = DIALECT.decode_datagram(p.data)
            for m in dg.messages:
                for pid, hdr in m.headers:
                    counts[jg212.PROTOCOL_NAMES.get(pid, str(pid))] += 1
            again = (DIALECT.encode_bundle(dg.messages, dest=None, src=dg.messages[0].src, multicast=True)
                     if dg.is_list else DIALECT.encode_message(dg.messages[0], multicast=dg.is_multicast))
            exact += again == p.data
        except WireFormatError:
            bad += 1
    _say()
    _say(f"on the wire: {len(packets)} multicast datagrams; jgpy decoded {len(packets) - bad} and re-encoded "
         f"{exact} byte for byte")
    ok = ok and bad == 0 and exact == len(packets)

    _say()
    _say("throughput, 1 KB multicasts, 2 members, one sender (separate processes):")
    from jgpy.tools.perf import run_pair
    rows = []
    for s, r in (("J", "J"), ("P", "P"), ("P", "J")):
        o = run_pair(s, r, args.perf_count, 1000)
        rows.append(o)
        _say(f"  {o.label:14} {o.msgs_per_s:>10,.0f} msgs/s  ({o.received}/{o.expected} received)")

    journal_ok, journal_line = _check_journals(journals)
    ok = ok and journal_ok
    lines = [f"# jgpy demo ({time.strftime('%Y-%m-%d %H:%M:%S')})", "",
             f"Cluster of J1 (Java 2.12.2), P1, P2 (jgpy) on {group}:{port}, the jar's udp.xml.", "",
             f"- {n} multicasts and 100 unicasts per member, FIFO/no gaps/no duplicates: {'yes' if ok else 'NO'}",
             f"- multicast datagrams decoded/re-encoded exactly: {len(packets) - bad}/{exact} of {len(packets)}",
             "", "| sender -> receiver | msgs/s |", "|---|---:|"]
    lines += [f"| {o.label} | {o.msgs_per_s:,.0f} |" for o in rows]
    lines += ["", f"- delivery journals checked with PySpark: {journal_line}"]
    lines += ["", "| protocol | headers seen on the wire |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(counts.items())]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    _say()
    _say(("OK" if ok else "FAILED") + f": report written to {report}")
    return 0 if ok else 1
