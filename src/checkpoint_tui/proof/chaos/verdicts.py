"""Chaos's own verdict on a run, read back from the reports chaos left in a home's run/ folder: what
`status` cites when Temporal's history cannot be read (after `stop`), so a run chaos failed never reads
as clean. The files are untrusted: each is bounded, read without following a link, and one that does
not read as a chaos report is passed over."""

from __future__ import annotations

from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files.inputs import read_input
from checkpoint_tui.proof.report.chaos import ChaosReport, read_chaos
from checkpoint_tui.proof.report.codec import ReportError, loads

MAX_FILES = 64  # the newest reports looked at
MAX_BYTES = 16 * 1024 * 1024  # a 256-run report is about 2 MB


def chaos_verdicts(run_dir: Path, run_id: str) -> list[dict[str, str]]:
    """Each chaos report in `run_dir` that covers `run_id` (as its lead or one of its runs), newest
    first: its path and one line with the verdict and the first check that failed."""
    try:
        found = [p for p in run_dir.glob("chaos-seed*.json") if p.is_file() and not p.is_symlink()]
    except OSError:
        return []
    found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    said = []
    for path in found[:MAX_FILES]:
        try:
            report = read_chaos(loads(read_input(path, "chaos report", MAX_BYTES, follow=False), MAX_BYTES))
        except (UsageError, ReportError, OSError):
            continue
        if isinstance(report, ChaosReport) and run_id in {report.run_id, *(r.run_id for r in report.runs or [])}:
            said.append({"path": str(path), "line": _line(report)})
    return said


def _line(report: ChaosReport) -> str:
    failed = [c for c in report.checks if not c.ok]
    if not failed:
        return f"chaos seed {report.seed}: verdict PASS"
    first = failed[0]
    return f"chaos seed {report.seed}: verdict FAIL · {first.name}: {first.observed[:300]}"
