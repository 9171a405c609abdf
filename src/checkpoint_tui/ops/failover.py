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
from collections.abc import Sequence
from datetime import timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.latency import measure
from checkpoint_tui.ledger.store import connect, record_worker_event, set_event_latency
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.ops.loop_thread import Background
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
# runs, next attempt over 3 runs each: seed 3 p99 0.52-0.53 s at 64 at once, 0.61-0.99 s at 16; seed 2
# p50 0.50-0.62 s at 16 against 0.96-1.52 s at 64, but its p99 over 1 s either way (1.10-1.40, 1.50-1.77).
ASSIST_AT_ONCE = 64
LISTED = 1_000  # runs named per list of an assist event (its counts are whole): ~30 KiB at most
LATE_ASSIST_S = 1.5  # the second pass, once a dead worker's last polls are surely closed at Temporal
# Chaos's hop fails a dead worker's attempts by task token (proof/nemeses/handed.py): the supervisor then
# resets sticky queues only. Failing by id too would fail whatever attempt is current, and once the hop's
# failure has started the retry on a live worker, that is the live one's.
STICKY_ONLY = "sticky-only"
# a retry waiting for a worker, or a paused one, keeps its last attempt's identity: not a dead worker's to fail
NOT_RUNNING = (
    PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED,
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
)


async def failover_client(settings: Settings, address: str) -> Client | None:
    """The supervisor's client for assisted failover; None while Temporal cannot be reached (restarting):
    failover then falls back to Temporal's timeouts."""
    try:
        return await Client.connect(address, namespace=settings.namespace, **settings.connection.client_kwargs())
    except Exception as err:
        log.warning("supervisor: no Temporal client for assisted failover: %s", err)
        return None


async def assist(
    settings: Settings, client: Client, dead: Sequence[WorkerProc], late: bool = False, fail: bool = True
) -> None:
    """Fail the dead workers' pending activity attempts by id; reset the sticky queue of the runs they
    were holding. Only runs of our task queue: a shared ledger also lists other labs' runs. Every running
    run is asked once for all of them, ASSIST_AT_ONCE at a time: a worker at load holds attempts of
    hundreds. Each dead worker gets its own assist event: the attempts failed for it (by the identity
    that ran them), the runs whose sticky queue was reset for it, and the pass's own figures (`asked`,
    `answered`, `pass_s`, `with`: the other workers of the same pass). `late`: the second pass
    (assist_late), recorded only for a worker it failed an attempt of. `fail` False: sticky queues only."""
    workers = list({w.name: w for w in dead}.values())  # a worker named twice is asked for once
    conn = connect(settings.ledger)
    failed: dict[str, list[str]] = {w.name: [] for w in workers}
    reset: dict[str, list[str]] = {w.name: [] for w in workers}
    gate, answered = asyncio.Semaphore(ASSIST_AT_ONCE), []

    async def one(run_id: str) -> None:
        async with gate:
            try:
                async with asyncio.timeout(ASSIST_RUN_S):
                    failing, resetting = failed if fail else None, None if late else reset
                    await _assist_run(settings, client, conn, workers, run_id, failing, resetting)
                answered.append(run_id)
            except Exception as err:  # the activity may have completed meanwhile, or the server is away: fine
                log.info("assist for %s: %s", run_id, err)

    # A pass at load takes a second and more (describes at 0.25 s each, 64 at once, 256 runs): the runs
    # most likely to hold a dead worker's attempt are asked first (of one pass at 256 runs, 16 of the 17
    # that held one were among the first 30 asked so; in the ledger's order they were spread over all)
    began, runs = time.monotonic(), queries.running_runs(conn, settings.task_queue, busiest_first=True)
    await asyncio.gather(*(one(run_id) for run_id in runs))
    took = {"asked": len(runs), "answered": len(answered), "pass_s": round(time.monotonic() - began, 3)}
    for w in workers:
        if late and not failed[w.name]:
            continue
        shared = {"with": [o.pid for o in workers if o is not w]} if len(workers) > 1 else {}
        lists = {"failed_activities": failed[w.name], "sticky_reset": reset[w.name]}  # cut: a row stays readable
        said = {**{k: v[:LISTED] for k, v in lists.items()}, **{f"{k}_count": len(v) for k, v in lists.items()}}
        said |= {**took, **shared}
        record_worker_event(conn, "assist", w.pid, w.name, detail=json.dumps({**said, "late": True} if late else said))


class Failover:
    """Assisted failover for the supervisor, beside its loop, not in it: with the dev server dying under a
    pass (chaos kills both), the pass waits out its calls' bound, and the loop that restarts the server
    must not wait with it (a 4 s restart, measured). One first pass at a time, over every worker seen
    dead since the last began, each followed by its late pass (which may overlap the next first pass).
    A first pass per death asked every running run once per dead worker: at load, with the dev server
    killed beside a worker (chaos), the replacements that died for want of it each sent 256 describes
    and sticky resets into the restarted server, and the pass that mattered waited behind them (first
    pass 1.0 s, next attempt p99 0.95-2.01 s over eight runs, bench/chaos_load.py seed 2)."""

    def __init__(self, settings: Settings, client: Client, tasks: Background, assist: bool | str = True) -> None:
        self.settings, self.client, self.tasks = settings, client, tasks
        self.fail = assist is True  # STICKY_ONLY: the hop fails the attempts
        self._waiting: list[WorkerProc] = []
        self._batch: list[WorkerProc] = []  # the first pass in flight
        self._passing = False

    def dead(self, worker: WorkerProc) -> None:
        if any(w.name == worker.name for w in (*self._waiting, *self._batch)):
            return  # seen twice (a takeover's and a death's record of one process): asked for once
        self._waiting.append(worker)
        if not self._passing:
            self._passing = True
            self.tasks.start(self._passes())

    async def _passes(self) -> None:
        try:
            while self._waiting:
                self._batch, self._waiting = self._waiting, []
                try:
                    await assist(self.settings, self.client, self._batch, fail=self.fail)
                except Exception:  # the ledger away (locked, its server down): the late pass tries again
                    log.exception("assisted failover: a pass failed")
                if self.fail:  # the late pass only fails attempts
                    self.tasks.start(assist_late(self.settings, self.client, self._batch))  # not holding the next
        finally:
            self._batch, self._passing = [], False


async def assist_late(settings: Settings, client: Client, dead: Sequence[WorkerProc]) -> None:
    """A dead worker's long polls can outlive it for a moment (at Temporal, or at the lab's hop between
    them): a task handed to one starts an attempt nobody runs, after the first pass asked. Asked again
    once, LATE_ASSIST_S later, such an attempt is failed by id too instead of waiting out its timeout."""
    await asyncio.sleep(LATE_ASSIST_S)
    try:
        await assist(settings, client, dead, late=True)
    except Exception:
        log.exception("assisted failover: a late pass failed")


async def _assist_run(
    settings: Settings,
    client: Client,
    conn: Ledger,
    dead: Sequence[WorkerProc],
    run_id: str,
    failed: dict[str, list[str]] | None,
    reset: dict[str, list[str]] | None,
) -> None:
    """One run: fail the dead workers' pending attempts (`failed` None: none), reset its sticky queue if
    one of them held the run (`reset` None: failing only)."""
    desc = await client.get_workflow_handle(run_id).describe()
    by_name, held = {w.name: w for w in dead}, []
    for pa in desc.raw_description.pending_activities:
        # a retry waiting for a worker (or a paused one) keeps its last attempt's identity: failed again, it
        # would only add an attempt
        if failed is None or (w := by_name.get(pa.last_worker_identity)) is None or pa.state in NOT_RUNNING:
            continue
        act = client.get_async_activity_handle(workflow_id=run_id, run_id=desc.run_id, activity_id=pa.activity_id)
        died = f"worker {w.pid} died (seen by the supervisor)"
        await act.fail(ApplicationError(died, type="WorkerDied", next_retry_delay=RETRY_AT_ONCE))
        # the type and id are the workflow's to choose (a user's workflow: anything): stored cut, on one line
        name = scrub(f"{run_id}:{pa.activity_type.name[:MAX_NAME]}#{pa.activity_id[:MAX_NAME]}", 400)
        failed[w.name].append(" ".join(name.split()))
        held.append(w)
    if reset is None:
        return
    # its sticky worker alive (our loop's steps say which pid held it), a reset would only cost a replay
    holder = next((w for w in [*held, *dead] if w.user_cmd or queries.last_touched_by(conn, run_id, w.pid)), None)
    if holder is None:
        return
    await client.workflow_service.reset_sticky_task_queue(
        ResetStickyTaskQueueRequest(
            namespace=settings.namespace,
            execution=WorkflowExecution(workflow_id=run_id, run_id=desc.run_id),
        )
    )
    reset[holder.name].append(run_id)


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
