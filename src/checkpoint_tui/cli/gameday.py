"""`checkpoint-tui [--worker QUEUE=CMD ...] [--deploy QUEUE=CMD] [--dependency NAME=HOST:PORT] gameday
--workflow TYPE --input JSON [--scenarios a,b] [--out DIR]`: Temporal's pre-production testing guide
against your fleet (proof/gameday/). Every flag and the output folder are checked before anything
starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoint_tui.cli.chaos_flags import MAX_RUNS
from checkpoint_tui.files.outputs import check_output_dir
from checkpoint_tui.settings import Settings

if TYPE_CHECKING:
    from checkpoint_tui.workloads import Adapter

MAX_DRAIN_S = 60.0
# proof/gameday/scenarios.py's NAMES, in its order, for --help: importing it would import the Temporal
# client into every parse (tests/test_gameday_report.py holds the two equal).
SCENARIOS = ("kill-all", "graceful-restart", "churn", "deploy", "dependency", "model-outage", "partition", "load")


def add_parser(sub, bounded_int, float_in) -> None:
    from checkpoint_tui.cli import workload_flags

    day = sub.add_parser(
        "gameday",
        help="Temporal's pre-production testing scenarios against your worker fleet, "
        "one at a time; an after-action report (Markdown, JSON, JUnit, a folder per experiment)",
    )
    day.set_defaults(func=gameday)
    workload_flags.add_run_flags(day)
    day.add_argument(
        "--scenarios",
        metavar="LIST",
        default=None,
        help=f"comma-separated, in this order by default: {','.join(SCENARIOS)}",
    )
    day.add_argument(
        "--runs",
        type=bounded_int(1, MAX_RUNS // 4),
        default=4,
        help=f"runs in flight per experiment (1..{MAX_RUNS // 4}; load starts 4x as many, 4 a second)",
    )
    day.add_argument(
        "--down-s", type=float_in(1, 300), default=10.0, help="seconds kill-all keeps the fleet down (default 10)"
    )
    day.add_argument(
        "--grace-s",
        type=float_in(0, 300),
        default=10.0,
        help="seconds a graceful stop has before SIGKILL, as your orchestrator gives it (default 10)",
    )
    day.add_argument(
        "--max-drain-s",
        type=float_in(0.1, 3600),
        default=MAX_DRAIN_S,
        help=f"seconds: a backlog that drains slower after a fleet event fails it (default {MAX_DRAIN_S:g})",
    )
    day.add_argument("--seed", type=bounded_int(0, 2**63 - 1), default=1, help="names the runs (default 1)")
    day.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        default=None,
        help="where the after-action report goes (default HOME/run/gameday)",
    )


def gameday(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    import asyncio

    from checkpoint_tui.cli.commands import experiment
    from checkpoint_tui.cli.model_env import endpoints_from_environment
    from checkpoint_tui.proof.gameday.run import SUBDIRS
    from checkpoint_tui.proof.gameday.run import gameday as run_gameday
    from checkpoint_tui.proof.gameday.scenarios import plan

    names = [n.strip() for n in (args.scenarios or "").split(",") if n.strip()]
    if "model-outage" in names:
        settings = endpoints_from_environment(settings)
    scenarios = plan(settings, names, args.runs, args.down_s, args.grace_s)
    out = args.out or settings.run_dir / "gameday"
    check_output_dir(out, "--out", tuple(s.name for s in scenarios) + SUBDIRS)
    steps = getattr(workload, "steps", 0)  # our loop's; a user's workflow places events by time
    with experiment(settings, "gameday"):
        return asyncio.run(
            run_gameday(
                settings, workload, workload.chaos_target, scenarios, out, args.runs, args.seed, args.max_drain_s, steps
            )
        )
