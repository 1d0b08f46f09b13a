"""Socket filters: the program that drops datagrams starting with a prefix, on real sockets, and UDP's use of it
(the kernel drops our own bundles coming back on the multicast socket)."""

from __future__ import annotations

import os
import socket
import uuid

import pytest

from jgpy import Channel, Receiver
from jgpy.stack.sockfilter import attach_filter, drop_payload_prefix
from jgpy.testing.cluster import stock, wait_all
from jgpy.testing.java import udp_props, unique_group


def _multicast_pair() -> tuple[socket.socket, socket.socket, tuple[str, int]]:
    """A sender and a receiver on a group of our own, on loopback."""
    group, port = unique_group()
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    rx.bind((group, port))
    rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton("127.0.0.1"))
    rx.settimeout(0.3)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    return tx, rx, (group, port)


def _received(rx: socket.socket, limit: int = 1000) -> list[bytes]:
    got = []
    for _ in range(limit):
        try:
            got.append(rx.recv(70000))
        except socket.timeout:
            break
    return got


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 21, 60])
def test_only_datagrams_that_start_with_the_prefix_are_dropped(n):
    tx, rx, dest = _multicast_pair()
    try:
        prefix = os.urandom(n)
        attach_filter(rx, drop_payload_prefix(prefix))
        dropped = [prefix, prefix + b"payload", prefix + os.urandom(3000)]
        kept = [b"", prefix[:-1], b"\x00" + prefix, os.urandom(n + 5)]
        for i in range(n):                       # any one byte of the prefix differs: kept
            changed = bytearray(prefix + b"tail")
            changed[i] ^= 0x40
            kept.append(bytes(changed))
        kept = [k for k in kept if not k.startswith(prefix)]
        for d in dropped + kept:
            tx.sendto(d, dest)
        assert sorted(_received(rx)) == sorted(kept)
    finally:
        tx.close()
        rx.close()


def test_a_prefix_must_fit_the_program():
    for bad in (b"", bytes(61)):
        with pytest.raises(ValueError, match="prefix of 1..60 bytes"):
            drop_payload_prefix(bad)


class _Count(Receiver):
    def __init__(self):
        self.n = 0

    def receive(self, msg):
        self.n += 1


@pytest.mark.parametrize("in_kernel", [True, False])
def test_a_members_own_bundles_are_dropped_by_the_kernel_and_the_others_still_arrive(in_kernel):
    """Two members both multicast: each gets all of the other's messages and its own through loopback; with the
    filter (the default) none of its own bundles reaches the transport, without it the transport drops them."""
    props = udp_props(*unique_group())
    cluster = f"sockfilter-{uuid.uuid4().hex[:8]}"
    config = stock("udp.xml").with_properties("UDP", drop_own_bundles_in_kernel=str(in_kernel).lower())
    chans = [Channel(config, name, props) for name in "AB"]
    counts = [_Count(), _Count()]
    try:
        for c, r in zip(chans, counts):
            c.receiver = r
            c.connect(cluster)
        assert wait_all(lambda: all(c.view is not None and len(c.view) == 2 for c in chans), 30)
        for _ in range(2000):
            for c in chans:
                c.send(None, b"x" * 1000)
        assert wait_all(lambda: all(r.n == 4000 for r in counts), 30), [r.n for r in counts]
        for c in chans:
            udp = c.stack.find("UDP")
            stats = udp.dump_stats()
            assert stats["own_bundles_filtered"] is in_kernel
            if in_kernel:
                assert stats["dropped_own_bundles"] == 0
            else:
                assert stats["dropped_own_bundles"] > 0
    finally:
        for c in chans:
            c.close()


def test_without_loopback_our_own_multicasts_come_from_the_network_unfiltered():
    props = udp_props(*unique_group())
    config = stock("udp.xml").with_properties("UDP", loopback="false")
    c = Channel(config, "A", props)
    r = _Count()
    try:
        c.receiver = r
        c.connect(f"sockfilter-{uuid.uuid4().hex[:8]}")
        for _ in range(500):
            c.send(None, b"y" * 1000)
        assert wait_all(lambda: r.n == 500, 30), r.n
        assert c.stack.find("UDP").dump_stats()["own_bundles_filtered"] is False
    finally:
        c.close()
