"""The demo behind ``make demo`` / ``python -m jgpy demo``.

It starts real Java JGroups 2.12.2 members on a private multicast group on loopback (the jar's
unchanged ``udp.xml``), lets them exchange traffic, and has jgpy decode every datagram they put on
the wire live, re-encode it and check the bytes are identical. jgpy itself joins the cluster as a
member once the stack lands (issue #3); until then it is a byte-exact observer.
"""

from __future__ import annotations

import collections
import time
import uuid
from pathlib import Path

from jgpy import DIALECT, WireFormatError
from jgpy._core import jg212
from jgpy.testing.java import JavaError, JavaNode, java_unavailable_reason, udp_props, unique_group
from jgpy.tools.capture import LoopbackSniffer, MulticastTap, sniffer_available


def _say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _reencode(dg) -> bytes:
    if dg.is_list:
        return DIALECT.encode_bundle(dg.messages, dest=dg.messages[0].dest if dg.messages else None,
                                     src=dg.messages[0].src if dg.messages else None, multicast=dg.is_multicast)
    return DIALECT.encode_message(dg.messages[0], multicast=dg.is_multicast)


def run_demo(args) -> int:
    reason = java_unavailable_reason()
    if reason:
        _say(f"cannot run: {reason}")
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    group, port = unique_group()
    props = udp_props(group, port)
    cluster = f"jgpy-demo-{uuid.uuid4().hex[:8]}"
    names = ["J1", "J2", "J3"]
    why_no_sniffer = sniffer_available()
    sniffer = LoopbackSniffer() if why_no_sniffer is None else None
    nodes: list[JavaNode] = []
    _say(f"cluster {cluster} on {group}:{port} (jar udp.xml, loopback)")
    try:
        with MulticastTap(group, port) as tap:
            for name in names:
                _say(f"starting Java member {name} ...")
                node = JavaNode(name=name)
                nodes.append(node)
                rep = node.connect("udp.xml", cluster, props)
                _say(f"  {name} joined: view {len(rep['view']['members'])} member(s), physical "
                     f"{rep['physical']['host']}:{rep['physical']['port']}")
            nodes[0].wait_event(lambda e: e.get("event") == "view" and len(e["members"]) == len(names), 30)
            _say(f"all {len(names)} members in one view; sending {args.messages} multicasts each + unicasts")
            for node in nodes:
                node.send(text=f"hello from {node.name}", count=args.messages)
            nodes[0].send(text="unicast J1->J2", dest="J2", count=10)
            nodes[2].send(text="oob from J3", oob=True, count=5)
            expected = len(names) * args.messages
            delivered_ok = True
            deadline = time.monotonic() + 60
            for node in nodes:
                got = 0
                try:
                    while got < expected:
                        node.wait_event(lambda e: e.get("event") == "msg" and
                                        bytes.fromhex(e["payload"]).startswith(b"hello from"),
                                        max(0.1, deadline - time.monotonic()))
                        got += 1
                except JavaError:
                    pass
                _say(f"  {node.name} received {got}/{expected} multicasts")
                delivered_ok = delivered_ok and got == expected
            time.sleep(0.5)
            captured = [p for p in tap.packets() if p.src[1] == port]
        if sniffer is not None:
            phys = {n.physical["port"] for n in nodes}
            captured += [p for p in sniffer.packets() if p.dst[1] in phys and p.dst[0] == "127.0.0.1"]
    finally:
        for node in nodes:
            node.close()
        if sniffer is not None:
            sniffer.close()

    _say(f"decoding {len(captured)} captured datagrams with jgpy ...")
    counts: collections.Counter = collections.Counter()
    exact = bad = msgs = 0
    for p in captured:
        try:
            dg = DIALECT.decode_datagram(p.data)
            for m in dg.messages:
                msgs += 1
                for pid, hdr in m.headers:
                    counts[(jg212.PROTOCOL_NAMES.get(pid, str(pid)), hdr.type_name() if hasattr(hdr, "type") else
                            type(hdr).__name__)] += 1
            exact += _reencode(dg) == p.data
        except WireFormatError as e:
            bad += 1
            _say(f"  NOT DECODABLE from {p.src}: {e}")
    lines = [f"# jgpy demo report ({time.strftime('%Y-%m-%d %H:%M:%S')})", "",
             f"Cluster `{cluster}` of {len(names)} Java JGroups 2.12.2 members on {group}:{port}, jar `udp.xml`.",
             f"Captured {len(captured)} datagrams ({'multicast and unicast' if sniffer else 'multicast only: ' + str(why_no_sniffer)}),"
             f" {msgs} messages.", "",
             f"- decoded by jgpy: {len(captured) - bad}/{len(captured)}",
             f"- re-encoded byte-identical: {exact}/{len(captured)}", "",
             "| protocol | header type | count |", "|---|---|---|"]
    lines += [f"| {proto} | {typ} | {n} |" for (proto, typ), n in sorted(counts.items())]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    for line in lines[4:]:
        print("   " + line)
    ok = bad == 0 and exact == len(captured) and bool(captured) and delivered_ok
    _say(("OK: " if ok else "FAILED: ") + f"jgpy decoded and re-encoded {exact}/{len(captured)} datagrams exactly; "
         f"report: {report}")
    return 0 if ok else 1
