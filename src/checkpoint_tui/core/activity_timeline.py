"""The app's view of a run of a user's workflow (agent frameworks included): the lab session as it is
(the supervisor runs and kills the user's command, the ledger pane shows the effects library's rows,
history and worker events as always), with the timeline made of the viewed run's activities read from
Temporal history, one row per activity in scheduling order: what it is (`model · scripted-mailer`,
`tool · send_email · call 3f2a…`), attempt, the worker that ran it, where the run resumed on another
worker, tokens from the model's usage. The completion sentence is the audit's (one verdict)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from temporalio.client import Client

from checkpoint_tui.core.activity_audit import audit_of
from checkpoint_tui.core.activity_history import ActivityExec, Chain, read_run
from checkpoint_tui.core.runs import LedgerCall
from checkpoint_tui.core.timeline import Timeline
from checkpoint_tui.core.view import RunCounts, Snapshot, View
from checkpoint_tui.core.workflow_runs import record_end
from checkpoint_tui.frameworks import Classifier
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.inspect_queries import ActivityAttempt, StepDetail
from checkpoint_tui.ledger.rows import StepRow
from checkpoint_tui.settings import Settings

ACTIVITIES_EVERY_S = 0.5  # history is re-read at most this often (a user's run is short; docs/agents.md)
STATUS = {
    "completed": "completed",
    "running": "running",
    "failed": "failed",
    "timed-out": "failed",
    "canceled": "cancelled",
    "scheduled": "scheduled",
}
SHOWN_CHARS = 400  # an input or result summary in the inspector


def step_row(a: ActivityExec) -> StepRow:
    """An activity in the timeline's row shape: step = its place in the run, provider = what it is
    (with the worker identity when it is not the SDK's default `pid@host`, whose pid the pid column shows)."""
    kind = a.label if a.worker_pid is not None or not a.identity else f"{a.label} @ {a.identity}"
    tokens = a.info.tokens if a.info is not None else None
    return StepRow(
        step=a.seq,
        status=STATUS.get(a.status, a.status),
        attempt=a.attempt,
        worker_pid=a.worker_pid,
        started_pid=None,
        provider=kind,
        action=a.info.name if a.info is not None else None,
        thought=a.summary,
        tool_result=None,
        tokens=tokens,
        cost_usd=None,
        started_at=a.started_at,
        ended_at=a.closed_at,
        error=a.last_failure,
        raw_output=None,
        worker_host=a.worker_host,
    )


@dataclass
class ActivityTimeline(Timeline):
    workflow_type: str | None = None
    framework: Classifier = None  # forced (--framework) or declared; None: recognised from the activity types
    strict_models: bool = False  # a model request re-run fails the verdict too
    _acts: tuple[str, float, list[ActivityExec]] | None = None  # (run, when read, activities)
    _chain: Chain | None = None  # the history they were read from (the audit's lost work reads it)
    _counts: RunCounts | None = None  # of the audit behind the completion sentence
    _rows: dict[int, StepRow] = field(default_factory=dict)  # the rows last delivered for the viewed run
    _final: set[str] = field(default_factory=set)  # runs whose activities were read after they closed

    async def apply(self, client: Client, view: View) -> None:
        """The snapshot's step rows and figures from the run's activities; only changed rows after the
        first. Once the workflow is over its history is read once more, then never again."""
        snap: Snapshot = view.snapshot
        acts = await self.activities(client, snap.run_id or "", snap.final_state is not None)
        if view.run_changed:
            self._rows = {}
        rows = [step_row(a) for a in acts]
        snap.steps = [r for r in rows if self._rows.get(r.step) != r]
        self._rows.update({r.step: r for r in snap.steps})
        snap.total_steps, snap.completed_steps = len(acts), sum(a.status == "completed" for a in acts)
        snap.resumed_steps, snap.missing_steps = [a.seq for a in acts if a.resumed], []
        snap.partial = not view.run_changed
        snap.unit, snap.units, snap.outbox = "activity", "activities", False

    async def completion(self, settings: Settings, client: Client, snap: Snapshot, db: LedgerCall) -> str | None:
        """The audit's sentence (the one verdict); the run row's end is written then (nothing in a
        user's worker writes it)."""
        run_id = snap.run_id or ""
        acts = await self.activities(client, run_id, True)
        chain = self._chain if self._chain is not None and self._chain.workflow_id == run_id else None
        audit = await db(
            audit_of, settings, run_id, self.workflow_type, snap.workflow_status, acts, self.strict_models, chain
        )
        self._counts = RunCounts(
            audit.lost, audit.duplicated, len(audit.at_risk), audit.lost_work_count if audit.lost_work else None
        )
        if snap.workflow_status:
            await db(record_end, settings, run_id, snap.workflow_status)
        return audit.sentence()

    def counts(self) -> RunCounts | None:
        return self._counts

    async def activities(self, client: Client, run_id: str, closed: bool) -> list[ActivityExec]:
        """At most one read per ACTIVITIES_EVERY_S while the run is live; once it is over, one read
        after the close was seen (a read from just before it misses the last activity's end), then
        that one for good: a closed run's history no longer changes."""
        cached = self._acts
        recent = cached is not None and time.monotonic() - cached[1] < ACTIVITIES_EVERY_S
        if cached is not None and cached[0] == run_id and (run_id in self._final or (not closed and recent)):
            return cached[2]
        self._chain, acts = await read_run(client, run_id, framework=self.framework)
        self._acts = (run_id, time.monotonic(), acts)
        if closed:
            self._final.add(run_id)
        return acts

    def find(self, run_id: str, seq: int) -> ActivityExec | None:
        acts = self._acts[2] if self._acts is not None and self._acts[0] == run_id else []
        return next((a for a in acts if a.seq == seq), None)

    def detail(self, conn: Ledger, run_id: str, unit: int) -> StepDetail | None:
        """The inspector of one activity: what it is, its input and result as history has them, its
        attempts with their workers, and the effects it claimed through the library."""
        act = self.find(run_id, unit)
        if act is None:
            return None
        claims = [c for c in queries.claim_attempts(conn, run_id) if str(c.step) == act.activity_id]
        ids = {c.effect_id for c in claims}
        effects = [e for e in queries.effects(conn, run_id) if e.id in ids]
        row = step_row(act)
        note = f"input {_shown(act.args)}\nresult {_shown(act.result)}"
        attempts = []
        if act.worker_pid is not None and act.started_at is not None:  # history keeps the closing attempt's worker
            attempts.append(ActivityAttempt(act.label, act.attempt, act.worker_pid, act.worker_host, act.started_at))
        return StepDetail(run_id, row, note, effects, claims, attempts)


def _shown(value: object) -> str:
    import json

    try:
        text = json.dumps(value, ensure_ascii=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
