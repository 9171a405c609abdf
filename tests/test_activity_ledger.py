"""The ledger as the worker's activities reach it (loop_worker/activity_ledger.py): the same writes and
answers as the plain functions on both backends, and on PostgreSQL statements that wait without
holding the event loop, finish when their task is cancelled, and survive a dropped connection. Also
the activities' heartbeat rhythm (loop_worker/heartbeat.py)."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.effects import (
    EffectSpec,
    add_note,
    apply_effect_once_async,
    claim_effect,
    physical_for,
    stamp_effect,
)
from checkpoint_tui.ledger.plans import PlanError, drive, on, stmt
from checkpoint_tui.ledger.store import connect, upsert_step
from checkpoint_tui.loop_worker import heartbeat
from checkpoint_tui.loop_worker.activity_ledger import ActivityLedger
from checkpoint_tui.waiting import to_the_end

RUN = "run-20260101-000000-cafe"


def spec(kind: str, attempt: int = 1) -> EffectSpec:
    return EffectSpec(RUN, 2, kind, f"{kind} payload", attempt, 4242, RUN)


async def test_the_activities_writes_and_reads_match_the_plain_functions(ledger_target, tmp_path):
    conn, db = connect(ledger_target), ActivityLedger(ledger_target)
    try:
        for fault in ("transient:2:3", "crash_in_tool:1", "crash_after_write:2:db", "garble:3", "freeze:2"):
            faults.add_fault(conn, RUN, faults.parse_fault(fault))
        assert faults.consume(conn, RUN, 2, "freeze")  # fired: no longer planned
        planned = await db.run(faults.touch_step_planned, RUN, 2, "llm", 1, 4242, "running")
        # this step's, and a crash_in_tool from an earlier step that no tool call has reached yet
        assert planned == {("transient", None), ("crash_in_tool", None), ("crash_after_write", "db")}
        assert planned == faults.touch_step_planned(conn, RUN, 2, "tool", 1, 4242, "running")
        await db.run(upsert_step, RUN, 2, "running", attempt=1, thought="because")
        row = conn.execute("SELECT status, worker_pid, thought FROM steps WHERE run_id = ? AND step = 2", (RUN,))
        assert tuple(row.fetchone()) == ("running", 4242, "because")
        logged = conn.execute("SELECT activity FROM activity_log WHERE run_id = ? ORDER BY id", (RUN,))
        assert [r[0] for r in logged] == ["llm", "tool"]
        assert await db.run(faults.consume_from, RUN, 2, "crash_in_tool") is True

        async def once(kind: str, attempt: int) -> str:
            physical = physical_for(kind, None, tmp_path / "artifacts", call=db.run)
            return await apply_effect_once_async(
                lambda s: db.run(claim_effect, s), lambda *a: db.run(stamp_effect, *a), spec(kind, attempt), physical
            )

        assert [await once(k, 1) for k in ("file", "db", "email")] == ["applied"] * 3
        assert [await once(k, 2) for k in ("file", "db", "email")] == ["skipped"] * 3
        counts = conn.execute(
            "SELECT (SELECT COUNT(*) FROM effects WHERE applied_at IS NOT NULL), (SELECT COUNT(*) FROM notes), "
            "(SELECT COUNT(*) FROM effect_outcomes WHERE outcome IS NOT NULL)"
        ).fetchone()
        assert tuple(counts) == (3, 1, 6)
    finally:
        await db.close()


async def _ticks_while(job: asyncio.Future, every: float = 0.01) -> int:
    ticks = 0
    while not job.done():
        await asyncio.sleep(every)
        ticks += 1
    return ticks


async def test_a_postgres_statement_waits_without_holding_the_event_loop(pg_url):
    """A note whose row another transaction holds waits on it (up to the 1.5 s lock_timeout): the
    loop goes on meanwhile (a blocking call would hold it the whole wait), and once the holder rolls
    back the note goes in."""
    db = ActivityLedger(pg_url)
    connect(pg_url)  # the schema
    note = spec("db")
    try:
        with psycopg.connect(pg_url) as holder:  # not autocommit: its insert stays uncommitted
            holder.execute(
                "INSERT INTO notes(effect_id, run_id, step, text) VALUES(%s, %s, 2, 'other')", (note.id, RUN)
            )
            job = asyncio.ensure_future(db.run(add_note, note))
            started = time.monotonic()
            while time.monotonic() - started < 0.3:  # well inside the 1.5 s lock_timeout, even loaded
                await asyncio.sleep(0.01)
            assert not job.done()
            holder.rollback()
        assert await job is False  # added: the holder's row never committed
        assert connect(pg_url).execute("SELECT text FROM notes").fetchone()[0] == note.payload
    finally:
        await db.close()


async def test_a_cancelled_postgres_statement_finishes_before_the_cancellation_lands(pg_url):
    """A pause or reset cancels the activity's task mid-statement: the statement runs to its end (its
    connection goes back clean) and only then is the task cancelled; the next statement works."""
    db = ActivityLedger(pg_url)
    connect(pg_url)
    note = spec("db")
    try:
        with psycopg.connect(pg_url) as holder:
            holder.execute(
                "INSERT INTO notes(effect_id, run_id, step, text) VALUES(%s, %s, 2, 'other')", (note.id, RUN)
            )
            job = asyncio.ensure_future(db.run(add_note, note))
            await asyncio.sleep(0.2)
            job.cancel()
            await asyncio.sleep(0.2)
            assert not job.done()  # still waiting for its statement, cancellation held back
            holder.rollback()
        with pytest.raises(asyncio.CancelledError):
            await job
        assert connect(pg_url).execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1  # it went in
        assert await db.run(add_note, note) is True  # the pool's connection is fine: the note is there
    finally:
        await db.close()


async def test_a_postgres_connection_dropped_by_the_server_is_replaced(pg_url):
    """A restart or failover drops every connection: the statement that meets a dropped one fails
    (its activity is retried by Temporal), once, not once per pooled connection; the next ones run on
    new connections."""
    db = ActivityLedger(pg_url)
    connect(pg_url)
    pool = db._pg
    assert pool is not None
    try:
        await asyncio.gather(*(pool.execute("SELECT pg_sleep(0.2)") for _ in range(3)))  # three connections
        assert len(pool._idle) == 3
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        failed = 0
        for _ in range(4):
            try:
                assert await db.run(faults.consume, RUN, 1, "transient") is False
            except Unavailable as err:
                assert "dropped the connection" in str(err) and "password" not in str(err)
                failed += 1
        assert failed == 1 and pool._opened == len(pool._idle) == 1
    finally:
        await db.close()


async def test_an_activity_heartbeats_only_once_it_has_run_an_interval(monkeypatch):
    """No heartbeat for a body shorter than one interval (each is a request the server records); a
    longer one beats each interval, the first after one."""
    beats: list[float] = []
    monkeypatch.setattr(heartbeat.activity, "heartbeat", lambda *a: beats.append(time.monotonic()))
    async with heartbeat.beating(every=0.2):
        await asyncio.sleep(0.05)
    assert beats == []
    start = time.monotonic()
    async with heartbeat.beating(every=0.2):
        await asyncio.sleep(0.5)
    assert 1 <= len(beats) <= 2 and beats[0] - start >= 0.2  # at 0.2 and 0.4 s (a loaded loop may lag)


def test_the_blocking_and_awaited_paths_share_one_plan() -> None:
    """Each function the activities await has a plan, the SQL both paths run."""
    for fn in (
        faults.touch_step_planned,
        faults.consume,
        faults.consume_from,
        upsert_step,
        claim_effect,
        stamp_effect,
        add_note,
    ):
        assert callable(getattr(fn, "plan", None)), fn.__name__


async def test_a_job_that_fails_after_a_cancellation_raises_the_cancellation_from_its_failure():
    async def job() -> None:
        await asyncio.sleep(0.1)
        raise ValueError("the statement failed")

    waiter = asyncio.ensure_future(to_the_end(job()))
    await asyncio.sleep(0.02)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await waiter
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_plan_asking_for_something_else_ends_with_its_cleanup_run():
    closed = []

    def plan():
        try:
            yield "not a statement"
        except Exception:  # a plan that swallows errors must not swallow this one
            yield stmt("SELECT 1")
        finally:
            closed.append(True)

    with pytest.raises(PlanError):
        drive(plan(), on(object()))
    assert closed == [True]
