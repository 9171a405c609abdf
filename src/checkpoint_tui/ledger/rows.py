"""What the ledger's reads return: plain frozen dataclasses, so no caller holds a cursor or a row."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.settings import HOST


def worker_label(pid: int | None, host: str | None) -> str:
    """A pid on this host reads as itself; a pid on another host (a shared ledger) as host/pid."""
    if pid is None:
        return ""
    return str(pid) if host in (None, HOST) else f"{host}/{pid}"


# A worker event's JSON detail read back: ours are a few KiB (an assist at 256 runs names each run once,
# ~8 KiB); the ledger is anyone's who can write the home, so a longer one is not parsed at all.
DETAIL_LIMIT = 256 * 1024


def detail_of(text: str | None) -> dict[str, Any]:
    """A worker event's detail as a dict: {} for none, one over DETAIL_LIMIT, one that is not a JSON
    object, or one nested past the parser's reason (RecursionError: a row of 100k brackets)."""
    if not text or len(text) > DETAIL_LIMIT or not text.lstrip().startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


AGENT_LOOP, WORKFLOW = "agent-loop", "workflow"  # runs.kind: which workload a run is (workloads/)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    total_steps: int
    pace: float
    status: str
    provider: str | None
    task_queue: str | None
    error: str | None
    created_at: float
    ended_at: float | None
    first_execution: str | None
    kind: str = AGENT_LOOP  # which workload the run is: AGENT_LOOP | WORKFLOW
    workflow_type: str | None = None  # a user's workflow: its type

    @classmethod
    def of(cls, r: Any) -> RunRow:
        return cls(
            r["run_id"],
            r["total_steps"],
            r["pace"],
            r["status"],
            r["provider"],
            r["task_queue"],
            r["error"],
            r["created_at"],
            r["ended_at"],
            r["first_execution"],
            r["kind"],
            r["workflow_type"],
        )


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    status: str
    total_steps: int
    created_at: float
    done: int
    rows: int = 0  # its ledger rows (effects)
    duplicates: int = 0  # COUNT(*) - COUNT(DISTINCT id) over them
    workflow_type: str | None = None  # a run of a user's workflow: its type (its activities are in history)


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

    @classmethod
    def of(cls, r: Any) -> StepRow:
        return cls(
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
            r["worker_host"],
        )

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
    payload: str = ""


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

    @classmethod
    def of(cls, r: Any) -> WorkerEvent:
        return cls(
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

    @property
    def pid_label(self) -> str:
        return worker_label(self.pid, self.host)


@dataclass(frozen=True)
class EffectTotals:
    rows: int
    duplicates: int  # COUNT(*) - COUNT(DISTINCT id)
    unstamped: int


@dataclass(frozen=True)
class NoteTotals:
    rows: int
    duplicates: int  # rows beyond the first per effect id


@dataclass(frozen=True)
class ComparisonRow:
    naive_run: str
    durable_run: str
    steps: int
    kill_step: int


@dataclass(frozen=True)
class ClaimAttempt:
    """One claim attempt of an effect and its outcome (`interrupted` if its writer died first)."""

    seq: int
    effect_id: str
    step: int
    kind: str
    attempt: int
    worker_pid: int
    host: str | None
    outcome: str
    started_at: float
    finished_at: float | None
    found_written: bool | None = None  # it found its write already done (None: cannot tell, or nothing to write)

    @classmethod
    def of(cls, r: Any) -> ClaimAttempt:
        found = r["found_written"] if "found_written" in r.keys() else None  # noqa: SIM118 - a Row
        return cls(
            r["seq"],
            r["effect_id"],
            r["step"],
            r["kind"],
            r["attempt"],
            r["worker_pid"],
            r["host"],
            r["outcome"],
            r["started_at"],
            r["finished_at"],
            None if found is None else bool(found),
        )
