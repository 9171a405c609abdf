"""What `chaos --until-covered` aims at on a user's workflow between rounds (proof/chaos/coverage.py,
coverage_activities.py): a kill after an activity's close is timed by the run's typical workflow task,
not by one loaded moment's, and a task window the latest round showed too short for timing is reported
as such instead of being aimed at until the bound runs out; an activity's own windows stay wanted."""

from __future__ import annotations

from checkpoint_tui.core.windows import MODEL, TIMER, WORKFLOW_TASK, WRITE_STAMP
from checkpoint_tui.proof.chaos import coverage_activities
from checkpoint_tui.proof.chaos.coverage import cover, remeasured
from checkpoint_tui.proof.chaos.coverage_activities import Spot, aims
from checkpoint_tui.proof.report.chaos import ChaosReport, Placement


def _tasks(first_offset: float, first_span: float) -> list[Spot]:
    """Workflow tasks after the close of activities 1..6: the first dispatched late (a loaded moment)."""
    late = [Spot(WORKFLOW_TASK, 2, "close", first_offset, first_span)]
    return late + [Spot(WORKFLOW_TASK, seq, "close", 0.01, 0.12) for seq in range(3, 8)]


def test_a_kill_after_a_close_is_timed_by_the_runs_typical_task_not_its_loaded_one():
    (event,), _ = aims(_tasks(0.45, 0.3)).draw([WORKFLOW_TASK], 3, 1, 10)
    assert event.step == 2 and event.kind == "worker-between-activities"
    # the median task: 10 ms after the close, 120 ms long; its middle (30-70 %) is 46-94 ms in
    assert 46 <= event.delay_ms <= 94, event.delay_ms


def test_a_timer_keeps_its_own_length_and_an_activity_its_own_place():
    timers = [Spot(TIMER, 2, "close", 0.01, 2.0)] + [Spot(TIMER, seq, "close", 0.01, 0.2) for seq in range(4, 8)]
    (event,), _ = aims(timers).draw([TIMER], 3, 1, 10)
    assert event.step == 2 and 610 <= event.delay_ms <= 1410  # the 2 s timer's own middle
    found = [Spot(MODEL, 2, "start", 0.0, 1.0), Spot(MODEL, 4, "start", 0.0, 0.1)]
    (event,), _ = aims(found).draw([MODEL], 3, 1, 10)
    assert event.step == 2 and 300 <= event.delay_ms <= 700  # activity 2's own second, not the median


def _report(run_id: str = "run-seeded") -> ChaosReport:
    """A run with one worker death, in a model call."""
    death = Placement(run_id=run_id, event="kill", pid=1, at=0.0, step=2, window=MODEL)
    return ChaosReport(seed=3, steps=8, run_id=run_id, windows={MODEL: 1}, kill_windows=[death])


async def test_a_task_window_the_latest_round_showed_too_short_is_reported_not_aimed_at_again():
    seeded = aims(_tasks(0.45, 0.3) + [Spot(MODEL, 2, "start", 0.0, 1.0)])
    assert WORKFLOW_TASK in seeded.wanted
    quiet = aims([Spot(WORKFLOW_TASK, seq, "close", 0.005, 0.018) for seq in range(2, 8)])
    assert WORKFLOW_TASK in quiet.unreachable and WORKFLOW_TASK in quiet.recheck  # 18 ms, six of them
    rounds = []

    async def run_round(steps: int, events: list) -> ChaosReport:
        rounds.append(events)
        return _report(f"run-round-{len(rounds)}")  # the kill landed in the next model call

    report = await cover(3, _report(), 10, run_round, seeded, again=lambda: quiet)
    assert len(rounds) == 1  # one miss, then the window is out of reach, not nine more misses
    cov = report.coverage
    assert cov is not None and cov.missing == [] and WORKFLOW_TASK not in cov.wanted
    assert cov.unreachable[WORKFLOW_TASK].endswith("in round 1")
    assert report.checks[-1].ok and "not reachable by timing here: " in report.checks[-1].observed


def test_an_activity_window_a_round_showed_short_stays_wanted():
    """A round measures only the activities it did not kill: the aimed one's long write is not among
    them, so a short median there says nothing of the window, which stays a FAIL until hit."""
    seeded = aims([Spot(WRITE_STAMP, 2, "start", 0.01, 0.2), Spot(WRITE_STAMP, 4, "start", 0.01, 0.03)])
    assert WRITE_STAMP in seeded.wanted
    latest = aims([Spot(WRITE_STAMP, 4, "start", 0.01, 0.03)])
    assert WRITE_STAMP in latest.unreachable
    after = remeasured(seeded, latest, 1, [WRITE_STAMP])
    assert after.wanted == seeded.wanted and WRITE_STAMP not in after.unreachable


def test_a_window_already_hit_or_seen_in_too_few_tasks_is_not_moved():
    seeded = aims(_tasks(0.45, 0.3))
    few = aims([Spot(WORKFLOW_TASK, seq, "close", 0.005, 0.018) for seq in (2, 4)])
    assert WORKFLOW_TASK in few.unreachable and WORKFLOW_TASK not in few.recheck
    assert remeasured(seeded, few, 1, [WORKFLOW_TASK]).wanted == (WORKFLOW_TASK,)
    many = aims([Spot(WORKFLOW_TASK, seq, "close", 0.005, 0.018) for seq in range(2, 8)])
    assert remeasured(seeded, many, 1, []).wanted == (WORKFLOW_TASK,)  # hit already: it stays as hit


def test_the_rounds_stay_timed_by_the_seeded_run_and_a_long_timer_is_there_to_be_hit():
    """A round's run holds tasks that waited out a dead worker's sticky queue, seconds after their close:
    its figures would time the next kill into the next activity. One 2 s timer among 20 ms ones is
    wanted (its longest), not unreachable by a median."""
    seeded = aims(_tasks(0.45, 0.3) + [Spot(MODEL, 2, "start", 0.0, 1.0)])
    waited = aims([Spot(WORKFLOW_TASK, 2, "close", 5.0, 0.3)] + _tasks(0.01, 0.02)[1:])
    assert remeasured(seeded, waited, 1, [MODEL, WORKFLOW_TASK]).draw is seeded.draw
    timers = aims([Spot(TIMER, 2, "close", 0.01, 2.0)] + [Spot(TIMER, s, "close", 0.01, 0.02) for s in range(3, 8)])
    assert timers.wanted == (TIMER,) and TIMER not in timers.unreachable
    assert aims([Spot(TIMER, s, "close", 0.01, 0.02) for s in range(2, 8)]).unreachable[TIMER] == "longest 20 ms"
    assert coverage_activities.REACHABLE_S == 0.08  # the figure the 18 ms above is under


def _event(event_id: int, at: float, **attrs: object):
    from google.protobuf.timestamp_pb2 import Timestamp
    from temporalio.api.history.v1 import HistoryEvent

    ev = HistoryEvent(event_id=event_id, event_time=Timestamp(seconds=int(at), nanos=int(at % 1 * 1e9)))
    for name, value in attrs.items():
        getattr(ev, name).CopyFrom(value)
    return ev


def test_only_the_first_task_after_a_close_is_a_spot_and_a_task_after_a_timer_is_not():
    """Activity 1 closes at 100.0; a task 10 ms later starts a 2 s timer; the task after the timer
    fires is not measured from activity 1's close (its offset would be the timer's 2 s)."""
    from temporalio.api.history import v1 as h

    from checkpoint_tui.core.activity_history import ActivityExec
    from checkpoint_tui.core.chain import Chain

    events = [
        _event(1, 100.01, workflow_task_started_event_attributes=h.WorkflowTaskStartedEventAttributes()),
        _event(
            2,
            100.03,
            workflow_task_completed_event_attributes=h.WorkflowTaskCompletedEventAttributes(started_event_id=1),
        ),
        _event(3, 100.03, timer_started_event_attributes=h.TimerStartedEventAttributes()),
        _event(4, 102.03, timer_fired_event_attributes=h.TimerFiredEventAttributes(started_event_id=3)),
        _event(5, 102.04, workflow_task_started_event_attributes=h.WorkflowTaskStartedEventAttributes()),
        _event(
            6,
            102.06,
            workflow_task_completed_event_attributes=h.WorkflowTaskCompletedEventAttributes(started_event_id=5),
        ),
    ]
    act = ActivityExec(1, 0, "e", "1", "a", 99.0, started_at=99.5, closed_at=100.0, status="completed")
    found = coverage_activities._task_spots([act], Chain("wf", executions=[("e", events)]))
    assert [(s.window, s.seq, round(s.offset_s, 3), round(s.span_s, 3)) for s in found] == [
        (WORKFLOW_TASK, 1, 0.01, 0.02),
        (TIMER, 1, 0.03, 2.0),
    ]
