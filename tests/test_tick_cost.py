"""The app's refresh costs the same late in a long run as early: per-poll ledger statements and rows
do not grow with the run's length, and Temporal requests stay bounded while a run is live."""

from __future__ import annotations

import asyncio
import time

import pytest

from checkpoint_tui.core.session import LabSession
from checkpoint_tui.core.tick_stats import TickStats
from checkpoint_tui.ledger.backend import open_ledger
from checkpoint_tui.ledger.effects import KINDS, EffectSpec, apply_effect_once
from checkpoint_tui.ledger.store import close_all, connect, create_run, touch_step
from checkpoint_tui.settings import Settings
from checkpoint_tui.workloads import AgentLoopWorkload


def seed(settings: Settings, run_id: str, steps: int) -> None:
    """A run of `steps` completed steps, each with its three claimed and stamped effects."""
    conn = connect(settings.ledger)
    create_run(conn, run_id, steps + 10, 0.0, "offline", settings.task_queue)
    for step in range(1, steps + 1):
        add_step(conn, run_id, step)


def add_step(conn, run_id: str, step: int) -> None:
    touch_step(conn, run_id, step, "mark_step_completed", 1, 4242, "completed", ended_at=time.time())
    for kind in KINDS:
        apply_effect_once(conn, EffectSpec(run_id, step, kind, "x", 1, 4242, run_id), lambda spec, rec: None)


def live_poll_cost(settings: Settings, run_id: str, steps: int) -> TickStats:
    """A full first poll, then one step more, then the poll a live app makes: what did it cost?"""
    session = LabSession(settings, AgentLoopWorkload())
    session._read(run_id, None, True, TickStats())
    time.sleep(0.05)  # the seeded rows are all older than `since`
    since = time.time()
    writer = open_ledger(settings.ledger)  # another connection, as a worker's is (data_version moves)
    add_step(writer, run_id, steps + 1)
    writer.close()
    stats = TickStats()
    snap, *_ = session._read(run_id, since, False, stats)
    assert [s.step for s in snap.steps] == [steps + 1] and snap.completed_steps == steps + 1
    return stats


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_per_poll_ledger_work_does_not_grow_with_the_run(tmp_path, backend, request):
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    costs = {}
    long = 2000 if backend == "sqlite" else 400  # seeded through the claim protocol: ~6 ms a step on PostgreSQL
    for steps in (20, long):
        settings = Settings(home=tmp_path / f"h{steps}", ledger_url=url)
        settings.ensure_dirs()
        run_id = f"run-20260101-000000-{steps:04x}"
        seed(settings, run_id, steps)
        costs[steps] = live_poll_cost(settings, run_id, steps)
        close_all()
    assert costs[20].sql == costs[long].sql, costs
    assert costs[20].rows == costs[long].rows, costs  # no list of every step, no whole-table read


async def test_temporal_requests_per_poll_stay_bounded_while_live(home: Settings):
    """A live run: the history follower waits a second between long polls once caught up, and one
    describe (status + the in-flight activity's heartbeat) is made at most once a second while a step
    runs, so the start and the end of the run cost alike: ~2 requests a second of wall time (2.5 with the
    hop to the next execution at a continue-as-new). Per poll it is 0-2, or 3 when a poll is slow on a
    loaded machine: the rate is what is bounded."""
    session = LabSession(home, AgentLoopWorkload())
    try:
        await session.boot()
        run_id = await session.new_run(40, 0.1)
        per_poll: dict[str, list[int]] = {"early": [], "late": []}
        spans: dict[str, list[float]] = {"early": [], "late": []}  # when each phase's polls ran
        conn = connect(home.ledger)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            view = await session.poll()
            done = view.snapshot.completed_steps
            phase = "early" if 3 <= done <= 12 else "late" if 28 <= done <= 37 else None
            if phase is not None:
                per_poll[phase].append(view.stats.temporal)
                spans[phase].append(time.monotonic())
            if done >= 38:
                break
            await asyncio.sleep(0.5)
        assert len(per_poll["early"]) >= 4 and len(per_poll["late"]) >= 4, per_poll
        for name, phase in per_poll.items():
            seconds = spans[name][-1] - spans[name][0] + 0.5  # the first poll's requests began ~a poll earlier
            # 1 history long poll + 1 describe a second, and a hop to the next execution at a continue-as-new
            # (the allowance of 2: a hop and a long poll woken by a step as the phase's window closes;
            # a loaded machine stretched a 5-poll window's figure to 7 requests in 2.55 s)
            assert sum(phase) <= 2 * seconds + 2 and max(phase) <= 3, (name, per_poll, seconds)
        assert conn is not None and run_id
    finally:
        await session.shutdown(stop_everything=True)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_per_poll_ledger_work_does_not_grow_with_finished_runs(tmp_path, backend, request):
    """Many runs (#29): the live poll of one run costs the same statements and rows with 500 finished
    runs in the ledger as with one: nothing per refresh reads every run."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    costs = {}
    for finished in (1, 500):
        settings = Settings(home=tmp_path / f"runs{finished}", ledger_url=url)
        settings.ensure_dirs()
        conn = connect(settings.ledger)
        for n in range(finished):  # finished runs of one step each, their effects claimed and stamped
            old = f"run-20250101-{finished:06d}-{n:04x}"
            create_run(conn, old, 1, 0.0, "offline", settings.task_queue)
            add_step(conn, old, 1)
            conn.execute("UPDATE runs SET status = 'completed', ended_at = ? WHERE run_id = ?", (time.time(), old))
        live = f"run-20260101-000000-{finished:04x}"
        seed(settings, live, 5)
        costs[finished] = live_poll_cost(settings, live, 5)
        close_all()
    assert costs[1].sql == costs[500].sql, costs
    assert costs[1].rows == costs[500].rows, costs


async def test_the_runs_list_shows_which_runs_are_live_and_each_run_s_rows_and_duplicates(tmp_path):
    """#29's runs list: many runs, which are live, which did not complete, ledger rows and duplicates
    per run (read when the list opens, not on every refresh)."""
    from textual.app import App

    from checkpoint_tui.ledger.queries import recent_runs
    from checkpoint_tui.ledger.store import finish_run
    from checkpoint_tui.tui.screens import RunsScreen

    settings = Settings(home=tmp_path / "h")
    settings.ensure_dirs()
    seed(settings, "run-20261202-000001-aaaa", 2)
    seed(settings, "run-20261202-000002-bbbb", 1)
    conn = connect(settings.ledger)
    finish_run(conn, "run-20261202-000002-bbbb", "failed", "boom")
    runs = {r.run_id: r for r in recent_runs(conn)}
    assert (runs["run-20261202-000001-aaaa"].rows, runs["run-20261202-000001-aaaa"].duplicates) == (6, 0)
    assert (runs["run-20261202-000002-bbbb"].rows, runs["run-20261202-000002-bbbb"].status) == (3, "failed")

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(RunsScreen(list(runs.values())))

    app = Host()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        text = "\n".join(str(w.render()) for w in app.screen.query("Label"))
        assert "Runs (2: 1 live, 1 not completed)" in text
        options = app.screen.query_one("#runs")
        shown = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("6 rows · duplicates 0" in s and "running" in s for s in shown), shown
    close_all()
