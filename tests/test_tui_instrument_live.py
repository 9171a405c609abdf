"""The app as an instrument against the real dev server and worker processes: after a SIGKILL the
completion sentence is read from the screen and from `status`, the kill marker sits between history
events and comes back after a restart of the app, and the inspector shows both workers' attempts; a
stopped worker's silence shows as the age of its last heartbeat on the running step."""

from __future__ import annotations

import asyncio

from checkpoint_tui.core.runs import start_run
from checkpoint_tui.core.session import LabSession
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.proof.nemeses.processes import pause_worker
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.status import StatusBar
from checkpoint_tui.tui.step_screen import StepScreen
from checkpoint_tui.workloads import AgentLoopWorkload
from conftest import run_cli
from test_tui_live import SIZE, kill_in_step_3, wait_for


def marker_of(app) -> str | None:
    history = app.query_one("#history")
    keys = [k for k in history.row_keys() if k.startswith("kill/")]
    return history.get_cell(keys[0], "event").plain if keys else None


async def test_completion_sentence_kill_marker_and_inspector_after_a_kill(home):
    session = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(session, poll_interval=0.1)
    try:  # the first app quits with q on success (its worker stays for the next); on failure stop all
        async with app.run_test(size=SIZE) as pilot:
            status = app.query_one(StatusBar)
            first_pid, run_id, _ = await kill_in_step_3(pilot, session, home)
            await wait_for(pilot, lambda: status.pill == "completed", what="run completed", timeout=60)
            second_pid = session.supervisor.primary.pid
            sentence = (
                "run completed — 5 steps, 15 ledger rows, duplicates 0 · applied exactly once across 2 worker processes"
            )
            await wait_for(pilot, lambda: status.message == sentence, what=f"the sentence, not {status.message!r}")
            assert sentence in status._shown_text.plain
            await wait_for(pilot, lambda: marker_of(app) is not None, what="the kill marker")
            marker = marker_of(app)
            assert marker.startswith(f"── SIGKILL worker {first_pid} (w-"), marker
            assert "in flight: ACTIVITY_TASK_STARTED llm attempt 1 · step 3 · next event +" in marker, marker
            first_marker = marker
            await pilot.press("q")  # the worker keeps running; the next app adopts it
    except BaseException:
        await session.shutdown(stop_everything=True)
        raise

    out = run_cli("status", run_id, home=home, timeout=60)
    assert out.returncode == 0 and f"result         {sentence}" in out.stdout, out.stdout + out.stderr

    again = LabSession(home, AgentLoopWorkload())  # a new app: everything from the ledger and Temporal again
    app2 = CheckpointApp(again, poll_interval=0.1)
    try:
        async with app2.run_test(size=SIZE) as pilot:
            status = app2.query_one(StatusBar)
            await wait_for(pilot, lambda: status.message == sentence, what="the sentence after a restart")
            await wait_for(pilot, lambda: marker_of(app2) is not None, what="the kill marker after a restart")
            assert marker_of(app2) == first_marker
            timeline = app2.query_one("#timeline")
            await wait_for(pilot, lambda: timeline.row_count == 5, what="the steps")
            timeline.focus()
            await pilot.press("end", "up", "up")  # step 3, the killed one
            await pilot.press("enter")
            await wait_for(
                pilot, lambda: isinstance(app2.screen, StepScreen) and app2.screen.detail is not None, what="inspector"
            )
            detail = app2.screen.detail
            assert detail.step.step == 3 and len(detail.effects) == 3
            assert {a.worker_pid for a in detail.attempts if a.activity == "llm"} == {first_pid, second_pid}
            text = app2.screen.query_one("#step-detail").render().plain
            assert f"worker {second_pid}" in text and "claim applied" in text and "payload" in text
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app2.screen, StepScreen)
    finally:
        await again.shutdown(stop_everything=True)


def running_row(timeline) -> str | None:
    rows = [k for k in timeline.row_keys() if timeline.get_cell(k, "status").plain == "running"]
    return rows[-1] if rows else None


def cell(timeline, column: str) -> str:
    row = running_row(timeline)
    if row is None:
        return ""
    value = timeline.get_cell(row, column)
    return getattr(value, "plain", str(value))


async def test_heartbeat_age_of_a_silent_worker(home):
    """A real worker stopped in a model call (SIGSTOP, its supervisor's watchdog held off, as chaos's pause
    does): the running step's row shows the age of its last heartbeat from Temporal's pending activity,
    red once it is older than a live worker leaves it; then the worker resumes and the run completes. The
    run's heartbeat timeout is 20 s (red past 16 s): the 4 s in which a silent worker is red but its
    attempt has not timed out yet must be longer than the 1 s between two describes, whatever their
    phase, with room for a describe and a repaint that come late on a loaded machine (at 6 s the window
    was 1.2 s, at 10 s it was 2 s, and under make test each was missed once)."""
    session = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(session, poll_interval=0.1)
    pause = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None and app._booted.is_set(), what="boot")
            run_id = await start_run(home, session.client, 3, 1.5, heartbeat_timeout_s=20.0)
            session.view_run(run_id)
            timeline = app.query_one("#timeline")
            await wait_for(pilot, lambda: cell(timeline, "duration").startswith("♥"), what="a heartbeat age")
            assert "silent" not in cell(timeline, "mark")
            conn = connect(home.ledger)
            await wait_for(
                pilot,
                lambda: conn.execute(
                    "SELECT 1 FROM activity_log a JOIN steps s ON s.run_id = a.run_id AND s.step = a.step "
                    "WHERE a.run_id = ? AND a.activity = 'llm' AND s.status = 'running'",
                    (run_id,),
                ).fetchone(),
                what="a model call in flight",
            )
            pause = asyncio.create_task(pause_worker(home, 21.5))  # past the timeout, whatever its phase
            await wait_for(pilot, lambda: "silent · llm attempt" in cell(timeline, "mark"), what="silence", timeout=28)
            assert "red" in str(timeline.get_cell(running_row(timeline), "duration").style)
            assert (await pause).pid == session.supervisor.primary.pid  # the same worker, resumed
            status = app.query_one(StatusBar)
            await wait_for(pilot, lambda: status.pill == "completed", what="run completed", timeout=90)
            assert queries.effect_totals(conn, run_id).duplicates == 0
            await pilot.press("q")
    finally:
        if pause is not None and not pause.done():
            await pause  # SIGCONT before anything is stopped
        await session.shutdown(stop_everything=True)
