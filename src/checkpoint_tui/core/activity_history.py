"""A user's workflow as Temporal recorded it: its activity executions, read from history (every
execution of the continue-as-new chain), for the timeline, `status`, chaos and the audit. Each one is
classified (model request, tool call, MCP call, other) by the agent framework's adapter that the
activity types name (frameworks/), from its payloads as history holds them.

History holds one ACTIVITY_TASK_STARTED per activity, written when it closes, with the attempt that
closed it: an activity that ran more than once (a retry, or a worker killed under it) shows attempt
> 1 there. An activity still open is completed from the workflow's pending activities (its current
attempt and the last worker that picked it up).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import PendingActivityState, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError

# The chain reader lives in core/chain.py; callers of this module import it from here too.
from checkpoint_tui.core.chain import Chain, all_executions, read_chain, read_children, reset_run  # noqa: F401
from checkpoint_tui.frameworks import ActivitySeen, Classifier, UnitInfo, classify, detect, overridden
from checkpoint_tui.frameworks.units import UNSAFE

MAX_PAYLOAD_BYTES = 256 * 1024  # a payload read back from history is decoded up to this size (else: None)
RESET_CAUSE = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
CLOSE_FIELDS = {
    "activity_task_completed_event_attributes": "completed",
    "activity_task_failed_event_attributes": "failed",
    "activity_task_timed_out_event_attributes": "timed-out",
    "activity_task_canceled_event_attributes": "canceled",
}


@dataclass
class ActivityExec:
    seq: int  # 1, 2, ... in the order the workflow scheduled them across the chain
    segment: int  # which execution of the chain (0 = the first)
    execution: str  # Temporal's run id of that execution
    activity_id: str
    activity_type: str
    scheduled_at: float
    attempt: int = 1
    identity: str | None = None  # the worker that ran the attempt history knows of
    started_at: float | None = None
    closed_at: float | None = None
    status: str = "scheduled"  # scheduled | running | completed | failed | timed-out | canceled
    last_failure: str | None = None  # why the attempt before failed (a kill shows as a heartbeat timeout)
    resumed: bool = False  # run by another worker than the activity before it
    heartbeat_timeout_s: float | None = None  # as scheduled (None: none set)
    start_to_close_s: float | None = None
    args: list[object] = field(default_factory=list, repr=False)  # decoded input payloads (None: undecodable)
    result: object = field(default=None, repr=False)  # the completion's first payload, decoded
    summary: str | None = None  # the user-metadata summary the workflow gave it
    task_queue: str | None = None  # the queue it was scheduled on (a fleet's activity worker polls it)
    info: UnitInfo | None = None  # what it is (model request, tool call, ...): frameworks/
    classed_by: str | None = None  # the framework whose rules gave `info` ("declared": a declaration)

    def seen(self) -> ActivitySeen:
        """As the framework adapters take it."""
        return ActivitySeen(self.activity_type, self.args, self.result, self.summary)

    @property
    def re_executed(self) -> bool:
        return self.attempt > 1

    @property
    def cls(self) -> str:
        return self.info.cls if self.info is not None else "other"

    @property
    def label(self) -> str:
        return self.info.label if self.info is not None else self.activity_type

    @property
    def decode_error(self) -> bool:
        """Its arguments never decoded on the worker: the body never ran, whatever the attempt count."""
        return bool(self.last_failure) and "decoding arguments" in (self.last_failure or "").lower()

    @property
    def unassisted_bound_s(self) -> float | None:
        """How long Temporal waits before it retries an attempt whose worker died: the heartbeat
        timeout, else the start-to-close timeout."""
        return self.heartbeat_timeout_s or self.start_to_close_s

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.closed_at is None:
            return None
        return max(0.0, self.closed_at - self.started_at)

    @property
    def worker_pid(self) -> int | None:
        """The pid of an SDK-default identity (`pid@host`), else None."""
        head = (self.identity or "").split("@", 1)[0]
        return int(head) if head.isdigit() else None

    @property
    def worker_host(self) -> str | None:
        return self.identity.split("@", 1)[1] if self.identity and "@" in self.identity else None

    def to_dict(self) -> dict:
        return {
            "seq": self.seq,
            "activity_id": self.activity_id,
            "type": self.activity_type,
            "attempt": self.attempt,
            "identity": self.identity,
            "status": self.status,
            "segment": self.segment,
            "execution": self.execution,
            "duration_s": self.duration_s,
            "scheduled_at": self.scheduled_at,  # its first attempt's, as history keeps it
            "started_at": self.started_at,  # its last attempt's
            "last_failure": self.last_failure,
            "resumed": self.resumed,
            "class": self.cls,
            "label": self.label,
            "summary": self.summary,
            "tool": self.info.name if self.info is not None and self.cls in ("tool", "mcp") else None,
            "call_id": self.info.call_id if self.info is not None else None,
            "args_digest": self.info.args_digest if self.info is not None else None,
            "tokens": self.info.tokens if self.info is not None else None,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "start_to_close_s": self.start_to_close_s,
        }


def plain(text: str, limit: int = 200) -> str:
    """History text shown on a terminal or in a report: no control characters or escapes, bounded."""
    return UNSAFE.sub("?", text[:limit])


def _t(ev) -> float:
    return ev.event_time.ToSeconds() + ev.event_time.nanos / 1e9


def decode_payload(payload) -> object:
    """One payload as JSON, bounded; None when it is not JSON, too big, or nests too deeply."""
    data = payload.data
    if len(data) > MAX_PAYLOAD_BYTES or payload.metadata.get("encoding", b"") != b"json/plain":
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None


def _payloads(payloads) -> list[object]:
    return [decode_payload(p) for p in list(payloads.payloads)[:16]]


def _summary(ev) -> str | None:
    if not ev.HasField("user_metadata") or not ev.user_metadata.HasField("summary"):
        return None
    text = decode_payload(ev.user_metadata.summary)
    return plain(text, 120) if isinstance(text, str) else None


def _secs(duration) -> float | None:
    value = duration.seconds + duration.nanos / 1e9
    return value or None


def activities(chain: Chain) -> list[ActivityExec]:
    """The chain's activity executions in scheduling order, with what history says about each."""
    found: list[ActivityExec] = []
    for segment, (execution, events) in enumerate(all_executions(chain)):  # child workflows' too, after
        by_sched: dict[int, ActivityExec] = {}
        for ev in events:
            if ev.HasField("activity_task_scheduled_event_attributes"):
                a = ev.activity_task_scheduled_event_attributes
                act = ActivityExec(
                    len(found) + 1,
                    segment,
                    execution,
                    plain(a.activity_id, 64),
                    plain(a.activity_type.name, 128),
                    _t(ev),
                    heartbeat_timeout_s=_secs(a.heartbeat_timeout),
                    start_to_close_s=_secs(a.start_to_close_timeout) or _secs(a.schedule_to_close_timeout),
                    args=_payloads(a.input),
                    summary=_summary(ev),
                    task_queue=plain(a.task_queue.name, 200) or None,
                )
                by_sched[ev.event_id] = act
                found.append(act)
            elif ev.HasField("activity_task_started_event_attributes"):
                a = ev.activity_task_started_event_attributes
                started = by_sched.get(a.scheduled_event_id)
                if started is not None:
                    started.attempt, started.identity = max(1, a.attempt), plain(a.identity) or None
                    started.started_at = _t(ev)
                    started.status = "running" if started.closed_at is None else started.status
                    if a.HasField("last_failure") and a.last_failure.message:
                        started.last_failure = plain(a.last_failure.message)
            else:
                _close(ev, by_sched)
    mark_resumed(found)
    label(found)
    return found


_said: set[str] = set()


def _say_once(line: str) -> None:
    """A warning about the run's classification, once per process (label runs on every refresh)."""
    if line not in _said:
        _said.add(line)
        print(f"checkpoint-tui: {line}", file=sys.stderr, flush=True)


def label(acts: list[ActivityExec], framework: Classifier = None) -> Classifier:
    """Classify every activity by its framework's adapter (`framework`, else the one the activity
    types name); returns the framework used (None: a plain workflow)."""
    seen = [a.seen() for a in acts]
    if (found := overridden(framework, seen)) is not None:
        _say_once(
            f"--framework {framework} recognises none of the run's activities; they are {found}'s: "
            f"classified as {found}'s"
        )
        framework = found
    elif isinstance(framework, str) and (found := detect(seen)) not in (None, framework):
        _say_once(  # it names some of them: the user's word stands, but not unsaid
            f"--framework {framework}: the run's activities read as {found}'s; classified as {framework}'s, "
            "as --framework says"
        )
    framework = framework or detect(seen)
    by = framework if isinstance(framework, str) else "declared" if framework is not None else None
    for act, info in zip(acts, classify(framework, seen), strict=False):
        act.info, act.classed_by = info, by
    return framework


def _close(ev, by_sched: dict[int, ActivityExec]) -> None:
    for name, status in CLOSE_FIELDS.items():
        if ev.HasField(name):
            attrs = getattr(ev, name)
            act = by_sched.get(attrs.scheduled_event_id)
            if act is not None:
                act.status, act.closed_at = status, _t(ev)
                if status == "completed" and attrs.HasField("result") and attrs.result.payloads:
                    act.result = decode_payload(attrs.result.payloads[0])
                elif status == "failed" and attrs.HasField("failure") and attrs.failure.message:
                    act.last_failure = plain(attrs.failure.message)
            return


def mark_resumed(acts: list[ActivityExec]) -> None:
    """An activity run by another worker than the one before it (with a worker) is where the run resumed."""
    previous = None
    for act in acts:
        act.resumed = previous is not None and act.identity is not None and act.identity != previous
        previous = act.identity or previous


async def with_pending(
    client: Client, chain: Chain, acts: list[ActivityExec], desc: WorkflowExecutionDescription | None = None
) -> list[ActivityExec]:
    """Open activities completed from the workflow's pending activities (current attempt, last worker);
    `desc`: the latest execution's description, when the caller has just read it."""
    open_acts = {a.activity_id: a for a in acts if a.closed_at is None and a.segment == len(chain.executions) - 1}
    if not open_acts:
        return acts
    if desc is None:
        try:
            desc = await client.get_workflow_handle(chain.workflow_id, run_id=chain.executions[-1][0]).describe()
        except RPCError:
            return acts
    for pa in desc.raw_description.pending_activities:
        act = open_acts.get(pa.activity_id)
        if act is None:
            continue
        act.attempt = max(act.attempt, pa.attempt)
        if pa.last_worker_identity:
            act.identity = plain(pa.last_worker_identity)
        if pa.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED:
            act.status = "running"
            if pa.HasField("last_started_time"):
                act.started_at = pa.last_started_time.ToSeconds() + pa.last_started_time.nanos / 1e9
        if pa.HasField("last_failure") and pa.last_failure.message:
            act.last_failure = plain(pa.last_failure.message)
    mark_resumed(acts)
    return acts


async def read_activities(
    client: Client, workflow_id: str, first_execution: str | None = None, framework: Classifier = None
) -> list[ActivityExec]:
    return (await read_run(client, workflow_id, first_execution, framework))[1]


async def read_run(
    client: Client, workflow_id: str, first_execution: str | None = None, framework: Classifier = None
) -> tuple[Chain, list[ActivityExec]]:
    """The run's history (its chain, its child workflows' chains in `children`) and its activities read
    from it, for an audit that needs both (lost work is read from the chain: core/lost_work.py)."""
    chain = await read_chain(client, workflow_id, first_execution)
    await read_children(client, chain)
    acts = await with_pending(client, chain, activities(chain))
    if framework is not None:
        label(acts, framework)
    return chain, acts


def timeline(chain: Chain) -> list[tuple[str, list]]:
    """Every execution as it happened, oldest first: a reset's execution only from its reset on (what it
    copied from the execution it replaced is that one's), and the replaced execution whole. Where a
    worker death is placed against history (core/windows.py) this is the history to read."""
    found = []
    for execution, events in chain.replaced + chain.executions:
        at = max((i for i, ev in enumerate(events) if is_reset_event(ev)), default=0)
        if events[at:]:
            found.append((execution, events[at:]))
    return sorted(found, key=lambda seg: _t(seg[1][0]))


def is_reset_event(ev) -> bool:
    """The event a reset's execution starts its own history with (after what it copied)."""
    return (
        ev.HasField("workflow_task_failed_event_attributes")
        and ev.workflow_task_failed_event_attributes.cause == RESET_CAUSE
    )


def first_event_after(chain: Chain, at: float, not_identity: str | None) -> float | None:
    """When history next shows a worker at work after `at` (a workflow or activity task started by
    another identity than `not_identity`): how long a kill stalled the run. The executions a reset
    replaced count too (what they ran before the reset)."""
    times = []
    for ev in chain.events + [ev for _, events in chain.replaced for ev in events]:
        t = _t(ev)
        if t <= at:
            continue
        for name in ("workflow_task_started_event_attributes", "activity_task_started_event_attributes"):
            if ev.HasField(name) and getattr(ev, name).identity != not_identity:
                times.append(t)
    return min(times) if times else None


def workflow_task_failures(chain: Chain) -> list[str]:
    """Failed workflow tasks (a non-determinism error on replay shows here), as short lines."""
    out = []
    for ev in chain.events:
        if ev.HasField("workflow_task_failed_event_attributes"):
            a = ev.workflow_task_failed_event_attributes
            out.append(f"event {ev.event_id}: {plain(a.failure.message)!r} (identity {plain(a.identity)})")
    return out
