"""The workflows: `SendLines` (each line through the effects library), `SendLinesKeyed` (the same with a
business key per line), `SendLinesUnguarded` (the same activity body without the library),
`SendLinesIdempotent` (exactly-once by its own means) and `SendLinesNested` (those sends three child
workflows down).
Deterministic: no clock, randomness or I/O here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities import LineActivities
    from shared import LineInput, SendInput, decode, parse_input

# A killed worker's activity is retried as soon as its heartbeat times out (2 s) and a replacement
# polls: unlimited attempts, from 0.2 s, capped at 2 s so a long outage does not leave 20 s gaps.
ACTIVITY_OPTIONS = {
    "start_to_close_timeout": timedelta(seconds=30),
    "heartbeat_timeout": timedelta(seconds=2),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=0.2), maximum_interval=timedelta(seconds=2), maximum_attempts=0
    ),
}


async def _send_all(raw: RawValue | None, activity: object) -> dict[str, int]:
    """Run the `count` activities one after another; returns how many ended in each outcome. The input
    arrives undecoded (RawValue) and is decoded and checked here: whatever it holds, a bad one fails
    the workflow with `BadInput` (the SDK, decoding it itself, would fail the workflow *task* on what
    it cannot decode, and Temporal retries a task forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        inp = parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None
    return await _send_lines(inp, activity)


async def _send_lines(inp: SendInput, activity: object) -> dict[str, int]:
    workflow_id = workflow.info().workflow_id
    if not workflow_id.isprintable():
        raise ApplicationError(
            "the workflow id must be printable (it is written into lines)", type="BadInput", non_retryable=True
        )
    outcomes: dict[str, int] = {}
    for index in range(1, inp.count + 1):
        outcome = await workflow.execute_activity_method(
            activity,  # type: ignore[arg-type]
            LineInput(workflow_id=workflow_id, index=index, pace=float(inp.pace)),
            **ACTIVITY_OPTIONS,  # type: ignore[arg-type]
        )
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


# The input is a SendInput as JSON (see shared.parse_input). The parameter's type must be exactly
# RawValue (no Optional) for the SDK to hand the payload over undecoded; no argument at all is None.


@workflow.defn(name="SendLines")
class SendLines:
    @workflow.run
    async def run(self, inp: RawValue = None) -> dict[str, int]:  # type: ignore[assignment]
        return await _send_all(inp, LineActivities.send_line)


@workflow.defn(name="SendLinesKeyed")
class SendLinesKeyed:
    @workflow.run
    async def run(self, inp: RawValue = None) -> dict[str, int]:  # type: ignore[assignment]
        return await _send_all(inp, LineActivities.send_line_keyed)


@workflow.defn(name="SendLinesUnguarded")
class SendLinesUnguarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> dict[str, int]:  # type: ignore[assignment]
        return await _send_all(inp, LineActivities.send_line_unguarded)


@workflow.defn(name="SendLinesIdempotent")
class SendLinesIdempotent:
    @workflow.run
    async def run(self, inp: RawValue = None) -> dict[str, int]:  # type: ignore[assignment]
        return await _send_all(inp, LineActivities.send_line_idempotent)


@dataclass
class Level:
    """A level of SendLinesNested: its depth, and whether it has continued as new already."""

    count: int
    pace: float
    depth: int
    hopped: bool = False


@workflow.defn(name="SendLinesNested")
class SendLinesNested:
    """The sends three child workflows down (the middle one continues as new once on its way): work a
    run does through its children, which the lab audits as the run's. Each send is send_line_idempotent."""

    @workflow.run
    async def run(self, inp: RawValue = None) -> dict[str, int]:  # type: ignore[assignment]
        try:
            value = None if inp is None else decode(lambda: workflow.payload_converter().from_payload(inp.payload))
            plan = parse_input(value)
        except (ValueError, TypeError) as err:
            raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None
        return await workflow.execute_child_workflow(
            SendLinesLevel.run, Level(plan.count, plan.pace, 1), id=f"{workflow.info().workflow_id}-1"
        )


@workflow.defn(name="SendLinesLevel")
class SendLinesLevel:
    @workflow.run
    async def run(self, level: Level) -> dict[str, int]:
        if level.depth == 2 and not level.hopped:
            workflow.continue_as_new(Level(level.count, level.pace, level.depth, hopped=True))
        if level.depth < 3:
            return await workflow.execute_child_workflow(
                SendLinesLevel.run,
                Level(level.count, level.pace, level.depth + 1),
                id=f"{workflow.info().workflow_id}-{level.depth + 1}",
            )
        return await _send_lines(SendInput(level.count, level.pace), LineActivities.send_line_idempotent)
