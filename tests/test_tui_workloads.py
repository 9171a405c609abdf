"""The app's panes for both workloads (the `lab` fixture: our loop, and a user's workflow on the example
project's worker): `n` starts a run of the workload the app was opened with, the timeline fills with
its units, the ledger pane counts its effects by SQL, the inspector opens a unit with the effects it
claimed, and the status bar ends on the run's one verdict; a user's workers get their task queue's backlog
read from Temporal. Real dev server, real worker processes."""

from __future__ import annotations

import sys

from checkpoint_tui.core.session import LabSession
from checkpoint_tui.settings import Settings
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.backlog import read_backlog
from checkpoint_tui.tui.panes.status import StatusBar
from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow
from conftest import queue_of
from labs import EXAMPLE
from test_tui_live import SIZE, cell_text, start_run_via_keys, wait_for

UNITS = 4


async def test_the_panes_show_a_run_of_each_workload_to_its_verdict(lab, session_root, temporal_address):
    home = lab.home(session_root, "app")
    if lab.kind == "workflow":
        settings = Settings(
            home=home,
            temporal_address=temporal_address,
            task_queue_name=queue_of("uw", home),
            worker_cmd=(sys.executable, str(EXAMPLE)),
            worker_cwd=EXAMPLE.parent,
        )
        workload = UserWorkflow("SendLines", {"count": UNITS, "pace": 0.2})
    else:
        settings, workload = Settings(home=home, temporal_address=temporal_address), AgentLoopWorkload()
    settings.ensure_dirs()
    session = LabSession(settings, workload, backlog=read_backlog)  # as run_app makes it
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None, what="boot")
            if workload.asks_shape:  # our loop: the dialog asks steps and pace
                await start_run_via_keys(pilot, steps=UNITS, pace=0.2)
            else:  # a user's workflow: its type and input were given when the app was opened
                await pilot.press("n")
            await wait_for(pilot, lambda: session.run_id is not None, what="the run started")
            run_id = session.run_id
            timeline, info = app.query_one("#timeline"), app.query_one("#ledger-info")
            done = lambda: (  # noqa: E731
                timeline.row_count == UNITS
                and all(cell_text(timeline, str(i), "status") == "completed" for i in range(1, UNITS + 1))
            )
            await wait_for(pilot, done, timeout=90, what=f"{UNITS} {workload.units} completed in the timeline")
            await wait_for(pilot, lambda: "duplicates 0" in info.plain, what="the ledger pane's count")
            status = app.query_one(StatusBar)
            await wait_for(pilot, lambda: "run completed" in status.message, timeout=30, what="the verdict")
            assert "NOT exactly once" not in status.message, status.message
            detail = await session.step_detail(run_id, 1)  # what the inspector shows of the first unit
            assert detail is not None and detail.effects and all(e.applied_at for e in detail.effects)
            workers_info = app.query_one("#workers-info")
            if lab.kind == "workflow":  # described by the sampler (report_stats) at most every 2 s
                await wait_for(pilot, lambda: workers_info.plain.startswith("backlog "), what="the backlog line")
            else:  # our own worker: no backlog read, no line
                assert not workers_info.display and "backlog" not in status.text.plain
    finally:
        await session.shutdown(stop_everything=True)
        lab.stop(home)
