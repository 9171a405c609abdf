"""The game day's JSON (`gameday.json`, and each experiment's report.json): per experiment its
scenario, when it ran, whether it held, its checks and its chaos report."""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ChaosReport
from checkpoint_tui.proof.report.codec import SCHEMA, JsonObject, decode
from checkpoint_tui.proof.report.fields import empty_none, version


@dataclass(kw_only=True)
class ExperimentRecord:
    schema: int = version(SCHEMA)
    scenario: str
    guide: str = ""  # the testing guide's name for it
    watch: str = ""  # what to watch while it runs
    skipped: str | None = None  # why it did not run
    started_at: float = 0.0
    ended_at: float = 0.0
    held: bool = False
    schedule: list[JsonObject] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    report: ChaosReport | None = empty_none()  # None ({}): skipped


@dataclass(kw_only=True)
class GamedayReport:
    schema: int = version(SCHEMA)
    title: str = ""
    verdict: str = ""  # PASS | FAIL
    max_drain_s: float = 0.0
    experiments: list[ExperimentRecord] = field(default_factory=list)


def read_gameday(value: object, path: str = "report") -> GamedayReport:
    return decode(GamedayReport, value, path)
