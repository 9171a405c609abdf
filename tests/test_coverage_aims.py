"""What `chaos --until-covered` aims at on a user's workflow between rounds (proof/chaos/coverage.py,
coverage_activities.py): a kill after an activity's close is timed by the run's typical workflow task,
not by one loaded moment's, and a window the latest round showed too short for timing is reported as
such instead of being aimed at until the bound runs out."""

from __future__ import annotations

from checkpoint_tui.core.windows import MODEL, WORKFLOW_TASK
from checkpoint_tui.proof.chaos import coverage_activities
from checkpoint_tui.proof.chaos.coverage import Aims, cover, remeasured
from checkpoint_tui.proof.chaos.coverage_activities import Spot, aims, draw
from checkpoint_tui.proof.report.chaos import ChaosReport, Placement


def _tasks(first_offset: float, first_span: float) -> list[Spot]:
    """Workflow tasks after the close of activities 1..6: the first dispatched late (a loaded moment)."""
    late = [Spot(WORKFLOW_TASK, 2, "close", first_offset, first_span)]
    return late + [Spot(WORKFLOW_TASK, seq, "close", 0.01, 0.12) for seq in range(3, 8)]


def test_a_kill_after_a_close_is_timed_by_the_runs_typical_task_not_its_loaded_one():
    (event,), _ = draw(_tasks(0.45, 0.3), [WORKFLOW_TASK], seed=3, round_no=1, budget=10)
    assert event.step == 2 and event.kind == "worker-between-activities"
    # the median task: 10 ms after the close, 120 ms long; its middle (30-70 %) is 46-94 ms in
    assert 46 <= event.delay_ms <= 94, event.delay_ms


def test_a_kill_inside_an_activity_keeps_that_activitys_own_place():
    found = [Spot(MODEL, 2, "start", 0.0, 1.0), Spot(MODEL, 4, "start", 0.0, 0.1)]
    (event,), _ = draw(found, [MODEL], seed=3, round_no=1, budget=10)
    assert event.step == 2 and 300 <= event.delay_ms <= 700  # activity 2's own second, not the median


def _report(run_id: str = "run-seeded") -> ChaosReport:
    """A run with one worker death, in a model call."""
    death = Placement(run_id=run_id, event="kill", pid=1, at=0.0, step=2, window=MODEL)
    return ChaosReport(seed=3, steps=8, run_id=run_id, windows={MODEL: 1}, kill_windows=[death])


async def test_a_window_the_latest_round_showed_too_short_is_reported_not_aimed_at_again():
    seeded = aims(_tasks(0.45, 0.3) + [Spot(MODEL, 2, "start", 0.0, 1.0)])
    assert WORKFLOW_TASK in seeded.wanted
    quiet = aims([Spot(WORKFLOW_TASK, seq, "close", 0.005, 0.018) for seq in range(2, 8)])
    assert WORKFLOW_TASK in quiet.unreachable  # 18 ms: under REACHABLE_S
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


def test_the_next_round_is_timed_by_the_latest_run_where_it_shows_every_window_still_wanted():
    seeded = Aims((WORKFLOW_TASK, MODEL), lambda *a: ([], 0))
    latest = aims(_tasks(0.01, 0.2) + [Spot(MODEL, 2, "start", 0.0, 1.0)])
    assert remeasured(seeded, latest, 1).draw is latest.draw
    partial_run = aims([Spot(MODEL, 2, "start", 0.0, 1.0)])  # no workflow task spot in it
    assert remeasured(seeded, partial_run, 1).draw is seeded.draw
    assert coverage_activities.REACHABLE_S == 0.08  # the figure the 18 ms above is under
