"""The main screen at the sizes people's terminals have (80x24, 120x36, 200x50): right after a kill
and at the run's end, the proof is on screen at every one of them: the completion sentence (or the
live progress and what the kill did), duplicates 0, the resumed marker and the claims' outcomes. Then
the keys that bring a kill marker on screen (`m` / `M`, `h` in the narrow layout), Enter from there,
and the inspector's kill line. At 80x24 the dialogs fit, the help scrolls, the footer keeps `?` and
`q`, and the status lines are cut, not wrapped."""

from __future__ import annotations

import re

import pytest

from checkpoint_tui.tui.panes.worker_events import describe
from checkpoint_tui.tui.screens import HELP, HelpScreen
from checkpoint_tui.tui.step_screen import StepScreen
from test_tui_snapshots import make_app, open_inspector, settle
from tui_fixtures import (
    after_kill_view,
    completed_after_kill_view,
    empty_view,
    running_view,
    screen_lines,
    two_kills_view,
)

SIZES = [(80, 24), (120, 36), (200, 50)]
KILL_SAID = "worker 4121 killed at step 7 · observed signal SIGKILL · exit code none"


pytestmark = pytest.mark.usefixtures("utc")  # conftest: clock lines in UTC, as the snapshots were taken


def shown(app) -> str:
    return "\n".join(screen_lines(app))


async def kill_and_settle(pilot) -> None:
    """`k` on a live run, as a user presses it: the app's own kill action says what the kill did (on
    fixed data the report of the kill the View recorded), and the poll it asks for is applied."""
    await settle(pilot)
    await pilot.press("k")
    app = pilot.app
    status = app.query_one("#status")
    for _ in range(100):
        if app.session.polls >= 2 and status.pill == "running" and status.message.startswith(KILL_SAID):
            break
        await pilot.pause(0.02)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_kill_at_size(snap_compare, size):
    """The README's picture (120x36): a second after `k` in step 7, the message line says what the kill
    did, the worker events show the spare promoted and a new one spawned."""
    assert snap_compare(make_app(after_kill_view()), terminal_size=size, run_before=kill_and_settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_completed_after_kill_at_size(snap_compare, size):
    assert snap_compare(make_app(completed_after_kill_view()), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_proof_is_on_screen_at_every_size(size):
    """What the snapshots above show, asserted as text (a snapshot regenerated carelessly cannot hide it)."""
    view = completed_after_kill_view()
    app = make_app(view)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for _ in range(100):  # the footer's keys may paint a refresh after the poll on a loaded machine
            if len(screen_lines(app)) == size[1]:
                break
            await pilot.pause(0.05)
        text = shown(app)
        lines = text.splitlines()
        assert len(lines) == size[1]
        said = next(line.strip() for line in lines[:3] if line.strip().startswith("run completed"))
        if said.endswith("…"):  # cut to the width (80 columns), never wrapped
            said = said[:-1]
        assert view.completion.startswith(said) and "duplicates 0" in said, text
        assert "duplicates 0" in text
        assert "⚑ resumed" in text and "resumed at 4" in text
        assert "applied 24 · skipped 0 · recovered 0 · interrupted 0" in text
        assert "4:email  applied" in text or "8:email  applied" in text  # a short id and its claim
        assert ("-narrow" in app.screen.classes) == (size[0] < 110)
    live = make_app(after_kill_view())
    async with live.run_test(size=size) as pilot:
        await kill_and_settle(pilot)
        text = shown(live)
        assert "7/30" in text and "RUNNING" in text  # the live progress
        assert KILL_SAID in text  # what the kill did, said by the app's kill action
        assert "duplicates 0" in text and "⚑ resumed" in text and "applied 21" in text


async def test_m_scrolls_the_history_to_each_kill_marker_and_M_back():
    app = make_app(two_kills_view())
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot)
        history = app.query_one("#history")
        assert "SIGKILL worker 4121" not in shown(app)  # the pane follows the end: the markers are above
        await pilot.press("m")
        await pilot.pause()
        assert "SIGKILL worker 4121" in shown(app)
        message = app.query_one("#status").message
        assert message.startswith("kill marker 1 of 2 (model call window): ── SIGKILL worker 4121")
        first = history.scroll_offset.y
        await pilot.press("m")
        await pilot.pause()
        assert "kill marker 2 of 2 (tool call window): ── SIGKILL worker 4180" in app.query_one("#status").message
        assert history.scroll_offset.y > first
        await pilot.press("m")  # wraps round
        await pilot.pause()
        assert "kill marker 1 of 2" in app.query_one("#status").message
        await pilot.press("M")  # back, wrapping: the newest
        await pilot.pause()
        assert "kill marker 2 of 2" in app.query_one("#status").message
        await pilot.press("M")
        await pilot.pause()
        assert "kill marker 1 of 2" in app.query_one("#status").message
        assert history.scroll_offset.y == first


async def test_m_without_markers_says_so():
    app = make_app(empty_view())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await pilot.pause()
        assert app.query_one("#status").message == "no kill markers in the history shown"


async def test_narrow_m_brings_the_history_on_screen_and_h_swaps_back():
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "temporal history" not in shown(app) and "timeline" in shown(app)
        await pilot.press("m")
        await pilot.pause()
        text = shown(app)
        assert "temporal history" in text and "── SIGKILL worker 4121" in text
        assert "ledger" not in text.split("temporal history")[0].split("\n", 3)[-1]  # timeline + ledger gone
        await pilot.press("h")
        await pilot.pause()
        text = shown(app)
        assert "temporal history" not in text and "duplicates 0" in text
        await pilot.press("h")
        await pilot.pause()
        assert "temporal history" in shown(app)


async def test_wide_h_says_every_pane_is_shown():
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=(160, 44)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await pilot.pause()
        assert app.query_one("#status").message.startswith("every pane is on screen")


async def test_the_inspector_of_the_killed_step_shows_the_marker_and_its_window():
    app = make_app(two_kills_view())
    async with app.run_test(size=(160, 44)) as pilot:
        await open_inspector(pilot, 4)
        body = str(app.screen.query_one("#step-detail").render())
        assert "⚡ interrupted by a kill in the model call window" in body
        assert "── SIGKILL worker 4121 (w-964d45) · in flight: ACTIVITY_TASK_STARTED llm attempt 1 · step 4" in body
        assert "4180" not in body.split("interrupted by a kill", 1)[1].split("\n")[1]  # only this step's kill
        await pilot.press("escape")
        await pilot.pause()
        await open_inspector(pilot, 7)
        body = str(app.screen.query_one("#step-detail").render())
        assert "in the tool call window" in body and "SIGKILL worker 4180" in body
        await pilot.press("escape")
        await pilot.pause()
        await open_inspector(pilot, 5)
        assert "interrupted by a kill" not in str(app.screen.query_one("#step-detail").render())


async def test_the_resumed_steps_stay_named_when_later_snapshots_carry_only_new_rows():
    """A live snapshot holds the rows changed since the last poll and their resumed marks: the step
    resumed polls ago is still named in the timeline's counts line."""
    from tui_fixtures import snap, step

    app = make_app(after_kill_view())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        timeline = app.query_one("#timeline")
        assert timeline.resumed == {7}
        later = snap([step(8, pid=4180), step(9, "running", pid=4180)], 30)
        later.resumed_steps = []
        timeline.apply(later)
        timeline.info.expire()
        timeline.apply(later)
        await pilot.pause()
        assert "⚑ resumed at 7" in timeline.info.plain


@pytest.mark.parametrize("stock", ["", "all"], ids=["tricks", "stock"])
async def test_a_pane_that_grew_while_hidden_shows_its_newest_rows_when_shown_again(monkeypatch, stock):
    """Narrow layout: the ledger gets rows while `h` has it off screen; back on screen it shows the newest
    rows, each line the row it should be (not lines painted before it was hidden)."""
    from textual.geometry import Region

    from checkpoint_tui.tui.render import switch
    from tui_fixtures import snap, step, view

    monkeypatch.setattr(switch, "OFF", switch.parse(stock))
    app = make_app(view(snap([step(1)], 30)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for last in range(2, 6):  # the ledger follows its new rows (it scrolls)
            app.session.view = view(snap([step(i) for i in range(1, last + 1)], 30), run_changed=False)
            app._poll_now.set()
            await pilot.pause(0.05)
        await pilot.press("h")  # history and worker events; the timeline and the ledger go off screen
        await pilot.pause()
        for last in range(6, 10):  # polls while hidden, a step each (ids as wide as before: no new widths)
            app.session.view = view(snap([step(i) for i in range(1, last + 1)], 30), run_changed=False)
            app._poll_now.set()
            await pilot.pause(0.05)
        await pilot.press("h")
        await pilot.pause(0.1)
        table = app.query_one("#ledger")
        painted = table.render_lines(Region(0, 0, table.size.width, table.size.height))  # what the screen gets
        ids = [strip.text.split()[0] for strip in painted[1:] if strip.text.strip()]  # below the header
        every = [f"{n}:{kind}" for n in range(1, 10) for kind in ("file", "db", "email")]
        first = every.index(ids[0])
        assert ids == every[first : first + len(ids)] and "9:email" in ids, ids


def footer_keys(app) -> tuple[str, list[str]]:
    """The footer's line and the hints its keys show (`? Help`)."""
    keys = [f"{key.key_display} {key.description}".strip() for key in app.screen.query("FooterKey")]
    return screen_lines(app)[-1], keys


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_footer_keeps_help_and_quit_and_cuts_no_hint(size):
    """htop, k9s and lazygit keep Help and Quit visible at 80 columns: fewer hints, none of them cut,
    whichever pane has the focus."""
    app = make_app(after_kill_view())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for keys in ((), ("h",), ("m",), ("tab",)):
            for key in keys:
                await pilot.press(key)
            for _ in range(100):  # the footer recomposes after the focus moved
                await pilot.pause(0.02)
                line, hints = footer_keys(app)
                if hints and all(hint in line for hint in hints):
                    break
            assert "? Help" in line and "q Quit" in line, (keys, line)
            for hint in hints:
                assert hint in line, f"{hint!r} cut after {keys}: {line!r}"


HELP_KEYS = ["n", "k", "m / M", "h", "c", "f", "r", "v", "x", "enter", "tab", "? / F1", "ctrl+p", "q", "ctrl+q"]


def assert_help_shows_every_key(app) -> None:
    """Every key's line of the help on screen, whole (nothing cut at the right), and the Close button."""
    text = shown(app)
    dialog = app.screen.query_one("#dialog")
    assert dialog.region.right <= app.size.width and dialog.region.bottom <= app.size.height, dialog.region
    for key in HELP_KEYS:
        line = next((x.strip() for x in HELP.splitlines() if re.match(rf"  {re.escape(key)}  ", x)), None)
        assert line is not None, f"no help line for {key}"
        assert any(line in row for row in text.splitlines()), line
    assert "Close" in text


def test_help_screen_at_80x24(snap_compare):
    async def help_(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert_help_shows_every_key(pilot.app)

    assert snap_compare(make_app(running_view()), terminal_size=(80, 24), run_before=help_)


def test_new_run_dialog_at_80x24(snap_compare):
    async def new_run(pilot) -> None:
        await settle(pilot)
        await pilot.press("n")
        await pilot.pause()
        screen = pilot.app.screen
        dialog = screen.query_one("#dialog")
        assert dialog.region.right <= 80 and dialog.region.bottom <= 24, dialog.region
        for widget in screen.query("#dialog Input, #dialog Button, #dialog Label"):
            assert dialog.region.contains_region(widget.region), widget
        text = shown(pilot.app)
        for label in ("New run", "steps", "pace (scales timers and think time; 0 = none)", "Start", "Cancel"):
            assert label in text
        for field in screen.query("#dialog Input"):  # a blinking cursor made the snapshot a coin toss
            field.cursor_blink = False
        await pilot.pause()

    assert snap_compare(make_app(running_view()), terminal_size=(80, 24), run_before=new_run)


async def test_the_help_scrolls_to_its_last_line():
    """At 80x24 the help is longer than the screen: End and Down reach its last line, Home goes back."""
    last = " ".join(HELP.split()[-3:])  # the last words of the help text
    app = make_app(running_view())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert HelpScreen().has_class("-narrow")  # styled for 80 columns from its first frame, not after it
        await pilot.press("question_mark")
        await pilot.pause()
        assert last not in " ".join(shown(app).split())
        await pilot.press("end")
        await pilot.pause()
        assert last in " ".join(shown(app).split())
        await pilot.press("home")
        await pilot.pause()
        assert last not in " ".join(shown(app).split()) and "new run" in shown(app)
        for _ in range(40):
            await pilot.press("down")
        await pilot.pause()
        assert last in " ".join(shown(app).split()) and "Close" in shown(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_narrow_h_shows_the_newest_worker_events():
    """After `h` at 80x24 the worker events pane shows its newest rows: the new spare, and the kill."""
    view = after_kill_view()
    newest, kill = describe(view.snapshot.worker_events[-1]), "worker 4121 killed · observed signal SIGKILL"
    app = make_app(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await pilot.pause(0.1)
        text = shown(app)
        assert "worker events" in text and newest in text and kill in text, text


@pytest.mark.parametrize("size", [(80, 24), (160, 44)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_enter_after_m_opens_the_inspector(size):
    """`m`, then Enter: the inspector opens wherever `m` left the focus (below 110 columns, the history
    pane at the marker: the step the kill interrupted; above, the timeline's row)."""
    app = make_app(completed_after_kill_view())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await pilot.pause()
        await pilot.press("enter")
        for _ in range(100):
            if isinstance(app.screen, StepScreen) and app.screen.detail is not None:
                break
            await pilot.pause(0.02)
        assert isinstance(app.screen, StepScreen), app.focused
        if size[0] < 110:
            assert app.screen.step == 4  # the marker's step
            assert "interrupted by a kill" in str(app.screen.query_one("#step-detail").render())


async def test_status_lines_are_cut_not_wrapped():
    """At 80 columns the completion sentence is one line cut with an ellipsis; the line under it is
    the timeline's border, not the sentence's tail."""
    view = completed_after_kill_view()
    app = make_app(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = screen_lines(app)
        assert lines[1].startswith(" run completed — 8 steps") and lines[1].endswith("…"), lines[:3]
        assert len(lines[1]) <= 80 and lines[2].startswith("╭─ timeline"), lines[:3]
        assert view.completion.startswith(lines[1].strip()[:-1])


async def test_hostile_activity_names_stay_in_their_columns_at_120x36():
    """#51 item 9: a workflow named its activities with 128 wide characters, bidi overrides and markup;
    at 120x36 the timeline showed no activity name at all. Each name is cut to its cells (and its bidi
    and zero-width characters replaced), so the other rows' names stay on screen; a silent worker's note
    cuts the name it carries too."""
    from dataclasses import replace

    from rich.cells import cell_len

    from checkpoint_tui.core.activity_history import plain
    from checkpoint_tui.core.pending_activity import PendingActivity
    from checkpoint_tui.settings import HOST
    from checkpoint_tui.tui.panes.timeline import NOTE_NAME_CELLS, heartbeat_text
    from tui_fixtures import snap, step, view

    wide = plain("界" * 200)  # 128 characters, 256 cells
    bidi = plain("send\u202eliame_\u200b[bold red]x[/]")
    assert "\u202e" not in bidi and "\u200b" not in bidi
    names = ["tool · send_email", wide, bidi, "tool · send_email", wide, "model · m", wide]
    steps = [replace(step(i, "running" if i == 7 else "completed"), provider=n) for i, n in enumerate(names, 1)]
    app = make_app(view(snap(steps, 30), history=[]))
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        text = shown(app)
        assert text.count("tool · send_em") == 2 and "model · m" in text, text  # the plain names shown
        assert "界界界" in text and "send?liame_?[b" in text  # cut to the pane; markup shown as text
    note = heartbeat_text(PendingActivity(wide, 1, "STARTED", f"w-964d45@{HOST}", 2.34, True)).plain
    name = note.removeprefix("silent · ").split(" attempt 1", 1)[0]
    assert name.startswith("界" * 9) and name.endswith("…") and cell_len(name) <= NOTE_NAME_CELLS, note
