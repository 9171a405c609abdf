"""The app as an instrument, on fixed data: the completion sentence, kill markers between history
events, the step inspector (Enter, click, Escape), the ledger pane following the live step."""

from __future__ import annotations

from checkpoint_tui.core.kill_marker import in_flight, place_kill
from checkpoint_tui.core.pending_activity import pending_of
from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.settings import HOST
from checkpoint_tui.tui.panes.status import StatusBar
from checkpoint_tui.tui.panes.timeline import heartbeat_age, heartbeat_text
from checkpoint_tui.tui.step_screen import StepScreen
from test_tui_snapshots import SIZE, make_app, open_inspector, settle
from tui_fixtures import (
    RUN,
    T0,
    completed_after_kill_view,
    running_view,
    silent_worker_view,
    snap,
    step,
    step_history,
)

SENTENCE = "run completed — 8 steps, 24 ledger rows, duplicates 0 · applied exactly once across 2 worker processes"


def test_completion_sentence_forms():
    v = completed_after_kill_view()
    assert v.snapshot.completion_sentence(2) == SENTENCE
    assert v.snapshot.completion_sentence() == SENTENCE  # counted from the step rows: pids 4121 and 4180
    failed = Snapshot(
        RUN,
        total_steps=5,
        run_status="failed",
        workflow_status="FAILED",
        completed_steps=2,
        ledger_rows=6,
        steps=[step(1), step(2)],
    )
    assert failed.completion_sentence() == (
        "run failed — 2 of 5 steps, 6 ledger rows, duplicates 0 · applied exactly once across 1 worker process"
    )
    cancelled = Snapshot(RUN, total_steps=5, run_status="cancelled", workflow_status="CANCELED", duplicates=1)
    assert cancelled.completion_sentence(0).startswith(
        "run cancelled — 0 of 5 steps, 0 ledger rows, duplicates 1 · NOT"
    )
    assert Snapshot(RUN, total_steps=5, run_status="running", workflow_status="RUNNING").completion_sentence() is None


def test_kill_marker_waits_for_the_next_event_and_names_what_was_in_flight():
    v = completed_after_kill_view()
    kill = v.kills[0]
    before = [ev for ev in v.history if ev.time <= kill.at]
    assert place_kill(kill, before) is None  # nothing after the kill yet: the gap is not known
    i, text = place_kill(kill, v.history)
    assert v.history[i - 1].time <= kill.at < v.history[i].time
    assert text == (
        "── SIGKILL worker 4121 (w-964d45) · in flight: ACTIVITY_TASK_STARTED llm attempt 1 · step 4 · "
        "next event +0.16 s ──"
    )
    assert in_flight(step_history(3)) is None  # every activity closed


async def test_status_line_history_marker_and_ledger_follow():
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.query_one(StatusBar).message == SENTENCE
        assert SENTENCE in app.query_one(StatusBar)._shown_text.plain
        history = app.query_one("#history")
        assert history.names.count("KILL") == 1 and history.row_count == len(history.names)
        row = history.names.index("KILL")
        marker = history.get_cell("kill/2", "event").plain
        assert marker.startswith("── SIGKILL worker 4121") and "next event +0.16 s" in marker
        assert history.events[row].time > T0 + 4.3 > history.events[row - 1].time  # between the two events
        ledger = app.query_one("#ledger")
        assert ledger.cursor_row == ledger.row_count - 1  # followed to the newest effect
        timeline = app.query_one("#timeline")
        assert "✂ truncated" in timeline.get_cell("6", "mark").plain


async def test_ledger_pane_stays_where_the_user_moved_it():
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        ledger = app.query_one("#ledger")
        ledger.focus()
        await pilot.press("home")
        ledger.sync([("new-row", ("x", "applied", "1", "—", "—", "file"))], follow=True)
        assert ledger.cursor_row == 0


async def test_inspector_opens_on_enter_and_click_and_escape_closes():
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=SIZE) as pilot:
        await open_inspector(pilot, 4)
        screen = app.screen
        assert isinstance(screen, StepScreen) and app.session.inspected == [(RUN, 4)]
        text = screen.query_one("#step-detail").render().plain
        assert "completed by worker 4180 (started by 4121)" in text
        assert "- thought: [bold]compute[/] it" in text.replace(" ⏎ ", "\n")  # payloads are literal text
        assert "llm                  attempt 2  worker 4180" in text and "claim applied" in text
        assert "ACTIVITY_TASK_STARTED" in text and "attempt=2" in text  # the step's own history events
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, StepScreen)
        await pilot.click("#timeline", offset=(2, 6))  # header + 5 rows down: step 6
        for _ in range(50):
            if isinstance(app.screen, StepScreen) and app.screen.detail is not None:
                break
            await pilot.pause(0.02)
        assert app.session.inspected[-1] == (RUN, 6)
        assert "✂ truncated" in app.screen.query_one("#step-detail").render().plain


async def test_palette_lists_the_inspector():
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Inspect step" in titles


async def test_chaos_screen_ticks_the_schedule_and_shows_the_counts():
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("x")
        for _ in range(100):
            if getattr(app.screen, "report", None) is not None:
                break
            await pilot.pause(0.02)
        screen = app.screen
        assert [step for step, _ in screen.schedule] == [2, 4, 6, 8, 10, 11]
        assert screen.run_id == "run-20261129-120500-c0de"
        text = screen.query_one("#chaos-text").render().plain
        assert "✓ step    2: worker-kill +120 ms" in text and "✓ step   10: worker-kill +450 ms" in text
        assert "LOST 0 · DUPLICATED 0 · step gaps []" in text and "PASS" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not hasattr(app.screen, "schedule")
        assert "lost 0 · duplicated 0 · gaps 0 · 6 kills · PASS" in app.query_one(StatusBar).message


def pending_info(state: str = "STARTED", attempt: int = 1, beat: float | None = 101.0, timeout_s: int = 2):
    from temporalio.api.common.v1 import ActivityType
    from temporalio.api.enums.v1 import PendingActivityState
    from temporalio.api.workflow.v1 import PendingActivityInfo

    info = PendingActivityInfo(
        activity_type=ActivityType(name="llm"),
        attempt=attempt,
        last_worker_identity=f"w-964d45@{HOST}",
        state=PendingActivityState.Value(f"PENDING_ACTIVITY_STATE_{state}"),
    )
    info.last_started_time.FromSeconds(100)
    if beat is not None:
        info.last_heartbeat_time.FromSeconds(int(beat))
    info.activity_options.heartbeat_timeout.FromSeconds(timeout_s)
    return info


def test_pending_activity_from_describe_and_its_heartbeat_text():
    """The age runs from the last heartbeat (or the attempt's start); silent past 0.8 x the activity's own
    heartbeat timeout (the SDK's heartbeat throttle: a live worker's last beat is never older)."""
    live = pending_of([pending_info()], 102.0)
    assert (live.activity, live.attempt, live.state, live.since_heartbeat) == ("llm", 1, "STARTED", True)
    assert live.age_s == 1.0 and live.worker == f"w-964d45@{HOST}"
    assert not live.silent and heartbeat_age(live).plain == "♥1.0s" and heartbeat_text(live).plain == ""
    quiet = pending_of([pending_info()], 102.7)
    assert quiet.silent and heartbeat_age(quiet).plain == "♥1.7s" and "red" in str(heartbeat_age(quiet).style)
    assert heartbeat_text(quiet).plain == "silent · llm attempt 1 on w-964d45 · no heartbeat for 1.7 s"
    long_timeout = pending_of([pending_info(timeout_s=6)], 104.0)  # 0.8 x 6 s: 3 s is a live worker's rhythm
    assert round(long_timeout.silent_after_s, 6) == 4.8 and not long_timeout.silent
    never_beat = pending_of([pending_info(beat=None)], 102.0)
    assert not never_beat.since_heartbeat and never_beat.silent
    assert heartbeat_text(never_beat).plain == "silent · llm attempt 1 on w-964d45 · no heartbeat in 2.0 s"
    retry = pending_of([pending_info("SCHEDULED", attempt=2)], 103.0)
    assert heartbeat_age(retry).plain == "⧗"
    assert heartbeat_text(retry).plain == "llm attempt 2 waiting for a worker"
    assert pending_of([], 100.0) is None


async def test_running_row_shows_the_heartbeat_age_of_a_silent_worker():
    app = make_app(silent_worker_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        timeline = app.query_one("#timeline")
        assert timeline.get_cell("7", "duration").plain == "♥2.3s"
        assert timeline.get_cell("7", "mark").plain == "silent · llm attempt 1 on w-964d45 · no heartbeat for 2.3 s"
        assert timeline.get_cell("6", "mark") == "" and timeline.get_cell("6", "duration") == "0.50s"
        timeline.apply(snap([step(7, "completed")], 30), None)  # the step ends: its row loses the mark
        assert timeline.get_cell("7", "mark") == "" and timeline.get_cell("7", "duration") == "0.50s"


async def test_bundle_screenshot_pictures_each_kill_marker(tmp_path):
    """A proof bundle's pictures (tui/screenshot.py): the final screen, then the history pane scrolled to
    each kill's marker line, the line marker_lines() gives for the bundle's README."""
    import html

    from checkpoint_tui.core.kill_marker import marker_lines
    from checkpoint_tui.tui.screenshot import save_svg

    v = completed_after_kill_view()
    paths = await save_svg(v, SENTENCE, tmp_path / "screen.svg", markers=tmp_path)
    assert paths == [tmp_path / "screen.svg", tmp_path / "kill-1.svg"]
    final, kill = (html.unescape(p.read_text()).replace("\xa0", " ") for p in paths)
    assert SENTENCE in final and SENTENCE in kill
    assert "── SIGKILL worker 4121 (w-964d45) · in flight: ACTIVITY_TASK_STARTED" in kill
    assert "WORKFLOW_EXECUTION_COMPLETED" in final and "WORKFLOW_EXECUTION_COMPLETED" not in kill
    lines = marker_lines(v.kills, v.history)
    assert lines == [place_kill(v.kills[0], v.history)[1]] and lines[0].endswith("next event +0.16 s ──")
    assert marker_lines(v.kills, [e for e in v.history if e.time > v.kills[0].at], whole=False) == []
    assert (await save_svg(v, SENTENCE, tmp_path / "only.svg")) == [tmp_path / "only.svg"]


def test_a_kill_with_no_activity_in_flight_names_the_timer_or_workflow_task():
    from checkpoint_tui.core.kill_marker import open_task
    from checkpoint_tui.core.view import HistoryEvent
    from checkpoint_tui.core.windows import classify
    from checkpoint_tui.ledger.inspect_queries import KillEvent

    timer = [
        HistoryEvent(10, 1.0, "WORKFLOW_TASK_COMPLETED", ""),
        HistoryEvent(11, 1.0, "TIMER_STARTED", ""),
        HistoryEvent(12, 2.0, "TIMER_FIRED", "started_event_id=11"),
        HistoryEvent(13, 2.0, "WORKFLOW_TASK_SCHEDULED", "attempt=1"),
    ]
    kill = KillEvent(1, 1.5, "kill", 99, None, None, 7, "SIGKILL")
    i, text = place_kill(kill, timer)
    assert i == 2 and "in flight: no activity, a timer (TIMER_STARTED) · step 7 · next event +0.50 s" in text
    assert in_flight(timer[:i]) is None and classify(kill, timer[:i], []) == "timer"
    assert open_task(timer) == "WORKFLOW_TASK_SCHEDULED"  # fired; then a workflow task not completed yet
    assert classify(kill, timer, []) == "workflow task"
    assert classify(kill, timer[:1], []) == "between tasks"
    send = [HistoryEvent(5, 1.0, "ACTIVITY_TASK_SCHEDULED", "send_email task_queue=q")]
    assert classify(kill, send, []) == "activity send_email"


async def test_the_loop_s_sentence_reads_the_ledger_again_once_the_run_has_ended(tmp_path):
    """A poll reads the ledger, then Temporal's status: a run whose last step was stamped between the two
    reads arrives as `completed` beside 3 of its 4 steps. The sentence, asked once for good, is of the
    ledger read after that, not NOT exactly once."""
    from checkpoint_tui.core.timeline import StepTimeline
    from checkpoint_tui.ledger.store import connect, create_run, finish_run, upsert_step
    from checkpoint_tui.settings import Settings

    settings = Settings(home=tmp_path)
    settings.ensure_dirs()
    conn = connect(settings.ledger)
    create_run(conn, RUN, 4, 0.0, "offline", settings.task_queue)
    for n in (1, 2, 3):
        upsert_step(conn, RUN, n, "completed", worker_pid=4121, worker_host=HOST)
    seen = Snapshot(RUN, total_steps=4, run_status="running", workflow_status="COMPLETED", completed_steps=3)
    assert "NOT exactly once" in (seen.completion_sentence(1) or "")  # what the poll's own figures would say
    upsert_step(conn, RUN, 4, "completed", worker_pid=4121, worker_host=HOST)  # stamped before the status read
    finish_run(conn, RUN, "completed")

    async def db(fn):
        return fn()

    said = await StepTimeline().completion(settings, None, seen, db)
    assert said == (
        "run completed — 4 steps, 0 ledger rows, duplicates 0 · applied exactly once across 1 worker process"
    ), said
