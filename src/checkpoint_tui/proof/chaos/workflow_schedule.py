"""A user's workflow's chaos schedule: the seeded one over its aimed activity starts, and what each of our
loop's moments means there (a hook crash of the effect protocol is a crash point of the hop)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.model_schedule import model_fault_events
from checkpoint_tui.proof.chaos.schedule import FORGE, ChaosEvent, in_order, make_schedule
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
    model_faults: int = 0,
    models: tuple[str, ...] = (),
) -> tuple[list[ChaosEvent], int]:
    """The seeded schedule (same seed, same kinds and order) over aimed activity starts 2, 3, ...: no
    span to guess, since it counts the starts the aim picks as the run makes them. (events, span)
    `server`: the dev server is the lab's to kill (as make_schedule's); `model_faults` on the starts
    the others leave free, on the `models` endpoints (proof/chaos/model_schedule.py)."""
    if kills < 3 and not resets and not model_faults:  # beside resets or model faults, kills may be fewer
        third = "the dev server" if server else "the dev server, left out here"
        raise UsageError(f"--kills must be at least 3 (inside an activity, the supervisor, {third})")
    if model_faults and not models:
        raise UsageError("--model-faults needs --model-endpoint NAME=URL: the endpoint its faults are put in front of")
    more = (pauses, partitions, resets, activity_pauses, activity_resets)
    span = kills + sum(more) + model_faults + 2
    events = make_schedule(seed, span, kills, *more, server=server, fewer_kills=bool(model_faults))
    if model_faults:
        free = set(range(2, span)) - {e.step for e in events}
        events = in_order(events + model_fault_events(seed, model_faults, sorted(free), models))
    return [map_event(e) for e in events], span


def map_event(ev: ChaosEvent, source: Path | None = None) -> ChaosEvent:
    """Our loop's event as it applies to a user's workflow; `source`: the schedule file it came from."""
    if ev.kind == FORGE:
        where = f"{source}: " if source is not None else ""
        at = f"the event at step {ev.step}" if ev.step is not None else "an event"
        raise UsageError(f"{where}{at} is {FORGE}, which forges our own outbox; a user's workflow has none")
    if ev.kind in MAPPED:
        return replace(ev, kind=MAPPED[ev.kind], effect_kind=None)
    return ev
