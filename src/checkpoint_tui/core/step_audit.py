"""The audit of a run of our own loop (an `Audit`, core/audit.py): Jepsen-style counts computed only from
durable data, the ledger, the artifact files and the workflow status in Temporal. Any lost, duplicated
or missing step is a failure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from checkpoint_tui.core.audit import unfinished
from checkpoint_tui.core.stuck import STUCK
from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.artifacts import outbox_ids, outbox_path, step_file
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.effects import KINDS, effect_id
from checkpoint_tui.settings import Settings


@dataclass
class StepAudit:
    run_id: str
    workflow_status: str | None
    total_steps: int
    claims_attempted: int = 0
    applied: int = 0
    skipped: int = 0
    recovered: int = 0
    interrupted: int = 0
    lost: int = 0
    duplicated: int = 0
    step_gaps: list[int] = field(default_factory=list)
    lost_detail: list[str] = field(default_factory=list)
    duplicated_detail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.workflow_status == "COMPLETED" and self.lost == 0 and self.duplicated == 0 and not self.step_gaps

    def sentence(self) -> str | None:
        if self.workflow_status in (None, "RUNNING"):
            return None
        state = {"COMPLETED": "completed", "CANCELED": "cancelled", STUCK: "stuck"}.get(self.workflow_status, "failed")
        done = self.total_steps - len(self.step_gaps)
        verdict = "nothing lost or duplicated" if self.ok else "NOT exactly once"
        if not self.ok and self.workflow_status != "COMPLETED" and not self.duplicated:
            # the effects of the steps it never did are lost work, not an exactly-once failure
            verdict = unfinished(self.workflow_status) + (f" · lost {self.lost}" if self.lost else "")
            verdict += f" · steps not done: {self.step_gaps[:10]}" if self.step_gaps else ""
        elif self.lost or self.duplicated:
            verdict += f" (lost {self.lost}, duplicated {self.duplicated})"
        elif self.step_gaps:
            verdict += f" (steps missing: {self.step_gaps[:10]})"
        return f"run {state} — {done} of {self.total_steps} steps, claims attempted {self.claims_attempted} · {verdict}"

    def summary(self) -> str:
        return (
            f"steps={self.total_steps - len(self.step_gaps)}/{self.total_steps} claims={self.claims_attempted} "
            f"applied={self.applied} skipped={self.skipped} recovered={self.recovered} "
            f"interrupted={self.interrupted} lost={self.lost} duplicated={self.duplicated}"
        )

    def lines(self) -> list[str]:
        lines = [
            f"workflow {self.workflow_status} · steps {self.total_steps - len(self.step_gaps)}/{self.total_steps}",
            f"claims attempted {self.claims_attempted} · applied {self.applied} · skipped {self.skipped} · "
            f"recovered {self.recovered} · interrupted {self.interrupted}",
            f"LOST {self.lost} · DUPLICATED {self.duplicated} · step gaps {self.step_gaps}",
        ]
        return lines + [f"  {detail}" for detail in (self.lost_detail + self.duplicated_detail)[:10]]

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok, "verdict": self.sentence()}


def audit_run(conn: Ledger, settings: Settings, snap: Snapshot) -> StepAudit:
    """`snap` (a full build_snapshot) supplies the claim outcomes, the gaps and the duplicate ids;
    this adds the checks of every expected effect against the ledger, the files and the outbox."""
    run_id = snap.run_id or ""
    c = snap.outcome_counts
    a = StepAudit(
        run_id,
        snap.workflow_status,
        snap.total_steps,
        claims_attempted=sum(c.values()),
        applied=c.get("applied", 0),
        skipped=c.get("skipped", 0),
        recovered=c.get("recovered", 0),
        interrupted=c.get("interrupted", 0),
        step_gaps=list(snap.missing_steps),
    )
    total, dup_ids = snap.total_steps, snap.duplicates
    effects = queries.effects_by_id(conn, run_id)
    outbox = outbox_ids(outbox_path(settings.artifacts_dir, run_id))
    notes = queries.note_counts_by_effect(conn, run_id)

    for step in range(1, total + 1):
        for kind in KINDS:
            eid = effect_id(run_id, step, kind)
            row = effects.get(eid)
            if row is None or row.applied_at is None:
                a.lost_detail.append(f"{eid}: no stamped ledger row")
                continue
            if kind == "file":
                path = step_file(settings.artifacts_dir, run_id, step)
                if not path.exists() or path.read_bytes() != row.payload.encode():
                    a.lost_detail.append(f"{eid}: file bytes differ from the payload")
            elif kind == "email":
                count = outbox.get(eid, 0)
                if count == 0:
                    a.lost_detail.append(f"{eid}: outbox line missing")
                elif count > 1:
                    a.duplicated_detail.append(f"{eid}: {count} outbox lines")
            else:
                count = notes.get(eid, 0)
                if count == 0:
                    a.lost_detail.append(f"{eid}: notes row missing")
                elif count > 1:
                    a.duplicated_detail.append(f"{eid}: {count} notes rows")
    a.lost = len(a.lost_detail)
    a.duplicated = len(a.duplicated_detail) + dup_ids
    if dup_ids:
        a.duplicated_detail.append(f"{dup_ids} duplicate effect ids")
    return a
