"""`doctor`: run the workload once (ours, or `--worker-cmd ... doctor --workflow T --input J`), or read a
finished run (`doctor RUN`), and report what a kill would cost each of its activity types
(app/doctor.py). Exit 1 when there are findings, 0 when there are none."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path

from checkpoint_tui.errors import Exit, Unavailable, UsageError
from checkpoint_tui.settings import Settings

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
DEFAULT_STEPS = 3  # our own loop: every activity type runs in one step; three show their medians
RUN_DEADLINE_S = 600.0  # a run doctor starts must end within this (--timeout)


def add_parser(sub, output_file, bounded_int, float_in) -> None:
    from checkpoint_tui.cli import user_workflow

    doctor = sub.add_parser(
        "doctor", help="what a kill would cost each activity type (timeouts, retries, heartbeats), with fixes"
    )
    doctor.set_defaults(func=command)
    doctor.add_argument("run", nargs="?", type=run_id, help="read this finished run instead of starting one")
    user_workflow.add_run_flags(doctor)
    doctor.add_argument("--steps", type=bounded_int(1, 100), default=None,
                        help=f"our own loop: steps of the run doctor starts (default {DEFAULT_STEPS})")  # fmt: skip
    doctor.add_argument("--timeout", type=float_in(1, 3600), default=RUN_DEADLINE_S,
                        help=f"the run doctor starts must end within this many seconds (default {RUN_DEADLINE_S:.0f})")
    doctor.add_argument("--json", dest="doctor_json", metavar="PATH", type=output_file, help="write the report here")


def run_id(text: str) -> str:
    if not RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a run id")
    return text


def command(args: argparse.Namespace, settings: Settings) -> int:
    from checkpoint_tui.app.workload import AgentLoopWorkload, UserWorkflow
    from checkpoint_tui.cli.user_workflow import workflow_and_input

    workload = None
    if args.run is not None:
        if args.workflow or args.input_json is not None or args.steps is not None:
            raise UsageError("doctor RUN reads a finished run: --workflow, --input and --steps start one")
        if not settings.ledger_exists:
            raise UsageError(f"no run {args.run!r}: {settings.home} has no ledger yet")
    elif settings.user_worker:
        if args.steps is not None:
            raise UsageError("--steps is for checkpoint-tui's own loop, not --workflow")
        workflow, arg = workflow_and_input(args.workflow, args.input_json)
        workload = UserWorkflow(workflow, arg, args.framework)
    else:
        workload = AgentLoopWorkload(args.steps or DEFAULT_STEPS, 0.0, ())
    json_out = Path(args.doctor_json) if args.doctor_json else None
    return asyncio.run(doctor(settings, workload, args.run, json_out, args.timeout, args.framework))


async def doctor(settings: Settings, workload, run: str | None, json_out: Path | None, deadline_s: float,
                 framework: str | None = None) -> int:  # fmt: skip
    from checkpoint_tui.app.activity_history import read_chain
    from checkpoint_tui.app.doctor import diagnose
    from checkpoint_tui.files import write_output
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect
    from checkpoint_tui.ops.supervisor import Supervisor
    from checkpoint_tui.ops.temporal import connect_client, resolve_address

    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    if run is None:
        sup = Supervisor(settings, address, spare=False)
        sup.acquire()
        await asyncio.to_thread(sup.ensure_worker)
        await workload.ready(settings, client, sup.primary)
        run = await workload.start(settings, client)
        print(f"doctor: started {run} ({workload.title()}); waiting for it to end", flush=True)
        async with sup.running():
            try:
                status = await asyncio.wait_for(workload.wait(settings, client, run, progress=False), deadline_s)
            except TimeoutError:
                raise Unavailable(f"{run} did not end within {deadline_s:.0f} s (--timeout)") from None
        if status != "COMPLETED":
            print(f"doctor: {run} ended {status}; its history is read as it is", flush=True)
    row = queries.run(connect(settings.ledger), run)
    if row is None:
        raise UsageError(f"no run {run!r} in {settings.home}'s ledger")
    chain = await read_chain(client, run, row.first_execution)
    if not chain.executions:
        raise Unavailable(f"Temporal at {address} has no history of {run}")
    diagnosis = diagnose(chain, framework)
    print("\n".join(diagnosis.lines()))
    if json_out is not None:
        write_output(json_out, json.dumps(diagnosis.to_dict(), indent=2, sort_keys=True) + "\n")
    return Exit.FAILED if diagnosis.findings else Exit.OK
