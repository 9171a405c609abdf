"""Starting and cancelling runs (app side): the run row and its fault plan are written before the
workflow starts, so a worker never sees a run the ledger does not know."""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.history import workflow_status
from checkpoint_tui.core.stuck import StuckWatch
from checkpoint_tui.errors import Failed, Unavailable, UsageError
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.faults import FaultSpec, add_fault
from checkpoint_tui.ledger.rows import AGENT_LOOP
from checkpoint_tui.ledger.store import connect, create_run, finish_run, set_first_execution, transaction
from checkpoint_tui.loop_worker.shared import MAX_PACE, MAX_STEPS, WORKFLOW_NAME, AgentInput, ModelRef
from checkpoint_tui.model.offline import PROVIDER as OFFLINE
from checkpoint_tui.settings import Settings, check_model_url

TERMINAL = {"completed", "failed", "cancelled"}
WAIT_EVERY_S = 0.2
# A start that cannot reach Temporal is tried again this long: a server the lab is restarting (chaos's
# temporal-server kill) is back within seconds, and a run's start is not a verdict on it.
START_RETRY_S, START_RETRY_EVERY_S = 30.0, 0.5
ID_DRAWS = 16


WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)
"""A worker killed while it holds a workflow task stalls the run this long (Temporal's default is
    10 s). Short, but with room for a cold replacement to replay one continue-as-new segment: its
    first task must finish inside it or it times out although nothing died (bench/task_timeout.py
    measures that replay; docs/numbers.md)."""


def agent_input(
    run_id: str, steps: int, pace: float, model: ModelRef, heartbeat_s: float | None, retry_s: float | None
) -> AgentInput:
    inp = AgentInput(run_id, steps, pace, model)
    if heartbeat_s is not None:
        inp.heartbeat_timeout_s = heartbeat_s
    if retry_s is not None:
        inp.retry_initial_s = retry_s
    return inp


def check_run_shape(
    steps: int, pace: float, fault_plan: Sequence[FaultSpec] = (), model: ModelRef | None = None
) -> None:
    """The bounds of a run, checked before anything is written or started (UsageError: exit 2)."""
    if not 1 <= steps <= MAX_STEPS:
        raise UsageError(f"steps must be between 1 and {MAX_STEPS}, not {steps}")
    if not (math.isfinite(pace) and 0 <= pace <= MAX_PACE):
        raise UsageError(f"pace must be a number from 0 to {MAX_PACE:g}, not {pace}")
    if model is not None and model.url:
        check_model_url(model.url)
    for fault in fault_plan:
        if not 1 <= fault.step <= steps:
            raise UsageError(f"fault {fault.describe()} names step {fault.step}, outside the run's 1..{steps}")


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
    ledger_call: LedgerCall | None = None,
) -> str:
    """Write the run row and its fault plan, then start the workflow: a worker never sees a run the
    ledger does not know. `ledger_call` runs the ledger writes elsewhere (the app's ledger thread)."""
    model = model or ModelRef(settings.models.url, settings.models.model)
    check_run_shape(steps, pace, fault_plan, model)
    call = ledger_call or on_this_thread
    run_id = await call(record_run, settings, steps, pace, fault_plan, model_label(model))
    inp = agent_input(run_id, steps, pace, model, heartbeat_timeout_s, retry_initial_s)
    await launch(settings, client, run_id, WORKFLOW_NAME, [inp], task_timeout, call)
    return run_id


async def launch(
    settings: Settings,
    client: Client,
    run_id: str,
    workflow: str,
    args: Sequence[Any],
    task_timeout: timedelta | None = None,
    ledger_call: LedgerCall | None = None,
) -> WorkflowHandle:
    """Start the recorded run's workflow (its id is the run id) on the home's task queue; the run row
    says it never started if Temporal refused, else which execution is the chain's first."""
    call = ledger_call or on_this_thread
    deadline = time.monotonic() + START_RETRY_S
    retried = False
    while True:
        try:
            handle = await client.start_workflow(
                workflow,
                args=list(args),
                id=run_id,
                task_queue=settings.task_queue,
                task_timeout=task_timeout or WORKFLOW_TASK_TIMEOUT,
            )
            first = handle.result_run_id
            break
        except WorkflowAlreadyStartedError as taken:
            if not retried:  # not ours: the run id is new, a workflow of that id is someone else's
                await call(_mark_not_started, settings, run_id, RuntimeError("its workflow id is taken"))
                raise
            # the attempt before the server went away had started it: that start is this run's
            first = taken.run_id or (await client.get_workflow_handle(run_id).describe()).run_id
            handle = client.get_workflow_handle(run_id, run_id=first)
            break
        except Exception as err:
            if _unreachable(err) and time.monotonic() < deadline:  # the server restarting (chaos killed it)
                retried = True
                await asyncio.sleep(START_RETRY_EVERY_S)
                continue
            await call(_mark_not_started, settings, run_id, err)
            raise
    if first:
        await call(_mark_started, settings, run_id, first)
    return handle


def _unreachable(err: Exception) -> bool:
    """Temporal could not be reached for the start (the server down or restarting), not a refusal."""
    return isinstance(err, RPCError) and (
        err.status == RPCStatusCode.UNAVAILABLE or "connect error" in err.message or "transport error" in err.message
    )


LedgerCall = Callable[..., Awaitable[Any]]


async def on_this_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """A LedgerCall that runs the ledger write where the caller is (no app, no ledger thread)."""
    return fn(*args)


def model_label(model: ModelRef) -> str:
    """The provider column of a run of our loop: the model server and model, or the offline provider."""
    return f"{model.url} · {model.model or 'first listed model'}" if model.url else OFFLINE


def record_run(
    settings: Settings,
    steps: int,
    pace: float,
    fault_plan: Sequence[FaultSpec] = (),
    provider: str | None = None,
    kind: str = AGENT_LOOP,
    workflow_type: str | None = None,
) -> str:
    """Write a new run's row (and its fault plan) under a fresh run id: the one allocator of every
    workload. Run ids carry the second and 4 hex digits, so runs started together (`start --runs N`)
    may draw the same one: the insert is the lock, and a taken id is drawn again."""
    conn = connect(settings.ledger)
    for _ in range(ID_DRAWS):
        run_id = new_run_id()
        with transaction(conn):
            if not create_run(conn, run_id, steps, pace, provider, settings.task_queue, kind, workflow_type):
                continue
            for fault in fault_plan:
                add_fault(conn, run_id, fault)
        return run_id
    raise Failed(f"no free run id after {ID_DRAWS} draws (the ledger holds runs named after this very second)")


def _mark_started(settings: Settings, run_id: str, execution: str) -> None:
    set_first_execution(connect(settings.ledger), run_id, execution)


def _mark_not_started(settings: Settings, run_id: str, err: Exception) -> None:
    finish_run(connect(settings.ledger), run_id, "failed", f"could not start the workflow: {err}")


async def cancel_run(client: Client, run_id: str) -> None:
    await client.get_workflow_handle(run_id).cancel()


async def wait_for_run(
    settings: Settings,
    client: Client,
    run_id: str,
    progress: bool = False,
    timeout: float | None = None,
    patience_s: float = 0.0,
) -> str | None:
    """Poll until the run's workflow is closed; returns its Temporal status."""
    conn = connect(settings.ledger)
    shown = -1
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    watch = StuckWatch(client, run_id, patience_s)
    while deadline is None or loop.time() < deadline:
        try:
            row = queries.run(conn, run_id)
            done = queries.count_completed(conn, run_id)
        except Unavailable:  # the ledger restarting: the next round opens a new connection
            await asyncio.sleep(WAIT_EVERY_S)
            continue
        if row is None:
            raise LookupError(f"no run {run_id!r} in {settings.ledger_label}")
        if progress and done != shown:
            shown = done
            print(f"{run_id}: {done}/{row.total_steps} steps completed", file=sys.stderr, flush=True)
        if row.status in TERMINAL:
            with contextlib.suppress(RPCError):  # Temporal restarting: ask again on the next round
                status = await workflow_status(client, run_id)
                if status not in (None, "RUNNING"):
                    return status
        elif (stuck := await watch.check()) is not None:  # it cannot go on: said, not waited out
            return stuck
        await asyncio.sleep(WAIT_EVERY_S)
    try:
        return await workflow_status(client, run_id)
    except RPCError:
        return None
