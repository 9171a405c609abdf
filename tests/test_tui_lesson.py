"""The step-through lesson view (`v`): on fixed data, the keys and buttons reach the lesson and the
columns show its counts; against the real dev server, a naive process and a gated durable run, Next
moves one step, and after Kill + Restart and finish the naive loop has sent its emails again while
the durable run ends with one email per step and no duplicate in its ledger."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path

from temporalio.worker import Replayer

import checkpoint_tui
from checkpoint_tui.core.session import LabSession
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.artifacts import outbox_ids, outbox_path
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.workflow import AgentLoop
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.lesson_screen import LessonScreen
from checkpoint_tui.tui.screens import ComparisonScreen, HelpScreen
from checkpoint_tui.workloads import AgentLoopWorkload
from test_tui_live import wait_for
from test_tui_snapshots import SIZE, make_app, settle
from tui_fixtures import running_view


def body(app, side: str) -> str:
    return app.screen.query_one(f"#{side}-body").render().plain


async def open_lesson(pilot) -> LessonScreen:
    await settle(pilot)
    await pilot.press("v")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LessonScreen) and pilot.app.screen.view, what="lesson")
    return pilot.app.screen


async def test_v_opens_the_step_through_view_with_both_columns():
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await open_lesson(pilot)
        naive, durable = body(app, "naive"), body(app, "durable")
        assert "NAIVE LOOP" in naive and "emails sent 6" in naive and "sent twice 2" in naive
        assert "none: nothing records what was already done" in naive
        assert "DURABLE RUN" in durable and "emails sent 4" in durable and "sent twice 0" in durable
        assert "ledger duplicates 0" in durable
        buttons = [b.label.plain for b in app.screen.query("#naive-col Button")]
        assert buttons == ["Next step (n)", "Kill (k)", "Restart and finish (r)"]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, LessonScreen)
        await pilot.press("v")  # the same lesson again: its runs and processes live on
        await wait_for(pilot, lambda: isinstance(app.screen, LessonScreen), what="lesson again")
        assert len(app.session.lessons) == 1


async def test_keys_and_buttons_reach_each_side():
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_lesson(pilot)
        lesson = app.session.lessons[0]
        for key in ("n", "k", "r", "N", "K", "R"):
            await pilot.press(key)
        await pilot.click("#durable-next_step")
        await pilot.press("o")
        await wait_for(pilot, lambda: len(lesson.actions) == 8, what="eight actions")
        assert sorted(lesson.actions) == sorted(
            [
                ("naive", "next_step"),
                ("naive", "kill"),
                ("naive", "finish"),
                ("durable", "next_step"),
                ("durable", "kill"),
                ("durable", "finish"),
                ("durable", "next_step"),
                ("both", "start_over"),
            ]
        )
        await wait_for(pilot, lambda: "(fixed data)" in screen.message, what="the lesson's answer")
        footer = {key.key: key.description for key in screen.query("FooterKey")}  # the footer's keys
        assert footer["n"] == "Naive: next" and footer["N"] == "Durable: next"
        assert {"k", "r", "K", "R", "a", "o"} <= set(footer), footer


async def test_the_automatic_comparison_stays_available_and_the_lesson_is_listed():
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await open_lesson(pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ComparisonScreen), what="the automatic comparison")
        await pilot.pause(0.1)
        assert "emails sent   9 · sent twice  3" in str(app.screen.query_one("#comparison").render())
        await pilot.press("escape", "escape")
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Naive vs durable, step by step" in titles and "Naive vs durable, automatic" in titles
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        help_text = str(app.screen.query_one("#help-text").render())
        assert "n / N next step, k / K kill" in help_text and "r / R restart and finish" in help_text


async def wait_until_async(ask, expected, timeout: float = 30.0, what: str = "answer") -> None:
    deadline = time.monotonic() + timeout
    while (got := await ask()) != expected:
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last: {got!r})"
        await asyncio.sleep(0.05)


def outbox_lines(home, run_id: str) -> int:
    return sum(outbox_ids(outbox_path(home.artifacts_dir, run_id)).values())


TESTS = str(Path(__file__).parent)


def _stack(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


def record_threads(monkeypatch) -> tuple[set[str], set[str]]:
    """The threads the app's own SQL statements and process spawns run on."""
    from checkpoint_tui.ledger.backend import SqliteLedger

    sql_threads: set[str] = set()
    spawn_threads: set[str] = set()
    execute, spawn = SqliteLedger.execute, asyncio.create_subprocess_exec
    package = str(Path(checkpoint_tui.__file__).parent)

    def recording_execute(self, sql, params=()):
        callers = [f.f_code.co_filename for f in _stack(sys._getframe(1))]
        if callers[0].startswith(package) and not any(name.startswith(TESTS) for name in callers):
            sql_threads.add(threading.current_thread().name)  # the app's statement, not this test's own check
        return execute(self, sql, params)

    async def recording_spawn(*args, **kwargs):
        spawn_threads.add(threading.current_thread().name)
        return await spawn(*args, **kwargs)

    monkeypatch.setattr(SqliteLedger, "execute", recording_execute)
    monkeypatch.setattr(asyncio, "create_subprocess_exec", recording_spawn)
    return sql_threads, spawn_threads


async def test_next_kill_restart_naive_resends_durable_does_not(home, monkeypatch):
    """The seed's walk-through on real processes: Next twice on each side (the naive counter reads 1
    from its outbox after the first; the durable worker is killed while its step 2 runs), Kill the naive
    process, Restart and finish both. Textual's loop (this test's main thread) runs none of the lesson's
    SQL or spawns: they run on the lesson's thread."""
    sql_threads, spawn_threads = record_threads(monkeypatch)
    session = LabSession(home, AgentLoopWorkload())
    # K must land while durable step 2 runs: at the app's pace (0.5) its model call thinks 0.27 s, which
    # a loaded machine's test loop can sleep through, and 1.08 s (pace 2.0) is not enough beside a whole
    # suite at its busiest; at 4.0 it thinks 2.17 s.
    monkeypatch.setattr(session, "lesson", lambda steps=4, pace=0.5: LabSession.lesson(session, steps, 4.0))
    app = CheckpointApp(session, poll_interval=0.2)
    lesson = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None and app._booted.is_set(), what="boot")
            await pilot.press("v")
            await wait_for(pilot, lambda: isinstance(app.screen, LessonScreen), what="lesson")
            screen: LessonScreen = app.screen
            lesson = app._lesson
            assert lesson.pace == 4.0

            def side(name: str):
                return getattr(screen.view, name) if screen.view else None

            await pilot.press("n")
            # the email is sent before the step counts as done: wait for both (a view between the two,
            # on a loaded machine, showed emails 1 and done 0)
            naive_done = lambda: side("naive") and side("naive").emails == 1 and side("naive").done == 1  # noqa: E731
            await wait_for(pilot, naive_done, what="naive step 1")
            naive_run = side("naive").run_id
            assert outbox_lines(home, naive_run) == 1
            assert "emails sent 1" in body(app, "naive")
            await pilot.press("N")
            await wait_for(pilot, lambda: side("durable") and side("durable").done == 1, what="durable step 1")
            durable_run = side("durable").run_id
            assert outbox_lines(home, durable_run) == 1
            await pilot.press("n")
            await wait_for(pilot, lambda: side("naive").done == 2 and not side("naive").busy, what="naive step 2")

            worker = session.supervisor.primary.pid
            # a step key is refused while that side is busy: on a loaded machine step 1's end may still be
            # being read back when naive step 2 is done
            await wait_for(pilot, lambda: "durable" not in lesson._busy, what="durable idle")
            # Durable step 2 and, right behind it, K: the worker running it SIGKILLed (a Kill is never
            # refused as busy). Pressed together, the two are handled in order while step 2's model call
            # thinks (2.17 s); a test loop that waited to see the step under way before pressing K could
            # sleep through the whole step on a loaded machine.
            await pilot.press("N", "K")
            await wait_for(pilot, lambda: "SIGKILL worker" in " ".join(side("durable").log), what="durable kill")
            await wait_for(
                pilot, lambda: side("durable").done == 2 and not side("durable").busy, what="step 2 on the spare"
            )
            assert worker not in session.supervisor.status.pool_pids
            kill = (
                connect(home.ledger)
                .execute("SELECT * FROM worker_events WHERE event = 'kill' AND pid = ?", (worker,))
                .fetchone()
            )
            assert kill is not None and json.loads(kill["detail"])["confirmed"]  # the supervisor saw it gone
            finisher = (
                connect(home.ledger)
                .execute("SELECT worker_pid, ended_at FROM steps WHERE run_id = ? AND step = 2", (durable_run,))
                .fetchone()
            )
            # K landed before step 2 ended: another worker finished it
            when = f"step 2 ended at {finisher['ended_at']:.3f}, the kill landed at {kill['at']:.3f}"
            assert finisher["worker_pid"] != worker, when

            naive_pid = lesson._sides["naive"].proc.pid
            naive_ident = lesson._sides["naive"].ident
            await pilot.press("k")
            await wait_for(pilot, lambda: "SIGKILL pid" in " ".join(side("naive").log), what="naive killed")
            assert naive_ident is not None and not naive_ident.exists()

            handle = session.client.get_workflow_handle(durable_run)  # after step 2's timer, held at its gate:
            await wait_until_async(lambda: handle.query("current_step"), 3, what="the workflow at step 3's gate")
            assert side("durable").done == 2
            assert not (await handle.describe()).raw_description.pending_activities  # nothing in flight

            await pilot.press("r")
            await pilot.press("R")
            await wait_for(pilot, lambda: side("naive").emails == 6 and not side("naive").busy, what="naive redo")
            await wait_for(
                pilot, lambda: side("durable").done == 4 and not side("durable").busy, what="durable end", timeout=90
            )
            naive, durable = side("naive"), side("durable")
            assert naive.emails == outbox_lines(home, naive_run) == 6 > lesson.steps  # steps 1-2 sent twice
            assert naive.repeated == 2 and "sent twice 2" in body(app, "naive")
            assert f"pid {naive_pid}" in " ".join(naive.log)
            assert durable.emails == outbox_lines(home, durable_run) == 4 and durable.repeated == 0
            assert durable.duplicates == 0 and "ledger duplicates 0" in body(app, "durable")
            conn = connect(home.ledger)
            assert queries.effect_totals(conn, durable_run).duplicates == 0
            assert queries.run(conn, durable_run).status == "completed"
            history = await handle.fetch_history()  # the gate's signals are history, and it replays
            signals = [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]
            assert len(signals) == 3  # Next, Next, Restart and finish
            await Replayer(workflows=[AgentLoop]).replay_workflow(history)
            await pilot.press("o")  # start over: fresh runs, the old ones stay in the ledger and the outboxes
            await wait_for(pilot, lambda: side("naive").run_id is None and side("durable").run_id is None, what="o")
            assert outbox_lines(home, naive_run) == 6 and "emails sent 0" in body(app, "naive")
            await pilot.press("escape")
            await pilot.press("q")
    finally:
        if lesson is not None:
            await lesson.close()
        await session.shutdown(stop_everything=True)
    assert sql_threads and "MainThread" not in sql_threads, sql_threads
    assert spawn_threads == {"lesson"}, spawn_threads  # the naive processes (workers: the supervisor's thread)
