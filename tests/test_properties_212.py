"""Every property the 2.12 jar's protocol classes accept is accepted by jgpy's twin of the class.

The names come from the real jar (``org.jgpy.interop.Props`` reads the ``@Property`` and ``@DeprecatedProperty``
annotations the way 2.12's Configurator does), so a property that 2.12 has and jgpy lacks fails here, whether
jgpy acts on it, ignores it with a warning, or ignores it as 2.12 does (deprecated).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess

import pytest

from jgpy.errors import ConfigError
from jgpy.stack.config import parse_xml
from jgpy.stack.protocol import Protocol
from jgpy.stack.properties import aliases_of, deprecated_properties_of, ignored_properties_of, properties_of
from jgpy.stack.stack import PROTOCOLS, STACK_PROPERTIES, ProtocolStack, protocol_class

#: jgpy's own protocols: no class in the 2.12 jar
JGPY_ONLY = {"JOURNAL", "TOTAL", "JMS", "pbcast.PBCAST", "PERF", "PRINTOBJS"}


@pytest.fixture(scope="module")
def java_props(java_codec) -> dict[str, dict]:
    """``{jgpy protocol name: what the jar's class accepts}`` for every protocol jgpy registers."""
    from jgpy.testing.java import BSH_JAR, JGROUPS_JAR, ensure_compiled

    names = sorted(PROTOCOLS)
    cp = os.pathsep.join(map(str, (ensure_compiled(), JGROUPS_JAR, BSH_JAR)))
    out = subprocess.run(["java", "-cp", cp, "org.jgpy.interop.Props", *("org.jgroups.protocols." + n for n in names)],
                         capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    assert len(out) == len(names), out
    return {n: json.loads(line) for n, line in zip(names, out)}


def _accepted(cls) -> tuple[set[str], list[str]]:
    prefixes = list((getattr(cls, "IGNORED_PREFIXES", {}) or {}))
    names = set(properties_of(cls)) | set(aliases_of(cls)) | set(ignored_properties_of(cls)) | \
        deprecated_properties_of(cls) | set(STACK_PROPERTIES)
    return names, prefixes


def test_every_jar_protocol_jgpy_has_is_in_the_jar(java_props):
    missing = sorted(n for n, o in java_props.items() if "error" in o and n not in JGPY_ONLY)
    assert missing == [], f"no such class in the 2.12 jar: {missing}"
    assert all("error" in java_props[n] for n in JGPY_ONLY if n in java_props)


def test_every_property_of_212_is_accepted(java_props):
    gaps = {}
    for name, o in java_props.items():
        if "error" in o:
            continue
        accepted, prefixes = _accepted(protocol_class(name))
        wanted = set(o["properties"]) | set(o["aliases"]) | set(o["deprecated"])
        lacking = sorted(p for p in wanted if p not in accepted and not any(p.startswith(x) for x in prefixes))
        if lacking:
            gaps[name] = lacking
    assert gaps == {}, json.dumps(gaps)


def _stack(xml_attrs: str, protocol: str = "UNICAST") -> ProtocolStack:
    xml = (f'<config xmlns="urn:org:jgroups"><UDP mcast_port="45599"/><PING/><pbcast.NAKACK/>'
           f'<{protocol} {xml_attrs}/><pbcast.STABLE/><pbcast.GMS/></config>')
    return ProtocolStack(parse_xml(xml), Protocol())


def test_level_sets_the_protocol_logger(caplog):
    logger = logging.getLogger("jgpy.protocols.UNICAST")
    before = logger.level
    try:
        stack = _stack('level="debug"')
        assert stack.find("UNICAST").level == logging.DEBUG and logger.level == logging.DEBUG
        _stack('level="WARN"')
        assert logger.level == logging.WARNING
        with pytest.raises(ConfigError, match=r"UNICAST: property level='loud'.*not a log level"):
            _stack('level="loud"')
    finally:
        logger.setLevel(before)


def test_deprecated_and_ignored_properties_are_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="jgpy.config"):
        _stack('down_thread="false" up_thread_prio="3" name="UNICAST" loopback="true"')
    assert "down_thread, up_thread_prio: no effect in jgpy (deprecated in JGroups 2.12" in caplog.text
    assert "loopback: no effect in jgpy" in caplog.text and "name: no effect in jgpy" in caplog.text


def test_an_alias_sets_the_property():
    xml = ('<config xmlns="urn:org:jgroups"><UDP mcast_group_addr="232.9.9.9" mcast_port="45599"/><PING/>'
           '<pbcast.NAKACK retransmit_timeouts="100,200"/><UNICAST/><pbcast.STABLE/><pbcast.GMS/></config>')
    stack = ProtocolStack(parse_xml(xml), Protocol())
    assert stack.find("pbcast.NAKACK").retransmit_timeout == [100, 200]


def test_an_unknown_property_is_an_error_naming_protocol_property_and_line(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text('<config xmlns="urn:org:jgroups">\n<UDP mcast_port="45599"/>\n<PING/>\n'
                 '<pbcast.NAKACK no_such_thing="1"/>\n<UNICAST/><pbcast.STABLE/><pbcast.GMS/>\n</config>\n')
    with pytest.raises(ConfigError) as e:
        ProtocolStack(parse_xml(f.read_text(), str(f)), Protocol())
    text = str(e.value)
    assert "pbcast.NAKACK" in text and "no_such_thing" in text and "bad.xml" in text and ":4" in text, text
