"""Counters of what one refresh of the app costs: ledger statements and rows read, Temporal requests.
The TUI bench prints them per tick, and a test checks they do not grow with the run's length."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.ledger.backend import Ledger


@dataclass
class TickStats:
    sql: int = 0  # statements sent to the ledger
    rows: int = 0  # rows read back
    temporal: int = 0  # requests sent to Temporal


class CountingLedger:
    """A ledger that counts what goes through it; everything else is the wrapped ledger's."""

    def __init__(self, ledger: Ledger, stats: TickStats) -> None:
        self._ledger = ledger
        self._stats = stats

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _CountingCursor:
        self._stats.sql += 1
        return _CountingCursor(self._ledger.execute(sql, params), self._stats)

    def data_version(self) -> object:
        self._stats.sql += 1
        return self._ledger.data_version()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


class _CountingCursor:
    def __init__(self, cursor: Any, stats: TickStats) -> None:
        self._cursor = cursor
        self._stats = stats
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._stats.rows += row is not None
        return row

    def fetchall(self) -> list[Any]:
        rows = self._cursor.fetchall()
        self._stats.rows += len(rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._stats.rows += 1
            yield row
