"""Chaos's hop fails a killed worker's attempts by task token (proof/nemeses/handed.py): the attempts it
was handed and had not answered, at once; a task handed to it afterwards, as it passes; nothing it
answered. Then the whole path on a real dev server: a worker process SIGKILLed inside an activity whose
timeouts are a minute long, its attempt retried on another worker within seconds, history saying the
lab's hop failed it, and the ledger's assist event naming it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from checkpoint_tui.ledger.store import connect, create_run, record_worker_event
from checkpoint_tui.proof.nemeses.handed import FAILED_BY, Handed, Held, by_token
from checkpoint_tui.proof.nemeses.hop import Hop
from checkpoint_tui.proof.nemeses.records import Hit
from checkpoint_tui.settings import Settings


def _held(identity: str, activity_id: str) -> Held:
    return Held(identity, "run-1", "send_line", activity_id)


async def test_a_death_fails_what_its_worker_held_and_unanswered_only(tmp_path: Path) -> None:
    failed: list[tuple[bytes, str]] = []

    async def fail(token: bytes, message: str) -> None:
        failed.append((token, message))

    handed = Handed(Settings(home=tmp_path), fail)
    handed.hand(b"a", _held("11@vm", "1"), 100.0)
    handed.hand(b"b", _held("11@vm", "2"), 100.0)
    handed.hand(b"c", _held("12@vm", "3"), 100.0)  # another worker's: alive
    handed.answer(b"b")  # its completion on its way before the death
    handed.died("11@vm", 11, 101.0)
    handed.died("11@vm", 11, 101.2)  # the supervisor's record of the same death: nothing more
    await handed.close()
    assert failed == [(b"a", f"worker 11 {FAILED_BY}")]
    handed.hand(b"d", _held("11@vm", "4"), 100.5)  # a long poll it sent before it died, answered after
    handed.orphan(b"e", _held("13@vm", "5"))  # answered after its worker's call was gone
    await handed.close()
    assert [t for t, _ in failed] == [b"a", b"d", b"e"] and failed[2][1] == f"worker 13@vm {FAILED_BY}"
    handed.hand(b"f", _held("11@vm", "6"), 102.0)  # a new worker under that identity (a pid used again): alive
    handed.died("11@vm", 11, 101.0)  # the old death's record, read after the new worker polled: not its death
    await handed.close()
    assert len(failed) == 3 and set(handed.held) == {b"c", b"f"} and "11@vm" not in handed.dead
    rows = connect(Settings(home=tmp_path).ledger).execute(
        "SELECT pid, identity, detail FROM worker_events WHERE event = 'assist' ORDER BY id"
    )
    said = [(pid, who, json.loads(detail)) for pid, who, detail in rows.fetchall()]
    assert sorted((d["failed_activities"], pid, who, d.get("late", False)) for pid, who, d in said) == [
        (["run-1:send_line#1"], 11, "11@vm", False),
        (["run-1:send_line#4"], 11, "11@vm", True),
        (["run-1:send_line#5"], None, "13@vm", True),  # events written as each pass ends: any order
    ]
    assert all(d["by"] == "hop" for _, _, d in said)


async def test_an_answer_temporal_did_not_take_is_its_worker_s_again(tmp_path: Path) -> None:
    """An answer on its way is not failed by a death; once Temporal refused it (away), the attempt is the
    dead worker's to fail; one Temporal no longer has (NOT_FOUND: timed out, failed) is over."""
    import grpc

    failed: list[bytes] = []

    async def fail(token: bytes, message: str) -> None:
        failed.append(token)

    def ended(code: grpc.StatusCode | None) -> asyncio.Future:
        done = asyncio.get_running_loop().create_future()
        if code is None:
            done.set_result(b"")
        else:
            done.set_exception(grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata()))
        return done

    handed = Handed(Settings(home=tmp_path), fail)
    for token in (b"a", b"b", b"c"):
        handed.hand(token, _held("11@vm", token.decode()), 100.0)
        handed.answer(token)
    handed.died("11@vm", 11, 101.0)
    await handed.close()
    assert failed == []  # all three on their way
    handed.settle(b"a", ended(None))
    handed.settle(b"b", ended(grpc.StatusCode.NOT_FOUND))
    handed.settle(b"c", ended(grpc.StatusCode.UNAVAILABLE))
    await handed.close()
    assert failed == [b"c"]


async def test_a_death_the_supervisor_records_fails_what_that_worker_held(tmp_path: Path) -> None:
    """A death chaos did not cause itself (a hook crash, the watchdog's kill of a hung worker), read from
    the ledger; one recorded before the hop began watching is not replayed."""
    failed: list[bytes] = []

    async def fail(token: bytes, message: str) -> None:
        failed.append(token)

    settings = Settings(home=tmp_path)
    conn = connect(settings.ledger)
    record_worker_event(conn, "died", 11, "11@vm")  # before: not this hop's
    handed = Handed(settings, fail)
    handed.watch()
    handed.hand(b"a", _held("11@vm", "1"), time.time())
    handed.hand(b"b", _held("12@vm", "2"), time.time())
    await asyncio.sleep(0.2)
    assert failed == []
    record_worker_event(conn, "exit", 12, "12@vm")  # a graceful exit: its attempts are its own to end
    record_worker_event(conn, "died", 11, "11@vm")
    deadline = time.monotonic() + 5
    while not failed and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await handed.close()
    assert failed == [b"a"] and set(handed.held) == {b"b"}


async def test_a_failure_temporal_could_not_take_is_tried_again(tmp_path: Path) -> None:
    """The dev server restarting under the failure (chaos kills it too): tried again until it answers."""
    from temporalio.service import RPCError, RPCStatusCode

    calls: list[bytes] = []

    async def fail(token: bytes, message: str) -> None:
        calls.append(token)
        if len(calls) < 3:
            raise RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")

    handed = Handed(Settings(home=tmp_path), fail)
    handed.hand(b"a", _held("11@vm", "1"), 100.0)
    handed.died("11@vm", 11, 101.0)
    await handed.close()
    (detail,) = connect(Settings(home=tmp_path).ledger).execute("SELECT detail FROM worker_events").fetchone()
    assert calls == [b"a"] * 3 and json.loads(detail)["failed_activities_count"] == 1


async def test_a_failure_that_raises_is_not_counted(tmp_path: Path) -> None:
    async def fail(token: bytes, message: str) -> None:
        raise RuntimeError("not found: answered meanwhile")

    handed = Handed(Settings(home=tmp_path), fail)
    handed.hand(b"a", _held("11@vm", "1"), 100.0)
    handed.died("11@vm", 11, 101.0)
    await handed.close()
    (detail,) = connect(Settings(home=tmp_path).ledger).execute("SELECT detail FROM worker_events").fetchone()
    assert (json.loads(detail)["failed_activities_count"], json.loads(detail)["asked"]) == (0, 1)


WORKER = textwrap.dedent(
    """
    import asyncio, os, sys
    from temporalio import activity
    from temporalio.client import Client
    from temporalio.worker import Worker

    @activity.defn(name="stuck")
    async def stuck() -> str:
        await asyncio.sleep(3600)
        return "never"

    async def main():  # the activity only: the test's own worker runs the workflow
        client = await Client.connect(sys.argv[1])
        identity = f"{os.getpid()}@handed-test"
        async with Worker(client, task_queue=sys.argv[2], activities=[stuck], identity=identity):
            await asyncio.Event().wait()

    asyncio.run(main())
    """
)


LIVE_ATTEMPTS: list[int] = []  # the attempts the test's live worker started


@activity.defn(name="stuck")
async def unstuck() -> str:
    LIVE_ATTEMPTS.append(activity.info().attempt)
    return "done"


@workflow.defn(name="OneStuck", sandboxed=False)
class OneStuck:
    @workflow.run
    async def run(self) -> str:
        from datetime import timedelta

        return await workflow.execute_activity(unstuck, start_to_close_timeout=timedelta(seconds=60))


async def _started_on(client: Client, workflow_id: str, deadline_s: float = 30.0) -> str:
    """The identity of the worker the run's activity is started on."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        desc = await client.get_workflow_handle(workflow_id).describe()
        started = [p for p in desc.raw_description.pending_activities if p.last_worker_identity]
        if started:
            return started[0].last_worker_identity
        await asyncio.sleep(0.05)
    raise AssertionError("the activity never started")


@pytest.mark.parametrize("through_hop", [True, False], ids=["through-the-hop", "around-it"])
async def test_a_killed_worker_s_attempt_is_retried_at_once(temporal_address: str, tmp_path: Path, through_hop) -> None:
    """Through the hop, its attempt is failed by token as chaos kills it. A worker that reaches Temporal
    around the hop (or an attempt Temporal started as its poll was cancelled): the late pass fails it by id."""
    settings = Settings(home=tmp_path)
    client = await Client.connect(temporal_address)
    hop = Hop(temporal_address, "", None, lambda who: None)
    hop.handed = Handed(settings, by_token(lambda: client), lambda: client)
    address = await hop.start()
    queue = settings.task_queue
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    LIVE_ATTEMPTS.clear()
    proc = subprocess.Popen([sys.executable, str(script), address if through_hop else temporal_address, queue])
    handle = None
    try:
        # the workflow's worker, alive throughout: the run's sticky queue is never a dead worker's
        async with Worker(client, task_queue=queue, workflows=[OneStuck]):
            handle = await client.start_workflow("OneStuck", id=f"handed-{uuid.uuid4().hex[:8]}", task_queue=queue)
            create_run(connect(settings.ledger), handle.id, 1, 0.0, "offline", queue)  # the late pass asks these
            identity = await _started_on(client, handle.id)
            assert identity == f"{proc.pid}@handed-test"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            killed = time.time()
            hop.killed(Hit(killed, proc.pid, identity))  # chaos's kill: at once
            async with Worker(client, task_queue=queue, activities=[unstuck]):
                assert await asyncio.wait_for(handle.result(), 50) == "done"
            history = (await handle.fetch_history()).events
            starts = [e for e in history if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
            (retry,) = [e.activity_task_started_event_attributes for e in starts]  # the attempt that ran
            assert retry.attempt >= 2 and [retry.attempt] == LIVE_ATTEMPTS  # no live worker's attempt failed
            started = starts[0].event_time.ToMilliseconds() / 1000
            assert started - killed < 30  # its own timeout would have retried it after 60 s
            assert retry.last_failure.message == f"worker {proc.pid} {FAILED_BY}"
            deadline = time.monotonic() + 30  # the late pass has asked (and found nothing more, through the hop)
            while hop.handed.late_passing and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not hop.handed.late_passing
            await hop.handed.close()
            rows = connect(settings.ledger).execute(
                "SELECT pid, detail FROM worker_events WHERE event = 'assist' ORDER BY id"
            )
            said = [(pid, json.loads(detail)) for pid, detail in rows.fetchall()]
            # Attempt 1 failed as the kill came; on a loaded machine Temporal may hand the retry to one of
            # the dead worker's polls still open at it (its closed connection not yet seen), and that attempt
            # is failed too: by token as it passes the hop, or by id if the late pass's describe saw it
            # started first. Each attempt before the one that ran, once, naming the dead worker; the
            # kill's own by token through the hop (the late pass leaves what the hop saw handed out).
            failed = [a for _, d in said for a in d["failed_activities"]]
            assert failed == [f"{handle.id}:stuck#1"] * (retry.attempt - 1), said  # activity 1's attempts
            assert all(pid == proc.pid for pid, _ in said), said
            assert said[0][1].get("by_id", False) is not through_hop, said
            assert through_hop or all(d.get("by_id") for _, d in said), said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if handle is not None:
            with contextlib.suppress(Exception):  # completed already
                await asyncio.wait_for(handle.terminate(), 10)
        await hop.close()


def test_the_audit_reads_the_hop_s_failure_as_a_death_not_the_activity_s_own() -> None:
    from checkpoint_tui.core.activity_audit import _failing
    from checkpoint_tui.core.activity_history import ActivityExec

    act = ActivityExec(1, 0, "exec-1", "1", "send_line", 0.0, attempt=2, status="scheduled")
    act.last_failure = f"worker 11 {FAILED_BY}"
    assert not _failing(act)  # its retry mends it
    act.last_failure = "ValueError: the tool raised"
    assert _failing(act)
