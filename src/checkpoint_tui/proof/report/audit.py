"""A run's audit as a report holds it: our loop's (core/step_audit.py, StepAudit) or a user's workflow's
(core/activity_audit.py, ActivityAudit), each field as its `to_dict()` writes it, with the verdict the
audit gave (`ok`, `verdict`) kept as written rather than worked out again. A report's audit is a step
audit when it has `total_steps`, else an activity audit (hence the defaults: a report built by hand,
or an older one, names only some fields)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.proof.report.codec import Json, decode_union
from checkpoint_tui.proof.report.fields import empty_none, key, omitted, rest


@dataclass(kw_only=True)
class Call:
    """A re-executed activity as the audit lists it (core/activity_history.ActivityExec.to_dict): whether
    the effects library guarded it and its effects' lines; one that never ran says why."""

    seq: int | None = None
    activity_id: str | None = None
    type: str | None = None
    attempt: int | None = None
    identity: str | None = None
    status: str | None = None
    segment: int | None = None
    execution: str | None = None
    duration_s: float | None = None
    scheduled_at: float | None = None  # its first attempt's (wall clock)
    started_at: float | None = None  # its last attempt's
    last_failure: str | None = None
    resumed: bool | None = None
    cls: str | None = key("class", None)
    label: str | None = None
    summary: str | None = None
    tool: str | None = None  # a tool call's name
    call_id: str | None = None
    args_digest: str | None = None
    tokens: int | None = None
    heartbeat_timeout_s: float | None = None
    start_to_close_s: float | None = None
    guarded: bool | None = None
    effects: list[str] = field(default_factory=list)
    why: str | None = omitted()  # never ran: decode error | fails before any claim
    more: dict[str, Json] = rest()

    @property
    def id(self) -> tuple[str, str]:
        """(execution, activity id): activity ids repeat across the executions of a chain."""
        return str(self.execution), str(self.activity_id)


@dataclass(kw_only=True)
class DestinationDuplicate:
    """An id a destination (--effects) holds more than once, and the calls whose arguments name it."""

    destination: str | None = None
    id: str | None = None
    copies: int = 0
    extra: int = 0
    calls: list[str] = field(default_factory=list)
    activity_ids: list[str] = field(default_factory=list)
    more: dict[str, Json] = rest()


@dataclass(kw_only=True)
class LostUnit:
    """One unit of lost work's JSON (core/lost_work.entry): a timeout, a workflow task failure, the
    outcome; whether it is lost, and its line."""

    lost: bool = False
    line: str = ""
    more: dict[str, Json] = rest()


@dataclass(kw_only=True)
class Latency:
    """Schedule-to-start latency over a run's tasks of one kind (core/workflow_end.Latency)."""

    samples: int = 0
    p50_s: float | None = None
    p99_s: float | None = None
    max_s: float | None = None


@dataclass(kw_only=True)
class LostWork:
    """What a run lost and what it only waited out (core/lost_work.LostWork.to_dict); empty when
    history was not read."""

    lost: int = 0
    first: str | None = None
    units: list[str] = field(default_factory=list)
    timeouts: list[LostUnit] = field(default_factory=list)
    timeouts_total: int = 0
    task_failures: list[LostUnit] = field(default_factory=list)
    task_failures_total: int = 0
    outcome: LostUnit | None = None
    schedule_to_start: dict[str, Latency | None] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)  # workflow tasks per Worker Deployment Version
    more: dict[str, Json] = rest()


@dataclass(kw_only=True)
class StepAuditRecord:
    """Our loop's audit: every expected effect against the ledger, the files and the outbox."""

    run_id: str | None = None
    workflow_status: str | None = None
    total_steps: int
    claims_attempted: int = 0
    applied: int = 0
    skipped: int = 0
    recovered: int = 0
    interrupted: int = 0
    lost: int = 0
    duplicated: int = 0
    step_gaps: list[int] = field(default_factory=list)
    lost_detail: list[str] = field(default_factory=list)
    duplicated_detail: list[str] = field(default_factory=list)
    ok: bool | None = None
    verdict: str | None = None


@dataclass(kw_only=True)
class ActivityAuditRecord:
    """A user's workflow's audit: its activities from history against the effects library's claims
    (and, with --effects, against where the effects land)."""

    run_id: str | None = None
    workflow_type: str | None = None
    workflow_status: str | None = None
    activities: int = 0
    completed: int = 0
    framework: str | None = None
    strict_models: bool = False
    re_executed: list[Call] = field(default_factory=list)
    at_risk: list[Call] = field(default_factory=list)
    guarded_re_executed: list[Call] = field(default_factory=list)
    model_reruns: list[Call] = field(default_factory=list)
    tokens_paid_again: int = 0
    never_ran: list[Call] = field(default_factory=list)
    tool_calls: int = 0
    model_requests: int = 0
    effects: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    unstamped: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    re_entered: list[str] = field(default_factory=list)
    duplicate_ids: int = 0
    probe_available: bool = False
    probe_writes: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    duplicated: int = 0
    lost_detail: list[str] = field(default_factory=list)
    duplicated_detail: list[str] = field(default_factory=list)
    lost_work: LostWork | None = empty_none()  # None ({}): history was not read
    lost_work_count: int = 0
    destinations: list[dict[str, Json]] = field(default_factory=list)  # each destination's reading
    effect_once: list[Call] = field(default_factory=list)
    destination_duplicates: list[DestinationDuplicate] = field(default_factory=list)
    ok: bool | None = None
    verdict: str | None = None

    @property
    def calls(self) -> dict[str, list[Call]]:
        """Its lists of calls by their key in the report (what the chaos lab's summed totals count)."""
        return {
            "re_executed": self.re_executed,
            "guarded_re_executed": self.guarded_re_executed,
            "at_risk": self.at_risk,
            "model_reruns": self.model_reruns,
            "never_ran": self.never_ran,
        }


AuditRecord: TypeAlias = StepAuditRecord | ActivityAuditRecord


def read_audit(value: object, path: str = "audit") -> AuditRecord:
    """An audit's JSON as its record: a step audit when it has `total_steps`, else an activity audit."""
    found = decode_union(AuditRecord, value, path)
    assert isinstance(found, StepAuditRecord | ActivityAuditRecord)
    return found


def audit_record(audit: Audit) -> AuditRecord:
    """The report's record of a workload's audit, read from the JSON it gives of itself (so what is
    written is what a reader of the report gets)."""
    return read_audit(audit.to_dict())
