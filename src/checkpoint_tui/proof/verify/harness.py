"""`checkpoint-tui --verify` (and `--worker-cmd ... --verify --workflow TYPE`): headless kill / retry /
restart scenarios of the workload on fresh runs, each check printing the value it looked at.
Everything checked is read back from SQLite, the artifact files or Temporal, never from what this
process remembers. Imports no Textual."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from checkpoint_tui.app.workload import AgentLoopWorkload, UserWorkflow, Workload
from checkpoint_tui.files import write_output
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.bundle.writer import ProofOutputs, ProofRun, emit
from checkpoint_tui.proof.report import Report
from checkpoint_tui.proof.verify.loop_scenarios import SCENARIOS, Context
from checkpoint_tui.proof.verify.workflow_scenarios import SCENARIOS as WORKFLOW_SCENARIOS
from checkpoint_tui.proof.verify.workflow_scenarios import WorkflowContext
from checkpoint_tui.settings import Settings


async def run_verify(
    settings: Settings, json_path: Path | None = None, outputs: ProofOutputs | None = None,
    workload: Workload | None = None,
) -> int:  # fmt: skip
    """The --verify scenarios of the workload (ours: proof/verify/loop_scenarios.py; a user's workflow:
    proof/verify/workflow_scenarios.py), each on fresh runs in run/verify, then the one summary and outputs."""
    workload = workload or AgentLoopWorkload()
    user = isinstance(workload, UserWorkflow)
    started = time.monotonic()
    address, _ = resolve_address(settings)
    vhome = verify_home(settings, address)
    if vhome.home.exists():
        for w in worker_proc.load_all(vhome):
            worker_proc.stop(vhome, w)
        shutil.rmtree(vhome.home)
    vhome.ensure_dirs()
    if vhome.ledger_url and not (user and vhome.task_queue_name):  # a fresh queue per invocation (as a
        # fresh SQLite home has): an earlier invocation's unfinished runs stay in the shared ledger
        vhome = replace(vhome, task_queue_name=f"checkpoint-verify-{vhome.home_id}")
    client = await connect_client(vhome, address)
    report = Report()
    if user:
        print(f"verify: {workload.workflow} on {Path(vhome.worker_cmd[0]).name} · Temporal {address} · "
              f"home {vhome.home} · task queue {vhome.task_queue}", flush=True)  # fmt: skip
        ctx, scenarios = WorkflowContext(vhome, address, client, report, workload), WORKFLOW_SCENARIOS
    else:
        print(f"verify: Temporal {address} · home {vhome.home}", flush=True)
        ctx, scenarios = Context(vhome, address, client, report), SCENARIOS
    try:
        for scenario in scenarios:
            try:
                await scenario(ctx)
            except Exception as err:  # a scenario that crashes is a failure with a diagnosis, not a traceback
                report.check(f"{scenario.__name__} ran", False, f"{type(err).__name__}: {str(err)[:300]}")
    finally:
        await ctx.close()
    wall = time.monotonic() - started
    if not user:  # our loop's latency figures and wall-time target (a user's workflow has its own pace)
        _summarise_latencies(report)
        report.check("verify wall time within 90 s", wall <= 90, f"wall={wall:.1f}s", verify_wall_s=wall)
    report.figures["verify_wall_s"] = round(wall, 2)
    return await _finish(report, wall, vhome, json_path, outputs, workload, getattr(ctx, "runs", None))


async def _finish(
    report: Report, wall: float, vhome: Settings, json_path: Path | None, outputs: ProofOutputs | None,
    workload: Workload, runs: list[str] | None,
) -> int:  # fmt: skip
    total, failed = len(report.checks), len(report.failures)
    if failed:
        print(f"CHECKS FAILED — {failed}/{total}: " + ", ".join(c.name for c in report.failures))
    else:
        print(f"ALL CHECKS PASS — {total}/{total}")
    checks = [asdict(c) for c in report.checks]
    document = {"passed": total - failed, "total": total, "checks": checks, **report.figures}
    if runs is not None:
        document["runs"] = runs
    if json_path is not None:
        write_output(json_path, json.dumps(document, indent=2), "--json")  # no link followed, atomic
    if outputs is not None and outputs.wanted:  # every run of this invocation: the runs on vhome's queue
        command = "checkpoint-tui --verify" + (" --workflow" if isinstance(workload, UserWorkflow) else "")
        await emit(outputs, ProofRun(command, vhome, document, report.checks, wall, runs, report.figures))
    sys.stdout.flush()
    return 0 if not failed else 1


def verify_home(settings: Settings, address: str) -> Settings:
    """run/verify: its own ledger (or the shared one), artifacts and task queue, on the same Temporal,
    so it never kills or disturbs the user's runs and workers; a user's worker command goes along."""
    return Settings(
        home=settings.run_dir / "verify", temporal_address=address, namespace=settings.namespace,
        connection=settings.connection, ledger_url=settings.ledger_url, temporal_bin=settings.temporal_bin,
        task_queue_name=settings.task_queue_name if settings.user_worker else None,
        worker_cmd=settings.worker_cmd, worker_cwd=settings.worker_cwd,
    )  # fmt: skip


def _summarise_latencies(report: Report) -> None:
    def median(key: str) -> float | None:
        values = [c.numbers[key] for c in report.checks if isinstance(c.numbers.get(key), float | int)]
        return round(statistics.median(values), 3) if values else None

    report.figures["restart_latency_s"] = median("restart_s")
    report.figures["next_step_latency_s"] = median("next_step_s")
    report.figures["next_step_excess_s"] = median("next_step_excess_s")
    report.figures["unassisted_restart_latency_s"] = median("unassisted_restart_s")
