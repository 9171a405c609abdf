"""Modal screens: help, new run, fault menu, runs list."""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, ScreenResultType
from textual.widgets import Button, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from checkpoint_tui.core.runs import check_run_shape
from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.faults import FAULT_KINDS, parse_fault
from checkpoint_tui.ledger.rows import RunSummary
from checkpoint_tui.tui.panes.status import WIDE_COLUMNS


class Dialog(ModalScreen[ScreenResultType]):
    """A modal dialog (`#dialog` in app.tcss) with the app's breakpoint class from its first frame.
    Textual sets it on the screen's first resize, after a frame drawn in the wide style: at 80 columns
    a dialog would flash larger, and keys pressed meanwhile would meet it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        narrow = self.app.size.width < WIDE_COLUMNS
        self.set_class(narrow, "-narrow").set_class(not narrow, "-wide")


# Each key's line fits 75 columns: the help's text width in an 80-column terminal.
HELP = """\
[b]checkpoint-tui[/b] — a chaos lab for durable agent runs

  n        new run (asks for the step count; default 30)
  k        kill the worker: a real SIGKILL (--workers N: the live step's)
  m / M    history at the next / previous kill marker; enter: its step
  h        below 110 columns: history + worker events / timeline + ledger
  c        cancel the viewed run
  f        fault menu: transient, garble, crash_*, kill_at, freeze, stop_*
  r        runs list: switch the viewed run (past runs stay viewable)
  v        naive vs durable, step by step: n / N next step, k / K kill,
           r / R restart and finish (naive / durable); a: automatic
  x        chaos screen: seeded kills in run/chaos ticked off, then counts
  enter    timeline row (or click): the step inspector; escape closes it
  tab      cycle panes
  ? / F1   this help (↓ / end: the panes below)
  ctrl+p   command palette (the same actions)
  q        quit, leaving the worker and the dev server to the next start
  ctrl+q   quit and stop the worker and the dev server this home started

[b]Panes[/b]
[b]timeline[/b]: one row per step; ⚑ marks the first step finished by a different pid; host/pid \
when the step ran on another host of a shared ledger; ✂ marks a truncated model answer; ♥ in dur: \
the age of the running activity's last heartbeat (red: the worker is silent).
[b]ledger[/b]: effects, ids shown without the run's id (in full in the inspector); duplicates is \
COUNT(*) − COUNT(DISTINCT id), computed by SQL; the claims: applied / skipped / recovered / interrupted.
[b]temporal history[/b]: raw events, fetched incrementally; ── marks a kill.
[b]worker events[/b]: spawn / kill / promote / respawn / assist, with the observed signal.
Everything shown is read from the ledger (SQLite or PostgreSQL), the artifact files or Temporal on \
every refresh.
"""


class HelpScreen(Dialog[None]):
    """Every key and pane. Longer than a small terminal: the text scrolls (arrows, page keys, home /
    end) whichever of it and the Close button has the focus."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
        Binding("down", "scroll(1)", "Down", show=False),
        Binding("up", "scroll(-1)", "Up", show=False),
        Binding("pagedown", "scroll(10)", "Page down", show=False),
        Binding("pageup", "scroll(-10)", "Page up", show=False),
        Binding("end", "scroll_to_end(1)", "End", show=False),
        Binding("home", "scroll_to_end(0)", "Home", show=False),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="help"):
            with VerticalScroll(id="help-scroll", can_focus=False):
                yield Static(HELP, id="help-text")
            with Horizontal():
                yield Button("Close", id="close")

    def action_scroll(self, lines: int) -> None:
        self.query_one("#help-scroll").scroll_relative(y=lines, animate=False)

    def action_scroll_to_end(self, end: int) -> None:
        scroll = self.query_one("#help-scroll")
        scroll.scroll_to(y=scroll.max_scroll_y if end else 0, animate=False)

    @on(Button.Pressed, "#close")
    def close(self) -> None:
        self.dismiss(None)


class FormScreen(Dialog):
    """A small dialog: fields, an error line, OK and Cancel; subclasses yield fields and submit."""

    BINDINGS = [Binding("escape", "dismiss", "Cancel")]
    HEADING = ""
    OK = "OK"

    def fields(self) -> ComposeResult:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.HEADING)
            yield from self.fields()
            yield Label("", id="error")
            with Horizontal():
                yield Button(self.OK, variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def fail(self, message: str) -> None:
        self.query_one("#error", Label).update(Text(message))  # it quotes what the user typed: never markup

    @on(Button.Pressed, "#cancel")
    def cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def ok(self) -> None:
        self.submit()

    def submit(self) -> None:
        raise NotImplementedError


class NewRunScreen(FormScreen):
    HEADING, OK = "New run", "Start"

    def fields(self) -> ComposeResult:
        yield Label("steps")
        yield Input("30", id="steps", type="integer")
        yield Label("pace (scales timers and think time; 0 = none)")
        yield Input("1.0", id="pace", type="number")

    def submit(self) -> None:
        try:
            steps = int(self.query_one("#steps", Input).value)
            pace = float(self.query_one("#pace", Input).value)
            check_run_shape(steps, pace)  # the CLI's bounds: finite pace, 1..MAX_STEPS steps
        except ValueError:
            self.fail("steps must be a whole number and pace a number")
            return
        except UsageError as err:
            self.fail(str(err))
            return
        self.dismiss((steps, pace))


class FaultScreen(FormScreen):
    HEADING, OK = "Plan a fault", "Plan"

    def fields(self) -> ComposeResult:
        yield Select([(k, k) for k in FAULT_KINDS], value="kill_at", id="kind", allow_blank=False)
        yield Label("step")
        yield Input("3", id="step", type="integer")
        yield Label("count (transient) or effect kind file|db|email (crash_after_claim)")
        yield Input("", id="extra")
        yield Select([("current run", True), ("next run", False)], value=True, id="target", allow_blank=False)

    def submit(self) -> None:
        kind = self.query_one("#kind", Select).value
        step = self.query_one("#step", Input).value.strip()
        extra = self.query_one("#extra", Input).value.strip()
        text = f"{kind}:{step}" + (f":{extra}" if extra else "")
        try:
            fault = parse_fault(text)
        except ValueError as err:
            self.fail(str(err))
            return
        self.dismiss((fault, bool(self.query_one("#target", Select).value)))


class RunsScreen(Dialog[str | None]):
    BINDINGS = [Binding("escape", "dismiss", "Close")]

    def __init__(self, runs: list[RunSummary]) -> None:
        super().__init__()
        self.runs = runs

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            live = sum(r.status == "running" for r in self.runs)
            failed = sum(r.status not in ("running", "completed") for r in self.runs)
            yield Label(f"Runs ({len(self.runs)}: {live} live, {failed} not completed) — enter to view")
            yield OptionList(
                *[
                    Option(
                        Text(  # run ids come from the ledger: shown as plain text, never markup
                            f"{r.run_id}  {r.status:<9} {r.workflow_type or f'{r.done}/{r.total_steps}'}  "
                            f"{r.rows} rows · duplicates {r.duplicates}  "
                            f"{time.strftime('%H:%M:%S', time.localtime(r.created_at))}"
                        ),
                        id=r.run_id,
                    )
                    for r in self.runs
                ],
                id="runs",
            )

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ComparisonScreen(Dialog[None]):
    """Naive loop vs durable loop under the same kill; counts re-read from files and SQLite each second."""

    BINDINGS = [Binding("escape,q,v", "dismiss", "Close")]

    def __init__(self, session) -> None:
        super().__init__()
        self.session = session

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("", id="comparison")
            with Horizontal():
                yield Button("Run a comparison (6 steps, kill after step 3's email)", variant="primary", id="run")
                yield Button("Close", id="close")

    async def on_mount(self) -> None:
        await self.refresh_counts()
        self.set_interval(1.0, self.refresh_counts)

    async def refresh_counts(self) -> None:
        c = await self.session.comparison()
        if c is None:
            text = "No comparison yet. Run one: the same task in a naive in-memory loop and as a durable run,\n"
            text += "each SIGKILLed right after an email went out, then restarted."
        else:
            lines = [
                f"Same task ({c.steps} steps), same SIGKILL right after step {c.kill_step}'s email, then a restart",
                "",
            ]
            for name, side in (("naive loop", c.naive), ("durable run", c.durable)):
                ledger = (
                    "no ledger" if side.ledger_duplicates is None else f"ledger duplicates {side.ledger_duplicates}"
                )
                lines.append(
                    f"{name:<12} emails sent {side.emails:>3} · sent twice {side.repeated:>2} · "
                    f"notes repeated {side.notes_repeated:>2} · {ledger}"
                )
            text = "\n".join(lines)
        self.query_one("#comparison", Static).update(Text(text))

    @on(Button.Pressed, "#close")
    def close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#run")
    def run_comparison(self) -> None:
        self.query_one("#run", Button).disabled = True
        self.run_worker(self._run(), exclusive=True, exit_on_error=False)

    async def _run(self) -> None:
        try:
            await self.session.run_comparison()
        finally:
            self.query_one("#run", Button).disabled = False
            await self.refresh_counts()
