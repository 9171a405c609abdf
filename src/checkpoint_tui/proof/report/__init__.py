"""A proof report: one check per claim, each with the values it looked at."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Check:
    name: str
    ok: bool  # passed its gate: what fails the command
    observed: str
    numbers: dict[str, float | int | str | None] = field(default_factory=dict)
    latency: bool = False  # a time against a target: gates only with --strict-latency
    met: bool = True  # a latency check's target was met (a slow one that does not gate is ok, not met)


class Report:
    """`strict_latency`: latency targets fail the report too. Without it a missed one is said (SLOW)
    and recorded (met=False) but passes: a loaded CI machine is slow, not wrong, and what `--verify`
    gates on is what the ledger and history prove (exactly once, nothing lost, no duplicate)."""

    def __init__(self, strict_latency: bool = False) -> None:
        self.checks: list[Check] = []
        self.figures: dict[str, float | None] = {}
        self.strict_latency = strict_latency

    def check(self, name: str, ok: bool, observed: str, **numbers: float | int | str | None) -> bool:
        self.checks.append(Check(name, bool(ok), observed, numbers))
        print(f"{'PASS' if ok else 'FAIL'}  {name:<58} {observed}", flush=True)
        return bool(ok)

    def latency_check(self, name: str, met: bool, observed: str, **numbers: float | int | str | None) -> bool:
        """A time against its target: FAIL with --strict-latency, else SLOW (recorded, not gating)."""
        ok = bool(met) or not self.strict_latency
        if not met and ok:
            observed += " — over target: reported, not gating (--strict-latency gates it)"
        self.checks.append(Check(name, ok, observed, numbers, latency=True, met=bool(met)))
        print(f"{'PASS' if met else 'FAIL' if not ok else 'SLOW'}  {name:<58} {observed}", flush=True)
        return ok

    @property
    def slow(self) -> list[Check]:
        """Latency checks over their target that did not gate."""
        return [c for c in self.checks if c.ok and not c.met]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


# The check that a chaos run tried something: a fault reached what it was aimed at (printed NOT EXERCISED
# when it is the only one that failed).
EXERCISED = "chaos: a fault reached an aimed activity"
