"""What a worker's first workflow task costs after a kill, read from Temporal history.

A killed worker takes its sticky workflow cache with it: the worker that carries on fetches the whole
history and replays it in its first workflow task. That task grows with the history (tens of ms early
in a run, a few hundred late in it on this machine kind), and it is Temporal's cost, not the lab's.
The failover checks add its excess over a warm workflow task to their budget, and print it, so a late
kill is judged on the same footing as an early one."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

_STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED


@dataclass(frozen=True)
class TaskTimes:
    """(started, completed) epoch seconds of each completed workflow task, in history order."""

    tasks: tuple[tuple[float, float], ...]

    def warm_s(self) -> float:
        """The median workflow task: what a task costs a worker holding the run in its cache."""
        return statistics.median(done - start for start, done in self.tasks) if self.tasks else 0.0

    def first_after(self, at: float) -> float | None:
        """The duration of the first workflow task started after `at` (None if there is none, or if
        `at` is before this execution's first task: a kill in an earlier execution of the chain)."""
        if not self.tasks or at < self.tasks[0][0]:
            return None
        return next((done - start for start, done in self.tasks if start > at), None)

    def replay_excess_s(self, at: float) -> float:
        """How much longer than a warm task the first task after `at` took (never below 0)."""
        first = self.first_after(at)
        return 0.0 if first is None else max(0.0, first - self.warm_s())


def _seconds(ts) -> float:
    return ts.seconds + ts.nanos / 1e9


async def spans(
    client: Client, workflow_id: str, opens: int, closes: int, opened_by: Callable[[Any], int]
) -> list[tuple[float, float]]:
    """(open time, close time) of each pair of events in the workflow's latest execution: an event of
    type `closes` names the id of its `opens` event through `opened_by(event)`."""
    opened: dict[int, float] = {}
    pairs: list[tuple[float, float]] = []
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events():
        if ev.event_type == opens:
            opened[ev.event_id] = _seconds(ev.event_time)
        elif ev.event_type == closes:
            begun = opened.pop(opened_by(ev), None)
            if begun is not None:
                pairs.append((begun, _seconds(ev.event_time)))
    return pairs


async def task_times(client: Client, workflow_id: str) -> TaskTimes:
    """Every completed workflow task of the workflow's latest execution."""
    by = lambda ev: ev.workflow_task_completed_event_attributes.started_event_id  # noqa: E731
    return TaskTimes(tuple(await spans(client, workflow_id, _STARTED, _COMPLETED, by)))
