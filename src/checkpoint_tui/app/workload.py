"""The seam between the lab and what it runs. A workload says how a run starts and ends, what its units
of work are (our loop's steps, or a workflow's activities), and how a unit is named on screen. chaos,
--verify, the audit, `status` and the app take one and never ask which kind it is beyond `kind`.

- `AgentLoopWorkload`: checkpoint-tui's own agent loop; its steps and effects are ledger rows.
- `UserWorkflow`: any Temporal workflow on a user's worker (`--worker-cmd`); its activities are read
  from history, its effects (through the effects library) from the ledger. An agent framework on
  Temporal (pydantic-ai's durability, the OpenAI Agents SDK's plugin) is a user workflow whose
  activities its adapter classifies (app/frameworks/), recognised from the activity types or forced
  with `framework`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from temporalio.client import Client

from checkpoint_tui.app.activity_history import ActivityExec, read_activities
from checkpoint_tui.app.runs import start_run, wait_for_run
from checkpoint_tui.app.workflow_runs import NO_INPUT, start_workflow_run, wait_workflow_run, workflow_type_of
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.ops.user_worker import wait_polling
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import Settings

POLLING_WAIT_S = 30.0  # a worker command this slow to poll is reported rather than waited on


class Workload:
    """What every workload answers; see the module docstring."""

    kind: ClassVar[str]
    unit: ClassVar[str]  # "step" | "activity": the word for one unit of work, on screen and in reports

    def title(self) -> str:
        raise NotImplementedError

    async def start(self, settings: Settings, client: Client) -> str:
        """Write the run row, start the workflow; returns the run id (= the workflow id)."""
        raise NotImplementedError

    async def wait(
        self, settings: Settings, client: Client, run_id: str, progress: bool = False, timeout: float | None = None
    ) -> str | None:
        """Until the workflow closes (or `timeout`): Temporal's status."""
        raise NotImplementedError

    async def ready(self, settings: Settings, client: Client, worker: WorkerProc | None) -> None:
        """Before a run starts: the worker can take it (ours registers before it is recorded)."""


@dataclass(frozen=True)
class AgentLoopWorkload(Workload):
    steps: int = 30
    pace: float = 1.0
    faults: Sequence[FaultSpec] = field(default_factory=tuple)
    kind: ClassVar[str] = "agent-loop"
    unit: ClassVar[str] = "step"

    def title(self) -> str:
        return f"AgentLoop · {self.steps} steps"

    async def start(self, settings: Settings, client: Client) -> str:
        return await start_run(settings, client, self.steps, self.pace, list(self.faults))

    async def wait(
        self, settings: Settings, client: Client, run_id: str, progress: bool = False, timeout: float | None = None
    ) -> str | None:
        return await wait_for_run(settings, client, run_id, progress=progress, timeout=timeout)


@dataclass(frozen=True)
class UserWorkflow(Workload):
    workflow: str
    arg: Any = NO_INPUT
    framework: str | None = None  # forced (--framework); None: recognised from the activity types
    kind: ClassVar[str] = "workflow"
    unit: ClassVar[str] = "activity"

    def title(self) -> str:
        return f"{self.workflow}" + (f" ({self.framework})" if self.framework else "")

    async def start(self, settings: Settings, client: Client) -> str:
        return await start_workflow_run(settings, client, self.workflow, self.arg)

    async def wait(
        self, settings: Settings, client: Client, run_id: str, progress: bool = False, timeout: float | None = None
    ) -> str | None:
        return await wait_workflow_run(settings, client, run_id, progress=progress, timeout=timeout)

    async def ready(self, settings: Settings, client: Client, worker: WorkerProc | None) -> None:
        """A user's command that cannot start, or polls elsewhere, is one line (exit 3) now, not a
        run that never moves."""
        if worker is not None:
            await wait_polling(client, settings, worker, timeout=POLLING_WAIT_S)

    async def units(self, client: Client, run_id: str) -> list[ActivityExec]:
        """The run's activities in scheduling order, classified, open ones with their pending state."""
        return await read_activities(client, run_id, framework=self.framework)


def user_workload(session: object) -> UserWorkflow | None:
    """The user workflow a session (the app's) runs with `n`, or None for our own loop."""
    workload = getattr(session, "workload", None)
    return workload if isinstance(workload, UserWorkflow) else None


def workload_of(row: RunRow | None, framework: str | None = None) -> Workload:
    """The workload a recorded run belongs to (a row of a user's workflow names its type)."""
    workflow = workflow_type_of(row.provider) if row is not None else None
    if workflow is not None:
        return UserWorkflow(workflow, framework=framework)
    steps = row.total_steps if row is not None else 30
    return AgentLoopWorkload(steps, row.pace if row is not None and row.pace is not None else 1.0)
