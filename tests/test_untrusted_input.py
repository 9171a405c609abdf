"""Workflow input is untrusted: anyone who can reach the task queue can start an AgentLoop. The
worker refuses what the ledger did not create, writes nothing outside the artifacts root, and never
sends its model key to a URL named in workflow input. Real dev server, real worker processes, both
ledger backends."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.shared import UNTRUSTED_INPUT, WORKFLOW_NAME, AgentInput, ModelRef
from conftest import supervised
from model_server import StandIn

KEY = "sk-test-worker-key-not-real-0000"


def _untrusted_type(err: BaseException) -> str | None:
    """The first ApplicationError type in the failure's cause chain."""
    while err is not None:
        if isinstance(err, ApplicationError) and err.type:
            return err.type
        err = err.cause if hasattr(err, "cause") else err.__cause__
    return None


async def _start_foreign(client, settings, workflow_id: str, inp: AgentInput):
    return await client.start_workflow(WORKFLOW_NAME, inp, id=workflow_id, task_queue=settings.task_queue)


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request, home):
    if request.param == "postgresql":
        return replace(home, ledger_url=request.getfixturevalue("pg_url"))
    return home


async def test_foreign_runs_are_refused_and_write_nothing(settings, temporal_address, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECKPOINT_API_KEY", KEY)  # the worker's own key, in its environment
    outside = tmp_path / f"evil-{uuid.uuid4().hex[:6]}"
    cases = {
        "not in this ledger": ("run-20260101-000000-beef", "run-20260101-000000-beef"),
        "absolute path": (str(outside), str(outside)),
        "dot-dot": ("../../evil", "../../evil"),
        "run id is not the workflow id": ("run-20260101-000000-cafe", None),
    }
    async with supervised(settings, temporal_address) as (_, client):
        victim = await start_run(settings, client, steps=2, pace=0)  # a real run whose artifacts a forgery targets
        assert await wait_for_run(settings, client, victim, timeout=60) == "COMPLETED"
        before = sorted(p.relative_to(settings.artifacts_dir) for p in settings.artifacts_dir.rglob("*"))
        for name, (workflow_id, run_id) in cases.items():
            inp = AgentInput(run_id or victim, 3, 0.0)  # the last case names the victim's run from another id
            handle = await _start_foreign(
                client, settings, f"{workflow_id}-{uuid.uuid4().hex[:4]}" if run_id is None else workflow_id, inp
            )
            with pytest.raises(WorkflowFailureError) as info:
                await handle.result()
            assert _untrusted_type(info.value) == UNTRUSTED_INPUT, (name, info.value)
        after = sorted(p.relative_to(settings.artifacts_dir) for p in settings.artifacts_dir.rglob("*"))
        assert after == before  # no file added or replaced under the root ...
        assert not outside.exists() and not (settings.home.parent.parent / "evil").exists()  # ... nor outside it
        conn = connect(settings.ledger)
        assert queries.run(conn, "run-20260101-000000-beef") is None
        assert queries.effect_totals(conn, victim).rows == 6 and queries.note_totals(conn, victim).rows == 2


async def test_the_model_key_goes_only_to_the_configured_url(settings, temporal_address, monkeypatch):
    """A workflow that reuses a closed run's id (Temporal allows it) passes the guard, but the URL in its
    input is not the one the worker was configured with: the request goes out without the key."""
    monkeypatch.setenv("CHECKPOINT_API_KEY", KEY)
    attacker = StandIn().start()
    try:
        attacker.reply('{"action": "note", "args": {"text": "hi"}, "thought": "t"}')
        async with supervised(settings, temporal_address) as (_, client):
            run_id = await start_run(settings, client, steps=1, pace=0)
            assert await wait_for_run(settings, client, run_id, timeout=60) == "COMPLETED"
            inp = AgentInput(run_id, 1, 0.0, ModelRef(attacker.url, None))
            handle = await _start_foreign(client, settings, run_id, inp)
            await handle.result()  # step 1's effects exist and are stamped: all skipped
        assert attacker.requests, "the worker did ask the URL from the workflow input"
        assert all(not r["auth"] for r in attacker.requests), "the worker's key went to a URL from history"
        snap_conn = connect(settings.ledger)
        assert queries.effect_totals(snap_conn, run_id).duplicates == 0
        assert queries.note_totals(snap_conn, run_id).rows == 1
    finally:
        attacker.stop()


def test_run_ids_the_worker_accepts_are_the_ones_start_makes():
    from checkpoint_tui.core.runs import new_run_id
    from checkpoint_tui.loop_worker.shared import RUN_ID_PATTERN

    assert all(RUN_ID_PATTERN.fullmatch(new_run_id()) for _ in range(50))
    for bad in ("/tmp/x", "../x", "run-1", "run-20260101-000000-BEEF", "run-20260101-000000-beef/..", ""):
        assert not RUN_ID_PATTERN.fullmatch(bad)
