"""How a workflow's own tasks went, from its history: spells of workflow task failures (how long the run
was stuck, or that it still is), how the workflow ended when it did not complete, and schedule-to-start
latency. Pure; core/lost_work.py counts what of it is lost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from temporalio.api.enums.v1 import VersioningBehavior, WorkflowTaskFailedCause

from checkpoint_tui.core.activity_history import is_reset_event, plain
from checkpoint_tui.core.chain import Chain

MESSAGE_LIMIT = 200  # characters of a message from history
MAX_VERSIONS = 16  # distinct versions counted in a run's history
CAUSE_DEPTH = 32  # a failure's cause chain is followed this far (history is untrusted)
_ENDS = {
    "workflow_execution_failed_event_attributes": "FAILED",
    "workflow_execution_timed_out_event_attributes": "TIMED_OUT",
    "workflow_execution_terminated_event_attributes": "TERMINATED",
    "workflow_execution_canceled_event_attributes": "CANCELED",
}
_SCHEDULED = ("activity_task_scheduled_event_attributes", "workflow_task_scheduled_event_attributes")
_BEHAVIORS = {
    VersioningBehavior.VERSIONING_BEHAVIOR_PINNED: "pinned",
    VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE: "auto-upgrade",
}
_STARTED = {
    "activity_task_started_event_attributes": "activity",
    "workflow_task_started_event_attributes": "workflow_task",
}


def event_time(ev) -> float:
    return ev.event_time.seconds + ev.event_time.nanos / 1e9


def one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Untrusted history text as one bounded line (newlines and runs of blanks as one space)."""
    return plain(" ".join(text[: limit * 4].split()), limit)


@dataclass(frozen=True)
class TaskFailure:
    """A workflow task that failed, and kept failing until a later one completed (`until`) or to the end."""

    cause: str  # Temporal's cause, shortened (NON_DETERMINISTIC_ERROR and the like: `non-determinism`)
    message: str
    identity: str | None
    first_at: float
    until: float | None  # the next completed workflow task; None: still failing
    stuck_s: float
    version: str | None = None  # the Worker Deployment Version (build id) of the worker that failed it

    @property
    def lost(self) -> bool:
        """Still failing at the end: permanent. One that ended (a rollback) cost a wait, not work."""
        return self.until is None

    def line(self) -> str:
        head = f"workflow task failed ({self.cause})" + (f" on {self.identity}" if self.identity else "")
        head += f" of version {self.version}" if self.version else ""
        if self.lost:
            return f"{head}: {self.message} · still failing after {self.stuck_s:.1f} s"
        return f"{head}: {self.message} · stuck {self.stuck_s:.1f} s until a workflow task completed"


@dataclass(frozen=True)
class Outcome:
    """How the workflow ended, when it did not complete."""

    status: str  # FAILED | TIMED_OUT | TERMINATED | CANCELED
    at: float
    message: str
    root_cause: str | None  # the innermost cause's message (e.g. the activity's timeout), None: no cause

    @property
    def lost(self) -> bool:
        """A failed or timed-out workflow lost its work; a terminated or cancelled one was stopped on purpose."""
        return self.status in ("FAILED", "TIMED_OUT")

    def line(self) -> str:
        root = f" (root cause: {self.root_cause})" if self.root_cause else ""
        return f"the workflow {self.status}: {self.message}{root}"


@dataclass(frozen=True)
class Latency:
    samples: int
    p50_s: float
    p99_s: float
    max_s: float


def workflow_task_failures(chain: Chain, now: float | None = None) -> list[TaskFailure]:
    """Each spell of workflow task failures: Temporal writes the first failure, not the transient retries
    after it; the next completed workflow task ends the spell. A reset's own failure (RESET_WORKFLOW) is
    none. One still failing is measured to the workflow's close, else to `now` (else its last event)."""
    found: list[TaskFailure] = []
    for _, events in chain.executions:
        opened = None
        for ev in events:
            if ev.HasField("workflow_task_failed_event_attributes") and not is_reset_event(ev):
                opened = opened or ev
            elif ev.HasField("workflow_task_completed_event_attributes") and opened is not None:
                found.append(_failure(opened, event_time(ev), event_time(ev)))
                opened = None
        if opened is not None:
            closed = any(events[-1].HasField(name) for name in _ENDS)
            found.append(_failure(opened, None, event_time(events[-1]) if closed or now is None else now))
    return found


def _failure(ev, until: float | None, end: float) -> TaskFailure:
    a = ev.workflow_task_failed_event_attributes
    known = a.cause in WorkflowTaskFailedCause.values()  # else a newer server's: its number
    cause = WorkflowTaskFailedCause.Name(a.cause).removeprefix("WORKFLOW_TASK_FAILED_CAUSE_") if known else str(a.cause)
    # An SDK may report non-determinism as an unhandled failure; TMPRL1100 is its error code either way.
    text = a.failure.message[:4096]
    if cause == "NON_DETERMINISTIC_ERROR" or "TMPRL1100" in text or "nondetermin" in text.lower():
        cause = "non-determinism"
    first = event_time(ev)
    return TaskFailure(
        cause, one_line(text or "(no message)"), one_line(a.identity, 120) or None, first, until, max(0.0, end - first)
    )


def outcome(chain: Chain) -> Outcome | None:
    """How the chain's last execution ended, if it failed, timed out, was terminated or cancelled."""
    ev = chain.executions[-1][1][-1] if chain.executions and chain.executions[-1][1] else None
    status = next((s for name, s in _ENDS.items() if ev is not None and ev.HasField(name)), None)
    if ev is None or status is None:
        return None
    root = None
    if status == "FAILED":
        failure = ev.workflow_execution_failed_event_attributes.failure
        message, root = one_line(failure.message or "(no message)"), _root(failure)
    elif status == "TERMINATED":
        message = one_line(ev.workflow_execution_terminated_event_attributes.reason or "terminated")
    else:
        message = "workflow execution timed out" if status == "TIMED_OUT" else "cancelled"
    return Outcome(status, event_time(ev), message, root)


def _root(failure) -> str | None:
    """The innermost cause's message (ActivityError <- TimeoutError: the timeout), None without a cause."""
    inner = None
    for _ in range(CAUSE_DEPTH):
        if not failure.HasField("cause"):
            break
        inner = failure = failure.cause
    return one_line(inner.message or "(no message)") if inner is not None else None


def percentiles(values: Sequence[float]) -> Latency | None:
    """p50/p99/max by nearest rank: an observed value, even of one sample (statistics.quantiles wants two)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = lambda p: ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]  # noqa: E731
    return Latency(len(ordered), rank(50), rank(99), ordered[-1])


def latency(chain: Chain) -> dict[str, Latency | None]:
    """Schedule-to-start of activity tasks (`activity`: only those closed by attempt 1, a retried one's
    started event being its last attempt's) and of workflow tasks (`workflow_task`)."""
    samples: dict[str, list[float]] = {"activity": [], "workflow_task": []}
    for _, events in chain.executions:
        scheduled: dict[int, float] = {}
        for ev in events:
            if any(ev.HasField(name) for name in _SCHEDULED):
                scheduled[ev.event_id] = event_time(ev)
            for name, key in _STARTED.items():
                a = getattr(ev, name) if ev.HasField(name) else None
                if a is not None and getattr(a, "attempt", 1) <= 1 and a.scheduled_event_id in scheduled:
                    samples[key].append(max(0.0, event_time(ev) - scheduled[a.scheduled_event_id]))
    return {key: percentiles(values) for key, values in samples.items()}


def versions(chain: Chain) -> dict[str, int]:
    """Completed workflow tasks per Worker Deployment Version (build id, and `pinned` or `auto-upgrade`
    as the worker declared it): which version ran the run's workflow tasks; empty for unversioned workers."""
    counts: dict[str, int] = {}
    for ev in chain.events:
        if not ev.HasField("workflow_task_completed_event_attributes"):
            continue
        a = ev.workflow_task_completed_event_attributes
        if build := plain(a.deployment_version.build_id, 255):
            behavior = _BEHAVIORS.get(a.versioning_behavior)
            key = f"{build} ({behavior})" if behavior else build
            if key in counts or len(counts) < MAX_VERSIONS:  # history is untrusted: a bounded table
                counts[key] = counts.get(key, 0) + 1
    return counts
