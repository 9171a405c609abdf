"""Integration: real dev server, real worker process, the real ledger."""

from __future__ import annotations

import pytest

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.waiting import wait_until
from conftest import run_cli


async def test_twelve_steps_exactly_once(home, client, supervisor):
    run_id = await start_run(home, client, steps=12, pace=0)
    assert await wait_for_run(home, client, run_id, timeout=120) == "COMPLETED"

    conn = connect(home.db_path)
    snap = build_snapshot(conn, home, run_id)
    assert snap.ledger_rows == 36
    assert snap.duplicates == 0
    assert snap.outbox_lines == 12 and snap.outbox_duplicates == 0
    assert snap.artifact_files == 12
    assert snap.notes_rows == 12
    assert [s.step for s in snap.steps] == list(range(1, 13))
    assert all(s.status == "completed" and s.worker_pid for s in snap.steps)
    assert snap.outcome_counts["applied"] == 36

    # The recorded history (every execution of the continue-as-new chain) replays against the
    # current workflow code without nondeterminism.
    replay = run_cli("replay", run_id, home=home, timeout=60)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"PASS  replay {run_id}.01" in replay.stdout and "REPLAY PASS — 1/1" in replay.stdout


async def read_to_the_end(follower, timeout: float = 20.0) -> list:
    """Every event of a finished chain, within `timeout` (the follower's pace is 30 s in these tests: a
    finished chain must be read without it)."""
    events = []

    def read() -> bool:
        events.extend(follower.drain())
        return follower.caught_up

    follower.ensure_following()
    await wait_until(read, timeout, what="the finished chain read to its end")
    return events


async def test_continue_as_new_chain_keeps_exactly_once(home, client, supervisor):
    """steps_per_run=20: a 45-step run is three executions; the ledger and the history reader span them.
    The reader takes a finished chain at once: its pace between polls (here 30 s) is for a live run's
    new events, not for pages of a backlog (the dev server returns 512 events a page) nor for the empty
    page after an execution's last event."""
    from checkpoint_tui.core.history import HistoryFollower
    from checkpoint_tui.core.runs import new_run_id
    from checkpoint_tui.ledger.store import create_run
    from checkpoint_tui.loop_worker.shared import AgentInput

    conn = connect(home.db_path)
    run_id = new_run_id()  # the only kind of run id a worker accepts
    create_run(conn, run_id, 45, 0.0, "offline", home.task_queue)
    handle = await client.start_workflow(
        "AgentLoop", AgentInput(run_id, 45, 0.0, steps_per_run=20), id=run_id, task_queue=home.task_queue
    )
    assert await wait_for_run(home, client, run_id, timeout=120) == "COMPLETED"
    snap = build_snapshot(conn, home, run_id)
    assert (snap.completed_steps, snap.ledger_rows, snap.duplicates, snap.outbox_lines) == (45, 135, 0, 45)

    follower = HistoryFollower(client, run_id, handle.result_run_id, keep=5000, pace_s=30.0)
    events = await read_to_the_end(follower)
    assert [e.segment for e in events if e.name == "WORKFLOW_EXECUTION_STARTED"] == [0, 1, 2]
    assert sum(e.name == "WORKFLOW_EXECUTION_CONTINUED_AS_NEW" for e in events) == 2
    assert events[-1].name == "WORKFLOW_EXECUTION_COMPLETED"
    assert follower.requests == 5  # two pages for each 20-step execution, one for the last


# A cancel that lands in a timer raises CancelledError in the workflow; one that lands in an activity in
# flight raises ActivityError with a cancelled cause, which a plain `except ActivityError` takes for a
# failure (a FAILED run). Both must end CANCELED.
CANCEL_WHEN = {
    "between-steps": "SELECT COUNT(*) FROM steps WHERE run_id=? AND status='completed'",
    "inside-an-activity": "SELECT COUNT(*) FROM steps WHERE run_id=? AND step=2 AND status='running'",
}


@pytest.mark.parametrize("when", sorted(CANCEL_WHEN))
async def test_cancel_ends_the_run_cancelled(home, client, supervisor, when):
    from checkpoint_tui.core.runs import cancel_run

    run_id = await start_run(home, client, steps=10, pace=1.0)  # step 2 thinks 542 ms; the timer after 1, 437 ms
    conn = connect(home.db_path)
    await wait_until(lambda: conn.execute(CANCEL_WHEN[when], (run_id,)).fetchone()[0], 30, what=when)
    await cancel_run(client, run_id)
    assert await wait_for_run(home, client, run_id, timeout=60) == "CANCELED"
    row = conn.execute("SELECT status, error FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    assert row["status"] == "cancelled" and "cancelled" in row["error"]
    snap = build_snapshot(conn, home, run_id)
    assert 1 <= snap.completed_steps < 10 and snap.duplicates == 0


async def test_hostile_allow_steps_signals_wedge_no_run(home, client, supervisor):
    """Anyone who reaches the task queue can signal: no payload, two payloads or the wrong type must
    neither fail a workflow task (a raising handler would, on every replay) nor move a gate."""
    from temporalio.api.enums.v1 import EventType

    from checkpoint_tui.core.runs import WORKFLOW_TASK_TIMEOUT, model_label, record_run
    from checkpoint_tui.loop_worker.shared import ALLOW_STEPS_SIGNAL, WORKFLOW_NAME, AgentInput, ModelRef

    free = await start_run(home, client, steps=2, pace=0)
    gated_id = record_run(home, 2, 0.0, (), model_label(ModelRef()))
    gated = await client.start_workflow(
        WORKFLOW_NAME,
        AgentInput(gated_id, 2, 0.0, ModelRef(), allowed_steps=0),
        id=gated_id,
        task_queue=home.task_queue,
        task_timeout=WORKFLOW_TASK_TIMEOUT,
    )
    for handle in (client.get_workflow_handle(free), gated):
        await handle.signal(ALLOW_STEPS_SIGNAL)
        await handle.signal(ALLOW_STEPS_SIGNAL, args=[1, 2])
        await handle.signal(ALLOW_STEPS_SIGNAL, "2")
        await handle.signal(ALLOW_STEPS_SIGNAL, True)
    assert await wait_for_run(home, client, free, timeout=60) == "COMPLETED"
    assert await gated.query("current_step") == 1  # parked: only a real allow_steps(N) moves it
    assert connect(home.db_path).execute("SELECT COUNT(*) FROM steps WHERE run_id = ?", (gated_id,)).fetchone()[0] == 0
    await gated.signal(ALLOW_STEPS_SIGNAL, 2)
    assert await wait_for_run(home, client, gated_id, timeout=60) == "COMPLETED"
    for run_id in (free, gated_id):
        events = [ev async for ev in client.get_workflow_handle(run_id).fetch_history_events()]
        assert not [ev for ev in events if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED], run_id


async def test_the_history_reader_follows_a_reset_into_the_execution_it_made(home, client, supervisor):
    """A reset terminates the execution and makes another that copies its events up to the reset point;
    the reader goes on into it from the reset on (the copy is what it showed already)."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.worker import Replayer

    from checkpoint_tui.core.history import HistoryFollower
    from checkpoint_tui.core.runs import new_run_id
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import create_run
    from checkpoint_tui.loop_worker.shared import AgentInput
    from checkpoint_tui.loop_worker.workflow import AgentLoop
    from checkpoint_tui.proof.nemeses.resets import reset_workflow
    from checkpoint_tui.proof.replay.histories import fetch_chain

    conn = connect(home.db_path)
    run_id = new_run_id()
    create_run(conn, run_id, 8, 0.3, "offline", home.task_queue)
    handle = await client.start_workflow("AgentLoop", AgentInput(run_id, 8, 0.3), id=run_id, task_queue=home.task_queue)
    await wait_until(lambda: queries.count_completed(conn, run_id) >= 4, 60.0, what="step 4 completed")
    reset = await reset_workflow(client, run_id, step=4, back=2)  # steps 3 and 4 again, mid-run
    assert reset is not None and reset["from_step"] == 3
    assert await wait_for_run(home, client, run_id, timeout=120) == "COMPLETED"
    assert build_snapshot(conn, home, run_id).duplicates == 0

    follower = HistoryFollower(client, run_id, handle.result_run_id, keep=5000, pace_s=30.0)
    events = await read_to_the_end(follower)
    names = [(e.segment, e.name) for e in events]
    assert (0, "WORKFLOW_EXECUTION_TERMINATED") in names and names[-1] == (1, "WORKFLOW_EXECUTION_COMPLETED")
    after = [e for e in events if e.segment == 1]
    assert after[0].name == "WORKFLOW_TASK_FAILED"  # the reset point: nothing copied is shown twice
    assert sum(e.name == "WORKFLOW_EXECUTION_STARTED" for e in events) == 1

    chain = await fetch_chain(client, run_id, handle.result_run_id)  # what `replay RUN` replays: both
    assert [r.history.events[-1].event_type for r in chain] == [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    ]
    for recorded in chain:
        await Replayer(workflows=[AgentLoop]).replay_workflow(recorded.history)
