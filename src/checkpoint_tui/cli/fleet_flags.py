"""The flags of a user's fleet (before the command): its worker commands and their task queues, the
new version a deploy swaps in (and with --deployment, a Worker Deployment), the team's data converter,
the services and model endpoints the workers call. Each is checked when parsed, and `fold_fleet`
checks them together, before anything starts (exit 2)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil

from checkpoint_tui.errors import UsageError
from checkpoint_tui.settings import FleetMember

MAX_CMD_CHARS = 4096
MAX_CMD_ARGS = 256
MAX_FLEET = 16  # worker commands in one fleet (ops/fleet.py)
TASK_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")


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


def fleet_member(text: str) -> FleetMember:
    """--worker / --deploy QUEUE=CMD: a task queue and the worker command that polls it."""
    queue, sep, cmd = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("takes QUEUE=CMD (the task queue the command polls, then the command)")
    return FleetMember(task_queue(queue.strip()), worker_cmd(cmd))


def _dependency(text: str) -> tuple[str, str]:
    from checkpoint_tui.proof.nemeses.dependency import parse_dependency

    try:
        name, host, port = parse_dependency(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name, f"{host}:{port}"


def _model_endpoint(text: str) -> tuple[str, str]:
    from checkpoint_tui.proof.nemeses.model_faults import parse_endpoint

    try:
        return parse_endpoint(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_fleet_flags(p: argparse.ArgumentParser) -> None:
    """--worker, --deploy, --deployment, --data-converter, --dependency, --model-endpoint."""
    p.add_argument(
        "--worker",
        dest="fleet",
        action="append",
        default=None,
        metavar="QUEUE=CMD",
        type=fleet_member,
        help="a fleet: each worker command with the task queue it polls (repeatable; the first, or the "
        "one on --task-queue, runs the workflow; --workers N of each; see docs/gameday.md)",
    )
    p.add_argument(
        "--deploy",
        action="append",
        default=None,
        metavar="QUEUE=CMD",
        type=fleet_member,
        help="the new version of the worker command on QUEUE, for the deploy nemesis (repeatable)",
    )
    p.add_argument(
        "--deployment",
        metavar="NAME",
        type=_deployment,
        help="deploy with Worker Versioning: the --deploy queue's workers run as versions of this Worker "
        "Deployment (v1 the --worker command, v2 the --deploy one, beside it), routed by set-current-version "
        "and set-ramping-version (see docs/gameday.md)",
    )
    _payload_flags(p)
    p.add_argument(
        "--dependency",
        action="append",
        default=None,
        metavar="NAME=HOST:PORT",
        type=_dependency,
        help="a service your workers call, on this machine: they get NAME=HOST:PORT in their "
        "environment (chaos routes it through a proxy to break it; repeatable)",
    )
    p.add_argument(
        "--model-endpoint",
        action="append",
        default=None,
        metavar="NAME=URL",
        type=_model_endpoint,
        help="your agent's model endpoint (OpenAI-compatible, or Anthropic's Messages API): the workers get "
        "NAME=URL in their environment "
        "(OPENAI_BASE_URL=http://127.0.0.1:8080/v1); chaos routes it through a proxy that plays the "
        "model-* faults (repeatable)",
    )


def _payload_flags(p: argparse.ArgumentParser) -> None:
    """--data-converter, --codec-endpoint: how the team's payloads are read."""
    p.add_argument(
        "--data-converter",
        metavar="MODULE:ATTR",
        type=_converter,
        help="your workers' DataConverter (payload converter and codec), or a function returning it: the lab "
        "encodes what it starts runs with and decodes the histories it audits through it, in a process of "
        "its own, from your workers' directory (see docs/cluster.md)",
    )
    p.add_argument(
        "--codec-endpoint",
        metavar="URL",
        help="your codec server (Temporal's remote codec: /encode and /decode; env TEMPORAL_CODEC_ENDPOINT, "
        "its Authorization header from TEMPORAL_CODEC_AUTH only): the lab encodes and decodes payloads "
        "through it, as the Web UI does (see docs/cluster.md)",
    )


def _converter(text: str) -> str:
    """MODULE:ATTR, dotted names only: it is imported (in a process of its own), never evaluated."""
    if len(text) > 200 or not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: MODULE:ATTR, e.g. codec.converter:DATA_CONVERTER")
    return text


def _deployment(text: str) -> str:
    """A Worker Deployment's name: what Temporal takes and a reader can type (no dots: Temporal joins a
    name and a build id with one)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a name of letters, digits, - and _ (at most 100)")
    return text


def fold_fleet(args: argparse.Namespace) -> None:
    """--worker QUEUE=CMD flags as one fleet: the workflow's command (--worker-cmd on --task-queue, else
    the --worker on --task-queue, else the first) and the others (args.fleet_rest), before any other check."""
    fleet = list(getattr(args, "fleet", None) or [])
    deploys, deps = getattr(args, "deploy", None) or [], getattr(args, "dependency", None) or []
    if len(fleet) + bool(args.worker_cmd) > MAX_FLEET:
        raise UsageError(f"at most {MAX_FLEET} worker commands in a fleet")
    if fleet and not args.worker_cmd:
        first = next((m for m in fleet if m.queue == args.task_queue), None) if args.task_queue else fleet[0]
        if first is None:
            raise UsageError(f"--task-queue {args.task_queue}: no --worker polls it (give it as QUEUE=CMD)")
        fleet.remove(first)
        args.worker_cmd, args.task_queue = first.cmd, first.queue
    args.fleet_rest = tuple(fleet)
    if (deploys or deps or getattr(args, "data_converter", None)) and not args.worker_cmd:
        raise UsageError(
            "--deploy, --dependency and --data-converter are for your own workers: give --worker-cmd or --worker too"
        )
    queues = {m.queue for m in fleet} | ({args.task_queue} if args.task_queue else set())
    for d in deploys:
        if args.task_queue is not None and d.queue not in queues:
            raise UsageError(
                f"--deploy {d.queue}=...: no worker command polls {d.queue} (the fleet: {', '.join(sorted(queues))})"
            )
    if len({d.queue for d in deploys}) < len(deploys):
        raise UsageError("one --deploy per task queue")
    if getattr(args, "deployment", None) and len(deploys) != 1:
        raise UsageError("--deployment versions one queue's workers: give exactly one --deploy QUEUE=CMD with it")
    if len({name for name, _ in deps}) < len(deps):
        raise UsageError("one --dependency per NAME")
