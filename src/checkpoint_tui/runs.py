"""Starting and cancelling runs (app side): the run row and its fault plan are written before the
workflow starts, so a worker never sees a run the ledger does not know."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import time
from collections.abc import Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.service import RPCError

from checkpoint_tui.config import Settings
from checkpoint_tui.engine.shared import WORKFLOW_NAME, AgentInput, ModelRef
from checkpoint_tui.ledger.faults import FaultSpec, add_fault
from checkpoint_tui.ledger.store import connect, create_run, finish_run, transaction
from checkpoint_tui.model.offline import PROVIDER as OFFLINE
from checkpoint_tui.snapshot import workflow_status

MAX_STEPS = 100_000
TERMINAL = {"completed", "failed", "cancelled"}


WORKFLOW_TASK_TIMEOUT = timedelta(seconds=3)
"""A worker killed while it holds a workflow task stalls the run this long (Temporal's default is
    10 s). Short, but with room for a cold replacement to replay one continue-as-new segment
    (<= 25 steps, ~0.4-0.8 s measured) on a busy 2-core machine."""


def agent_input(
    run_id: str, steps: int, pace: float, model: ModelRef, heartbeat_s: float | None, retry_s: float | None
) -> AgentInput:
    inp = AgentInput(run_id, steps, pace, model)
    if heartbeat_s is not None:
        inp.heartbeat_timeout_s = heartbeat_s
    if retry_s is not None:
        inp.retry_initial_s = retry_s
    return inp


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


async def start_run(
    settings: Settings,
    client: Client,
    steps: int,
    pace: float = 1.0,
    fault_plan: Sequence[FaultSpec] = (),
    model: ModelRef | None = None,
    heartbeat_timeout_s: float | None = None,
    retry_initial_s: float | None = None,
    task_timeout: timedelta | None = None,
) -> str:
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"steps must be between 1 and {MAX_STEPS}")
    if pace < 0:
        raise ValueError("pace must be >= 0")
    run_id = new_run_id()
    model = model or ModelRef(settings.model_url, settings.model)
    provider = f"{model.url} · {model.model or 'first listed model'}" if model.url else OFFLINE
    conn = connect(settings.ledger)
    with transaction(conn):
        create_run(conn, run_id, steps, pace, provider, settings.task_queue)
        for fault in fault_plan:
            add_fault(conn, run_id, fault)
    try:
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            agent_input(run_id, steps, pace, model, heartbeat_timeout_s, retry_initial_s),
            id=run_id,
            task_queue=settings.task_queue,
            task_timeout=task_timeout or WORKFLOW_TASK_TIMEOUT,
        )
    except Exception as err:
        finish_run(conn, run_id, "failed", f"could not start the workflow: {err}")
        raise
    # The first execution of the continue-as-new chain: where a history reader starts.
    conn.execute("UPDATE runs SET first_execution = ? WHERE run_id = ?", (handle.result_run_id, run_id))
    return run_id


async def cancel_run(client: Client, run_id: str) -> None:
    await client.get_workflow_handle(run_id).cancel()


async def wait_for_run(
    settings: Settings, client: Client, run_id: str, progress: bool = False, timeout: float | None = None
) -> str | None:
    """Poll until the run's workflow is closed; returns its Temporal status."""
    conn = connect(settings.ledger)
    shown = -1
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while deadline is None or loop.time() < deadline:
        row = conn.execute("SELECT status, total_steps FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        done = conn.execute(
            "SELECT COUNT(*) FROM steps WHERE run_id = ? AND status = 'completed'", (run_id,)
        ).fetchone()[0]
        if progress and done != shown:
            shown = done
            print(f"{run_id}: {done}/{row['total_steps']} steps completed", file=sys.stderr, flush=True)
        if row["status"] in TERMINAL:
            with contextlib.suppress(RPCError):  # Temporal restarting: ask again on the next round
                status = await workflow_status(client, run_id)
                if status not in (None, "RUNNING"):
                    return status
        await asyncio.sleep(0.2)
    try:
        return await workflow_status(client, run_id)
    except RPCError:
        return None
