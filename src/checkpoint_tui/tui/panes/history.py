"""The raw Temporal event history of the viewed run, appended incrementally."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.snapshot import HistoryEvent
from checkpoint_tui.tui.panes.keyed_table import KeyedTable

COLUMNS = [("id", "id"), ("time", "time"), ("event", "event"), ("attrs", "attributes")]


class HistoryPane(KeyedTable):
    def __init__(self) -> None:
        super().__init__(COLUMNS, id="history")
        self.border_title = "temporal history"

    def apply(self, events: list[HistoryEvent]) -> None:
        self.sync(((str(ev.event_id), _cells(ev)) for ev in events), follow=True)
        self.border_title = f"temporal history · {self.row_count} events"


def _cells(ev: HistoryEvent) -> tuple:
    style = "bold red" if "FAILED" in ev.name or "TIMED_OUT" in ev.name else ""
    if ev.name.startswith("WORKFLOW_EXECUTION_COMPLETED"):
        style = "bold green"
    clock = time.strftime("%H:%M:%S", time.localtime(ev.time)) + f".{int((ev.time % 1) * 1000):03d}"
    return (str(ev.event_id), clock, Text(ev.name, style=style), Text(ev.attrs))
