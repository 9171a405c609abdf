"""The workload an invocation runs, from its flags: our own agent loop (`--steps`, `--pace`, `--fault`),
or with `--worker-cmd "CMD"` (and `--task-queue Q`) a user's workflow (`start|chaos|doctor --workflow
TYPE --input JSON`, `--verify --workflow ...`, the app's `--workflow`), agent frameworks on Temporal
included (`--framework` forces an adapter; by default the activity types name it). `build_workload`
is the one place the kind is chosen; every flag is checked here before anything starts (exit 2)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoint_tui.cli.fleet_flags import (  # noqa: F401 (task_queue, fold_fleet: the parser's and commands')
    TASK_QUEUE,
    add_fleet_flags,
    fold_fleet,
    task_queue,
    worker_cmd,
)
from checkpoint_tui.cli.project import declaration, destinations
from checkpoint_tui.errors import UsageError
from checkpoint_tui.settings import Settings
from checkpoint_tui.settings.codec import codec_server

if TYPE_CHECKING:
    from checkpoint_tui.ledger.destination import Destination
    from checkpoint_tui.workloads import Adapter

# Commands that make no sense on a user's worker: they run our own workflow or loop.
NOT_FOR_USER_WORKFLOWS = ("compare", "replay", "model-server")
RUN_COMMANDS = ("start", "chaos", "doctor", "gameday")  # they take --workflow/--input after the command
LOOP_STEPS = {"doctor": 3}  # doctor: every activity type runs in one step; three show their medians
LOOP_PACE = {"chaos": 0.3, "doctor": 0.0}  # chaos: short timers between kills; doctor: no think time


class FrameworkNames:
    """--framework's choices, found when asked (a name given, or --help): the registry imports every
    framework module, and those import the Temporal SDK, which a parse, --help's usage line or a
    usage error should not pay for (a CLI process's start-up is most of a short command's CPU)."""

    def __contains__(self, name: object) -> bool:
        from checkpoint_tui.frameworks import names

        return name in names()

    def __iter__(self) -> Iterator[str]:
        from checkpoint_tui.frameworks import names

        return iter(names())


def add_global_flags(p: argparse.ArgumentParser) -> None:
    """The workload's flags that every command takes: whose workers, which fleet, what to audit."""
    p.add_argument(
        "--worker-cmd",
        metavar="CMD",
        type=worker_cmd,
        help="run this worker command instead of ours (a user's own Temporal worker; see docs/agents.md)",
    )
    add_fleet_flags(p)
    _audit_flags(p)


def _audit_flags(p: argparse.ArgumentParser) -> None:
    """What the run is and how its activities are read: the workflow, its framework or declarations,
    where its effects land."""
    p.add_argument("--workflow", dest="verify_workflow", metavar="TYPE", help="with --verify or the app: the workflow")
    p.add_argument("--input", dest="verify_input", metavar="JSON", help="with --verify or the app: its input")
    p.add_argument(
        "--framework",
        choices=FrameworkNames(),
        metavar="FRAMEWORK",  # not the choices: listing them would find them (see FrameworkNames)
        help="classify the workflow's activities with this agent framework's adapter (default: "
        "recognised from the activity types)",
    )
    p.add_argument(
        "--effects",
        action="append",
        default=None,
        metavar="SPEC",
        type=_destination,
        help="where your tools' effects land, read before and after each run (the verdict counts "
        "what it holds twice): sql:URL:QUERY (sqlite:PATH or postgresql://...; the query's first "
        "column is the effect's id), file:PATH[:REGEX] (one effect per line; a file or a "
        "folder's files) or http:NAME:FIELD (the requests chaos's proxy of --dependency NAME saw "
        "answered 2xx, by header or JSON field); repeatable; also `effects` in "
        "[tool.checkpoint-tui]",
    )
    for kind in ("model", "tool"):
        p.add_argument(
            f"--{kind}-activities",
            action="append",
            default=None,
            metavar="GLOB",
            type=_glob,
            help=f"any other framework, or a hand-rolled agent: activity types that are {kind} "
            f"{'requests' if kind == 'model' else 'calls'} (repeatable; also `{kind}-activities` "
            "in [tool.checkpoint-tui] of ./pyproject.toml)",
        )


def add_run_flags(p: argparse.ArgumentParser, chaos: bool = False) -> None:
    p.add_argument("--workflow", metavar="TYPE", help="a workflow type of --worker-cmd's worker")
    p.add_argument("--input", dest="input_json", metavar="JSON", help="its input, one JSON value (at most 64 KiB)")
    if chaos:
        p.add_argument(
            "--aim",
            type=_aim,
            default="any",
            help="with --workflow: which activity starts the events land on: tool, model, any, or a "
            "glob over activity types and tool names (default any)",
        )
        p.add_argument(
            "--strict-models",
            action="store_true",
            help="with --workflow: a re-executed model request fails the verdict too",
        )


def _glob(text: str) -> str:
    from checkpoint_tui.frameworks.declared import check_glob

    try:
        return check_glob(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _destination(text: str) -> Destination:
    from checkpoint_tui.ledger.destination import parse_destination

    try:
        return parse_destination(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--effects ")) from None


def _aim(text: str) -> str:
    from checkpoint_tui.proof.nemeses.aim import check_aim

    try:
        return check_aim(text)
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def with_worker_cmd(args: argparse.Namespace, settings: Settings) -> Settings:
    """The settings with the user's worker commands (run from the current directory, as typed)."""
    from dataclasses import replace

    queue = settings.task_queue_name
    if queue and not TASK_QUEUE.fullmatch(queue):  # from CHECKPOINT_TASK_QUEUE (the flag is checked by the parser)
        raise UsageError(f"CHECKPOINT_TASK_QUEUE={queue[:40]!r} is not a task queue name")
    codec = codec_server(getattr(args, "codec_endpoint", None), os.environ)  # checked with or without workers
    if codec is not None and getattr(args, "data_converter", None):
        raise UsageError("--data-converter and a codec server (--codec-endpoint, TEMPORAL_CODEC_ENDPOINT): one of them")
    settings = replace(settings, codec=codec)
    if not args.worker_cmd:
        return settings
    settings = replace(
        settings,
        worker_cmd=args.worker_cmd,
        worker_cwd=Path.cwd(),
        fleet=getattr(args, "fleet_rest", ()),
        deploys=tuple(getattr(args, "deploy", None) or ()),
        deployment=getattr(args, "deployment", None),
        data_converter=getattr(args, "data_converter", None),
        dependencies=tuple(getattr(args, "dependency", None) or ()),
        model_endpoints=tuple(getattr(args, "model_endpoint", None) or ()),
    )
    if settings.deployment:  # the --deploy queue is one a command polls: else exit 2 now
        from checkpoint_tui.ops import deployments  # the SDK's protos: not for a parse that never needs them

        deployments.old_and_new(settings)
    return settings


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
    if command in RUN_COMMANDS:
        if getattr(args, "input_json", None) is not None and not args.workflow:
            raise UsageError("--input goes with --workflow")
        if args.workflow and not user:
            raise UsageError("--workflow runs a workflow of your own worker: give --worker-cmd too")
        if user and not args.workflow and not (command == "doctor" and args.run):
            raise UsageError(f"with --worker-cmd, {command} takes --workflow TYPE --input JSON")
    if (args.framework or args.model_activities or args.tool_activities) and not user and not _reads_runs(args):
        raise UsageError("--framework and --model/--tool-activities classify a user's workflow: give --worker-cmd too")
    if getattr(args, "effects", None) and not user:
        raise UsageError(
            "--effects names where a worker of yours puts its effects (give --worker-cmd too); "
            "checkpoint-tui's own loop is audited at its outbox already"
        )
    if command == "chaos" and not user and (args.aim != "any" or args.strict_models or args.allow_unexercised):
        raise UsageError(
            "--aim, --strict-models and --allow-unexercised are for a user's workflow (--worker-cmd ... "
            "--workflow TYPE)"
        )


def _reads_runs(args: argparse.Namespace) -> bool:
    """`status`, or `doctor RUN`: commands that read recorded runs (classified as declared, with no
    --worker-cmd needed) rather than start one."""
    return args.command == "status" or (args.command == "doctor" and bool(getattr(args, "run", None)))


def workflow_and_input(workflow: str, text: str | None) -> tuple[str, Any]:
    from checkpoint_tui.core.workflow_runs import NO_INPUT, check_workflow_type, parse_input

    return check_workflow_type(workflow), NO_INPUT if text is None else parse_input(text)


def check_workload_flags(args: argparse.Namespace) -> None:
    """build_workload's checks, for a command that runs no workload (cli/commands.py WORKLOADLESS):
    a user's declarations and destinations are read and checked; our loop's flags belong to the
    commands that run it."""
    if args.worker_cmd:
        _check_user_flags(args)
        declaration(args)
        destinations(args)


def build_workload(args: argparse.Namespace) -> Adapter:
    """The one workload of this invocation: a user's workflow with --worker-cmd, else our loop shaped by
    the command's flags (chaos runs it at its own pace; doctor a short one)."""
    from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow

    command = args.command
    if not args.worker_cmd and _reads_runs(args):
        # reading recorded runs: a user's workflow's are classified as declared (flags, else pyproject.toml)
        _check_user_flags(args)
        declared = declaration(args)
        if declared or args.framework:
            return UserWorkflow(None, framework=args.framework, declared=declared)
    if not args.worker_cmd:
        from checkpoint_tui.core.runs import check_run_shape

        steps = getattr(args, "steps", None) or LOOP_STEPS.get(command, AgentLoopWorkload.steps)
        pace = getattr(args, "pace", None)
        pace = LOOP_PACE.get(command, AgentLoopWorkload.pace) if pace is None else pace
        faults = tuple(getattr(args, "fault", ()))
        check_run_shape(steps, pace, faults)  # a fault outside the run's steps, before anything starts
        return AgentLoopWorkload(steps, pace, faults)
    _check_user_flags(args)
    after = command in RUN_COMMANDS  # --workflow/--input after the command (start, chaos, doctor)
    workflow = args.workflow if after else args.verify_workflow
    text = args.input_json if after else args.verify_input
    declared, dests = declaration(args), destinations(args)
    if workflow is None:  # the app, status, doctor RUN: runs of whatever workflow the ledger names
        return UserWorkflow(None, framework=args.framework, declared=declared, destinations=dests)
    workflow, arg = workflow_and_input(workflow, text)
    return UserWorkflow(workflow, arg, args.framework, getattr(args, "strict_models", False), declared, dests)


def _check_user_flags(args: argparse.Namespace) -> None:
    """Our loop's flags given beside --worker-cmd: refused, not ignored."""
    if getattr(args, "fault", None):
        raise UsageError("--fault plans faults in our own workflow; a user's workflow has no fault hooks")
    if getattr(args, "steps", None) is not None and args.command == "chaos":
        raise UsageError(
            "--steps is for checkpoint-tui's own loop: with --workflow, events land on activity "
            "starts as the run makes them (pick which with --aim)"
        )
    if getattr(args, "steps", None) is not None and args.command == "doctor" and args.run is None:
        raise UsageError("--steps is for checkpoint-tui's own loop, not --workflow")
    if args.command == "start" and (args.steps is not None or args.pace is not None):
        raise UsageError("--steps and --pace shape checkpoint-tui's own loop; your workflow takes --input JSON")
