"""The chaos command: a schedule's run (and --until-covered's aimed rounds) printed, its report and
JUnit written, a proof bundle emitted; said first when it takes over a lab running in the home."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from checkpoint_tui.files import write_output
from checkpoint_tui.ops import devserver, worker_proc
from checkpoint_tui.ops.sigterm import until_sigterm
from checkpoint_tui.ops.temporal import reach
from checkpoint_tui.proof.bundle.proof_run import ProofRun
from checkpoint_tui.proof.bundle.writer import ProofOutputs, emit
from checkpoint_tui.proof.chaos import coverage, kill_windows
from checkpoint_tui.proof.chaos.engine import Chaos
from checkpoint_tui.proof.chaos.printing import print_report
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.report.chaos import ChaosReport
from checkpoint_tui.proof.report.codec import encode
from checkpoint_tui.settings import Settings

T = TypeVar("T")


async def until_sigterm_said(run: Coroutine[Any, Any, T]) -> T:
    return await until_sigterm(
        run,
        "chaos: stopped by SIGTERM (`stop`, or a CI timeout); its supervisor (and a worker command of yours) stopped",
    )


def running_lab(settings: Settings) -> str | None:
    """This home's live lab processes, as one phrase ("dev server 12, active 34"); None if none run.
    A worker whose record its supervisor died before saving is named too: `stop` ends it as well."""
    server, _ = devserver.recorded(settings)
    recorded = worker_proc.load_all(settings)
    unrecorded = worker_proc.unrecorded(settings, {w.pid for w in recorded})
    if server is None and not recorded and not unrecorded:
        return None
    named = [f"dev server {server.pid}"] if server is not None else []
    named += [f"{w.role} {w.pid}" for w in recorded] + [f"unrecorded worker {w.pid}" for w in unrecorded]
    return ", ".join(named)


def say_taken_over(settings: Settings) -> None:
    """A lab left running in the home (the app's `q`, a `start`) is chaos's to kill now: said, not done
    without a word."""
    if (what := running_lab(settings)) is not None:
        print(
            f"chaos: this home's lab is running ({what}): chaos takes it over (workers that would reach Temporal "
            "around its hop or proxy are replaced); `stop` ends what is left afterwards",
            flush=True,
        )


def say_left_running(settings: Settings) -> None:
    """What an experiment leaves running (our loop's workers, which the next chaos or the app adopts,
    and the home's dev server) is said with how to end it, on every way out (the CLI's experiment()):
    a user who never opens the app, or a CI job its timeout ended, would not know."""
    try:
        what = running_lab(settings)
    except Exception:  # a courtesy line must not hide the error the command is ending with
        return
    if what is not None:
        stop = f"checkpoint-tui --home {shlex.quote(str(settings.home))} stop"
        with contextlib.suppress(OSError):  # a closed stdout (a pipe's reader gone) is not the command's error
            print(f"left running for the next chaos or the app: {what}; `{stop}` ends them", flush=True)


async def run_schedule(
    settings: Settings, seed: int | None, steps: int, events: list[ChaosEvent], target: ChaosTarget
) -> ChaosReport:
    """One chaos run of exactly these events, with its checks (what --schedule and --shrink run)."""
    return await Chaos(settings, seed, steps, events, target).run()


async def chaos_command(
    settings: Settings,
    seed: int,
    steps: int,
    events: list[ChaosEvent],
    target: ChaosTarget,
    command: str,
    json_path: Path | None,
    outputs: ProofOutputs | None = None,
    runs: int = 1,
    max_kills: int | None = None,
    rate: float | None = None,
) -> int:
    """Run `events` against the target's workload; print, write the report (and the JUnit, a bundle).
    With `max_kills` (--until-covered), aimed rounds follow until every window was hit."""
    settings.ensure_dirs()
    say_taken_over(settings)
    await reach(settings)
    chaos = Chaos(settings, seed, steps, events, target, runs, rate)
    report = await until_sigterm_said(chaos.run())
    print_report(report, chaos.target)
    if max_kills is not None:
        last = [chaos]  # the run the next round's aims are measured on

        def aimed_round(steps: int, aimed: list[ChaosEvent]) -> Coroutine[Any, Any, ChaosReport]:
            last[0] = Chaos(settings, seed, steps, aimed, chaos.target.round_target())
            return last[0].run()

        def again() -> coverage.Aims:
            return last[0].target.coverage_aims(last[0])

        aims = chaos.target.coverage_aims(chaos)
        report = await until_sigterm_said(coverage.cover(seed, report, max_kills, aimed_round, aims, again))
        coverage.print_coverage(report)
    checks = report.checks + kill_windows.window_cases(report)
    path = json_path or settings.run_dir / f"chaos-seed{seed}.json"
    write_output(path, json.dumps(encode(report), indent=2), "--json")  # no link followed, atomic
    print(f"wrote {path}")
    if outputs is not None and outputs.wanted:
        figures = {
            "kills_fired": len(report.kills),
            "pauses_fired": len(report.pauses),
            "median_restart_s": report.median_restart_s,
        }
        run_ids = [report.run_id] if report.run_id is not None else []
        await emit(outputs, ProofRun(command, settings, report, checks, report.wall_s, run_ids, figures))
    return 0 if all(c.ok for c in checks) else 1
