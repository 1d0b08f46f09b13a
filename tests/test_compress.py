"""COMPRESS: the jar's compress.xml unchanged in mixed clusters (a Java and a jgpy coordinator, 1 KB compressible
messages both ways, multicast and unicast), Deflater's bytes, and compressed payloads that lie: wrong sizes,
corrupt and truncated streams, deflate bombs (counted and dropped, memory bounded, the rest of the batch
delivered)."""

from __future__ import annotations

import tracemalloc
import zlib

import pytest

from jgpy import Message, UUID
from jgpy.headers import CompressHeader
from jgpy.protocols.compress import COMPRESS
from jgpy.testing.cluster import check_fifo, stock
from tests.conftest import require_java
from tests.fakestack import FakeStack
from tests.test_stack_interop import Cluster

pytestmark = pytest.mark.timeout(300)

ID = 19                                  # COMPRESS's protocol id (jg-protocol-ids.xml)
TEXT = b"JGroups 2.12 compress.xml: the same words again and again. " * 18          # ~1 KB, compressible


def _stack(**props) -> FakeStack:
    prot = COMPRESS()
    for k, v in {"min_size": 10, **props}.items():
        setattr(prot, k, v)
    return FakeStack(prot, loopback=False)


def test_down_deflates_as_javas_deflater_and_only_when_it_saves():
    s = _stack()
    try:
        s.send(Message(None, TEXT))
        s.send(Message(None, b"short"))                                   # below min_size
        noise = bytes((i * 7919 + (i >> 3) * 104729) & 0xFF for i in range(600))
        incompressible = zlib.compress(noise, 9)
        s.send(Message(None, incompressible))                             # deflating it saves nothing
        sent = s.tp.sent
        assert sent[0].msg.get_header(ID) == CompressHeader(len(TEXT))
        deflated = sent[0].msg.buffer                                    # a zlib stream (Deflater's default
        assert zlib.decompress(deflated) == TEXT                          # framing), as small as with 32 KB
        assert len(deflated) == len(zlib.compress(TEXT, 9)) and deflated[0] & 0x0F == 8     # window
        big = TEXT * 40                                                   # beyond 32 KB: Deflater's bytes
        s.send(Message(None, big))
        assert s.tp.sent[-1].msg.buffer == zlib.compress(big, 9)
        del s.tp.sent[-1]
        assert sent[1].msg.get_header(ID) is None and sent[1].msg.buffer == b"short"
        assert sent[2].msg.get_header(ID) is None and sent[2].msg.buffer == incompressible
        assert s.prot.dump_stats()["compressed"] == 2 and s.prot.dump_stats()["not_smaller"] == 1
        s.tp.inject_datagrams([x.data for x in sent])                     # and back up: the originals
        assert [m.buffer for m in s.top.wait_messages(3)] == [TEXT, b"short", incompressible]
        assert s.top.messages[0].get_header(ID) == CompressHeader(len(TEXT))   # a copy, header kept (2.12)
    finally:
        s.close()


def _compressed(size: int, claimed: int, data: bytes | None = None) -> Message:
    m = Message(None, data if data is not None else zlib.compress(TEXT[:size]), UUID(1, 2))
    m.put_header(ID, CompressHeader(claimed))
    return m


def _bomb(mb: int) -> bytes:
    """``mb`` MB of zeros deflated, without ever holding them."""
    co = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    return b"".join([co.compress(chunk) for _ in range(mb)] + [co.flush()])


def test_lying_payloads_are_counted_and_dropped_alone_and_memory_stays_bounded():
    s = _stack(max_uncompressed_size=4 << 20)
    bomb = _bomb(64)
    good = _compressed(len(TEXT), len(TEXT))
    try:
        batch = [
            _compressed(len(TEXT), len(TEXT) + 1),                     # claims more than it inflates to
            _compressed(len(TEXT), len(TEXT) - 1),                     # claims less
            _compressed(0, len(TEXT), zlib.compress(TEXT)[:30]),       # truncated stream
            _compressed(0, len(TEXT), b"\x78\xda" + bytes(range(200))),  # corrupt
            _compressed(0, len(TEXT), b"not zlib at all"),
            _compressed(len(TEXT), -5),                                # negative (2.12: NegativeArraySizeException)
            _compressed(len(TEXT), 2_000_000_000),                     # far beyond what 1 KB can inflate to
            _compressed(0, 5 << 20, bomb),                             # above max_uncompressed_size
            _compressed(0, 4 << 20, bomb),                             # a bomb: inflated up to its claim only
            _compressed(0, 1000, bomb),
            good,
        ]
        tracemalloc.start()
        s.tp.inject(batch)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert [m.buffer for m in s.top.messages] == [TEXT]
        st = s.prot.dump_stats()
        assert (st["dropped_size_mismatch"], st["dropped_corrupt"], st["dropped_bad_size"]) == (5, 2, 3), st
        assert st["uncompressed"] == 1 and st["failed_msgs"] == 0
        assert peak < 12 << 20, f"inflating the bombs peaked at {peak >> 20} MB"
    finally:
        s.close()


def test_a_header_without_payload_goes_up_as_2_12_passes_it():
    s = _stack()
    try:
        m = Message(None, None, UUID(1, 2))
        m.put_header(ID, CompressHeader(100))
        s.tp.inject([m])
        assert s.top.messages == [m]
    finally:
        s.close()


# ---- mixed clusters on compress.xml ----

def _prefix(name: str) -> bytes:
    return name.encode() + b"|" + TEXT


def _send(m, count: int, dest_name: str | None = None) -> None:
    if m.kind == "java":
        m.node.send(payload=_prefix(m.name), dest=dest_name, count=count, numbered=True, timeout=120)
        return
    dest = m.address_of(dest_name) if dest_name else None
    for i in range(count):
        m.channel.send(dest, _prefix(m.name) + f":{i}".encode())


@pytest.mark.interop
@pytest.mark.parametrize("kinds", ["JPP", "PJJ"])
def test_mixed_cluster_on_compress_xml(kinds):
    require_java()
    c = Cluster(kinds, config=stock("compress.xml"))
    try:
        c.start()
        c.assert_agreement()
        n, u = 30, 5
        for i, m in enumerate(c.members):
            _send(m, n)
            _send(m, u, c.members[(i + 1) % len(c.members)].name)
        expected = {_prefix(m.name).decode("latin-1"): n for m in c.members}
        for m in c.members:
            assert m.wait_received(n * len(c.members), timeout=60), f"{m.name}: {m.received.count()}"
            assert m.wait_received(u, unicast=True, timeout=60)
            assert not check_fifo(m.received.by_sender, expected), m.name
        for m in c.members:
            if m.kind == "jgpy":
                st = m.stats()["COMPRESS"]
                assert st["compressed"] >= n + u and st["uncompressed"] >= n * len(c.members) + u, st
                assert st["dropped_size_mismatch"] == st["dropped_corrupt"] == st["dropped_bad_size"] == 0
    finally:
        c.close()


def test_the_decoder_shows_what_a_compressed_payload_inflates_to():
    from jgpy import DIALECT
    from jgpy.headers import TpHeader
    from jgpy.tools.dump import describe_datagram
    good, bomb = _compressed(len(TEXT), len(TEXT)), _compressed(0, 1 << 30, _bomb(2))
    lines = []
    for m in (good, bomb):
        m.put_header(21, TpHeader("c"))
        lines += describe_datagram(DIALECT.encode_message(m))
    text = "\n".join(lines)
    assert f"COMPRESS(19): CompressHeader(original_size={len(TEXT)})" in text
    assert f"inflated: {len(TEXT)} bytes {TEXT[:32].hex()}..." in text
    assert "inflated: NOT INFLATABLE: claims 1073741824 bytes" in text


def test_libz_called_directly_and_pythons_zlib_agree(monkeypatch):
    """Small payloads go to libz holding the GIL (jgpy.protocols.zlib_direct), others through zlib: the same
    decisions either way."""
    from jgpy.protocols import compress, zlib_direct
    if zlib_direct._LIB is None:
        pytest.skip("no loadable libz: only the zlib path exists here")
    stream = zlib.compress(TEXT)
    cases = [(stream, len(TEXT)), (stream, len(TEXT) + 1), (stream, len(TEXT) - 1), (stream, 0), (stream[:30], 1000),
             (stream[:-1], len(TEXT)), (b"\x78\xda" + bytes(range(100)), 1000), (b"junk", 5), (b"", 4),
             (stream + b"trailing", len(TEXT)), (_bomb(1), 60_000)]
    direct = [compress.inflate(p, n, 1 << 20) for p, n in cases]
    out = [zlib_direct.deflate(TEXT[:n], 9) for n in (10, 100, 1000)] + [zlib_direct.deflate(bytes(range(256)), 9)]
    monkeypatch.setattr(zlib_direct, "_LIB", None)
    assert [compress.inflate(p, n, 1 << 20) for p, n in cases] == direct
    assert direct[0] == (TEXT, ("", "")) and direct[-2] == (TEXT, ("", ""))      # trailing bytes ignored (Java too)
    again = [zlib_direct.deflate(TEXT[:n], 9) for n in (10, 100, 1000)] + [zlib_direct.deflate(bytes(range(256)), 9)]
    assert [None if x is None else zlib.decompress(x) for x in out] == \
        [None if x is None else zlib.decompress(x) for x in again] == [None, TEXT[:100], TEXT[:1000], None]


def test_a_live_member_drops_lying_compressed_unicasts_of_strangers():
    """Strangers' unicasts with lying CompressHeaders (deflate bombs among them) against a member on compress.xml:
    every one counted and dropped, memory bounded, the member keeps working."""
    import random
    import resource

    from jgpy.testing.cluster import make_member, wait_all
    from jgpy.testing.hostile import Forger, compress_attacks, send_datagrams
    from jgpy.testing.java import udp_props, unique_group
    props = udp_props(*unique_group())
    a, b = (make_member("P", n, stock("compress.xml"), props) for n in ("P1", "P2"))
    try:
        name = f"compress-hostile-{random.getrandbits(32):x}"
        a.connect(name)
        tp = a.channel.stack.transport
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        sent = send_datagrams(compress_attacks(Forger(name), random.Random(3), a.channel.address, 5),
                              (tp.physical_addr.host, tp.physical_addr.port), pace_every=5, pause=0.01)
        assert sum(sent.values()) == 45

        def dropped():
            st = a.stats()["COMPRESS"]
            return st["dropped_bad_size"] + st["dropped_corrupt"] + st["dropped_size_mismatch"]
        assert wait_all(lambda: dropped() == 45, 30), a.stats()["COMPRESS"]
        st = a.stats()["COMPRESS"]
        assert st["uncompressed"] == 0 and st["failed_msgs"] == 0, st
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
        assert grown_mb < 200, f"peak RSS grew by {grown_mb:.0f} MB"
        b.connect(name)
        assert wait_all(lambda: a.view_names() == ["P1", "P2"] == b.view_names(), 30)
        a.channel.send(None, TEXT + b":0")
        assert b.wait_received(1, timeout=20) and b.received.by_sender == {TEXT.decode(): [0]}
    finally:
        b.close()
        a.close()
