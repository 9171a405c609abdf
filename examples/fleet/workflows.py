"""`FleetMailer`, version 1: sends `count` receipts, one activity each, on the activity workers' queue,
`pace` seconds apart. Deterministic: no clock, randomness, I/O or environment here (the activity queue
comes in the input)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from shared import SEND_RECEIPT, FleetInput, ReceiptInput, activity_options, decode, parse_input


def checked_input(raw: RawValue | None) -> FleetInput:
    """The run's input, decoded and checked here: whatever it holds, a bad one fails the workflow with
    a non-retryable `BadInput` (the SDK, decoding it itself, would fail the workflow *task* on what it
    cannot decode, and Temporal retries a task forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def send_receipts(inp: FleetInput) -> int:
    """Receipt 1..count, one after another, a timer of `pace` between two; returns how many were sent.
    The activities run on whatever worker polls `inp.activity_queue`: the workflow worker has none."""
    workflow_id = workflow.info().workflow_id
    for index in range(1, inp.count + 1):
        await workflow.execute_activity(
            SEND_RECEIPT, ReceiptInput(workflow_id, index), result_type=str, **activity_options(inp)
        )
        if inp.pace and index < inp.count:
            await workflow.sleep(inp.pace)
    return inp.count


# The input is a FleetInput as JSON (see shared.parse_input). The parameter's type must be exactly
# RawValue (no Optional) for the SDK to hand the payload over undecoded; no argument at all is None.


@workflow.defn(name="FleetMailer")
class FleetMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> int:  # type: ignore[assignment]
        return await send_receipts(checked_input(inp))
