"""The runs a worker death touched and how soon each went on (proof/chaos/touched.py), from history
events as kill_windows reads them: a retry after the death is that death's, the latest one before it."""

from __future__ import annotations

from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.proof.chaos.printing import touched_line
from checkpoint_tui.proof.chaos.touched import spread, through_kills, touches
from checkpoint_tui.proof.report.chaos import TouchedFigures


def _ev(event_id: int, t: float, name: str, attrs: str = "") -> HistoryEvent:
    return HistoryEvent(event_id, t, name, attrs)


HISTORY = [
    _ev(5, 10.0, "ACTIVITY_TASK_SCHEDULED", "send_line activity_id=1"),
    _ev(6, 10.2, "ACTIVITY_TASK_STARTED", "attempt=2 identity=2@vm scheduled_event_id=5"),  # retried at 10.2
    _ev(7, 10.3, "ACTIVITY_TASK_COMPLETED", "scheduled_event_id=5 started_event_id=6"),
    _ev(11, 11.0, "ACTIVITY_TASK_SCHEDULED", "send_line activity_id=2"),
    _ev(12, 11.1, "ACTIVITY_TASK_STARTED", "attempt=1 identity=2@vm scheduled_event_id=11"),  # never retried
    _ev(13, 11.2, "ACTIVITY_TASK_COMPLETED", "scheduled_event_id=11 started_event_id=12"),
    _ev(17, 12.0, "ACTIVITY_TASK_SCHEDULED", "send_line activity_id=3"),
    _ev(18, 16.0, "ACTIVITY_TASK_STARTED", "attempt=2 identity=3@vm scheduled_event_id=17"),  # waited 3.5 s
    _ev(19, 16.1, "ACTIVITY_TASK_COMPLETED", "scheduled_event_id=17 started_event_id=18"),
]


def test_each_retry_belongs_to_the_latest_death_before_it_and_a_death_with_none_touched_nothing():
    got = touches("run-a", [10.1, 11.15, 12.5, 20.0], HISTORY)
    assert [(t.at, round(t.next_attempt_s, 3)) for t in got] == [(10.1, 0.1), (12.5, 3.5)]
    assert [round(t.resumed_s or 0, 3) for t in got] == [0.1, 3.5]  # the run's next event after each
    assert touches("run-a", [9.0], HISTORY) == []  # before the activity was scheduled: not its retry's cause


def test_the_spread_is_the_median_the_99th_by_nearest_rank_and_the_max():
    assert spread([0.1] * 99 + [3.0]) == {"p50_s": 0.1, "p99_s": 0.1, "max_s": 3.0}
    assert spread([0.1] * 98 + [2.0, 3.0]) == {"p50_s": 0.1, "p99_s": 2.0, "max_s": 3.0}
    assert spread([0.25]) == {"p50_s": 0.25, "p99_s": 0.25, "max_s": 0.25}


def test_a_wait_that_took_in_a_dev_server_kill_is_said_beside_the_figures():
    """Seeded chaos can kill a worker and the dev server a moment apart: an attempt failed over before
    the server's death starts only once it is back. Counted and said, never taken out of the figures."""
    got = touches("run-a", [10.1, 12.5], HISTORY)  # next attempts at 10.2 and 16.0
    assert through_kills(got, [13.0]) == 1 and through_kills(got, [10.15, 13.0]) == 2
    assert through_kills(got, [9.0, 10.05, 16.5]) == 0  # before a death, or after its retry: not its wait
    figures = TouchedFigures(touches=2, runs=1, next_attempt=spread([0.1, 3.5]), through_server_kill=1)
    assert touched_line(figures).endswith("max 3.50 s · 1 of the 2 waited out a dev-server kill as well")
    assert "dev-server" not in touched_line(TouchedFigures(touches=2, runs=1, next_attempt=spread([0.1, 3.5])))
