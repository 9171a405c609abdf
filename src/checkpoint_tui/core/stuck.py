"""A run that cannot make progress, said out loud: its workflow task keeps failing (a non-determinism
error after a deploy, a workflow that raises, a framework's sync call in the sandbox). Temporal retries
such a task forever, backing off (attempts 2, 3, 4, 5 after about 1, 2, 5 and 11 s on the dev server),
and records only its first failure in history; DescribeWorkflowExecution gives the attempt it is at.
A task is stuck once it has failed twice in a row since the last one that completed (attempt 3): a
worker killed under a task times it out instead, which is not a failure."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.activity_history import plain

STUCK_ATTEMPT = 3
STUCK = "WORKFLOW_TASK_FAILING"  # what a wait returns for a stuck run, in place of Temporal's status
CHECK_EVERY_S = 2.0  # a wait asks at most this often (one describe)
LOOK_BACK = 200  # newest events read to find the failure (it follows the last completed task)


@dataclass(frozen=True)
class StuckTask:
    attempt: int  # the workflow task's attempt now
    cause: str  # Temporal's cause of the failure, e.g. WORKFLOW_WORKER_UNHANDLED_FAILURE, NON_DETERMINISTIC_ERROR
    message: str  # the failure's message, one bounded line

    def line(self) -> str:
        # the SDK's words when the worker's converter cannot read the input: a team's own converter
        hint = " (a data converter of the worker's own? give it: --data-converter MODULE:ATTR)"
        said = hint if self.message.startswith("Failed decoding arguments") else ""
        return f"its workflow task keeps failing (attempt {self.attempt}, {self.cause}): {self.message}{said}"

    def to_dict(self) -> dict:
        return {"attempt": self.attempt, "cause": self.cause, "message": self.message}


async def stuck_task(client: Client, run_id: str, desc: WorkflowExecutionDescription | None = None) -> StuckTask | None:
    """The run's workflow task, if it keeps failing; None if it does not (or Temporal does not know the
    run). `desc`: a describe already made."""
    try:
        desc = desc or await client.get_workflow_handle(run_id).describe()
        attempt = desc.raw_description.pending_workflow_task.attempt
        if attempt < STUCK_ATTEMPT:
            return None
        resp = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=run_id, run_id=desc.run_id),
                maximum_page_size=LOOK_BACK,
            )
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    for ev in resp.history.events:  # newest first
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return None  # it failed before, then got through: timeouts since, not failures
        if ev.HasField("workflow_task_failed_event_attributes"):
            a = ev.workflow_task_failed_event_attributes
            return StuckTask(attempt, _cause(a.cause), plain(a.failure.message or "(no message)", 300))
    return None


def _cause(cause: int) -> str:
    try:
        name = WorkflowTaskFailedCause.Name(cause)  # type: ignore[arg-type]  # any int: a newer server's too
        return name.removeprefix("WORKFLOW_TASK_FAILED_CAUSE_")
    except ValueError:  # a cause this SDK does not know (a newer server)
        return f"cause {cause}"


class StuckWatch:
    """For a loop that waits on a run: asks every CHECK_EVERY_S whether its workflow task is stuck,
    says so on stderr once, and answers STUCK then (the caller returns it as the run's status).
    `patience_s`: it must have been stuck that long first (chaos after a deploy: the rollback may come,
    and the task a dead new-version worker held is retried only after its workflow task timeout)."""

    def __init__(self, client: Client, run_id: str, patience_s: float = 0.0) -> None:
        self.client, self.run_id, self.asked = client, run_id, 0.0
        self.patience_s = patience_s
        self.since: float | None = None  # when it was first seen stuck, in a row

    async def check(self) -> str | None:
        now = time.monotonic()
        if now - self.asked < CHECK_EVERY_S:
            return None
        self.asked = now
        try:
            stuck = await stuck_task(self.client, self.run_id)
        except RPCError:  # Temporal restarting: ask again next time
            return None
        if stuck is None:
            self.since = None
            return None
        self.since = self.since or now
        if now - self.since < self.patience_s:
            return None
        print(f"{self.run_id}: {stuck.line()}", file=sys.stderr, flush=True)
        return STUCK
