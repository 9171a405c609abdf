"""The shorter paint paths of the live TUI draw exactly what Textual's own paths draw: the scrollbar,
the text lines of the status bar and the counts. The app in a real terminal takes keys at once. And
the pidfd pin that tells the supervisor whether an adopted worker is alive."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widgets import Static

from checkpoint_tui.ops.procs import ExitFd, ProcIdentity
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.text_lines import TextLines
from checkpoint_tui.tui.render.light_scrollbar import LightScrollBar
from labs import app_in_tmux, tmux

COLUMNS = [("n", "n"), ("word", "word"), ("note", "note")]


class TableApp(App):
    def __init__(self, *widgets) -> None:
        super().__init__()
        self.widgets = widgets

    def compose(self) -> ComposeResult:
        yield from self.widgets


def cells(strips: list[Strip]) -> list[list[tuple[str, object]]]:
    """Each line as (character, style) per cell: two paths may cut segments differently."""
    return [[(ch, seg.style) for seg in strip for ch in seg.text] for strip in strips]


def rows(n: int, wide: bool = False) -> list[tuple[str, tuple]]:
    note = "x" * 120 if wide else "note"
    return [(str(i), (str(i), Text(f"w{i}", style="bold red" if i % 3 else ""), note)) for i in range(n)]


def textual_bar(bar: LightScrollBar, region: Region) -> list[Strip]:
    bar._styles_cache.clear()
    return ScrollBar.render_lines(bar, region)  # Textual's path: Rich renderable, styles cache


async def test_the_light_scrollbar_draws_what_textual_draws():
    table = KeyedTable(COLUMNS)
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        table.sync(rows(200, wide=True), follow=False)
        await pilot.pause()
        bars = [table.vertical_scrollbar, table.horizontal_scrollbar]
        assert all(isinstance(bar, LightScrollBar) and bar.display for bar in bars)
        for scroll in (0, 90, 10_000):  # top, middle, bottom: the thumb and its half-cell ends move
            table.scroll_to(y=scroll, animate=False, immediate=True)
            await pilot.pause()
            for bar in bars:
                region = bar.size.region
                assert cells(bar.render_lines(region)) == cells(textual_bar(bar, region))
        bar = bars[0]
        bar.mouse_over = True  # hover colours
        await pilot.pause()
        crop = Region(0, 2, bar.size.width, 4)
        assert cells(bar.render_lines(crop)) == cells(textual_bar(bar, crop))


async def test_text_lines_show_text_as_given_and_wrap_like_a_static():
    long = "a message long enough to wrap onto the next line of a narrow status bar " * 2
    ours, theirs = TextLines(id="ours"), Static(id="theirs")
    async with TableApp(ours, theirs).run_test(size=(50, 10)) as pilot:
        for text in (Text("[bold]not markup[/bold] · ") + Text("green", style="green"), Text(long)):
            ours.set_text(text)
            theirs.update(text)
            await pilot.pause()
            assert ours.size.height == theirs.size.height
            region = Region(0, 0, ours.size.width, ours.size.height)
            mine = [line.text.rstrip() for line in ours.render_lines(region)]
            assert mine == [line.text.rstrip() for line in theirs.render_lines(region)]
            assert len(mine) == (1 if "markup" in text.plain else 3)
        assert mine[0].startswith("a message long")
        ours.set_text("[bold]not markup[/bold]")
        await pilot.pause()
        assert ours.render_lines(Region(0, 0, 50, 1))[0].text.rstrip() == "[bold]not markup[/bold]"


def test_an_exit_pin_sees_an_adopted_process_exit():
    # not our child: the shell that started it has exited, as with a worker adopted after a restart
    shell = subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    pid = int(shell.stdout.strip())
    try:
        ident = ProcIdentity.of(pid)
        assert ident is not None
        pin = ExitFd.pin(ident)
        assert pin is not None and pin.alive()
        stranger = ExitFd.pin(ProcIdentity(pid, ident.create_time - 100, ident.cmdline))
        assert stranger is not None and not stranger.alive()  # the same pid, another process's identity
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while pin.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pin.alive() and not pin.alive()  # and stays so
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _screen(name: str) -> str:
    return tmux(name, "capture-pane", "-p", "-t", name).stdout


def _until(cond, timeout: float) -> float:
    """Seconds until cond() held; fails after timeout."""
    start = time.monotonic()
    while not cond():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.02)
    return time.monotonic() - start


def _help_opens_and_closes(name: str) -> float:
    """Open the help screen with ?, close it with a lone Escape; returns how long the Escape took."""
    tmux(name, "send-keys", "-t", name, "?", check=True)
    _until(lambda: "cycle panes" in _screen(name), 5)
    tmux(name, "send-keys", "-t", name, "Escape", check=True)
    return _until(lambda: "cycle panes" not in _screen(name), 5)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_in_a_real_terminal_keys_escape_and_quit_take_effect_at_once(home):
    """Keys arrive, a lone Escape is told apart from an escape sequence on the parser's tick, and q
    quits at once."""
    with app_in_tmux(home) as (name, _):
        assert _help_opens_and_closes(name) < 1.0
        tmux(name, "send-keys", "-t", name, "q", check=True)
        gone = lambda: tmux(name, "has-session", "-t", name).returncode != 0  # noqa: E731
        assert _until(gone, 10) < 3.0
