"""The window classifier (core/windows.py): each window from the history and claim attempts a death in
it leaves behind. The end-to-end test (each window produced by a fault hook or an aimed kill, then
classified from the real ledger and history) is tests/test_coverage.py."""

from __future__ import annotations

from checkpoint_tui.core import windows as w
from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.effects import ProbeRecord
from checkpoint_tui.ledger.inspect_queries import KillEvent
from checkpoint_tui.ledger.rows import ClaimAttempt

PID, OTHER = 4100, 4200


def kill(at: float = 10.0, step: int = 3) -> KillEvent:
    return KillEvent(1, at, "died", PID, None, None, step, "SIGKILL", "effect", 1, step)


def scheduled(activity: str, event_id: int = 5, t: float = 9.0) -> HistoryEvent:
    return HistoryEvent(event_id, t, "ACTIVITY_TASK_SCHEDULED", f"{activity} task_queue=q")


def attempt(
    seq: int,
    kind: str,
    pid: int,
    started: float,
    finished: float | None,
    outcome: str | None,
    found: bool | None = None,
    step: int = 3,
) -> ClaimAttempt:
    return ClaimAttempt(
        seq, f"wf:{step}:{kind}", step, kind, 1, pid, None, outcome or "interrupted", started, finished, found
    )


def test_an_activity_in_flight_names_the_model_tool_or_bookkeeping_window():
    assert w.classify(kill(), [scheduled("llm")], []) == w.MODEL
    assert w.classify(kill(), [scheduled("tool")], []) == w.TOOL
    assert w.classify(kill(), [scheduled("mark_step_running")], []) == w.BOOKKEEPING
    assert w.classify(kill(), [scheduled("send_email")], []) == "activity send_email"


def test_inside_the_effect_activity_the_claim_attempts_place_the_death():
    effect = [scheduled("effect")]
    assert w.classify(kill(), effect, []) == w.BEFORE_CLAIM  # nothing claimed yet
    file_done = [attempt(1, "file", PID, 9.1, 9.2, "applied")]
    assert w.classify(kill(), effect, file_done) == w.BEFORE_CLAIM  # between two effects
    # an open claim, finished by another worker: what that one found decides
    open_db = [*file_done, attempt(2, "db", PID, 9.3, None, None)]
    assert (
        w.classify(kill(), effect, [*open_db, attempt(3, "db", OTHER, 11.0, 11.1, "recovered", False)]) == w.CLAIM_WRITE
    )
    assert (
        w.classify(kill(), effect, [*open_db, attempt(3, "db", OTHER, 11.0, 11.1, "recovered", True)]) == w.WRITE_STAMP
    )
    assert (
        w.classify(kill(), effect, [*open_db, attempt(3, "db", OTHER, 11.0, 11.1, "recovered", None)]) == w.CLAIM_STAMP
    )  # a write that cannot tell
    stamped = [attempt(i, k, PID, 9 + i / 10, 9.05 + i / 10, "applied") for i, k in enumerate(("file", "db", "email"))]
    assert w.classify(kill(), effect, stamped) == w.STAMPED
    assert w.classify(kill(), effect, None) == w.EFFECT  # the live pane: no attempts read


def test_a_claim_stamped_after_the_death_or_by_another_worker_is_not_the_dead_one_s():
    effect = [scheduled("effect")]
    later = [attempt(1, "file", PID, 10.5, 10.6, "applied")]  # started after the death: not its
    assert w.classify(kill(), effect, later) == w.BEFORE_CLAIM
    others = [attempt(1, "file", OTHER, 9.1, None, None)]
    assert w.classify(kill(), effect, others) == w.BEFORE_CLAIM


def test_no_activity_in_flight_names_the_timer_the_workflow_task_or_neither():
    closed = [scheduled("effect", 5), HistoryEvent(7, 9.2, "ACTIVITY_TASK_COMPLETED", "scheduled_event_id=5")]
    timer = [*closed, HistoryEvent(10, 9.3, "TIMER_STARTED", "")]
    assert w.classify(kill(), timer, []) == w.TIMER
    task = [*closed, HistoryEvent(8, 9.2, "WORKFLOW_TASK_SCHEDULED", "")]
    assert w.classify(kill(), task, []) == w.WORKFLOW_TASK
    assert w.classify(kill(), closed, []) == w.BETWEEN


def test_counts_follow_a_step_s_order_and_keep_a_user_s_windows():
    found = w.counts([w.TIMER, w.MODEL, "activity send_email", w.MODEL])
    assert found == {w.MODEL: 2, w.TIMER: 1, "activity send_email": 1}
    assert list(found) == [w.MODEL, w.TIMER, "activity send_email"]
    assert set(w.COVERAGE) <= set(w.WINDOWS) and len(w.COVERAGE) >= 7


def user_activity(activity_id: str = "4", t: float = 9.0) -> HistoryEvent:
    return HistoryEvent(5, t, "ACTIVITY_TASK_SCHEDULED", f"send_line activity_id={activity_id}")


def user_claim(
    seq: int,
    pid: int,
    started: float,
    finished: float | None,
    outcome: str | None,
    attempt_no: int = 1,
    step: int = 4,
    key: str = "act:wf:r:4:line",
) -> ClaimAttempt:
    return ClaimAttempt(seq, key, step, "line", attempt_no, pid, None, outcome or "interrupted", started, finished)


def test_a_user_s_effect_is_placed_by_its_claims_and_the_probe_log():
    """A user's activity (no step of ours): its claims have step = its activity id; the probe log's
    record of the dead pid and attempt says whether its write had been entered."""
    dead = KillEvent(1, 10.0, "died", PID, None, None, None, "SIGKILL")
    acts = [user_activity()]
    entered = [ProbeRecord("act:wf:r:4:line", "line", "wf", "r", "4", 1, PID, 9.0)]
    open_claim = [user_claim(1, PID, 9.5, None, None)]
    assert w.classify(dead, acts, open_claim, []) == w.CLAIM_WRITE  # claimed, write never entered
    assert w.classify(dead, acts, open_claim, entered) == w.WRITE_STAMP
    retried = [ProbeRecord("act:wf:r:4:line", "line", "wf", "r", "4", 2, PID, 9.0)]  # another attempt's record
    assert w.classify(dead, acts, open_claim, retried) == w.CLAIM_WRITE
    assert w.classify(dead, acts, open_claim) == w.CLAIM_STAMP  # no probe log read: it cannot tell
    assert w.classify(dead, acts, [user_claim(1, OTHER, 10.5, 10.8, "applied")], []) == w.BEFORE_CLAIM
    assert w.classify(dead, acts, [user_claim(1, PID, 9.2, 9.4, "applied")], []) == w.STAMPED
    earlier = [user_claim(1, PID, 8.0, 8.2, "applied")]  # activity 4 of an earlier execution: not this one's
    assert w.classify(dead, acts, earlier, []) == "activity send_line"
    assert (
        w.classify(dead, [user_activity("x")], [user_claim(1, PID, 9.2, 9.4, "applied")], []) == "activity send_line"
    )  # an activity id that is not a number is matched to no claim


def test_an_execution_that_closed_has_nothing_in_flight():
    """A reset terminates the execution it replaces with an activity open: after that, the timeline's
    next segment decides (proof/windows.history_events)."""
    base = [
        HistoryEvent(5, 9.0, "ACTIVITY_TASK_SCHEDULED", "send_line activity_id=5"),
        HistoryEvent(6, 9.5, "WORKFLOW_EXECUTION_TERMINATED", "identity=history-resetter"),
    ]
    reset = [
        HistoryEvent(10, 9.5, "WORKFLOW_TASK_FAILED", "", 1),
        HistoryEvent(11, 9.5, "WORKFLOW_TASK_SCHEDULED", "", 1),
    ]
    assert w.classify(kill(), base[:1], []) == "activity send_line"
    assert w.classify(kill(), base, []) == w.BETWEEN
    assert w.classify(kill(), base + reset, []) == w.WORKFLOW_TASK
