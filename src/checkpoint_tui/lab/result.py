"""What a `chaos`, `--verify` or `doctor` run by the Lab found: its report, read back (bounded, no link
followed, never blocking on a FIFO), and the verdict said from it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TypeAlias

from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import ActivityAuditRecord
from checkpoint_tui.proof.report.chaos import ChaosReport, read_chaos
from checkpoint_tui.proof.report.codec import JsonObject, ReportError, encode
from checkpoint_tui.proof.report.doctor import DoctorReport, read_doctor
from checkpoint_tui.proof.report.verify import VerifyReport, read_verify

MAX_REPORT = 64 * 1024 * 1024
SHOWN_FAILURES = 5  # failed checks (and failing runs) spelled out in a verdict


class LabError(Exception):
    """The command could not run the experiment: a usage error (exit 2), Temporal or the ledger out of
    reach (3), a timeout, or no report. str(err) is the CLI's one-line message."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


Document: TypeAlias = ChaosReport | VerifyReport | DoctorReport


def read_document(command: str, doc: JsonObject) -> Document:
    """The report's JSON as its command's schema reads it (proof/report/); a ReportError says where it
    does not fit. `chaos --every-window`'s report reads as its checks (its rounds are reports of their own)."""
    if command == "verify":
        return read_verify(doc)
    if command == "doctor":
        return read_doctor(doc)
    found = read_chaos(doc)
    return found if isinstance(found, ChaosReport) else ChaosReport(checks=found.checks, wall_s=found.wall_s)


def checked_document(command: str, doc: JsonObject, path: Path, exit_code: int) -> Document:
    """`read_document`, or LabError with where the report at `path` does not fit its schema."""
    try:
        return read_document(command, doc)
    except ReportError as err:
        raise LabError(f"the report at {path} is not a {command} report: {err}", exit_code or 1) from None


def _as_dicts(records: Sequence[object]) -> list[JsonObject]:
    return [encode(r) for r in records]


@dataclass(frozen=True)
class Result:
    """What one `chaos`, `--verify` or `doctor` found. `passed` is the command's verdict (exit 0);
    `str(result)` is its verdict. `report` is the JSON report as written (at `report_path`), `document`
    the same report typed (proof/report/; docs/report.md); with several runs (`runs=`) the audit figures
    add up every run's."""

    command: str
    passed: bool
    verdict: str
    exit_code: int
    report: JsonObject
    report_path: Path
    junit_path: Path | None = None
    proof_path: Path | None = None
    output_path: Path | None = None
    output: str = field(default="", repr=False)

    def __str__(self) -> str:
        return self.verdict

    @cached_property
    def document(self) -> Document:
        """`report` as its command's schema reads it. The Lab's own results were checked as they were read
        (a report that does not fit is a LabError); a Result built by hand from JSON that does not fit
        reads as an empty report."""
        return _read_or_empty(self.command, self.report)

    @property
    def _chaos(self) -> ChaosReport:
        return self.document if isinstance(self.document, ChaosReport) else ChaosReport()

    @property
    def checks(self) -> list[Check]:
        return [] if isinstance(self.document, DoctorReport) else list(self.document.checks)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def audits(self) -> list[JsonObject]:
        """Each run's audit (chaos): the lead's, or every run's with `runs=`, then each coverage round's
        with `until_covered=`."""
        return _as_dicts(self._chaos.audits)

    @property
    def audit(self) -> JsonObject:
        """The lead run's audit (chaos): activities, re-executed calls, at risk, lost, duplicated..."""
        return self.audits[0] if self.audits else {}

    @property
    def _activity_audits(self) -> list[ActivityAuditRecord]:
        return [a for a in self._chaos.audits if isinstance(a, ActivityAuditRecord)]

    @property
    def at_risk(self) -> list[JsonObject]:
        """Re-executed tool calls (or other activities) with no effect through the ledger, each with its
        `tool`, `call_id`, `activity_id` and `attempt`."""
        return _as_dicts([c for a in self._activity_audits for c in a.at_risk])

    @property
    def re_executed(self) -> list[JsonObject]:
        return _as_dicts([c for a in self._activity_audits for c in a.re_executed])

    @property
    def guarded(self) -> list[JsonObject]:
        """Re-executed calls whose effects went through the ledger (each done once)."""
        return _as_dicts([c for a in self._activity_audits for c in a.guarded_re_executed])

    @property
    def model_reruns(self) -> list[JsonObject]:
        return _as_dicts([c for a in self._activity_audits for c in a.model_reruns])

    @property
    def tokens_paid_again(self) -> int:
        return sum(a.tokens_paid_again for a in self._activity_audits)

    @property
    def duplicated(self) -> int:
        return sum(a.duplicated for a in self._chaos.audits)

    @property
    def lost(self) -> int:
        return sum(a.lost for a in self._chaos.audits)

    @property
    def lost_work(self) -> int:
        """Units of work the application lost (a task that sat out its timeout, a failed workflow, a
        workflow task failing for good): not what the kills cost in waiting."""
        return sum(a.lost_work_count for a in self._activity_audits)

    @property
    def kills(self) -> list[JsonObject]:
        return _as_dicts(self._chaos.kills)

    @property
    def windows(self) -> dict[str, int]:
        """The kill windows hit (model call, tool call, the effect's claim/write/stamp, ...), counted."""
        return dict(self._chaos.windows)

    @property
    def findings(self) -> list[JsonObject]:
        """doctor: each finding (kind, subject, problem, fix)."""
        return _as_dicts(self.document.findings) if isinstance(self.document, DoctorReport) else []


def assert_passed(result: Result) -> None:
    """Raise AssertionError whose message is the verdict (the audit's sentence, each call at risk named
    by tool and call id, then the checks that failed), unless the result passed."""
    __tracebackhide__ = True  # pytest: the failure points at the caller's line
    if not result.passed:
        raise AssertionError(result.verdict)


def _read_or_empty(command: str, doc: JsonObject) -> Document:
    try:
        return read_document(command, doc)
    except ReportError:
        return VerifyReport() if command == "verify" else DoctorReport() if command == "doctor" else ChaosReport()


def _typed(command: str, report: Document | JsonObject) -> Document:
    """A report as its schema, given typed or as JSON (JSON that does not fit reads as an empty one)."""
    return _read_or_empty(command, report) if isinstance(report, dict) else report


def chaos_verdict(report: Document | JsonObject, passed: bool) -> str:
    """The verdict of a chaos report: each failing run's audit sentence (the one the app and `status`
    show; the lead's if none failed), then each failed check with what it saw."""
    doc = _typed("chaos", report)
    assert isinstance(doc, ChaosReport)
    audits = [a for a in doc.audits if a.ok is False][:SHOWN_FAILURES] or doc.audits[:1]
    sentences = [a.verdict for a in audits if a.verdict is not None]
    head = f"chaos seed {doc.seed}: {'PASS' if passed else 'FAIL'}"
    failed = [c for c in doc.checks if not c.ok]
    lines = [f"{head}: {sentences[0]}" if sentences else head, *sentences[1:]]
    lines += [f"{c.name}: {c.observed[:600]}" for c in failed[:SHOWN_FAILURES]]
    lines += (
        [f"... and {len(failed) - SHOWN_FAILURES} more failed checks (see the report)"]
        if len(failed) > SHOWN_FAILURES
        else []
    )
    return lines[0] + "".join(f"\n  {line}" for line in lines[1:])


def verify_verdict(report: Document | JsonObject) -> str:
    doc = _typed("verify", report)
    assert isinstance(doc, VerifyReport)
    failed = [c.name for c in doc.checks if not c.ok]
    if not failed:
        return f"verify: ALL CHECKS PASS — {doc.passed}/{doc.total}"
    return f"verify: CHECKS FAILED — {len(failed)}/{doc.total}: {', '.join(failed)}"


def doctor_verdict(report: Document | JsonObject) -> str:
    doc = _typed("doctor", report)
    assert isinstance(doc, DoctorReport)
    if not doc.findings:
        return "doctor: no findings (a kill costs no timeout anywhere)"
    said = [f"{f.subject}: {f.problem} (fix: {f.fix})" for f in doc.findings[:SHOWN_FAILURES]]
    return f"doctor: {len(doc.findings)} finding(s)" + "".join(f"\n  {s}" for s in said)


def read_report(path: Path, exit_code: int, output: str) -> JsonObject:
    """The report the command wrote (a regular file, no link followed, at most MAX_REPORT bytes, a
    JSON object); a command that wrote none failed to run the experiment."""
    doc: object = None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO planted there: no wait
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                data = f.read(MAX_REPORT + 1)
                doc = json.loads(data) if len(data) <= MAX_REPORT else None
    except (OSError, ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        tail = " | ".join(output.strip().splitlines()[-3:])[:1000]
        raise LabError(f"no report at {path} (exit {exit_code}): {tail}", exit_code or 1)
    return doc
