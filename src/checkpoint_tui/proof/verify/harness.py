"""`checkpoint-tui --verify` (with `--worker-cmd ... --workflow TYPE`, on a user's workflow): the
workload's headless kill / retry / restart scenarios (its `VerifyPlan`) on fresh runs, each check
printing the value it looked at. Everything checked is read back from the ledger, the artifact files
or Temporal, never from what this process remembers. Imports no Textual."""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from checkpoint_tui.app.workload import Workload
from checkpoint_tui.files import write_output
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.bundle.writer import ProofOutputs, ProofRun, emit
from checkpoint_tui.proof.report import Report
from checkpoint_tui.proof.verify.plan import VerifyContext, VerifyPlan
from checkpoint_tui.settings import Settings


async def run_verify(
    settings: Settings, workload: Workload, plan: VerifyPlan, json_path: Path | None = None,
    outputs: ProofOutputs | None = None,
) -> int:  # fmt: skip
    """The plan's scenarios, each on fresh runs in run/verify, then the one summary and outputs."""
    started = time.monotonic()
    address, _ = resolve_address(settings)
    vhome = verify_home(settings, address)
    if vhome.home.exists():
        for w in worker_proc.load_all(vhome):
            worker_proc.stop(vhome, w)
        shutil.rmtree(vhome.home)
    vhome.ensure_dirs()
    if vhome.ledger_url and not vhome.task_queue_name:  # a fresh queue per invocation (as a fresh SQLite
        # home has): an earlier invocation's unfinished runs stay in the shared ledger
        vhome = replace(vhome, task_queue_name=f"checkpoint-verify-{vhome.home_id}")
    client = await connect_client(vhome, address)
    report = Report()
    print(f"verify: {workload.title()} · Temporal {address} · home {vhome.home} · task queue {vhome.task_queue}",
          flush=True)  # fmt: skip
    ctx = VerifyContext(vhome, address, client, report, workload, framework=plan.framework)
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
    report: Report, wall: float, vhome: Settings, json_path: Path | None, outputs: ProofOutputs | None,
    command: str, runs: list[str],
) -> int:  # fmt: skip
    total, failed = len(report.checks), len(report.failures)
    if failed:
        print(f"CHECKS FAILED — {failed}/{total}: " + ", ".join(c.name for c in report.failures))
    else:
        print(f"ALL CHECKS PASS — {total}/{total}")
    checks = [asdict(c) for c in report.checks]
    document = {"passed": total - failed, "total": total, "checks": checks, **report.figures, "runs": runs}
    if json_path is not None:
        write_output(json_path, json.dumps(document, indent=2), "--json")  # no link followed, atomic
    if outputs is not None and outputs.wanted:
        await emit(outputs, ProofRun(command, vhome, document, report.checks, wall, runs, report.figures))
    sys.stdout.flush()
    return 0 if not failed else 1


def verify_home(settings: Settings, address: str) -> Settings:
    """run/verify: its own ledger (or the shared one), artifacts and task queue, on the same Temporal,
    so it never kills or disturbs the user's runs and workers; a worker command of the user's goes along
    with the task queue it was given."""
    return Settings(
        home=settings.run_dir / "verify", temporal_address=address, namespace=settings.namespace,
        connection=settings.connection, ledger_url=settings.ledger_url, temporal_bin=settings.temporal_bin,
        task_queue_name=settings.task_queue_name if settings.worker_cmd else None,
        worker_cmd=settings.worker_cmd, worker_cwd=settings.worker_cwd,
    )  # fmt: skip
