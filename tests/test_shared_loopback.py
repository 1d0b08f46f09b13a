"""SHARED_LOOPBACK and LOOPBACK: clusters inside one process, without sockets (jgpy/conf/shared-loopback.xml):
joins, FIFO multicasts and unicasts, state transfer, leaves, clusters kept apart by name; LOOPBACK's cluster of
one hears itself."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from jgpy import Channel, Receiver
from jgpy.stack.config import load_config, parse_xml
from jgpy.testing.cluster import wait_all

CONFIG = load_config("shared-loopback.xml")


class Recorder(Receiver):
    def __init__(self) -> None:
        self.msgs: list = []
        self.state = b""
        self.lock = threading.Lock()

    def receive(self, msg) -> None:
        with self.lock:
            self.msgs.append((str(msg.src), msg.dest is None, bytes(msg.buffer)))

    def get_state(self) -> bytes:
        return b"the state"

    def set_state(self, state) -> None:
        self.state = bytes(state)


@pytest.fixture
def channels():
    made: list[Channel] = []

    def make(n: int, cluster: str | None = None, config=CONFIG, first: int = 0, **connect) -> list[Channel]:
        cluster = cluster or f"sl-{uuid.uuid4().hex[:8]}"
        out = []
        for i in range(first, first + n):
            ch = Channel(config, f"M{i}")
            ch.receiver = Recorder()
            made.append(ch)
            ch.connect(cluster, **connect)
            out.append(ch)
        return out
    yield make
    for ch in made:
        ch.close()


def _sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def test_an_in_process_cluster_forms_and_keeps_fifo_without_sockets(channels):
    before = _sockets()
    chs = channels(4)
    assert wait_all(lambda: all(len(ch.view.members) == 4 for ch in chs), 10)
    assert all(ch.view == chs[0].view for ch in chs)
    assert _sockets() == before                       # nothing was opened
    for ch in chs:
        for i in range(300):
            ch.send(None, b"%s:%d" % (ch.name.encode(), i))
    for i in range(100):
        chs[1].send(chs[2].address, b"u%d" % i)
    total = 4 * 300 + 100
    assert wait_all(lambda: len(chs[2].receiver.msgs) == total, 30), len(chs[2].receiver.msgs)
    for ch in chs:
        assert wait_all(lambda: len(ch.receiver.msgs) >= 4 * 300, 30)
        for sender in chs:                            # per sender FIFO
            got = [m[2] for m in ch.receiver.msgs if m[0] == sender.name and m[1]]
            assert got == [b"%s:%d" % (sender.name.encode(), i) for i in range(300)]
    assert [m[2] for m in chs[2].receiver.msgs if not m[1]] == [b"u%d" % i for i in range(100)]


def test_connect_without_flush_and_without_gms(channels):
    """connect(cluster, use_flush=False) (JChannel.connect(cluster, false)) on a stack without GMS (which hands the
    transport a plain name): the transport takes the cluster name from CONNECT's ConnectArg, a str subclass that
    the C codecs refused."""
    cfg = parse_xml('<config><SHARED_LOOPBACK/><SMACK print_local_addr="false"/></config>')
    a, b = channels(2, config=cfg, use_flush=False)
    a.send(None, b"hi")
    assert wait_all(lambda: [m[2] for m in b.receiver.msgs] == [b"hi"], 10)
    assert type(a.cluster_name) is str


def test_state_transfer_and_leaves(channels):
    a, b = channels(2)
    (c,) = channels(1, cluster=a.cluster_name, first=2)
    assert c.get_state(None, 5000)
    assert c.receiver.state == b"the state"
    a.close()                                         # the coordinator leaves: b takes over
    assert wait_all(lambda: [str(m) for m in b.view.members] == ["M1", "M2"] == [str(m) for m in c.view.members],
                    20)
    b.send(None, b"after")
    assert wait_all(lambda: (b"after" in [m[2] for m in c.receiver.msgs]), 10)


def test_clusters_of_other_names_stay_apart(channels):
    x = channels(2, cluster="sl-x-" + uuid.uuid4().hex[:6])
    y = channels(2, cluster="sl-y-" + uuid.uuid4().hex[:6], first=2)
    assert wait_all(lambda: all(len(ch.view.members) == 2 for ch in x + y), 10)
    x[0].send(None, b"to x")
    assert wait_all(lambda: any(m[2] == b"to x" for m in x[1].receiver.msgs), 10)
    assert not any(m[2] == b"to x" for ch in y for m in ch.receiver.msgs)


def test_loopback_is_a_cluster_of_one_that_hears_itself(channels):
    cfg = CONFIG.replace("SHARED_LOOPBACK", "LOOPBACK", {"loopback": "true"})
    name = f"lb-{uuid.uuid4().hex[:6]}"
    (a,) = channels(1, cluster=name, config=cfg)
    (b,) = channels(1, cluster=name, config=cfg, first=1)     # same name: still alone
    assert [str(m) for m in a.view.members] == ["M0"] and [str(m) for m in b.view.members] == ["M1"]
    a.send(None, b"hello")
    assert wait_all(lambda: [m[2] for m in a.receiver.msgs] == [b"hello"], 10)
    assert b.receiver.msgs == []
