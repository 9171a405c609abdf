"""What every audit of a run answers, whichever workload ran: our loop's (core/step_audit.py: every
expected effect against the ledger, the files and the outbox) or a user's workflow's
(core/activity_audit.py: its activities from history against the effects library's claims). Each gives
the one verdict sentence the app, `status` and chaos show."""

from __future__ import annotations

from typing import Any, Protocol


class Audit(Protocol):
    run_id: str
    workflow_status: str | None
    lost: int
    duplicated: int
    lost_detail: list[str]
    duplicated_detail: list[str]

    @property
    def ok(self) -> bool:
        """Completed, nothing lost, nothing duplicated (and, for a user's workflow, nothing at risk)."""
        ...

    def sentence(self) -> str | None:
        """The verdict in one sentence; None while the workflow runs."""
        ...

    def summary(self) -> str:
        """Its figures on one line (a check's observed values)."""
        ...

    def lines(self) -> list[str]:
        """The report, plainly, one line a figure (what chaos prints under its events)."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The JSON of the report's `audit` (with `ok`)."""
        ...


def unfinished(workflow_status: str | None) -> str:
    """The verdict of a run that ended without completing while nothing was duplicated or at risk: its
    work is lost (a workflow failed, timed out, terminated) or cannot go on (a workflow task failing
    forever), which is not an exactly-once failure and must not be blamed as one."""
    from checkpoint_tui.core.stuck import STUCK

    if workflow_status == STUCK:
        return "no progress: its workflow task keeps failing (nothing duplicated)"
    if workflow_status == "CANCELED":
        return "cancelled (nothing duplicated)"
    return f"work lost: the workflow {workflow_status} (nothing duplicated)"


def lost_verdict(workflow_status: str | None, unit: str | None) -> str:
    """The verdict of a run that lost work while nothing was duplicated or at risk, naming the first unit
    lost (core/lost_work.py: a timeout no lab kill explains, a workflow task failing for good) when history
    named one; else `unfinished`. Never "NOT exactly once": losing work is not running it twice."""
    from checkpoint_tui.core.stuck import STUCK

    if unit is None:
        return unfinished(workflow_status)
    ending = {
        STUCK: "no progress: its workflow task keeps failing",
        "CANCELED": "the workflow was cancelled",
        "COMPLETED": "the workflow completed",
    }.get(workflow_status or "", f"the workflow {workflow_status}")
    return f"work lost: {unit}; {ending} (nothing duplicated)"
