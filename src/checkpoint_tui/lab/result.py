"""What a `chaos`, `--verify` or `doctor` run by the Lab found: its report, read back (bounded, no link
followed, never blocking on a FIFO), and the verdict said from it."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_REPORT = 64 * 1024 * 1024
SHOWN_FAILURES = 5  # failed checks (and failing runs) spelled out in a verdict


class LabError(Exception):
    """The command could not run the experiment: a usage error (exit 2), Temporal or the ledger out of
    reach (3), a timeout, or no report. str(err) is the CLI's one-line message."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    observed: str


def _list(value: object) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class Result:
    """What one `chaos`, `--verify` or `doctor` found. `passed` is the command's verdict (exit 0);
    `str(result)` is its verdict. `report` is the JSON report as written (at `report_path`); with
    several runs (`runs=`) the audit figures add up every run's."""

    command: str
    passed: bool
    verdict: str
    exit_code: int
    report: dict
    report_path: Path
    junit_path: Path | None = None
    proof_path: Path | None = None
    output_path: Path | None = None
    output: str = field(default="", repr=False)

    def __str__(self) -> str:
        return self.verdict

    @property
    def checks(self) -> list[Check]:
        return [
            Check(str(c.get("name")), c.get("ok") is True, str(c.get("observed", "")))
            for c in _list(self.report.get("checks"))
        ]

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def audits(self) -> list[dict]:
        """Each run's audit (chaos): the lead's, or every run's with `runs=`, then each coverage round's
        with `until_covered=`."""
        return all_audits(self.report)

    @property
    def audit(self) -> dict:
        """The lead run's audit (chaos): activities, re-executed calls, at risk, lost, duplicated..."""
        return self.audits[0] if self.audits else {}

    def _entries(self, key: str) -> list[dict]:
        return [e for a in self.audits for e in _list(a.get(key))]

    @property
    def at_risk(self) -> list[dict]:
        """Re-executed tool calls (or other activities) with no effect through the ledger, each with its
        `tool`, `call_id`, `activity_id` and `attempt`."""
        return self._entries("at_risk")

    @property
    def re_executed(self) -> list[dict]:
        return self._entries("re_executed")

    @property
    def guarded(self) -> list[dict]:
        """Re-executed calls whose effects went through the ledger (each done once)."""
        return self._entries("guarded_re_executed")

    @property
    def model_reruns(self) -> list[dict]:
        return self._entries("model_reruns")

    @property
    def tokens_paid_again(self) -> int:
        return sum(_int(a.get("tokens_paid_again")) for a in self.audits)

    @property
    def duplicated(self) -> int:
        return sum(_int(a.get("duplicated")) for a in self.audits)

    @property
    def lost(self) -> int:
        return sum(_int(a.get("lost")) for a in self.audits)

    @property
    def lost_work(self) -> int:
        """Units of work the application lost (a task that sat out its timeout, a failed workflow, a
        workflow task failing for good): not what the kills cost in waiting."""
        return sum(_int(a.get("lost_work_count")) for a in self.audits)

    @property
    def kills(self) -> list[dict]:
        return _list(self.report.get("kills"))

    @property
    def windows(self) -> dict[str, int]:
        """The kill windows hit (model call, tool call, the effect's claim/write/stamp, ...), counted."""
        found = self.report.get("windows")
        return {str(k): _int(v) for k, v in found.items()} if isinstance(found, dict) else {}

    @property
    def findings(self) -> list[dict]:
        """doctor: each finding (kind, subject, problem, fix)."""
        return _list(self.report.get("findings"))


def assert_passed(result: Result) -> None:
    """Raise AssertionError whose message is the verdict (the audit's sentence, each call at risk named
    by tool and call id, then the checks that failed), unless the result passed."""
    __tracebackhide__ = True  # pytest: the failure points at the caller's line
    if not result.passed:
        raise AssertionError(result.verdict)


def all_audits(report: dict) -> list[dict]:
    """A chaos report's audits: every run's (`runs`, else the lead's `audit`), then every coverage round's."""
    runs = [r.get("audit") for r in _list(report.get("runs"))] or [report.get("audit")]
    coverage = report.get("coverage")
    rounds = [r.get("audit") for r in _list(coverage.get("rounds"))] if isinstance(coverage, dict) else []
    return [a for a in [*runs, *rounds] if isinstance(a, dict)]


def chaos_verdict(report: dict, passed: bool) -> str:
    """The verdict of a chaos report: each failing run's audit sentence (the one the app and `status`
    show; the lead's if none failed), then each failed check with what it saw."""
    audits = all_audits(report)
    audits = [a for a in audits if a.get("ok") is False][:SHOWN_FAILURES] or audits[:1]
    sentences = [a["verdict"] for a in audits if isinstance(a.get("verdict"), str)]
    head = f"chaos seed {report.get('seed')}: {'PASS' if passed else 'FAIL'}"
    failed = [c for c in _list(report.get("checks")) if c.get("ok") is not True]
    lines = [f"{head}: {sentences[0]}" if sentences else head, *sentences[1:]]
    lines += [f"{c.get('name')}: {str(c.get('observed', ''))[:600]}" for c in failed[:SHOWN_FAILURES]]
    lines += (
        [f"... and {len(failed) - SHOWN_FAILURES} more failed checks (see the report)"]
        if len(failed) > SHOWN_FAILURES
        else []
    )
    return lines[0] + "".join(f"\n  {line}" for line in lines[1:])


def verify_verdict(report: dict) -> str:
    failed = [str(c.get("name")) for c in _list(report.get("checks")) if c.get("ok") is not True]
    total = report.get("total")
    if not failed:
        return f"verify: ALL CHECKS PASS — {report.get('passed')}/{total}"
    return f"verify: CHECKS FAILED — {len(failed)}/{total}: {', '.join(failed)}"


def doctor_verdict(report: dict) -> str:
    findings = _list(report.get("findings"))
    if not findings:
        return "doctor: no findings (a kill costs no timeout anywhere)"
    said = [f"{f.get('subject')}: {f.get('problem')} (fix: {f.get('fix')})" for f in findings[:SHOWN_FAILURES]]
    return f"doctor: {len(findings)} finding(s)" + "".join(f"\n  {s}" for s in said)


def read_report(path: Path, exit_code: int, output: str) -> dict:
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
