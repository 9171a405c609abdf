"""`doctor`: run the workload once (ours, or `--worker-cmd ... doctor --workflow T --input J`), or read a
finished run (`doctor RUN`), and report what a kill would cost each of its activity types
(core/diagnosis.py); with `--measure`, run it a second time and kill the worker once under each type
(proof/measure/kill_cost.py). Exit 1 when there are findings, 0 when there are none."""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoint_tui.errors import Exit, Failed, Unavailable, UsageError
from checkpoint_tui.settings import Settings

if TYPE_CHECKING:
    from checkpoint_tui.core.workload import Workload

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
RUN_DEADLINE_S = 600.0  # the command, the runs it starts included, must end within this (--timeout)
KILL_CAP_S = 15.0  # --kill-cap: past the 10 s finding limit, so a capped kill still confirms kill-costs-timeout
CAP_RANGE_S = (1.0, 600.0)


def add_parser(sub, output_file, bounded_int, float_in) -> None:
    from checkpoint_tui.cli import workload_flags

    doctor = sub.add_parser(
        "doctor", help="what a kill would cost each activity type (timeouts, retries, heartbeats), with fixes"
    )
    doctor.set_defaults(func=command)
    doctor.add_argument("run", nargs="?", type=run_id, help="read this finished run instead of starting one")
    workload_flags.add_run_flags(doctor)
    doctor.add_argument(
        "--steps",
        type=bounded_int(1, 100),
        default=None,
        help="our own loop: steps of the run doctor starts (default 3)",
    )
    doctor.add_argument(
        "--timeout",
        type=float_in(1, 3600),
        default=RUN_DEADLINE_S,
        help=f"the command (with the runs it starts) must end within this many seconds (default {RUN_DEADLINE_S:.0f})",
    )
    doctor.add_argument(
        "--measure",
        action="store_true",
        help="run it again and SIGKILL the worker once under each activity type, unassisted: "
        "measured kill → next attempt beside the prediction",
    )
    low, high = CAP_RANGE_S
    doctor.add_argument(
        "--kill-cap",
        type=float_in(low, high),
        default=None,
        metavar="SECONDS",
        help=f"with --measure: wait at most this long for one kill's next attempt, then report "
        f"'≥ cap' (default {KILL_CAP_S:g}, {low:g}-{high:g})",
    )
    doctor.add_argument("--json", dest="doctor_json", metavar="PATH", type=output_file, help="write the report here")


def run_id(text: str) -> str:
    if not RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a run id")
    return text


def command(args: argparse.Namespace, settings: Settings, workload: Workload) -> int:
    if args.kill_cap is not None and not args.measure:
        raise UsageError("--kill-cap goes with --measure")
    if args.run is not None:
        if args.workflow or args.input_json is not None or args.steps is not None:
            raise UsageError("doctor RUN reads a finished run: --workflow, --input and --steps start one")
        if args.measure:
            raise UsageError("--measure kills workers under runs doctor starts: drop RUN (give --workflow, or --steps)")
        if not settings.ledger_exists:
            raise UsageError(f"no run {args.run!r}: {settings.home} has no ledger yet")
    json_out = Path(args.doctor_json) if args.doctor_json else None
    cap_s = (args.kill_cap or KILL_CAP_S) if args.measure else None
    from checkpoint_tui.ops.sigterm import until_sigterm

    stopped = "doctor: stopped by SIGTERM (`stop`, or a CI timeout); what it started stopped"
    import asyncio

    from checkpoint_tui.cli.commands import lab

    # A run doctor starts, and kills under, is the home's alone; reading a finished RUN shares it.
    with lab(settings, "doctor", exclusive=args.run is None):
        work = doctor(settings, workload, args.run, json_out, args.timeout, args.framework, cap_s)
        return asyncio.run(until_sigterm(work, stopped))


async def doctor(
    settings: Settings,
    workload: Workload,
    run: str | None,
    json_out: Path | None,
    deadline_s: float,
    framework: str | None = None,
    cap_s: float | None = None,
) -> int:
    """Diagnose `run` (or a run of `workload` started now); with `cap_s`, measure one kill per type too."""
    from checkpoint_tui.files import write_output
    from checkpoint_tui.ops import worker_proc
    from checkpoint_tui.ops.temporal import resolve_address
    from checkpoint_tui.proof.measure.kill_cost import Budget

    budget = Budget(time.monotonic() + deadline_s, deadline_s)
    settings.ensure_dirs()
    before = {w.pid for w in worker_proc.load_all(settings)}  # workers doctor finds are not its to stop
    address, server = resolve_address(settings)
    try:
        diagnosis = await _diagnosed(settings, workload, run, address, deadline_s, framework, cap_s, budget)
    finally:  # nothing doctor started is left running
        _stop_what_it_started(settings, before, server)
    print("\n".join(diagnosis.lines()))
    if json_out is not None:
        from checkpoint_tui.proof.report.doctor import document

        write_output(json_out, json.dumps(document(diagnosis), indent=2, sort_keys=True) + "\n")
    return Exit.FAILED if diagnosis.findings else Exit.OK


def _stop_what_it_started(settings: Settings, before: set[int], server) -> None:
    from checkpoint_tui.ops import worker_proc
    from checkpoint_tui.ops.devserver import stop_devserver

    stopped = []
    for w in worker_proc.load_all(settings):
        if w.pid not in before:
            worker_proc.stop(settings, w)
            worker_proc.forget(settings, w.role, w.slot)
            stopped.append(f"worker {w.pid}")
    if server is not None and not server.adopted and stop_devserver(settings) is not None:
        stopped.append(f"dev server {server.pid}")
    if stopped:
        print(f"doctor: stopped what it started ({', '.join(stopped)})", flush=True)


async def _diagnosed(
    settings: Settings,
    workload: Workload,
    run: str | None,
    address: str,
    deadline_s: float,
    framework: str | None,
    cap_s: float | None,
    budget,
):
    import asyncio

    from checkpoint_tui.ops.supervisor import Supervisor
    from checkpoint_tui.ops.temporal import connect_client

    client = await connect_client(settings, address)
    if run is None:
        # Never assisted: doctor measures what a worker dying in production costs, with no one failing
        # its attempts or resetting its sticky queue.
        sup = Supervisor(settings, address, spare=False, assist=False)
        if not sup.acquire() and cap_s is not None:  # the owner would respawn, and assist, after our kills
            raise Failed(
                f"another supervisor (the app, `start --wait` or `supervise`) owns {settings.home}: "
                "stop it, or measure in another --home"
            )
        await asyncio.to_thread(sup.ensure_worker)
        await workload.ready(settings, client, sup.primary)
        async with sup.running():
            run, status = await _run_once(settings, client, workload, budget)
            diagnosis = await _diagnose(settings, client, address, run, _classifier(workload, framework))
            if status != "COMPLETED":  # a run that did not complete is the first thing to fix, not "no findings"
                diagnosis.findings.insert(0, not_completed(run, status))
            if cap_s is not None:
                await _measure(settings, client, sup, workload, diagnosis, cap_s, budget, framework)
        return diagnosis
    return await _diagnose(settings, client, address, run, _classifier(workload, framework))


def _classifier(workload: Workload, framework: str | None):
    """What classifies the run's activities: a user's workflow's declaration or forced framework."""
    return getattr(workload, "classifier", None) or framework


def not_completed(run: str, status: str | None):
    from checkpoint_tui.core.diagnosis import Finding

    return Finding(
        "run-not-completed",
        "workflow",
        f"the run doctor started, {run}, ended {status}",
        f"make it complete first (its worker log, `checkpoint-tui status {run}`): a kill's cost "
        "is measured on a run that completes; one that fails loses its work however it retries",
    )


async def _run_once(settings: Settings, client, workload, budget) -> tuple[str, str | None]:
    """Start a run of the workload and wait for its end within what is left of --timeout."""
    import asyncio

    run = await workload.start(settings, client)
    print(f"doctor: started {run} ({workload.title()}); waiting for it to end", flush=True)
    try:
        status = await asyncio.wait_for(workload.wait(settings, client, run, progress=False), budget.left())
    except TimeoutError:
        raise Unavailable(f"{run} did not end within {budget.total_s:.0f} s (--timeout)") from None
    if status != "COMPLETED":
        print(f"doctor: {run} ended {status}; its history is read as it is", flush=True)
    return run, status


async def _measure(settings: Settings, client, sup, workload, diagnosis, cap_s: float, budget, framework) -> None:
    """A second run, one unassisted kill per activity type of the diagnosis (proof/measure/kill_cost.py)."""
    from checkpoint_tui.proof.measure.kill_cost import Measurer

    workload = workload.measured()  # ours thinks long enough to be hit
    run = await workload.start(settings, client)
    print(f"doctor: started {run} to measure ({workload.title()})", flush=True)
    measured = await Measurer(settings, client, sup, diagnosis, cap_s, budget, framework).run(run)
    status = await workload.wait(settings, client, run, timeout=budget.left())
    if status in (None, "RUNNING"):
        print(f"doctor: {run} had not ended when --timeout ran out; `checkpoint-tui status {run}` later", flush=True)
    diagnosis.with_measured(measured, run, cap_s)


async def _diagnose(settings: Settings, client, address: str, run: str, framework):
    from checkpoint_tui.core.activity_history import read_chain
    from checkpoint_tui.core.diagnosis import diagnose
    from checkpoint_tui.frameworks.base import language_of
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect

    row = queries.run(connect(settings.ledger), run)
    if row is None:
        raise UsageError(f"no run {run!r} in {settings.home}'s ledger")
    chain = await read_chain(client, run, row.first_execution)
    if not chain.executions:
        raise Unavailable(f"Temporal at {address} has no history of {run}")
    return diagnose(chain, framework, language_of(settings.worker_cmd))
