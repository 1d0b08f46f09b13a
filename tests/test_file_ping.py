"""FILE_PING (2.12's discovery through a shared directory): udp.xml with FILE_PING in PING's place, in mixed
clusters both ways (Java and jgpy read each other's files), the coordinator's clean-up of a crashed member's
file, and what a hostile directory holds (bad, huge and many files): counted, removed, bounded."""

from __future__ import annotations

import os
import uuid

import pytest

from jgpy import DIALECT, UUID, IpAddress
from jgpy._core.types import PingData
from jgpy.protocols.file_ping import SUFFIX, address_file_name
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.java import udp_props, unique_group
from tests.conftest import require_java
from tests.test_stack_interop import Cluster, exchange

FILE_PING_ID = 9


class FilePingCluster(Cluster):
    def __init__(self, kinds: str, location: str):
        self.kinds = kinds
        self.name = f"fping-{uuid.uuid4().hex[:8]}"
        self.location = location
        self.config = self.jgpy_config = stock("udp.xml").replace("PING", "FILE_PING", {"location": location,
                                                                                       "timeout": "3000"})
        self.props = udp_props(*unique_group())
        counts = {"J": 0, "P": 0}
        self.members = []
        for k in kinds:
            counts[k] += 1
            self.members.append(make_member(k, f"{k}{counts[k]}", self.config, self.props))

    @property
    def dir(self) -> str:
        return os.path.join(self.location, self.name)

    def files(self) -> list[str]:
        return sorted(f for f in os.listdir(self.dir) if f.endswith(SUFFIX))

    def close(self) -> None:
        for m in self.members:
            try:
                m.close()
            except Exception:  # noqa: BLE001 - closing what is left
                pass


@pytest.fixture
def fping(tmp_path):
    made: list[FilePingCluster] = []

    def make(kinds: str) -> FilePingCluster:
        if "J" in kinds:
            require_java()
        c = FilePingCluster(kinds, str(tmp_path))
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def test_files_are_named_by_the_long_uuid():
    """2.12's addressAsString; the contents (PingData.writeTo) are read by Java in the mixed clusters below: a
    Java joiner that could not read a jgpy member's file would remove it and form a cluster of its own."""
    a = UUID(0x0102030405060708, 0x1112131415161718)
    assert address_file_name(a) == "01020304-0506-0708-1112-131415161718"


@pytest.mark.parametrize("kinds", [pytest.param(k, marks=pytest.mark.interop) for k in ("JP", "PJ", "PJP")] + ["PP"])
def test_file_ping_forms_mixed_clusters(fping, kinds):
    c = fping(kinds)
    c.start()
    c.assert_agreement()
    assert all(m.view_names() == c.names() for m in c.members)
    exchange(c, 500, unicasts=50)
    assert len(c.files()) == len(kinds)            # one file per member, Java's and jgpy's side by side


@pytest.mark.interop
def test_the_coordinator_removes_a_crashed_members_file(fping):
    c = fping("PJP")
    c.start()
    c.assert_agreement()
    java = c.members[1]
    name = address_file_name(c.members[0].address_of(java.name)) + SUFFIX
    assert name in c.files()
    java.kill()
    rest = [c.members[0], c.members[2]]
    assert wait_all(lambda: all(m.view_names() == ["P1", "P2"] for m in rest), 60)
    assert wait_all(lambda: name not in c.files(), 20), c.files()


def test_a_hostile_directory_is_bounded_and_cleaned(fping):
    c = fping("PP")
    os.makedirs(c.dir)
    bad = {"garbage" + SUFFIX: b"\x00\xff" * 10, "empty" + SUFFIX: b"", "huge" + SUFFIX: b"\x02" * 200_000,
           "truncated" + SUFFIX: DIALECT.encode(PingData(UUID.random(), None, None, False, "x", None))[:-3]}
    for n, data in bad.items():
        with open(os.path.join(c.dir, n), "wb") as f:
            f.write(data)
    os.symlink("/etc/passwd", os.path.join(c.dir, "link" + SUFFIX))
    c.start()
    c.assert_agreement()
    p1 = c.members[0]
    st = p1.stats()["FILE_PING"]
    assert st["bad_files"] >= len(bad) and st["files_removed"] >= len(bad), st
    assert not any(n in c.files() for n in bad)
    assert os.path.islink(os.path.join(c.dir, "link" + SUFFIX))     # not followed, not read, not removed
    # many made-up members: a discovery reads at most max_files of them
    fp = p1.channel.stack.find("FILE_PING")
    fp.max_files = 50
    for i in range(300):
        d = PingData(UUID.random(), None, None, False, f"ghost{i}", [IpAddress("127.0.0.1", 9)])
        with open(os.path.join(c.dir, f"ghost{i}{SUFFIX}"), "wb") as f:
            f.write(DIALECT.encode(d))
    assert len(fp.read_all(c.name)) == 50
