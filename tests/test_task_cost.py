"""The replay a kill costs the worker that carries on: the first workflow task after the kill, over
a warm one (proof/measure/task_cost.py; the failover check 1e adds it to its budget)."""

from __future__ import annotations

from checkpoint_tui.proof.measure.task_cost import TaskTimes

TASKS = TaskTimes(((10.0, 10.02), (11.0, 11.02), (12.0, 12.03), (13.5, 13.80), (14.0, 14.02)))


def test_the_first_task_after_a_kill_is_measured_against_the_median_task():
    assert abs(TASKS.warm_s() - 0.02) < 1e-9
    assert abs(TASKS.first_after(13.2) - 0.30) < 1e-9
    assert abs(TASKS.replay_excess_s(13.2) - 0.28) < 1e-9


def test_no_task_after_the_kill_or_a_kill_before_this_execution_costs_nothing():
    assert TASKS.first_after(20.0) is None and TASKS.replay_excess_s(20.0) == 0.0
    assert TASKS.first_after(5.0) is None and TASKS.replay_excess_s(5.0) == 0.0  # an earlier execution's kill
    assert TaskTimes(()).replay_excess_s(1.0) == 0.0


def test_a_task_faster_than_the_median_is_no_negative_excess():
    assert TASKS.replay_excess_s(13.9) == 0.0
