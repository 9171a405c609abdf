"""Effects ledger: one row per effect id; the title carries the duplicates figure (computed by SQL).

Ids are shown without the viewed run's workflow id (`7:email` for `run-…:7:email`): it is the same on
every row, and at 80 columns it was most of the row. The inspector shows each id in full."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.ledger.rows import EffectRow
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo

# The claims (what the ledger decided: applied, skipped, recovered) come right after the id: they are the
# proof, and a narrow pane cuts from the right.
COLUMNS = [
    ("id", "effect"),
    ("outcome", "claims"),
    ("attempt", "att"),
    ("claimed", "claimed"),
    ("applied", "applied"),
    ("kind", "kind"),
]
OUTCOME_STYLE = {"applied": "green", "skipped": "cyan", "recovered": "bold yellow", "interrupted": "red"}


class LedgerPane(KeyedTable):
    TITLE = "ledger"

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="ledger")
        self.info = PaneInfo(id="ledger-info", lines=2)

    def apply(self, snap: Snapshot) -> None:
        run = snap.run_id or ""  # the same run until reset(): rows made for it stay right
        self.sync_records(((e.id, e) for e in snap.effects), lambda e: _cells(e, run), follow=True)
        self.info.show(lambda: info_text(snap))
        bad = snap.duplicates != 0 or snap.outbox_duplicates != 0
        if self.parent is not None:
            self.parent.set_class(bad, "dup-bad")
            self.parent.set_class(not bad, "dup-ok")


def info_text(snap: Snapshot) -> Text:
    """`N rows · duplicates D` (D = COUNT(*) - COUNT(DISTINCT id), by SQL), the outbox; then the claims:
    `applied A · skipped S · recovered R · interrupted I`."""
    c = snap.outcome_counts
    bad = snap.duplicates != 0 or snap.outbox_duplicates != 0
    t = Text(f"{snap.ledger_rows} rows · ")
    t.append(f"duplicates {snap.duplicates}", style="bold red" if bad else "bold green")
    if snap.outbox:  # our loop's outbox file; a user's workflow has its own outputs
        t.append(f" · outbox {snap.outbox_lines} (repeated {snap.outbox_duplicates})\n")
    else:
        t.append(" · through the effects library\n")
    t.append(  # the claims' outcomes, short enough for a half-width pane at 120 columns
        f"applied {c.get('applied', 0)} · skipped {c.get('skipped', 0)} · recovered "
        f"{c.get('recovered', 0)} · interrupted {c.get('interrupted', 0)}"
    )
    return t


def short_id(effect_id: str, workflow_id: str) -> str:
    """An effect id without the run's workflow id (and Temporal run id), for a row of that run:
    `run-…:7:email` → `7:email`; `act:<wf>:<run>:<activity>:<kind>` → `act:<activity>:<kind>`;
    `<framework>:<wf>:<call>` → `<framework>:<call>`. Any other id is shown whole."""
    if not workflow_id:
        return effect_id
    if effect_id.startswith(workflow_id + ":"):
        return effect_id[len(workflow_id) + 1 :]
    parts = effect_id.split(":")
    if len(parts) == 5 and parts[0] == "act" and parts[1] == workflow_id:
        return f"act:{parts[3]}:{parts[4]}"
    if len(parts) == 3 and parts[1] == workflow_id:
        return f"{parts[0]}:{parts[2]}"
    return effect_id


def _clock(ts: float | None) -> str:
    if ts is None:
        return "—"
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def _cells(e: EffectRow, workflow_id: str = "") -> tuple:
    outcomes = Text()
    for i, o in enumerate(e.outcomes.split(",") if e.outcomes else []):
        if i:
            outcomes.append(",")
        outcomes.append(o, style=OUTCOME_STYLE.get(o, ""))
    shown = Text(short_id(e.id, workflow_id))  # untrusted text: a Text, never markup
    return (shown, outcomes, str(e.attempt), _clock(e.claimed_at), _clock(e.applied_at), e.kind)
