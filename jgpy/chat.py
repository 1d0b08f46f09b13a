"""``python -m jgpy chat``: an interactive member, the twin of JGroups' ``org.jgroups.demos.Chat``.

Every line typed is multicast to the cluster as a Java ``String`` (``setObject``, as the Java Chat sends it);
every message received is printed as ``[sender]: text`` and every view as ``** view: ...``. ``quit``/``exit``
or the end of the input leaves the cluster. A Java member on the same stack config, cluster name and
properties (``-D`` as on the ``java`` command line) chats with it::

    python -m jgpy chat -props udp.xml --cluster ChatCluster -Djgroups.bind_addr=127.0.0.1
"""

from __future__ import annotations

import sys
import threading
from typing import Mapping, TextIO

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.channel import Channel, Receiver
from jgpy.errors import WireFormatError

DEFAULT_CLUSTER = "ChatCluster"        # the Java Chat's cluster name


def text_of(msg: Message) -> str:
    """What a chat shows of a payload: a Java object's value (a Chat line is a ``String``), else the bytes
    as UTF-8 text."""
    if not msg.length:
        return ""
    try:
        obj = msg.get_object()
    except (WireFormatError, ValueError):
        return (msg.buffer or b"").decode("utf-8", "replace")
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return str(obj)


class ChatPrinter(Receiver):
    """Prints messages, views and suspicions, one whole line at a time (callbacks run on channel threads)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._lock = threading.Lock()

    def say(self, line: str, end: str = "\n") -> None:
        with self._lock:
            self.out.write(line + end)
            self.out.flush()

    def receive(self, msg: Message) -> None:
        self.say(f"[{msg.src}]: {text_of(msg)}")

    def view_accepted(self, view: View) -> None:
        self.say(f"** view: {view}")

    def suspect(self, addr: Address) -> None:
        self.say(f"** suspect: {addr}")


def run_chat(config: str, cluster: str = DEFAULT_CLUSTER, name: str | None = None,
             props: Mapping[str, str] | None = None, inp: TextIO | None = None, out: TextIO | None = None) -> int:
    """Chat until ``quit``/``exit`` or the end of ``inp`` (default stdin); 0 when the member left cleanly."""
    inp = inp if inp is not None else sys.stdin
    printer = ChatPrinter(out if out is not None else sys.stdout)
    prompt = inp.isatty()
    with Channel(config, name=name, props=props, receiver=printer) as ch:
        ch.connect(cluster)
        printer.say(f"** joined {cluster} as {ch.address}; type lines to send them, 'quit' to leave")
        while True:
            if prompt:
                printer.say("> ", end="")
            try:
                line = inp.readline()
            except KeyboardInterrupt:
                break
            if not line or line.strip().lower() in ("quit", "exit"):
                break
            line = line.rstrip("\r\n")
            if line:
                ch.send(None, line)
    printer.say("** left")
    return 0


def parse_props(items: list[str] | None) -> dict[str, str]:
    """``-Dkey=value`` options (``-D key=value`` too) as properties; a bare ``-Dkey`` is ``""``, as in Java."""
    props = {}
    for item in items or []:
        key, _, value = item.partition("=")
        if not key:
            raise ValueError(f"-D{item}: expected -Dname=value")
        props[key] = value
    return props
