"""The operator's nemesis: `temporal workflow reset` to an earlier workflow task. Everything the workflow
did after that point runs again (every activity of the steps after it), on the same workflow id with
a new execution; the ledger must answer each re-run effect with a `skipped` claim, never a second write.

A reset event names the step it fires after (`at_step`) and how many steps back it goes (`back_steps`):
the reset point is the workflow task that scheduled the first activity of step `at_step - back_steps + 1`,
in the current execution (a reset does not cross a continue-as-new)."""

from __future__ import annotations

import time
import uuid

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from checkpoint_tui.app.activity_history import decode_payload
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger

RESET = "reset"
BACK_STEPS = (1, 3)  # a seeded reset goes this many steps back
MAX_BACK_STEPS = 50


async def reset_workflow(client: Client, workflow_id: str, step: int, back: int) -> dict | None:
    """Reset the workflow's current execution to the workflow task that scheduled step
    `step - back + 1`'s first activity (or the execution's first step, if that is earlier). Returns
    what was done (the step re-run from, the event reset to, both executions, when), or None when the
    execution has no step to go back to."""
    handle = client.get_workflow_handle(workflow_id)
    execution = (await handle.describe()).run_id
    first_of: dict[int, int] = {}  # step -> the workflow task completed event that scheduled its first activity
    async for ev in client.get_workflow_handle(workflow_id, run_id=execution).fetch_history_events():
        if ev.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attrs = ev.activity_task_scheduled_event_attributes
        arg = decode_payload(attrs.input.payloads[0]) if attrs.input.payloads else None
        n = arg.get("step") if isinstance(arg, dict) else None
        if isinstance(n, int) and n not in first_of:
            first_of[n] = attrs.workflow_task_completed_event_id
    eligible = [n for n in first_of if n <= step]
    if not eligible:
        return None
    from_step = max(min(eligible), step - back + 1)
    point = first_of[from_step]
    at = time.time()
    reply = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=execution),
            reason=f"checkpoint-tui chaos: reset to step {from_step}",
            workflow_task_finish_event_id=point,
            request_id=str(uuid.uuid4()),
        )
    )
    return {"from_step": from_step, "back_steps": back, "reset_to_event": point, "old_execution": execution,
            "new_execution": reply.run_id, "at": at}  # fmt: skip


def what_it_reran(conn: Ledger, run_id: str, reset: dict) -> dict:
    """After the run: the activities run again for the steps the reset went back over, and what the
    ledger answered their claims (each re-run effect should be `skipped`)."""
    span = (reset["from_step"], reset["step"])
    reran = queries.activities_since(conn, run_id, reset["at"], *span)
    outcomes = queries.outcomes_since(conn, run_id, reset["at"], *span)
    return {"re_ran": reran, "claims_after_reset": outcomes}
