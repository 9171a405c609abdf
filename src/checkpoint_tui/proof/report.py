"""A proof report: one check per claim, each with the values it looked at."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Check:
    name: str
    ok: bool
    observed: str
    numbers: dict[str, float | int | str | None] = field(default_factory=dict)


class Report:
    def __init__(self) -> None:
        self.checks: list[Check] = []
        self.figures: dict[str, float | None] = {}

    def check(self, name: str, ok: bool, observed: str, **numbers: float | int | str | None) -> bool:
        self.checks.append(Check(name, bool(ok), observed, numbers))
        print(f"{'PASS' if ok else 'FAIL'}  {name:<58} {observed}", flush=True)
        return bool(ok)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]
