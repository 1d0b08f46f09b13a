"""Smoke interop: real Java 2.12.2 nodes form a cluster and talk; jgpy decodes their live traffic.

This proves the harness (views, multicast, unicast by name, state transfer) and that jgpy decodes
every datagram the Java nodes put on the wire, multicast (via a tap on the group) and, when we may
sniff loopback, unicast too. The TCP test catches Java's ``bela`` handshake and frames on a socket.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from jgpy import DIALECT, IpAddress, UUID
from jgpy.headers import GmsHeader, NakAckHeader, PingHeader, TpHeader, UnicastHeader
from jgpy.testing.javajson import from_json
from jgpy.tools.capture import LoopbackSniffer, MulticastTap, sniffer_available
from jgpy.tools.dump import decode_tcp_stream

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop]


def _wait_members(node, n, timeout=30):
    return node.wait_event(lambda e: e.get("event") == "view" and len(e["members"]) == n, timeout)


def _decode_all(packets):
    """Decode every packet; returns [(packet, message)] and fails on any undecodable datagram."""
    out = []
    for p in packets:
        dg = DIALECT.decode_datagram(p.data)
        assert dg.trailing == 0, f"trailing bytes in a datagram from {p.src}"
        for m in dg.messages:
            m.headers
            out.append((p, dg, m))
    return out


def test_java_cluster_and_live_decoding(java_nodes, udp_group):
    props, cluster, (group, port) = udp_group
    sniffer = LoopbackSniffer() if sniffer_available() is None else None
    try:
        with MulticastTap(group, port) as tap:
            j1, j2 = java_nodes("J1"), java_nodes("J2")
            r1 = j1.connect("udp.xml", cluster, props)
            r2 = j2.connect("udp.xml", cluster, props)
            _wait_members(j1, 2)
            assert len(r2["view"]["members"]) == 2
            a1, a2 = from_json(r1["address"]), from_json(r2["address"])
            p1, p2 = from_json(r1["physical"]), from_json(r2["physical"])
            assert isinstance(a1, UUID) and isinstance(p1, IpAddress)

            j1.send(text="hello from J1")
            j2.send(b"\x01\x02\x03", dest="J1")
            j2.send(text="oob from J2", oob=True)
            j2.wait_event(lambda e: e.get("event") == "msg" and bytes.fromhex(e["payload"]) == b"hello from J1")
            # the OOB multicast may overtake the unicast (wait_event drops the events before its match)
            pending = {b"\x01\x02\x03", b"oob from J2"}
            while pending:
                ev = j1.wait_event(lambda e: e.get("event") == "msg" and bytes.fromhex(e["payload"]) in pending)
                pending.discard(bytes.fromhex(ev["payload"]))

            # state transfer through the harness (pbcast.STATE_TRANSFER of udp.xml)
            j1.call("set_state_provider", state=b"STATE-OF-J1".hex())
            assert j2.call("get_state", target=None, timeout=10000)["result"] is True
            ev = j2.wait_event(lambda e: e.get("event") == "set_state", 15)
            assert bytes.fromhex(ev["state"]) == b"STATE-OF-J1"
            time.sleep(0.3)
        mcast = tap.packets()
    finally:
        if sniffer is not None:
            sniffer_drops = sniffer.drops()
            sniffer.close()

    decoded = _decode_all(p for p in mcast if p.src[1] == port)     # multicasts leave from the group port
    ours = [(p, dg, m) for p, dg, m in decoded if m.get_header(21).channel_name == cluster]
    assert ours, "no multicast of our cluster was captured"
    senders = {m.src for _, _, m in ours}
    assert senders <= {a1, a2} and a1 in senders

    pings = [m.get_header(6) for _, _, m in ours if m.has_header(6)]
    assert any(isinstance(h, PingHeader) and h.type == 1 and h.data is not None and h.data.logical_name in ("J1", "J2")
               and h.data.physical_addrs and h.data.physical_addrs[0] in (p1, p2) for h in pings)
    views = [m.get_header(14) for _, _, m in ours if m.has_header(14)]
    assert any(isinstance(h, GmsHeader) and h.type == GmsHeader.VIEW and list(h.view.members) == [a1, a2]
               for h in views), "the 2-member VIEW multicast was not decoded"
    app = [(dg, m) for _, dg, m in ours if m.has_buffer() and m.buffer == b"hello from J1"]
    assert app and app[0][1].src == a1 and isinstance(app[0][1].get_header(15), NakAckHeader)
    oob = [(dg, m) for _, dg, m in ours if m.has_buffer() and m.buffer == b"oob from J2"]
    assert oob and oob[0][0].is_oob and oob[0][1].is_flag_set(1)
    # NAKACK seqnos of each sender increase (retransmissions may repeat one)
    for sender in senders:
        seqnos = [m.get_header(15).seqno for _, _, m in ours
                  if m.src == sender and isinstance(m.get_header(15), NakAckHeader) and m.get_header(15).type == 1]
        assert seqnos == sorted(seqnos)

    if sniffer is not None:
        ports = {p1.port, p2.port}
        unicasts = [p for p in sniffer.packets() if p.dst[1] in ports and p.dst[0] == "127.0.0.1"]
        dec = _decode_all(unicasts)
        assert dec, "no unicast datagram captured"
        hdrs = [(m, m.get_header(14), m.get_header(12)) for _, _, m in dec]
        assert any(isinstance(g, GmsHeader) and g.type == GmsHeader.JOIN_REQ and g.mbr == a2 for _, g, _ in hdrs), \
            f"no JOIN_REQ among {len(dec)} unicasts (the sniffer's kernel drops: {sniffer_drops})"
        assert any(isinstance(g, GmsHeader) and g.type == GmsHeader.JOIN_RSP and a2 in g.join_rsp.view.members
                   for _, g, _ in hdrs)
        data = [m for m, _, u in hdrs if isinstance(u, UnicastHeader) and m.has_buffer() and m.buffer == b"\x01\x02\x03"]
        assert data and data[0].src == a2 and data[0].dest == a1 and data[0].get_header(12).type == 0


def test_java_tcp_handshake_and_frames(java_nodes):
    """A Java tcp.xml node connecting to us sends 'bela', its version and address, then framed datagrams."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    received: list[bytes] = []
    stop = threading.Event()

    def serve():
        conns = []
        try:
            while not stop.is_set():
                try:
                    c, _ = listener.accept()
                    c.settimeout(0.1)
                    conns.append([c, bytearray()])
                except socket.timeout:
                    pass
                for entry in conns:
                    try:
                        chunk = entry[0].recv(65536)
                        entry[1] += chunk
                    except (socket.timeout, OSError):
                        pass
        finally:
            for c, buf in conns:
                received.append(bytes(buf))
                c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        node = java_nodes("T1")
        cluster = f"jgpy-tcp-{port}"
        rep = node.connect("tcp.xml", cluster, {"jgroups.tcpping.initial_hosts": f"127.0.0.1[{port}]",
                                                "jgroups.bind_addr": "127.0.0.1"})
        time.sleep(0.5)
    finally:
        stop.set()
        t.join(timeout=5)
        listener.close()
    assert received, "the Java node never connected"
    physical = from_json(rep["physical"])
    stream = next(b for b in received if b)
    dec = decode_tcp_stream(stream)
    assert dec.error is None
    version, addr = dec.handshake
    assert version == 0x1302 and addr == physical
    assert dec.frames
    found = False
    for frame in dec.frames:
        dg = DIALECT.decode_datagram(frame)
        assert dg.trailing == 0
        for m in dg.messages:
            h = m.get_header(10)       # TCPPING's protocol id
            tp = m.get_header(22)      # TCP's protocol id
            assert isinstance(tp, TpHeader) and tp.channel_name == cluster
            if isinstance(h, PingHeader) and h.type == PingHeader.GET_MBRS_REQ:
                found = True
                assert dg.is_oob and not dg.is_multicast and m.dest is None
                assert h.data.physical_addrs == (physical,) and h.cluster_name == cluster
    assert found, "no TCPPING discovery request in the frames"
