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

import os
import socket
from dataclasses import replace

from checkpoint_tui.ops.launch import WORKER_OF_ENV, Launch
from checkpoint_tui.ops.procs import ProcIdentity
from checkpoint_tui.settings import (
    PROBE_LOG_ENV,
    TEMPORAL_API_KEY_ENV,
    TEMPORAL_CONFIG_VARS,
    ConnectionOptions,
    FleetMember,
    Settings,
)
from checkpoint_tui.settings.connection import LAB_TLS_DATA_ENV, LAB_TLS_ENV
from checkpoint_tui.waiting import wait_until_sync

EXEC_WAIT_S = 5.0
# A Worker Deployment Version's name and build id, as Temporal's Worker Controller gives them to a worker
DEPLOYMENT_ENV, BUILD_ID_ENV = "TEMPORAL_DEPLOYMENT_NAME", "TEMPORAL_WORKER_BUILD_ID"
# Inherited variables the SDK's environment configuration (or a versioned worker) would read instead of
# the lab's values.
SDK_VARS = (*TEMPORAL_CONFIG_VARS, TEMPORAL_API_KEY_ENV, DEPLOYMENT_ENV, BUILD_ID_ENV)


def worker_connection(settings: Settings) -> ConnectionOptions:
    """How a worker reaches Temporal: as the lab does; through chaos's hop, in plain (the hop speaks TLS
    upstream, the API key riding on as the worker sent it); through a network proxy, TLS end to end,
    checking the server's own name (the certificate is not the proxy's)."""
    conn = settings.connection
    if settings.worker_address and settings.worker_plaintext:
        return ConnectionOptions(api_key=conn.api_key, tls_disabled=True)
    if settings.worker_address and conn.tls and not conn.tls_server_name and settings.temporal_address:
        return replace(conn, tls_server_name=settings.temporal_address.rsplit(":", 1)[0].strip("[]"))
    return conn


def default_identity(pid: int) -> str:
    """The Temporal SDK's default worker identity (temporalio/service.py): `pid@hostname`."""
    return f"{pid}@{socket.gethostname()}"


def worker_env(
    settings: Settings, address: str, queue: str | None = None, build_id: str | None = None
) -> dict[str, str]:
    """The environment of a user's worker: ours (child_env: the ledger URL, the API key), with the SDK's
    variables set from the lab's settings and none inherited from the caller's shell; `queue`: the task
    queue of its fleet command (default: the workflow's); each --dependency NAME as the lab routes it;
    `build_id`: the Worker Deployment Version it runs as (--deployment)."""
    env = settings.child_env()
    for name in SDK_VARS:
        env.pop(name, None)
    env["TEMPORAL_ADDRESS"] = settings.worker_address or address  # a chaos network proxy may stand between
    env["TEMPORAL_NAMESPACE"] = settings.namespace
    conn = worker_connection(settings)
    if conn.api_key:
        env[TEMPORAL_API_KEY_ENV] = conn.api_key
    for name, path in (
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", conn.tls_cert),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", conn.tls_key),
        ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", conn.tls_ca),
    ):
        if path:
            env[name] = os.path.abspath(os.path.expanduser(path))
    for name in (*LAB_TLS_DATA_ENV.values(), LAB_TLS_ENV):  # ours, for our own processes: the SDK's names below
        env.pop(name, None)
    env.update(conn.secrets_env())  # inline TLS data, as Temporal's variables name it
    if conn.tls_server_name:
        env["TEMPORAL_TLS_SERVER_NAME"] = conn.tls_server_name
    if conn.tls:
        env["TEMPORAL_TLS"] = "true"
    elif conn.tls_disabled:
        env["TEMPORAL_TLS"] = "false"
    env["CHECKPOINT_HOME"] = str(settings.home)
    env[WORKER_OF_ENV] = str(settings.home)  # what stop's sweep finds its forks by (worker_proc.spawned_for_home)
    env["CHECKPOINT_TASK_QUEUE"] = queue or settings.task_queue
    env.update(dict(settings.dependencies))  # HOST:PORT, through chaos's dependency proxy when it runs one
    env.update(dict(settings.model_endpoints))  # a base URL, through chaos's model proxy when it runs one
    env[PROBE_LOG_ENV] = str(settings.probe_log)  # where the audit reads it, whatever the shell said
    if settings.deployment and build_id:
        env[DEPLOYMENT_ENV], env[BUILD_ID_ENV] = settings.deployment, build_id
    return env


def user_command(settings: Settings, address: str, member: FleetMember | None = None) -> Launch:
    """The user's worker command (`member`: one command of the fleet, default the first), run from
    --worker-cwd (else the home). It has no standby protocol, so it is always launched as an active
    worker (a warm replacement is a fork of its preloader: ops/preload.py)."""
    cmd, queue = (member.cmd, member.queue) if member is not None else (settings.worker_cmd, None)
    return Launch(
        tuple(cmd),
        worker_env(settings, address, queue, member.build_id if member is not None else None),
        settings.worker_cwd or settings.home,
        default_identity,
        identity_after_user_exec,
        "the worker command",
        user_cmd=True,
    )


def identity_after_user_exec(pid: int, cmd: list[str], timeout: float = EXEC_WAIT_S) -> ProcIdentity | None:
    """The child's identity once it runs `cmd`: its command line is `cmd`, or ends with it (a script
    run through its #! interpreter), or is its end (a wrapper that exec'd the rest: `env VAR=1 python
    w.py` runs as `python w.py`, with its pid). None if it died first."""
    seen: list[ProcIdentity | None] = []

    def runs_it(ident: ProcIdentity) -> bool:
        line, want = ident.cmdline, tuple(cmd)
        return line[-len(want) :] == want or (0 < len(line) < len(want) and want[-len(line) :] == line)

    def execd_or_gone() -> bool:
        seen.append(ProcIdentity.of(pid))
        return seen[-1] is None or runs_it(seen[-1])

    wait_until_sync(execd_or_gone, timeout, every=0.002)
    ident = seen[-1] if seen else None
    return ident if ident is not None and runs_it(ident) else None
