"""Bring your own worker: `--worker-cmd "CMD"` (with `--task-queue Q`) and the commands that run a
user's workflow (`start|chaos --workflow TYPE --input JSON`, `--verify --workflow ...`, `status RUN`).
Every flag is checked here before anything starts (exit 2, one line)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from checkpoint_tui.errors import Exit, Unavailable, UsageError
from checkpoint_tui.settings import Settings

MAX_CMD_CHARS = 4096
MAX_CMD_ARGS = 256
POLLING_WAIT_S = 30.0  # a worker command this slow to poll is reported rather than waited on
TASK_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
# Commands that make no sense on a user's worker: they run our own workflow or loop.
NOT_FOREIGN = ("compare", "replay", "model-server")


def worker_cmd(text: str) -> tuple[str, ...]:
    """--worker-cmd: split like a shell would (no shell runs it), bounded, its program resolvable now
    (argv[0] becomes that path: the command line recorded for identity checks is the one that runs)."""
    if len(text) > MAX_CMD_CHARS:
        raise argparse.ArgumentTypeError(f"is {len(text)} characters; at most {MAX_CMD_CHARS}")
    if any(ch in text for ch in "\x00\n\r"):
        raise argparse.ArgumentTypeError("must be one line")
    try:
        argv = shlex.split(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"cannot be split like a shell command: {err}") from None
    if not argv:
        raise argparse.ArgumentTypeError("is empty")
    if len(argv) > MAX_CMD_ARGS:
        raise argparse.ArgumentTypeError(f"has {len(argv)} arguments; at most {MAX_CMD_ARGS}")
    found = shutil.which(argv[0])
    if found is None:
        raise argparse.ArgumentTypeError(f"{argv[0][:80]!r} is not an executable file here or on PATH")
    return (os.path.abspath(found), *argv[1:])


def task_queue(text: str) -> str:
    if not TASK_QUEUE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a task queue name (letters, digits and . _ : @ / -, at most 200)"
        )
    return text


def add_global_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--worker-cmd", metavar="CMD", type=worker_cmd,
        help="run this worker command instead of ours (a user's own Temporal worker; see README: "
        "Bring your own worker)",
    )  # fmt: skip
    p.add_argument("--workflow", dest="verify_workflow", metavar="TYPE", help="with --verify or the app: the workflow")
    p.add_argument("--input", dest="verify_input", metavar="JSON", help="with --verify or the app: its input")


def add_run_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workflow", metavar="TYPE", help="a workflow type of --worker-cmd's worker")
    p.add_argument("--input", dest="input_json", metavar="JSON", help="its input, one JSON value (at most 64 KiB)")


def with_worker_cmd(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with the user's worker command (run from the current directory, as typed)."""
    from dataclasses import replace

    queue = settings.task_queue_name
    if queue and not TASK_QUEUE.fullmatch(queue):  # from CHECKPOINT_TASK_QUEUE (the flag is checked by the parser)
        raise UsageError(f"CHECKPOINT_TASK_QUEUE={queue[:40]!r} is not a task queue name")
    if not args.worker_cmd:
        return settings
    return replace(settings, worker_cmd=args.worker_cmd, worker_cwd=Path.cwd())


def check_pairing(args: argparse.Namespace, foreign: bool) -> None:
    """--workflow goes with --worker-cmd (and the other way round for running things), before anything starts."""
    command = args.command
    if (args.verify_workflow or args.verify_input) and command is not None:
        raise UsageError("--workflow/--input before the command go with --verify or the app; after it for start/chaos")
    if args.verify_input and not args.verify_workflow:
        raise UsageError("--input goes with --workflow")
    if args.verify_workflow and not foreign:
        raise UsageError("--workflow runs a workflow of your own worker: give --worker-cmd too")
    if foreign and command in NOT_FOREIGN:
        raise UsageError(f"{command} runs checkpoint-tui's own workflow; it does not take --worker-cmd")
    if foreign and args.verify and not args.verify_workflow:
        raise UsageError("--verify with --worker-cmd needs --workflow TYPE (and --input JSON)")
    if foreign and args.verify and args.verify_proof:  # refused rather than silently ignored
        raise UsageError("--proof bundles are for checkpoint-tui's own workflow; with --worker-cmd use --json/--junit")
    if command in ("start", "chaos"):
        if getattr(args, "input_json", None) is not None and not args.workflow:
            raise UsageError("--input goes with --workflow")
        if args.workflow and not foreign:
            raise UsageError("--workflow runs a workflow of your own worker: give --worker-cmd too")
        if foreign and not args.workflow:
            raise UsageError(f"with --worker-cmd, {command} takes --workflow TYPE --input JSON")


def workflow_and_input(workflow: str, text: str | None) -> tuple[str, Any]:
    from checkpoint_tui.app.foreign_runs import NO_INPUT, check_workflow_type, parse_input

    return check_workflow_type(workflow), NO_INPUT if text is None else parse_input(text)


def start(args: argparse.Namespace, settings: Settings) -> int:
    if args.fault:
        raise UsageError("--fault plans faults in our own workflow; a user's workflow has no fault hooks")
    workflow, arg = workflow_and_input(args.workflow, args.input_json)
    return asyncio.run(_start(settings, workflow, arg, args.wait))


async def _start(settings: Settings, workflow: str, arg: Any, wait: bool) -> int:
    from temporalio.service import RPCError

    from checkpoint_tui.app.foreign_runs import start_foreign_run, wait_foreign
    from checkpoint_tui.ops.foreign_worker import wait_polling
    from checkpoint_tui.ops.supervisor import Supervisor
    from checkpoint_tui.ops.temporal import connect_client, resolve_address

    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address, spare=False)
    if wait:
        sup.acquire()  # respawn only if no other supervisor (e.g. the app) owns this home
    await asyncio.to_thread(sup.ensure_worker)
    if sup.primary is not None:  # a command that cannot start (or polls elsewhere) is one line now, exit 3
        await wait_polling(client, settings, sup.primary, timeout=POLLING_WAIT_S)
    try:
        run_id = await start_foreign_run(settings, client, workflow, arg)
    except RPCError as err:
        raise Unavailable(f"Temporal refused to start {workflow}: {str(err).splitlines()[0][:200]}") from None
    print(run_id, flush=True)
    if not wait:
        return Exit.OK
    async with sup.running():
        status = await wait_foreign(settings, client, run_id, progress=True)
    return Exit.OK if status == "COMPLETED" else Exit.FAILED


def chaos_span(steps: int | None, arg: Any) -> int:
    """How many activities the schedule spreads over: --steps, else the input's "count" if it has one."""
    if steps is not None:
        return steps
    count = arg.get("count") if isinstance(arg, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and 3 <= count <= 100_000:
        return count
    raise UsageError("give --steps N: how many of the workflow's activities the chaos schedule spreads over")


def chaos(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.proof.foreign_chaos import foreign_chaos_command, foreign_schedule
    from checkpoint_tui.proof.schedule import load_schedule, save_schedule

    if args.chaos_shrink is not None or args.chaos_proof is not None:
        raise UsageError("--shrink and --proof are for checkpoint-tui's own workflow, not --workflow")
    if args.chaos_schedule is not None and args.chaos_save is not None:
        raise UsageError("--schedule and --save-schedule go one at a time")
    workflow, arg = workflow_and_input(args.workflow, args.input_json)
    span = args.steps if args.chaos_schedule is not None else chaos_span(args.steps, arg)
    if args.chaos_schedule is not None:
        load_schedule(args.chaos_schedule, span)  # a file that cannot be read or run is a usage error
    else:
        events = foreign_schedule(args.seed, span, args.kills, args.pauses, args.partitions)  # cannot work: 2
        if args.chaos_save is not None:
            save_schedule(args.chaos_save, events, span, args.seed)
            print(f"wrote {args.chaos_save} ({len(events)} events over {span} activities)")
            return Exit.OK
    if not settings.embedded:
        raise UsageError("chaos kills the dev server, so it needs the embedded one (no --temporal-address)")
    json_out = Path(args.chaos_json) if args.chaos_json else None
    return asyncio.run(foreign_chaos_command(settings, workflow, arg, args.seed, span or 0, args.kills, args.pauses,
                                             json_out, args.chaos_junit, args.chaos_schedule,
                                             args.partitions))  # fmt: skip


def verify(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.proof.foreign_verify import run_foreign_verify

    workflow, arg = workflow_and_input(args.verify_workflow, args.verify_input)
    json_path = Path(args.json_path) if args.json_path else None
    return asyncio.run(run_foreign_verify(settings, workflow, arg, json_path, args.verify_junit))


def tui(args: argparse.Namespace, settings: Settings) -> int:
    """The app on a user's worker; `n` starts the --workflow / --input given before any command."""
    from checkpoint_tui.app.foreign_runs import NO_INPUT
    from checkpoint_tui.app.foreign_session import ForeignSession
    from checkpoint_tui.tui.app import CheckpointApp

    workflow, arg = (None, NO_INPUT)
    if args.verify_workflow:
        workflow, arg = workflow_and_input(args.verify_workflow, args.verify_input)
    app = CheckpointApp(ForeignSession(settings, workflow, arg), poll_interval=args.refresh)
    return int(app.run() or 0)


def status(settings: Settings, run_id: str, as_json: bool) -> int | None:
    """`status RUN` of a run of a user's workflow (None: not one; the usual status applies)."""
    from checkpoint_tui.app.foreign_runs import is_foreign
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect

    row = queries.run(connect(settings.ledger), run_id)
    if row is None or not is_foreign(row.provider):
        return None
    from checkpoint_tui.cli.foreign_status import foreign_status

    summary, text = asyncio.run(foreign_status(settings, row))
    print(json.dumps(summary, indent=2, sort_keys=True) if as_json else text)
    return Exit.OK
