"""The raw Temporal event history of the viewed run, appended incrementally."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.snapshot import HistoryEvent
from checkpoint_tui.tui.panes.keyed_table import KeyedTable

COLUMNS = [("id", "id"), ("time", "time"), ("event", "event"), ("attrs", "attributes")]
MAX_ROWS = 2000  # the newest events; a 1,000-step run has ~28k, which a table should not hold


class HistoryPane(KeyedTable):
    def __init__(self) -> None:
        super().__init__(COLUMNS, id="history")
        self.border_title = "temporal history"
        self.seen = 0  # events delivered for the viewed run (the table keeps the newest MAX_ROWS)

    def apply(self, events: list[HistoryEvent]) -> None:
        if not events:
            return
        if len(events) >= MAX_ROWS // 2:
            super().reset()  # catching up: rebuilding is cheaper than removing row by row
        self.seen += len(events)
        self.sync(((ev.key, _cells(ev)) for ev in events[-MAX_ROWS:]), follow=True)
        excess = self.row_count - MAX_ROWS
        if excess > 0:
            for key in list(self.rows)[:excess]:
                self.remove_row(key)
                self._shown.pop(key.value, None)
        shown = f"last {self.row_count} of {self.seen}" if self.row_count < self.seen else str(self.seen)
        segments = f" · {events[-1].segment + 1} executions (continue-as-new)" if events[-1].segment else ""
        self.set_titles(f"temporal history · {shown} events{segments}")

    def reset(self) -> None:
        """A different run: forget the rows and the count."""
        super().reset()
        self.seen = 0


def _cells(ev: HistoryEvent) -> tuple:
    style = "bold red" if "FAILED" in ev.name or "TIMED_OUT" in ev.name else ""
    if ev.name.startswith("WORKFLOW_EXECUTION_COMPLETED"):
        style = "bold green"
    clock = time.strftime("%H:%M:%S", time.localtime(ev.time)) + f".{int((ev.time % 1) * 1000):03d}"
    ident = str(ev.event_id) if ev.segment == 0 else f"{ev.segment}/{ev.event_id}"
    return (ident, clock, Text(ev.name, style=style), Text(ev.attrs))
