"""Assisted failover: help Temporal notice a dead worker at once instead of by timeouts, and measure
from durable timestamps how long the run took to resume.

The moment a worker is seen dead, its pending activity attempts (only those whose
last_worker_identity is the dead worker's) are failed by id so Temporal retries them at once instead
of waiting for the heartbeat timeout, and the sticky task queue of the runs it held is reset so the
next workflow task does not wait for the dead worker's sticky queue to time out.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.latency import measure
from checkpoint_tui.ledger.store import connect, record_worker_event, set_event_latency
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import Settings

log = logging.getLogger(__name__)
LATENCY_WAIT_S = 60.0
# Each run's assistance is bounded: with the dev server dead or restarting, an unbounded describe held
# the supervisor's loop (no respawn, no watchdog) for ~9 s; Temporal's timeouts cover what is skipped.
ASSIST_RUN_S = 2.0
# The retry policy's backoff spaces out attempts that fail; an attempt whose worker died did not fail,
# so its retry goes at once (Temporal honours a failure's next_retry_delay over the policy's interval).
# Not zero: a zero duration reads as unset on the wire.
RETRY_AT_ONCE = timedelta(milliseconds=1)
MAX_NAME = 128  # of an activity type or id recorded in an assist's detail
# Runs asked at once (describe, fail): a kill at load leaves hundreds to ask. bench/chaos_load.py at 256
# runs, next attempt p99: 0.50-1.04 s over 5 runs at 16 at once, 0.52-0.80 s over 3 at 64.
ASSIST_AT_ONCE = 64
LATE_ASSIST_S = 1.5  # the second pass, once a dead worker's last polls are surely closed at Temporal


async def failover_client(settings: Settings, address: str) -> Client | None:
    """The supervisor's client for assisted failover; None while Temporal cannot be reached (restarting):
    failover then falls back to Temporal's timeouts."""
    try:
        return await Client.connect(address, namespace=settings.namespace, **settings.connection.client_kwargs())
    except Exception as err:
        log.warning("supervisor: no Temporal client for assisted failover: %s", err)
        return None


async def assist(settings: Settings, client: Client, dead: WorkerProc, late: bool = False) -> None:
    """Fail the dead worker's pending activity attempts by id; reset the sticky queue of the runs it was
    holding. Only runs of our task queue: a shared ledger also lists other labs' runs. Every running run
    is asked, ASSIST_AT_ONCE at a time: a worker at load holds attempts of hundreds. `late`: the second
    pass (assist_late), recorded only if it failed an attempt."""
    conn = connect(settings.ledger)
    failed: list[str] = []
    reset: list[str] = []
    gate = asyncio.Semaphore(ASSIST_AT_ONCE)

    async def one(run_id: str) -> None:
        async with gate:
            try:
                async with asyncio.timeout(ASSIST_RUN_S):
                    await _assist_run(settings, client, conn, dead, run_id, failed, None if late else reset)
            except Exception as err:  # the activity may have completed meanwhile, or the server is away: fine
                log.info("assist for %s: %s", run_id, err)

    await asyncio.gather(*(one(run_id) for run_id in queries.running_runs(conn, settings.task_queue)))
    if late and not failed:
        return
    detail = json.dumps({"failed_activities": failed, "sticky_reset": reset, **({"late": True} if late else {})})
    record_worker_event(conn, "assist", dead.pid, dead.name, detail=detail)


async def assist_twice(settings: Settings, client: Client, dead: WorkerProc) -> None:
    """The first pass at once, then the late one (assist_late). Run beside the supervisor's loop, not in
    it: with the dev server dying under it (chaos kills both), a pass waits out its calls' bound, and the
    loop that notices the server's death and restarts it must not wait with it (a 4 s restart, measured,
    which every touched run's next attempt then waited out)."""
    await assist(settings, client, dead)
    await assist_late(settings, client, dead)


async def assist_late(settings: Settings, client: Client, dead: WorkerProc) -> None:
    """A dead worker's long polls can outlive it for a moment (at Temporal, or at the lab's hop between
    them): a task handed to one starts an attempt nobody runs, after the first pass asked. Asked again
    once, LATE_ASSIST_S later, such an attempt is failed by id too instead of waiting out its timeout."""
    await asyncio.sleep(LATE_ASSIST_S)
    await assist(settings, client, dead, late=True)


async def _assist_run(
    settings: Settings,
    client: Client,
    conn: Ledger,
    dead: WorkerProc,
    run_id: str,
    failed: list[str],
    reset: list[str] | None,
) -> None:
    """One run: fail the dead worker's pending attempts, reset its sticky queue if it held the run
    (`reset` None: failing only)."""
    desc = await client.get_workflow_handle(run_id).describe()
    for pa in desc.raw_description.pending_activities:
        if pa.last_worker_identity != dead.name:
            continue
        act = client.get_async_activity_handle(workflow_id=run_id, run_id=desc.run_id, activity_id=pa.activity_id)
        died = f"worker {dead.pid} died (seen by the supervisor)"
        await act.fail(ApplicationError(died, type="WorkerDied", next_retry_delay=RETRY_AT_ONCE))
        # the type and id are the workflow's to choose (a user's workflow: anything): stored cut, on one line
        name = scrub(f"{run_id}:{pa.activity_type.name[:MAX_NAME]}#{pa.activity_id[:MAX_NAME]}", 400)
        failed.append(" ".join(name.split()))
    if reset is None or not dead.user_cmd and not queries.last_touched_by(conn, run_id, dead.pid):
        return  # its sticky worker is alive: a reset would only cost a full replay
    await client.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(
            namespace=settings.namespace,
            execution=WorkflowExecution(workflow_id=run_id, run_id=desc.run_id),
        )
    )
    reset.append(run_id)


async def record_latency(
    settings: Settings, event_id: int, run_id: str, at: float, dead_pid: int, step: int | None
) -> None:
    """Once the run has moved on (or ended), write restart / next-step latency onto the kill's event."""
    conn = connect(settings.ledger)
    deadline = time.monotonic() + LATENCY_WAIT_S
    while time.monotonic() < deadline:
        lat = measure(conn, run_id, at, dead_pid, step)
        row = queries.run(conn, run_id)
        if lat.next_step_s is not None or (row is not None and row.status != "running"):
            set_event_latency(conn, event_id, lat.restart_s, lat.next_step_s)
            return
        await asyncio.sleep(0.1)
