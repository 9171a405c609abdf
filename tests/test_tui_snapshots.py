"""SVG snapshots of the app on fixed data (fixed size, fixed clock, no cursor blink)."""

from __future__ import annotations

import pytest

from checkpoint_tui.tui.app import CheckpointApp
from tui_fixtures import (
    FixedSession,
    after_kill_view,
    completed_after_kill_view,
    empty_view,
    guardrail_view,
    running_view,
    silent_worker_view,
)

SIZE = (160, 44)


pytestmark = pytest.mark.usefixtures("utc")  # conftest: clock lines in UTC, as the snapshots were taken


def make_app(view) -> CheckpointApp:
    app = CheckpointApp(FixedSession(view), poll_interval=3600)
    app.animation_level = "none"
    return app


async def settle(pilot) -> None:
    """Let the first poll (the only one: the interval is an hour) be applied."""
    session = pilot.app.session
    for _ in range(100):
        if session.polls:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_empty_state(snap_compare):
    assert snap_compare(make_app(empty_view()), terminal_size=SIZE, run_before=settle)


def test_running_run(snap_compare):
    assert snap_compare(make_app(running_view()), terminal_size=SIZE, run_before=settle)


def test_after_kill(snap_compare):
    assert snap_compare(make_app(after_kill_view()), terminal_size=SIZE, run_before=settle)


def test_guardrail_failure(snap_compare):
    assert snap_compare(make_app(guardrail_view()), terminal_size=SIZE, run_before=settle)


def test_help_screen(snap_compare):
    assert snap_compare(make_app(running_view()), terminal_size=SIZE, press=["question_mark"], run_before=settle)


def test_completed_after_kill(snap_compare):
    """The completion sentence in the status line, the kill marker in the history, ✂ on step 6."""
    assert snap_compare(make_app(completed_after_kill_view()), terminal_size=SIZE, run_before=settle)


def test_history_kill_marker(snap_compare):
    """The history pane scrolled to the kill: the marker line between the two events around it."""

    async def to_marker(pilot) -> None:
        await settle(pilot)
        history = pilot.app.query_one("#history")
        history.scroll_to(y=history.names.index("KILL") - 6, animate=False, immediate=True)
        await pilot.pause()

    assert snap_compare(make_app(completed_after_kill_view()), terminal_size=SIZE, run_before=to_marker)


async def open_inspector(pilot, step: int) -> None:
    await settle(pilot)
    timeline = pilot.app.query_one("#timeline")
    delta = timeline.row_keys().index(str(step)) - timeline.cursor_row
    for _ in range(abs(delta)):
        await pilot.press("down" if delta > 0 else "up")
    await pilot.press("enter")
    for _ in range(100):  # the detail is read in a worker
        if getattr(pilot.app.screen, "detail", None) is not None:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_step_inspector(snap_compare):
    async def inspect_step_4(pilot) -> None:
        await open_inspector(pilot, 4)

    assert snap_compare(make_app(completed_after_kill_view()), terminal_size=SIZE, run_before=inspect_step_4)


def test_chaos_screen(snap_compare):
    async def chaos(pilot) -> None:
        await settle(pilot)
        pilot.app._run_chaos(4242)  # what `x` starts, with a fixed seed
        for _ in range(100):
            screen = pilot.app.screen
            if getattr(screen, "report", None) is not None:
                break
            await pilot.pause(0.02)
        await pilot.pause()

    assert snap_compare(make_app(running_view()), terminal_size=SIZE, run_before=chaos)


def test_lesson_view(snap_compare):
    """The step-through view mid-lesson: the naive loop re-sent steps 1-2 after its restart, the durable
    run ended with one email per step and no duplicate."""

    async def lesson(pilot) -> None:
        await settle(pilot)
        await pilot.press("v")
        for _ in range(100):
            if getattr(pilot.app.screen, "view", None) is not None:
                break
            await pilot.pause(0.02)
        await pilot.pause()

    assert snap_compare(make_app(running_view()), terminal_size=SIZE, run_before=lesson)


def test_silent_worker_heartbeat(snap_compare):
    """The running step's row with the age of its activity's last heartbeat, red: the worker is silent."""
    assert snap_compare(make_app(silent_worker_view()), terminal_size=SIZE, run_before=settle)


async def test_markup_in_model_output_is_literal():
    app = make_app(guardrail_view())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        banner = app.query_one("#banner")
        text = banner.render()
        plain = getattr(text, "plain", str(text))
        assert "[bold]Here[/]" in plain and "[red]explain[/red]" in plain
        assert "shown" in banner.classes
        # history attributes with brackets are literal too
        history = app.query_one("#history")
        assert history.names and history.row_count == len(history.names)


async def test_comparison_view_shows_counts():
    """The automatic comparison, from the step-through view's `a`."""
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("v")
        await pilot.pause(0.1)
        await pilot.press("a")
        await pilot.pause(0.1)
        text = str(app.screen.query_one("#comparison").render())
        assert "naive loop" in text and "emails sent   9 · sent twice  3" in text
        assert "durable run" in text and "ledger duplicates 0" in text


async def test_fault_menu_plans_a_fault_and_rejects_bad_input():
    from checkpoint_tui.ledger.faults import FaultSpec

    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")
        await pilot.pause()
        step = app.screen.query_one("#step")
        step.focus()
        step.value = "0"
        await pilot.press("enter")
        await pilot.pause()
        assert "STEP must be between 1 and" in str(app.screen.query_one("#error").render())
        step.value = "7"
        await pilot.press("enter")
        await pilot.pause()
        assert app.session.planned == [(FaultSpec("kill_at", 7), True)]


async def test_typed_markup_is_shown_as_text_not_parsed():
    """Text typed into a dialog comes back in its error line: `[/]` must not crash the app."""
    app = make_app(running_view())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")
        await pilot.pause()
        extra = app.screen.query_one("#extra")
        extra.value = "[/] [bold]x"
        app.screen.query_one("#step").value = "3"
        app.screen.query_one("#kind").value = "transient"
        extra.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "[/] [bold]x" in str(app.screen.query_one("#error").render())
        await pilot.press("escape")
        await pilot.press("n")
        await pilot.pause()
        app.screen.query_one("#pace").value = "nan"
        app.screen.query_one("#steps").focus()
        await pilot.press("enter")
        await pilot.pause()
        assert "pace must be a number from 0 to 100" in str(app.screen.query_one("#error").render())
