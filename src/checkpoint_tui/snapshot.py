"""One Snapshot of a run, built from durable data only (SQLite, artifact files, Temporal).
The TUI, `status` and `--verify` all read it; nothing here remembers anything between builds
except the history cursor (which events were already fetched)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.config import Settings
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.effects import outbox_path
from checkpoint_tui.ledger.store import HOST


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
    worker_host: str | None = None

    @property
    def worker_label(self) -> str:
        return worker_label(self.worker_pid, self.worker_host)

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
    host: str | None = None

    @property
    def pid_label(self) -> str:
        return worker_label(self.pid, self.host)


def worker_label(pid: int | None, host: str | None) -> str:
    """A pid on this host reads as itself; a pid on another host (a shared ledger) as host/pid."""
    if pid is None:
        return ""
    return str(pid) if host in (None, HOST) else f"{host}/{pid}"


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
    workers: list[str] = field(default_factory=list)  # worker_label of each pid that touched a step
    resumed_steps: list[int] = field(default_factory=list)
    worker_events: list[WorkerEvent] = field(default_factory=list)
    completed_steps: int = 0
    missing_steps: list[int] = field(default_factory=list)
    guardrail_step: StepRow | None = None
    partial: bool = False  # steps/effects hold only rows changed since the previous build

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
            "workers": self.workers,
            "resumed_steps": self.resumed_steps,
            "provider": self.provider,
            "error": self.run_error,
        }


def build_snapshot(
    conn: Ledger,
    settings: Settings,
    run_id: str | None,
    workflow_status: str | None = None,
    with_events: int = 50,
    since: float | None = None,
) -> Snapshot:
    """All figures are computed by SQL over the whole run. With `since`, the row lists (steps,
    effects) hold only rows written at or after it, for a poller that updates tables by key."""
    if run_id is None:
        return Snapshot(run_id=None, worker_events=_events(conn, None, with_events))
    run = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if run is None:
        raise LookupError(f"no run {run_id!r} in {settings.ledger_label}")
    snap = Snapshot(
        run_id=run_id,
        total_steps=run["total_steps"],
        run_status=run["status"],
        provider=run["provider"],
        pace=run["pace"],
        run_error=run["error"],
        workflow_status=workflow_status,
        partial=since is not None,
    )
    step_sql = "SELECT * FROM steps WHERE run_id = ?" + (" AND touched_at >= ?" if since is not None else "")
    step_args = (run_id,) if since is None else (run_id, since)
    snap.steps = [_step_row(r) for r in conn.execute(step_sql + " ORDER BY step", step_args)]
    done = [r[0] for r in conn.execute("SELECT step FROM steps WHERE run_id = ? AND status = 'completed'", (run_id,))]
    snap.completed_steps = len(done)
    done_set = set(done)
    snap.missing_steps = [i for i in range(1, snap.total_steps + 1) if i not in done_set]
    failed = conn.execute(
        "SELECT * FROM steps WHERE run_id = ? AND status = 'failed' AND raw_output IS NOT NULL LIMIT 1", (run_id,)
    ).fetchone()
    snap.guardrail_step = _step_row(failed) if failed else None

    counts = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT id) AS dup, "
        "SUM(CASE WHEN applied_at IS NULL THEN 1 ELSE 0 END) AS unstamped FROM effects WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    snap.ledger_rows, snap.duplicates, snap.unstamped = counts["n"], counts["dup"], counts["unstamped"] or 0
    snap.outcome_counts = {k: 0 for k in ("applied", "skipped", "recovered", "interrupted")}
    for r in conn.execute(
        "SELECT COALESCE(outcome, 'interrupted') AS o, COUNT(*) AS n FROM effect_outcomes WHERE run_id = ? GROUP BY o",
        (run_id,),
    ):
        snap.outcome_counts[r["o"]] = r["n"]
    snap.effects = _effect_rows(conn, run_id, since)
    notes = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT effect_id) AS dup FROM notes WHERE run_id = ?", (run_id,)
    ).fetchone()
    snap.notes_rows, snap.notes_duplicates = notes["n"], notes["dup"]
    snap.outbox_lines, snap.outbox_duplicates = outbox_counts(outbox_path(settings.artifacts_dir, run_id))
    snap.artifact_files = _count_step_files(settings.artifacts_dir / run_id)
    workers = conn.execute(
        "SELECT host, pid FROM (SELECT started_host AS host, started_pid AS pid, step FROM steps WHERE run_id = ? "
        "UNION ALL SELECT worker_host, worker_pid, step FROM steps WHERE run_id = ?) AS u "
        "WHERE pid IS NOT NULL GROUP BY host, pid ORDER BY MIN(step)",
        (run_id, run_id),
    ).fetchall()
    snap.worker_pids = list(dict.fromkeys(r["pid"] for r in workers))
    snap.workers = [worker_label(r["pid"], r["host"]) for r in workers]
    snap.resumed_steps = [
        r[0]
        for r in conn.execute(
            "SELECT step FROM (SELECT step, worker_pid, LAG(worker_pid) OVER (ORDER BY step) AS prev, "
            "worker_host, LAG(worker_host) OVER (ORDER BY step) AS prev_host FROM steps WHERE run_id = ?) AS w "
            "WHERE prev IS NOT NULL AND worker_pid IS NOT NULL "
            "AND (worker_pid != prev OR COALESCE(worker_host, '') != COALESCE(prev_host, ''))",
            (run_id,),
        )
    ]
    snap.worker_events = _events(conn, run_id, with_events)
    return snap


def _step_row(r: Any) -> StepRow:
    return StepRow(
        r["step"], r["status"], r["attempt"], r["worker_pid"], r["started_pid"], r["provider"], r["action"],
        r["thought"], r["tool_result"], r["tokens"], r["cost_usd"], r["started_at"], r["ended_at"], r["error"],
        r["raw_output"], r["worker_host"],
    )  # fmt: skip


def _effect_rows(conn: Ledger, run_id: str, since: float | None) -> list[EffectRow]:
    if since is None:
        rows = conn.execute("SELECT * FROM effects WHERE run_id = ? ORDER BY step, claimed_at", (run_id,)).fetchall()
        outcome_rows = conn.execute(
            "SELECT effect_id, COALESCE(outcome, 'interrupted') AS o FROM effect_outcomes "
            "WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    else:
        changed = conn.execute(
            "SELECT effect_id FROM effect_outcomes WHERE run_id = ? AND (started_at >= ? OR finished_at >= ?)",
            (run_id, since, since),
        ).fetchall()
        ids = sorted({r[0] for r in changed})
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = conn.execute(f"SELECT * FROM effects WHERE id IN ({marks}) ORDER BY step, claimed_at", ids).fetchall()
        outcome_rows = conn.execute(
            f"SELECT effect_id, COALESCE(outcome, 'interrupted') AS o FROM effect_outcomes "
            f"WHERE effect_id IN ({marks}) ORDER BY seq",
            ids,
        ).fetchall()
    outcomes: dict[str, list[str]] = {}
    for r in outcome_rows:
        outcomes.setdefault(r["effect_id"], []).append(r["o"])
    return [
        EffectRow(
            r["id"], r["step"], r["kind"], r["attempt"], r["claimed_at"], r["applied_at"],
            ",".join(outcomes.get(r["id"], [])),
        )
        for r in rows
    ]  # fmt: skip


_dir_counts: dict[Path, tuple[float, int]] = {}


def _count_step_files(run_dir: Path) -> int:
    """Count step files; re-listed only when the directory changed (its mtime moves on every add/replace)."""
    try:
        mtime = run_dir.stat().st_mtime_ns
    except FileNotFoundError:
        return 0
    cached = _dir_counts.get(run_dir)
    if cached and cached[0] == mtime:
        return cached[1]
    count = sum(1 for p in run_dir.iterdir() if p.name.startswith("step-") and p.name.endswith(".md"))
    _dir_counts[run_dir] = (mtime, count)
    return count


_outbox_counts: dict[Path, tuple[tuple[int, int], tuple[int, int]]] = {}


def outbox_counts(path: Path) -> tuple[int, int]:
    """(lines, lines beyond the first per effect id). Re-read only when the file changed."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0, 0
    key = (st.st_size, st.st_mtime_ns)
    cached = _outbox_counts.get(path)
    if cached and cached[0] == key:
        return cached[1]
    lines = path.read_text(encoding="utf-8").splitlines()
    ids = [line.split("\t", 1)[0] for line in lines if line]
    counts = (len(ids), len(ids) - len(set(ids)))
    _outbox_counts[path] = (key, counts)
    return counts


def _events(conn: Ledger, run_id: str | None, limit: int) -> list[WorkerEvent]:
    rows = conn.execute(
        "SELECT * FROM worker_events WHERE run_id IS NULL OR run_id = ? OR CAST(? AS TEXT) IS NULL "
        "ORDER BY id DESC LIMIT ?",
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
            r["host"],
        )
        for r in reversed(rows)
    ]


async def workflow_status(client: Client, run_id: str) -> str | None:
    """Temporal's status of the run (None if Temporal does not know it). An unreachable server
    raises RPCError: callers decide whether that is `temporal-down` or something to wait out."""
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = desc.status
    return status.name if isinstance(status, WorkflowExecutionStatus) else None


class HistoryFollower:
    """Follows a run's Temporal history with a long poll (wait_new_event), so each event is fetched
    once; `drain()` hands over what arrived since the last call."""

    def __init__(self, client: Client, run_id: str, first_execution: str | None = None, keep: int = 2000) -> None:
        self.client = client
        self.run_id = run_id
        self.execution = first_execution  # the Temporal run being read; None: the latest
        self.segment = 0
        self.last_event_id = 0
        self._buffer: deque[HistoryEvent] = deque(maxlen=keep)  # a viewer shows the newest `keep` at most
        self._task: asyncio.Task | None = None
        self.error: str | None = None

    def ensure_following(self) -> None:
        """(Re)start the follower unless it is running or has seen the workflow close."""
        if self._task is None or (self._task.done() and self._task.exception() is not None):
            if self._task is not None:
                self.error = str(self._task.exception())
            self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        """Read each execution of the chain to its end; a continue-as-new event names the next one."""
        while True:
            handle = self.client.get_workflow_handle(self.run_id, run_id=self.execution)
            next_execution = None
            async for ev in handle.fetch_history_events(page_size=1000, wait_new_event=True):
                if ev.event_id <= self.last_event_id:
                    continue
                self._buffer.append(to_history_event(ev, self.segment))
                self.last_event_id = ev.event_id
                if ev.HasField("workflow_execution_continued_as_new_event_attributes"):
                    next_execution = ev.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if next_execution is None:
                break
            self.execution, self.segment, self.last_event_id = next_execution, self.segment + 1, 0
        self.error = None

    def drain(self) -> list[HistoryEvent]:
        out = list(self._buffer)
        self._buffer.clear()
        return out

    @property
    def caught_up(self) -> bool:
        """The follower has seen the workflow close and everything was drained."""
        return self._task is not None and self._task.done() and not self._buffer

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def to_history_event(ev, segment: int = 0) -> HistoryEvent:
    name = EventType.Name(ev.event_type).removeprefix("EVENT_TYPE_")
    attr_field = ev.WhichOneof("attributes")
    attrs = ""
    if attr_field:
        attrs = _short_attrs(name, getattr(ev, attr_field))
    return HistoryEvent(ev.event_id, ev.event_time.ToSeconds() + ev.event_time.nanos / 1e9, name, attrs, segment)


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
