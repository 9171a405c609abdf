"""Every run a worker death touched, and how soon it got going again, from the run's history (the events
kill_windows placed the death against): an activity scheduled before the death whose next attempt
started after it was in flight on a worker that died, so the run was touched; `next_attempt_s` is from
the death to the earliest such attempt, `resumed_s` to the run's first event after the death. Each retry
is the latest death's before it. With `--runs`, a death touches many runs: their p50, p99 and max say
whether assisted failover reached every one (a retry that waited out a timeout shows as seconds)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from checkpoint_tui.core.view import HistoryEvent

_ATTEMPT = re.compile(r"\battempt=(\d+)")
_SCHEDULED = re.compile(r"\bscheduled_event_id=(\d+)")
_GOING = ("ACTIVITY_TASK_STARTED", "ACTIVITY_TASK_COMPLETED", "WORKFLOW_TASK_COMPLETED", "WORKFLOW_TASK_STARTED")


@dataclass(frozen=True)
class Touch:
    run_id: str
    at: float  # the death
    next_attempt_s: float
    resumed_s: float | None


def touches(run_id: str, deaths: Iterable[float], events: list[HistoryEvent]) -> list[Touch]:
    """The run's touches: one per death that an activity's next attempt came after."""
    times = sorted(deaths)
    scheduled = {(e.segment, e.event_id): e.time for e in events if e.name == "ACTIVITY_TASK_SCHEDULED"}
    first: dict[float, float] = {}  # death -> its earliest retry's start
    for e in events:
        attempt, sched = _ATTEMPT.search(e.attrs), _SCHEDULED.search(e.attrs)
        if e.name != "ACTIVITY_TASK_STARTED" or attempt is None or sched is None or int(attempt.group(1)) < 2:
            continue
        since = scheduled.get((e.segment, int(sched.group(1))))
        before = [t for t in times if since is not None and since <= t <= e.time]
        if before:
            death = before[-1]
            first[death] = min(first.get(death, e.time), e.time)
    out = []
    for death, retry in sorted(first.items()):
        after = [e.time for e in events if e.time > death and e.name in _GOING]
        out.append(Touch(run_id, death, retry - death, (min(after) - death) if after else None))
    return out


def spread(values: list[float]) -> dict[str, float]:
    """p50, p99 and max (nearest rank), in seconds to the millisecond."""
    ranked = sorted(values)
    p99 = ranked[(99 * len(ranked) + 99) // 100 - 1]  # the ceil(0.99 n)-th, in whole numbers
    return {"p50_s": round(statistics.median(ranked), 3), "p99_s": round(p99, 3), "max_s": round(ranked[-1], 3)}


def through_kills(touched: Iterable[Touch], server_kills: Iterable[float]) -> int:
    """The touches whose wait for their next attempt took in a dev-server kill (a worker and the server
    killed a moment apart, as a seed can place them): that attempt could start only once the server was
    back, so part of its wait is the server's death, not the worker's."""
    kills = list(server_kills)
    return sum(any(t.at <= k < t.at + t.next_attempt_s for k in kills) for t in touched)
