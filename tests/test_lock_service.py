"""CENTRAL_LOCK, PEER_LOCK and jgpy.blocks.LockService among jgpy members (real channels on loopback, the jar's
udp.xml with the locking protocol on top): mutual exclusion, try-locks, a holder that leaves, the coordinator's
takeover with its backup copy, conditions, listeners; the Request's wire layout; hostile input on a fake stack
(malformed requests, absurd names, strangers, a flood of lock names): counted, dropped, bounded."""

from __future__ import annotations

import threading
import time

import pytest

from jgpy import DIALECT, UUID, Channel, Message
from jgpy.blocks import LockingError, LockNotification, LockService
from jgpy.headers import LockingHeader
from jgpy.protocols.central_lock import CENTRAL_LOCK
from jgpy.protocols.locking import REQUEST_CLASS, LockRequest, Owner, RequestType
from jgpy.protocols.peer_lock import PEER_LOCK
from jgpy.stack.config import load_config
from jgpy.tools.dump import describe_datagram
from jgpy.testing.cluster import IN_PROCESS
from tests.fakestack import FakeStack, wait_until

T = RequestType
CENTRAL_ID, PEER_ID = 50, 51


# ---- the wire -------------------------------------------------------------------------------------------------

def test_a_request_is_a_streamable_written_by_class_name():
    owner = Owner(UUID(5, 6), 42)
    req = LockRequest(T.GRANT_LOCK, "orders", owner, 1500, True)
    data = req.to_payload(DIALECT)
    cls = REQUEST_CLASS.encode()
    # TYPE_STREAMABLE, present, no magic number, writeUTF(class name)
    prefix = bytes([1, 1, 0]) + len(cls).to_bytes(2, "big") + cls
    assert data.startswith(prefix)
    body = data[len(prefix):]
    addr = DIALECT.encode_address(owner.address)
    assert body == (bytes([0]) + b"\x01\x00\x06orders" + b"\x01" + addr + (42).to_bytes(8, "big")
                    + (1500).to_bytes(8, "big") + b"\x01")
    assert LockRequest.from_payload(DIALECT, data) == req
    null_owner = LockRequest(T.COND_SIG_ALL, "x", None)
    assert LockRequest.from_payload(DIALECT, null_owner.to_payload(DIALECT)) == null_owner


@pytest.mark.parametrize("mutate", ["type", "truncated", "class", "not-streamable"])
def test_a_request_2_12_could_not_read_is_an_error(mutate):
    data = bytearray(LockRequest(T.RELEASE_LOCK, "x", Owner(UUID(1, 2), 1)).to_payload(DIALECT))
    at = 5 + len(REQUEST_CLASS)
    if mutate == "type":
        data[at] = 13                                   # one past DELETE_AWAITER
    elif mutate == "truncated":
        del data[-5:]
    elif mutate == "class":
        data[8] ^= 0x20
    else:
        data[0] = 18                                    # a String payload
    with pytest.raises(Exception):
        LockRequest.from_payload(DIALECT, bytes(data))


def test_the_decoder_shows_the_request():
    msg = Message(UUID(1, 1), LockRequest(T.LOCK_GRANTED, "db", Owner(UUID(1, 1), 3)).to_payload(DIALECT),
                  UUID(2, 2))
    msg.put_header(CENTRAL_ID, LockingHeader())
    text = "\n".join(describe_datagram(DIALECT.encode_message(msg)))
    assert "LockingHeader" in text and "request: LOCK_GRANTED [db, owner=" in text


# ---- jgpy clusters --------------------------------------------------------------------------------------------

@pytest.fixture
def lock_cluster(udp_group):
    """jgpy members in one process (shared-loopback.xml: the jar's udp.xml above an in-process transport; udp.xml
    where a test sends datagrams)."""
    props, cluster, _ = udp_group
    made: list[Channel] = []

    def build(n: int, protocol: str = "CENTRAL_LOCK", base: str = IN_PROCESS,
              **prot_props: str) -> list[Channel]:
        cfg = load_config(base).insert(protocol, prot_props)
        for i in range(n):
            ch = Channel(cfg, name=f"L{len(made)}", props=props)
            made.append(ch)
            ch.connect(cluster)
        chs = made[-n:]
        wait_until(lambda: all(c.view is not None and len(c.view.members) == len(made) for c in chs), 20,
                   msg="everybody in one view")
        return chs

    yield build
    for ch in reversed(made):
        ch.close()


def overlaps(intervals: list[tuple[int, int]]) -> int:
    """Held intervals that begin before the previous one (in start order) ended."""
    s = sorted(intervals)
    return sum(1 for a, b in zip(s, s[1:]) if b[0] < a[1])


def start_holders(services: list[LockService], name: str, rounds: int, threads_each: int = 1,
                  try_timeout: float | None = None) -> tuple[list[tuple[int, int]], list[BaseException], list]:
    """Threads (``threads_each`` per service) that take ``name`` ``rounds`` times (lock(), or try-locks of
    ``try_timeout`` s until one succeeds), each time for 2 ms: (their held intervals, errors, the threads)."""
    held: list[tuple[int, int]] = []
    guard = threading.Lock()
    errors: list[BaseException] = []

    def worker(svc: LockService) -> None:
        lock = svc.get_lock(name)
        try:
            for _ in range(rounds):
                if try_timeout is None:
                    lock.lock()
                else:
                    for _attempt in range(400):
                        if lock.try_lock(try_timeout):
                            break
                    else:
                        raise AssertionError("no lock after 400 try-locks")
                t0 = time.monotonic_ns()
                time.sleep(0.002)
                t1 = time.monotonic_ns()
                lock.unlock()
                with guard:
                    held.append((t0, t1))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(s,)) for s in services for _ in range(threads_each)]
    for t in ts:
        t.start()
    return held, errors, ts


def join_holders(errors: list[BaseException], threads: list) -> None:
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a holder hangs"
    assert not errors, errors


def contend(services: list[LockService], name: str, rounds: int, threads_each: int = 2,
            try_timeout: float | None = None) -> list[tuple[int, int]]:
    held, errors, threads = start_holders(services, name, rounds, threads_each, try_timeout)
    join_holders(errors, threads)
    return held


@pytest.mark.processes
@pytest.mark.parametrize("protocol", ["CENTRAL_LOCK", "PEER_LOCK"])
def test_one_holder_at_a_time(lock_cluster, protocol):
    chs = lock_cluster(3, protocol)
    services = [LockService(c) for c in chs]
    held = contend(services, "counter", 15, try_timeout=0.2 if protocol == "PEER_LOCK" else None)
    assert len(held) == 3 * 2 * 15
    assert overlaps(held) == 0
    prot = chs[0].stack.find(protocol)
    wait_until(lambda: all(c.stack.find(protocol).dump_stats()["server_locks"] == 0 for c in chs), 5,
               msg="every server lock released and forgotten")
    assert prot.dump_stats()["queued"] == 0


@pytest.mark.processes
def test_try_lock_waits_at_most_its_timeout_and_gets_a_released_lock(lock_cluster):
    a, b, c = lock_cluster(3)
    la, lc = LockService(a).get_lock("L"), LockService(c).get_lock("L")
    la.lock()
    assert lc.try_lock() is False
    t0 = time.monotonic()
    assert lc.try_lock(0.3) is False
    assert 0.25 < time.monotonic() - t0 < 5
    la.unlock()                                          # the owner is the thread: a's holder is the releaser
    release_held = threading.Event()
    release = threading.Thread(target=lambda: (la.lock(), release_held.set(), time.sleep(0.2), la.unlock()))
    release.start()
    assert release_held.wait(5)
    assert lc.try_lock(5.0) is True
    release.join(5)
    lc.unlock()
    lc.unlock()                                          # a second unlock does nothing, as 2.12's
    with LockService(b).get_lock("L"):
        assert la.try_lock() is False
    assert la.try_lock(5.0) is True                     # b's release and our request race to the coordinator
    la.unlock()
    coord = a.stack.find("CENTRAL_LOCK")
    wait_until(lambda: coord.dump_stats()["queued"] == 0 and coord.dump_stats()["server_locks"] == 0, 5,
               msg="the timed-out requests left the queue")


@pytest.mark.processes
def test_a_lock_held_by_a_member_that_leaves_is_released(lock_cluster):
    a, b, c = lock_cluster(3)
    LockService(b).get_lock("L").lock()
    lc = LockService(c).get_lock("L")
    assert lc.try_lock() is False
    got = threading.Event()
    t = threading.Thread(target=lambda: (lc.lock(), got.set()))
    t.start()
    b.close()
    assert got.wait(20), "the waiter never got the lock of the member that left"
    t.join(5)
    lc.unlock()


@pytest.mark.processes
def test_the_backup_takes_over_when_the_coordinator_leaves(lock_cluster):
    a, b, c = lock_cluster(3)                  # a: coordinator, b: its backup
    assert a.stack.find("CENTRAL_LOCK").backups == [b.address]
    lc = LockService(c).get_lock("L")
    lc.lock()                                  # held through the takeover
    lb = LockService(b).get_lock("L")
    wait_until(lambda: b.stack.find("CENTRAL_LOCK").dump_stats()["server_locks"] == 1, 5, msg="the backup copy")
    a.close()
    wait_until(lambda: b.stack.find("CENTRAL_LOCK").is_coord, 20, msg="b coordinates")
    assert lb.try_lock(0.2) is False           # the new coordinator knows c holds it
    waiter = threading.Thread(target=lb.lock)
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()
    lc.unlock()
    waiter.join(10)
    assert not waiter.is_alive()
    assert c.stack.find("CENTRAL_LOCK").backups == []          # c is not the coordinator
    assert b.stack.find("CENTRAL_LOCK").backups == [c.address]
    lb.unlock()


@pytest.mark.processes
def test_a_waiting_lock_request_moves_to_the_new_coordinator(lock_cluster):
    a, b, c = lock_cluster(3, num_backups="0")
    la = LockService(a).get_lock("L")
    la.lock()                                  # the coordinator holds it: no copy anywhere
    lc = LockService(c).get_lock("L")
    got = threading.Event()
    t = threading.Thread(target=lambda: (lc.lock(), got.set()))
    t.start()
    time.sleep(0.2)
    a.close()                                  # its lock goes with it; c asks b again
    assert got.wait(20)
    t.join(5)
    assert LockService(b).get_lock("L").try_lock() is False
    lc.unlock()


@pytest.mark.processes
def test_listeners_see_the_coordinators_lock_events(lock_cluster):
    a, b = lock_cluster(2)

    class Recorder(LockNotification):
        def __init__(self) -> None:
            self.events: list[tuple] = []

        def lock_created(self, name):
            self.events.append(("created", name))

        def locked(self, lock_name, owner):
            self.events.append(("locked", lock_name, owner.address))

        def unlocked(self, lock_name, owner):
            self.events.append(("unlocked", lock_name, owner.address))

    rec = Recorder()
    svc = LockService(a)
    svc.add_lock_listener(rec)
    with LockService(b).get_lock("X"):
        pass
    wait_until(lambda: len(rec.events) == 3, 5)
    assert rec.events == [("created", "X"), ("locked", "X", b.address), ("unlocked", "X", b.address)]
    svc.remove_lock_listener(rec)
    assert "server locks" in svc.print_locks()


@pytest.mark.processes
def test_a_condition_releases_the_lock_while_waiting_for_a_signal(lock_cluster):
    a, b = lock_cluster(2)
    la, lb = LockService(a).get_lock("C"), LockService(b).get_lock("C")
    result: list = []
    locked = threading.Event()

    def waiter() -> None:
        la.lock()
        locked.set()
        result.append(la.new_condition().await_(10))        # releases C while waiting
        result.append(la.try_lock())                         # held again (re-entrant)
        la.unlock()

    t = threading.Thread(target=waiter)
    t.start()
    assert locked.wait(10)                                   # else b could take C first and signal nobody
    assert wait_until(lambda: lb.try_lock(0.1), 10, msg="the waiter released the lock")
    lb.new_condition().signal()
    lb.unlock()
    t.join(15)
    assert result == [True, True]
    lb.lock()
    assert lb.new_condition().await_(0.3) is False           # nobody signals
    lb.unlock()


@pytest.mark.processes
def test_unlock_all_and_a_disconnect_while_waiting(lock_cluster):
    a, b = lock_cluster(2)
    svc_b = LockService(b)
    svc_b.get_lock("A").lock()
    svc_b.get_lock("B").lock()
    svc_b.unlock_all()
    la = LockService(a).get_lock("A")
    assert la.try_lock(2.0) and LockService(a).get_lock("B").try_lock(2.0)
    errors: list[BaseException] = []

    def wait_for_a() -> None:
        try:
            svc_b.get_lock("A").lock()
        except LockingError as e:
            errors.append(e)

    t = threading.Thread(target=wait_for_a)
    t.start()
    time.sleep(0.2)
    b.disconnect()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1


def test_a_lock_service_needs_a_locking_protocol(udp_group):
    props, _, _ = udp_group
    with Channel("udp.xml", props=props) as ch, pytest.raises(LockingError):
        LockService(ch)


# ---- hostile input (fake stack) -------------------------------------------------------------------------------

@pytest.fixture
def server():
    stacks: list[FakeStack] = []

    def build(cls=CENTRAL_LOCK, **props) -> tuple[FakeStack, list]:
        prot = cls()
        for k, v in props.items():
            setattr(prot, k, v)
        s = FakeStack(prot, connect=True)
        stacks.append(s)
        members = [s.local_addr, UUID.random(), UUID.random()]
        s.install_view(members, 1, up=True)
        return s, members

    yield build
    for s in stacks:
        s.close()


def lock_msg(src, req: LockRequest | bytes, dest=None, pid: int = CENTRAL_ID) -> Message:
    payload = req if isinstance(req, bytes) else req.to_payload(DIALECT)
    msg = Message(dest, payload, src)
    msg.put_header(pid, LockingHeader())
    return msg


def responses(stack: FakeStack, type_: RequestType) -> list[LockRequest]:
    out = []
    for s in stack.tp.sent_where(lambda s: s.msg.has_header(CENTRAL_ID)):
        req = LockRequest.from_payload(DIALECT, s.msg.buffer)
        if req.type == type_:
            out.append(req)
    return out


def test_malformed_requests_are_counted_and_dropped_alone(server):
    s, (me, m1, m2) = server()
    good = LockRequest(T.GRANT_LOCK, "ok", Owner(m1, 1))
    bad = [b"", b"\x12abc", b"\x01\x01\x00\x00\x03abc", good.to_payload(DIALECT)[:-3],
           LockRequest(T.GRANT_LOCK, "no-owner", None).to_payload(DIALECT),
           LockRequest(T.GRANT_LOCK, None, Owner(m1, 1)).to_payload(DIALECT),
           LockRequest(T.GRANT_LOCK, "n" * 5000, Owner(m1, 1)).to_payload(DIALECT)]
    s.tp.inject([lock_msg(m1, b, me) for b in bad] + [lock_msg(m1, good, me)])
    st = s.prot.dump_stats()
    assert st["dropped_malformed"] == len(bad)
    assert st["server_locks"] == 1 and len(responses(s, T.LOCK_GRANTED)) == 1


def test_strangers_are_held_briefly_and_bounded_then_dropped(server):
    s, (me, m1, _) = server(max_held_requests=10)
    strangers = [UUID.random() for _ in range(200)]
    s.tp.inject([lock_msg(x, LockRequest(T.GRANT_LOCK, f"s{i}", Owner(x, 1)), me) for i, x in enumerate(strangers)])
    st = s.prot.dump_stats()
    assert st["server_locks"] == 0 and st["held_requests"] == 10 and st["dropped_non_member"] == 190
    assert responses(s, T.LOCK_GRANTED) == []
    # a view naming one of the held strangers: its request is handled then (a joiner's request overtaking the view)
    s.install_view([me, m1, strangers[0]], 2, up=True)
    assert s.prot.dump_stats()["server_locks"] == 1 and len(responses(s, T.LOCK_GRANTED)) == 1
    assert s.prot.dump_stats()["held_requests"] == 9


def test_a_member_cannot_act_for_another_owner(server):
    s, (me, m1, m2) = server()
    s.tp.inject([lock_msg(m1, LockRequest(T.GRANT_LOCK, "L", Owner(m2, 1)), me),
                 lock_msg(m1, LockRequest(T.LOCK_GRANTED, "L", Owner(m2, 1)), me)])
    st = s.prot.dump_stats()
    assert st["dropped_spoofed_owner"] == 2 and st["server_locks"] == 0


def test_a_flood_of_lock_names_and_waiters_stays_bounded(server):
    s, (me, m1, m2) = server(max_server_locks=50, max_queued_requests=100)
    s.tp.inject([lock_msg(m1, LockRequest(T.GRANT_LOCK, f"name-{i}", Owner(m1, 1)), me) for i in range(500)])
    st = s.prot.dump_stats()
    assert st["server_locks"] == 50 and st["denied_table_full"] == 450
    assert len(responses(s, T.LOCK_DENIED)) == 450
    # waiters on one held lock, thread ids made up: at most max_queued_requests are kept
    s.tp.inject([lock_msg(m2, LockRequest(T.GRANT_LOCK, "name-0", Owner(m2, i)), me) for i in range(300)])
    assert s.prot.dump_stats()["queued"] == 100
    # backup copies beyond the table are dropped, a DELETE_LOCK for a lock we do not have is harmless
    s.tp.inject([lock_msg(m1, LockRequest(T.CREATE_LOCK, f"copy-{i}", Owner(m2, 1)), me) for i in range(10)]
                + [lock_msg(m1, LockRequest(T.DELETE_LOCK, "never-created", None), me)])
    assert s.prot.dump_stats()["server_locks"] == 50
    # the flooding member leaves: everything it held or waited for goes
    s.install_view([me, m1], 2, up=True)
    assert s.prot.dump_stats()["queued"] == 0
    s.install_view([me], 3, up=True)
    assert s.prot.dump_stats()["server_locks"] == 0
    assert s.prot.dump_stats()["failed_msgs"] == 0


@pytest.mark.processes
def test_a_live_coordinator_shrugs_off_strangers_lock_requests(lock_cluster):
    """Datagrams from 1500 made-up members (each a first UNICAST message, so UNICAST passes what its bounded
    non-member windows take) with GRANT_LOCKs for distinct names, some 5000 characters long, and garbage
    payloads: no stranger creates a lock, what is held waiting for a view is capped, the members still lock."""
    import random

    from jgpy.stack.events import Event, EventType
    from jgpy.testing.hostile import Forger, Hdr, send_datagrams, stranger, unicast_data

    a, b = lock_cluster(2, base="udp.xml")
    phys = a.stack.down(Event(EventType.GET_PHYSICAL_ADDRESS, a.address))
    forger, rnd = Forger(a.cluster_name), random.Random(22)
    lock_hdr = Hdr(CENTRAL_ID, 81, b"")

    def attacks():
        for i in range(1500):
            src = stranger(rnd)
            name = f"stranger-{i}" + "x" * rnd.choice((0, 100, 5000))
            req = LockRequest(T.GRANT_LOCK, name, Owner(src, 1)).to_payload(DIALECT)
            yield "grant", forger.dgram(src, [unicast_data(1, 1, True), lock_hdr], a.address, req)
            yield "garbage", forger.dgram(src, [unicast_data(2, 1, False), lock_hdr], a.address, rnd.randbytes(40))

    sent = send_datagrams(attacks(), (phys.host, phys.port))
    assert sent == {"grant": 1500, "garbage": 1500}
    prot = a.stack.find("CENTRAL_LOCK")

    def seen() -> int:
        st = prot.dump_stats()
        return st["dropped_non_member"] + st["held_requests"] + st["dropped_malformed"]

    wait_until(lambda: seen() > 100, 10, msg="the strangers' requests reached CENTRAL_LOCK")
    st = prot.dump_stats()
    assert st["server_locks"] == 0 and st["held_requests"] <= prot.max_held_requests and st["failed_msgs"] == 0
    with LockService(b).get_lock("after"):
        assert LockService(a).get_lock("after").try_lock() is False
    assert LockService(a).get_lock("after").try_lock(5.0)
    LockService(a).get_lock("after").unlock()
