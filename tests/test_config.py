"""Stack configuration: the jar's XML files load unchanged; bad configs fail with errors that say what to do."""

from __future__ import annotations

import logging

import pytest

from jgpy.errors import ConfigError
from jgpy.stack.config import load_config, parse_xml, set_system_property, substitute
from jgpy.stack.properties import to_longs, to_size
from jgpy.stack.stack import ProtocolStack
from jgpy.stack.protocol import Protocol


class Top(Protocol):
    NAME = "top"

    def up(self, evt):
        return None

    def up_batch(self, msgs):
        pass


def test_stock_udp_xml_loads_unchanged(caplog):
    caplog.set_level(logging.WARNING, "jgpy.config")
    cfg = load_config("udp.xml")
    assert cfg.names() == ["UDP", "PING", "MERGE2", "FD_SOCK", "FD_ALL", "VERIFY_SUSPECT", "BARRIER", "pbcast.NAKACK",
                           "UNICAST", "pbcast.STABLE", "pbcast.GMS", "UFC", "MFC", "FRAG2", "pbcast.STATE_TRANSFER"]
    stack = ProtocolStack(cfg, Top(), {"jgroups.udp.mcast_port": "47777"})
    udp = stack.transport
    assert (udp.mcast_port, udp.max_bundle_size, udp.ucast_recv_buf_size, udp.loopback) == (47777, 64000, 20_000_000, True)
    nak = stack.find("pbcast.NAKACK")
    assert nak.retransmit_timeout == [300, 600, 1200] and nak.discard_delivered_msgs and nak.id == 15
    assert stack.find("pbcast.STABLE").max_bytes == 4_000_000
    assert stack.find("FRAG2").frag_size == 60000
    assert stack.find("MERGE2").id == 0 and stack.find("BARRIER").id == 0     # no id: never send headers
    # the Java-only knobs are named once in a warning per protocol, never silently dropped
    assert any("thread_pool.min_threads" in r.message and "no effect" in r.message for r in caplog.records)
    assert any("use_stats_for_retransmission" in r.message for r in caplog.records)


def test_system_properties_and_substitution(monkeypatch):
    assert substitute("${a.b:7}") == "7"
    assert substitute("${a.b:7}", {"a.b": "9"}) == "9"
    assert substitute("${x,y:3}", {"y": "4"}) == "4"
    assert substitute("pre-${nope}-post") == "pre-${nope}-post"        # unresolved stays, as in Java
    monkeypatch.setenv("JGROUPS_UDP_MCAST_PORT", "46666")
    assert substitute("${jgroups.udp.mcast_port:45588}") == "46666"
    set_system_property("jgroups.udp.mcast_port", "46667")
    try:
        assert substitute("${jgroups.udp.mcast_port:45588}") == "46667"
    finally:
        set_system_property("jgroups.udp.mcast_port", None)
    with pytest.raises(ConfigError, match="missing"):
        substitute("${open")


def test_system_property_overrides_xml_value():
    cfg = parse_xml('<config><UDP bind_addr="10.9.9.9" mcast_addr="230.1.1.1" mcast_port="5000"/>'
                    '<PING/><pbcast.GMS/></config>')
    stack = ProtocolStack(cfg, Top(), {"jgroups.bind_addr": "127.0.0.1", "jgroups.udp.mcast_addr": "232.4.4.4"})
    assert stack.transport.bind_addr == "127.0.0.1" and stack.transport.mcast_addr == "232.4.4.4"


def test_unknown_protocol_names_file_and_line(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text('<config>\n  <UDP/>\n  <pbcast.NAKACK2 retransmit_timeout="100"/>\n</config>\n')
    with pytest.raises(ConfigError) as ei:
        ProtocolStack(str(f), Top())
    msg = str(ei.value)
    assert "pbcast.NAKACK2" in msg and "bad.xml:3" in msg and "pbcast.NAKACK" in msg and "2.12" in msg


def test_unknown_property_is_an_error():
    with pytest.raises(ConfigError, match="unknown property not_a_property"):
        ProtocolStack(parse_xml('<config><UDP not_a_property="1"/></config>'), Top())


def test_bad_values_and_structure():
    with pytest.raises(ConfigError, match="mcast_port"):
        ProtocolStack(parse_xml('<config><UDP mcast_port="lots"/></config>'), Top())
    with pytest.raises(ConfigError, match="transport"):
        ProtocolStack(parse_xml('<config><PING/></config>'), Top())
    with pytest.raises(ConfigError, match="well-formed"):
        parse_xml("<config><UDP></config>")
    with pytest.raises(ConfigError, match="root element"):
        parse_xml("<stack><UDP/></stack>")
    with pytest.raises(ConfigError, match="not found"):
        load_config("no-such-stack.xml")
    with pytest.raises(ConfigError, match="bundler_ring_size=10000.*at least 65536"):
        ProtocolStack(parse_xml('<config><UDP bundler_ring_size="10K"/></config>'), Top()).init()
    with pytest.raises(ConfigError, match="bundler_capacity=0"):
        ProtocolStack(parse_xml('<config><UDP bundler_capacity="0"/></config>'), Top()).init()


def test_converters():
    assert to_size("64K") == 64000 and to_size("2M") == 2_000_000 and to_size("100") == 100 and to_size("1.5k") == 1500
    assert to_longs("300,600, 1200") == [300, 600, 1200]
    with pytest.raises(ValueError):
        to_size("big")


def test_edit_and_round_trip():
    cfg = load_config("udp.xml").insert("DISCARD", {"up": 0.1}, after="UDP").with_properties("FD_ALL", timeout=3000)
    again = parse_xml(cfg.to_xml())
    assert again.names()[:3] == ["UDP", "DISCARD", "PING"]
    assert again.get("FD_ALL").properties["timeout"] == "3000"
    assert again.get("UDP").properties["mcast_port"] == "${jgroups.udp.mcast_port:45588}"   # kept as written
    assert "FD" in cfg.replace("FD_ALL", "FD", {"timeout": 3000}).names()
