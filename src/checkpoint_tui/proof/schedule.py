"""Chaos schedules as data: the seeded generator, and the JSON file a schedule is saved to, edited,
rerun from (`chaos --schedule FILE`) and shrunk to (`chaos --shrink FILE`).

A schedule file is a JSON object (a bare list of events is accepted too; then --steps applies):

    {"steps": 12, "seed": 3, "events": [
      {"at_step": 4, "nemesis": "pause", "target": "worker", "delay_ms": 40, "duration_s": 1.5},
      {"at_step": 7, "nemesis": "claim-window-crash", "target": "worker", "delay_ms": 0, "effect_kind": "db"}]}

`target` is implied by the nemesis (it is written for the reader and checked on load).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.effects import KINDS

WORKER_MOMENTS = ("worker-in-activity", "worker-between-activities", "worker-in-timer")
REQUIRED = ("claim-window-crash", "supervisor", "temporal-server")
PAUSES = ("pause", "hang")  # SIGSTOP then SIGCONT (watchdog held off); SIGSTOP left to the watchdog
# A stand-in for a broken build, accepted only from a schedule file (never generated): it appends a
# second outbox line for the step's email, as a ledger that lost its claim would. The audit must
# catch it, and the shrinker has a failure to shrink.
FORGE = "forge-duplicate-email"
# The workers' link to Temporal is cut for duration_s (chaos puts a proxy in it; from schedule files).
PARTITION = "partition"
TIMED = ("pause", PARTITION)  # nemeses that last duration_s
TARGETS = {
    PARTITION: "network",
    **{k: "worker" for k in (*WORKER_MOMENTS, "claim-window-crash", *PAUSES)},
    "supervisor": "supervisor",
    "temporal-server": "temporal-server",
    FORGE: "outbox",
}
PAUSE_S = (0.5, 3.0)  # a pause lasts this long (seeded); longer than the 2 s heartbeat timeout at times
MAX_PAUSE_S = 60.0


@dataclass(frozen=True)
class ChaosEvent:
    step: int
    kind: str
    delay_ms: int
    effect_kind: str | None = None
    duration_s: float | None = None  # pause and partition only

    @property
    def target(self) -> str:
        return TARGETS[self.kind]

    def describe(self) -> str:
        extra = f" ({self.effect_kind})" if self.effect_kind else ""
        extra += f" for {self.duration_s:.2f} s" if self.duration_s is not None else ""
        return f"step {self.step:>4}: {self.kind}{extra} +{self.delay_ms} ms"

    def to_json(self) -> dict:
        d: dict = {"at_step": self.step, "nemesis": self.kind, "target": self.target, "delay_ms": self.delay_ms}
        if self.effect_kind is not None:
            d["effect_kind"] = self.effect_kind
        if self.duration_s is not None:
            d["duration_s"] = self.duration_s
        return d


def make_schedule(seed: int, steps: int, kills: int, pauses: int = 0) -> list[ChaosEvent]:
    """The same seed gives the same schedule. One event per step, none at the first or last step.
    Pauses come from a stream of their own, so adding them leaves a seed's kills where they were."""
    if kills < len(REQUIRED):
        raise UsageError(f"--kills must be at least {len(REQUIRED)} (claim window, supervisor, dev server)")
    if kills + pauses > steps - 2:
        raise UsageError(f"--kills {kills} and --pauses {pauses} need --steps of at least {kills + pauses + 2}")
    rng = random.Random(seed)
    kinds = list(REQUIRED) + [rng.choice(WORKER_MOMENTS) for _ in range(kills - len(REQUIRED))]
    rng.shuffle(kinds)
    at = sorted(rng.sample(range(2, steps), kills))
    events = [
        ChaosEvent(step, kind, rng.randrange(0, 120), rng.choice(KINDS) if kind == "claim-window-crash" else None)
        for step, kind in zip(at, kinds, strict=True)
    ]
    prng = random.Random(f"pauses-{seed}")
    free = sorted(set(range(2, steps)) - set(at))
    for step in sorted(prng.sample(free, pauses)):
        kind = prng.choice(PAUSES)
        duration = round(prng.uniform(*PAUSE_S), 2) if kind == "pause" else None
        events.append(ChaosEvent(step, kind, prng.randrange(0, 120), duration_s=duration))
    return sorted(events, key=lambda e: e.step)


def save_schedule(path: Path, events: list[ChaosEvent], steps: int, seed: int | None = None) -> None:
    doc = {"steps": steps, "seed": seed, "events": [e.to_json() for e in events]}
    path.write_text(json.dumps(doc, indent=1) + "\n")


def load_schedule(path: Path, steps: int | None = None) -> tuple[list[ChaosEvent], int, int | None]:
    """(events sorted by step, steps, seed) from a schedule file; any malformed entry is a usage error."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read the schedule {path}: {err}") from None
    if isinstance(doc, list):
        doc = {"events": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise UsageError(f"{path}: a schedule is a JSON object with an 'events' list (or a bare list)")
    total = doc.get("steps", steps)
    if not isinstance(total, int) or not 2 <= total <= 100_000:
        raise UsageError(f"{path}: 'steps' (or --steps) must be a whole number 2..100000")
    events = [_event(path, i, raw, total) for i, raw in enumerate(doc["events"])]
    if len({e.step for e in events}) != len(events):
        raise UsageError(f"{path}: at most one event per step")
    seed = doc.get("seed")
    return sorted(events, key=lambda e: e.step), total, seed if isinstance(seed, int) else None


def _event(path: Path, i: int, raw: object, steps: int) -> ChaosEvent:
    where = f"{path}: event {i}"
    if not isinstance(raw, dict):
        raise UsageError(f"{where} is not an object")
    kind, step, delay = raw.get("nemesis"), raw.get("at_step"), raw.get("delay_ms", 0)
    if kind not in TARGETS:
        raise UsageError(f"{where}: nemesis must be one of {', '.join(TARGETS)}")
    if raw.get("target", TARGETS[kind]) != TARGETS[kind]:
        raise UsageError(f"{where}: {kind} targets the {TARGETS[kind]}, not {raw.get('target')!r}")
    if not isinstance(step, int) or not 1 <= step <= steps:
        raise UsageError(f"{where}: at_step must be a whole number 1..{steps} (at_s is not supported)")
    if not isinstance(delay, int) or not 0 <= delay <= 10_000:
        raise UsageError(f"{where}: delay_ms must be a whole number 0..10000")
    effect_kind = raw.get("effect_kind", "file" if kind == "claim-window-crash" else None)
    if kind == "claim-window-crash" and effect_kind not in KINDS:
        raise UsageError(f"{where}: effect_kind must be one of {', '.join(KINDS)}")
    duration = raw.get("duration_s", 1.0 if kind in TIMED else None)
    if kind in TIMED and (not isinstance(duration, int | float) or not 0 < duration <= MAX_PAUSE_S):
        raise UsageError(f"{where}: duration_s must be a number of seconds in (0, {MAX_PAUSE_S:g}]")
    return ChaosEvent(step, kind, delay, effect_kind if kind == "claim-window-crash" else None,
                      float(duration) if kind in TIMED else None)  # fmt: skip
