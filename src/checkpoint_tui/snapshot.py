"""One Snapshot of a run, built from durable data only (SQLite, artifact files, Temporal).
The TUI, `status` and `--verify` all read it; nothing here remembers anything between builds
except the history cursor (which events were already fetched)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from checkpoint_tui.config import Settings
from checkpoint_tui.ledger.effects import outbox_path


@dataclass(frozen=True)
class StepRow:
    step: int
    status: str
    attempt: int
    worker_pid: int | None
    started_pid: int | None
    provider: str | None
    action: str | None
    thought: str | None
    tool_result: str | None
    tokens: int | None
    cost_usd: float | None
    started_at: float | None
    ended_at: float | None
    error: str | None
    raw_output: str | None

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at


@dataclass(frozen=True)
class EffectRow:
    id: str
    step: int
    kind: str
    attempt: int
    claimed_at: float
    applied_at: float | None
    outcomes: str  # e.g. "applied" or "interrupted,recovered,skipped"


@dataclass(frozen=True)
class WorkerEvent:
    id: int
    at: float
    event: str
    pid: int | None
    run_id: str | None
    step: int | None
    detail: str | None
    restart_s: float | None
    next_step_s: float | None


@dataclass(frozen=True)
class HistoryEvent:
    event_id: int
    time: float
    name: str
    attrs: str


@dataclass
class Snapshot:
    run_id: str | None
    total_steps: int = 0
    run_status: str | None = None  # from SQLite (runs.status)
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
    resumed_steps: list[int] = field(default_factory=list)
    worker_events: list[WorkerEvent] = field(default_factory=list)

    @property
    def completed_steps(self) -> int:
        return sum(1 for s in self.steps if s.status == "completed")

    @property
    def missing_steps(self) -> list[int]:
        done = {s.step for s in self.steps if s.status == "completed"}
        return [i for i in range(1, self.total_steps + 1) if i not in done]

    @property
    def guardrail_step(self) -> StepRow | None:
        return next((s for s in self.steps if s.status == "failed" and s.raw_output), None)

    def status_json(self) -> dict:
        """The stable keys of `checkpoint-tui status --json` (documented in the README)."""
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
            "resumed_steps": self.resumed_steps,
            "provider": self.provider,
            "error": self.run_error,
        }


def build_snapshot(
    conn: sqlite3.Connection,
    settings: Settings,
    run_id: str | None,
    workflow_status: str | None = None,
    with_events: int = 50,
) -> Snapshot:
    if run_id is None:
        return Snapshot(run_id=None, worker_events=_events(conn, None, with_events))
    run = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if run is None:
        raise LookupError(f"no run {run_id!r} in {settings.db_path}")
    snap = Snapshot(
        run_id=run_id,
        total_steps=run["total_steps"],
        run_status=run["status"],
        provider=run["provider"],
        pace=run["pace"],
        run_error=run["error"],
        workflow_status=workflow_status,
    )
    snap.steps = [
        StepRow(
            r["step"],
            r["status"],
            r["attempt"],
            r["worker_pid"],
            r["started_pid"],
            r["provider"],
            r["action"],
            r["thought"],
            r["tool_result"],
            r["tokens"],
            r["cost_usd"],
            r["started_at"],
            r["ended_at"],
            r["error"],
            r["raw_output"],
        )
        for r in conn.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
    ]
    counts = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT id) AS dup, "
        "SUM(CASE WHEN applied_at IS NULL THEN 1 ELSE 0 END) AS unstamped FROM effects WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    snap.ledger_rows, snap.duplicates, snap.unstamped = counts["n"], counts["dup"], counts["unstamped"] or 0
    outcomes: dict[str, list[str]] = {}
    tally: Counter[str] = Counter()
    for r in conn.execute(
        "SELECT effect_id, COALESCE(outcome, 'interrupted') AS o FROM effect_outcomes WHERE run_id = ? ORDER BY seq",
        (run_id,),
    ):
        outcomes.setdefault(r["effect_id"], []).append(r["o"])
        tally[r["o"]] += 1
    snap.outcome_counts = {k: tally.get(k, 0) for k in ("applied", "skipped", "recovered", "interrupted")}
    snap.effects = [
        EffectRow(
            r["id"],
            r["step"],
            r["kind"],
            r["attempt"],
            r["claimed_at"],
            r["applied_at"],
            ",".join(outcomes.get(r["id"], [])),
        )
        for r in conn.execute("SELECT * FROM effects WHERE run_id = ? ORDER BY step, claimed_at", (run_id,))
    ]
    notes = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT effect_id) AS dup FROM notes WHERE run_id = ?", (run_id,)
    ).fetchone()
    snap.notes_rows, snap.notes_duplicates = notes["n"], notes["dup"]
    snap.outbox_lines, snap.outbox_duplicates = outbox_counts(outbox_path(settings.artifacts_dir, run_id))
    run_dir = settings.artifacts_dir / run_id
    snap.artifact_files = len(list(run_dir.glob("step-*.md"))) if run_dir.is_dir() else 0
    pids: list[int] = []
    for s in snap.steps:
        for pid in (s.started_pid, s.worker_pid):
            if pid is not None and pid not in pids:
                pids.append(pid)
    snap.worker_pids = pids
    snap.resumed_steps = resumed_steps(snap.steps)
    snap.worker_events = _events(conn, run_id, with_events)
    return snap


def resumed_steps(steps: list[StepRow]) -> list[int]:
    """Steps whose completing pid differs from the step before: derived, never remembered."""
    out = []
    for prev, cur in zip(steps, steps[1:], strict=False):
        if prev.worker_pid is not None and cur.worker_pid is not None and cur.worker_pid != prev.worker_pid:
            out.append(cur.step)
    return out


def outbox_counts(path: Path) -> tuple[int, int]:
    """(lines, lines beyond the first per effect id)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0, 0
    ids = [line.split("\t", 1)[0] for line in lines if line]
    return len(ids), len(ids) - len(set(ids))


def _events(conn: sqlite3.Connection, run_id: str | None, limit: int) -> list[WorkerEvent]:
    rows = conn.execute(
        "SELECT * FROM worker_events WHERE run_id IS NULL OR run_id = ? OR ? IS NULL ORDER BY id DESC LIMIT ?",
        (run_id, run_id, limit),
    ).fetchall()
    return [
        WorkerEvent(
            r["id"],
            r["at"],
            r["event"],
            r["pid"],
            r["run_id"],
            r["step"],
            r["detail"],
            r["restart_s"],
            r["next_step_s"],
        )
        for r in reversed(rows)
    ]


async def workflow_status(client: Client, run_id: str) -> str | None:
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except RPCError:
        return None
    status = desc.status
    return status.name if isinstance(status, WorkflowExecutionStatus) else None


class HistoryCursor:
    """Fetches a run's Temporal history incrementally: only events after the last one seen."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.last_event_id = 0

    async def fetch_new(self, client: Client) -> list[HistoryEvent]:
        handle = client.get_workflow_handle(self.run_id)
        out: list[HistoryEvent] = []
        async for ev in handle.fetch_history_events(page_size=1000):
            if ev.event_id <= self.last_event_id:
                continue
            out.append(to_history_event(ev))
            self.last_event_id = ev.event_id
        return out


def to_history_event(ev) -> HistoryEvent:
    name = EventType.Name(ev.event_type).removeprefix("EVENT_TYPE_")
    attr_field = ev.WhichOneof("attributes")
    attrs = ""
    if attr_field:
        attrs = _short_attrs(name, getattr(ev, attr_field))
    return HistoryEvent(ev.event_id, ev.event_time.ToSeconds() + ev.event_time.nanos / 1e9, name, attrs)


def _short_attrs(name: str, attrs) -> str:
    parts = []
    for key in ("activity_type", "workflow_type"):
        if attrs.HasField(key) if key in attrs.DESCRIPTOR.fields_by_name else False:
            parts.append(getattr(attrs, key).name)
    for key in ("attempt", "identity", "scheduled_event_id", "started_event_id", "activity_id"):
        if key in attrs.DESCRIPTOR.fields_by_name:
            value = getattr(attrs, key)
            if value:
                parts.append(f"{key}={value}")
    if "failure" in attrs.DESCRIPTOR.fields_by_name and attrs.HasField("failure"):
        parts.append(f"failure={attrs.failure.message[:120]!r}")
    return " ".join(str(p) for p in parts)
