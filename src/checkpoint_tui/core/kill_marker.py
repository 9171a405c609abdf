"""Where a worker's death falls in a run's Temporal history, and what the line marking it says:
derived from the ledger's kill event and the history events (both durable) each time the history is
shown, so an app started after the kill shows the same marker."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.ledger.inspect_queries import KillEvent

CLOSES = ("ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED", "ACTIVITY_TASK_TIMED_OUT", "ACTIVITY_TASK_CANCELED")
# An execution that closed has nothing in flight (a reset terminates the one it replaces mid-activity).
EXECUTION_CLOSES = tuple(
    f"WORKFLOW_EXECUTION_{end}"
    for end in ("COMPLETED", "FAILED", "TIMED_OUT", "CANCELED", "TERMINATED", "CONTINUED_AS_NEW")
)
_SCHEDULED_ID = re.compile(r"\bscheduled_event_id=(\d+)")


def place_kill(kill: KillEvent, events: Sequence[HistoryEvent]) -> tuple[int, str] | None:
    """(index of the first event after the kill, the marker's text), or None until an event after the
    kill has arrived (the marker says how long history stayed silent)."""
    i = bisect.bisect_right(events, kill.at, key=lambda e: e.time)
    if i >= len(events):
        return None
    gap = events[i].time - kill.at
    before = events[:i]
    return i, marker_text(kill, in_flight(before), gap, open_task(before))


def in_flight(events: Sequence[HistoryEvent]) -> str | None:
    """The activity scheduled and not yet closed at the end of these events (the newest if several)."""
    scheduled = in_flight_event(events)
    return scheduled.attrs.split(" ", 1)[0] if scheduled is not None else None


def in_flight_event(events: Sequence[HistoryEvent]) -> HistoryEvent | None:
    """The ACTIVITY_TASK_SCHEDULED event of the activity in flight at the end of these events."""
    open_: dict[tuple[int, int], HistoryEvent] = {}
    for ev in events:
        if ev.name == "ACTIVITY_TASK_SCHEDULED":
            open_[(ev.segment, ev.event_id)] = ev
        elif ev.name in CLOSES:
            found = _SCHEDULED_ID.search(ev.attrs.split(" failure=", 1)[0])  # the failure text is the model's
            if found:
                open_.pop((ev.segment, int(found[1])), None)
        elif ev.name in EXECUTION_CLOSES:
            open_ = {k: v for k, v in open_.items() if k[0] != ev.segment}
    return list(open_.values())[-1] if open_ else None


TASKS = {
    "TIMER_STARTED": "a timer (TIMER_STARTED)",
    "WORKFLOW_TASK_SCHEDULED": "a workflow task (WORKFLOW_TASK_SCHEDULED)",
    "WORKFLOW_TASK_STARTED": "a workflow task (WORKFLOW_TASK_STARTED)",
}


_STARTED_ID = re.compile(r"\bstarted_event_id=(\d+)")
TIMER_CLOSES = ("TIMER_FIRED", "TIMER_CANCELED")
TASK_CLOSES = ("WORKFLOW_TASK_COMPLETED", "WORKFLOW_TASK_FAILED", "WORKFLOW_TASK_TIMED_OUT")


def open_task(events: Sequence[HistoryEvent]) -> str | None:
    """With no activity in flight, what was: `TIMER_STARTED` (a timer not fired yet), else
    `WORKFLOW_TASK_SCHEDULED` / `WORKFLOW_TASK_STARTED` (a workflow task not completed), else None."""
    timers: set[tuple[int, int]] = set()
    task: str | None = None
    for ev in events:
        if ev.name == "TIMER_STARTED":
            timers.add((ev.segment, ev.event_id))
        elif ev.name in TIMER_CLOSES:
            found = _STARTED_ID.search(ev.attrs)
            if found:
                timers.discard((ev.segment, int(found[1])))
        elif ev.name in ("WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED"):
            task = ev.name
        elif ev.name in TASK_CLOSES:
            task = None
        elif ev.name in EXECUTION_CLOSES:
            task, timers = None, {t for t in timers if t[0] != ev.segment}
    return "TIMER_STARTED" if timers else task


def marker_text(kill: KillEvent, activity: str | None, gap_s: float, task: str | None = None) -> str:
    """`── SIGKILL worker 18650 (w-964d45) · in flight: ACTIVITY_TASK_STARTED llm attempt 1 · step 3 ·
    next event +0.15 s ──`"""
    died = f"died ({kill.signal})" if kill.signal else "died"
    what = (kill.signal or "SIGKILL") if kill.event == "kill" else died
    who = f"worker {kill.pid_label}" + (f" ({kill.short_identity})" if kill.identity else "")
    if activity is None:
        flight = f"no activity, {TASKS.get(task or '', 'between tasks')}"
    elif kill.activity == activity and kill.attempt:
        flight = f"ACTIVITY_TASK_STARTED {activity} attempt {kill.attempt}"  # the dead worker's own log row
    else:
        flight = f"ACTIVITY_TASK_SCHEDULED {activity}"
    step = kill.activity_step if kill.activity_step is not None else kill.step
    at_step = f" · step {step}" if step else ""
    return f"── {what} {who} · in flight: {flight}{at_step} · next event +{gap_s:.2f} s ──"


def marker_lines(kills: Sequence[KillEvent], events: Sequence[HistoryEvent], whole: bool = True) -> list[str]:
    """The marker line of each kill an event after it places, in history order: what the history pane
    shows for these events (a proof bundle's picture and README). Unless `whole` (the events start at
    the run's first), a kill before the first event is not placed: its place is not in these events."""
    out = []
    for kill in sorted(kills, key=lambda k: k.at):
        placed = place_kill(kill, events)
        if placed is not None and (whole or placed[0] > 0):
            out.append(placed[1])
    return out
