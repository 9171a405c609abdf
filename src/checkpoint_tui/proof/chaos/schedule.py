"""Chaos schedules as data: the seeded generator, the JSON file a schedule is saved to, edited, rerun
from (`chaos --schedule FILE`) and shrunk to (`chaos --shrink FILE`), and the order events fire in.

A schedule file is a JSON object (a bare list of events is accepted too; then --steps applies):

    {"steps": 12, "seed": 3, "events": [
      {"at_step": 4, "nemesis": "pause", "target": "worker", "delay_ms": 40, "duration_s": 1.5},
      {"at_s": 6.5, "nemesis": "partition", "target": "network", "delay_ms": 0, "duration_s": 3.0},
      {"at_step": 7, "nemesis": "claim-window-crash", "target": "worker", "delay_ms": 0, "effect_kind": "db"},
      {"at_step": 9, "nemesis": "reset", "target": "workflow", "delay_ms": 0, "back_steps": 2}]}

`target` is implied by the nemesis (it is written for the reader and checked on load). An event is
placed by step (`at_step`: when the run reaches that step's moment) or by time (`at_s`: seconds
after the run started), exactly one of the two.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import SCHEDULE_LIMIT, read_json_file, write_output
from checkpoint_tui.ledger.effects import KINDS
from checkpoint_tui.proof.chaos import fleet_events
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_PAUSE, ACTIVITY_RESET
from checkpoint_tui.proof.nemeses.hop import HOP_KINDS
from checkpoint_tui.proof.nemeses.model_faults import FAULTS as MODEL_FAULTS
from checkpoint_tui.proof.nemeses.resets import BACK_STEPS, MAX_BACK_STEPS, RESET
from checkpoint_tui.settings import Settings

WORKER_MOMENTS = ("worker-in-activity", "worker-between-activities", "worker-in-timer")
REQUIRED = ("claim-window-crash", "supervisor", "temporal-server")  # a seeded schedule's kills, at least
PAUSES = ("pause", "hang")  # SIGSTOP then SIGCONT (watchdog held off); SIGSTOP left to the watchdog
# A stand-in for a broken build, accepted only from a schedule file (never generated): it appends a
# second outbox line for the step's email, as a ledger that lost its claim would. The audit must
# catch it, and the shrinker has a failure to shrink.
FORGE = "forge-duplicate-email"
# The workers' link to Temporal is cut for duration_s (chaos puts a proxy in it; from schedule files).
PARTITION = "partition"
TIMED = ("pause", PARTITION, ACTIVITY_PAUSE, *fleet_events.TIMED)  # nemeses that last duration_s
# Deaths a worker deals itself at one point of the effect protocol (the fault plan's hooks, at an
# exact moment no timing can promise): the seeded generator draws only the claim window; the others
# come from schedule files and `chaos --until-covered`. Value: the fault kind.
HOOK_CRASHES = {
    "tool-call-crash": "crash_in_tool",  # the first tool call from its step on (a step may have none)
    "before-claim-crash": "crash_before_claim",
    "claim-window-crash": "crash_after_claim",
    "write-window-crash": "crash_after_write",
    "stamped-crash": "crash_after_stamp",
}
EFFECT_HOOKS = ("claim-window-crash", "write-window-crash")  # these name the effect kind they hit
TARGETS = {
    PARTITION: "network",
    **{k: "worker" for k in (*WORKER_MOMENTS, *HOOK_CRASHES, *PAUSES, *HOP_KINDS)},
    "supervisor": "supervisor",
    "temporal-server": "temporal-server",
    FORGE: "outbox",
    RESET: "workflow",  # a Temporal workflow reset to an earlier workflow task (proof/nemeses/resets.py)
    ACTIVITY_PAUSE: "activity",
    ACTIVITY_RESET: "activity",
    **fleet_events.TARGETS,  # the game-day nemeses (proof/chaos/fleet_events.py)
}

PAUSE_S = (0.5, 3.0)  # a pause lasts this long (seeded); longer than the 2 s heartbeat timeout at times
PARTITION_S = (0.5, 4.0)  # a seeded partition lasts this long; past the 2 s heartbeat timeout at times
MAX_PAUSE_S = 60.0
MAX_AT_S = 3600.0
MAX_EVENTS = 10_000  # a schedule's events, seeded or from a file: hours of chaos at one event per step
# The time a schedule's pauses, partitions and activity pauses hold the run, in all: 10,000 events
# of 60 s each would otherwise be a valid week of chaos. A hang lasts until the watchdog ends it and
# has no duration to count.
MAX_HELD_S = 3600.0
MAX_SEED = 2**63 - 1  # as --seed takes it
# What an at_s event may be: the moment-of-a-step kills name a moment (inside step k's activity, in
# its timer, its claim window, its email) that a clock time cannot promise, so they take at_step only.
AT_S_KINDS = (*PAUSES, PARTITION, "supervisor", "temporal-server", *fleet_events.KINDS)


@dataclass(frozen=True)
class ChaosEvent:
    step: int | None  # None for an event placed by time (at_s)
    kind: str
    delay_ms: int
    effect_kind: str | None = None
    duration_s: float | None = None  # pause and partition only
    at_s: float | None = None  # seconds after the run started, instead of a step
    back_steps: int | None = None  # reset only: how many steps back it goes
    opts: tuple[tuple[str, object], ...] = ()  # a game-day nemesis's own parameters (fleet_events.py)

    @property
    def target(self) -> str:
        return TARGETS[self.kind]

    @property
    def due_s(self) -> float:
        """An at_s event fires this long after the run started (its delay_ms included)."""
        return (self.at_s or 0.0) + self.delay_ms / 1000

    def describe(self, unit: str = "step", units: str = "steps") -> str:
        """One line of the printed schedule; `unit`, `units`: what its place counts (the workload's word)."""
        extra = f" ({self.effect_kind})" if self.effect_kind else ""
        extra += f" for {self.duration_s:.2f} s" if self.duration_s is not None else ""
        extra += f" {self.back_steps} {units} back" if self.back_steps is not None else ""
        extra += fleet_events.describe(self.opts)
        where = f"{unit} {self.step:>4}" if self.at_s is None else f"at {self.at_s:.2f} s"
        return f"{where}: {self.kind}{extra} +{self.delay_ms} ms"

    def to_json(self) -> dict:
        place = {"at_step": self.step} if self.at_s is None else {"at_s": self.at_s}
        d: dict = {**place, "nemesis": self.kind, "target": self.target, "delay_ms": self.delay_ms}
        if self.effect_kind is not None:
            d["effect_kind"] = self.effect_kind
        if self.duration_s is not None:
            d["duration_s"] = self.duration_s
        if self.back_steps is not None:
            d["back_steps"] = self.back_steps
        return {**d, **dict(self.opts)}


def in_order(events: list[ChaosEvent]) -> list[ChaosEvent]:
    """A schedule's canonical order: step events by step, then time events by time."""
    return sorted(events, key=lambda e: (e.at_s is not None, e.step or 0, e.at_s or 0.0))


def make_schedule(
    seed: int,
    steps: int,
    kills: int,
    pauses: int = 0,
    partitions: int = 0,
    resets: int = 0,
    activity_pauses: int = 0,
    activity_resets: int = 0,
    server: bool = True,
    fewer_kills: bool = False,
) -> list[ChaosEvent]:
    """The same seed gives the same schedule. One event per step, none at the first or last step.
    Pauses, partitions, resets, activity pauses and activity resets come from streams of their own,
    each drawn on the steps the events before them leave free, so adding one leaves a seed's events
    of the kinds before it where they were. `server`: the dev server is the lab's to kill; on a server
    the lab did not start (False) the same seed draws the same schedule but for that kill, left out;
    `fewer_kills`: other faults beside (a user's model faults), so fewer than the three kills may do."""
    if kills < len(REQUIRED) and not (resets or fewer_kills):
        third = "dev server" if server else "the dev server's, left out here"
        raise UsageError(f"--kills must be at least {len(REQUIRED)} (claim window, supervisor, {third})")
    extras = {"--resets": resets, "--activity-pauses": activity_pauses, "--activity-resets": activity_resets}
    if (total := kills + pauses + partitions + sum(extras.values())) > MAX_EVENTS:
        raise UsageError(
            f"--kills, --pauses, --partitions and the rest add up to {total} events; a schedule "
            f"holds at most {MAX_EVENTS}"
        )
    _check_seeded_hold(pauses, partitions, activity_pauses)
    if total > steps - 2:
        need = total + 2
        given = [f"--kills {kills}", f"--pauses {pauses}", f"--partitions {partitions}"]
        given += [f"{flag} {n}" for flag, n in extras.items() if n]
        raise UsageError(f"{', '.join(given[:-1])} and {given[-1]} need --steps of at least {need}")
    rng = random.Random(seed)
    kinds = list(REQUIRED) + [rng.choice(WORKER_MOMENTS) for _ in range(kills - len(REQUIRED))]
    rng.shuffle(kinds)
    kinds = kinds[:kills]  # fewer than REQUIRED only beside resets: some of the three, seeded
    at = sorted(rng.sample(range(2, steps), kills))
    events = [
        ChaosEvent(step, kind, rng.randrange(0, 120), rng.choice(KINDS) if kind == "claim-window-crash" else None)
        for step, kind in zip(at, kinds, strict=True)
    ]
    streams = (
        ("pauses", pauses, _pause),
        ("partitions", partitions, _partition),
        ("resets", resets, _reset),
        ("activity-pauses", activity_pauses, _activity_pause),
        ("activity-resets", activity_resets, _activity_reset),
    )
    for name, n, make in streams:  # each its own random stream, on the steps the events before it leave free
        rng = random.Random(f"{name}-{seed}")
        free = sorted(set(range(2, steps)) - {e.step for e in events})
        events += [make(step, rng) for step in sorted(rng.sample(free, n))]
    if not server:  # not the lab's to kill: left out, every other event where the seed puts it
        events = [e for e in events if e.kind != "temporal-server"]
    return in_order(events)


def refuse_server_kills(events: list[ChaosEvent], settings: Settings, source: str | Path | None) -> None:
    """On a server the lab did not start (--temporal-address), a schedule that kills the dev server is
    refused before anything starts: that server is not the lab's to kill."""
    if settings.embedded:
        return
    for ev in events:
        if ev.kind == "temporal-server":
            where = f"{source}: " if source is not None else ""
            at = f"step {ev.step}" if ev.at_s is None else f"at {ev.at_s:g} s"
            raise UsageError(
                f"{where}the event {at} kills the dev server; on a server the lab did not start "
                f"({settings.temporal_address}) chaos never touches the server: leave that event out"
            )


def _check_seeded_hold(pauses: int, partitions: int, activity_pauses: int) -> None:
    """Seeded durations are drawn after this: the longest they could be decides, so whether a count is
    taken never depends on the seed."""
    longest = {
        "--pauses": (pauses, PAUSE_S[1]),
        "--partitions": (partitions, PARTITION_S[1]),
        "--activity-pauses": (activity_pauses, PAUSE_S[1]),
    }
    if (held := sum(n * most for n, most in longest.values())) > MAX_HELD_S:
        given = " ".join(f"{flag} {n}" for flag, (n, _) in longest.items() if n)
        raise UsageError(
            f"{given} could hold the run {_secs(held)} s in all (pauses up to {PAUSE_S[1]:g} s, "
            f"partitions up to {PARTITION_S[1]:g} s); a schedule holds it at most "
            f"{_secs(MAX_HELD_S)} s"
        )


def check_held(events: list[ChaosEvent], where: str) -> None:
    """At most MAX_HELD_S of held time (the durations of the timed nemeses) in one schedule; summed
    exactly (math.fsum), so neither rounding nor the events' order decides."""
    if (held := math.fsum(e.duration_s or 0.0 for e in events)) > MAX_HELD_S:
        raise UsageError(
            f"{where}: its pauses, partitions and activity pauses hold the run {_secs(held)} s in all; "
            f"a schedule holds it at most {_secs(MAX_HELD_S)} s"
        )


def _secs(value: float) -> str:
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _pause(step: int, rng: random.Random) -> ChaosEvent:
    kind = rng.choice(PAUSES)
    duration = round(rng.uniform(*PAUSE_S), 2) if kind == "pause" else None
    return ChaosEvent(step, kind, rng.randrange(0, 120), duration_s=duration)


def _partition(step: int, rng: random.Random) -> ChaosEvent:
    duration = round(rng.uniform(*PARTITION_S), 2)
    return ChaosEvent(step, PARTITION, rng.randrange(0, 120), duration_s=duration)


def _reset(step: int, rng: random.Random) -> ChaosEvent:
    return ChaosEvent(step, RESET, 0, back_steps=rng.randint(*BACK_STEPS))


def _activity_pause(step: int, rng: random.Random) -> ChaosEvent:
    duration = round(rng.uniform(*PAUSE_S), 2)
    return ChaosEvent(step, ACTIVITY_PAUSE, rng.randrange(0, 120), duration_s=duration)


def _activity_reset(step: int, rng: random.Random) -> ChaosEvent:
    return ChaosEvent(step, ACTIVITY_RESET, rng.randrange(0, 120))


def save_schedule(
    path: Path, events: list[ChaosEvent], steps: int, seed: int | None = None, what: str = "the schedule"
) -> None:
    doc = {"steps": steps, "seed": seed, "events": [e.to_json() for e in events]}
    write_output(path, json.dumps(doc, indent=1) + "\n", what)


def load_schedule(path: Path, steps: int | None = None) -> tuple[list[ChaosEvent], int, int | None]:
    """(events sorted by step, steps, seed) from a schedule file; any malformed entry is a usage error."""
    doc = read_json_file(path, "the schedule", SCHEDULE_LIMIT)
    if isinstance(doc, list):
        doc = {"events": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise UsageError(f"{path}: a schedule is a JSON object with an 'events' list (or a bare list)")
    if len(doc["events"]) > MAX_EVENTS:
        raise UsageError(f"{path}: {len(doc['events'])} events; a schedule holds at most {MAX_EVENTS}")
    total = doc.get("steps", steps)
    if total is None and all(isinstance(e, dict) and "at_s" in e for e in doc["events"]):
        total = len(doc["events"]) + 2  # placed by time only: no step count to give
    if not _whole(total, 2, 100_000):
        or_flag = " (or --steps)" if steps is not None else ""  # a user's workflow takes no --steps
        raise UsageError(f"{path}: 'steps'{or_flag} must be a whole number 2..100000")
    seed = doc.get("seed")
    if seed is not None and not _whole(seed, 0, MAX_SEED):
        raise UsageError(f"{path}: 'seed' must be a whole number 0..{MAX_SEED} (or null)")
    assert isinstance(total, int) and (seed is None or isinstance(seed, int))  # checked just above
    events = [_event(path, i, raw, total) for i, raw in enumerate(doc["events"])]
    if len({(e.step, e.at_s) for e in events}) != len(events):
        raise UsageError(f"{path}: at most one event per step (and per at_s)")
    check_held(events, str(path))
    return in_order(events), total, seed


def _whole(value: object, low: int, high: int) -> bool:
    """A JSON whole number in low..high: not a float (2.0), and not true or false (Python's bools are ints)."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _seconds(value: object, high: float) -> bool:
    """A JSON number of seconds in (0, high]: not a bool, not NaN (which no comparison admits)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= high


def _event(path: Path, i: int, raw: object, steps: int) -> ChaosEvent:
    where = f"{path}: event {i}"
    if not isinstance(raw, dict):
        raise UsageError(f"{where} is not an object")
    kind, step, at_s, delay = raw.get("nemesis"), raw.get("at_step"), raw.get("at_s"), raw.get("delay_ms", 0)
    if not isinstance(kind, str) or kind not in TARGETS:
        named = [k for k in TARGETS if k not in HOOK_CRASHES and k not in HOP_KINDS and k not in MODEL_FAULTS]
        shown = ", ".join(named) + ", model-*"  # each listed in docs/chaos.md
        raise UsageError(f"{where}: nemesis must be one of {shown}, a *-crash or a crash point (docs/chaos.md)")
    if raw.get("target", TARGETS[kind]) != TARGETS[kind]:
        raise UsageError(f"{where}: {kind} targets the {TARGETS[kind]}, not {repr(raw.get('target'))[:60]}")
    if ("at_step" in raw) == ("at_s" in raw):
        raise UsageError(f"{where}: give exactly one of at_step and at_s")
    if "at_s" in raw:
        _check_at_s(where, kind, at_s)
    elif not _whole(step, 1, steps):
        raise UsageError(f"{where}: at_step must be a whole number 1..{steps}")
    if not _whole(delay, 0, 10_000):
        raise UsageError(f"{where}: delay_ms must be a whole number 0..10000")
    effect_kind = raw.get("effect_kind", "file" if kind in EFFECT_HOOKS else None)
    if kind in EFFECT_HOOKS and effect_kind not in KINDS:
        raise UsageError(f"{where}: effect_kind must be one of {', '.join(KINDS)}")
    duration = raw.get("duration_s", fleet_events.default_duration(kind, raw) if kind in TIMED else None)
    longest = fleet_events.MAX_S if kind in fleet_events.KINDS else MAX_PAUSE_S
    if kind in TIMED and not _seconds(duration, longest):
        raise UsageError(f"{where}: duration_s must be a number of seconds in (0, {longest:g}]")
    opts = fleet_events.opts_of(where, kind, raw) if kind in fleet_events.KINDS else ()
    back = raw.get("back_steps", 2 if kind == RESET else None)
    if kind == RESET and not _whole(back, 1, MAX_BACK_STEPS):
        raise UsageError(f"{where}: back_steps must be a whole number 1..{MAX_BACK_STEPS}")
    if at_s is not None:
        step, at_s = None, float(at_s)
    return ChaosEvent(
        step,
        kind,
        delay,
        effect_kind if kind in EFFECT_HOOKS else None,
        float(duration) if kind in TIMED and duration is not None else None,
        at_s,
        back if kind == RESET else None,
        opts,
    )


def _check_at_s(where: str, kind: str, at_s: object) -> None:
    if not _seconds(at_s, MAX_AT_S):
        raise UsageError(f"{where}: at_s must be a number of seconds in (0, {MAX_AT_S:g}]")
    if kind not in AT_S_KINDS:
        takes = ", ".join(AT_S_KINDS)
        raise UsageError(f"{where}: {kind} names a moment of a step: give it at_step (at_s takes {takes})")


async def execute(
    events: list[ChaosEvent],
    arrive: Callable[[ChaosEvent], Awaitable[bool]],
    strike: Callable[[ChaosEvent], Awaitable[None]],
    started_at: float,
    closed: Callable[[], Awaitable[bool]],
    every: float = 0.05,
) -> list[ChaosEvent]:
    """Fire a schedule one event at a time, each when its trigger comes: a step event when `arrive`
    (the run reaching its moment, the event's delay included) returns True (False: the run ended
    first, nothing to fire); an at_s event when the clock reaches `started_at` (wall time) + its
    due_s. The two interleave in the order their triggers come: while a step event waits for its
    step, a time event whose time comes first fires, then the step event goes on waiting (it may then
    fire late, right after). Returns the events the run did not live to see: step events whose moment
    never came, then time events still due when `closed` said the run had ended."""
    timed = sorted((e for e in events if e.at_s is not None), key=lambda e: e.due_s)
    missed: list[ChaosEvent] = []
    for ev in (e for e in events if e.at_s is None):
        arrival = asyncio.ensure_future(arrive(ev))
        try:
            while timed and not arrival.done():
                left = max(0.0, started_at + timed[0].due_s - time.time())
                done, _ = await asyncio.wait({arrival}, timeout=left)
                if not done:
                    await strike(timed.pop(0))
            due = await arrival  # (an arrival that failed raises here)
        finally:
            arrival.cancel()  # a no-op once it is done; else a strike raised: leave no task behind
        if due:
            await strike(ev)
        else:
            missed.append(ev)
    while timed:
        if not await _sleep_until(started_at + timed[0].due_s, closed, every):
            return missed + timed
        await strike(timed.pop(0))
    return missed


async def _sleep_until(at: float, closed: Callable[[], Awaitable[bool]], every: float) -> bool:
    """Sleep until wall time `at`; False as soon as the run has closed."""
    while not await closed():
        if (left := at - time.time()) <= 0:
            return True
        await asyncio.sleep(min(every, left))
    return False
