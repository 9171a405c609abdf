"""`FleetMailer`, version 2: checks that the mail API answers before the first receipt (the activity
`check_mail_api`), then sends as version 1 does.

The change is NOT replay-safe, on purpose: a run that version 1 started has `send_receipt` as its
first scheduled activity, where version 2 now schedules `check_mail_api`. Replayed on a version-2
worker, such a run fails its workflow task with a non-determinism error, again on every retry, until
a version-1 worker takes it (a rollback) or the run is reset. Runs started on version 2 complete on
it. (Shipped properly, the check would sit behind `workflow.patched("check-mail-api")`.)"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from shared import CHECK_MAIL_API, activity_options

from workflows import checked_input, send_receipts  # version 1's code, run again inside the sandbox


@workflow.defn(name="FleetMailer")
class FleetMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> int:  # type: ignore[assignment]
        checked = checked_input(inp)
        await workflow.execute_activity(CHECK_MAIL_API, result_type=str, **activity_options(checked))
        return await send_receipts(checked)
