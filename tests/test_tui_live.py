"""The app against the real dev server and real worker processes, driven by Pilot."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

import checkpoint_tui
from checkpoint_tui.core.session import LabSession
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.status import StatusBar
from checkpoint_tui.workloads import AgentLoopWorkload

SIZE = (180, 50)


async def wait_for(pilot, cond, timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


def cell_text(table, row_key: str, column: str) -> str:
    value = table.get_cell(row_key, column)
    return getattr(value, "plain", str(value))


async def start_run_via_keys(pilot, steps: int, pace: float) -> None:
    await pilot.press("n")
    await pilot.pause()
    steps_input = pilot.app.screen.query_one("#steps")
    steps_input.value = str(steps)
    pilot.app.screen.query_one("#pace").value = str(pace)
    await pilot.press("enter")


async def kill_in_step_3(pilot, session: LabSession, home) -> tuple[int, str, object]:
    """Boot, start a 5-step run with `n`, press `k` while step 3's model call is in flight; returns
    (the killed pid, the run id, a ledger connection)."""
    await wait_for(pilot, lambda: session.supervisor is not None, what="boot")
    first_pid = session.supervisor.primary.pid
    await start_run_via_keys(pilot, steps=5, pace=1.0)  # a 0.6 s model call to land the kill in
    await wait_for(pilot, lambda: session.run_id is not None, what="run start")
    run_id = session.run_id
    conn = connect(home.ledger)
    await wait_for(
        pilot,
        lambda: conn.execute(
            "SELECT 1 FROM activity_log WHERE run_id=? AND step=3 AND activity='llm'", (run_id,)
        ).fetchone(),
        what="step 3 model call in flight",
    )
    await pilot.press("k")
    return first_pid, run_id, conn


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_kill_from_the_keyboard(home, backend, request):
    if backend == "postgresql":
        home = replace(home, ledger_url=request.getfixturevalue("pg_url"))
    session = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(session, poll_interval=0.1)
    pills: list[str] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            status = app.query_one(StatusBar)
            app.watch(status, "pill", lambda value: pills.append(value), init=False)
            first_pid, run_id, conn = await kill_in_step_3(pilot, session, home)
            await wait_for(pilot, lambda: "worker-dead" in pills, what="worker-dead pill")
            await wait_for(
                pilot, lambda: status.pill == "running" and session.supervisor.primary.pid != first_pid, what="new pid"
            )
            await wait_for(pilot, lambda: status.pill == "completed", what="run completed", timeout=60)
            await wait_for(
                pilot,
                lambda: "WORKFLOW_EXECUTION_COMPLETED" in app.query_one("#history").names,
                what="history shows completion",
            )
            kill = conn.execute("SELECT * FROM worker_events WHERE event='kill' AND run_id=?", (run_id,)).fetchone()
            assert kill is not None and kill["pid"] == first_pid
            info = app.query_one("#ledger-info")  # counts repaint at most once a second: the last may lag
            await wait_for(pilot, lambda: "15 rows" in info.plain, what="the final count in the ledger pane", timeout=5)
            assert "duplicates 0" in info.plain, info.plain
            timeline = app.query_one("#timeline")
            killed_step = kill["step"]
            assert killed_step is not None, "the kill landed inside step 3's model call"
            assert "resumed here" in cell_text(timeline, str(killed_step), "mark")
            marked = [k for k in timeline.row_keys() if "resumed" in cell_text(timeline, k, "mark")]
            assert marked == [str(killed_step)]
            i_dead = pills.index("worker-dead")
            assert "running" in pills[i_dead:] or "completed" in pills[i_dead:]
            shown = status._shown_text.plain if status._shown_text else ""
            assert ("ledger postgresql://127.0.0.1:" in shown) == (backend == "postgresql"), shown
    finally:
        await session.shutdown(stop_everything=True)


async def test_quit_and_restart_adopts_the_same_worker(home):
    first = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(first, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: first.supervisor is not None, what="boot")
        await start_run_via_keys(pilot, steps=12, pace=0.3)
        await wait_for(pilot, lambda: first.run_id is not None, what="run start")
        conn = connect(home.db_path)
        await wait_for(
            pilot,
            lambda: (
                conn.execute(
                    "SELECT COUNT(*) FROM steps WHERE run_id=? AND status='completed'", (first.run_id,)
                ).fetchone()[0]
                >= 2
            ),
            what="two steps",
        )
        pid = first.supervisor.primary.pid
        run_id = first.run_id
        await pilot.press("q")
    second = LabSession(home, AgentLoopWorkload())
    app2 = CheckpointApp(second, poll_interval=0.1)
    try:
        async with app2.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: second.supervisor is not None, what="second boot")
            assert second.supervisor.primary.pid == pid  # adopted, not respawned
            assert second.run_id == run_id
            timeline = app2.query_one("#timeline")
            await wait_for(pilot, lambda: timeline.row_count >= 2, what="steps shown")

            def completed_are_shown() -> bool:  # the run goes on: a step may complete between two reads
                done = conn.execute(
                    "SELECT step FROM steps WHERE run_id=? AND status='completed' ORDER BY step", (run_id,)
                ).fetchall()
                return {str(r["step"]) for r in done} <= set(timeline.row_keys())

            await wait_for(pilot, completed_are_shown, what="every completed step shown")
            assert f"worker {pid}" in str(app2.query_one(StatusBar).render())
    finally:
        await second.shutdown(stop_everything=True)


async def test_the_app_loop_runs_no_sql_and_no_supervisor_tick(home, monkeypatch):
    """Textual's loop (this test's main thread) only awaits: every ledger statement the app's code runs
    is on another thread, and every supervisor tick is on the supervisor's thread."""
    from checkpoint_tui.ledger.backend import SqliteLedger
    from checkpoint_tui.ops.supervisor import Supervisor

    sql_threads: set[str] = set()
    tick_threads: set[str] = set()
    execute, tick = SqliteLedger.execute, Supervisor.tick
    package = str(Path(checkpoint_tui.__file__).parent)

    def recording_execute(self, sql, params=()):
        if sys._getframe(1).f_code.co_filename.startswith(package):  # the app's statements, not this test's
            sql_threads.add(threading.current_thread().name)
        return execute(self, sql, params)

    async def recording_tick(self):
        tick_threads.add(threading.current_thread().name)
        return await tick(self)

    monkeypatch.setattr(SqliteLedger, "execute", recording_execute)
    monkeypatch.setattr(Supervisor, "tick", recording_tick)
    session = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None, what="boot")
            first_pid = session.supervisor.primary.pid
            await start_run_via_keys(pilot, steps=4, pace=0.3)
            await wait_for(pilot, lambda: session.run_id is not None, what="run start")
            await pilot.press("k")
            await wait_for(
                pilot, lambda: session.supervisor.status.primary_pid not in (None, first_pid), what="respawn"
            )
            await pilot.press("r")  # the runs list reads the ledger too
            await wait_for(pilot, lambda: app.screen.query("#runs"), what="runs list")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.query_one(StatusBar).pill == "completed", what="run completed")
    finally:
        await session.shutdown(stop_everything=True)
    assert sql_threads and "MainThread" not in sql_threads, sql_threads
    assert tick_threads == {"supervisor"}, tick_threads
