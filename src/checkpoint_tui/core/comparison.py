"""The latest naive-vs-durable comparison (proof/measure/compare.py runs one), its counts computed from the
outbox files and the ledger each time it is read."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.artifacts import outbox_counts, outbox_path
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class Side:
    run_id: str
    emails: int  # outbox lines
    repeated: int  # outbox lines beyond the first per email
    notes_repeated: int
    ledger_duplicates: int | None  # None: the naive loop has no ledger


@dataclass(frozen=True)
class Comparison:
    steps: int
    kill_step: int
    naive: Side
    durable: Side


def read_comparison(settings: Settings) -> Comparison | None:
    """The latest comparison, its counts computed now from the files and SQLite."""
    row = queries.latest_comparison(connect(settings.ledger))
    if row is None:
        return None
    return Comparison(
        row.steps, row.kill_step, _side(settings, row.naive_run, False), _side(settings, row.durable_run, True)
    )


def _side(settings: Settings, run_id: str, ledger: bool) -> Side:
    conn = connect(settings.ledger)
    lines, repeated = outbox_counts(outbox_path(settings.artifacts_dir, run_id))
    notes = queries.note_totals(conn, run_id).duplicates
    dup = queries.effect_totals(conn, run_id).duplicates if ledger else None
    return Side(run_id, lines, repeated, notes, dup)
