"""The operator's nemesis: `temporal workflow reset` to an earlier workflow task. Everything the workflow
did after that point runs again, on the same workflow id with a new execution; what ran again must
find its effects already done (a `skipped` claim), never write them a second time.

Where it goes back to, in the current execution (a reset does not cross a continue-as-new):
- our loop: a reset event names the step it fires after (`at_step`) and how many steps back it goes
  (`back_steps`); the reset point is the workflow task that scheduled the first activity of step
  `at_step - back_steps + 1`;
- a user's workflow: it fires once the aimed activity `at_step` has closed, and goes back to the
  workflow task that scheduled the aimed activity `back_steps - 1` before it (back 1: that activity
  itself): that activity and every one after it run again (proof/chaos/workflow_target.py)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client

from checkpoint_tui.core.activity_history import ActivityExec, Chain, activities, decode_payload, label, plain
from checkpoint_tui.frameworks import Classifier
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import ClaimAttempt

RESET = "reset"
BACK_STEPS = (1, 3)  # a seeded reset goes this many steps back
MAX_BACK_STEPS = 50


async def reset_to(client: Client, workflow_id: str, execution: str, point: int, why: str) -> dict:
    """Reset `execution` to the workflow task completed at event `point`: the event, both executions,
    when, and the activities Temporal had pending just before (`in_flight`: their work is cut off
    and runs again)."""
    desc = await client.get_workflow_handle(workflow_id, run_id=execution).describe()
    in_flight = [
        {
            "activity_id": plain(p.activity_id, 64),
            "type": plain(p.activity_type.name, 128),
            "attempt": p.attempt,
            "started": p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        }
        for p in desc.raw_description.pending_activities
    ]
    at = time.time()
    reply = await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id, run_id=execution),
            reason=f"checkpoint-tui chaos: {why}",
            workflow_task_finish_event_id=point,
            request_id=str(uuid.uuid4()),
        )
    )
    return {
        "reset_to_event": point,
        "old_execution": execution,
        "new_execution": reply.run_id,
        "at": at,
        "in_flight": in_flight,
    }


async def reset_workflow(client: Client, workflow_id: str, step: int, back: int) -> dict | None:
    """Our loop: reset the workflow's current execution to the workflow task that scheduled step
    `step - back + 1`'s first activity (or the execution's first step, if that is earlier). Returns
    what was done, or None when the execution has no step to go back to."""
    execution = (await client.get_workflow_handle(workflow_id).describe()).run_id
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
    done = await reset_to(client, workflow_id, execution, first_of[from_step], f"reset to step {from_step}")
    return {"from_step": from_step, "back_steps": back, **done}


def what_it_reran(conn: Ledger, run_id: str, reset: dict) -> dict:
    """Our loop, after the run: the activities run again for the steps the reset went back over, and what
    the ledger answered their claims (each re-run effect should be `skipped`)."""
    span = (reset["from_step"], reset["step"])
    reran = queries.activities_since(conn, run_id, reset["at"], *span)
    outcomes = queries.outcomes_since(conn, run_id, reset["at"], *span)
    return {"re_ran": reran, "claims_after_reset": outcomes}


def scheduled_by(events: list, activity_id: str) -> int | None:
    """The workflow task completed event that scheduled the activity (a user's reset point)."""
    for ev in events:
        if ev.HasField("activity_task_scheduled_event_attributes"):
            attrs = ev.activity_task_scheduled_event_attributes
            if attrs.activity_id == activity_id:
                return attrs.workflow_task_completed_event_id
    return None


def activities_reran(chain: Chain, claims: list[ClaimAttempt], reset: dict, framework: Classifier) -> dict:
    """A user's workflow, after the run: each activity the replaced execution had scheduled after the reset
    point (completed; pending just before the reset, started or not; or scheduled after that look and
    maybe started as the reset landed) that the new execution started again, as history names it, with what
    the library's claims said after the reset:
    - `guarded`: it claimed, and applied no effect kind it had claimed before the reset (an effect kind
      first claimed after the reset may be applied once: its earlier attempt had not got there);
    - `at risk`: no claim through the library, or an effect applied again (a key that follows the run
      id, as the library's default key does, is new after a reset);
    - `model`: a model request, reported apart (no side effect of its own)."""
    old, new = _execution(chain, reset["old_execution"]), _execution(chain, reset["new_execution"])
    if old is None or new is None:
        return {"re_ran": [], "claims_after_reset": {}}
    point, pending = reset["reset_to_event"], {p["activity_id"]: p["started"] for p in reset["in_flight"]}
    after = {
        ev.activity_task_scheduled_event_attributes.activity_id
        for ev in old
        if ev.HasField("activity_task_scheduled_event_attributes") and ev.event_id > point
    }
    again = {a.activity_id: a for a in _acts(chain, reset["new_execution"], new, framework) if a.started_at}
    entries: list[dict[str, Any]] = []
    outcomes: Counter[str] = Counter()
    for act in _acts(chain, reset["old_execution"], old, framework):
        # open in the replaced execution and not seen pending: scheduled after the lab looked and before the
        # reset landed, it may have started (a send seen twice under load was missing from this list)
        if act.activity_id not in after or act.activity_id not in again:
            continue
        entry, seen = _verdict(act, claims, reset["at"])
        was = (
            act.status
            if act.closed_at is not None
            else ("in flight" if pending[act.activity_id] else "scheduled")
            if act.activity_id in pending
            else "scheduled as the reset landed"
        )
        entries.append({**entry, "was": was})
        outcomes.update(seen)
    return {"re_ran": entries, "claims_after_reset": dict(outcomes)}


def _execution(chain: Chain, run: str) -> list | None:
    return next((events for r, events in chain.executions + chain.replaced if r == run), None)


def _acts(chain: Chain, run: str, events: list, framework: Classifier) -> list[ActivityExec]:
    acts = activities(Chain(chain.workflow_id, [(run, events)]))
    label(acts, framework)
    return acts


def _verdict(act: ActivityExec, claims: list[ClaimAttempt], at: float) -> tuple[dict, list[str]]:
    """One re-run activity: its verdict and its claims' outcomes after the reset."""
    n = int(act.activity_id) if act.activity_id.isdigit() else None
    mine = [c for c in claims if c.step == n and c.started_at >= act.scheduled_at]
    before, after = [c for c in mine if c.started_at < at], [c for c in mine if c.started_at >= at]
    kinds = {c.kind for c in before}
    again = sorted(
        {c.kind for c in after if c.outcome == "applied" and c.kind in kinds}
        | {k for k, m in Counter(c.kind for c in after if c.outcome == "applied").items() if m > 1}
    )
    if act.cls == "model":
        verdict, why = "model", "a model request: no side effect of its own"
    elif not after:
        verdict, why = "at risk", "no claim through the library: what it did outside may have happened twice"
    elif again:
        verdict, why = "at risk", f"applied again ({', '.join(again)}): its key is new after the reset"
    else:
        verdict, why = "guarded", "its claims found the effect done or finished it"
    seen = [c.outcome for c in after]
    entry = {
        k: v for k, v in act.to_dict().items() if k in ("activity_id", "type", "class", "label", "tool", "call_id")
    }
    return {**entry, "verdict": verdict, "why": why, "claims_after_reset": ",".join(seen)}, seen
