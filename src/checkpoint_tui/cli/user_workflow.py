"""A user's workflow: `--worker-cmd "CMD"` (with `--task-queue Q`) and the commands that run one
(`start|chaos --workflow TYPE --input JSON`, `--verify --workflow ...`, `status RUN`), agent frameworks
on Temporal included (`--framework` forces an adapter; by default the activity types name it). Every
flag is checked here before anything starts (exit 2, one line)."""

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

from checkpoint_tui.app.frameworks import FRAMEWORKS
from checkpoint_tui.errors import Exit, UsageError
from checkpoint_tui.settings import Settings

MAX_CMD_CHARS = 4096
MAX_CMD_ARGS = 256
TASK_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
# Commands that make no sense on a user's worker: they run our own workflow or loop.
NOT_FOR_USER_WORKFLOWS = ("compare", "replay", "model-server")


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
        help="run this worker command instead of ours (a user's own Temporal worker; see "
        "docs/agents.md)",
    )  # fmt: skip
    p.add_argument("--workflow", dest="verify_workflow", metavar="TYPE", help="with --verify or the app: the workflow")
    p.add_argument("--input", dest="verify_input", metavar="JSON", help="with --verify or the app: its input")
    p.add_argument("--framework", choices=FRAMEWORKS,
                   help="classify the workflow's activities with this agent framework's adapter (default: "
                   "recognised from the activity types)")  # fmt: skip


def add_run_flags(p: argparse.ArgumentParser, chaos: bool = False) -> None:
    p.add_argument("--workflow", metavar="TYPE", help="a workflow type of --worker-cmd's worker")
    p.add_argument("--input", dest="input_json", metavar="JSON", help="its input, one JSON value (at most 64 KiB)")
    if chaos:
        p.add_argument("--aim", type=_aim, default="any",
                       help="with --workflow: which activity starts the events land on: tool, model, any, or a "
                       "glob over activity types and tool names (default any)")  # fmt: skip
        p.add_argument("--strict-models", action="store_true",
                       help="with --workflow: a re-executed model request fails the verdict too")


def _aim(text: str) -> str:
    from checkpoint_tui.proof.nemeses.aim import check_aim

    try:
        return check_aim(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def with_worker_cmd(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with the user's worker command (run from the current directory, as typed)."""
    from dataclasses import replace

    queue = settings.task_queue_name
    if queue and not TASK_QUEUE.fullmatch(queue):  # from CHECKPOINT_TASK_QUEUE (the flag is checked by the parser)
        raise UsageError(f"CHECKPOINT_TASK_QUEUE={queue[:40]!r} is not a task queue name")
    if not args.worker_cmd:
        return settings
    return replace(settings, worker_cmd=args.worker_cmd, worker_cwd=Path.cwd())


def check_pairing(args: argparse.Namespace, user: bool) -> None:
    """--workflow goes with --worker-cmd (and the other way round for running things), before anything starts."""
    command = args.command
    if (args.verify_workflow or args.verify_input) and command is not None:
        raise UsageError("--workflow/--input before the command go with --verify or the app; after it for start/chaos")
    if args.verify_input and not args.verify_workflow:
        raise UsageError("--input goes with --workflow")
    if args.verify_workflow and not user:
        raise UsageError("--workflow runs a workflow of your own worker: give --worker-cmd too")
    if user and command in NOT_FOR_USER_WORKFLOWS:
        raise UsageError(f"{command} runs checkpoint-tui's own workflow; it does not take --worker-cmd")
    if user and args.verify and not args.verify_workflow:
        raise UsageError("--verify with --worker-cmd needs --workflow TYPE (and --input JSON)")
    if user and args.verify and args.verify_proof:  # refused rather than silently ignored
        raise UsageError("--proof bundles are for checkpoint-tui's own workflow; with --worker-cmd use --json/--junit")
    if command in ("start", "chaos", "doctor"):
        if getattr(args, "input_json", None) is not None and not args.workflow:
            raise UsageError("--input goes with --workflow")
        if args.workflow and not user:
            raise UsageError("--workflow runs a workflow of your own worker: give --worker-cmd too")
        if user and not args.workflow and not (command == "doctor" and args.run):
            raise UsageError(f"with --worker-cmd, {command} takes --workflow TYPE --input JSON")
    if args.framework and not user:
        raise UsageError("--framework classifies a user's workflow: give --worker-cmd and --workflow too")
    if command == "chaos" and not user and (args.aim != "any" or args.strict_models):
        raise UsageError("--aim and --strict-models are for a user's workflow (--worker-cmd ... --workflow TYPE)")


def workflow_and_input(workflow: str, text: str | None) -> tuple[str, Any]:
    from checkpoint_tui.app.workflow_runs import NO_INPUT, check_workflow_type, parse_input

    return check_workflow_type(workflow), NO_INPUT if text is None else parse_input(text)


def start(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.app.workload import UserWorkflow
    from checkpoint_tui.cli.commands import start_workload

    if args.fault:
        raise UsageError("--fault plans faults in our own workflow; a user's workflow has no fault hooks")
    workflow, arg = workflow_and_input(args.workflow, args.input_json)
    return asyncio.run(start_workload(settings, UserWorkflow(workflow, arg, args.framework), args.wait, args.runs))


def chaos(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.app.workload import UserWorkflow
    from checkpoint_tui.cli.commands import until_covered_bound
    from checkpoint_tui.proof.chaos.activities import ActivityTarget, map_event, workload_schedule
    from checkpoint_tui.proof.chaos.engine import chaos_command
    from checkpoint_tui.proof.chaos.schedule import load_schedule, save_schedule

    if args.chaos_shrink is not None or args.chaos_proof is not None:
        raise UsageError("--shrink and --proof are for checkpoint-tui's own workflow, not --workflow")
    if args.chaos_schedule is not None and args.chaos_save is not None:
        raise UsageError("--schedule and --save-schedule go one at a time")
    max_kills = until_covered_bound(args)
    if max_kills is not None and args.runs > 1:
        raise UsageError("--until-covered goes with a seeded or --schedule chaos of one run (not --runs)")
    if args.steps is not None:
        raise UsageError("--steps is for checkpoint-tui's own loop: with --workflow, events land on activity "
                         "starts as the run makes them (pick which with --aim)")  # fmt: skip
    workflow, arg = workflow_and_input(args.workflow, args.input_json)
    seed = args.seed
    if args.chaos_schedule is not None:  # a file that cannot be read or run is a usage error
        events, span, file_seed = load_schedule(args.chaos_schedule, None)
        events, seed = [map_event(e, args.chaos_schedule) for e in events], file_seed if file_seed is not None else seed
    else:
        events, span = workload_schedule(args.seed, args.kills, args.pauses, args.partitions, args.resets,
                                         args.activity_pauses, args.activity_resets)  # cannot work: exit 2
        if args.chaos_save is not None:
            save_schedule(args.chaos_save, events, span, args.seed)
            print(f"wrote {args.chaos_save} ({len(events)} events over {span} aimed activity starts)")
            return Exit.OK
    if not settings.embedded:
        raise UsageError("chaos kills the dev server, so it needs the embedded one (no --temporal-address)")
    json_out = Path(args.chaos_json) if args.chaos_json else None
    target = ActivityTarget(UserWorkflow(workflow, arg, args.framework), args.aim, seed, args.strict_models,
                            placed=args.chaos_schedule is None)
    command = f"checkpoint-tui --worker-cmd ... chaos --workflow {workflow} --aim {args.aim} --seed {seed}"
    command += f" --runs {args.runs}" if args.runs > 1 else ""
    command += " --until-covered" if max_kills is not None else ""
    return asyncio.run(chaos_command(settings, seed, span, events, command, json_out, junit_path=args.chaos_junit,
                                     target=target, runs=args.runs, max_kills=max_kills))  # fmt: skip


def verify(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.app.workload import UserWorkflow
    from checkpoint_tui.proof.bundle.writer import ProofOutputs
    from checkpoint_tui.proof.verify.harness import run_verify

    workflow, arg = workflow_and_input(args.verify_workflow, args.verify_input)
    json_path = Path(args.json_path) if args.json_path else None
    workload = UserWorkflow(workflow, arg, args.framework)
    return asyncio.run(run_verify(settings, json_path, ProofOutputs(junit=args.verify_junit), workload))


def tui(args: argparse.Namespace, settings: Settings) -> int:
    """The app on a user's worker; `n` starts the --workflow / --input given before any command."""
    from checkpoint_tui.app.session import LabSession
    from checkpoint_tui.app.workflow_runs import NO_INPUT
    from checkpoint_tui.app.workload import UserWorkflow
    from checkpoint_tui.tui.app import CheckpointApp

    workflow, arg = (None, NO_INPUT)
    if args.verify_workflow:
        workflow, arg = workflow_and_input(args.verify_workflow, args.verify_input)
    workload = UserWorkflow(workflow, arg, args.framework) if workflow is not None else None
    app = CheckpointApp(LabSession(settings, workload), poll_interval=args.refresh)
    return int(app.run() or 0)


def status(settings: Settings, run_id: str, as_json: bool, framework: str | None = None) -> int | None:
    """`status RUN` of a run of a user's workflow (None: not one; the usual status applies)."""
    from checkpoint_tui.app.workflow_runs import is_user_workflow
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect

    row = queries.run(connect(settings.ledger), run_id)
    if row is None or not is_user_workflow(row.provider):
        return None
    from checkpoint_tui.cli.workflow_status import user_workflow_status

    summary, text = asyncio.run(user_workflow_status(settings, row, framework))
    print(json.dumps(summary, indent=2, sort_keys=True) if as_json else text)
    return Exit.OK
