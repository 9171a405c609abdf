"""A run that cannot make progress is said out loud (#38): a workflow whose every workflow task fails
ends `start --wait` with exit 1 within 30 s naming the failure, and `status` shows it; an activity that
raises before it claims anything is reported "never ran", not at risk. A real dev server and a real
worker command (tests/stuck_worker.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from conftest import queue_of, run_cli, worker_flags
from labs import WORKER_CMD
from test_user_workflow_lab import stop_lab

WORKER = Path(__file__).resolve().parent / "stuck_worker.py"


def flags(home: Path, address: str) -> list[str]:
    return worker_flags(home, WORKER, "q", address=address)


def test_a_workflow_task_that_keeps_failing_ends_start_wait_and_shows_in_status(session_root, temporal_address):
    home = session_root / "stuck"
    try:
        started = time.monotonic()
        out = run_cli(*flags(home, temporal_address), "start", "--workflow", "Stuck", "--wait", timeout=60)
        took = time.monotonic() - started
        run_id = out.stdout.split()[0]
        status = run_cli(*flags(home, temporal_address), "status", run_id, "--json")
        text = run_cli(*flags(home, temporal_address), "status", run_id)
    finally:
        stop_lab(home)
    assert out.returncode == 1 and took < 30, (took, out.stdout, out.stderr[-2000:])
    assert "its workflow task keeps failing" in out.stderr and "a sync call in the workflow sandbox" in out.stderr
    doc = json.loads(status.stdout)
    assert doc["workflow_status"] == "RUNNING" and doc["stuck_task"]["attempt"] >= 3, doc["stuck_task"]
    assert "a sync call in the workflow sandbox" in doc["stuck_task"]["message"]
    assert "no progress" in text.stdout and "UNHANDLED_FAILURE" in text.stdout


def test_start_wait_on_an_unregistered_workflow_says_so_and_a_completed_run_ends_at_its_count(
    session_root, temporal_address
):
    """#39: `start --wait` on a type the worker does not register ended nowhere (`0/0`, forever); a
    completed run's last line said `0/1` (the last poll's count) where status showed 3/3."""
    home = session_root / "unregistered"
    flags = [
        "--home",
        str(home),
        "--temporal-address",
        temporal_address,
        "--worker-cmd",
        WORKER_CMD,
        "--task-queue",
        queue_of("q", home),
    ]
    try:
        started = time.monotonic()
        nope = run_cli(*flags, "start", "--workflow", "Nope", "--wait", timeout=60)
        took = time.monotonic() - started
        done = run_cli(*flags, "start", "--workflow", "SendLines", "--input", '{"count": 3, "pace": 0}', "--wait")
    finally:
        stop_lab(home)
    assert nope.returncode == 1 and took < 30 and "Workflow class Nope is not registered" in nope.stderr, nope.stderr
    assert done.returncode == 0 and done.stderr.strip().splitlines()[-1].endswith(
        "3/3 activities completed · re-executed 0"
    ), done.stderr


def test_an_activity_that_fails_before_its_body_never_ran_and_is_not_at_risk(session_root, temporal_address):
    home = session_root / "never-runs"
    try:
        out = run_cli(*flags(home, temporal_address), "start", "--workflow", "NeverRuns", "--wait", timeout=60)
        run_id = out.stdout.split()[0]
        status = run_cli(*flags(home, temporal_address), "status", run_id, "--json")
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stderr[-2000:]  # the workflow failed
    audit = json.loads(status.stdout)["audit"]
    assert audit["at_risk"] == [] and len(audit["never_ran"]) == 1, audit
    (never,) = audit["never_ran"]
    assert never["why"] == "fails before any claim" and never["attempt"] == 3
    assert "never ran" in json.loads(status.stdout)["completion"]


async def test_the_app_says_a_run_cannot_make_progress(session_root, temporal_address):
    from checkpoint_tui.core.session import LabSession
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.tui.app import CheckpointApp
    from checkpoint_tui.tui.panes.status import StatusBar
    from checkpoint_tui.workloads import UserWorkflow
    from test_tui_live import SIZE, wait_for

    home = session_root / "stuck-app"
    settings = Settings(
        home=home,
        temporal_address=temporal_address,
        task_queue_name=queue_of("q", home),
        worker_cmd=(sys.executable, str(WORKER)),
        worker_cwd=WORKER.parent,
    )
    settings.ensure_dirs()
    session = LabSession(settings, UserWorkflow("Stuck"))
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None, what="boot")
            await pilot.press("n")
            status = app.query_one(StatusBar)
            await wait_for(pilot, lambda: status.pill == "stuck", timeout=30, what="the stuck pill")
            assert "no progress: its workflow task keeps failing" in status.message
            assert "a sync call in the workflow sandbox" in status.message
    finally:
        await session.shutdown(stop_everything=True)
        stop_lab(home)


def test_chaos_on_a_workflow_that_cannot_start_says_so_in_seconds(session_root):
    """#39: chaos on an unregistered workflow type waited 122 s to say "stopped making progress"."""
    home = session_root / "chaos-unregistered"
    flags = ["--home", str(home), "--worker-cmd", WORKER_CMD, "--task-queue", queue_of("q", home)]
    try:
        started = time.monotonic()
        out = run_cli(*flags, "chaos", "--seed", "1", "--kills", "3", "--workflow", "Nope", timeout=120)
        took = time.monotonic() - started
    finally:
        stop_lab(home)
    assert out.returncode == 1 and took < 40, (took, out.stdout[-2000:], out.stderr[-2000:])
    assert "its workflow task keeps failing" in out.stderr and "Nope is not registered" in out.stderr
