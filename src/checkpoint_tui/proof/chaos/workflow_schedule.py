"""A user's workflow's chaos schedule: the seeded one over its aimed activity starts, and what each of our
loop's moments means there (a hook crash of the effect protocol is a crash point of the hop)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.schedule import FORGE, ChaosEvent, make_schedule
from checkpoint_tui.proof.nemeses.hop import AFTER, BEFORE

# The effect protocol's crash points become the hop's (proof/nemeses/hop.py), which lands them for certain on
# any worker: before the tool's effect, after it (before Temporal records it: where duplicates are born).
MAPPED = {
    "tool-call-crash": BEFORE,
    "before-claim-crash": BEFORE,
    "claim-window-crash": AFTER,
    "write-window-crash": AFTER,
    "stamped-crash": AFTER,
    "worker-in-timer": "worker-between-activities",
}


def workload_schedule(
    seed: int,
    kills: int,
    pauses: int = 0,
    partitions: int = 0,
    resets: int = 0,
    activity_pauses: int = 0,
    activity_resets: int = 0,
    server: bool = True,
) -> tuple[list[ChaosEvent], int]:
    """The seeded schedule (same seed, same kinds and order) over aimed activity starts 2, 3, ...: no
    span to guess, since it counts the starts the aim picks as the run makes them. (events, span)
    `server`: the dev server is the lab's to kill (as make_schedule's)."""
    if kills < 3 and not resets:  # beside resets, kills may be fewer (as make_schedule's)
        third = "the dev server" if server else "the dev server, left out here"
        raise UsageError(f"--kills must be at least 3 (inside an activity, the supervisor, {third})")
    more = (pauses, partitions, resets, activity_pauses, activity_resets)
    span = kills + sum(more) + 2
    return [map_event(e) for e in make_schedule(seed, span, kills, *more, server=server)], span


def map_event(ev: ChaosEvent, source: Path | None = None) -> ChaosEvent:
    """Our loop's event as it applies to a user's workflow; `source`: the schedule file it came from."""
    if ev.kind == FORGE:
        where = f"{source}: " if source is not None else ""
        at = f"the event at step {ev.step}" if ev.step is not None else "an event"
        raise UsageError(f"{where}{at} is {FORGE}, which forges our own outbox; a user's workflow has none")
    if ev.kind in MAPPED:
        return replace(ev, kind=MAPPED[ev.kind], effect_kind=None)
    return ev
