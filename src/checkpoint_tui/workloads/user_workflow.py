"""A user's own workflow as a workload: any Temporal workflow on their worker command (`--worker-cmd`),
agent frameworks on Temporal included (pydantic-ai's durability, the OpenAI Agents SDK's plugin: an
adapter in frameworks/ classifies their activities, recognised from the activity types or forced
with `framework`). Its units are its activities, read from Temporal history; its effects are the ones
made through the effects library, read from the ledger."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from temporalio.client import Client
from temporalio.service import RPCError

from checkpoint_tui.core.activity_audit import ActivityAudit, audit_of
from checkpoint_tui.core.activity_history import read_run
from checkpoint_tui.core.activity_timeline import ActivityTimeline
from checkpoint_tui.core.runs import LedgerCall
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.core.status_text import activity_status
from checkpoint_tui.core.timeline import Timeline
from checkpoint_tui.core.workflow_runs import NO_INPUT, start_workflow_run, wait_workflow_run
from checkpoint_tui.core.workload import StatusReport, Workload
from checkpoint_tui.errors import UsageError
from checkpoint_tui.frameworks import Classifier, Declared
from checkpoint_tui.ledger.destination import Destination
from checkpoint_tui.ledger.rows import WORKFLOW, RunRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import deployments, fleet
from checkpoint_tui.ops.user_polling import wait_polling, wait_recorded
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.proof.chaos.schedule import ChaosEvent, load_schedule
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.chaos.workflow_schedule import map_event, workload_schedule
from checkpoint_tui.proof.chaos.workflow_target import ActivityTarget
from checkpoint_tui.proof.replay.command import user_workflow_note
from checkpoint_tui.proof.verify import workflow_scenarios
from checkpoint_tui.proof.verify.plan import VerifyPlan
from checkpoint_tui.settings import Settings
from checkpoint_tui.workloads.base import Adapter, Counts


@dataclass(frozen=True)
class UserWorkflow(Adapter):
    workflow: str | None  # its type; None: the app opened on a user's worker without --workflow
    arg: Any = NO_INPUT
    framework: str | None = None  # forced (--framework); None: recognised from the activity types
    strict_models: bool = False  # a re-executed model request fails the verdict too (--strict-models)
    declared: Declared | None = None  # --model-activities / --tool-activities, or [tool.checkpoint-tui]
    destinations: tuple[Destination, ...] = ()  # where its effects land (--effects), read around each run
    kind: ClassVar[str] = WORKFLOW
    unit: ClassVar[str] = "activity"
    units: ClassVar[str] = "activities"

    @classmethod
    def from_row(cls, row: RunRow) -> Adapter:
        return cls(row.workflow_type)

    @property
    def classifier(self) -> Classifier:
        """What classifies its activities: a declaration, the forced framework, or None (recognised)."""
        return self.declared or self.framework

    def title(self) -> str:
        return f"{self.workflow}" + (f" ({self.framework})" if self.framework else "")

    def flags(self, units: int) -> tuple[list[str], list[str]]:
        framework = ["--framework", self.framework] if self.framework else []
        effects = [w for d in self.destinations for w in ("--effects", shlex.quote(d.spec))]
        return ["--worker-cmd", "...", *framework, *effects], ["--workflow", str(self.workflow)]

    def command_flags(self, settings: Settings) -> tuple[list[str], list[str]]:
        framework = ["--framework", self.framework] if self.framework else []
        arg = [] if self.arg is NO_INPUT else ["--input", json.dumps(self.arg)]
        fleet = [f for m in settings.fleet for f in ("--worker", f"{m.queue}={shlex.join(m.cmd)}")]
        fleet += [f for m in settings.deploys for f in ("--deploy", f"{m.queue}={shlex.join(m.cmd)}")]
        fleet += ["--deployment", settings.deployment] if settings.deployment else []
        fleet += ["--data-converter", settings.data_converter] if settings.data_converter else []
        fleet += [f for name, at in settings.dependencies for f in ("--dependency", f"{name}={at}")]
        fleet += [f for name, url in settings.model_endpoints for f in ("--model-endpoint", f"{name}={url}")]
        flags = [*framework, "--worker-cmd", shlex.join(settings.worker_cmd), *fleet]
        return flags, ["--workflow", str(self.workflow), *arg]

    async def start(self, settings: Settings, client: Client, ledger_call: LedgerCall | None = None) -> str:
        if self.workflow is None:
            raise UsageError("which workflow of your worker? open the app with --workflow TYPE (and --input JSON)")
        return await start_workflow_run(settings, client, self.workflow, self.arg, ledger_call)

    async def wait(
        self,
        settings: Settings,
        client: Client,
        run_id: str,
        progress: bool = False,
        timeout: float | None = None,
        patience_s: float = 0.0,
    ) -> str | None:
        return await wait_workflow_run(settings, client, run_id, progress, timeout, patience_s)

    async def ready(
        self, settings: Settings, client: Client, worker: WorkerProc | None, connected: bool = False
    ) -> float | None:
        """Until Temporal lists the worker as a poller (connected or not: a user's command that cannot
        start, or polls elsewhere, is one line, exit 3, now, not a run that never moves)."""
        if worker is None:
            return None
        took = await wait_polling(client, settings, worker)
        slots = range(1, fleet.slot_count(settings)) if settings.fleet or settings.versions else []
        for slot in [s for s in slots if not fleet.standby(settings, s)]:  # every command of a fleet
            other = await wait_recorded(settings, slot)
            took = max(took, await wait_polling(client, settings, other))
        if settings.versions:  # Worker Versioning: version 1 current before any run starts (else none moves)
            await deployments.settle(settings, client)
        return took

    def of_run(self, row: RunRow) -> Workload:
        """A run of a workflow is read with this one's framework and verdict rules (its input is its own)."""
        if row.kind != self.kind:
            return super().of_run(row)
        return self if row.workflow_type == self.workflow else replace(self, workflow=row.workflow_type, arg=NO_INPUT)

    def timeline(self) -> Timeline:
        return ActivityTimeline(self.workflow, self.classifier, self.strict_models)

    async def audit(self, settings: Settings, client: Client | None, run_id: str, status: str | None) -> ActivityAudit:
        if client is None:
            return audit_of(settings, run_id, self.workflow, status, [], self.strict_models)
        chain, acts = await read_run(client, run_id, framework=self.classifier)
        return audit_of(settings, run_id, self.workflow, status, acts, self.strict_models, chain)

    async def status(self, settings: Settings, client: Client | None, row: RunRow, status: str | None) -> StatusReport:
        acts, chain = None, None
        if client is not None:
            try:
                chain, acts = await read_run(client, row.run_id, framework=self.classifier)
            except RPCError:  # gone since status was asked: as unreachable
                acts = None
        snap = build_snapshot(connect(settings.ledger), settings, row.run_id, status)
        audit = audit_of(settings, row.run_id, row.workflow_type, status, acts or [], self.strict_models, chain)
        doc, text = activity_status(row, snap, status, acts, audit)
        return StatusReport(doc, text, read=acts is not None)

    def replay_note(self) -> str | None:
        return user_workflow_note(self.workflow or "?")

    def chaos_schedule(self, seed: int, counts: Counts) -> tuple[list[ChaosEvent], int]:
        return workload_schedule(seed, **counts.as_kwargs())

    def chaos_file(self, path: Path) -> tuple[list[ChaosEvent], int, int | None]:
        events, span, seed = load_schedule(path, None)
        return [map_event(e, path) for e in events], span, seed

    def chaos_target(self, seed: int | None, aim: str = "any", placed: bool = True) -> ChaosTarget:
        return ActivityTarget(self, self.workflow, self.classifier, self.strict_models, aim, seed, placed=placed)

    def verify_plan(self, settings: Settings) -> VerifyPlan:
        on = f"{self.title()} on {Path(settings.worker_cmd[0]).name}" if settings.worker_cmd else self.title()
        return VerifyPlan(
            workflow_scenarios.SCENARIOS, "checkpoint-tui --verify --workflow", on, framework=self.classifier
        )
