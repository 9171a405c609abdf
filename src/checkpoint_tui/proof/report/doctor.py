"""doctor's report (`doctor --json`, core/doctor.Diagnosis.to_dict) as a reader takes it: the workflow's
activity types as doctor read them, and its findings, each with the fix it advises."""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_tui.core.diagnosis import Diagnosis, Finding
from checkpoint_tui.proof.report.codec import SCHEMA, Json, JsonObject, decode
from checkpoint_tui.proof.report.fields import rest, version


@dataclass(kw_only=True)
class DoctorReport:
    schema: int = version(SCHEMA)
    workflow_id: str | None = None
    framework: str | None = None
    activity_types: list[JsonObject] = field(default_factory=list)  # each type's options, predicted restart
    local_activities: dict[str, int] = field(default_factory=dict)
    workflow_task_timeout_s: float | None = None
    sticky_queue: bool | None = None
    findings: list[Finding] = field(default_factory=list)
    ok: bool | None = None
    measure: JsonObject | None = None  # --measure: the run the kills landed in, the cap
    more: dict[str, Json] = rest()


def read_doctor(value: object, path: str = "report") -> DoctorReport:
    return decode(DoctorReport, value, path)


def document(diagnosis: Diagnosis) -> JsonObject:
    """doctor's report as `doctor --json` writes it: the diagnosis, with the schema's number first."""
    return {"schema": SCHEMA, **diagnosis.to_dict()}
