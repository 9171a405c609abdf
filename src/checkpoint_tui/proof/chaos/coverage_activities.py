"""`chaos --until-covered` on a user's workflow. A user's worker has no fault hooks, so every aimed kill
is a kill by timing, and the windows aimed at are the ones the workload's own seeded run showed, each
where that run had it:

- an activity that makes no claim through the effects library: its class's window (`model call`,
  `tool call`, or `activity <type>`), its whole duration;
- an activity that claims through the library: `effect before its claim` (its start to its first
  claim), `write → stamp` (its first claim to its stamp, when the probe log shows the write entered;
  `claim → stamp` when there is no probe record to tell), and `stamped, activity not completed` (the
  last stamp to the activity's close). `claim → write` is there too, but the library enters the
  write right after its claim (it only appends and fsyncs the probe record between them), so no
  timing reaches it: it is reported, not aimed at;
- `workflow task` (a workflow task's start to its completion) and `timer` (a timer's start to its
  firing), measured from the close of the activity before them.

Each is measured on the activities that ran once. A window whose median length (a timer: its
longest) is under REACHABLE_S cannot be hit by timing (a poll, a signal and a scheduler on a loaded
machine are not that precise): it is reported with its length, not aimed at. An aimed round runs the
workflow again with the same input and kills at the middle of the window (seeded), measured from
Temporal's start of the same activity (or its close): a deterministic workflow schedules the same
activities again."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from functools import partial

from checkpoint_tui.core.activity_history import ActivityExec, Chain
from checkpoint_tui.core.windows import (
    BEFORE_CLAIM,
    CLAIM_STAMP,
    CLAIM_WRITE,
    MODEL,
    STAMPED,
    TIMER,
    TOOL,
    WINDOWS,
    WORKFLOW_TASK,
    WRITE_STAMP,
)
from checkpoint_tui.effects import ProbeRecord
from checkpoint_tui.ledger.rows import ClaimAttempt
from checkpoint_tui.proof.chaos.coverage import Aims
from checkpoint_tui.proof.chaos.schedule import ChaosEvent

REACHABLE_S = 0.08  # a window shorter than this (median; a timer: its longest) is shown, not aimed at
MIDDLE = (0.3, 0.7)  # an aimed kill lands at this fraction of its window (seeded)
MIN_SAMPLES = 3  # a round's tasks or timers that say the window is out of reach: no fewer
CLASS_WINDOWS = {"model": MODEL, "tool": TOOL, "mcp": TOOL}


@dataclass(frozen=True)
class Spot:
    """One window as the seeded run had it: it begins `offset_s` after Temporal's start (or close) of
    activity `seq` and lasts `span_s`."""

    window: str
    seq: int
    anchor: str  # "start" | "close"
    offset_s: float
    span_s: float


def spots(acts: list[ActivityExec], claims: list[ClaimAttempt], probe: list[ProbeRecord], chain: Chain) -> list[Spot]:
    """Every window the run showed, where it showed it."""
    found: list[Spot] = []
    for act in acts:
        if act.attempt == 1 and act.status == "completed" and act.started_at and act.closed_at:
            found += _activity_spots(act, claims, probe)
    return found + _task_spots(acts, chain)


def _activity_spots(act: ActivityExec, claims: list[ClaimAttempt], probe: list[ProbeRecord]) -> list[Spot]:
    start, end = act.started_at or 0.0, act.closed_at or 0.0
    n = int(act.activity_id) if act.activity_id.isdigit() else None
    mine = sorted(
        (c for c in claims if c.step == n and start <= c.started_at <= end and c.finished_at),
        key=lambda c: c.started_at,
    )
    at = partial(Spot, seq=act.seq, anchor="start")
    if not mine:
        return [at(CLASS_WINDOWS.get(act.cls, f"activity {act.activity_type}"), offset_s=0.0, span_s=end - start)]
    first, stamped = mine[0], max(c.finished_at or 0.0 for c in mine)
    found = [
        at(BEFORE_CLAIM, offset_s=0.0, span_s=first.started_at - start),
        at(STAMPED, offset_s=stamped - start, span_s=end - stamped),
    ]
    entered = any(r.key == first.effect_id and r.attempt == first.attempt for r in probe)
    window = WRITE_STAMP if entered else CLAIM_STAMP  # without a probe record, where the write began is unknown
    span = (first.finished_at or first.started_at) - first.started_at
    return [*found, at(window, offset_s=first.started_at - start, span_s=span)]


def _task_spots(acts: list[ActivityExec], chain: Chain) -> list[Spot]:
    """The first workflow task and the first timer after each activity's close, measured from that close
    (a later one follows a timer or a signal, not the close: its offset is theirs)."""
    found = []
    closed = sorted((a for a in acts if a.closed_at), key=lambda a: a.closed_at or 0.0)
    taken: set[tuple[str, int]] = set()
    for window, began, ended in _spans(chain):
        before = [a for a in closed if (a.closed_at or 0.0) <= began]
        if before and (window, before[-1].seq) not in taken:
            last = before[-1]
            taken.add((window, last.seq))
            found.append(Spot(window, last.seq, "close", began - (last.closed_at or 0.0), ended - began))
    return found


def _spans(chain: Chain) -> list[tuple[str, float, float]]:
    """(window, start, end) of every workflow task and timer that ended, in the chain's executions."""
    out = []
    for _, events in chain.executions:
        started: dict[int, float] = {}
        for ev in events:
            t = ev.event_time.ToSeconds() + ev.event_time.nanos / 1e9
            if ev.HasField("workflow_task_started_event_attributes") or ev.HasField("timer_started_event_attributes"):
                started[ev.event_id] = t
            elif ev.HasField("workflow_task_completed_event_attributes"):
                began = started.get(ev.workflow_task_completed_event_attributes.started_event_id)
                out += [(WORKFLOW_TASK, began, t)] if began is not None else []
            elif ev.HasField("timer_fired_event_attributes"):
                began = started.get(ev.timer_fired_event_attributes.started_event_id)
                out += [(TIMER, began, t)] if began is not None else []
    return out


def aims(found: list[Spot]) -> Aims:
    """The windows to aim at (median length at least REACHABLE_S), in a step's order, then a user's
    activity windows; the others with why not."""
    # A timer is as long as the workflow says (one 2 s sleep among 20 ms ones is there to be hit, in its
    # own middle): its longest; any other window by its median.
    windows = {s.window for s in found}
    label = {w: "longest" if w == TIMER else "median" for w in windows}
    lengths = {
        w: (max if w == TIMER else statistics.median)([s.span_s for s in found if s.window == w]) for w in windows
    }
    order = sorted(lengths, key=lambda w: (WINDOWS.index(w) if w in WINDOWS else len(WINDOWS), w))
    wanted = tuple(w for w in order if lengths[w] >= REACHABLE_S)
    short = {w: f"{label[w]} {lengths[w] * 1000:.0f} ms" for w in order if lengths[w] < REACHABLE_S}
    if WRITE_STAMP in lengths:  # the library's write begins right after its claim
        short[CLAIM_WRITE] = "the library enters the write right after its claim"
    aimable = [s for s in found if s.span_s >= REACHABLE_S]
    # what a later round may show out of reach: a task or timer, timed from a close, seen often enough here
    counts = {w: sum(1 for s in found if s.window == w and s.anchor == "close") for w in lengths}
    recheck = frozenset(w for w, n in counts.items() if n >= MIN_SAMPLES)
    return Aims(wanted, partial(draw, aimable, typical=_after_close(found)), short, recheck)


def draw(
    found: list[Spot],
    missing: list[str],
    seed: int,
    round_no: int,
    budget: int,
    typical: dict[str, tuple[float, float]] | None = None,
) -> tuple[list[ChaosEvent], int]:
    """One kill per missing window (at most `budget`), each at a place the seeded run had it, taken in
    the run's order, two activities or more after the one before (the replacement worker is polling
    by then); (events, span). `typical`: a close-anchored window's median offset and span in the run."""
    rng = random.Random(f"coverage-{seed}-{round_no}")
    events: list[ChaosEvent] = []
    wanted, last = set(missing), 0
    for spot in sorted(found, key=lambda s: s.seq):
        if spot.window not in wanted or spot.seq < max(2, last + 2) or len(events) >= budget:
            continue
        offset, span = spot.offset_s, spot.span_s
        if spot.anchor == "close" and typical and spot.window in typical:
            offset = typical[spot.window][0]
            span = typical[spot.window][1] if spot.window == WORKFLOW_TASK else span  # a timer: its own length
        delay = offset + rng.uniform(*MIDDLE) * span
        kind = "worker-in-activity" if spot.anchor == "start" else "worker-between-activities"
        events.append(ChaosEvent(spot.seq, kind, round(max(0.0, delay) * 1000)))
        wanted.discard(spot.window)
        last = spot.seq
    return events, max([e.step or 0 for e in events], default=0) + 1


def _after_close(found: list[Spot]) -> dict[str, tuple[float, float]]:
    """Where a workflow task or a timer begins after the close of the activity before it, and how long it
    lasts: the median over all the run's spots of that window. How soon a task follows a close is the
    server's dispatch, the same throughout a run but for a loaded moment's (a task dispatched 0.5 s
    late), and a kill timed from that one spot's figures every round lands in the next activity every
    round (seen on a loaded machine: six rounds, the workflow task never hit)."""
    closing = [s for s in found if s.anchor == "close"]
    return {
        w: (
            statistics.median(s.offset_s for s in closing if s.window == w),
            statistics.median(s.span_s for s in closing if s.window == w),
        )
        for w in {s.window for s in closing}
    }
