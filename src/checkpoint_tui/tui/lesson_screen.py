"""The step-through lesson view (`v`): the naive loop and the durable run side by side, each with Next
step, Kill and Restart and finish (buttons and keys), its emails-sent counter re-read from its
outbox file on every refresh, and the durable ledger's duplicates. The lesson itself (core/lesson.py)
runs on its own thread; this screen only awaits it and shows what it reads back."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Footer, Static

from checkpoint_tui.core.lesson import LessonView
from checkpoint_tui.core.lesson_sides import SideView
from checkpoint_tui.tui.screens import Dialog

REFRESH_S = 0.5
INTRO = (
    "The same task, two ways. Do the same thing to both: Next step until an email goes out, Kill, then "
    "Restart and finish, and watch the emails. Every count is re-read from the outbox files and the ledger "
    "each refresh; the kills are real SIGKILLs."
)
TITLES = {
    "naive": ("naive loop", "progress lives in the process's memory"),
    "durable": ("durable run", "progress lives in Temporal's history and the ledger"),
}
KEYS = {"naive": ("n", "k", "r"), "durable": ("N", "K", "R")}


class LessonScreen(Dialog[None]):
    BINDINGS = [
        Binding("n", "act('naive', 'next_step')", "Naive: next", id="naive-next"),
        Binding("k", "act('naive', 'kill')", "Naive: kill", id="naive-kill"),
        Binding("r", "act('naive', 'finish')", "Naive: restart", id="naive-finish"),
        Binding("N", "act('durable', 'next_step')", "Durable: next", id="durable-next"),
        Binding("K", "act('durable', 'kill')", "Durable: kill", id="durable-kill"),
        Binding("R", "act('durable', 'finish')", "Durable: restart", id="durable-finish"),
        Binding("a", "automatic", "Automatic", id="automatic-comparison", tooltip="The one-shot comparison"),
        Binding("o", "start_over", "Start over", id="start-over"),
        Binding("escape,q,v", "dismiss", "Close", id="close-lesson"),
    ]

    def __init__(self, lesson, automatic: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.lesson = lesson
        self.automatic = automatic  # opens the one-shot comparison (the app's ComparisonScreen)
        self.view: LessonView | None = None
        self.message = "press n / N for the next step of each side"
        self._refreshing = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="lesson"):
            yield Static(INTRO, id="lesson-intro")
            with Horizontal(id="lesson-columns"):
                for side in ("naive", "durable"):
                    next_key, kill_key, finish_key = KEYS[side]
                    with Vertical(classes="lesson-col", id=f"{side}-col"):
                        yield Static(Text(f"{TITLES[side][0]}: reading…"), id=f"{side}-body")
                        with Horizontal(classes="lesson-buttons"):
                            yield Button(f"Next step ({next_key})", id=f"{side}-next_step")
                            yield Button(f"Kill ({kill_key})", id=f"{side}-kill", variant="error")
                            yield Button(f"Restart and finish ({finish_key})", id=f"{side}-finish", variant="primary")
            yield Static(Text(self.message), id="lesson-message")
            with Horizontal(classes="lesson-buttons"):
                yield Button("Automatic comparison (a)", id="automatic")
                yield Button("Start over (o)", id="start-over")
                yield Button("Close", id="close")
        yield Footer()

    async def on_mount(self) -> None:
        await self.refresh_view()
        self.set_interval(REFRESH_S, self.refresh_view)

    async def refresh_view(self) -> None:
        if self._refreshing:  # a refresh still waiting on the lesson's thread: never two at once
            return
        self._refreshing = True
        try:
            self.show(await self.lesson.view())
        except Exception as err:  # the ledger or Temporal away: say so, keep refreshing
            self.say(f"could not read the lesson's runs: {type(err).__name__}: {err}")
        finally:
            self._refreshing = False

    def show(self, view: LessonView) -> None:
        self.view = view
        for side in ("naive", "durable"):
            data: SideView = getattr(view, side)
            for body in self.query(f"#{side}-body").results(Static):
                body.update(render_side(side, data, view.steps))
            for button in self.query(f"#{side}-col Button").results(Button):
                button.disabled = data.busy and not (button.id or "").endswith("-kill")  # a kill lands mid-step too

    def say(self, message: str) -> None:
        self.message = message
        for line in self.query("#lesson-message").results(Static):
            line.update(Text(message))  # it may quote an error: never markup

    def action_act(self, side: str, action: str) -> None:
        self.run_worker(self._act(side, action), group=f"lesson-{side}", exit_on_error=False)

    async def _act(self, side: str, action: str) -> None:
        self.say(f"{side}: {action.replace('_', ' ')}…")
        try:
            self.say(await self.lesson.act(side, action))
        except Exception as err:
            self.say(f"{side}: {action.replace('_', ' ')} failed: {err}")
        await self.refresh_view()

    @on(Button.Pressed, ".lesson-col Button")
    def pressed(self, event: Button.Pressed) -> None:
        side, action = (event.button.id or "").split("-", 1)
        self.action_act(side, action)

    def action_automatic(self) -> None:
        if self.automatic is not None:
            self.automatic()

    @on(Button.Pressed, "#automatic")
    def automatic_pressed(self) -> None:
        self.action_automatic()

    def action_start_over(self) -> None:
        self.run_worker(self._start_over(), group="lesson-reset", exit_on_error=False)

    async def _start_over(self) -> None:
        try:
            self.say(await self.lesson.start_over())
        except Exception as err:
            self.say(f"could not start over: {err}")
        await self.refresh_view()

    @on(Button.Pressed, "#start-over")
    def start_over_pressed(self) -> None:
        self.action_start_over()

    @on(Button.Pressed, "#close")
    def close(self) -> None:
        self.dismiss(None)


def render_side(side: str, s: SideView, steps: int) -> Text:
    """One column as plain Text (run ids and errors are never markup)."""
    title, where = TITLES[side]
    t = Text()
    t.append(title.upper(), style="bold")
    t.append(f" · {where}\n", style="grey62")
    t.append(f"run      {s.run_id or '— (starts on the first Next step)'}\n")
    t.append(f"process  {s.process}\n")
    t.append(f"state    {s.state}\n\n")
    t.append("emails sent ", style="bold")
    bad = s.repeated > 0
    t.append(f"{s.emails}", style="bold red" if bad else "bold green")
    t.append(f"  (outbox file; one per step would be {steps} · ", style="grey62")
    t.append(f"sent twice {s.repeated}", style="bold red" if bad else "grey62")
    t.append(")\n", style="grey62")
    if s.duplicates is None:
        t.append("ledger      none: nothing records what was already done\n", style="grey62")
    else:
        t.append("ledger duplicates ", style="bold")
        t.append(f"{s.duplicates}", style="bold red" if s.duplicates else "bold green")
        t.append("  (COUNT(*) − COUNT(DISTINCT id) of its effects)\n", style="grey62")
    t.append("\n")
    for line in s.log:
        t.append(f" · {line}\n", style="grey70")
    return t
