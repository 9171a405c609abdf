"""The Jepsen-style counts of several chaos runs under one schedule (`chaos --runs N`), summed."""

from __future__ import annotations

from dataclasses import fields

from checkpoint_tui.proof.report.audit import ActivityAuditRecord, AuditRecord
from checkpoint_tui.proof.report.chaos import Totals


def counts(audit: AuditRecord) -> dict[str, int]:
    """An audit's whole-number figures by name, and each list of calls a user's workflow's audit has,
    counted."""
    found = {f.name: value for f in fields(audit) if type(value := getattr(audit, f.name)) is int}
    if isinstance(audit, ActivityAuditRecord):
        found.update({name: len(calls) for name, calls in audit.calls.items()})
    return found


def totals(audits: list[AuditRecord]) -> Totals:
    """The Jepsen-style counts summed over several runs' audits (the figures the first one has), and
    how many runs completed."""
    each = [counts(a) for a in audits]
    summed = {name: sum(c.get(name, 0) for c in each) for name in each[0]}
    lost, duplicated, at_risk = summed.pop("lost", 0), summed.pop("duplicated", 0), summed.pop("at_risk", None)
    summed.pop("lost_work_count", None)  # a figure only where history was read: summed over those runs
    read = [a for a in audits if isinstance(a, ActivityAuditRecord) and a.lost_work is not None]
    return Totals(
        runs=len(audits),
        runs_completed=sum(a.workflow_status == "COMPLETED" for a in audits),
        lost=lost,
        duplicated=duplicated,
        at_risk=at_risk,
        lost_work=sum(a.lost_work_count for a in read) if read else None,
        counts=summed,
    )
