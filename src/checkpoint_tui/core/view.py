"""What the app shows, as plain data: a `Snapshot` of one run (built from durable data only) and the
`View` a poll hands to the TUI. Nothing here talks to Temporal, the ledger or a process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checkpoint_tui.core.tick_stats import TickStats
from checkpoint_tui.ledger.inspect_queries import FleetEvent, KillEvent
from checkpoint_tui.ledger.rows import EffectRow, StepRow, WorkerEvent
from checkpoint_tui.ops.state import SupervisorState

if TYPE_CHECKING:
    from checkpoint_tui.core.pending_activity import PendingActivity


@dataclass(frozen=True)
class HistoryEvent:
    event_id: int
    time: float
    name: str
    attrs: str
    segment: int = 0  # which execution of the continue-as-new chain (0 = the first)

    @property
    def key(self) -> str:
        return f"{self.segment}:{self.event_id}"


FINAL_STATES = {
    "COMPLETED": "completed",
    "CANCELED": "cancelled",
    "FAILED": "failed",
    "TERMINATED": "failed",
    "TIMED_OUT": "failed",
}


@dataclass
class Snapshot:
    run_id: str | None
    total_steps: int = 0
    run_status: str | None = None  # from the ledger (runs.status)
    workflow_status: str | None = None  # from Temporal
    provider: str | None = None
    pace: float | None = None
    run_error: str | None = None
    steps: list[StepRow] = field(default_factory=list)
    effects: list[EffectRow] = field(default_factory=list)
    ledger_rows: int = 0
    duplicates: int = 0
    unstamped: int = 0
    outcome_counts: dict[str, int] = field(default_factory=dict)
    outbox_lines: int = 0
    outbox_duplicates: int = 0
    notes_rows: int = 0
    notes_duplicates: int = 0
    artifact_files: int = 0
    worker_pids: list[int] = field(default_factory=list)
    workers: list[str] = field(default_factory=list)  # worker_label of each pid that touched a step
    resumed_steps: list[int] = field(default_factory=list)
    worker_events: list[WorkerEvent] = field(default_factory=list)
    completed_steps: int = 0
    missing_steps: list[int] = field(default_factory=list)
    guardrail_step: StepRow | None = None
    partial: bool = False  # steps/effects hold only rows changed since the previous build
    truncated_steps: list[int] = field(default_factory=list)  # of `steps`: the model's answer was cut
    # What a row of `steps` is (its timeline says: our loop's step, or a user workflow's activity), and
    # whether the run's emails go to our outbox file (a user's workflow writes its own outputs).
    unit: str = "step"
    units: str = "steps"
    outbox: bool = True
    workflow_type: str | None = None  # a user's workflow: its type (its row's; our loop's is None)

    @property
    def final_state(self) -> str | None:
        """completed / failed / cancelled once the run is over (Temporal's word first), else None."""
        status = FINAL_STATES.get(self.workflow_status or "")
        if status is None and self.run_status in ("completed", "failed", "cancelled"):
            status = self.run_status
        return status

    def finishers(self) -> int:
        """Worker processes (host, pid) that completed a step, from the step rows (a whole snapshot)."""
        return len({(s.worker_host, s.worker_pid) for s in self.steps if s.status == "completed" and s.worker_pid})

    def completion_sentence(self, finishers: int | None = None) -> str | None:
        """`run completed — N steps, M ledger rows, duplicates D · applied exactly once across K worker
        processes`, or `run failed|cancelled — ...` with what is known; None while the run is live.
        Every number is the ledger's; `finishers` defaults to counting this snapshot's step rows."""
        state = self.final_state
        if state is None or self.run_id is None:
            return None
        k = self.finishers() if finishers is None else finishers
        done = self.completed_steps
        whole = state == "completed" and done == self.total_steps
        steps = f"{done} steps" if whole else f"{done} of {self.total_steps} steps"
        once = self.duplicates == 0 and self.unstamped == 0 and self.outbox_duplicates == 0
        if state == "completed" and done != self.total_steps:
            once = False
        claim = "applied exactly once" if once else "NOT exactly once"
        if self.unstamped:
            claim += f" ({self.unstamped} unstamped)"
        return (
            f"run {state} — {steps}, {self.ledger_rows} ledger rows, duplicates {self.duplicates} · "
            f"{claim} across {k} worker process{'' if k == 1 else 'es'}"
        )

    def status_json(self) -> dict:
        """The stable keys of `checkpoint-tui status --json` (documented in docs/commands.md)."""
        return {
            "run_id": self.run_id,
            "workflow_status": self.workflow_status,
            "run_status": self.run_status,
            "completed_steps": self.completed_steps,
            "total_steps": self.total_steps,
            "missing_steps": self.missing_steps,
            "ledger_rows": self.ledger_rows,
            "duplicates": self.duplicates,
            "unstamped_effects": self.unstamped,
            "outcomes": self.outcome_counts,
            "outbox_lines": self.outbox_lines,
            "outbox_duplicates": self.outbox_duplicates,
            "notes_rows": self.notes_rows,
            "notes_duplicates": self.notes_duplicates,
            "artifact_files": self.artifact_files,
            "worker_pids": self.worker_pids,
            "workers": self.workers,
            "resumed_steps": self.resumed_steps,
            "provider": self.provider,
            "error": self.run_error,
        }


@dataclass(frozen=True)
class FleetCommand:
    """One worker command of a user's fleet as its slots stand (core/fleet_view.py reads it)."""

    queue: str
    live: int  # its slots with a live worker
    slots: int
    deployed: bool = False  # its slots run its --deploy command (the new version)
    down_until: float | None = None  # a fleet-down holds its workers down until this wall time


@dataclass(frozen=True)
class Backlog:
    """Tasks waiting on the fleet's queues (workflow and activity tasks), as Temporal counts them."""

    total: int
    queues: tuple[tuple[str, int], ...]  # each queue with its tasks, in the fleet's order


@dataclass(frozen=True)
class RunCounts:
    """A user's workflow run's counts once it is over, from the very audit its completion sentence came
    from (one verdict, one source)."""

    lost: int
    duplicated: int
    at_risk: int
    lost_work: int | None  # None: the audit read no history, so it could not count lost work


@dataclass
class View:
    snapshot: Snapshot
    history: list[HistoryEvent] = field(default_factory=list)  # only events not delivered before
    run_changed: bool = False  # a different run than the last View: panes start afresh
    address: str = ""
    ui_url: str | None = None
    namespace: str = "default"
    supervisor_state: SupervisorState = SupervisorState.STARTING
    worker_pid: int | None = None  # the pool's first worker (slot 0)
    spare_pid: int | None = None
    pool_pids: list[int] = field(default_factory=list)  # every active worker of a --workers N pool
    ledger: str | None = None  # a shared ledger's label; None: this home's SQLite file
    owns_home: bool = False  # this app's supervisor holds the home's lock (else it only observes)
    planned_faults: list[str] = field(default_factory=list)
    stats: TickStats = field(default_factory=TickStats)  # what building this View cost
    quiet: bool = False  # nothing new since the previous View: no ledger commit, no history event
    completion: str | None = None  # the completion sentence, once the run is over (computed once)
    kills: list[KillEvent] = field(default_factory=list)  # the run's kills not delivered before
    pending: PendingActivity | None = None  # the in-flight activity as Temporal last described it (<= 1/s)
    stuck: str | None = None  # the run's workflow task keeps failing: what it says (core/stuck.py)
    marks: list[FleetEvent] = field(default_factory=list)  # the run's fleet events not delivered before
    fleet: list[FleetCommand] | None = None  # a fleet's commands (None: our worker, or one command)
    backlog: Backlog | None = None  # the task queues' backlog (a user's workers); None: unknown
    counts: RunCounts | None = None  # the audit's counts, once the run is over (a user's workflow)
