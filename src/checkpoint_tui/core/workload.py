"""The seam between the lab and what it runs: a `Workload` answers every question the app, `start`,
`status` and `doctor` ask of a run, so none of them asks which kind of workload it is. The proving
tools add two more answers (its chaos target, its --verify scenarios) in workloads/base.py, where
the two workloads live:

- `AgentLoop` (workloads/agent_loop.py): checkpoint-tui's own agent loop, the tutorial workload; its
  steps and effects are ledger rows its worker writes.
- `UserWorkflow` (workloads/user_workflow.py): any Temporal workflow on a user's worker (`--worker-cmd`),
  agent frameworks included; its activities are read from history, its effects (through the effects
  library) from the ledger.

A run's workload is a column of its row (`runs.kind`), so a recorded run is read back as what it is
(`of_run`), whichever workload the command was given.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from temporalio.client import Client

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.core.runs import LedgerCall
from checkpoint_tui.core.timeline import Timeline
from checkpoint_tui.ledger.destination import Destination
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class StatusReport:
    """`status RUN`: the --json document and the text, both from durable data and Temporal."""

    doc: dict[str, Any]  # the --json document
    text: str
    read: bool = True  # False: Temporal's history could not be read, and the text says there is no verdict


class Workload(ABC):
    """What every workload answers; see the module docstring."""

    kind: ClassVar[str]  # the runs.kind of its runs: "agent-loop" | "workflow"
    unit: ClassVar[str]  # the word for one unit of work, on screen and in reports: "step" | "activity"
    units: ClassVar[str]  # its plural
    asks_shape: ClassVar[bool] = False  # the app's `n` asks steps and pace before it starts a run
    fault_hooks: ClassVar[bool] = False  # its worker deals the faults planned for a run (`--fault`, the app's `f`)
    # Its workers outlive a chaos run (the next round's supervisor adopts them; `stop` ends them). A
    # user's worker command is stopped with the chaos that started it: nothing of theirs is left behind.
    keeps_workers: ClassVar[bool] = False
    # Where its effects land (--effects), read around each chaos run; none for our loop (its effects are
    # the ledger's and the artifact files', which its own audit reads).
    destinations: tuple[Destination, ...] = ()

    @abstractmethod
    def title(self) -> str:
        """What a run of it is, in a few words (`AgentLoop · 30 steps`, `SendLines (pydantic-ai)`)."""

    def shaped(self, steps: int, pace: float, faults: Sequence[FaultSpec] = ()) -> Workload:
        """The workload with the shape the app's `n` dialog picked and the faults planned for the next
        run (a workload that asks for no shape is its own)."""
        return self

    @abstractmethod
    def command_flags(self, settings: Settings) -> tuple[list[str], list[str]]:
        """(global flags, `start` flags) of a `checkpoint-tui` child process that starts a run of it
        (beyond --home and what travels in the environment)."""

    def measured(self) -> Workload:
        """The workload `doctor --measure` kills under (ours thinks long enough to be hit)."""
        return self

    @abstractmethod
    async def start(self, settings: Settings, client: Client, ledger_call: LedgerCall | None = None) -> str:
        """Write the run row, start the workflow; returns the run id (= the workflow id). `ledger_call`
        runs the ledger writes elsewhere (the app's ledger thread)."""

    @abstractmethod
    async def wait(
        self,
        settings: Settings,
        client: Client,
        run_id: str,
        progress: bool = False,
        timeout: float | None = None,
        patience_s: float = 0.0,
    ) -> str | None:
        """Until the workflow closes (or `timeout`): Temporal's status; the run row's end is written. A
        workflow task failing for `patience_s` in a row ends the wait (STUCK, core/stuck.py)."""

    @abstractmethod
    async def ready(
        self, settings: Settings, client: Client, worker: WorkerProc | None, connected: bool = False
    ) -> float | None:
        """Before a run starts: the worker can take it (a worker that cannot start is one line, exit 3);
        with `connected`, until it is polling (failover is measured from there). The seconds it took."""

    @abstractmethod
    def of_run(self, row: RunRow) -> Workload:
        """The workload a recorded run of this home is, as this one reads it (its kind is the row's)."""

    @abstractmethod
    def timeline(self) -> Timeline:
        """How the app reads one of its runs: the timeline's rows, the completion sentence, the inspector."""

    @abstractmethod
    async def audit(self, settings: Settings, client: Client | None, run_id: str, status: str | None) -> Audit:
        """The run judged from durable data (the ledger, the artifact files, Temporal's history): the one
        verdict `status`, the app and chaos show. `client` None: Temporal cannot be reached."""

    @abstractmethod
    async def status(self, settings: Settings, client: Client | None, row: RunRow, status: str | None) -> StatusReport:
        """`status RUN`; `client` None: Temporal cannot be reached (status never starts a server)."""

    def replay_note(self) -> str | None:
        """None if `replay` replays its histories on checkpoint-tui's own workflow code, else why not and
        what replays them instead."""
        return None
