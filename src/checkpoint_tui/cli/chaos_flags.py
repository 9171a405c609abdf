"""The chaos command's flags beyond the parser: which go together, the command that runs a chaos again,
--until-covered's bound, and the destinations read before anything starts."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from checkpoint_tui.cli import workload_flags
from checkpoint_tui.errors import UsageError
from checkpoint_tui.loop_worker.shared import MAX_STEPS

if TYPE_CHECKING:
    from checkpoint_tui.workloads import Adapter

MAX_RUNS = 1024  # start --runs and chaos --runs: runs started at once (a load test runs hundreds)
BUNDLES_OURS = "--proof bundles are for checkpoint-tui's own workflow; with --worker-cmd use --json/--junit"


def read_destinations(workload: Adapter, run_dir: Path) -> None:
    from checkpoint_tui.ledger.destination import read_ids

    for dest in getattr(workload, "destinations", ()):
        read_ids(dest, run_dir)


def check_chaos_flags(args: argparse.Namespace, workload: Adapter) -> None:
    from checkpoint_tui.ledger.rows import WORKFLOW

    if sum(x is not None for x in (args.chaos_schedule, args.chaos_save, args.chaos_shrink)) > 1:
        raise UsageError("--schedule, --save-schedule and --shrink go one at a time")
    if args.model_faults and (args.chaos_schedule is not None or args.chaos_shrink is not None or args.every_window):
        raise UsageError("--model-faults is for a seeded chaos: a --schedule file names its own model-* events")
    if not workload.shrinkable and args.chaos_shrink is not None:
        raise UsageError(f"--shrink reruns schedules of checkpoint-tui's own loop, not of {workload.title()}")
    if args.chaos_proof is not None and not workload.bundles:
        raise UsageError(BUNDLES_OURS)
    if args.runs > 1 and (args.chaos_shrink is not None or args.chaos_proof is not None):
        raise UsageError("--runs goes with a seeded or --schedule chaos (not --shrink or --proof)")
    others = (args.chaos_schedule, args.chaos_save, args.chaos_shrink, args.until_covered or None, args.chaos_proof)
    if args.every_window and (workload.kind != WORKFLOW or args.runs > 1 or any(x is not None for x in others)):
        raise UsageError(
            "--every-window goes with --workflow of your worker, alone (not --schedule, --save-schedule, "
            "--shrink, --until-covered, --proof or --runs)"
        )
    if until_covered_bound(args) is not None and (args.chaos_shrink is not None or args.runs > 1):
        raise UsageError("--until-covered goes with a seeded or --schedule chaos of one run (not --shrink or --runs)")


def chaos_line(args: argparse.Namespace, workload: Adapter, seed: int, steps: int) -> str:
    """The command that runs this chaos again (a report's and a bundle's first line)."""
    before, after = workload.flags(steps)  # `steps`: the units the events were placed over (a file's own)
    line = " ".join(["checkpoint-tui", *before, "chaos", *after])
    if args.chaos_schedule is not None:
        line += f" --schedule {args.chaos_schedule}"
    else:
        line += f" --seed {seed} --kills {args.kills}"
        for flag in ("pauses", "partitions", "resets", "activity_pauses", "activity_resets", "model_faults"):
            line += f" --{flag.replace('_', '-')} {getattr(args, flag)}" if getattr(args, flag) else ""
    line += f" --aim {args.aim}" if args.aim != "any" else ""
    line += f" --runs {args.runs}" if args.runs > 1 else ""
    return line + (" --until-covered" if args.until_covered else "")


def until_covered_bound(args: argparse.Namespace) -> int | None:
    """--until-covered's kill budget (None without it); --max-kills alone is a usage error."""
    from checkpoint_tui.proof.chaos.coverage import DEFAULT_MAX_KILLS

    if getattr(args, "max_kills", None) is not None and not getattr(args, "until_covered", False):
        raise UsageError("--max-kills goes with --until-covered")
    if not getattr(args, "until_covered", False):
        return None
    return args.max_kills if args.max_kills is not None else DEFAULT_MAX_KILLS


class ArgTypes(NamedTuple):
    """The parser's checked argument types (cli/parser.py), handed in so that this module does not
    import the parser."""

    bounded_int: Callable[[int, int], Callable[[str], int]]
    float_in: Callable[[float, float], Callable[[str], float]]
    output_file: Callable[[str], Path]
    output_dir: Callable[[str], Path]


def add_parser(sub: Any, t: ArgTypes) -> argparse.ArgumentParser:
    """The chaos subcommand and its flags, in --help's order: what runs, what breaks it, which schedule."""
    chaos = sub.add_parser("chaos", help="a seeded schedule of SIGKILLs of every process, then Jepsen-style counts")
    _run_flags(chaos, t)
    _fault_flags(chaos, t)
    _schedule_flags(chaos, t)
    return chaos


def _run_flags(chaos: argparse.ArgumentParser, t: ArgTypes) -> None:
    """The run: its seed, its size, its workload, how many at once."""
    chaos.add_argument(
        "--seed",
        type=t.bounded_int(0, 2**63 - 1),
        default=1,
        help="seed of the schedule: the same seed places the same events at the same steps",
    )
    chaos.add_argument(
        "--steps",
        type=t.bounded_int(1, MAX_STEPS),
        default=None,
        help="steps of the run (default 30); not with --workflow (see --aim)",
    )
    workload_flags.add_run_flags(chaos, chaos=True)
    chaos.add_argument(
        "--kills",
        type=t.bounded_int(0, MAX_STEPS),
        default=8,
        help="SIGKILLs in the schedule: of the worker, the supervisor or the dev server",
    )
    chaos.add_argument(
        "--pauses",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="also SIGSTOP the worker this many times (a pause, or a hang the watchdog kills)",
    )
    chaos.add_argument(
        "--partitions",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="also cut the workers off from Temporal this many times (0.5-4 s each, through a proxy)",
    )
    chaos.add_argument(
        "--model-faults",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="with --workflow and --model-endpoint: also this many seeded faults of the agent's model "
        "requests (429s, 500/503s, slow, cut or garbled answers; docs/model-faults.md)",
    )
    chaos.add_argument(
        "--runs",
        type=t.bounded_int(1, MAX_RUNS),
        default=1,
        help="run this many runs at once under the one schedule (the first places the events; a "
        "worker kill hits every run it serves); the audit per run and in total",
    )
    chaos.add_argument(
        "--rate",
        type=t.float_in(0.01, 100),
        default=None,
        metavar="R",
        help="with --runs: start them R a second (load), not all at once",
    )


def _fault_flags(chaos: argparse.ArgumentParser, t: ArgTypes) -> None:
    """What else breaks it, beyond the kills, and the modes that aim them."""
    chaos.add_argument(
        "--resets",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="also reset the workflow this many times to a workflow task 1-3 steps back "
        "(`temporal workflow reset`: the steps after it run again; their effects must be skipped)",
    )
    chaos.add_argument(
        "--activity-pauses",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="also pause the activity in flight this many times (Temporal's activity pause, 0.5-3 s, then unpause)",
    )
    chaos.add_argument(
        "--activity-resets",
        type=t.bounded_int(0, MAX_STEPS),
        default=0,
        help="also reset the activity in flight this many times (Temporal's activity reset)",
    )
    chaos.add_argument(
        "--every-window",
        action="store_true",
        help="with --workflow: kill every tool once in each crash point's window (before its "
        "effect, after it, after Temporal recorded it), a run per window, and print tool x window",
    )
    chaos.add_argument(
        "--allow-unexercised",
        action="store_true",
        help="with --workflow: a run in which no fault reached an aimed activity passes (it says "
        "NOT EXERCISED and fails otherwise)",
    )
    chaos.add_argument(
        "--until-covered",
        action="store_true",
        help="then keep killing, aimed at the windows no kill has landed in yet (model call, tool "
        "call, the effect's claim/write/stamp, timer), until each has one; exit 1 naming any missed",
    )
    chaos.add_argument(
        "--max-kills",
        type=t.bounded_int(1, 1000),
        default=None,
        help="with --until-covered: at most this many worker deaths in all (default 30)",
    )


def _schedule_flags(chaos: argparse.ArgumentParser, t: ArgTypes) -> None:
    """A schedule from a file, saved or shrunk, and what the report is written to."""
    chaos.add_argument(
        "--schedule",
        dest="chaos_schedule",
        metavar="FILE",
        type=Path,
        help="run this schedule file instead of the seeded one (see docs/chaos.md: schedules as code)",
    )
    chaos.add_argument(
        "--save-schedule",
        dest="chaos_save",
        metavar="FILE",
        type=t.output_file,
        help="write the seeded schedule to FILE and exit without running it",
    )
    chaos.add_argument(
        "--shrink",
        dest="chaos_shrink",
        metavar="FILE",
        type=Path,
        help="rerun subsets of this failing schedule; write the smallest failing one to FILE.min.json",
    )
    chaos.add_argument("--json", dest="chaos_json", metavar="PATH", type=t.output_file, help="write the report here")
    chaos.add_argument(
        "--junit", dest="chaos_junit", metavar="PATH", type=t.output_file, help="the checks as JUnit XML"
    )
    chaos.add_argument(
        "--proof",
        dest="chaos_proof",
        metavar="DIR",
        type=t.output_dir,
        help="write a proof bundle here (report, JUnit, history, ledger CSVs, worker events, SVG)",
    )
