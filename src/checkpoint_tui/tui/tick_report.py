"""What one refresh of the app cost, for bench/tui_tick.py: time to build and apply the View, ledger
statements and rows, Temporal requests, and lines our panes painted since the last refresh."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from checkpoint_tui.core.tick_stats import TickStats
from checkpoint_tui.tui.panes.keyed_table import KeyedTable


@dataclass(frozen=True)
class TickReport:
    at: float
    poll_s: float
    apply_s: float
    sql: int
    rows: int
    temporal: int
    lines: int  # lines our tables painted since the previous report (the compositor asks only for dirty ones)

    @classmethod
    def of(cls, poll_s: float, apply_s: float, stats: TickStats) -> TickReport:
        return cls(time.time(), poll_s, apply_s, stats.sql, stats.rows, stats.temporal, KeyedTable.take_lines_painted())


class StatsFile:
    """Appends one JSON line per refresh (`checkpoint-tui --stats PATH`): the bench reads it while the app
    runs in a real terminal."""

    def __init__(self, path: Path) -> None:
        # checked by the parser (no link, no directory); a link planted since is refused, not followed
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._fh = os.fdopen(fd, "a", buffering=1)  # open for the app's lifetime, line-buffered

    def __call__(self, report: TickReport) -> None:
        self._fh.write(json.dumps(asdict(report)) + "\n")
