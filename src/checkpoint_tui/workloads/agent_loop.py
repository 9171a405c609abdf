"""checkpoint-tui's own agent loop as a workload (the tutorial one): a multi-step AgentLoop workflow on our
own worker, its steps and effects ledger rows its worker writes, faults planned through the ledger."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from temporalio.client import Client

from checkpoint_tui.core.runs import LedgerCall, start_run, wait_for_run
from checkpoint_tui.core.snapshot import UnknownRun, build_snapshot
from checkpoint_tui.core.status_text import format_status
from checkpoint_tui.core.step_audit import StepAudit, audit_run
from checkpoint_tui.core.timeline import StepTimeline, Timeline
from checkpoint_tui.core.workload import StatusReport, Workload
from checkpoint_tui.errors import Unavailable, UsageError
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.rows import AGENT_LOOP, RunRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.exit_reason import startup_death
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.proof.chaos.loop_target import StepTarget
from checkpoint_tui.proof.chaos.schedule import ChaosEvent, load_schedule, make_schedule
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.verify import loop_scenarios
from checkpoint_tui.proof.verify.plan import VerifyPlan
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until
from checkpoint_tui.workloads.base import Adapter, Counts

READY_TIMEOUT_S = 20.0  # our worker connects to Temporal within this (about 1 s on a quiet machine)
MEASURE_PACE = 1.0  # doctor --measure: its model call thinks 0.4-0.8 s at pace 1 (at pace 0: too brief to hit)


@dataclass(frozen=True)
class AgentLoopWorkload(Adapter):
    steps: int = 30
    pace: float = 1.0
    faults: Sequence[FaultSpec] = field(default_factory=tuple)
    kind: ClassVar[str] = AGENT_LOOP
    unit: ClassVar[str] = "step"
    units: ClassVar[str] = "steps"
    asks_shape: ClassVar[bool] = True
    fault_hooks: ClassVar[bool] = True
    keeps_workers: ClassVar[bool] = True
    shrinkable: ClassVar[bool] = True
    bundles: ClassVar[bool] = True

    @classmethod
    def from_row(cls, row: RunRow) -> Adapter:
        return cls(row.total_steps, row.pace)

    def title(self) -> str:
        return f"AgentLoop · {self.steps} steps · pace {self.pace:g}"

    def flags(self, units: int) -> tuple[list[str], list[str]]:
        return [], ["--steps", str(units)]

    def shaped(self, steps: int, pace: float, faults: Sequence[FaultSpec] = ()) -> AgentLoopWorkload:
        return replace(self, steps=steps, pace=pace, faults=tuple(faults))

    def measured(self) -> AgentLoopWorkload:
        return replace(self, pace=MEASURE_PACE)

    def command_flags(self, settings: Settings) -> tuple[list[str], list[str]]:
        return [], ["--steps", str(self.steps), "--pace", str(self.pace)]

    async def start(self, settings: Settings, client: Client, ledger_call: LedgerCall | None = None) -> str:
        return await start_run(settings, client, self.steps, self.pace, list(self.faults), ledger_call=ledger_call)

    async def wait(
        self,
        settings: Settings,
        client: Client,
        run_id: str,
        progress: bool = False,
        timeout: float | None = None,
        patience_s: float = 0.0,
    ) -> str | None:
        return await wait_for_run(settings, client, run_id, progress=progress, timeout=timeout, patience_s=patience_s)

    async def ready(
        self, settings: Settings, client: Client, worker: WorkerProc | None, connected: bool = False
    ) -> float | None:
        """Our worker takes a run as soon as it connects, and a run started before that waits in its task
        queue: `start` goes on at once. With `connected`, until the worker wrote its ready file (a spare:
        connected and waiting for its turn). A worker that died first is one line, exit 3."""
        if worker is None or not connected:
            return None
        started = time.monotonic()

        def ready() -> bool:
            if not worker.alive() and not worker.ready(settings):
                rc = worker.proc.returncode if worker.proc is not None else None
                log = settings.run_dir / "worker.log"
                raise Unavailable(startup_death("the worker", rc, log, 0, "before it connected"))
            return worker.ready(settings)

        try:
            await wait_until(ready, READY_TIMEOUT_S)
        except TimeoutError:
            raise Unavailable(
                f"the worker (pid {worker.pid}) did not connect to Temporal within "
                f"{READY_TIMEOUT_S:g} s; see {settings.run_dir / 'worker.log'}"
            ) from None
        return time.monotonic() - started

    def of_run(self, row: RunRow) -> Workload:
        if row.kind != self.kind:
            return super().of_run(row)
        return replace(self, steps=row.total_steps, pace=row.pace, faults=())

    def timeline(self) -> Timeline:
        return StepTimeline()

    async def audit(self, settings: Settings, client: Client | None, run_id: str, status: str | None) -> StepAudit:
        conn = connect(settings.ledger)
        return audit_run(conn, settings, build_snapshot(conn, settings, run_id, status))

    async def status(self, settings: Settings, client: Client | None, row: RunRow, status: str | None) -> StatusReport:
        try:
            snap = build_snapshot(connect(settings.ledger), settings, row.run_id, status)
        except UnknownRun as err:
            raise UsageError(str(err)) from None
        return StatusReport(snap.status_json(), format_status(snap))

    def chaos_schedule(self, seed: int, counts: Counts) -> tuple[list[ChaosEvent], int]:
        given = counts.as_kwargs()
        if given.pop("model_faults"):
            raise UsageError("--model-faults goes with --workflow: a model endpoint is a user's agent's")
        del given["models"]
        return make_schedule(seed, self.steps, **given), self.steps

    def chaos_file(self, path: Path) -> tuple[list[ChaosEvent], int, int | None]:
        from checkpoint_tui.proof.nemeses.hop import HOP_KINDS

        events, steps, seed = load_schedule(path, self.steps)
        if (hop := next((e for e in events if e.kind in HOP_KINDS), None)) is not None:  # ours has its hooks
            raise UsageError(
                f"{path}: {hop.kind} is a crash point of a user's worker (--worker-cmd); checkpoint-tui's "
                "own loop crashes at its hooks (claim-window-crash, write-window-crash, ...)"
            )
        return events, steps, seed

    def chaos_target(self, seed: int | None, aim: str = "any", placed: bool = True) -> ChaosTarget:
        return StepTarget(self, self.pace)

    def verify_plan(self, settings: Settings) -> VerifyPlan:
        return VerifyPlan(
            loop_scenarios.SCENARIOS,
            "checkpoint-tui --verify",
            "checkpoint-tui's agent loop",
            summarise=loop_scenarios.summarise,
        )
