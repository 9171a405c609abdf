"""A user's own worker command (`--worker-cmd "CMD"`), run and watched like our worker.

What it gets: the Temporal SDK's environment configuration (`TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`,
and `TEMPORAL_API_KEY` / `TEMPORAL_TLS*` when the lab has them), `CHECKPOINT_HOME` (or
`CHECKPOINT_LEDGER_URL`) for the effects library, `CHECKPOINT_PROBE_LOG` (where the library counts
physical writes, read back by the audit) and `CHECKPOINT_TASK_QUEUE`. Secrets travel only in that
environment. Its output goes to run/worker.log; it runs in a session of its own, so a kill reaches
whatever it forked. It has no standby protocol: a replacement is a fork of its preloader
(ops/preload.py) or a cold spawn. Its Temporal identity
is the SDK's default, `pid@host`, which assisted failover matches against `last_worker_identity`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops.exit_reason import startup_death
from checkpoint_tui.ops.launch import WORKER_OF_ENV, Launch
from checkpoint_tui.ops.procs import ProcIdentity
from checkpoint_tui.settings import PROBE_LOG_ENV, TEMPORAL_API_KEY_ENV, FleetMember, Settings
from checkpoint_tui.waiting import wait_until_sync

if TYPE_CHECKING:  # worker_proc imports this module to launch a user's command
    from checkpoint_tui.ops.worker_proc import WorkerProc

EXEC_WAIT_S = 5.0
POLL_EVERY_S = 0.1
# Inherited variables the SDK's environment configuration would read instead of the lab's values.
SDK_VARS = (
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    TEMPORAL_API_KEY_ENV,
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "TEMPORAL_TLS_CLIENT_KEY_DATA",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
    "TEMPORAL_PROFILE",
)


def default_identity(pid: int) -> str:
    """The Temporal SDK's default worker identity (temporalio/service.py): `pid@hostname`."""
    return f"{pid}@{socket.gethostname()}"


def worker_env(settings: Settings, address: str, queue: str | None = None) -> dict[str, str]:
    """The environment of a user's worker: ours (child_env: the ledger URL, the API key), with the SDK's
    variables set from the lab's settings and none inherited from the caller's shell; `queue`: the task
    queue of its fleet command (default: the workflow's); each --dependency NAME as the lab routes it."""
    env = settings.child_env()
    for name in SDK_VARS:
        env.pop(name, None)
    env["TEMPORAL_ADDRESS"] = settings.worker_address or address  # a chaos network proxy may stand between
    env["TEMPORAL_NAMESPACE"] = settings.namespace
    conn = settings.connection
    if conn.api_key:
        env[TEMPORAL_API_KEY_ENV] = conn.api_key
    for name, path in (
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", conn.tls_cert),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", conn.tls_key),
        ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", conn.tls_ca),
    ):
        if path:
            env[name] = os.path.abspath(os.path.expanduser(path))
    if conn.api_key or conn.tls_cert or conn.tls_ca:
        env["TEMPORAL_TLS"] = "true"
    env["CHECKPOINT_HOME"] = str(settings.home)
    env[WORKER_OF_ENV] = str(settings.home)  # what stop's sweep finds its forks by (worker_proc.spawned_for_home)
    env["CHECKPOINT_TASK_QUEUE"] = queue or settings.task_queue
    env.update(dict(settings.dependencies))  # HOST:PORT, through chaos's dependency proxy when it runs one
    env[PROBE_LOG_ENV] = str(settings.probe_log)  # where the audit reads it, whatever the shell said
    return env


def user_command(settings: Settings, address: str, member: FleetMember | None = None) -> Launch:
    """The user's worker command (`member`: one command of the fleet, default the first), run from
    --worker-cwd (else the home). It has no standby protocol, so it is always launched as an active
    worker (a warm replacement is a fork of its preloader: ops/preload.py)."""
    cmd, queue = (member.cmd, member.queue) if member is not None else (settings.worker_cmd, None)
    return Launch(
        tuple(cmd),
        worker_env(settings, address, queue),
        settings.worker_cwd or settings.home,
        default_identity,
        identity_after_user_exec,
        "the worker command",
        user_cmd=True,
    )


def identity_after_user_exec(pid: int, cmd: list[str], timeout: float = EXEC_WAIT_S) -> ProcIdentity | None:
    """The child's identity once it runs `cmd`: its command line is `cmd`, or ends with it (a script
    run through its #! interpreter). None if it died first."""
    seen: list[ProcIdentity | None] = []

    def execd_or_gone() -> bool:
        seen.append(ProcIdentity.of(pid))
        return seen[-1] is None or seen[-1].cmdline[-len(cmd) :] == tuple(cmd)

    wait_until_sync(execd_or_gone, timeout, every=0.002)
    ident = seen[-1] if seen else None
    return ident if ident is not None and ident.cmdline[-len(cmd) :] == tuple(cmd) else None


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


async def wait_polling(
    client: Client, settings: Settings, worker: WorkerProc, timeout: float = POLLING_WAIT_S
) -> float:
    """Wait until Temporal lists the worker's identity as a poller; returns the seconds it took."""
    started = time.monotonic()
    log = settings.run_dir / "worker.log"
    queue = worker.queue or settings.task_queue
    while worker.name not in await pollers(client, settings, queue):
        if not worker.alive():
            rc = worker.proc.returncode if worker.proc is not None else None
            raise Unavailable(startup_death("the worker command", rc, log, 0, "before it polled"))
        if time.monotonic() - started > timeout:
            raise Unavailable(
                f"the worker command (pid {worker.pid}) is not polling task queue {queue} as "
                f"{worker.name} after {timeout:g} s: does it read CHECKPOINT_TASK_QUEUE and keep the SDK's "
                f"default identity? (see {log})"
            )
        await asyncio.sleep(POLL_EVERY_S)
    return time.monotonic() - started


async def wait_recorded(settings: Settings, slot: int, timeout: float = POLLING_WAIT_S) -> WorkerProc:
    """The slot's worker once its supervisor (maybe another process) has started and recorded it."""
    from checkpoint_tui.ops import worker_proc  # it imports this module

    started = time.monotonic()
    while (worker := worker_proc.load(settings, "active", slot)) is None:
        if time.monotonic() - started > timeout:
            raise Unavailable(
                f"the fleet's worker of slot {slot} did not start within {timeout:g} s "
                f"(see {settings.run_dir / 'worker.log'})"
            )
        await asyncio.sleep(POLL_EVERY_S)
    return worker
