"""Whether a user's worker command is polling: the identities Temporal lists on its task queue, a wait
until a worker's own identity is among them (its startup's death, or one that never polls, reported
in one line), and a wait until another supervisor has recorded a fleet slot's worker."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.exit_reason import startup_death
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.ops.wrappers import follow
from checkpoint_tui.settings import Settings

POLL_EVERY_S = 0.1


async def pollers(client: Client, settings: Settings, queue: str | None = None) -> set[str]:
    """Identities Temporal lists as polling the task queue (workflow and activity tasks; default the
    workflow's). A worker that died lingers in the list for a while: use it to see a new identity
    arrive, not an old one leave."""
    found: set[str] = set()
    for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=settings.namespace,
                task_queue=TaskQueue(name=queue or settings.task_queue),
                task_queue_type=kind,
            )
        )
        found |= {p.identity for p in resp.pollers}
    return found


POLLING_WAIT_S = 30.0  # a worker command this slow to poll is reported rather than waited on
# A first start that dies before it polls may be the moment's fault, not the command's: on a loaded machine
# a node worker's connect to chaos's hop timed out before the hop's first frame (exit 1), and its
# replacement polled; chaos had already said the command could not start. One replacement is waited for.
REPLACEMENTS = 1
REPLACED_WAIT_S = 3.0  # for the supervisor to record the dead worker's replacement (it does so within a tick)


async def wait_polling(
    client: Client, settings: Settings, worker: WorkerProc, timeout: float = POLLING_WAIT_S
) -> float:
    """Wait until Temporal lists the worker's identity as a poller; returns the seconds it took."""
    started = time.monotonic()
    log = settings.run_dir / "worker.log"
    queue = worker.queue or settings.task_queue
    deaths = 0
    while not follow(settings, worker) or worker.name not in await pollers(client, settings, queue):
        if not worker.alive():
            deaths += 1
            replaced = await _replacement(settings, worker) if deaths <= REPLACEMENTS else None
            if replaced is None:
                rc = worker.proc.returncode if worker.proc is not None else None
                starts = f", on {deaths} starts (the first and the supervisor's replacement)" if deaths > 1 else ""
                raise Unavailable(startup_death("the worker command", rc, log, 0, f"before it polled{starts}"))
            worker = replaced
        if time.monotonic() - started > timeout:
            raise Unavailable(
                f"the worker command (pid {worker.pid}) is not polling task queue {queue} as "
                f"{worker.name} after {timeout:g} s: does it read CHECKPOINT_TASK_QUEUE and keep the SDK's "
                f"default identity? (see {log})"
            )
        await asyncio.sleep(POLL_EVERY_S)
    return time.monotonic() - started


async def _replacement(settings: Settings, dead: WorkerProc) -> WorkerProc | None:
    """The worker its supervisor started in the dead one's slot, once recorded (None: none came)."""
    deadline = time.monotonic() + REPLACED_WAIT_S
    while time.monotonic() < deadline:
        new = worker_proc.load(settings, "active", dead.slot)
        if new is not None and new.pid != dead.pid and new.alive():
            return new
        await asyncio.sleep(POLL_EVERY_S)
    return None


async def wait_recorded(settings: Settings, slot: int, timeout: float = POLLING_WAIT_S) -> WorkerProc:
    """The slot's worker once its supervisor (maybe another process) has started and recorded it."""
    started = time.monotonic()
    while (worker := worker_proc.load(settings, "active", slot)) is None:
        if time.monotonic() - started > timeout:
            raise Unavailable(
                f"the fleet's worker of slot {slot} did not start within {timeout:g} s "
                f"(see {settings.run_dir / 'worker.log'})"
            )
        await asyncio.sleep(POLL_EVERY_S)
    return worker
