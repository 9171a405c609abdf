"""The `--verify` report (`--verify --json`, a proof bundle's report.json): every check with the values
it looked at, the run's figures beside them, and every run it started."""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_tui.proof.report import Check, Report
from checkpoint_tui.proof.report.codec import SCHEMA, decode
from checkpoint_tui.proof.report.fields import rest, version


@dataclass(kw_only=True)
class VerifyReport:
    schema: int = version(SCHEMA)
    passed: int = 0
    total: int = 0
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, float | int | None] = rest()  # verify_wall_s and the plan's own, at the top level
    runs: list[str] = field(default_factory=list)  # every run it started, in order
    strict_latency: bool = False
    slow: list[str] = field(default_factory=list)  # latency checks over their target that did not gate

    @classmethod
    def of(cls, report: Report, runs: list[str]) -> VerifyReport:
        """The report of a finished --verify: its checks, figures and runs."""
        total, failed = len(report.checks), len(report.failures)
        return cls(
            passed=total - failed,
            total=total,
            checks=list(report.checks),
            figures=dict(report.figures),
            runs=runs,
            strict_latency=report.strict_latency,
            slow=[c.name for c in report.slow],
        )


def read_verify(value: object, path: str = "report") -> VerifyReport:
    return decode(VerifyReport, value, path)
