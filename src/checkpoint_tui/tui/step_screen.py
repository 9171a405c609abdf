"""The step inspector: one step of a run in full, read from the ledger when it opens (on the session's
ledger thread), with that step's Temporal history events from those the history pane holds. Works
for past runs and for steps another host ran; Escape closes it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.core.windows import classify
from checkpoint_tui.ledger.inspect_queries import StepDetail
from checkpoint_tui.ledger.rows import worker_label
from checkpoint_tui.tui.panes.history import Marker
from checkpoint_tui.tui.panes.ledger import OUTCOME_STYLE
from checkpoint_tui.tui.screens import Dialog

PAYLOAD_SHOWN = 400  # characters of each effect's payload (the ledger holds up to 16 KiB)
WINDOW_S = 0.05  # history events this close to the step's start and end count as the step's
HistorySource = Callable[[float, float], list[HistoryEvent]]
MarkerSource = Callable[[int], list[Marker]]


class StepScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Close", id="close-inspector")]

    def __init__(
        self, session, run_id: str, step: int, history: HistorySource | None = None, markers: MarkerSource | None = None
    ) -> None:
        super().__init__()
        self.session = session
        self.run_id = run_id
        self.step = step
        self.history = history
        self.markers = markers
        self.detail: StepDetail | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="inspector"):
            with VerticalScroll(id="step-scroll"):
                yield Static(Text(f"step {self.step} of {self.run_id}: reading the ledger…"), id="step-detail")
            with Horizontal():
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        self.load()

    @work(exit_on_error=False, group="inspector")
    async def load(self) -> None:
        body = self.query_one("#step-detail", Static)
        try:
            detail = await self.session.step_detail(self.run_id, self.step)
        except Exception as err:  # the ledger away: say so in the dialog
            body.update(Text(f"could not read step {self.step}: {type(err).__name__}: {err}"))
            return
        if detail is None:
            body.update(Text(f"step {self.step} of {self.run_id} has no row in the ledger"))
            return
        self.detail = detail
        events: list[HistoryEvent] = []
        s = detail.step
        if self.history is not None and s.started_at is not None:
            events = self.history(s.started_at - WINDOW_S, (s.ended_at or time.time()) + WINDOW_S)
        body.update(render_detail(detail, events, self.markers(self.step) if self.markers else []))

    @on(Button.Pressed, "#close")
    def close(self) -> None:
        self.dismiss(None)


def _clock(ts: float | None) -> str:
    if ts is None:
        return "—"
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def render_detail(d: StepDetail, events: list[HistoryEvent], markers: Sequence[Marker] = ()) -> Text:
    """Everything as plain Text: the thought, the payloads and the history come from the model and the
    network, never parsed as markup."""
    s = d.step
    t = Text()
    t.append(f"step {s.step} of {d.run_id}", style="bold")
    t.append(f" · {s.status} · attempt {s.attempt} · completed by worker {s.worker_label or '—'}")
    if s.started_pid and s.started_pid != s.worker_pid:
        t.append(f" (started by {s.started_pid})", style="magenta")
    duration = f" · {s.duration_s:.2f} s" if s.duration_s is not None else ""
    t.append(f" · provider {s.provider or '—'}{duration}\n")
    for marker in markers:  # the kill that interrupted this step, as the history pane marks it
        t.append("⚡ interrupted by a kill", style="bold red")
        window = classify(marker.kill, marker.before, d.claims) if marker.before else marker.window
        t.append(f" in the {window} window\n   ")
        t.append(marker.text + "\n", style="red")
    if d.truncated:
        t.append("✂ truncated: the model's answer was cut and repaired", style="bold yellow")
        t.append(f" (answer note: {d.answer_note})\n")
    t.append("\ndecision\n", style="bold underline")
    t.append(f"  action   {s.action or '—'}\n  thought  {s.thought or '—'}\n")
    db = next((e for e in d.effects if e.kind == "db"), None)
    if db is not None:  # "step N: <note text or expression = result>", built from the decision
        t.append(f"  outcome  {db.payload.split(': ', 1)[-1]}\n")
    t.append(f"  tool     result {s.tool_result if s.tool_result is not None else '— (no tool call)'}\n")
    t.append(f"  answer   {d.answer_note or '—'} · tokens {s.tokens or 0}\n")
    if s.error:
        t.append(f"  error    {s.error}\n", style="red")
    _effects(t, d)
    t.append("\nattempts (activity log)\n", style="bold underline")
    for a in d.attempts:
        t.append(f"  {_clock(a.started_at)}  {a.activity:<20} attempt {a.attempt}  worker {a.worker}\n")
    t.append(
        f"\ntemporal history in the step's window ({len(events)} events shown by the history pane)\n",
        style="bold underline",
    )
    for ev in events:
        t.append(f"  {ev.event_id:>6}  {_clock(ev.time)}  {ev.name:<27} ")
        t.append(f"{ev.attrs}\n")
    return t


def _effects(t: Text, d: StepDetail) -> None:
    t.append("\neffects (claims in order; payload as written)\n", style="bold underline")
    if not d.effects:
        t.append("  none claimed\n")
    for e in d.effects:
        t.append(f"  {e.kind:<5} ", style="bold")
        t.append(e.id)
        t.append(f" · claimed {_clock(e.claimed_at)} · applied {_clock(e.applied_at)}\n")
        for c in (c for c in d.claims if c.effect_id == e.id):
            t.append("        claim ")
            t.append(c.outcome, style=OUTCOME_STYLE.get(c.outcome, ""))
            t.append(f" · worker {worker_label(c.worker_pid, c.host)} · attempt {c.attempt}\n")
        payload = e.payload if len(e.payload) <= PAYLOAD_SHOWN else e.payload[:PAYLOAD_SHOWN] + "…"
        t.append("        payload ", style="grey62")
        t.append(payload.replace("\n", " ⏎ ").replace("\t", " ⇥ ") + "\n")
