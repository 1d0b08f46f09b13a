"""``python -m jgpy``: version, decode (hex, file, pcap, pcapng, TCP stream) and the demo."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from jgpy.cli import main

# Example 7 of the captures: a bundled multicast from B with setObject("hello-string")
EX7 = bytes.fromhex("130203010226fa1a6852efc8397d377371eaab8002000104000000000d1268656c6c6f2d737472696e670002000f"
                    "00190100000000000000010015003800066a677465737400")
HANDSHAKE = bytes.fromhex("62656c611302047f000001bab900")


def _ip_udp(payload: bytes, sport: int, dport: int) -> bytes:
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([228, 8, 8, 8]))
    return ip + udp


def test_version(capsys):
    assert main(["version"]) == 0
    assert "jgroups-2.12" in capsys.readouterr().out


def test_version_option(capsys):
    import jgpy
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"jgpy {jgpy.__version__} (JGroups 2.12.2.Final wire format)\n"


def test_check_without_the_analysis_extra_names_it(tmp_path, capsys, monkeypatch):
    """(The installed wheel without extras shows the real case: tests/test_wheel.py.)"""
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("pyspark", "numpy") else find_spec(name, *a))
    assert main(["check", str(tmp_path)]) == 2
    assert capsys.readouterr().out == ("error: python -m jgpy check needs the analysis extra (missing: pyspark, "
                                       "numpy): pip install 'jgpy[analysis]'\n")


def test_decode_hex(capsys):
    assert main(["decode", EX7.hex()]) == 0
    out = capsys.readouterr().out
    assert "LIST|MULTICAST" in out and "pbcast.NAKACK(15)" in out and "seqno=1" in out


# A multicast as the jar's classes wrote it (TP.writeMessage through the interop harness) carrying one header of
# each 2.12 class outside the jar's stack configs, each under its protocol's id, and the transport's TpHeader
EVERY_OTHER_212_HEADER = bytes.fromhex(
    "1302020600020000000000000002000000000000000100000000026869000c0012001d010000000000000005001b003b02001c003c00"
    "00000101010102000000000000000200000000000000010000000000000000040002020000000000000002000000000000000100020000"
    "000000000004000000000000000300000000ca003f0100037376630103010003737663020000000000000004000000000000000300000000"
    "020102002300460100010200000000000000040000000000000003000000000000000009000102000000000000000400000000000000030000"
    "000029004a01000c00cc004b0006002a004c0002002b004d00020000000000000004000000000000000300002f004e000000000000000100"
    "0b64657374696e6174696f6e00022f61003000500900150038000763617074757265")


def test_decode_every_other_212_header(capsys):
    """SMACK, FD_SIMPLE, VIEW_SYNC, mux, MERGEFAST, SCOPE, blocks.mux, DAISYCHAIN, RELAY, STOMP and PRIO headers
    print decoded, field by field, none as an unknown class."""
    assert main(["decode", EVERY_OTHER_212_HEADER.hex()]) == 0
    out = capsys.readouterr().out
    b = "00000000-0000-0003-0000-000000000004"      # UUID(3, 4)
    for line in ("SMACK(18): SmackHeader(type=MCAST, seqno=5)",
                 "FD_SIMPLE(27): FdSimpleHeader(type=I_AM_ALIVE)",
                 "VIEW_SYNC(28): ViewSyncHeader(type=VIEW_SYNC, view=View(ViewId(",
                 f"mux.MuxChannel(202): MuxHeader(id='svc', info=(3, 'svc', UUID('{b}'), b'\\x01\\x02'))",
                 f"MERGEFAST(35): MergefastHeader(view=View(ViewId(UUID('{b}'), 9), [UUID('{b}')]))",
                 "SCOPE(41): ScopeHeader(type=MSG, scope=12)",
                 "blocks.mux.MuxRequestCorrelator(204): BlocksMuxHeader(id=6)",
                 "DAISYCHAIN(42): DaisyHeader(ttl=2)",
                 f"RELAY(43): RelayHeader(type=DISSEMINATE, original_sender=UUID('{b}'))",
                 "STOMP(47): StompHeader(type=MESSAGE, headers=(('destination', '/a'),))",
                 "PRIO(48): PrioHeader(priority=9)",
                 "UDP(21): TpHeader(channel_name='capture')"):
        assert line in out
    assert "unknown" not in out.lower() and "NOT DECODABLE" not in out


def test_decode_bad_hex_is_reported(capsys):
    assert main(["decode", EX7[:-5].hex()]) == 1
    assert "NOT DECODABLE" in capsys.readouterr().out


def test_decode_tcp_stream(capsys):
    frame = struct.pack(">i", len(EX7)) + EX7
    assert main(["decode", (HANDSHAKE + frame).hex()]) == 0
    out = capsys.readouterr().out
    assert "handshake: version 0x1302, peer 127.0.0.1:47801" in out and "frame 0" in out


def test_decode_pcap_and_pcapng(tmp_path, capsys):
    frame = b"\x00" * 12 + b"\x08\x00" + _ip_udp(EX7, 45588, 45588)
    pcap = tmp_path / "x.pcap"
    pcap.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
                     + struct.pack("<IIII", 1, 0, len(frame), len(frame)) + frame)
    assert main(["decode", str(pcap)]) == 0
    out = capsys.readouterr().out
    assert "127.0.0.1:45588 -> 228.8.8.8:45588" in out and "1 UDP datagram(s), 0 not decodable" in out

    def block(btype, body):
        pad = (-len(body)) % 4
        n = 12 + len(body) + pad
        return struct.pack("<II", btype, n) + body + b"\x00" * pad + struct.pack("<I", n)
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(1, struct.pack("<HHI", 1, 0, 65535))
    epb = block(6, struct.pack("<IIIII", 0, 0, 0, len(frame), len(frame)) + frame)
    ng = tmp_path / "x.pcapng"
    ng.write_bytes(shb + idb + epb)
    assert main(["decode", str(ng)]) == 0
    assert "1 UDP datagram(s), 0 not decodable" in capsys.readouterr().out


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.slow
def test_demo_runs(tmp_path):
    from tests.conftest import require_java
    require_java()
    res = subprocess.run([sys.executable, "-m", "jgpy", "demo", "--messages", "600", "--perf-count", "5000",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "OK: report written" in out
    assert out.count("all in order, no gaps, no duplicates") == 3            # J1, P1, P2
    assert "jgpy member P2 joined" in out and "view: [J1, P1, P2]" in out
    assert "jgpy -> Java" in out and "P1 left." in out
    report = (tmp_path / "report.md").read_text()
    assert "FIFO/no gaps/no duplicates: yes" in report
