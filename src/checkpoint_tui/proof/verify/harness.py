"""`checkpoint-tui --verify` (with `--worker-cmd ... --workflow TYPE`, on a user's workflow): the
workload's headless kill / retry / restart scenarios (its `VerifyPlan`) on fresh runs, each check
printing the value it looked at. Everything checked is read back from the ledger, the artifact files
or Temporal, never from what this process remembers. Imports no Textual."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from checkpoint_tui.core.workload import Workload
from checkpoint_tui.files import write_output
from checkpoint_tui.ledger.destination import read_ids
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.bundle.proof_run import ProofRun
from checkpoint_tui.proof.bundle.writer import ProofOutputs, emit
from checkpoint_tui.proof.report import Report
from checkpoint_tui.proof.report.codec import encode
from checkpoint_tui.proof.report.verify import VerifyReport
from checkpoint_tui.proof.verify.plan import VerifyContext, VerifyPlan
from checkpoint_tui.settings import Settings


async def run_verify(
    settings: Settings,
    workload: Workload,
    plan: VerifyPlan,
    json_path: Path | None = None,
    outputs: ProofOutputs | None = None,
    strict_latency: bool = False,
) -> int:
    """The plan's scenarios, each on fresh runs in run/verify, then the one summary and outputs."""
    started = time.monotonic()
    address, _ = resolve_address(settings)
    vhome = settings.verify_home(address)
    if vhome.home.exists():
        for w in worker_proc.load_all(vhome):
            worker_proc.stop(vhome, w)
        shutil.rmtree(vhome.home)
    vhome.ensure_dirs()
    if vhome.ledger_url and not vhome.task_queue_name:  # a fresh queue per invocation (as a fresh SQLite
        # home has): an earlier invocation's unfinished runs stay in the shared ledger
        vhome = replace(vhome, task_queue_name=f"checkpoint-verify-{vhome.home_id}")
    client = await connect_client(vhome, address)
    report = Report(strict_latency)
    print(f"verify: {plan.header} · Temporal {address} · home {vhome.home} · task queue {vhome.task_queue}", flush=True)
    ctx = VerifyContext(vhome, address, client, report, workload, framework=plan.framework)
    ctx.readings = [await asyncio.to_thread(read_ids, d, vhome.run_dir) for d in getattr(workload, "destinations", ())]
    try:
        for scenario in plan.scenarios:
            try:
                await scenario(ctx)
            except Exception as err:  # a scenario that crashes is a failure with a diagnosis, not a traceback
                report.check(f"{scenario.__name__} ran", False, f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        await ctx.close()
    wall = time.monotonic() - started
    plan.summarise(report, wall)
    report.figures["verify_wall_s"] = round(wall, 2)
    return await _finish(report, wall, vhome, json_path, outputs, plan.command, ctx.runs)


async def _finish(
    report: Report,
    wall: float,
    vhome: Settings,
    json_path: Path | None,
    outputs: ProofOutputs | None,
    command: str,
    runs: list[str],
) -> int:
    total, failed = len(report.checks), len(report.failures)
    if failed:
        print(f"CHECKS FAILED — {failed}/{total}: " + ", ".join(c.name for c in report.failures))
    else:
        print(f"ALL CHECKS PASS — {total}/{total}")
    if report.slow:  # said after the verdict, never inside it: they did not gate
        names = ", ".join(c.name for c in report.slow)
        print(f"over a latency target on this machine (not gating; --strict-latency gates): {names}")
    document = VerifyReport.of(report, runs)
    if json_path is not None:
        write_output(json_path, json.dumps(encode(document), indent=2), "--json")  # no link followed, atomic
    if outputs is not None and outputs.wanted:
        await emit(outputs, ProofRun(command, vhome, document, report.checks, wall, runs, report.figures))
    sys.stdout.flush()
    return 0 if not failed else 1
