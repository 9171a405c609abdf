"""Timeline: one row per step, keyed by step number. Enter (or a click) on a row opens the step
inspector."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message

from checkpoint_tui.app.view import Snapshot
from checkpoint_tui.ledger.rows import StepRow
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo

COLUMNS = [
    ("step", "step"), ("status", "status"), ("attempt", "att"), ("provider", "provider"), ("tokens", "tokens"),
    ("cost", "cost $"), ("duration", "dur"), ("pid", "worker pid"), ("mark", ""),
]  # fmt: skip
STATUS_STYLE = {"completed": "green", "running": "yellow", "failed": "bold red"}


class TimelinePane(KeyedTable):
    TITLE = "timeline"
    BINDINGS = [Binding("enter", "inspect", "Inspect step", id="inspect-step", tooltip="The step in full")]

    class Inspect(Message):
        """The user asked for one step in full."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="timeline")
        self.info = PaneInfo(id="timeline-info")

    def apply(self, snap: Snapshot) -> None:
        resumed, truncated = set(snap.resumed_steps), set(snap.truncated_steps)
        rows = ((str(s.step), _cells(s, s.step in resumed, s.step in truncated)) for s in snap.steps)
        self.sync(rows, follow=True)
        self.info.show(f"{snap.completed_steps}/{snap.total_steps} steps completed" if snap.run_id else "no run")

    def action_inspect(self) -> None:
        if 0 <= self.cursor_row < self.row_count:
            self.post_message(self.Inspect(int(self.row_keys()[self.cursor_row])))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = offset.y - self._top + self.scroll_offset.y
        if offset.y >= self._top and 0 <= row < self.row_count:
            self._move_cursor(row)
            self.action_inspect()


def _cells(s: StepRow, resumed: bool, truncated: bool = False) -> tuple:
    duration = f"{s.duration_s:.2f}s" if s.duration_s is not None else ""
    mark = Text()
    if resumed:
        mark.append("⚑ resumed here", style="bold magenta")
    if truncated:
        mark.append((" " if resumed else "") + "✂ truncated", style="bold yellow")
    return (
        str(s.step),
        Text(s.status, style=STATUS_STYLE.get(s.status, "")),
        str(s.attempt) if s.attempt > 1 else "1",
        Text(s.provider or ""),
        str(s.tokens or ""),
        f"{s.cost_usd:.4f}" if s.cost_usd else "0",
        duration,
        s.worker_label,
        mark if mark else "",
    )
