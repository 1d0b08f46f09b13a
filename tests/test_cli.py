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
