"""The reports' one schema (proof/report/, docs/report.md): a report written is the report read back; a
report as checkpoint-tui wrote it before the schema had a number reads; a report of the wrong shape,
too big or too deep is a ReportError naming where (the Lab's a LabError), never a traceback; a schema
newer than this code is refused."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_tui.core.activity_audit import ActivityAudit
from checkpoint_tui.core.diagnosis import Diagnosis, Finding
from checkpoint_tui.core.step_audit import StepAudit
from checkpoint_tui.lab.result import LabError, Result, checked_document, read_report
from checkpoint_tui.proof.chaos.run_totals import totals
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import ActivityAuditRecord, Call, LostWork, StepAuditRecord, audit_record
from checkpoint_tui.proof.report.chaos import (
    ChaosReport,
    CommandEvents,
    Coverage,
    CoverageRound,
    EveryWindow,
    EveryWindowReport,
    Fired,
    FleetFigures,
    NotFired,
    Placement,
    RunRecord,
    StepFigures,
    read_chaos,
)
from checkpoint_tui.proof.report.codec import SCHEMA, ReportError, encode, loads
from checkpoint_tui.proof.report.doctor import read_doctor
from checkpoint_tui.proof.report.gameday import ExperimentRecord, GamedayReport, read_gameday
from checkpoint_tui.proof.report.verify import VerifyReport, read_verify


def _call(activity_id: str, tool: str) -> Call:
    return Call(seq=int(activity_id), activity_id=activity_id, type="send", attempt=2, execution="e1", tool=tool)


def _report() -> ChaosReport:
    audit = audit_record(
        ActivityAudit(
            "run-1",
            "SendLines",
            "COMPLETED",
            activities=4,
            completed=4,
            re_executed=[
                {"seq": 2, "activity_id": "2", "type": "send", "attempt": 2, "class": "tool", "guarded": True}
            ],
            guarded_re_executed=[{"seq": 2, "activity_id": "2", "type": "send", "attempt": 2, "guarded": True}],
        )
    )
    kill = Fired("worker-in-activity", 2, 4242, 1700000000.5, {"label": "tool · send", "into_s": 0.25, "seed": 3})
    kill.restart_s, kill.landed = 1.5, "inside"
    placed = Placement("run-1", "kill", 4242, 1700000000.5, 2, "tool call")
    checks = [Check("chaos: workflow COMPLETED", True, "workflow COMPLETED · activities 4/4")]
    return ChaosReport(
        seed=3,
        workload="workflow",
        unit="activity",
        steps=8,
        run_id="run-1",
        schedule=[{"at_step": 2, "nemesis": "worker-in-activity", "target": "worker", "delay_ms": 40}],
        run_started_at=1700000000.0,
        audit=audit,
        kills=[kill],
        not_fired=[
            NotFired({"at_step": 7, "nemesis": "supervisor", "target": "supervisor"}, "the run completed first")
        ],
        median_restart_s=1.5,
        wall_s=12.5,
        windows={"tool call": 1},
        kill_windows=[placed],
        fleet=FleetFigures(commands=[CommandEvents(queue="q", command="python w.py", events={"spawn": 1})]),
        checks=checks,
        runs=[RunRecord(run_id="run-1", audit=audit, checks=checks)],
        totals=totals([audit]),
        coverage=Coverage(max_kills=4, kills=1, rounds=[CoverageRound(run_id="run-2", audit=audit, wall_s=3.0)]),
    )


def _round_trip(doc: object) -> object:
    return json.loads(json.dumps(encode(doc)))


def test_a_report_written_reads_back_equal():
    report = _report()
    assert read_chaos(_round_trip(report)) == report
    windows = EveryWindowReport(every_window=EveryWindow(rounds={"worker-before-tool": report}, table={"send": {}}))
    assert read_chaos(_round_trip(windows)) == windows
    step = StepAuditRecord(run_id="run-9", total_steps=6, recovered=1, step_gaps=[4], ok=False, verdict="lost")
    ours = dataclasses.replace(
        report,
        audit=step,
        runs=None,
        totals=None,
        coverage=None,
        figures=StepFigures(nemeses={}, worker_deaths_seen_by_supervisor=2),
    )
    assert read_chaos(_round_trip(ours)) == ours
    verify = VerifyReport(passed=1, total=1, checks=report.checks, figures={"verify_wall_s": 9.5, "n": 3}, runs=["r"])
    assert read_verify(_round_trip(verify)) == verify
    skipped = ExperimentRecord(scenario="deploy", skipped="no --deploy")
    day = GamedayReport(
        title="t", verdict="PASS", experiments=[ExperimentRecord(scenario="kill-all", report=report), skipped]
    )
    assert read_gameday(_round_trip(day)) == day
    assert encode(skipped)["report"] == {}  # a skipped experiment's report, as it always was


def test_the_json_keeps_its_shape():
    """Every key a report had before the schema is still where it was, with its value; a fired event's
    own figures sit beside its kind, as before."""
    doc = encode(_report())
    assert doc["schema"] == SCHEMA
    assert doc["kills"][0] == {
        "kind": "worker-in-activity",
        "step": 2,
        "pid": 4242,
        "at": 1700000000.5,
        "label": "tool · send",
        "into_s": 0.25,
        "seed": 3,
        "restart_s": 1.5,
        "stalled_s": None,
        "recovery_s": None,
        "landed": "inside",
    }
    assert doc["not_fired"][0] == {
        "at_step": 7,
        "nemesis": "supervisor",
        "target": "supervisor",
        "why": "the run completed first",
    }
    assert doc["audit"]["guarded_re_executed"][0]["activity_id"] == "2" and doc["audit"]["lost_work"] == {}
    assert doc["totals"] == {"runs": 1, "runs_completed": 1, "lost": 0, "duplicated": 0, "at_risk": 0} | {
        k: v for k, v in doc["totals"].items() if k not in ("runs", "runs_completed", "lost", "duplicated", "at_risk")
    }
    assert "figures" not in doc and "fleet" in doc and set(doc["fleet"]) == {"commands"}


def test_a_report_written_before_the_schema_had_a_number_reads():
    """As chaos wrote it before (no "schema", our loop's figures at the top level, no `resets` or
    `not_fired`, which came later): it reads, and what was written is what is read."""
    old = {
        "seed": 3,
        "steps": 12,
        "run_id": "run-20260101-000000-beef",
        "schedule": [{"at_step": 4, "nemesis": "supervisor", "target": "supervisor", "delay_ms": 12}],
        "audit": {
            "run_id": "run-20260101-000000-beef",
            "workflow_status": "COMPLETED",
            "total_steps": 12,
            "claims_attempted": 37,
            "applied": 36,
            "skipped": 0,
            "recovered": 1,
            "interrupted": 1,
            "lost": 0,
            "duplicated": 0,
            "step_gaps": [],
            "lost_detail": [],
            "duplicated_detail": [],
            "ok": True,
            "verdict": "run completed — 12/12 steps, exactly once",
        },
        "kills": [
            {
                "kind": "supervisor",
                "step": 4,
                "pid": 77,
                "at": 5.0,
                "restart_s": 0.5,
                "stalled_s": 0.5,
                "recovery_s": 0.5,
            }
        ],
        "pauses": [],
        "median_restart_s": 0.5,
        "wall_s": 30.0,
        "windows": {},
        "kill_windows": [],
        "nemeses": {
            "supervisor": {
                "count": 1,
                "median_stall_s": 0.5,
                "max_stall_s": 0.5,
                "median_recovery_s": 0.5,
                "max_recovery_s": 0.5,
            }
        },
        "worker_deaths_seen_by_supervisor": 0,
        "checks": [{"name": "chaos: no lost effect", "ok": True, "observed": "lost 0", "numbers": {}}],
    }
    report = read_chaos(old)
    assert isinstance(report, ChaosReport) and report.schema == SCHEMA and report.unit == "step"
    assert isinstance(report.audit, StepAuditRecord) and report.audit.recovered == 1 and report.audit.ok
    assert isinstance(report.figures, StepFigures) and report.figures.nemeses["supervisor"].count == 1
    assert report.kills[0].restart_s == 0.5 and report.resets == [] and report.not_fired == []
    again = encode(report)
    for k, v in old.items():
        if k != "checks":  # a check's JSON now has every field (latency, met)
            assert again[k] == v, k


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"audit": "x"}, "report.audit: expected an object, got a string"),
        ({"runs": 3}, "report.runs: expected a list, got a whole number"),
        ({"checks": [1, "a"]}, "report.checks[0]: expected an object, got a whole number"),
        ({"checks": [{"name": "c", "ok": True}]}, "report.checks[0]: missing 'observed'"),
        ({"windows": {"tool call": True}}, "report.windows.tool call: expected a whole number, got true or false"),
        ({"kills": [{"kind": "x", "step": 1, "pid": None}]}, "report.kills[0]: missing 'at'"),
        ({"audit": {"total_steps": 2, "step_gaps": ["4"]}}, "report.audit.step_gaps[0]: expected a whole number"),
        ({"coverage": {"rounds": "no"}}, "report.coverage.rounds: expected a list"),
        ([], "report: expected an object, got a list"),
    ],
)
def test_a_report_of_the_wrong_shape_says_where(doc: object, where: str):
    with pytest.raises(ReportError) as err:
        read_chaos(doc)
    assert str(err.value).startswith(where)


def test_too_big_too_deep_or_not_json_is_a_report_error():
    with pytest.raises(ReportError, match="more than the 100"):
        loads(b"{" + b" " * 200 + b"}", 100)
    with pytest.raises(ReportError, match="nested too deep"):
        loads("[" * 100_000 + "]" * 100_000, 10**6)
    with pytest.raises(ReportError, match="not JSON"):
        loads(b"{\xff", 100)


def test_the_version_is_checked():
    assert read_chaos({"schema": SCHEMA}).schema == SCHEMA
    for bad, said in (
        (SCHEMA + 1, "a newer checkpoint-tui wrote it"),
        (0, "not a schema number"),
        ("1", "expected a whole number"),
    ):
        with pytest.raises(ReportError, match=said):
            read_chaos({"schema": bad})
    with pytest.raises(ReportError, match="report.schema: schema 2: this checkpoint-tui reads 1 to 1"):
        read_verify({"schema": 2})


def test_the_lab_refuses_a_report_that_does_not_fit_with_its_line(tmp_path: Path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"seed": 1, "kills": [{"kind": "x"}]}))
    doc = read_report(path, 0, "")
    with pytest.raises(LabError, match=r"is not a chaos report: report.kills\[0\]: missing"):
        checked_document("chaos", doc, path, 0)
    assert checked_document("chaos", {"seed": 1}, path, 0) == ChaosReport(seed=1)
    assert Result("chaos", True, "", 0, doc, path).kills == []  # built by hand: reads as empty


def test_the_audit_records_name_every_field_of_the_audits():
    """An audit's record has each field its dataclass writes (and ok, verdict): a field added to an
    audit is read, typed, by the report's reader too."""
    for live, record in ((StepAudit, StepAuditRecord), (ActivityAudit, ActivityAuditRecord)):
        assert [f.name for f in dataclasses.fields(live)] + ["ok", "verdict"] == [
            f.name for f in dataclasses.fields(record)
        ], live.__name__
    audit = audit_record(StepAudit("run-1", "COMPLETED", 3, applied=3))
    assert audit == StepAuditRecord(
        run_id="run-1", workflow_status="COMPLETED", total_steps=3, applied=3, ok=True, verdict=audit.verdict
    )
    assert isinstance(audit_record(ActivityAudit("r", None, "RUNNING")).lost_work, type(None))
    assert LostWork(units=["u"]).units == ["u"] and _call("3", "send").id == ("e1", "3")


def test_doctor_s_report_reads_as_it_is_written():
    """doctor writes its report with the schema's number, as the others; one without (older) reads too."""
    from checkpoint_tui.proof.report.doctor import document

    diagnosis = Diagnosis("wf-1", None, [], {}, 10.0, True, [Finding("single-attempt", "send", "p", "f")])
    written = json.loads(json.dumps(document(diagnosis), sort_keys=True))
    assert written["schema"] == SCHEMA
    for doc in (written, {k: v for k, v in written.items() if k != "schema"}):
        report = read_doctor(doc)
        assert report.findings == diagnosis.findings and report.ok is False and report.sticky_queue is True
    with pytest.raises(ReportError):
        read_doctor({**written, "schema": SCHEMA + 1})


def test_the_schema_bench_runs(tmp_path: Path):
    """bench/report_schema.py (tiny: not a measurement) reads back what it wrote and prints each candidate."""
    bench = Path(__file__).resolve().parent.parent / "bench" / "report_schema.py"
    env = {**os.environ, "CHECKPOINT_BENCH_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(bench), "--runs", "5", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads((tmp_path / "report_schema.json").read_text())["candidates"]
    assert {"json (dicts, no types)", "dataclasses + own reader"} <= set(found)
