"""The status bar: run, workflow status, the pill, worker pids (a fleet's live workers), the task queues'
backlog, progress, Temporal address and namespace, a shared ledger, provider, and the last message (the
run's completion sentence once it ended).

Two lines of facts and a message, each one line fitted to the width: cut (with an ellipsis) rather than
wrapped, so a narrow terminal never pushes the message off and the panes keep their rows. Below
WIDE_COLUMNS the Temporal line goes and the progress bar is shorter."""

from __future__ import annotations

import time

from rich.text import Text
from textual.reactive import reactive

from checkpoint_tui.core.view import View
from checkpoint_tui.ops.state import SupervisorState
from checkpoint_tui.tui.panes.text_lines import TextLines

PILLS = (
    "starting",
    "idle",
    "running",
    "worker-dead",
    "respawning",
    "completed",
    "failed",
    "cancelled",
    "temporal-down",
    "stuck",
)
# supervisor states a pill shows as they are (the others show the run's state)
SUPERVISOR_PILLS = (SupervisorState.WORKER_DEAD, SupervisorState.RESPAWNING, SupervisorState.TEMPORAL_DOWN)
PILL_STYLE = {
    "running": "black on green",
    "completed": "black on bright_green",
    "worker-dead": "white on red",
    "respawning": "black on yellow",
    "failed": "white on dark_red",
    "idle": "black on grey70",
    "starting": "black on grey70",
    "temporal-down": "white on red",
    "cancelled": "black on grey50",
    "stuck": "white on dark_red",
}
BAR_WIDTH = 20
NARROW_BAR_WIDTH = 0  # below WIDE_COLUMNS `12/30` alone: the worker pid keeps its place
WIDE_COLUMNS = 110  # the app's breakpoint (app.py): below it, the narrow layout
COUNTS_EVERY_S = 1.0  # progress and counts repaint at most this often (see StatusBar.refresh_text)


def pill_for(view: View) -> str:
    status = view.snapshot.workflow_status
    if status == "COMPLETED":
        return "completed"
    if status == "CANCELED":
        return "cancelled"
    if status in ("FAILED", "TERMINATED", "TIMED_OUT"):
        return "failed"
    if view.stuck:
        return "stuck"
    if view.supervisor_state in SUPERVISOR_PILLS:
        return SupervisorState(view.supervisor_state).value
    if view.snapshot.run_id is None:
        return "idle"
    return "running" if view.worker_pid else "worker-dead"


class StatusBar(TextLines):
    pill: reactive[str] = reactive("starting")

    def __init__(self) -> None:
        super().__init__(id="status")
        self._view: View | None = None
        self.message = "starting: finding the dev server and the worker…"
        self._shown_text: Text | None = None
        self._shown_at = 0.0
        self.completion: str | None = None  # the viewed run's completion sentence, once it ended
        self.stuck: str | None = None  # the viewed run's workflow task keeps failing: what it says

    def show(self, view: View) -> None:
        self._view = view
        pill = pill_for(view)
        news = pill != self.pill or view.run_changed
        self.pill = pill
        if view.stuck != self.stuck:  # the run cannot go on: said once, as a completion is
            self.stuck, news = view.stuck, True
            if view.stuck:
                self.message = f"no progress: {view.stuck}"
        if view.completion != self.completion:  # said once when the run ends (or a finished run is opened)
            self.completion = view.completion
            news = True
            if view.completion:
                self.message = view.completion
        self.refresh_text(news)

    def set_pill(self, pill: str) -> None:
        self.pill = pill
        self.refresh_text()

    def say(self, message: str) -> None:
        self.message = message
        self.refresh_text()

    def refresh_text(self, news: bool = True) -> None:
        """Show the status now if `news` (a pill, a message, another run), else at most once every
        COUNTS_EVERY_S: progress alone changes every refresh of a live run, and each repaint of these
        lines costs more than the line that changed (the app calls show() on every refresh, so a
        held-back count is shown on a later one)."""
        now = time.monotonic()
        if not news and now - self._shown_at < COUNTS_EVERY_S:
            return  # held back (not even built): a later refresh shows it
        width = self.content_region.width or self.app.size.width
        text = render_status(self._view, self.pill, self.message, width)
        if text == self._shown_text:  # an unchanged update would still cost a repaint
            return
        self._shown_text, self._shown_at = text, now
        self.set_text(text)  # fixed height (app.tcss): a repaint, not a layout pass

    def on_resize(self) -> None:
        self.refresh_text()  # the lines are fitted to the width


def render_status(view: View | None, pill: str, message: str, width: int | None = None) -> Text:
    """The status lines, one line each; with `width`, each cut to it with an ellipsis (never wrapped: the
    status bar's height is fixed, app.tcss)."""
    wide = width is None or width >= WIDE_COLUMNS
    lines = [_run_line(view, pill, BAR_WIDTH if wide else NARROW_BAR_WIDTH)]
    if view is not None and wide:
        lines.append(_server_line(view))
    lines.append(Text(" " + " ".join(message.splitlines()), style="italic"))
    if width is not None:
        for line in lines:
            line.truncate(width, overflow="ellipsis")
    return Text("\n").join(lines)


def _run_line(view: View | None, pill: str, bar_width: int) -> Text:
    t = Text()
    t.append(f" {pill} ", style=PILL_STYLE.get(pill, ""))
    if view is None:
        return t
    snap = view.snapshot
    if snap.run_id:
        t.append(f"  {snap.run_id}", style="bold")
        t.append(f" · {snap.workflow_status or snap.run_status or '?'}")
        done, total = snap.completed_steps, snap.total_steps
        filled = int(bar_width * done / total) if total else 0
        t.append(f" · {done}/{total}")
        if bar_width:
            t.append(" ")
            t.append("█" * filled, style="green")
            t.append("░" * (bar_width - filled), style="grey50")
    else:
        t.append("  no runs yet — press n to start a run")
    if view.fleet:  # a user's fleet: its commands in the worker events pane, the sum here
        live, slots = sum(c.live for c in view.fleet), sum(c.slots for c in view.fleet)
        t.append(f" · fleet {live}/{slots} live", style="" if live == slots else "bold yellow")
    elif len(view.pool_pids) > 1:
        t.append(f" · workers {', '.join(map(str, view.pool_pids))}")
    else:
        t.append(f" · worker {view.worker_pid or '—'}")
    if view.spare_pid:
        t.append(f" (spare {view.spare_pid})", style="grey62")
    if view.backlog is not None:
        t.append(f" · backlog {view.backlog.total}", style="bold yellow" if view.backlog.total else "")
    if not view.owns_home:
        t.append(" · observing (another supervisor owns this home)", style="yellow")
    return t


def _server_line(view: View) -> Text:
    t = Text(f" temporal {view.address} ns {view.namespace}", style="grey70")
    if view.ui_url:
        t.append(f" · web ui {view.ui_url}", style="grey70")
    if view.ledger:
        t.append(f" · ledger {view.ledger}", style="grey70")
    snap = view.snapshot
    what = f"workflow {snap.workflow_type}" if snap.workflow_type else f"provider {snap.provider or 'offline'}"
    t.append(f" · {what}", style="grey70")
    if view.planned_faults:
        t.append(f" · faults: {', '.join(view.planned_faults)}", style="yellow")
    return t
