"""MPING and BPING (2.12's discovery on a datagram socket of its own): the jar's mping.xml unchanged but for its
ports, in mixed clusters with a Java and a jgpy coordinator; BPING in tcp.xml's place of TCPPING, both ways;
and what strangers can send to the discovery sockets (counted and dropped; the receiver goes on)."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from jgpy import DIALECT, Message, UUID
from jgpy._core.wire import Writer
from jgpy.headers import PingHeader, UnicastHeader
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import free_port_block, private_tcp, unique_group
from jgpy._core.types import PingData
from tests.conftest import require_java
from tests.test_stack_interop import Cluster, exchange

MPING_ID, BPING_ID = 7, 49


class DiscoveryCluster(Cluster):
    """A cluster on a TCP stack whose discovery is MPING or BPING, on ports (and a group) of its own."""

    def __init__(self, kinds: str, config, props: dict[str, str]):
        self.kinds = kinds
        self.name = f"dgdisc-{uuid.uuid4().hex[:8]}"
        self.config = self.jgpy_config = config
        self.props = props
        counts = {"J": 0, "P": 0}
        self.members = []
        for k in kinds:
            counts[k] += 1
            self.members.append(make_member(k, f"{k}{counts[k]}", config, props))

    def close(self) -> None:
        for m in self.members:
            try:
                m.close()
            except Exception:  # noqa: BLE001 - closing what is left
                pass


def mping_cluster(kinds: str) -> DiscoveryCluster:
    config, props, _ = private_tcp(stock("mping.xml"), len(kinds))
    addr, port = unique_group()
    # ip_ttl 0: the jar's receive_on_all_interfaces="true" makes Java send on the default interface; TTL 0 keeps
    # those datagrams on this host
    props.update({"jgroups.mping.mcast_addr": addr, "jgroups.mping.mcast_port": str(port),
                  "jgroups.mping.ip_ttl": "0"})
    return DiscoveryCluster(kinds, config, props)


def bping_cluster(kinds: str) -> DiscoveryCluster:
    """tcp.xml with BPING (on a block of free ports, requests to 127.0.0.1) in TCPPING's place."""
    config, props, _ = private_tcp(stock("tcp.xml"), len(kinds))
    base = free_port_block(len(kinds) + 1)
    config = config.replace("TCPPING", "BPING", {"dest": "127.0.0.1", "bind_port": str(base),
                                                 "port_range": str(len(kinds) + 1), "timeout": "3000",
                                                 "num_initial_members": str(len(kinds))})
    return DiscoveryCluster(kinds, config, props)


@pytest.fixture
def clusters():
    made: list[DiscoveryCluster] = []

    def make(factory, kinds: str) -> DiscoveryCluster:
        if "J" in kinds:
            require_java()
        c = factory(kinds)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def test_the_jars_mping_xml_loads_unchanged():
    from jgpy.protocols.mping import MPING
    from jgpy.stack.stack import ProtocolStack
    from tests.test_tcp import _Top
    stack = ProtocolStack(stock("mping.xml"), _Top())
    mping = next(p for p in stack.protocols if p.NAME == "MPING")
    assert isinstance(mping, MPING) and mping.id == MPING_ID
    assert (mping.mcast_port, mping.ip_ttl, mping.timeout, mping.receive_on_all_interfaces) == (7500, 8, 4000, True)


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ", "PJP")] + ["PP"])
def test_mping_xml_forms_mixed_clusters(clusters, kinds):
    c = clusters(mping_cluster, kinds)
    c.start()
    c.assert_agreement()
    assert all(m.view_names() == c.names() for m in c.members)
    exchange(c, 1000, unicasts=100)
    for m in (m for m in c.members if m.kind == "jgpy"):
        st = m.stats()["MPING"]
        assert st["datagrams_received"] >= 1 and st["datagrams_dropped"] == 0, st


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ")] + ["PP"])
def test_bping_forms_mixed_clusters(clusters, kinds):
    c = clusters(bping_cluster, kinds)
    c.start()
    c.assert_agreement()
    exchange(c, 500, unicasts=50)


def _request_bytes(cluster: str, sender, pid: int = MPING_ID, extra_header: bool = False,
                   typ: int = PingHeader.GET_MBRS_REQ) -> bytes:
    from jgpy import IpAddress
    data = PingData(sender, None, None, False, "stranger", [IpAddress("127.0.0.1", 9)])
    m = Message(None, None, sender, Message.OOB)
    m.put_header(pid, PingHeader(typ, data, cluster, None))
    if extra_header:
        m.put_header(12, UnicastHeader(UnicastHeader.DATA, 1, 1, True))
    w = Writer()
    DIALECT.write_message_to(w, m)
    return w.getvalue()


def test_strangers_datagrams_on_the_mping_socket_are_counted_and_dropped(clusters):
    c = clusters(mping_cluster, "PP")
    c.start()
    c.assert_agreement()
    p1 = c.members[0]
    group = (c.props["jgroups.mping.mcast_addr"], int(c.props["jgroups.mping.mcast_port"]))
    bad = [b"", b"\x00", b"\xff" * 200, bytes(70000 // 2),
           _request_bytes(c.name, UUID.random(), extra_header=True),           # a header besides discovery's
           _request_bytes(c.name, UUID.random(), pid=BPING_ID),                # another protocol's id
           _request_bytes(c.name, UUID.random(), typ=PingHeader.GET_MBRS_RSP),  # responses use the transport
           _request_bytes(c.name, UUID.random())[:-5]]                          # truncated
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        for _ in range(20):
            for data in bad:
                s.sendto(data, group)
            time.sleep(0.02)                                # within the socket's receive buffer
    finally:
        s.close()
    dropped = len([b for b in bad if b]) * 20          # an empty datagram is not read as one
    assert wait_all(lambda: all(m.stats()["MPING"]["datagrams_dropped"] >= dropped for m in c.members), 20), \
        [(m.stats()["MPING"]["datagrams_received"], m.stats()["MPING"]["datagrams_dropped"]) for m in c.members]
    # the receivers go on: a third member finds the cluster through them
    late = make_member("P", "P3", c.config, c.props)
    c.members.append(late)
    late.connect(c.name)
    c.assert_agreement()
    assert p1.view_names() == ["P1", "P2", "P3"]
