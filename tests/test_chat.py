"""``python -m jgpy chat``: an interactive jgpy member talks with a real Java 2.12.2 member on the jar's udp.xml.

The Debian jar has no ``org.jgroups.demos.Chat`` (only ProgrammaticChat, with a hard-coded bind address, and
StompChat), so the Java side is the interop harness node, which sends and receives what Java's Chat does:
``setObject(String)`` multicasts."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jgpy import Message, object_from_buffer, object_to_buffer
from jgpy.chat import parse_props, text_of
from tests.chat_driver import LineProcess

ROOT = Path(__file__).resolve().parents[1]


def test_parse_props_like_java_minus_d():
    assert parse_props(["jgroups.bind_addr=127.0.0.1", "a=b=c", "flag"]) == {
        "jgroups.bind_addr": "127.0.0.1", "a": "b=c", "flag": ""}
    with pytest.raises(ValueError):
        parse_props(["=x"])


def test_text_of_shows_java_strings_and_raw_bytes():
    assert text_of(Message(None, object_to_buffer("hi there"))) == "hi there"
    assert text_of(Message(None, "caf\u00e9".encode())) == "caf\u00e9"       # not a tagged object: UTF-8 text
    assert text_of(Message(None, b"")) == ""


def test_chat_talks_with_a_java_member(java_nodes, udp_group):
    props, cluster, _ = udp_group
    j1 = java_nodes("J1")
    j1.connect("udp.xml", cluster, props)                   # the coordinator
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "jgpy", "chat", "--cluster", cluster, "--name", "P1",
           *(f"-D{k}={v}" for k, v in props.items())]
    with LineProcess(cmd, cwd=str(ROOT), env=env) as chat:
        chat.expect(r"^\*\* view: \[J1\|\d+\] .*\[J1, P1\]$", 90)
        j1.wait_event(lambda e: e.get("event") == "view" and e.get("names") == ["J1", "P1"], 30)

        chat.type("hello from python")                      # a line typed: a String multicast, as Java's Chat
        ev = j1.wait_event(lambda e: e.get("event") == "msg" and e.get("src_name") == "P1", 30)
        assert ev["dest"] is None
        assert object_from_buffer(bytes.fromhex(ev["payload"])) == "hello from python"

        j1.send(java_string="hello from java")             # Java's Chat sends setObject(line)
        chat.expect(r"^\[J1\]: hello from java$", 30)

        chat.type("quit")
        assert chat.finish(60) == 0, chat.transcript
        assert chat.lines[-1] == "** left"
    j1.wait_event(lambda e: e.get("event") == "view" and e.get("names") == ["J1"], 30)


def test_chat_with_a_missing_config_says_so(tmp_path, capsys):
    from jgpy.cli import main
    assert main(["chat", "--config", str(tmp_path / "missing.xml")]) == 2
    out = capsys.readouterr().out
    assert out.startswith("error: stack config") and "missing.xml" in out and "not found" in out
