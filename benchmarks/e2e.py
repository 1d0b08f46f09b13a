#!/usr/bin/env python3
"""End-to-end benchmarks: Java-only, jgpy-only and mixed clusters in one invocation, plus the raw C limit.

Every member is its own process on loopback with the jar's ``udp.xml`` (a private multicast group and
cluster name per cluster); the engine is :mod:`jgpy.tools.perf`. The clusters of one size are started
together and every workload runs ``reps`` times, the kinds interleaved per repetition, so that the noise
of a shared machine hits all of them alike. ``build/rawlimit`` (``benchmarks/rawlimit.c``) measures what
the loopback itself does at the same message sizes, in the same run.

``main()`` returns a dict (and prints progress); run directly it also writes it as JSON::

    python benchmarks/e2e.py [--scale 0.1] [--reps 3] [--json out.json] [--plots DIR]

``markdown(result)`` renders the tables of ``benchmarks/RESULTS.md``; ``plots(result, dir)`` the PNGs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jgpy.testing.java import ensure_compiled, java_unavailable_reason, unique_group  # noqa: E402
from jgpy.testing.routers import RouterProcess, router_props  # noqa: E402
from jgpy.tools import perf as P  # noqa: E402
from jgpy.tools.perf import Workload  # noqa: E402

RAWLIMIT_SRC = ROOT / "benchmarks" / "rawlimit.c"
RAWLIMIT = ROOT / "build" / "rawlimit"

#: the 2-member workloads (Java-only, jgpy-only, mixed in both directions)
TWO = [
    Workload("mcast_1k_2", "1 KB multicast, 1 sender, 2 members", "mcast", 1000, 300_000, 30_000, 2),
    Workload("unicast_1k", "1 KB unicast stream, 2 members", "unicast", 1000, 150_000, 15_000, 2),
    Workload("rtt_100", "100 B request/response, 2 members", "rtt", 100, 20_000, 2_000, 2),
    # an RPC to the group: Java 2.12's bundler holds a lone multicast for max_bundle_timeout (30 ms in udp.xml),
    # so a Java requester makes ~33 round trips a second: few of them, to keep make bench short
    Workload("mrtt_100", "100 B multicast request, unicast response, 2 members", "mrtt", 100, 300, 30, 2),
    Workload("mcast_100", "100 B multicast, 1 sender, 2 members", "mcast", 100, 300_000, 30_000, 2),
    Workload("mcast_8k", "8 KB multicast, 1 sender, 2 members", "mcast", 8000, 60_000, 6_000, 2),
    Workload("mcast_60k", "60 KB multicast, 1 sender, 2 members", "mcast", 60_000, 12_000, 1_200, 2),
    Workload("mcast_1m", "1 MB multicast (fragmented), 1 sender, 2 members", "mcast", 1_000_000, 700, 70, 2),
]
#: the 3-member workloads
THREE = [
    Workload("mcast_1k_3", "1 KB multicast, 1 sender, 3 members", "mcast", 1000, 180_000, 18_000, 3),
    Workload("all_1k_3", "1 KB multicast, all 3 members send", "all", 1000, 80_000, 8_000, 3),
]
#: the same clusters on the jar's unchanged tcp.xml (TCP's bind_port moved to a free block of ports). Few
#: messages: Java 2.12 on the stock tcp.xml manages a few thousand a second under load (its thread pools have
#: no queue and discard, so its members keep retransmitting; see benchmarks/README.md)
TCP_TWO = [
    Workload("tcp_mcast_1k_2", "tcp.xml: 1 KB multicast, 1 sender, 2 members", "mcast", 1000, 10_000, 1_000, 2),
    Workload("tcp_unicast_1k", "tcp.xml: 1 KB unicast stream, 2 members", "unicast", 1000, 10_000, 1_000, 2),
    Workload("tcp_rtt_100", "tcp.xml: 100 B request/response, 2 members", "rtt", 100, 5_000, 500, 2),
]
TCP_CONFIG = "tcp.xml"
#: 1 KB multicasts on the jar's flush-udp.xml (pbcast.FLUSH on top: every multicast passes its check; no flush
#: runs while measuring) and the flush itself: start_flush to completion, from the coordinator (FLUSH_LATENCY)
FLUSH_CONFIG = "flush-udp.xml"
FLUSH_TWO = [Workload("flush_mcast_1k_2", "flush-udp.xml: 1 KB multicast, 1 sender, 2 members", "mcast", 1000,
                      150_000, 15_000, 2)]
FLUSH_THREE = [Workload("flush_mcast_1k_3", "flush-udp.xml: 1 KB multicast, 1 sender, 3 members", "mcast", 1000,
                        100_000, 10_000, 3)]
FLUSH_LATENCY = [("JJ", "PP", "JP", "PJ"), ("JJJJ", "PPPP", "JPPJ", "PJJP")]
#: the jar's unchanged sequencer.xml (udp.xml with SEQUENCER above GMS): every member multicasts, so all but the
#: coordinator forward their messages to it and it multicasts them for them
SEQ_TWO = [Workload("seq_all_1k_2", "sequencer.xml: 1 KB multicast, both of 2 members send", "all", 1000, 150_000,
                    15_000, 2)]
SEQ_THREE = [Workload("seq_all_1k_3", "sequencer.xml: 1 KB multicast, all 3 members send", "all", 1000, 80_000,
                      8_000, 3)]
SEQ_CONFIG = "sequencer.xml"
#: ENCRYPT as the jar's encrypt.xml has it (below pbcast.GMS, key exchange with the coordinator, AES-128, RSA), in the
#: jar's udp.xml: one sender of 1 KB multicasts. Not encrypt.xml itself: it has no flow control and 64 KB socket
#: buffers, so a receiver that falls behind loses datagrams and its rate is that of NAKACK's retransmissions
#: (hundreds to a hundred thousand messages a second from one run to the next), not of the encryption
ENC_TWO = [Workload("enc_mcast_1k_2", "udp.xml + encrypt.xml's ENCRYPT: 1 KB multicast, 1 sender, 2 members",
                    "mcast", 1000, 150_000, 15_000, 2)]

#: the jar's unchanged udp-largecluster.xml: its unicasts go through UNICAST2 (NAK-based) instead of UNICAST
LC_CONFIG = "udp-largecluster.xml"
LC_TWO = [Workload("lc_unicast_1k", "udp-largecluster.xml (UNICAST2): 1 KB unicast stream, 2 members", "unicast",
                   1000, 150_000, 15_000, 2)]


def encrypt_config() -> str:
    """``build/encrypt-udp.xml``: udp.xml with encrypt.xml's ENCRYPT element below pbcast.GMS (written each run)."""
    from jgpy.stack.config import load_config
    cfg = load_config("udp.xml")
    enc = next(p for p in load_config("encrypt.xml").protocols if p.name == "ENCRYPT")
    cfg.protocols.insert(cfg.names().index("pbcast.GMS"), enc)
    path = ROOT / "build" / "encrypt-udp.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.to_xml())
    return str(path)


#: the jar's unchanged compress.xml (COMPRESS above GMS, min_size 10, level 9): the perf payloads are a header and
#: zeros, so every message is deflated by its sender and inflated by every receiver (1 KB -> about 25 bytes)
COMPRESS_TWO = [Workload("compress_mcast_1k_2", "compress.xml: 1 KB multicast, 1 sender, 2 members", "mcast", 1000,
                         100_000, 10_000, 2)]
COMPRESS_CONFIG = "compress.xml"
#: the jar's unchanged tunnel.xml (TUNNEL: every datagram over TCP through a GossipRouter; no bundling, as 2.12),
#: once through Java's GossipRouter from the jar and once through jgpy's (python -m jgpy gossip-router)
TUNNEL_CONFIG = "tunnel.xml"
TUNNEL_ROUTERS = ("java", "jgpy")
#: message sizes of the throughput-by-size plot (workload keys)
BY_SIZE = ["mcast_100", "mcast_1k_2", "mcast_8k", "mcast_60k", "mcast_1m"]


def progress(msg: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------- raw limit

def ensure_rawlimit() -> Path:
    """Build ``build/rawlimit`` when missing or older than its source (the Makefile does it for make bench)."""
    if RAWLIMIT.is_file() and RAWLIMIT.stat().st_mtime >= RAWLIMIT_SRC.stat().st_mtime:
        return RAWLIMIT
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError("no C compiler (cc) to build build/rawlimit: install gcc or run `make bench`")
    RAWLIMIT.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([cc, "-O2", "-Wall", "-pthread", "-o", str(RAWLIMIT), str(RAWLIMIT_SRC)], check=True,
                   timeout=120)
    return RAWLIMIT


def raw_spec(w: Workload) -> tuple[str, list[str]]:
    """The rawlimit run that is the yardstick of ``w``: key and arguments."""
    if w.pattern in P.RTT_PATTERNS:
        return f"rtt_{w.size}", ["rtt", "--size", str(w.size), "--count", str(max(2000, w.count)),
                                 "--warmup", str(max(200, w.warmup))]
    size = min(w.size, 60_000)             # a fragmented message travels as datagrams of about 60 KB
    count = 300_000 if size <= 1000 else 100_000 if size <= 8000 else 30_000
    mode = "unicast" if w.pattern == "unicast" else "mcast"
    return f"{mode}_{size}", ["stream", "--size", str(size), "--count", str(count)]


def run_raw(workloads: list[Workload], reps: int, scale: float) -> dict[str, dict]:
    """Every distinct rawlimit run, ``reps`` times: {key: {"runs": [...], "datagrams_per_s"/rtt: summary}}."""
    exe = ensure_rawlimit()
    specs: dict[str, list[str]] = {}
    for w in workloads:
        key, args = raw_spec(w)
        specs.setdefault(key, args)
    out: dict[str, dict] = {}
    for key, args in specs.items():
        args = list(args)
        if args[0] == "stream":
            i = args.index("--count")
            args[i + 1] = str(max(20_000 if int(args[i + 1]) > 20_000 else 2000,
                                  int(int(args[i + 1]) * min(1.0, scale))))
            if key.startswith("mcast"):
                addr, port = unique_group()
                args += ["--mcast", f"{addr}:{port}"]
        runs = []
        for _ in range(reps):
            res = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
            if res.returncode != 0:
                raise RuntimeError(f"rawlimit {' '.join(args)} failed: {res.stderr.strip()}")
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        rec: dict = {"args": args, "runs": runs}
        if args[0] == "stream":
            rec["datagrams_per_s"] = P.summarize([r["datagrams_per_s"] for r in runs])
            rec["mb_per_s"] = P.summarize([r["mb_per_s"] for r in runs])
            rec["received_share"] = P.summarize([r["received_share"] for r in runs])
            progress(f"raw limit {key}: {rec['datagrams_per_s']['median']:,.0f} datagrams/s "
                     f"({rec['mb_per_s']['median']:,.0f} MB/s)")
        else:
            for q in ("median_us", "p99_us", "p999_us"):
                rec[q] = P.summarize([r[q] for r in runs])
            progress(f"raw limit {key}: round trip median {rec['median_us']['median']:.1f} us, "
                     f"p99 {rec['p99_us']['median']:.1f} us")
        out[key] = rec
    return out


# ---------------------------------------------------------------------------------------------- the suite

def jvm_info() -> str:
    """The JVM's default heap and collector on this machine (the members run with the defaults)."""
    try:
        out = subprocess.run(["java", "-XX:+PrintFlagsFinal", "-version"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    flags = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] in ("MaxHeapSize", "InitialHeapSize", "UseG1GC", "UseSerialGC",
                                             "UseParallelGC"):
            flags[parts[1]] = parts[3]
    gc = next((k[3:-2] for k in ("UseG1GC", "UseParallelGC", "UseSerialGC") if flags.get(k) == "true"), "?")
    heap = lambda k: f"{int(flags[k]) / 2**20:,.0f} MiB" if flags.get(k, "").isdigit() else "?"  # noqa: E731
    return f"default settings: {gc} GC, initial heap {heap('InitialHeapSize')}, max heap {heap('MaxHeapSize')}"


def groups(scale: float, members3: bool = True, java: bool = True) -> list[tuple[list[str], list[Workload]]]:
    two = [w.scaled(scale) for w in TWO]
    three = [w.scaled(scale) for w in THREE]
    out = [(["JJ", "PP", "JP"] if java else ["PP"], two)]
    if members3:
        out.append((["JJJ", "PPP", "JPP"] if java else ["PPP"], three))
    return out


def flush_groups(scale: float, java: bool = True, members3: bool = True) -> list[tuple[list[str], list[Workload]]]:
    out = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in FLUSH_TWO])]
    if members3:
        out.append((["JJJ", "PPP", "JPP"] if java else ["PPP"], [w.scaled(scale) for w in FLUSH_THREE]))
    return out


def flush_latency(flushes: int = 20, java: bool = True, clusters=None) -> list[dict]:
    """``Channel.start_flush`` / ``JChannel.startFlush`` from the coordinator to completion (the flush of the whole
    view, timed inside the member), ``flushes`` times per cluster on ``flush-udp.xml``; each is stopped before the
    next. One record per cluster: its kinds, the coordinator's kind, the start and stop times (summaries, ms)."""
    import uuid

    from jgpy.testing.java import JavaNode, PyNode, udp_props
    out = []
    for kinds in (k for group in (clusters or FLUSH_LATENCY) for k in group):
        if not java and "J" in kinds:
            continue
        props = udp_props(*unique_group())
        cluster = f"flushlat-{uuid.uuid4().hex[:8]}"
        nodes = []
        try:
            for i, k in enumerate(kinds):
                node = JavaNode(name=f"{k}{i + 1}") if k == "J" else PyNode(name=f"{k}{i + 1}")
                nodes.append(node)
                node.connect(FLUSH_CONFIG, cluster, props, receive="count", timeout=120)
            deadline = time.monotonic() + 60
            while any(len(n.view()["members"] or ()) != len(kinds) for n in nodes):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{kinds}: no full view")
                time.sleep(0.1)
            coord = nodes[0]
            starts, stops, failed = [], [], 0
            for _ in range(flushes + 2):                 # the first two warm up
                rep = coord.call("start_flush", timeout=60)
                stop = coord.call("stop_flush", timeout=60)
                if not rep["result"]:
                    failed += 1
                    continue
                starts.append(rep["seconds"] * 1000)
                stops.append(stop["seconds"] * 1000)
                time.sleep(0.05)
            starts, stops = starts[2:], stops[2:]
            rec = {"cluster": kinds, "members": len(kinds), "coordinator": "java" if kinds[0] == "J" else "jgpy",
                   "start_ms": P.summarize(starts), "stop_ms": P.summarize(stops), "failed": failed,
                   "flushes": len(starts)}
            progress(f"flush latency {kinds}: start->completion median {rec['start_ms']['median']:.2f} ms "
                     f"(min {rec['start_ms']['min']:.2f}, max {rec['start_ms']['max']:.2f}), stop "
                     f"{rec['stop_ms']['median']:.2f} ms, {failed} failed")
            out.append(rec)
        finally:
            for n in nodes:
                n.close()
    return out


def run_flush_rows(scale: float, reps: int, members3: bool = True, java: bool = True) -> tuple[list, list, list]:
    """The flush-udp.xml rows: (records, workloads, flush latency records)."""
    fgs = flush_groups(scale, java, members3)
    records = P.run_suite(fgs, reps=reps, config=FLUSH_CONFIG, progress=progress, warmup=min(1.0, scale))
    for rec in records:
        rec["raw"] = "mcast_1000"
    latency = flush_latency(max(5, int(20 * min(1.0, scale * 4))), java=java)
    return records, [w for _, ws in fgs for w in ws], latency


def sequencer_groups(scale: float, members3: bool = True, java: bool = True) -> list[tuple[list[str], list[Workload]]]:
    """The sequencer.xml clusters and workloads (``SEQ_TWO``, ``SEQ_THREE``)."""
    out = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in SEQ_TWO])]
    if members3:
        out.append((["JJJ", "PPP", "JPP"] if java else ["PPP"], [w.scaled(scale) for w in SEQ_THREE]))
    return out


def run_sequencer_rows(scale: float, reps: int, members3: bool = True, java: bool = True) -> tuple[list, list]:
    """The sequencer.xml rows: (records, workloads); no raw limit of their own (the udp.xml rows have it)."""
    sgs = sequencer_groups(scale, members3, java)
    records = P.run_suite(sgs, reps=reps, config=SEQ_CONFIG, progress=progress, warmup=min(1.0, scale))
    return records, [w for _, ws in sgs for w in ws]


def run_encrypt_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The ENCRYPT rows (``ENC_TWO``, :func:`encrypt_config`): (records, workloads)."""
    egs = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in ENC_TWO])]
    return P.run_suite(egs, reps=reps, config=encrypt_config(), progress=progress, warmup=min(1.0, scale)), egs[0][1]


def run_compress_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The compress.xml rows (Java, jgpy and mixed clusters of 2): (records, workloads)."""
    cgs = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in COMPRESS_TWO])]
    records = P.run_suite(cgs, reps=reps, config=COMPRESS_CONFIG, progress=progress, warmup=min(1.0, scale))
    return records, [w for _, ws in cgs for w in ws]


def tunnel_workload(router: str) -> Workload:
    return Workload(f"tunnel_{router}_mcast_1k_2", f"tunnel.xml through {router}'s GossipRouter: 1 KB multicast, "
                    "1 sender, 2 members", "mcast", 1000, 30_000, 3_000, 2)


def run_tunnel_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The tunnel.xml rows, through each router of ``TUNNEL_ROUTERS`` (a process of its own, one per row):
    (records, workloads). A short warm-up: tunnel.xml leaves TCP_NODELAY off (TUNNEL's default), so a round trip
    waits for Nagle and the delayed ACK (~40 ms) and the warm-up's round trips would take minutes."""
    records, workloads = [], []
    for router in TUNNEL_ROUTERS if java else ("jgpy",):
        w = tunnel_workload(router).scaled(scale)
        with RouterProcess(router) as r:
            records += P.run_suite([(["JJ", "PP", "JP"] if java else ["PP"], [w])], reps=reps, config=TUNNEL_CONFIG,
                                   progress=progress, warmup=min(0.05, scale), props=router_props([r.port]))
        workloads.append(w)
    return records, workloads


def run_largecluster_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The udp-largecluster.xml rows (``LC_TWO``): (records, workloads)."""
    lgs = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in LC_TWO])]
    return P.run_suite(lgs, reps=reps, config=LC_CONFIG, progress=progress, warmup=min(1.0, scale)), lgs[0][1]


#: the jar's unchanged tcp-nio.xml (TCP_NIO: TCP's wire under TCP_NIO's protocol id): 1 KB multicast, one sender
TCPNIO_TWO = [Workload("tcpnio_mcast_1k_2", "tcp-nio.xml: 1 KB multicast, 1 sender, 2 members", "mcast", 1000,
                       10_000, 1_000, 2)]
TCPNIO_CONFIG = "tcp-nio.xml"


def run_tcpnio_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The tcp-nio.xml rows (Java, jgpy and mixed clusters of 2, on a block of free ports): (records, workloads)."""
    gs = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in TCPNIO_TWO])]
    return P.run_suite(gs, reps=reps, config=TCPNIO_CONFIG, progress=progress, warmup=min(1.0, scale)), gs[0][1]


#: the jar's smack_tunnel.xml (TUNNEL, FD_SIMPLE, UNICAST, SMACK: no discovery, no GMS; every multicast acked by every
#: member) but for TUNNEL's router_port (12001 in the file), through one jgpy GossipRouter. 2.12's members connect with
#: JChannel.connect(cluster, false) and each member sends a first multicast alone (jgpy.tools.perf.NO_FLUSH_PROTOCOLS);
#: without discovery nobody knows a name, so multicasts only. Few messages: SMACK has no flow control, and a jgpy sender
#: of 20,000 outran a Java receiver until SMACK's retransmissions (after 1 s) of thousands of unacked messages drowned it
#: (GBs of heap, never complete); 10,000 are sent before the first retransmission is due
SMACK_CONFIG = "smack_tunnel.xml"
SMACK_ROUTER = "jgpy"
SMACK_TWO = [Workload("smack_mcast_1k_2", "smack_tunnel.xml: 1 KB multicast, 1 sender, 2 members", "mcast", 1000,
                      10_000, 1_000, 2)]


def smack_config(router_port: int) -> str:
    """``build/smack-tunnel.xml``: the jar's smack_tunnel.xml with TUNNEL's router_port (written each run)."""
    from jgpy.stack.config import load_config
    cfg = load_config(SMACK_CONFIG).with_properties("TUNNEL", router_port=str(router_port))
    path = ROOT / "build" / "smack-tunnel.xml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.to_xml())
    return str(path)


def run_smack_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The smack_tunnel.xml rows (``SMACK_TWO``, through a :data:`SMACK_ROUTER` router process): (records,
    workloads). A short warm-up, as the tunnel rows."""
    gs = [(["JJ", "PP", "JP"] if java else ["PP"], [w.scaled(scale) for w in SMACK_TWO])]
    with RouterProcess(SMACK_ROUTER) as r:
        records = P.run_suite(gs, reps=reps, config=smack_config(r.port), progress=progress,
                              warmup=min(0.05, scale), props=router_props([r.port]))
    return records, gs[0][1]


#: jgpy's own protocols (not in the jar, so no Java peer): PBCAST (pbcast-udp.xml: in place of NAKACK and STABLE) and
#: TOTAL (total-udp.xml: above GMS); jgpy-only clusters, udp.xml's jgpy row (NAKACK) is their reference
OWN_CONFIGS = {"pbcast": "pbcast-udp.xml", "total": "total-udp.xml"}


def own_workload(name: str) -> Workload:
    return Workload(f"own_{name}_mcast_1k_2", f"{OWN_CONFIGS[name]} (jgpy only): 1 KB multicast, 1 sender, 2 members",
                    "mcast", 1000, 20_000, 2_000, 2)


def run_own_rows(scale: float, reps: int, java: bool = True) -> tuple[list, list]:
    """The rows of jgpy's own protocols (:data:`OWN_CONFIGS`, jgpy clusters only): (records, workloads)."""
    records, workloads = [], []
    for name, config in OWN_CONFIGS.items():
        w = own_workload(name).scaled(scale)
        records += P.run_suite([(["PP"], [w])], reps=reps, config=config, progress=progress, warmup=min(1.0, scale))
        workloads.append(w)
    return records, workloads


#: the row sets beyond udp.xml, tcp.xml, flush-udp.xml and sequencer.xml: name -> (rows(scale, reps, java) ->
#: (records, workloads), the config they run); ``run(extras=...)`` and ``--only NAME`` pick them
EXTRA_ROWS = {
    "encrypt": (run_encrypt_rows, "encrypt-udp.xml"),
    "compress": (run_compress_rows, COMPRESS_CONFIG),
    "tunnel": (run_tunnel_rows, TUNNEL_CONFIG),
    "largecluster": (run_largecluster_rows, LC_CONFIG),
    "tcpnio": (run_tcpnio_rows, TCPNIO_CONFIG),
    "smack": (run_smack_rows, SMACK_CONFIG),
    "own": (run_own_rows, OWN_CONFIGS["pbcast"]),
}


def run(scale: float = 1.0, reps: int = 3, members3: bool = True, config: str = "udp.xml", tcp: bool = True,
        flush: bool = True, sequencer: bool = True, extras: tuple[str, ...] = tuple(EXTRA_ROWS)) -> dict:
    """The whole end-to-end suite; returns the result record (``markdown``/``plots`` render it). ``tcp``: also
    the tcp.xml workloads (``TCP_TWO``, their rows' keys start with ``tcp_``); ``flush``: the flush-udp.xml
    workloads (``flush_``) and the flush latency (``flush_latency``); ``sequencer``: the sequencer.xml
    workloads (``seq_``); ``extras``: the row sets of :data:`EXTRA_ROWS` to run (ENCRYPT ``enc_``, compress.xml
    ``compress_``, tunnel.xml through Java's and jgpy's routers ``tunnel_``, udp-largecluster.xml ``lc_``,
    tcp-nio.xml ``tcpnio_``, smack_tunnel.xml ``smack_``, jgpy's PBCAST and TOTAL ``own_``)."""
    started = time.time()
    reason = java_unavailable_reason()
    if reason:
        progress(f"no Java peer ({reason}): jgpy-only clusters")
    else:
        ensure_compiled()
    gs = groups(scale, members3, java=reason is None)
    workloads = [w for _, ws in gs for w in ws]
    tcp_gs = [(["JJ", "PP", "JP"] if reason is None else ["PP"], [w.scaled(scale) for w in TCP_TWO])] if tcp else []
    n = sum(reps * sum(len(P.directions(k, w)) for k in ks) for ks, ws in gs + tcp_gs for w in ws)
    progress(f"{n} measurements ({reps} repetitions), config {config}{' and ' + TCP_CONFIG if tcp else ''}, "
             f"scale {scale:g}")
    raw = run_raw(workloads, reps, scale)
    records = P.run_suite(gs, reps=reps, config=config, progress=progress, warmup=min(1.0, scale))
    for rec in records:
        rec["raw"] = raw_spec(next(w for w in workloads if w.key == rec["workload"]))[0]
    if tcp_gs:                             # no raw limit: rawlimit measures UDP
        records += P.run_suite(tcp_gs, reps=reps, config=TCP_CONFIG, progress=progress, warmup=min(1.0, scale))
        workloads += tcp_gs[0][1]
    latency: list[dict] = []
    if flush:
        frecs, fws, latency = run_flush_rows(scale, reps, members3, java=reason is None)
        records += frecs
        workloads += fws
    if sequencer:
        srecs, sws = run_sequencer_rows(scale, reps, members3, java=reason is None)
        records += srecs
        workloads += sws
    for name in extras:
        recs, ws = EXTRA_ROWS[name][0](scale, reps, java=reason is None)
        records += recs
        workloads += ws
    return {"config": config, "scale": scale, "reps": reps, "java": reason is None, "records": records,
            "jvm": jvm_info() if reason is None else "", "flush_latency": latency,
            "raw": raw, "workloads": [w.__dict__ for w in workloads], "seconds": time.time() - started}


# ---------------------------------------------------------------------------------------------- rendering

def _rows(result: dict) -> dict[str, dict[str, dict]]:
    """{workload: {column: record}} in suite order."""
    out: dict[str, dict[str, dict]] = {}
    for rec in result["records"]:
        out.setdefault(rec["workload"], {})[rec["column"]] = rec
    return out


def _med(rec: dict | None, key: str) -> float | None:
    if not rec or not rec.get(key):
        return None
    return rec[key]["median"]


def _fmt(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _cell(rec: dict | None, key: str, digits: int = 0) -> str:
    if not rec or not rec.get(key):
        return "-"
    s = rec[key]
    txt = f"{s['median']:,.{digits}f}"
    if s["n"] > 1:
        txt += f" ({s['min']:,.{digits}f}–{s['max']:,.{digits}f})"
    return txt + ("" if rec.get("complete", True) else " INCOMPLETE")


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    r = a / b
    return f"{r:.2f}" if r >= 0.01 else f"{r:.1e}"        # e.g. jgpy's multicast round trip vs Java's 30 ms


def _mixed(row: dict) -> tuple[dict | None, dict | None]:
    """(Java sends, jgpy sends); an all-send run is both."""
    if "mixed" in row:
        return row["mixed"], row["mixed"]
    return row.get("mixed_j"), row.get("mixed_p")


def _raw_rate(result: dict, rec: dict, size: int) -> float | None:
    """The raw limit in messages per second of ``size`` bytes (a 1 MB message = 1 MB of 60 KB datagrams)."""
    raw = result["raw"].get(rec.get("raw", ""))
    if not raw or not raw.get("mb_per_s"):
        return None
    if size <= 60_000:
        return raw["datagrams_per_s"]["median"]
    return raw["mb_per_s"]["median"] * 1e6 / size


def headline(result: dict) -> list[tuple[str, str, str, str]]:
    """The targets of the performance work as (target, jgpy, reference, ratio), all taken in this run."""
    rows = _rows(result)
    out = []

    def add(label: str, a: float | None, b: float | None, unit: str, digits: int = 0) -> None:
        out.append((label, f"{_fmt(a, digits)} {unit}" if a else "-", f"{_fmt(b, digits)} {unit}" if b else "-",
                    _ratio(a, b)))

    m = rows.get("mcast_1k_2", {})
    j, p = _med(m.get("java"), "recv_msgs_per_s"), _med(m.get("jgpy"), "recv_msgs_per_s")
    add("throughput jgpy / Java, 1 KB multicast, 1 sender, 2 members", p, j, "msgs/s")
    u = rows.get("unicast_1k", {})
    add("throughput jgpy / Java, 1 KB unicast", _med(u.get("jgpy"), "recv_msgs_per_s"),
        _med(u.get("java"), "recv_msgs_per_s"), "msgs/s")
    r = rows.get("rtt_100", {})
    add("round-trip p99 jgpy / Java, 100 B", _med(r.get("jgpy"), "rtt_p99_us"), _med(r.get("java"), "rtt_p99_us"), "us")
    add("round-trip median jgpy / Java, 100 B", _med(r.get("jgpy"), "rtt_median_us"),
        _med(r.get("java"), "rtt_median_us"), "us")
    mr = rows.get("mrtt_100", {})
    if mr:
        add("round-trip median jgpy / Java, 100 B multicast request", _med(mr.get("jgpy"), "rtt_median_us"),
            _med(mr.get("java"), "rtt_median_us"), "us")
    add("peak RSS jgpy / JVM member (receiver, 1 KB multicast)", _member_fig(m.get("jgpy"), "jgpy receiver", "peak_rss_mb"),
        _member_fig(m.get("java"), "java receiver", "peak_rss_mb"), "MB")
    add("peak RSS jgpy / JVM member (sender, 1 KB multicast)", _member_fig(m.get("jgpy"), "jgpy sender", "peak_rss_mb"),
        _member_fig(m.get("java"), "java sender", "peak_rss_mb"), "MB")
    if j and p:
        for col, label in (("mixed_j", "Java sends"), ("mixed_p", "jgpy sends")):
            out.append((f"mixed ({label}) / slower pure, 1 KB multicast", _fmt(_med(m.get(col), "recv_msgs_per_s"))
                        + " msgs/s", f"{_fmt(min(j, p))} msgs/s", _ratio(_med(m.get(col), "recv_msgs_per_s"), min(j, p))))
    for key, label in (("tcp_mcast_1k_2", "1 KB multicast"), ("tcp_unicast_1k", "1 KB unicast")):
        t = rows.get(key, {})
        if t:
            add(f"tcp.xml: throughput jgpy / Java, {label}", _med(t.get("jgpy"), "recv_msgs_per_s"),
                _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    t = rows.get("tcp_rtt_100", {})
    if t:
        add("tcp.xml: round-trip p99 jgpy / Java, 100 B", _med(t.get("jgpy"), "rtt_p99_us"),
            _med(t.get("java"), "rtt_p99_us"), "us")
    t = rows.get("compress_mcast_1k_2", {})
    if t:
        add("compress.xml: throughput jgpy / Java, 1 KB multicast", _med(t.get("jgpy"), "recv_msgs_per_s"),
            _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
        for mixed, label in zip(_mixed(t), ("Java sends", "jgpy sends")):
            if mixed:
                add(f"compress.xml: mixed ({label}) / Java, 1 KB multicast", _med(mixed, "recv_msgs_per_s"),
                    _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    for key, label in (("seq_all_1k_2", "both of 2 send"), ("seq_all_1k_3", "all 3 send")):
        t = rows.get(key, {})
        if t:
            add(f"sequencer.xml: throughput jgpy / Java, 1 KB multicast, {label}",
                _med(t.get("jgpy"), "recv_msgs_per_s"), _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    t = rows.get("enc_mcast_1k_2", {})
    if t:
        add("ENCRYPT (udp.xml + encrypt.xml's ENCRYPT): throughput jgpy / Java, 1 KB multicast",
            _med(t.get("jgpy"), "recv_msgs_per_s"), _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    for router in TUNNEL_ROUTERS:
        t = rows.get(tunnel_workload(router).key, {})
        if t:
            add(f"tunnel.xml through {router}'s GossipRouter: throughput jgpy / Java, 1 KB multicast",
                _med(t.get("jgpy"), "recv_msgs_per_s"), _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    t = rows.get("tcpnio_mcast_1k_2", {})
    if t:
        add("tcp-nio.xml: throughput jgpy / Java, 1 KB multicast", _med(t.get("jgpy"), "recv_msgs_per_s"),
            _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    t = rows.get("smack_mcast_1k_2", {})
    if t:
        add(f"smack_tunnel.xml through {SMACK_ROUTER}'s GossipRouter: throughput jgpy / Java, 1 KB multicast",
            _med(t.get("jgpy"), "recv_msgs_per_s"), _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    for name, config in OWN_CONFIGS.items():
        t = rows.get(own_workload(name).key, {})
        if t:
            add(f"{config} ({name.upper()}, jgpy's own) / udp.xml (NAKACK), jgpy, 1 KB multicast",
                _med(t.get("jgpy"), "recv_msgs_per_s"), p, "msgs/s")
    t = rows.get("lc_unicast_1k", {})
    if t:
        add("udp-largecluster.xml (UNICAST2): throughput jgpy / Java, 1 KB unicast",
            _med(t.get("jgpy"), "recv_msgs_per_s"), _med(t.get("java"), "recv_msgs_per_s"), "msgs/s")
    if m:
        raw = _raw_rate(result, next(iter(m.values())), 1000)
        add("jgpy / raw C limit, 1 KB multicast (msgs/s vs 1 KB datagrams/s)", p, raw, "/s")
        add("Java / raw C limit, 1 KB multicast (msgs/s vs 1 KB datagrams/s)", j, raw, "/s")
        big = result["raw"].get("mcast_60000", {}).get("mb_per_s")
        if big:                            # the ceiling of a stack that bundles perfectly: bytes in 60 KB datagrams
            add("jgpy / raw C limit in bytes, 1 KB multicast (vs 60 KB datagrams)", _med(m.get("jgpy"), "recv_mb_per_s"),
                big["median"], "MB/s", 1)
            add("Java / raw C limit in bytes, 1 KB multicast (vs 60 KB datagrams)", _med(m.get("java"), "recv_mb_per_s"),
                big["median"], "MB/s", 1)
    return out


def _member_fig(rec: dict | None, who: str, key: str) -> float | None:
    if not rec:
        return None
    s = (rec.get("per_member") or {}).get(who, {}).get(key)
    return s["median"] if s else None


def markdown(result: dict) -> list[str]:
    rows = _rows(result)
    md = ["### Targets", "", "Ratios from this run (medians of the repetitions). Throughput: below 1 means jgpy is "
          "slower; latency and RSS: above 1 means jgpy is worse.", "",
          "| target | value | reference | ratio |", "|---|---:|---:|---:|"]
    md += [f"| {k} | {a} | {b} | {r} |" for k, a, b, r in headline(result)]
    if result.get("jvm"):
        md += ["", f"JVM members: {result['jvm']}."]
    md += ["", "### Throughput", "",
           "Receiver msgs/s between the first and the last measured message (mean over the receivers), median "
           "(min–max) of the repetitions. Raw limit: `build/rawlimit` with datagrams of the message's size "
           "(1 MB: 60 KB datagrams, in 1 MB messages per second) on the same transport (multicast / unicast).", "",
           "| configuration | Java | jgpy | mixed, Java sends | mixed, jgpy sends | raw limit | jgpy / Java | "
           "mixed / slower pure | jgpy / raw |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, row in rows.items():
        first = next(iter(row.values()))
        if first["pattern"] in P.RTT_PATTERNS:
            continue
        mj, mp = _mixed(row)
        j, p = _med(row.get("java"), "recv_msgs_per_s"), _med(row.get("jgpy"), "recv_msgs_per_s")
        raw = _raw_rate(result, first, first["size"])
        slower = min(j, p) if j and p else None
        mixed_r = "-"
        if slower:
            vals = [_med(x, "recv_msgs_per_s") for x in ((mj,) if mj is mp else (mj, mp))]
            mixed_r = " / ".join(_ratio(v, slower) for v in vals)
        mp_cell = "(all send: see left)" if mj is mp and mj else _cell(mp, "recv_msgs_per_s")
        md.append(f"| {first['title']} | {_cell(row.get('java'), 'recv_msgs_per_s')} | "
                  f"{_cell(row.get('jgpy'), 'recv_msgs_per_s')} | {_cell(mj, 'recv_msgs_per_s')} | {mp_cell} | "
                  f"{_fmt(raw)} | {_ratio(p, j)} | {mixed_r} | {_ratio(p, raw)} |")
    md += ["", "Same runs in MB/s (payload bytes) and the sender's rate (measured messages / time to send them; "
           "flow control paces it to the receivers):", "",
           "| configuration | Java MB/s | jgpy MB/s | mixed MB/s (Java / jgpy sends) | Java sender msgs/s | "
           "jgpy sender msgs/s | mixed sender msgs/s (Java / jgpy sends) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in rows.items():
        first = next(iter(row.values()))
        if first["pattern"] in P.RTT_PATTERNS:
            continue
        mj, mp = _mixed(row)
        md.append(f"| {first['title']} | {_fmt(_med(row.get('java'), 'recv_mb_per_s'), 1)} | "
                  f"{_fmt(_med(row.get('jgpy'), 'recv_mb_per_s'), 1)} | "
                  f"{_fmt(_med(mj, 'recv_mb_per_s'), 1)} / {_fmt(_med(mp, 'recv_mb_per_s'), 1)} | "
                  f"{_fmt(_med(row.get('java'), 'send_msgs_per_s'))} | {_fmt(_med(row.get('jgpy'), 'send_msgs_per_s'))} | "
                  f"{_fmt(_med(mj, 'send_msgs_per_s'))} / {_fmt(_med(mp, 'send_msgs_per_s'))} |")
    for key, row in rows.items():
        first = next(iter(row.values()))
        if first["pattern"] not in P.RTT_PATTERNS:
            continue
        raw = result["raw"].get(first.get("raw", ""), {})
        how = ("regular unicasts both ways" if first["pattern"] == "rtt" else
               "a regular multicast request, a regular unicast response: Java's bundler holds a lone multicast "
               "until max_bundle_timeout, 30 ms in udp.xml; jgpy sends it at once")
        md += ["", f"### Round trip: {first['title']}", "",
               f"Requester-side round trips in microseconds over {first['count']:,} requests after "
               f"{first['warmup']:,} warm-up ({how}), median (min–max) of the repetitions. "
               "Raw limit: a C ping-pong of one datagram.", "",
               "| percentile | Java | jgpy | mixed, Java requests | mixed, jgpy requests | raw limit | jgpy / Java |",
               "|---|---:|---:|---:|---:|---:|---:|"]
        for q, label in (("median_us", "median"), ("p99_us", "p99"), ("p999_us", "p99.9")):
            k = f"rtt_{q}"
            md.append(f"| {label} | {_cell(row.get('java'), k)} | {_cell(row.get('jgpy'), k)} | "
                      f"{_cell(row.get('mixed_j'), k)} | {_cell(row.get('mixed_p'), k)} | "
                      f"{_fmt(raw.get(q, {}).get('median'), 1)} | "
                      f"{_ratio(_med(row.get('jgpy'), k), _med(row.get('java'), k))} |")
    md += ["", "### Per member: peak RSS and CPU", "",
           "Peak RSS = VmHWM during the measurement (reset before it); CPU = user + system seconds of the whole "
           "process (all threads, JIT and GC included) per 1,000 messages it sent or received (round trips for "
           "request/response). Medians over the repetitions; mixed: the member of that kind and role in a mixed "
           "cluster (e.g. a jgpy receiver is the one a Java member sent to). CPU is read in clock ticks (10 ms): "
           "the few hundred multicast round trips give a few ticks, coarse figures.", "",
           "| configuration | member | Java MB | jgpy MB | mixed MB (java / jgpy) | Java CPU s/1k | jgpy CPU s/1k | "
           "mixed CPU s/1k (java / jgpy) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in rows.items():
        first = next(iter(row.values()))
        mixed = [row[c] for c in ("mixed_j", "mixed_p", "mixed") if c in row]
        roles = sorted({k.split(" ", 1)[1] for rec in row.values() for k in (rec.get("per_member") or {})})
        for role in roles:
            def fig(recs, kind, what):
                vals = [_member_fig(rec, f"{kind} {role}", what) for rec in recs]
                return _fmt(next((v for v in vals if v is not None), None), 1 if what == "peak_rss_mb" else 4)
            md.append(f"| {first['title']} | {role} | {fig([row.get('java')], 'java', 'peak_rss_mb')} | "
                      f"{fig([row.get('jgpy')], 'jgpy', 'peak_rss_mb')} | "
                      f"{fig(mixed, 'java', 'peak_rss_mb')} / {fig(mixed, 'jgpy', 'peak_rss_mb')} | "
                      f"{fig([row.get('java')], 'java', 'cpu_s_per_1k')} | "
                      f"{fig([row.get('jgpy')], 'jgpy', 'cpu_s_per_1k')} | "
                      f"{fig(mixed, 'java', 'cpu_s_per_1k')} / {fig(mixed, 'jgpy', 'cpu_s_per_1k')} |")
    if result.get("flush_latency"):
        md += ["", "### Flush latency (flush-udp.xml)", "",
               "`start_flush()` from the coordinator to the flush's completion (START_FLUSH, every member's "
               "block() and FLUSH_COMPLETED, the reconciliation when digests differ), then `stop_flush()` (STOP_FLUSH "
               "until its own unblock()), timed inside the member; median (min–max) in ms over the flushes.", "",
               "| cluster | coordinator | members | start → completion ms | stop ms | flushes | failed |",
               "|---|---|---:|---:|---:|---:|---:|"]
        for r in result["flush_latency"]:
            md.append(f"| {r['cluster']} | {r['coordinator']} | {r['members']} | {_cell(r, 'start_ms', 2)} | "
                      f"{_cell(r, 'stop_ms', 2)} | {r['flushes']} | {r['failed']} |")
    md += ["", "### Raw limit of the machine (`build/rawlimit`)", "",
           "| run | datagrams/s | MB/s | received share | round trip median / p99 / p99.9 us |",
           "|---|---:|---:|---:|---:|"]
    for key, raw in result["raw"].items():
        if raw.get("datagrams_per_s"):
            md.append(f"| {key} | {_cell(raw, 'datagrams_per_s')} | {_cell(raw, 'mb_per_s')} | "
                      f"{_fmt(raw['received_share']['median'], 3)} | - |")
        else:
            md.append(f"| {key} | - | - | - | {_fmt(raw['median_us']['median'], 1)} / "
                      f"{_fmt(raw['p99_us']['median'], 1)} / {_fmt(raw['p999_us']['median'], 1)} |")
    problems = [(rec["workload"], rec["column"], e) for rec in result["records"] for r in rec["runs"]
                for e in r["errors"]]
    if problems:
        md += ["", "### Problems during the run", ""]
        md += [f"- {w} / {c}: {e[:300]}" for w, c, e in problems]
    return md


def plots(result: dict, out_dir: Path, prefix: str = "") -> list[Path]:
    """throughput_by_size.png (MB/s and msgs/s by message size) and latency_cdf.png; [] without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = _rows(result)
    written = []
    series = [("java", "Java"), ("jgpy", "jgpy"), ("mixed_j", "mixed, Java sends"), ("mixed_p", "mixed, jgpy sends")]
    keys = [k for k in BY_SIZE if k in rows]
    if keys:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        sizes = [next(iter(rows[k].values()))["size"] for k in keys]
        for col, label in series:
            for ax, metric in zip(axes, ("recv_mb_per_s", "recv_msgs_per_s")):
                pts = [(s, rows[k][col][metric]) for s, k in zip(sizes, keys) if col in rows[k] and rows[k][col].get(metric)]
                if not pts:
                    continue
                xs = [s for s, _ in pts]
                med = [v["median"] for _, v in pts]
                err = [[v["median"] - v["min"] for _, v in pts], [v["max"] - v["median"] for _, v in pts]]
                ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=label)
        raw_pts = []
        for s, k in zip(sizes, keys):
            first = next(iter(rows[k].values()))
            rr = _raw_rate(result, first, s)
            if rr:
                raw_pts.append((s, rr))
        if raw_pts:
            axes[0].plot([s for s, _ in raw_pts], [r * s / 1e6 for s, r in raw_pts], "k--", marker="x",
                         label="raw limit (C, datagrams of that size)")
            axes[1].plot([s for s, _ in raw_pts], [r for _, r in raw_pts], "k--", marker="x", label="raw limit")
        for ax, ylabel in zip(axes, ("receiver MB/s", "receiver msgs/s")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle("Multicast throughput by message size (1 sender, 2 members, udp.xml, loopback)")
        fig.tight_layout()
        p = out_dir / f"{prefix}throughput_by_size.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)
    panels = [(k, t) for k, t in (("rtt_100", "100 B unicast request/response (CDF)"),
                                   ("mrtt_100", "100 B multicast request, unicast response (CDF)")) if k in rows]
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 4.5), squeeze=False)
        qs = [i / 1000 for i in range(1001)]
        raw = next((v for k, v in result["raw"].items() if k.startswith("rtt")), None)
        for ax, (key, title) in zip(axes[0], panels):
            for col, label in series:
                rec = rows[key].get(col)
                if not rec:
                    continue
                runs = [r for r in rec["runs"] if r.get("rtt") and r["rtt"].get("cdf_us")]
                if not runs:
                    continue
                runs.sort(key=lambda r: r["rtt"]["p99_us"])
                run_ = runs[len(runs) // 2]             # the repetition with the median p99
                ax.plot(run_["rtt"]["cdf_us"], qs, label=label.replace("sends", "requests"))
            if raw:
                runs = sorted(raw["runs"], key=lambda r: r["p99_us"])
                ax.plot(runs[len(runs) // 2]["cdf_us"], qs, "k--", label="raw limit (C ping-pong)")
            ax.set_xscale("log")
            ax.set_xlabel("round trip (us)")
            ax.set_ylabel("fraction of round trips")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        p = out_dir / f"{prefix}latency_cdf.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)
    return written


# ---------------------------------------------------------------------------------------------- CLI

def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=float(os.environ.get("JGPY_BENCH_E2E_SCALE", 1.0)),
                    help="multiply every message count by this (default 1)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--no-3", dest="members3", action="store_false", help="skip the 3-member clusters")
    ap.add_argument("--config", default="udp.xml", help="stack config (default: the jar's udp.xml)")
    ap.add_argument("--json", default="", help="write the result to this file")
    ap.add_argument("--only-flush", action="store_true", help="only the flush-udp.xml rows and the flush latency")
    ap.add_argument("--only-sequencer", action="store_true", help="only the sequencer.xml rows")
    ap.add_argument("--only", choices=sorted(EXTRA_ROWS), help="only one of the extra row sets (encrypt: udp.xml + "
                    "encrypt.xml's ENCRYPT; compress; tunnel: Java's and jgpy's router; largecluster: UNICAST2; tcpnio: tcp-nio.xml; smack: smack_tunnel.xml; own: "
                    "jgpy's PBCAST and TOTAL, jgpy only)")
    ap.add_argument("--plots", default="", help="write the PNG plots into this directory")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))        # finally blocks reap the members
    if args.only_flush or args.only_sequencer or args.only:
        reason = java_unavailable_reason()
        if reason is None:
            ensure_compiled()
        t0 = time.time()
        lat: list[dict] = []
        if args.only_flush:
            recs, ws, lat = run_flush_rows(args.scale, args.reps, args.members3, java=reason is None)
        elif args.only:
            recs, ws = EXTRA_ROWS[args.only][0](args.scale, args.reps, java=reason is None)
        else:
            recs, ws = run_sequencer_rows(args.scale, args.reps, args.members3, java=reason is None)
        config = FLUSH_CONFIG if args.only_flush else EXTRA_ROWS[args.only][1] if args.only else SEQ_CONFIG
        result = {"config": config, "scale": args.scale, "reps": args.reps,
                  "java": reason is None, "records": recs, "jvm": "", "flush_latency": lat, "raw": {},
                  "workloads": [w.__dict__ for w in ws], "seconds": time.time() - t0}
    else:
        result = run(args.scale, args.reps, args.members3, args.config)
    if args.plots:
        for p in plots(result, Path(args.plots)):
            progress(f"wrote {p}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    res = main()
    print("\n".join(markdown(res)))
    sys.exit(0 if all(r["complete"] for r in res["records"]) else 1)
