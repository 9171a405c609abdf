"""Timeline: one row per step, keyed by step number."""

from __future__ import annotations

from rich.text import Text

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

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="timeline")
        self.info = PaneInfo(id="timeline-info")

    def apply(self, snap: Snapshot) -> None:
        resumed = set(snap.resumed_steps)
        self.sync(((str(s.step), _cells(s, s.step in resumed)) for s in snap.steps), follow=True)
        self.info.show(f"{snap.completed_steps}/{snap.total_steps} steps completed" if snap.run_id else "no run")


def _cells(s: StepRow, resumed: bool) -> tuple:
    duration = f"{s.duration_s:.2f}s" if s.duration_s is not None else ""
    return (
        str(s.step),
        Text(s.status, style=STATUS_STYLE.get(s.status, "")),
        str(s.attempt) if s.attempt > 1 else "1",
        Text(s.provider or ""),
        str(s.tokens or ""),
        f"{s.cost_usd:.4f}" if s.cost_usd else "0",
        duration,
        s.worker_label,
        Text("⚑ resumed here", style="bold magenta") if resumed else "",
    )
