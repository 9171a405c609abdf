"""Effects ledger: one row per effect id; the title carries the duplicates figure (computed by SQL)."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.app.view import Snapshot
from checkpoint_tui.ledger.rows import EffectRow
from checkpoint_tui.tui.panes.keyed_table import KeyedTable

COLUMNS = [
    ("id", "effect id"), ("step", "step"), ("kind", "kind"), ("attempt", "att"), ("outcome", "claims"),
    ("claimed", "claimed"), ("applied", "applied"),
]  # fmt: skip
OUTCOME_STYLE = {"applied": "green", "skipped": "cyan", "recovered": "bold yellow", "interrupted": "red"}


class LedgerPane(KeyedTable):
    def __init__(self) -> None:
        super().__init__(COLUMNS, id="ledger")
        self.border_title = "ledger"

    def apply(self, snap: Snapshot) -> None:
        self.sync((e.id, _cells(e)) for e in snap.effects)
        c = snap.outcome_counts
        self.set_titles(
            f"ledger · {snap.ledger_rows} rows · duplicates {snap.duplicates}",
            f"applied {c.get('applied', 0)} · skipped {c.get('skipped', 0)} · recovered {c.get('recovered', 0)}"
            f" · interrupted {c.get('interrupted', 0)}"
            f" · outbox {snap.outbox_lines} (repeated {snap.outbox_duplicates})",
        )
        self.set_class(snap.duplicates != 0 or snap.outbox_duplicates != 0, "dup-bad")
        self.set_class(snap.duplicates == 0 and snap.outbox_duplicates == 0, "dup-ok")


def _clock(ts: float | None) -> str:
    if ts is None:
        return "—"
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def _cells(e: EffectRow) -> tuple:
    outcomes = Text()
    for i, o in enumerate(e.outcomes.split(",") if e.outcomes else []):
        if i:
            outcomes.append(",")
        outcomes.append(o, style=OUTCOME_STYLE.get(o, ""))
    return (Text(e.id), str(e.step), e.kind, str(e.attempt), outcomes, _clock(e.claimed_at), _clock(e.applied_at))
