"""``python -m jgpy``: command-line tools.

Commands:
  version   what this jgpy speaks and how its core was built
  decode    decode a datagram (hex or file) or a pcap/pcapng capture of JGroups traffic
  sniff     watch a cluster's multicast group (and, as root, its unicasts on loopback) and decode live
  perf      throughput of jgpy and Java members on loopback, side by side
  demo      the main job: a mixed Python/Java cluster on loopback
  check     check a run's delivery journals (PySpark): reliability, FIFO, views, latency
  chat      an interactive member: lines in, lines out, views shown (talks with Java's Chat)
  gossip-router  a GossipRouter for TUNNEL and TCPGOSSIP members (jgpy/gossip_router.py)

``python -m jgpy --version`` prints the version.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import jgpy
from jgpy.errors import JgpyError, WireFormatError


def _out(line: str = "") -> None:
    print(line, flush=True)


# ---------------------------------------------------------------------------------------------

def cmd_version(args: argparse.Namespace) -> int:
    from jgpy._core import jg212

    _out(f"jgpy {jgpy.__version__}")
    _out(f"wire dialect: {jg212.NAME} (version short 0x{jg212.VERSION:04x}), "
         f"{len(jgpy.DIALECT.header_types())} header classes")
    _out(f"core: {Path(jg212.__file__).name}")
    return 0


def cmd_decode(args: argparse.Namespace) -> int:
    from jgpy.tools.capture import read_pcap, tcp_streams
    from jgpy.tools.dump import decode_tcp_stream, describe_datagram

    src = args.input
    path = Path(src)
    try:
        is_file = path.exists()
    except OSError:         # ENAMETOOLONG: hex of a datagram longer than a file name may be
        is_file = False
    if is_file:
        raw = path.read_bytes()
        if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d",
                       b"\x0a\x0d\x0d\x0a"):
            packets = list(read_pcap(path, tcp=args.tcp))
            udp = [p for p in packets if p.proto == "udp" and (not args.port or args.port in (p.src[1], p.dst[1]))]
            bad = 0
            for p in udp:
                lines = describe_datagram(p.data, f"{p.src[0]}:{p.src[1]} -> {p.dst[0]}:{p.dst[1]}  ")
                bad += "NOT DECODABLE" in lines[0]
                for line in lines:
                    _out(line)
            for s in tcp_streams(packets):
                if args.port and args.port not in (s.src[1], s.dst[1]):
                    continue
                dec = decode_tcp_stream(bytes(s.data))
                _out(f"TCP {s.src[0]}:{s.src[1]} -> {s.dst[0]}:{s.dst[1]}  {len(s.data)} bytes")
                if dec.handshake:
                    _out(f"  handshake: version 0x{dec.handshake[0]:04x}, peer {dec.handshake[1]}")
                for i, frame in enumerate(dec.frames):
                    for line in describe_datagram(frame, f"  frame {i}: "):
                        _out("  " + line)
                if dec.error:
                    _out(f"  stream error: {dec.error}")
                    bad += 1
            _out(f"-- {len(udp)} UDP datagram(s), {bad} not decodable")
            return 1 if bad else 0
        data = raw
        if all(c in b"0123456789abcdefABCDEF \n\r\t" for c in raw):
            data = bytes.fromhex(raw.decode())
    else:
        try:
            data = bytes.fromhex(src.replace(" ", ""))
        except ValueError:
            _out(f"error: {src!r} is neither a file nor a hex string")
            return 2
    if data[:4] == b"bela" or args.tcp:
        dec = decode_tcp_stream(data)
        if dec.handshake:
            _out(f"handshake: version 0x{dec.handshake[0]:04x}, peer {dec.handshake[1]}")
        for i, frame in enumerate(dec.frames):
            for line in describe_datagram(frame, f"frame {i}: "):
                _out(line)
        if dec.error:
            _out(f"error: {dec.error}")
            return 1
        return 0
    lines = describe_datagram(data)
    for line in lines:
        _out(line)
    return 1 if "NOT DECODABLE" in lines[0] else 0


def cmd_sniff(args: argparse.Namespace) -> int:
    from jgpy.tools.capture import LoopbackSniffer, MulticastTap, sniffer_available
    from jgpy.tools.dump import describe_datagram

    group, _, port = args.group.rpartition(":")
    port = int(port)
    sniffer = None
    if not args.multicast_only:
        why = sniffer_available()
        if why is None:
            sniffer = LoopbackSniffer(tcp=False)
        else:
            _out(f"(unicasts not shown: {why})")
    seen = 0
    deadline = time.monotonic() + args.seconds if args.seconds else None
    try:
        with MulticastTap(group, port, args.interface) as tap:
            _out(f"listening on {group}:{port} via {args.interface}" + (" and sniffing lo" if sniffer else ""))
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.2)
                pkts = tap.packets()
                if sniffer is not None:
                    pkts += [p for p in sniffer.packets() if p.dst[0] != group and p.data[:2] == b"\x13\x02"]
                pkts.sort(key=lambda p: p.ts)
                for p in pkts[seen:]:
                    for line in describe_datagram(p.data, f"{p.src[0]}:{p.src[1]} -> {p.dst[0]}:{p.dst[1]}  "):
                        _out(line)
                seen = len(pkts)
    except KeyboardInterrupt:
        pass
    finally:
        if sniffer is not None:
            sniffer.close()
    return 0


def cmd_perf(args: argparse.Namespace) -> int:
    from jgpy.tools import perf

    return perf.main(args)


def cmd_node(args: argparse.Namespace) -> int:
    from jgpy.testing.node import main as node_main

    return node_main()


def cmd_demo(args: argparse.Namespace) -> int:
    from jgpy.demo import run_demo

    return run_demo(args)


def cmd_check(args: argparse.Namespace) -> int:
    from jgpy.analysis.cli import main as check_main

    return check_main(args)


def cmd_chat(args: argparse.Namespace) -> int:
    from jgpy.chat import parse_props, run_chat

    try:
        props = parse_props(args.D)
    except ValueError as e:
        _out(f"error: {e}")
        return 2
    if not args.verbose:        # the notes on Java settings without effect in jgpy are not for a chat
        logging.getLogger("jgpy.config").setLevel(logging.ERROR)
    try:
        return run_chat(args.config, args.cluster, args.name, props)
    except JgpyError as e:
        _out(f"error: {e}")
        return 2
    except KeyboardInterrupt:          # ^C while joining (the channel is closed on the way out)
        return 130


def cmd_probe(args: argparse.Namespace) -> int:
    """Ask every member (Java or jgpy) listening on the diagnostics group; print each answer as it came."""
    from jgpy.stack.diagnostics import probe
    answers = probe(args.keys or ["info"], args.addr, args.port, args.bind_addr, args.ttl, args.timeout)
    for i, (sender, text) in enumerate(answers, 1):
        _out(f"#{i} from {sender[0]}:{sender[1]} ({len(text)} bytes):\n{text}")
    _out(f"{len(answers)} responses")
    return 0


# ---------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jgpy", description="jgpy: JGroups 2.12.2-compatible tools")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("--version", action="version",
                   version=f"jgpy {jgpy.__version__} (JGroups 2.12.2.Final wire format)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("version", help="versions and dialect")
    s.set_defaults(func=cmd_version)

    s = sub.add_parser("decode", help="decode a datagram (hex/file) or a pcap/pcapng capture")
    s.add_argument("input", help="hex string, a file with one datagram (binary or hex), or a .pcap/.pcapng file")
    s.add_argument("--tcp", action="store_true", help="treat the input as a TCP stream (handshake + frames); "
                                                       "with a capture, also decode TCP connections")
    s.add_argument("--port", type=int, default=0, help="with a capture: only packets from/to this port")
    s.set_defaults(func=cmd_decode)

    s = sub.add_parser("sniff", help="decode a cluster's live traffic")
    s.add_argument("--group", default="228.8.8.8:45588", help="multicast group ADDR:PORT (udp.xml default)")
    s.add_argument("--interface", default="127.0.0.1", help="interface address to join the group on")
    s.add_argument("--seconds", type=float, default=0, help="stop after this many seconds (default: until ^C)")
    s.add_argument("--multicast-only", action="store_true", help="do not sniff unicasts on lo")
    s.set_defaults(func=cmd_sniff)

    s = sub.add_parser("perf", help="throughput of jgpy and Java members on loopback, side by side")
    from jgpy.tools.perf import add_arguments
    add_arguments(s)
    s.set_defaults(func=cmd_perf)

    s = sub.add_parser("node", help="a member driven by JSON lines on stdin (the test harness protocol)")
    s.set_defaults(func=cmd_node)

    s = sub.add_parser("demo", help="run the demo cluster on loopback")
    s.add_argument("--messages", type=int, default=int(os.environ.get("JGPY_DEMO_MESSAGES", "3000")),
                   help="messages each member multicasts")
    s.add_argument("--perf-count", type=int, default=int(os.environ.get("JGPY_DEMO_PERF", "30000")),
                   help="messages of the throughput runs")
    s.add_argument("--out", default=os.environ.get("JGPY_DEMO_OUT", "demo-out"), help="where to write the report")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("check", help="check a run's delivery journals with Spark (guarantees, latency, throughput)")
    from jgpy.analysis.cli import add_arguments as add_check_arguments
    add_check_arguments(s)
    s.set_defaults(func=cmd_check)

    s = sub.add_parser("probe", help="query members' diagnostics (JGroups' probe: jmx, info, keys, uuids, dump)")
    s.add_argument("keys", nargs="*", help="what to ask, e.g. jmx jmx=UNICAST jmx=NAKACK.xmit_reqs_received info")
    s.add_argument("--addr", default="224.0.75.75", help="diagnostics_addr of the members")
    s.add_argument("--port", type=int, default=7500, help="diagnostics_port of the members")
    s.add_argument("--bind-addr", default="127.0.0.1", help="interface to send the probe on")
    s.add_argument("--ttl", type=int, default=0, help="multicast TTL of the probe (0: this host)")
    s.add_argument("--timeout", type=float, default=2.0, help="seconds to collect answers")
    s.set_defaults(func=cmd_probe)

    s = sub.add_parser("gossip-router", help="a GossipRouter for TUNNEL and TCPGOSSIP members (Java's and jgpy's)")
    _add_gossip_router_arguments(s)
    s.set_defaults(func=_cmd_gossip_router)

    s = sub.add_parser("chat", help="an interactive member: lines in, lines out (talks with Java's Chat demo)")
    s.add_argument("-c", "--config", "-props", default="udp.xml",
                   help="JGroups XML stack config: a file, or a name in the Java jar / jgpy's own (udp.xml)")
    s.add_argument("--cluster", default="ChatCluster", help="cluster name (ChatCluster, as Java's Chat)")
    s.add_argument("-n", "--name", help="this member's logical name (default: host-NNNNN)")
    s.add_argument("-D", action="append", metavar="NAME=VALUE",
                   help="a system property for the config, as java -D (e.g. -Djgroups.bind_addr=127.0.0.1)")
    s.set_defaults(func=cmd_chat)
    return p


def _add_gossip_router_arguments(p: argparse.ArgumentParser) -> None:
    from jgpy.gossip_router import add_arguments
    add_arguments(p)


def _cmd_gossip_router(args: argparse.Namespace) -> int:
    from jgpy.gossip_router import run
    return run(args)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except WireFormatError as e:
        _out(f"error: {e}")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
