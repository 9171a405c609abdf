"""`checkpoint-tui --verify`: headless kill / retry / restart scenarios on fresh runs, each check
printing the value it looked at. Everything checked is read back from SQLite, the artifact files or
Temporal, never from what this process remembers. Imports no Textual."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from checkpoint_tui.files import write_output
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.bundle import ProofOutputs, ProofRun, emit
from checkpoint_tui.proof.report import Report
from checkpoint_tui.proof.scenarios import SCENARIOS, Context
from checkpoint_tui.settings import Settings


async def run_verify(settings: Settings, json_path: Path | None = None, outputs: ProofOutputs | None = None) -> int:
    started = time.monotonic()
    address, _ = resolve_address(settings)
    # Verify works in its own home (own ledger, artifacts and task queue) on the same Temporal, so it
    # never kills or disturbs the user's runs and workers.
    # With a shared ledger the checks run on it (the same proof on PostgreSQL), on a queue of their own.
    vhome = Settings(
        home=settings.run_dir / "verify",
        temporal_address=address,
        namespace=settings.namespace,
        connection=settings.connection,
        ledger_url=settings.ledger_url,
        temporal_bin=settings.temporal_bin,
    )
    if vhome.home.exists():
        _stop_leftovers(vhome)
        shutil.rmtree(vhome.home)
    vhome.ensure_dirs()
    if vhome.ledger_url:  # a fresh queue per invocation (as a fresh SQLite home has): an earlier
        # invocation's unfinished runs stay in the shared ledger and must not reach our workers
        vhome = replace(vhome, task_queue_name=f"checkpoint-verify-{vhome.home_id}")
    client = await connect_client(vhome, address)
    print(f"verify: Temporal {address} · home {vhome.home}", flush=True)
    report = Report()
    ctx = Context(vhome, address, client, report)
    try:
        for scenario in SCENARIOS:
            try:
                await scenario(ctx)
            except Exception as err:  # a scenario that crashes is a failure with a diagnosis, not a traceback
                report.check(f"{scenario.__name__} ran", False, f"{type(err).__name__}: {err}")
    finally:
        await ctx.close()
    _summarise_latencies(report)
    wall = time.monotonic() - started
    report.figures["verify_wall_s"] = round(wall, 2)
    report.check("verify wall time within 90 s", wall <= 90, f"wall={wall:.1f}s", verify_wall_s=wall)
    total, failed = len(report.checks), len(report.failures)
    if failed:
        print(f"CHECKS FAILED — {failed}/{total}: " + ", ".join(c.name for c in report.failures))
    else:
        print(f"ALL CHECKS PASS — {total}/{total}")
    checks = [asdict(c) for c in report.checks]
    document = {"passed": total - failed, "total": total, "checks": checks, **report.figures}
    if json_path is not None:
        write_output(json_path, json.dumps(document, indent=2), "--json")  # no link followed, atomic
    if outputs is not None and outputs.wanted:  # every run of this invocation: the runs on vhome's queue
        run = ProofRun("checkpoint-tui --verify", vhome, document, report.checks, wall, None, report.figures)
        await emit(outputs, run)
    sys.stdout.flush()
    return 0 if not failed else 1


def _summarise_latencies(report: Report) -> None:
    def median(key: str) -> float | None:
        values = [c.numbers[key] for c in report.checks if isinstance(c.numbers.get(key), float | int)]
        return round(statistics.median(values), 3) if values else None

    report.figures["restart_latency_s"] = median("restart_s")
    report.figures["next_step_latency_s"] = median("next_step_s")
    report.figures["next_step_excess_s"] = median("next_step_excess_s")
    report.figures["unassisted_restart_latency_s"] = median("unassisted_restart_s")


def _stop_leftovers(vhome: Settings) -> None:
    for role in ("active", "spare"):
        w = worker_proc.load(vhome, role)
        if w is not None:
            worker_proc.stop(vhome, w)
