"""A small in-process stack for unit tests of one protocol: ``[FakeTransport, <protocol>, Collector]``.

* :class:`FakeTransport` records every message sent down together with the datagram bytes the 2.12
  dialect makes of it (after adding the transport header, as UDP does), loops multicasts back to its
  own stack right away (TP's ``loopback``), optionally forwards datagrams to the other stacks of a
  :class:`FakeNetwork` (delivered on a per-stack receive thread, decoded from the bytes), and lets a
  test inject received batches (objects or datagram bytes).
* :class:`Collector` sits on top and records every event and message batch coming up.
* :class:`FakeStack` provides what protocols reach through ``self.stack``: a real ``TimeScheduler``,
  the delivery executors, ``local_addr``, ``cluster_name``, ``dialect``, ``transport``.

Every wait here is bounded; :meth:`FakeStack.close` stops protocols, executors and the timer.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable

from jgpy import DIALECT, UUID, Message, View, ViewId
from jgpy._core import jg212
from jgpy.headers import TpHeader
from jgpy.stack.events import Event, EventType
from jgpy.stack.executor import SerialExecutor
from jgpy.stack.protocol import Protocol
from jgpy.stack.timer import TimeScheduler

TP_ID = 21          # the transport's protocol id (UDP)


def wait_until(pred: Callable[[], Any], timeout: float = 5.0, interval: float = 0.01, msg: str = "") -> Any:
    """Poll ``pred`` until it returns something truthy (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {msg or pred}")
        time.sleep(interval)


def closing_factory(factory: Callable[..., Any]):
    """The body of a fixture (``yield from closing_factory(Cls)``): the test gets ``factory``; whatever it made is
    closed (``close()``) after the test."""
    made: list = []

    def make(*args, **kw):
        obj = factory(*args, **kw)
        made.append(obj)
        return obj
    yield make
    for obj in made:
        obj.close()


class Sent:
    """One message the transport was asked to send: the message, its datagram bytes, multicast or not."""

    __slots__ = ("msg", "data", "multicast", "time")

    def __init__(self, msg: Message, data: bytes, multicast: bool) -> None:
        self.msg = msg
        self.data = data
        self.multicast = multicast
        self.time = time.monotonic()

    def decoded(self):
        """The datagram decoded again (a :class:`jgpy.Datagram`)."""
        return DIALECT.decode_datagram(self.data)

    def header(self, pid: int):
        return self.decoded().messages[0].get_header(pid)

    def __repr__(self) -> str:
        return f"Sent({self.msg!r}, {len(self.data)} bytes)"


class FakeNetwork:
    """Connects fake transports: unicasts go to the destination's stack, multicasts to all the others."""

    def __init__(self) -> None:
        self.transports: dict[Any, "FakeTransport"] = {}
        self.blocked: set = set()         # members whose traffic is dropped (both directions)
        self.cut: set = set()             # (src, dest) pairs whose multicasts and unicasts are dropped
        self._lock = threading.Lock()

    def attach(self, tp: "FakeTransport") -> None:
        with self._lock:
            self.transports[tp.stack.local_addr] = tp

    def detach(self, tp: "FakeTransport") -> None:
        with self._lock:
            if self.transports.get(tp.stack.local_addr) is tp:
                del self.transports[tp.stack.local_addr]

    def send(self, src, dest, data: bytes) -> None:
        with self._lock:
            if src in self.blocked:
                return
            if dest is None:
                targets = [tp for a, tp in self.transports.items()
                           if a != src and a not in self.blocked and (src, a) not in self.cut]
            else:
                tp = self.transports.get(dest)
                targets = [tp] if tp is not None and dest not in self.blocked and (src, dest) not in self.cut else []
        for tp in targets:
            tp.receive_datagram(data)


class LossyNetwork(FakeNetwork):
    """Also drops each datagram with probability ``loss`` (seeded), or those ``drop(data)`` picks."""

    def __init__(self, loss: float = 0.0, seed: int = 1) -> None:
        super().__init__()
        self.loss = loss
        self.drop: Callable[[bytes], bool] = lambda data: False
        self.dropped = 0
        self._rnd = random.Random(seed)

    def send(self, src, dest, data: bytes) -> None:
        if self.drop(data) or (self.loss and self._rnd.random() < self.loss):
            self.dropped += 1
            return
        super().send(src, dest, data)


class FakeTransport(Protocol):
    NAME = "FAKE_TP"
    IS_TRANSPORT = True

    def __init__(self, network: FakeNetwork | None = None, loopback: bool = True) -> None:
        super().__init__()
        self.id = TP_ID
        self.network = network
        self.loopback = loopback
        self.sent: list[Sent] = []
        self.down_events: list[Event] = []
        self.received: list[bytes] = []
        self.enable_bundling = False
        self.max_bundle_size = 64000
        self._cond = threading.Condition()
        self._rx: SerialExecutor | None = None

    def start(self) -> None:
        if self.network is not None:
            self._rx = SerialExecutor(f"fake-rx-{self.stack.local_addr}")
            self.network.attach(self)

    def stop(self) -> None:
        if self.network is not None:
            self.network.detach(self)
        if self._rx is not None:
            self._rx.stop()
            self._rx = None

    # ---- down ----

    def down(self, evt: Event) -> Any:
        with self._cond:
            self.down_events.append(evt)
            self._cond.notify_all()
        if evt.type == EventType.CONNECT:
            self.stack.cluster_name = evt.arg
        return None

    def down_msg(self, msg: Message) -> Any:
        if msg.piggyback is not None:               # the real transport sends it in the same datagram, first
            self.down_msg(msg.piggyback)
        if not msg.has_header(self.id):
            msg.put_header(self.id, TpHeader(self.stack.cluster_name or ""))
        if msg.src is None:
            msg.src = self.stack.local_addr
        multicast = msg.dest is None
        data = DIALECT.encode_message(msg, multicast)
        with self._cond:
            self.sent.append(Sent(msg, data, multicast))
            self._cond.notify_all()
        if self.loopback and (multicast or msg.dest == self.stack.local_addr):
            self.up_prot.up_batch([msg.copy()])
            if not multicast:
                return None
        if self.network is not None:
            self.network.send(self.stack.local_addr, msg.dest, data)
        return None

    # ---- up ----

    def receive_datagram(self, data: bytes) -> None:
        """From the network: decoded and passed up on this stack's receive thread."""
        rx = self._rx
        if rx is not None:
            rx.submit(self.inject_datagrams, [data])

    def inject(self, msgs: list) -> None:
        """Pass a batch of received messages up (in the caller's thread)."""
        self.up_prot.up_batch(list(msgs))

    def inject_datagrams(self, datagrams: list) -> None:
        """Decode datagram bytes (as a transport would) and pass all their messages up as one batch."""
        msgs: list = []
        for data in datagrams:
            self.received.append(data)
            DIALECT.decode_messages(bytes(data), msgs, True)
        if msgs:
            self.up_prot.up_batch(msgs)

    # ---- inspection ----

    def sent_where(self, pred: Callable[[Sent], bool] = lambda s: True) -> list[Sent]:
        with self._cond:
            return [s for s in self.sent if pred(s)]

    def wait_sent(self, pred: Callable[[Sent], bool], count: int = 1, timeout: float = 5.0) -> list[Sent]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [s for s in self.sent if pred(s)]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s: {len(got)} of {count} matching messages sent "
                                         f"(sent: {self.sent[-10:]})")
                self._cond.wait(min(left, 0.05))

    def events_of(self, etype: str) -> list[Event]:
        with self._cond:
            return [e for e in self.down_events if e.type == etype]

    def clear(self) -> None:
        with self._cond:
            self.sent.clear()
            self.down_events.clear()


class Collector(Protocol):
    """Top of a fake stack: records what comes up."""

    NAME = "COLLECTOR"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Event] = []
        self.batches: list[list] = []
        self._cond = threading.Condition()

    def up(self, evt: Event) -> Any:
        with self._cond:
            self.events.append(evt)
            self._cond.notify_all()
        return None

    def up_batch(self, msgs: list) -> None:
        with self._cond:
            self.batches.append(list(msgs))
            self._cond.notify_all()

    @property
    def messages(self) -> list:
        with self._cond:
            return [m for b in self.batches for m in b]

    def events_of(self, etype: str) -> list[Event]:
        with self._cond:
            return [e for e in self.events if e.type == etype]

    def wait_event(self, etype: str, pred: Callable[[Event], bool] = lambda e: True, timeout: float = 5.0) -> Event:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events:
                    if e.type == etype and pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s waiting for a {etype} event "
                                         f"(got {self.events[-10:]})")
                self._cond.wait(min(left, 0.05))

    def wait_messages(self, count: int, timeout: float = 5.0) -> list:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                msgs = [m for b in self.batches for m in b]
                if len(msgs) >= count:
                    return msgs
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s: {len(msgs)} of {count} messages came up")
                self._cond.wait(min(left, 0.05))

    def clear(self) -> None:
        with self._cond:
            self.events.clear()
            self.batches.clear()


class FakeStack:
    """``[FakeTransport, protocol, Collector]`` with the services a protocol expects from ``self.stack``."""

    def __init__(self, prot: Protocol, local_addr=None, network: FakeNetwork | None = None,
                 cluster_name: str = "fakecluster", loopback: bool = True, start: bool = True,
                 connect: bool = False) -> None:
        self.local_addr = local_addr if local_addr is not None else UUID.random()
        self.cluster_name = cluster_name
        self.dialect = DIALECT
        self.timer: TimeScheduler | None = None
        self.delivery: SerialExecutor | None = None
        self.oob_delivery: SerialExecutor | None = None
        self.tp = FakeTransport(network, loopback)
        self.prot = prot
        self.top = Collector()
        self.protocols = [self.tp, prot, self.top]
        if not prot.id:
            try:
                prot.id = jg212.protocol_id(prot.NAME)
            except KeyError:
                prot.id = 0
        self.tp.up_prot, prot.down_prot = prot, self.tp
        prot.up_prot, self.top.down_prot = self.top, prot
        for p in self.protocols:
            p.stack = self
        self._started = False
        self.init()
        if start:
            self.start()
        if connect:
            self.connect()

    @property
    def transport(self) -> FakeTransport:
        return self.tp

    def find(self, name: str):
        return next((p for p in self.protocols if p.NAME == name), None)

    def init(self) -> None:
        for p in self.protocols:
            p.init()

    def start(self) -> None:
        if self._started:
            return
        self.timer = TimeScheduler(f"fake-timer-{self.local_addr}")
        self.delivery = SerialExecutor(f"fake-deliver-{self.local_addr}")
        self.oob_delivery = SerialExecutor(f"fake-oob-{self.local_addr}")
        for p in reversed(self.protocols):
            p.start()
        self._started = True

    def connect(self) -> None:
        """SET_LOCAL_ADDRESS and CONNECT down, as the channel does."""
        self.prot.down(Event(EventType.SET_LOCAL_ADDRESS, self.local_addr))
        self.prot.down(Event(EventType.CONNECT, self.cluster_name))

    def install_view(self, members: list, view_id: int = 1, up: bool = False) -> View:
        """VIEW_CHANGE down through the protocol (as GMS sends it), and up too when ``up``."""
        view = View(ViewId(members[0], view_id), members)
        self.prot.down(Event(EventType.VIEW_CHANGE, view))
        if up:
            self.prot.up(Event(EventType.VIEW_CHANGE, view))
        return view

    def send(self, msg: Message) -> Any:
        """Send ``msg`` down from the top (as the layer above the protocol does)."""
        return self.prot.down_msg(msg)

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        for p in reversed(self.protocols):
            try:
                p.stop()
            except Exception:  # noqa: BLE001
                pass
        for svc in (self.timer, self.delivery, self.oob_delivery):
            if svc is not None:
                svc.stop()

    close = stop


def view_of(members: list, view_id: int = 1) -> View:
    return View(ViewId(members[0], view_id), members)


# ------------------------------------------------------------------------------------------------
# Java's own protocol code in a probe (tests/test_fd.py, test_fc.py, test_frag.py)
# ------------------------------------------------------------------------------------------------

JAVA_PROTOCOL_PROBE = r"""
import org.jgroups.*;
import org.jgroups.stack.Protocol;
import org.jgroups.util.*;
import java.io.*;
import java.lang.reflect.*;
import java.util.*;

/** Runs one 2.12 protocol between two sinks, driven by a script on stdin (one command a line):
 *    set FIELD VALUE | call METHOD STRING | timer | init | start | stop | sleep MS
 *    local ADDR | view VIEW | viewup VIEW | unsuspect ADDR | down MSG | downasync TAG MSG | up MSG
 *  (ADDR: hex of Util.writeAddress, VIEW: hex of View.writeTo, MSG: hex of Message.writeTo). stdout: one line per
 *  message or event the protocol passed on: "down|up MS HEX" (message), "evdown|evup MS TYPE HEX-ADDR" (SUSPECT,
 *  UNSUSPECT), "returned MS TAG" when a downasync call returned; MS = ms since the start of the script. */
public class ProtoProbe {
    static final long T0 = System.nanoTime();
    static long ms() { return (System.nanoTime() - T0) / 1000000L; }
    static synchronized void emit(String s) { System.out.println(s); System.out.flush(); }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for(byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }
    static byte[] unhex(String s) {
        byte[] d = new byte[s.length() / 2];
        for(int i = 0; i < d.length; i++) d[i] = (byte)Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return d;
    }
    static DataInputStream in(String h) { return new DataInputStream(new ByteArrayInputStream(unhex(h))); }
    static String msgHex(Message m) throws IOException {
        ByteArrayOutputStream bo = new ByteArrayOutputStream();
        m.writeTo(new DataOutputStream(bo));
        return hex(bo.toByteArray());
    }
    static String addrHex(Address a) throws IOException {
        ByteArrayOutputStream bo = new ByteArrayOutputStream();
        Util.writeAddress(a, new DataOutputStream(bo));
        return hex(bo.toByteArray());
    }

    static class Sink extends Protocol {
        final String dir;
        Sink(String dir) { this.dir = dir; }
        Object handle(Event e) {
            try {
                switch(e.getType()) {
                    case Event.MSG: emit(dir + " " + ms() + " " + msgHex((Message)e.getArg())); break;
                    case Event.SUSPECT: emit("ev" + dir + " " + ms() + " SUSPECT " + addrHex((Address)e.getArg())); break;
                    case Event.UNSUSPECT: emit("ev" + dir + " " + ms() + " UNSUSPECT " + addrHex((Address)e.getArg())); break;
                }
            }
            catch(IOException ex) { throw new RuntimeException(ex); }
            return null;
        }
        public Object down(Event e) { return handle(e); }
        public Object up(Event e) { return handle(e); }
    }

    static Field field(Class<?> c, String name) throws Exception {
        for(; c != null; c = c.getSuperclass()) {
            try { Field f = c.getDeclaredField(name); f.setAccessible(true); return f; }
            catch(NoSuchFieldException ignored) {}
        }
        throw new NoSuchFieldException(name);
    }

    static void set(Object o, String name, String v) throws Exception {
        Field f = field(o.getClass(), name);
        Class<?> t = f.getType();
        if(t == long.class) f.setLong(o, Long.parseLong(v));
        else if(t == int.class) f.setInt(o, Integer.parseInt(v));
        else if(t == double.class) f.setDouble(o, Double.parseDouble(v));
        else if(t == boolean.class) f.setBoolean(o, Boolean.parseBoolean(v));
        else f.set(o, v);
    }

    public static void main(String[] args) throws Exception {
        final Protocol prot = (Protocol)Class.forName(args[0]).newInstance();
        prot.setId(Short.parseShort(args[1]));
        Sink below = new Sink("down"), above = new Sink("up");
        prot.setDownProtocol(below);
        prot.setUpProtocol(above);
        BufferedReader rd = new BufferedReader(new InputStreamReader(System.in));
        List<Thread> threads = new ArrayList<Thread>();
        String line;
        while((line = rd.readLine()) != null) {
            line = line.trim();
            if(line.length() == 0) continue;
            String[] p = line.split(" ", 3);
            String c = p[0];
            if(c.equals("set")) set(prot, p[1], p[2]);
            else if(c.equals("call")) prot.getClass().getMethod(p[1], String.class).invoke(prot, p[2]);
            else if(c.equals("timer")) field(prot.getClass(), "timer").set(prot, new DefaultTimeScheduler(4));
            else if(c.equals("init")) prot.init();
            else if(c.equals("start")) prot.start();
            else if(c.equals("stop")) prot.stop();
            else if(c.equals("sleep")) Thread.sleep(Long.parseLong(p[1]));
            else if(c.equals("local")) prot.down(new Event(Event.SET_LOCAL_ADDRESS, Util.readAddress(in(p[1]))));
            else if(c.equals("unsuspect")) prot.down(new Event(Event.UNSUSPECT, Util.readAddress(in(p[1]))));
            else if(c.equals("view") || c.equals("viewup")) {
                View v = new View();
                v.readFrom(in(p[1]));
                if(c.equals("view")) prot.down(new Event(Event.VIEW_CHANGE, v));
                else prot.up(new Event(Event.VIEW_CHANGE, v));
            }
            else if(c.equals("down") || c.equals("up") || c.equals("downasync")) {
                final Message m = new Message(false);
                m.readFrom(in(c.equals("downasync") ? p[2] : p[1]));
                if(c.equals("down")) prot.down(new Event(Event.MSG, m));
                else if(c.equals("up")) prot.up(new Event(Event.MSG, m));
                else {
                    final String tag = p[1];
                    Thread t = new Thread() {
                        public void run() { prot.down(new Event(Event.MSG, m)); emit("returned " + ms() + " " + tag); }
                    };
                    t.setDaemon(true);
                    t.start();
                    threads.add(t);
                }
            }
            else throw new IllegalArgumentException("unknown command " + line);
        }
        for(Thread t : threads) t.join(10000);
        System.out.flush();
        System.exit(0);
    }
}
"""


class ProbeLine:
    """One line of the probe's output: a message (``kind`` "down"/"up"), an event ("evdown"/"evup", with
    ``event`` and ``addr``) or a returned ``downasync`` ("returned", ``tag``); ``ms`` since the start."""

    __slots__ = ("kind", "ms", "msg", "data", "event", "addr", "tag")

    def __init__(self, line: str) -> None:
        parts = line.split()
        self.kind, self.ms = parts[0], int(parts[1])
        self.msg = self.data = self.event = self.addr = self.tag = None
        if self.kind in ("down", "up"):
            self.data = bytes.fromhex(parts[2])
            self.msg = DIALECT.decode(Message, self.data)
        elif self.kind in ("evdown", "evup"):
            self.event, self.addr = parts[2], DIALECT.decode_address(bytes.fromhex(parts[3]))
        elif self.kind == "returned":
            self.tag = parts[2]

    def __repr__(self) -> str:
        return f"ProbeLine({self.kind} @{self.ms} {self.msg or self.event or self.tag} {self.addr or ''})"


class JavaProtocolProbe:
    """Java's own protocol class (from the 2.12.2 jar) between two sinks, driven by a script.

    >>> probe = JavaProtocolProbe(tmp_dir)                       # compiles the probe once
    >>> out = probe.run("org.jgroups.protocols.FRAG", 4, ["set frag_size 1000", probe_down(msg)])
    """

    def __init__(self, workdir) -> None:
        import pathlib
        import subprocess

        from jgpy.testing.java import JGROUPS_JAR
        self.jar = str(JGROUPS_JAR)
        self.dir = pathlib.Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "ProtoProbe.java").write_text(JAVA_PROTOCOL_PROBE)
        res = subprocess.run(["javac", "-nowarn", "-cp", self.jar, "-d", str(self.dir),
                              str(self.dir / "ProtoProbe.java")], capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"javac failed: {res.stderr[-3000:]}")

    def run(self, protocol_class: str, pid: int, script: list[str], timeout: float = 60.0) -> list[ProbeLine]:
        import subprocess
        r = subprocess.run(["java", "-Djava.net.preferIPv4Stack=true", "-cp", f"{self.dir}:{self.jar}", "ProtoProbe",
                            protocol_class, str(pid)], input="\n".join(script) + "\n", capture_output=True,
                           text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"probe failed ({r.returncode}): {r.stderr[-3000:]}")
        return [ProbeLine(line) for line in r.stdout.splitlines() if line.strip()]


def probe_addr(addr) -> str:
    return DIALECT.encode_address(addr).hex()


def probe_view(members: list, view_id: int = 1) -> str:
    return DIALECT.encode(view_of(members, view_id)).hex()


def probe_msg(msg: Message) -> str:
    return DIALECT.encode(msg).hex()


def as_java_sent(sent: Sent) -> Message:
    """A message our fake transport sent, as it left the protocol in Java: without the transport header and
    the src the transport filled in (Java's protocols leave src null)."""
    m = sent.msg.copy()
    m.remove_header(TP_ID)
    m.src = None
    return m
