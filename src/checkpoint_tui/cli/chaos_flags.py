"""The chaos command's flags beyond the parser: which go together, the command that runs a chaos again,
--until-covered's bound, and the destinations read before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoint_tui.errors import UsageError

if TYPE_CHECKING:
    from checkpoint_tui.workloads import Adapter

BUNDLES_OURS = "--proof bundles are for checkpoint-tui's own workflow; with --worker-cmd use --json/--junit"


def read_destinations(workload: Adapter, run_dir: Path) -> None:
    from checkpoint_tui.ledger.destination import read_ids

    for dest in getattr(workload, "destinations", ()):
        read_ids(dest, run_dir)


def check_chaos_flags(args: argparse.Namespace, workload: Adapter) -> None:
    from checkpoint_tui.ledger.rows import WORKFLOW

    if sum(x is not None for x in (args.chaos_schedule, args.chaos_save, args.chaos_shrink)) > 1:
        raise UsageError("--schedule, --save-schedule and --shrink go one at a time")
    if not workload.shrinkable and args.chaos_shrink is not None:
        raise UsageError(f"--shrink reruns schedules of checkpoint-tui's own loop, not of {workload.title()}")
    if args.chaos_proof is not None and not workload.bundles:
        raise UsageError(BUNDLES_OURS)
    if args.runs > 1 and (args.chaos_shrink is not None or args.chaos_proof is not None):
        raise UsageError("--runs goes with a seeded or --schedule chaos (not --shrink or --proof)")
    others = (args.chaos_schedule, args.chaos_save, args.chaos_shrink, args.until_covered or None, args.chaos_proof)
    if args.every_window and (workload.kind != WORKFLOW or args.runs > 1 or any(x is not None for x in others)):
        raise UsageError("--every-window goes with --workflow of your worker, alone (not --schedule, --save-schedule, "
                         "--shrink, --until-covered, --proof or --runs)")
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
        for flag in ("pauses", "partitions", "resets", "activity_pauses", "activity_resets"):
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
