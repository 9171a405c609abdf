"""Effects ledger: one row per effect id; the title carries the duplicates figure (computed by SQL)."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.app.view import Snapshot
from checkpoint_tui.ledger.rows import EffectRow
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo

COLUMNS = [
    ("id", "effect id"), ("step", "step"), ("kind", "kind"), ("attempt", "att"), ("outcome", "claims"),
    ("claimed", "claimed"), ("applied", "applied"),
]  # fmt: skip
OUTCOME_STYLE = {"applied": "green", "skipped": "cyan", "recovered": "bold yellow", "interrupted": "red"}


class LedgerPane(KeyedTable):
    TITLE = "ledger"

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="ledger")
        self.info = PaneInfo(id="ledger-info", lines=2)

    def apply(self, snap: Snapshot) -> None:
        self.sync_records(((e.id, e) for e in snap.effects), _cells, follow=True)  # the live step, unless moved away
        self.info.show(lambda: info_text(snap))
        bad = snap.duplicates != 0 or snap.outbox_duplicates != 0
        if self.parent is not None:
            self.parent.set_class(bad, "dup-bad")
            self.parent.set_class(not bad, "dup-ok")


def info_text(snap: Snapshot) -> Text:
    """`N rows · duplicates D` (D = COUNT(*) - COUNT(DISTINCT id), by SQL), the outbox, the claims."""
    c = snap.outcome_counts
    bad = snap.duplicates != 0 or snap.outbox_duplicates != 0
    t = Text(f"{snap.ledger_rows} rows · ")
    t.append(f"duplicates {snap.duplicates}", style="bold red" if bad else "bold green")
    if snap.unit == "step":  # our loop's outbox file; a user's workflow has its own outputs
        t.append(f" · outbox {snap.outbox_lines} lines (repeated {snap.outbox_duplicates})\n")
    else:
        t.append(" · through the effects library\n")
    t.append(
        f"claims: applied {c.get('applied', 0)} · skipped {c.get('skipped', 0)} · recovered "
        f"{c.get('recovered', 0)} · interrupted {c.get('interrupted', 0)}"
    )
    return t


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
