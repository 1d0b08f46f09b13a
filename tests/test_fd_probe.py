"""FD_PING and FD_ICMP (2.12's failure detection by a ping command / ICMP echo): the probes themselves (exit codes,
a hanging command, bad commands, ICMP echo on loopback, hostile ICMP on the raw socket), a neighbour whose probes
fail suspected and removed by GMS, and mixed clusters on the jar's udp.xml with FD_ALL replaced, both ways."""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import struct
import subprocess
import threading
import time
import uuid
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jgpy import Channel
from jgpy.errors import ConfigError
from jgpy.protocols import fd_icmp
from jgpy.protocols.fd_icmp import FD_ICMP, checksum, echo_request, parse_echo_reply
from jgpy.protocols.fd_ping import FD_PING, parse_cmd
from jgpy.protocols.fd_probe import ProbeError
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import JGROUPS_JAR, udp_props, unique_group
from tests.conftest import require, require_java


def loopback_hosts(count: int) -> list[str]:
    """``count`` distinct addresses in 127.0.0.0/8 of this test's own (not 127.0.0.1)."""
    rnd = random.Random(os.getpid() ^ time.monotonic_ns())
    base = f"127.{rnd.randrange(1, 255)}.{rnd.randrange(1, 255)}"
    first = rnd.randrange(1, 250 - count)
    return [f"{base}.{first + i}" for i in range(count)]


def require_root() -> None:
    """Raw ICMP sockets (FD_ICMP, the hostile sender) and loopback aliases need root (or CAP_NET_RAW/ADMIN)."""
    require(None if os.geteuid() == 0 else "root: raw ICMP sockets and `ip addr add` on lo (run the tests as root)")


def script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def fd_ping(cmd: str, timeout: int = 1000) -> FD_PING:
    fd = FD_PING()
    fd.cmd, fd.timeout = cmd, timeout
    fd.init()
    return fd


# ---- FD_PING's command ----

@pytest.mark.processes
def test_ping_command_gets_the_host_and_its_exit_code_is_the_answer(tmp_path):
    seen = tmp_path / "seen"
    cmd = script(tmp_path, "probe.sh", f'echo "$1" >> {seen}; test "$1" = 127.0.0.1')
    fd = fd_ping(cmd)
    assert fd.probe("127.0.0.1") is True
    assert fd.probe("127.0.0.2") is False
    assert seen.read_text().split() == ["127.0.0.1", "127.0.0.2"]
    assert fd_ping("sh -c 'exit 3'").probe("h") is False          # any non-zero exit code is no answer


@pytest.mark.processes
def test_a_hanging_command_is_killed_after_timeout_with_its_children(tmp_path):
    marker = f"{uuid.uuid4().int % 10**6}.25"        # sleep's own argument: finds the grandchild in /proc
    fd = fd_ping(f"sh -c 'sleep {marker}; true'", timeout=300)
    t0 = time.monotonic()
    assert fd.probe("127.0.0.1") is False
    assert time.monotonic() - t0 < 5

    def sleeping() -> bool:
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        return True
            except OSError:
                continue
        return False
    assert wait_all(lambda: not sleeping(), 5), "the command's child outlived the timeout"


@pytest.mark.processes
def test_real_ping_from_loopback_and_2_12s_default_cmd():
    """``ping -c 1 -W 1`` answers from a loopback address; Linux's ``ping HOST`` (2.12's default cmd) never ends:
    killed after timeout, no answer."""
    require(None if shutil.which("ping") else "no ping program (apt-get install iputils-ping)")
    assert fd_ping("ping -c 1 -W 1", timeout=3000).probe(loopback_hosts(1)[0]) is True
    assert fd_ping("ping", timeout=500).probe("127.0.0.1") is False


@pytest.mark.processes
@pytest.mark.parametrize("cmd,why", [("ping 'unbalanced", "cannot be parsed"), ("", "cmd is empty"),
                                     ("/nonexistent/jgpy-ping -c 1", "not an executable program")])
def test_a_bad_cmd_is_a_config_error_naming_fd_ping(cmd, why):
    with pytest.raises(ConfigError, match=f"FD_PING.*{why}"):
        parse_cmd(cmd)
    cfg = stock("udp.xml").replace("FD_ALL", "FD_PING", {"cmd": cmd})
    with pytest.raises(ConfigError, match="FD_PING"):               # when the stack is made (init)
        Channel(cfg, "x", udp_props(*unique_group()))


@pytest.mark.processes
def test_a_command_that_vanished_is_an_error_not_a_miss(tmp_path):
    cmd = script(tmp_path, "gone.sh", "exit 0")
    fd = fd_ping(cmd)
    os.unlink(cmd)
    with pytest.raises(ProbeError):
        fd.probe("127.0.0.1")


# ---- FD_ICMP's echo ----

def test_icmp_echo_from_loopback():
    require_root()
    f = FD_ICMP()
    f.timeout = 2000
    assert f.probe("127.0.0.1") and f.probe(loopback_hosts(1)[0])


def test_no_icmp_socket_is_a_clear_error_at_start(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(fd_icmp.socket, "socket", refuse)
    with pytest.raises(ConfigError, match="FD_ICMP needs an ICMP socket: run as root"):
        FD_ICMP().start()


def reply_packet(ident: int, seq: int, payload: bytes, src: str = "127.0.0.1", typ: int = 0) -> bytes:
    icmp = struct.pack("!BBHHH", typ, 0, 0, ident, seq) + payload
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 0, 0, 64, 1, 0, socket.inet_aton(src),
                     socket.inet_aton("127.0.0.1"))
    return ip + icmp


def test_parse_echo_reply_accepts_only_well_formed_replies():
    good = reply_packet(7, 9, b"nonce")
    assert parse_echo_reply(good, True) == (7, 9, b"nonce")
    assert parse_echo_reply(good[20:], False) == (7, 9, b"nonce")
    assert parse_echo_reply(reply_packet(7, 9, b"x", typ=8), True) is None          # a request, not a reply
    assert parse_echo_reply(good[:-1] + b"\x00", True) is None                      # checksum wrong
    assert parse_echo_reply(bytes([0x4F]) + good[1:], True) is None                 # IHL beyond the packet
    assert all(parse_echo_reply(good[:n], True) is None for n in range(28))
    assert echo_request(1, 2, b"ab")[0] == 8 and checksum(echo_request(1, 2, b"ab")) == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.booleans())
def test_parse_echo_reply_never_raises(data, with_ip_header):
    r = parse_echo_reply(data, with_ip_header)
    assert r is None or (len(r) == 3 and isinstance(r[2], bytes))


class IcmpFlood:
    """Raw ICMP to 127.0.0.1 until stopped: forged echo replies with the probe's identifier (sequence numbers
    and payloads guessed), other ICMP types, truncated and garbage packets."""

    def __init__(self, ident: int) -> None:
        self.ident, self.sent = ident, 0
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self._thread = threading.Thread(target=self._run, name="icmp-flood", daemon=True)

    def _packets(self, rnd: random.Random) -> list[bytes]:
        seq = rnd.randrange(65536)
        forged = reply_packet(self.ident, seq, os.urandom(fd_icmp.NONCE_LEN))[20:]
        return [forged, forged[:5], b"", bytes([3, 1]) + os.urandom(30), os.urandom(rnd.randrange(1, 64)),
                struct.pack("!BBHHH", 0, 0, 0, self.ident, seq)]

    def _run(self) -> None:
        rnd = random.Random(1)
        while not self._stop.is_set():
            for p in self._packets(rnd):
                try:
                    self._sock.sendto(p, ("127.0.0.1", 0))
                    self.sent += 1
                except OSError:
                    pass
            time.sleep(0.001)

    def __enter__(self) -> "IcmpFlood":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


def drop_echo_requests(fd: FD_ICMP, host: str | None = None) -> None:
    """Fault injection on the wire: the echo requests ``fd`` sends (to ``host``, or all) get a wrong checksum,
    so the kernel drops them and no reply comes (a host that does not answer, on loopback)."""
    send = fd._send_echo

    def corrupt(sock, to, request):
        if host is None or to == host:
            request = request[:2] + bytes([request[2] ^ 0xFF]) + request[3:]
        send(sock, to, request)
    fd._send_echo = corrupt


def test_hostile_icmp_neither_answers_a_probe_nor_breaks_it():
    require_root()
    fd = FD_ICMP()
    fd.timeout = 700
    with IcmpFlood(fd._ident) as flood:
        assert wait_all(lambda: flood.sent > 100, 5)
        assert all(fd.probe("127.0.0.1") for _ in range(3))         # the real answer is found amid the flood
        drop_echo_requests(fd)
        assert fd.probe("127.0.0.1") is False                        # forged replies are no answer
    assert fd.num_foreign_icmp > 0


# ---- suspicion and removal, in this process ----

@pytest.fixture
def lo_hosts():
    """Three loopback addresses of this test's own, added to ``lo`` for the test (``ip addr``): 2.12's UDP sets
    the multicast interface to its bind_addr and finds no interface for an address that lo merely routes, and
    jgpy members on such an address find each other only by MERGE2, tens of seconds later."""
    require_root()
    hosts = loopback_hosts(3)
    added = []
    try:
        for h in hosts:
            subprocess.run(["ip", "addr", "add", f"{h}/32", "dev", "lo"], check=True, capture_output=True, timeout=10)
            added.append(h)
        yield hosts
    finally:
        for h in added:
            subprocess.run(["ip", "addr", "del", f"{h}/32", "dev", "lo"], capture_output=True, timeout=10)


def _suspicion_cluster(proto: str, props: dict[str, str], hosts: list[str]):
    """Three jgpy members on udp.xml (own group), each bound to its own loopback address, FD_ALL replaced by
    ``proto``; without VERIFY_SUSPECT, which would find the member alive (it is: only its probes fail)."""
    cfg = stock("udp.xml").replace("FD_ALL", proto, props).remove("VERIFY_SUSPECT").remove("FD_SOCK")
    group = udp_props(*unique_group())
    members = [make_member("P", f"M{i}", cfg, dict(group, **{"jgroups.bind_addr": h})) for i, h in enumerate(hosts)]
    return members


def _form(members) -> list[str]:
    cluster = f"fdp-{uuid.uuid4().hex[:6]}"
    for m in members:
        m.connect(cluster)
    names = [m.name for m in members]
    assert wait_all(lambda: all(m.view_names() == names for m in members), 30)
    return names


def _assert_removed(members, victim: int, fd) -> None:
    survivors = [m.name for i, m in enumerate(members) if i != victim]
    assert wait_all(lambda: all(m.view_names() == survivors for i, m in enumerate(members) if i != victim), 30), \
        [m.view_names() for m in members]
    assert fd.num_probe_failures >= 2 and fd.num_suspect_events >= 1, fd.dump_stats()


def _assert_all_answer(fd, seconds: float) -> None:
    time.sleep(seconds)                                   # a few probe rounds: nobody suspected
    assert fd.num_heartbeats >= 2 and fd.num_probe_failures == 0, fd.dump_stats()


@pytest.mark.processes
@pytest.mark.slow
def test_a_neighbour_whose_ping_fails_is_suspected_and_removed(tmp_path, lo_hosts):
    """M1 probes M2; the command fails for M2's host once a marker file for it exists."""
    down = tmp_path / "down"
    down.mkdir()
    cmd = script(tmp_path, "probe.sh", f'test ! -e "{down}/$1"')
    # (a command forked on a loaded 2-core machine may take a few hundred ms: timeout 600)
    members = _suspicion_cluster("FD_PING", {"cmd": cmd, "timeout": "600", "max_tries": "2"}, lo_hosts)
    try:
        _form(members)
        fd = members[1].channel.stack.find("FD_PING")
        _assert_all_answer(fd, 2.0)
        (down / lo_hosts[2]).touch()
        _assert_removed(members, 2, fd)
    finally:
        for m in reversed(members):
            m.close()


@pytest.mark.processes
@pytest.mark.slow
def test_a_neighbour_that_does_not_answer_icmp_is_suspected_and_removed(lo_hosts):
    """M1 probes M2; from some point on its echo requests to M2's host are dropped (see drop_echo_requests)."""
    members = _suspicion_cluster("FD_ICMP", {"timeout": "300", "max_tries": "2"}, lo_hosts)
    try:
        _form(members)
        fd = members[1].channel.stack.find("FD_ICMP")
        _assert_all_answer(fd, 1.5)
        drop_echo_requests(fd, lo_hosts[2])
        _assert_removed(members, 2, fd)
    finally:
        for m in reversed(members):
            m.close()


# ---- mixed clusters: the jar's udp.xml with FD_ALL replaced, Java members running their own FD_PING / FD_ICMP ----

def liveness_cmd(tmp_path) -> str:
    """A "ping" that answers while a UDP socket is bound to the host: the member's own (each member has its own
    loopback address); 2.12's FD_PING passes the logical name, so members are named by their address."""
    return script(tmp_path, "alive.sh", 'ss -Hanu src "$1" | grep -q .')


def java_protocol_ids(tmp_path) -> str:
    """2.12's jg-protocol-ids.xml plus FD_PING and FD_ICMP under FD's id, as jgpy sends them: without an id a
    2.12 stack holding one of them fails on every message (see jgpy.protocols.fd_probe)."""
    table = zipfile.ZipFile(JGROUPS_JAR).read("jg-protocol-ids.xml").decode()
    extra = "".join(f'    <class id="2" name="org.jgroups.protocols.{p}"/>\n' for p in ("FD_PING", "FD_ICMP"))
    path = tmp_path / "jg-protocol-ids.xml"
    path.write_text(table.replace("</protocol-ids>", extra + "</protocol-ids>"))
    return str(path)


def _mixed(tmp_path, kinds: str, hosts: list[str], proto: str, props: dict[str, str], keep_fd_sock: bool):
    """Members named by their own loopback address (2.12's FD_PING gives the command the logical name)."""
    cfg = stock("udp.xml").replace("FD_ALL", proto, props)
    if not keep_fd_sock:
        cfg = cfg.remove("FD_SOCK")
    group = dict(udp_props(*unique_group()), **{"jgroups.conf.protocol_id_file": java_protocol_ids(tmp_path)})
    return [make_member(k, h, cfg, dict(group, **{"jgroups.bind_addr": h})) for k, h in zip(kinds, hosts)]


def _probes(member, proto: str) -> dict:
    return member.stats().get(proto, {})


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("proto", ["FD_PING", "FD_ICMP"])
@pytest.mark.parametrize("kinds", ["JP", "PJ"])
def test_probing_fd_in_mixed_clusters(tmp_path, lo_hosts, proto, kinds):
    """Live members answer every probe (ICMP from loopback; the liveness command): nobody is suspected and
    messages flow both ways. 2.12's FD_ICMP never suspects (see jgpy.protocols.fd_probe)."""
    require_java()
    props = {"timeout": "1000", "max_tries": "3"}             # (a forked command may be slow on a loaded machine)
    if proto == "FD_PING":
        props["cmd"] = liveness_cmd(tmp_path)
    members = _mixed(tmp_path, kinds, lo_hosts, proto, props, keep_fd_sock=False)
    try:
        names = _form(members)
        time.sleep(3.5)                                  # three probe rounds
        assert all(m.view_names() == names for m in members)
        jgpy = next(m for m in members if m.kind == "jgpy")
        st = _probes(jgpy, proto)
        assert st["num_heartbeats"] >= 2 and st["num_probe_failures"] == 0 and st["num_suspect_events"] == 0, st
        for m in members:
            m.send_numbered(20)
        for m in members:
            assert m.wait_received(40, timeout=30)
    finally:
        for m in reversed(members):
            m.close()


def _assert_removed_after_kill(members, victim: int) -> float:
    """Seconds from the kill to the survivors' views without the victim."""
    names = [m.name for m in members]
    t_kill = members[victim].kill()
    survivors = [n for i, n in enumerate(names) if i != victim]
    assert wait_all(lambda: all(m.view_names() == survivors for i, m in enumerate(members) if i != victim), 40), \
        [m.view_names() for i, m in enumerate(members) if i != victim]
    return time.monotonic() - t_kill


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("kinds,victim", [("JpJ", 1), ("PJP", 1), ("pJP", 0)],
                         ids=["java-coord-java-detects", "jgpy-coord-jgpy-detects", "jgpy-coord-killed"])
def test_fd_ping_removes_a_member_killed_with_kill_9(tmp_path, lo_hosts, kinds, victim, figures):
    """Without FD_SOCK the probes are the only failure detection: the member before the victim in the view
    (Java's FD_PING or jgpy's) finds the victim's socket gone, suspects it, VERIFY_SUSPECT gets no answer and the
    coordinator (or, when the victim was the coordinator, the next member) removes it."""
    require_java()
    members = _mixed(tmp_path, kinds, lo_hosts, "FD_PING",
                     {"cmd": liveness_cmd(tmp_path), "timeout": "1000", "max_tries": "3"}, keep_fd_sock=False)
    try:
        _form(members)
        elapsed = _assert_removed_after_kill(members, victim)
        figures(f"FD_PING kill -9 {kinds}[{victim}] -> view without it (timeout=1000, max_tries=3, "
                f"VERIFY_SUSPECT 1500)", elapsed, "s")
        prober = members[victim - 1]
        if prober.kind == "jgpy":
            st = _probes(prober, "FD_PING")
            assert st["num_probe_failures"] >= 3 and st["num_suspect_events"] >= 1, st
    finally:
        for m in reversed(members):
            m.close()


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("kinds", ["JpJ", "PJP"], ids=["java-coord", "jgpy-coord"])
def test_udp_xml_with_fd_icmp_removes_a_member_killed_with_kill_9(tmp_path, lo_hosts, kinds):
    """The jar's udp.xml with FD_ALL replaced by FD_ICMP, FD_SOCK kept: the middle member, of the other kind than
    the coordinator, is killed and removed. On loopback the kernel answers ICMP whether or not the member lives
    (and 2.12's FD_ICMP never suspects): FD_SOCK is what removes it here, and the probes stay answered."""
    require_java()
    members = _mixed(tmp_path, kinds, lo_hosts, "FD_ICMP", {"timeout": "500", "max_tries": "3"}, keep_fd_sock=True)
    try:
        _form(members)
        _assert_removed_after_kill(members, 1)
        for m in (members[0], members[2]):
            if m.kind == "jgpy":
                st = _probes(m, "FD_ICMP")
                assert st["num_heartbeats"] >= 1 and st["num_probe_failures"] == 0, st
    finally:
        for m in reversed(members):
            m.close()
