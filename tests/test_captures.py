"""Every datagram and TCP frame in ../shared/docs/jgroups-2.12-captures.md decodes to its annotated fields.

The annotations were made by an independent decoder from real traffic between two Java 2.12.2 nodes.
For each example we (1) check that the annotated byte ranges tile the datagram, (2) rebuild the
annotated (field, value) list from jgpy's decoded objects and compare every semantic field, and
(3) re-encode with jgpy and require the identical bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jgpy import DIALECT, IpAddress, UUID
from jgpy._core import jg212
from jgpy.headers import (FdSockHeader, GmsHeader, NakAckHeader, PingHeader, RequestCorrelatorHeader, StableHeader,
                          TpHeader, UnicastHeader)

from tests.support import shared_file

CAPTURES = shared_file("docs/jgroups-2.12-captures.md")

ROW = re.compile(r"^([0-9a-f]{4})  (\S*)\s{2,}(.+?)\s{2,}(\S.*)$")


def _examples():
    if CAPTURES is None:
        return [pytest.param(0, b"", [], id="captures-missing",
                             marks=pytest.mark.skip(reason="../shared/docs/jgroups-2.12-captures.md not found"))]
    text = CAPTURES.read_text()
    out = []
    for m in re.finditer(r"^## (Example (\d+)[^\n]*)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        title, num, body = m.group(1), int(m.group(2)), m.group(3)
        blocks = re.findall(r"```\n(.*?)```", body, re.S)
        pairs = []
        for i, blk in enumerate(blocks):
            blk = blk.strip()
            if re.fullmatch(r"[0-9a-f]+", blk):
                rows = blocks[i + 1].strip().splitlines() if i + 1 < len(blocks) else []
                pairs.append((bytes.fromhex(blk), [r for r in rows if r.strip()]))
        for k, (data, rows) in enumerate(pairs):
            out.append(pytest.param(num, data, rows, id=f"ex{num}-{k}"))
    return out


EXAMPLES = _examples()


def test_capture_file_found():
    assert len(EXAMPLES) >= 17


def _parse_rows(rows):
    parsed = []
    for r in rows:
        m = ROW.match(r)
        if m:
            off, hexbytes, label, value = int(m.group(1), 16), m.group(2), m.group(3).strip(), m.group(4).strip()
            if not label:  # a long label leaves a single space before the value
                split = re.match(r"^(.*?) ('.*'|\S+)$", value)
                label, value = split.groups() if split else (value, "")
            parsed.append((off, hexbytes, label, value))
    return parsed


# ---- rebuild the annotator's (label, value) list from decoded objects ----

def _u64(v: int) -> str:
    return "0x%016x" % (v & 0xFFFFFFFFFFFFFFFF)


class Trace:
    def __init__(self):
        self.items: list[tuple[str, str]] = []

    def add(self, label, value):
        if isinstance(value, bool) or value is None:
            value = str(value)
        elif isinstance(value, str):
            value = repr(value)
        self.items.append((label, str(value)))

    def address(self, a):
        if a is None:
            self.add("addr type flags (1=null,2=UUID,4=IP)", 1)
        elif type(a) is UUID:
            self.add("addr type flags (1=null,2=UUID,4=IP)", 2)
            self.items.append(("UUID.leastSigBits", _u64(a.lsb)))
            self.items.append(("UUID.mostSigBits", _u64(a.msb)))
            self.add("UUID.has_additional_data", False)
        else:
            self.add("addr type flags (1=null,2=UUID,4=IP)", 4)
            self.ip(a)

    def ip(self, a: IpAddress):
        self.add("IpAddress.addr_len", len(a.ip))
        self.items.append(("IpAddress.addr", a.ip.hex()))
        self.add("IpAddress.port", a.port)
        self.add("IpAddress.has_additional_data", False)

    def digest(self, d):
        for addr, lo, hd, hr in d.entries():
            self.address(addr)
            self.add("Digest.low", lo)
            self.add("Digest.highest_delivered", hd)
            self.add("Digest.highest_received", hr)

    def view_id(self, v):
        self.address(v.coord_addr)
        self.add("ViewId.id", v.id)

    def view(self, v):
        if v.vid is not None:
            self.view_id(v.vid)
        for m in v.members or ():
            self.address(m)

    def message(self, m, in_list: bool, list_src=None):
        leading = (0 if in_list or m.dest is None else 1)
        write_src = (m.src is not None and m.src != list_src) if in_list else m.src is not None
        leading |= (2 if write_src else 0) | (4 if m.has_buffer() else 0)
        self.add("Message.leading (1=dest,2=src,4=buf)", leading)
        self.add("Message.flags", m.flags)
        if leading & 1:
            self.address(m.dest)
        if leading & 2:
            self.address(m.src)
        if m.has_buffer():
            self.add("Message.buf length (int)", m.length)
            self.items.append(("Message.buf", m.buffer.hex()))
        for pid, h in m.headers:
            self.add("header protocol id", pid)
            self.add("header magic number", DIALECT.magic_of(h))
            self.header(h)

    def header(self, h):
        if isinstance(h, TpHeader):
            self.add("TpHeader.channel_name (writeUTF, no presence byte)", h.channel_name)
        elif isinstance(h, PingHeader):
            self.add("PingHeader.type", h.type)
            if h.data is not None:
                d = h.data
                self.address(d.own_addr)
                if d.view_id is not None:
                    self.view_id(d.view_id)
                self.add("PingData.is_server", d.is_server)
                self.add("PingData.logical_name (writeString)", d.logical_name)
                for a in d.physical_addrs or ():
                    self.address(a)
            self.add("PingHeader.cluster_name (writeString)", h.cluster_name)
            if h.view_id is not None:
                self.view_id(h.view_id)
        elif isinstance(h, GmsHeader):
            self.add("GmsHeader.type", h.type)
            self.add("GmsHeader.is_merge_view", False)
            if h.view is not None:
                self.view(h.view)
            self.address(h.mbr)
            if h.join_rsp is not None:
                self.view(h.join_rsp.view)
                self.digest(h.join_rsp.digest)
                self.add("JoinRsp.fail_reason", h.join_rsp.fail_reason)
            if h.my_digest is not None:
                self.digest(h.my_digest)
            self.add("GmsHeader.merge_rejected", h.merge_rejected)
            self.add("GmsHeader.useFlushIfPresent", h.use_flush_if_present)
        elif isinstance(h, UnicastHeader):
            self.add("UnicastHeader.type", h.type)
            if h.type in (0, 1):
                self.add("UnicastHeader.seqno", h.seqno)
            if h.type == 0:
                self.add("UnicastHeader.conn_id", h.conn_id)
                self.add("UnicastHeader.first", h.first)
        elif isinstance(h, NakAckHeader):
            self.add("NakAckHeader.type", h.type)
            self.add("NakAckHeader.seqno", h.seqno)
        elif isinstance(h, StableHeader):
            self.add("StableHeader.type (int!)", h.type)
            self.digest(h.stable_digest)
        elif isinstance(h, FdSockHeader):
            self.add("FD_SOCK.FdHeader.type", h.type)
            self.address(h.mbr)
            if h.sock_addr is not None:
                self.ip(h.sock_addr)
        elif isinstance(h, RequestCorrelatorHeader):
            self.add("ReqCorr.type", h.type)
            self.add("ReqCorr.id", h.id)
            self.add("ReqCorr.rsp_expected", h.rsp_expected)
            self.add("ReqCorr.corrId", h.corr_id)


#: labels whose values the trace above reproduces (presence bytes and counts are covered by re-encoding)
SEMANTIC = {
    "TP version (short)", "TP flags (1=LIST,2=MULTICAST,4=OOB)", "Message.leading (1=dest,2=src,4=buf)",
    "Message.flags", "addr type flags (1=null,2=UUID,4=IP)", "UUID.leastSigBits", "UUID.mostSigBits",
    "UUID.has_additional_data", "IpAddress.addr_len", "IpAddress.addr", "IpAddress.port",
    "IpAddress.has_additional_data", "Message.buf length (int)", "Message.buf", "header protocol id",
    "header magic number", "TpHeader.channel_name (writeUTF, no presence byte)", "PingHeader.type",
    "PingData.is_server", "PingData.logical_name (writeString)", "PingHeader.cluster_name (writeString)",
    "ViewId.id", "GmsHeader.type", "GmsHeader.is_merge_view", "GmsHeader.merge_rejected",
    "GmsHeader.useFlushIfPresent", "JoinRsp.fail_reason", "Digest.low", "Digest.highest_delivered",
    "Digest.highest_received", "UnicastHeader.type", "UnicastHeader.seqno", "UnicastHeader.conn_id",
    "UnicastHeader.first", "NakAckHeader.type", "NakAckHeader.seqno", "StableHeader.type (int!)",
    "FD_SOCK.FdHeader.type", "ReqCorr.type", "ReqCorr.id", "ReqCorr.rsp_expected", "ReqCorr.corrId",
}


def _trace_datagram(data: bytes):
    dg = DIALECT.decode_datagram(data)
    t = Trace()
    t.add("TP version (short)", dg.version)
    t.add("TP flags (1=LIST,2=MULTICAST,4=OOB)", dg.tp_flags)
    if dg.is_list:
        list_src = dg.messages[0].src
        t.address(None)       # list dest (all captured lists are multicast)
        t.address(list_src)
        for m in dg.messages:
            t.add("list: another message follows?", True)
            t.message(m, True, list_src)
        t.add("list: another message follows?", False)
    else:
        t.message(dg.messages[0], False)
    return dg, t.items


@pytest.mark.parametrize("num,data,rows", EXAMPLES)
def test_capture_decodes_to_annotated_fields(num, data, rows):
    parsed = _parse_rows(rows)
    assert parsed, "no annotation rows parsed"
    if data[:4] == b"bela":
        version, addr, used = jg212.decode_tcp_handshake(data)
        assert (version, addr.host, addr.port, used) == (0x1302, "127.0.0.1", 47801, len(data))
        return
    # the annotated ranges tile the datagram exactly
    pos = 0
    for off, hexbytes, label, value in parsed:
        assert off == pos, f"annotation gap at {pos:#x} ({label})"
        assert data[off:off + len(hexbytes) // 2].hex() == hexbytes
        pos += len(hexbytes) // 2
    assert pos == len(data)

    dg, traced = _trace_datagram(data)
    assert dg.trailing == 0
    annotated = [(label, value) for _, _, label, value in parsed]
    for label in SEMANTIC:
        want = [v for lab, v in annotated if lab == label]
        got = [v for lab, v in traced if lab == label]
        assert got == want, f"{label}: jgpy decoded {got}, capture says {want}"
    assert {lab for lab, _ in annotated if lab in SEMANTIC}, "nothing compared"

    # byte-identical re-encoding
    if dg.is_list:
        again = DIALECT.encode_bundle(dg.messages, dest=None, src=dg.messages[0].src, multicast=dg.is_multicast)
    else:
        again = DIALECT.encode_message(dg.messages[0], multicast=dg.is_multicast)
    assert again == data


def test_capture_payload_objects():
    """The application payloads of the capture decode as Java's setObject values."""
    from jgpy import object_from_buffer
    assert object_from_buffer(bytes.fromhex("1268656c6c6f2d737472696e67")) == "hello-string"
    assert object_from_buffer(bytes.fromhex("13090807")) == b"\x09\x08\x07"
    assert object_from_buffer(bytes.fromhex("0f0000002a")) == 42
