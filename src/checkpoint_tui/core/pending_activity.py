"""The in-flight activity as Temporal sees it: DescribeWorkflowExecution's pending activity, which
attempt, on which worker, and how long since that worker last heartbeated. Temporal's own UI shows a
dead worker's attempt as "running" until the heartbeat timeout; the age says whether anyone is there.

One describe answers both the run's status and this, so the app asks it once per refresh at most
(once a second while a step is in flight, every few seconds otherwise: core/session.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.loop_worker.shared import HEARTBEAT_TIMEOUT

# The SDK sends an activity's heartbeats to the server at most every 0.8 x its heartbeat timeout
# (measured: a live worker's last heartbeat is 0-1.6 s old with our 2 s), so older means it went
# silent; Temporal times the attempt out at 1.0 x.
THROTTLE = 0.8
SILENT_AFTER_S = THROTTLE * HEARTBEAT_TIMEOUT.total_seconds()


@dataclass(frozen=True)
class PendingActivity:
    activity: str
    attempt: int
    state: str  # SCHEDULED (waiting for a worker or a retry), STARTED, CANCEL_REQUESTED, PAUSED...
    worker: str | None  # the identity of the worker that took the latest attempt
    age_s: float | None  # since its last heartbeat (or since the attempt started, if none), when asked
    since_heartbeat: bool  # age_s counts from a heartbeat (False: from the attempt's start)
    silent_after_s: float = SILENT_AFTER_S  # 0.8 x the activity's own heartbeat timeout

    @property
    def silent(self) -> bool:
        """Started, and no heartbeat for longer than a live worker ever leaves it."""
        return self.state == "STARTED" and self.age_s is not None and self.age_s >= self.silent_after_s


async def describe_run(client: Client, run_id: str) -> tuple[str | None, PendingActivity | None, int]:
    """Temporal's status of the run (None if it does not know it), its pending activity (the started
    one, else the newest) and its pending workflow task's attempt (0: none), from one
    DescribeWorkflowExecution. An unreachable server raises RPCError, as app.history.workflow_status does."""
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None, None, 0
        raise
    status = desc.status.name if isinstance(desc.status, WorkflowExecutionStatus) else None
    task_attempt = desc.raw_description.pending_workflow_task.attempt
    return status, pending_of(desc.raw_description.pending_activities, time.time()), task_attempt


def pending_of(infos, now: float) -> PendingActivity | None:
    """The activity to show from DescribeWorkflowExecution's pending_activities (protobuf messages)."""
    if not infos:
        return None
    started = [p for p in infos if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED]
    info = (started or list(infos))[-1]
    beat = _seconds(info, "last_heartbeat_time")
    start = _seconds(info, "last_started_time")
    origin = beat if beat is not None and (start is None or beat >= start) else start
    state = PendingActivityState.Name(info.state).removeprefix("PENDING_ACTIVITY_STATE_")
    options = info.activity_options if info.HasField("activity_options") else None
    timeout_s = options.heartbeat_timeout.ToTimedelta().total_seconds() if options is not None else 0.0
    return PendingActivity(
        info.activity_type.name,
        info.attempt,
        state,
        info.last_worker_identity or None,
        None if origin is None else max(0.0, now - origin),
        origin is not None and origin == beat,
        THROTTLE * timeout_s if timeout_s > 0 else SILENT_AFTER_S,
    )


def _seconds(info, name: str) -> float | None:
    if not info.HasField(name):
        return None
    ts = getattr(info, name)
    return ts.seconds + ts.nanos / 1e9
