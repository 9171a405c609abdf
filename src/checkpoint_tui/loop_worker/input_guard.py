"""Workflow input is untrusted: anyone who can start a workflow on the task queue writes it (the
embedded dev server has no auth; on a cluster, any namespace writer). Before an activity writes
anything it checks that the run is one this ledger created (`start` writes the run row before the
workflow starts), that the workflow is that run, and that the step is inside it. A refusal is a
non-retryable UntrustedInput failure: the run fails at once, nothing is written."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from checkpoint_tui.ledger import queries
from checkpoint_tui.loop_worker.activity_ledger import ActivityLedger
from checkpoint_tui.loop_worker.shared import RUN_ID_PATTERN, UNTRUSTED_INPUT


def refuse(reason: str) -> ApplicationError:
    return ApplicationError(f"refused workflow input: {reason}", type=UNTRUSTED_INPUT, non_retryable=True)


class InputGuard:
    def __init__(self) -> None:
        self._known: dict[str, int] = {}  # run id -> total steps; a run row never changes them

    async def check(
        self, ledger: ActivityLedger, run_id: str, step: int | None = None, workflow_id: str | None = None
    ) -> None:
        """Raise `refuse(...)` unless this activity belongs to a run of this ledger."""
        if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
            raise refuse(f"run id {str(run_id)[:80]!r} is not a checkpoint-tui run id")
        if activity.info().workflow_id != run_id or workflow_id not in (None, run_id):
            raise refuse(f"run id {run_id} is not this workflow's id")
        total = self._known.get(run_id)
        if total is None:
            row = await ledger.run(queries.run, run_id)
            if row is None:
                raise refuse(f"no run {run_id} in this ledger (runs are created by `checkpoint-tui start`)")
            total = self._known[run_id] = row.total_steps
        if step is not None and (not isinstance(step, int) or not 1 <= step <= total):
            raise refuse(f"step {step!r} is outside run {run_id}'s 1..{total}")
