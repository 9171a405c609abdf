"""One run-id allocator for every workload (core/runs.record_run): run ids carry the second and 4 hex
digits, so runs started together (`start --runs N`) may draw the same one; the insert into `runs` is
the lock, and a taken id is drawn again. A user's workflow once skipped the redraw and could collide
on the primary key."""

from __future__ import annotations

import asyncio
import json
from itertools import count

import pytest

from checkpoint_tui.core import runs
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.rows import WORKFLOW
from checkpoint_tui.ledger.schema import ensure_schema
from checkpoint_tui.ledger.store import connect, create_run
from checkpoint_tui.settings import Settings
from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow
from conftest import run_cli
from test_user_workflow_lab import lab_flags, stop_lab

WORKLOADS = {"agent-loop": AgentLoopWorkload(2, 0.0), "workflow": UserWorkflow("SendLines", {"count": 1})}
_homes = count()


@pytest.mark.parametrize("kind", list(WORKLOADS))
async def test_runs_started_together_draw_again_where_an_id_is_taken(kind, home, client, monkeypatch):
    """Eight runs at once while the clock's second and the random digits repeat: every draw but one of
    each id is taken, and each run still gets an id of its own, recorded as its workload's kind."""
    draws = iter([f"run-20261203-120000-{i // 3:04x}" for i in range(64)])  # each id drawn three times in a row
    monkeypatch.setattr(runs, "new_run_id", lambda: next(draws))
    workload = WORKLOADS[kind]
    run_ids = await asyncio.gather(*(workload.start(home, client) for _ in range(8)))
    try:
        assert len(set(run_ids)) == 8, run_ids
        rows = [queries.run(connect(home.ledger), r) for r in run_ids]
        assert all(row is not None and row.kind == kind for row in rows)
    finally:
        for run_id in run_ids:  # no worker polls this home's queue: end them rather than leave them open
            await client.get_workflow_handle(run_id).terminate("test over")


def test_a_taken_id_is_drawn_again_and_a_full_second_is_an_error(ledger_target, tmp_path, monkeypatch):
    """On both ledgers the insert (ON CONFLICT DO NOTHING) tells a taken id: sixteen draws, then one line."""
    home = Settings(home=tmp_path, ledger_url=ledger_target if ledger_target.startswith("postgres") else None)
    home.ensure_dirs()
    monkeypatch.setattr(runs, "new_run_id", lambda: "run-20261203-120000-abcd")
    assert runs.record_run(home, 1, 0.0) == "run-20261203-120000-abcd"
    with pytest.raises(Failed, match="no free run id after 16 draws"):
        runs.record_run(home, 1, 0.0, kind=WORKFLOW, workflow_type="SendLines")


def test_runs_of_an_older_ledger_are_read_as_their_workload(ledger_target):
    """A ledger written before runs named their kind marked a user's workflow only in `provider`
    (`workflow:TYPE`, or `foreign:TYPE` before that): schema version 5 moves it to `kind` and
    `workflow_type`, on SQLite and PostgreSQL alike; our loop's runs stay ours."""
    conn = connect(ledger_target)
    for run_id, provider in (("run-a", "workflow:SendLines"), ("run-b", "foreign:Old.Type"), ("run-c", "offline")):
        create_run(conn, run_id, 0, 0.0, provider, "q")  # as an older host wrote them: kind left to its default
    conn.execute("DELETE FROM schema_migrations WHERE version = 5")
    assert ensure_schema(conn) == 5
    rows = {r: queries.run(conn, r) for r in ("run-a", "run-b", "run-c")}
    assert [(rows[r].kind, rows[r].workflow_type, rows[r].provider) for r in ("run-a", "run-b", "run-c")] == [
        (WORKFLOW, "SendLines", None),
        (WORKFLOW, "Old.Type", None),
        ("agent-loop", None, "offline"),
    ]
    assert isinstance(UserWorkflow(None).of_run(rows["run-a"]), UserWorkflow)
    assert isinstance(UserWorkflow(None).of_run(rows["run-c"]), AgentLoopWorkload)


def test_start_runs_8_of_a_user_workflow_starts_eight_runs(session_root):
    """`--worker-cmd ... start --workflow SendLines --runs 8 --wait`: eight run ids, one per line, each a
    run of its own that completed."""
    home = session_root / f"uw-runs-{next(_homes)}"
    flags = lab_flags(home)
    try:
        out = run_cli(
            *flags,
            "start",
            "--workflow",
            "SendLines",
            "--input",
            json.dumps({"count": 1, "pace": 0}),
            "--runs",
            "8",
            "--wait",
            timeout=180,
        )
    finally:
        stop_lab(home)
    run_ids = out.stdout.split()
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert len(run_ids) == len(set(run_ids)) == 8 and "8/8 runs COMPLETED" in out.stderr
