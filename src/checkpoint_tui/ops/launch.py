"""What a worker process is started as: a `Launch` says everything in which our own worker and a user's
worker command differ, so that one function (worker_proc.spawn) starts, recognises and records either.

Our worker's launch is built here; a user's command's in ops/user_worker.py. This module imports
neither worker_proc nor user_worker, so both can import it.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.ops.procs import ProcIdentity, identity_after_exec
from checkpoint_tui.settings import HOST, Settings

WORKER_MODULE = "checkpoint_tui.worker"


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: Path
    # Its Temporal identity, given its pid: ours is named before it starts (it is on the command line),
    # a user's command keeps the SDK's default, which holds its pid.
    name_for: Callable[[int], str]
    # The child's identity once it has exec'd argv (None if it died first): a user's command may be a
    # script run through its #! interpreter, so its command line only ends with argv.
    execd: Callable[[int, list[str]], ProcIdentity | None]
    what: str  # how the startup-death error names it
    role: str = "active"  # "active" | "spare"
    # A user's command: signalled with its process group (whatever it forked goes too) and recognised
    # by the CHECKPOINT_HOME it was started with, not by its command line.
    user_cmd: bool = False


# Set in a worker spawn's environment only (ours and a user's command), so `stop` finds whatever a
# worker forked, even a daemon that left its process group (worker_proc.spawned_for_home).
WORKER_OF_ENV = "CHECKPOINT_WORKER_OF"


def new_name() -> str:
    return f"w-{secrets.token_hex(3)}@{HOST}"


def our_worker(settings: Settings, address: str, role: str = "active", extra_args: tuple[str, ...] = ()) -> Launch:
    """`python -m checkpoint_tui.worker` for this home; a spare waits (--standby) until promoted."""
    name = new_name()
    argv = [
        sys.executable,
        "-m",
        WORKER_MODULE,
        "--home",
        str(settings.home),
        "--address",
        settings.worker_address or address,  # a chaos network proxy stands between workers and Temporal
        "--namespace",
        settings.namespace,
        "--task-queue",
        settings.task_queue,
        "--identity",
        name,
        "--artifacts",
        str(settings.artifacts_dir),
    ]
    argv += settings.connection.worker_args()  # file paths only; the API key stays in the environment
    argv += list(extra_args)
    if role == "spare":
        argv.append("--standby")
    env = settings.child_env()
    env["CHECKPOINT_HOME"] = str(settings.home)  # what unrecorded() matches, beside the command line
    env[WORKER_OF_ENV] = str(settings.home)
    return Launch(tuple(argv), env, settings.home, lambda _pid: name, identity_after_exec, "the worker", role)
