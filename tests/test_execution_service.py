"""CENTRAL_EXECUTOR with jgpy.blocks.ExecutionService / ExecutionRunner: tasks paired with consumers by the
coordinator and run by jgpy members (real channels on loopback); a runner that leaves, the coordinator that
leaves; the Request bytes against Java 2.12.2's class; a Java coordinator (and its takeover by a jgpy backup)
pairing jgpy clients and runners; hostile input on a fake stack."""

from __future__ import annotations

import threading
import time

import pytest

from jgpy import DIALECT, UUID, Channel, Message
from jgpy.blocks import ExecutionError, ExecutionRunner, ExecutionService
from jgpy.headers import ExecutorHeader
from jgpy.protocols.central_executor import CENTRAL_EXECUTOR
from jgpy.protocols.executing import ExecRequest, ExecType
from jgpy.stack.config import load_config
from jgpy.testing.cluster import IN_PROCESS
from tests.fakestack import FakeStack, wait_until

E = ExecType
EXEC_ID = 52
TASKS = {"square": lambda x: x * x, "fail": lambda: 1 / 0, "nap": lambda s: (time.sleep(s), "rested")[1]}


def test_the_request_layout():
    addr = UUID(3, 4)
    data = ExecRequest(E.RUN_REQUEST, addr, 17).to_payload(DIALECT)
    # TYPE_STREAMABLE, present, magic 86; type; short -1 + writeGenericStreamable(UUID, magic 68); long id
    assert data == (b"\x01\x01\x01\x00\x56" + b"\x00" + b"\xff\xff" + DIALECT.object_to_buffer(addr)[1:]
                    + (17).to_bytes(8, "big"))
    for req in (ExecRequest(E.RUN_REQUEST, addr, 17), ExecRequest(E.RESULT_SUCCESS, "x", 1),
                ExecRequest(E.RUN_REJECTED, None, 2), ExecRequest(E.RUN_SUBMITTED, b"\x00\x01", 3)):
        assert ExecRequest.from_payload(DIALECT, req.to_payload(DIALECT)) == req
    null = ExecRequest(E.RUN_REJECTED, None, 2).to_payload(DIALECT)
    assert null[5:] == b"\x05" + (1).to_bytes(4, "big") + b"\x00" + (2).to_bytes(8, "big")


@pytest.mark.interop
@pytest.mark.processes
def test_java_reads_our_requests_and_writes_the_same_bytes(java_nodes):
    j = java_nodes("G")
    for req, text in ((ExecRequest(E.CONSUMER_FOUND, UUID(3, 4), 17), "CONSUMER_FOUND [00000000-0000-0003-"),
                      (ExecRequest(E.RESULT_SUCCESS, "hi", 5), "RESULT_SUCCESS [hi request id: 5]"),
                      (ExecRequest(E.RUN_REJECTED, None, 9), "RUN_REJECTED [null request id: 9]")):
        data = req.to_payload(DIALECT)
        rep = j.decode("JavaObject", data)
        assert bytes.fromhex(rep["hex"]) == data and rep["value"]["value"]["string"].startswith(text)


# ---- jgpy clusters --------------------------------------------------------------------------------------------

@pytest.fixture
def exec_cluster(udp_group):
    """jgpy members in one process (shared-loopback.xml: the jar's udp.xml above an in-process transport)."""
    props, cluster, _ = udp_group
    made: list[Channel] = []
    runners: list[ExecutionRunner] = []

    def build(n: int) -> list[Channel]:
        cfg = load_config(IN_PROCESS).insert("CENTRAL_EXECUTOR", {})
        for _ in range(n):
            ch = Channel(cfg, name=f"X{len(made)}", props=props)
            made.append(ch)
            ch.connect(cluster)
        wait_until(lambda: all(c.view is not None and len(c.view.members) == len(made) for c in made), 20)
        return made[-n:]

    def runner(ch: Channel, threads: int = 1) -> ExecutionRunner:
        r = ExecutionRunner(ch, TASKS).start(threads)
        runners.append(r)
        return r

    yield build, runner
    for r in runners:
        r.stop()
    for ch in reversed(made):
        ch.close()


@pytest.mark.processes
def test_tasks_run_on_the_free_consumers_and_their_results_come_back(exec_cluster):
    build, runner = exec_cluster
    a, b, c = build(3)
    svc = ExecutionService(a)
    early = svc.submit("square", 3)                     # nobody consumes yet: the coordinator keeps the request
    time.sleep(0.2)
    assert not early.done()
    rb, rc = runner(b, 2), runner(c, 2)
    assert early.result(10) == 9
    futures = [svc.submit("square", i) for i in range(40)]
    assert [f.result(10) for f in futures] == [i * i for i in range(40)]
    assert rb.completed > 0 and rc.completed > 0 and rb.completed + rc.completed == 41
    with pytest.raises(ExecutionError, match="ZeroDivisionError"):
        svc.submit("fail").result(10)
    with pytest.raises(ExecutionError, match="no task 'unknown'"):
        svc.submit("unknown").result(10)
    waiting = ExecutionService(a).submit("nap", 0)
    assert waiting.result(10) == "rested"
    st = a.stack.find("CENTRAL_EXECUTOR").dump_stats()
    assert st["awaiting_return"] == 0 and st["awaiting_consumer"] == 0


@pytest.mark.processes
def test_a_task_whose_runner_leaves_runs_elsewhere(exec_cluster):
    build, runner = exec_cluster
    a, b, c = build(3)
    runner(b)
    fut = ExecutionService(a).submit("nap", 1.0)        # b takes it (the only consumer)
    wait_until(lambda: a.stack.find("CENTRAL_EXECUTOR").dump_stats()["awaiting_return"] == 1, 5)
    runner(c)
    b.close()                                           # its result never comes: a asks for another consumer
    assert fut.result(20) == "rested"


@pytest.mark.processes
def test_the_backup_keeps_the_waiting_requests_when_the_coordinator_leaves(exec_cluster):
    build, runner = exec_cluster
    a, b, c = build(3)                                  # a: coordinator, b: its backup
    fut = ExecutionService(c).submit("square", 12)
    wait_until(lambda: b.stack.find("CENTRAL_EXECUTOR").dump_stats()["run_requests"] == 1, 5, msg="the copy")
    a.close()
    wait_until(lambda: b.stack.find("CENTRAL_EXECUTOR").is_coord, 20)
    runner(b)
    assert fut.result(20) == 144


# ---- with Java -------------------------------------------------------------------------------------------------

@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.timeout(180)
def test_a_java_coordinator_pairs_jgpy_clients_and_runners_and_its_jgpy_backup_takes_over(java_nodes, udp_group,
                                                                                          tmp_path):
    props, cluster, _ = udp_group
    cfg = load_config("udp.xml").insert("CENTRAL_EXECUTOR", {})
    path = tmp_path / "exec.xml"
    path.write_text(cfg.to_xml())
    j = java_nodes("J0")
    j.connect(str(path), cluster, props=props)
    chs = []
    try:
        for name in ("X1", "X2"):
            ch = Channel(cfg, name=name, props=props)
            chs.append(ch)
            ch.connect(cluster)
        wait_until(lambda: all(len(c.view.members) == 3 for c in chs), 20)
        b, c = chs
        runner = ExecutionRunner(c, TASKS).start(2)
        try:
            svc = ExecutionService(b)
            assert [f.result(10) for f in [svc.submit("square", i) for i in range(20)]] == \
                [i * i for i in range(20)]
            assert j.protocol_stats()["CENTRAL_EXECUTOR"]["is_coord"] == "true"
            runner.stop()
            waiting = svc.submit("square", 5)           # waits at the Java coordinator (and its backup, b)
            wait_until(lambda: b.stack.find("CENTRAL_EXECUTOR").dump_stats()["run_requests"] == 1, 10,
                       msg="the Java coordinator's copy at its jgpy backup")
            j.halt()
            wait_until(lambda: b.stack.find("CENTRAL_EXECUTOR").is_coord, 30)
            runner = ExecutionRunner(c, TASKS).start(1)
            assert waiting.result(20) == 25
        finally:
            runner.stop()
    finally:
        for ch in reversed(chs):
            ch.close()


# ---- hostile input (fake stack) -------------------------------------------------------------------------------

def exec_msg(src, req: ExecRequest | bytes, dest) -> Message:
    msg = Message(dest, req if isinstance(req, bytes) else req.to_payload(DIALECT), src)
    msg.put_header(EXEC_ID, ExecutorHeader())
    return msg


def test_a_copy_that_overtakes_the_view_naming_its_sender_is_held_until_that_view():
    """A joiner gets the coordinator's CREATE_CONSUMER_READY copies before the view with the coordinator in it
    (2.12's coordinator sends them from its own view change): held, then handled."""
    prot = CENTRAL_EXECUTOR()
    s = FakeStack(prot, connect=True)
    try:
        me, coord = s.local_addr, UUID.random()
        s.tp.inject([exec_msg(coord, ExecRequest(E.CREATE_CONSUMER_READY, coord, 7), me)])
        st = prot.dump_stats()
        assert st["held_requests"] == 1 and st["consumers"] == 0
        s.install_view([coord, me], 1, up=True)
        st = prot.dump_stats()
        assert st["held_requests"] == 0 and st["consumers"] == 1 and st["dropped_non_member"] == 0
    finally:
        s.close()


def test_malformed_strangers_and_floods_are_counted_and_bounded():
    prot = CENTRAL_EXECUTOR()
    prot.max_queued = 100
    s = FakeStack(prot, connect=True)
    try:
        me, m1 = s.local_addr, UUID.random()
        s.install_view([me, m1], 1, up=True)
        good = ExecRequest(E.RUN_REQUEST, m1, 1).to_payload(DIALECT)
        bad = [b"", b"\x12x", good[:-4], good[:5] + b"\x0d" + good[6:],
               ExecRequest(E.RUN_REQUEST, None, 1).to_payload(DIALECT)]
        s.tp.inject([exec_msg(m1, b, me) for b in bad])
        st = prot.dump_stats()
        assert st["dropped_malformed"] == 4 and st["dropped_non_member"] == 1 and st["failed_msgs"] == 0
        stranger = UUID.random()
        # a stranger's requests are held (it may be a joiner whose view is not here yet), 100 at most
        s.tp.inject([exec_msg(stranger, ExecRequest(E.RUN_REQUEST, stranger, i), me) for i in range(150)])
        st = prot.dump_stats()
        assert st["dropped_non_member"] == 51 and st["held_requests"] == 100 and st["run_requests"] == 0
        s.tp.inject([exec_msg(m1, ExecRequest(E.RUN_REQUEST, m1, i), me) for i in range(1000)])
        st = prot.dump_stats()
        assert st["run_requests"] == 100 and st["dropped_queue_full"] == 900
        s.install_view([me], 2, up=True)                # the flooding member leaves: its requests go
        assert prot.dump_stats()["run_requests"] == 0
        # results nobody waits for, interrupts: ignored
        s.install_view([me, m1], 3, up=True)
        s.tp.inject([exec_msg(m1, ExecRequest(E.RESULT_SUCCESS, "x", 99), me),
                     exec_msg(m1, ExecRequest(E.INTERRUPT_RUN, None, 1), me)])
        assert prot.dump_stats()["interrupts_ignored"] == 1 and prot.dump_stats()["failed_msgs"] == 0
    finally:
        s.close()


def test_a_task_for_a_member_without_an_idle_consumer_is_rejected_at_once():
    prot = CENTRAL_EXECUTOR()
    s = FakeStack(prot, connect=True)
    try:
        me, m1 = s.local_addr, UUID.random()
        s.install_view([m1, me], 1, up=True)
        t0 = time.monotonic()
        s.tp.inject([exec_msg(m1, ExecRequest(E.RUN_SUBMITTED, b"{}", 7), me)])
        assert time.monotonic() - t0 < 1
        sent = [ExecRequest.from_payload(DIALECT, x.msg.buffer) for x in s.tp.sent_where(
            lambda x: x.msg.has_header(EXEC_ID))]
        assert sent == [ExecRequest(E.RUN_REJECTED, None, 7)]
        assert prot.dump_stats()["rejected_no_consumer"] == 1
        got: list = []
        t = threading.Thread(target=lambda: got.append(prot.take_task(5)))
        t.start()
        wait_until(lambda: prot.idle_consumers, 5)
        s.tp.inject([exec_msg(m1, ExecRequest(E.RUN_SUBMITTED, b"{}", 8), me)])
        t.join(5)
        assert got and got[0].request_id == 8 and got[0].source == m1
    finally:
        s.close()
