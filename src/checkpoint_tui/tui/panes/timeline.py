"""Timeline: one row per step, keyed by step number. Enter (or a click) on a row opens the step
inspector. The running step's row also shows its in-flight activity as Temporal last described it,
with the age of its last heartbeat (red once the worker has gone silent)."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message

from checkpoint_tui.core.pending_activity import PendingActivity
from checkpoint_tui.core.view import RunCounts, Snapshot
from checkpoint_tui.ledger.rows import StepRow
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo

# The worker pid, the duration (a silent worker's heartbeat age) and the mark ("⚑ resumed here") come
# before what the step did: they are the proof a kill was survived, and a long label
# (`tool · send_email_guarded · call 7e3906…`) or a long heartbeat note must not push them out of a
# half-width pane.
COLUMNS = [
    ("step", "step"),
    ("status", "status"),
    ("attempt", "att"),
    ("pid", "worker pid"),
    ("duration", "dur"),
    ("mark", ""),
    ("provider", "provider"),
    ("tokens", "tokens"),
    ("cost", "cost $"),
]
STATUS_STYLE = {"completed": "green", "running": "yellow", "failed": "bold red"}
# Terminal cells a name may take in a cell: a workflow names its activities, and a long (or wide) name
# in the mark sized its column past a half-width pane and took the names column off screen (#51).
NAME_CELLS, NOTE_NAME_CELLS = 40, 20


def cut(text: str, cells: int) -> str:
    """`text` in at most `cells` terminal cells (wide characters count twice), `…` where it was cut."""
    t = Text(text)
    t.truncate(cells, overflow="ellipsis")
    return t.plain


class TimelinePane(KeyedTable):
    TITLE = "timeline"
    BINDINGS = [Binding("enter", "inspect", "Inspect", id="inspect-step", tooltip="The step in full")]

    class Inspect(Message):
        """The user asked for one step in full."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="timeline")
        self.info = PaneInfo(id="timeline-info")
        self._live: tuple[StepRow, bool, bool] | None = None  # the running step's row (and its marks)
        self.resumed: set[int] = set()  # every resumed step of the run (a snapshot names those it changed)

    def apply(self, snap: Snapshot, pending: PendingActivity | None = None, counts: RunCounts | None = None) -> None:
        resumed, truncated = set(snap.resumed_steps), set(snap.truncated_steps)
        self.resumed.difference_update(s.step for s in snap.steps if s.step not in resumed)
        self.resumed |= resumed
        rows: dict[str, tuple[StepRow, bool, bool, PendingActivity | None]] = {
            str(s.step): (s, s.step in resumed, s.step in truncated, None) for s in snap.steps
        }
        for s in snap.steps:  # rows come when they change: the newest running one is the live step
            if s.status == "running" and (self._live is None or s.step >= self._live[0].step):
                self._live = (s, s.step in resumed, s.step in truncated)
            elif self._live is not None and s.step == self._live[0].step:
                self._live = None
        if self._live is not None:  # its heartbeat cell; sync() repaints it only when the text changed
            live, was_resumed, was_truncated = self._live
            rows[str(live.step)] = (live, was_resumed, was_truncated, pending)
        self.sync_records(rows.items(), lambda record: _cells(*record), follow=True)
        self.info.show(lambda: info_text(snap, self.resumed, counts))

    def reset(self) -> None:
        super().reset()
        self._live = None
        self.resumed.clear()

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


def info_text(snap: Snapshot, resumed_steps: set[int], counts: RunCounts | None = None) -> Text:
    """`8/12 steps completed · ⚑ resumed at 4`: the resumed steps are named here too, so that the proof a
    kill was survived stays on screen when the pane is too short to hold their rows. Once a user's
    workflow run is over, its audit's counts after the first figure (`counts_text`)."""
    if not snap.run_id:
        return Text("no run")
    t = Text(f"{snap.completed_steps}/{snap.total_steps} {snap.units} completed")
    if counts is not None:
        t.append(" · ")
        t.append_text(counts_text(counts))
    resumed = sorted(resumed_steps)
    if resumed:
        shown = ", ".join(map(str, resumed[:6])) + (f" and {len(resumed) - 6} more" if len(resumed) > 6 else "")
        t.append(f" · ⚑ resumed at {shown}", style="bold magenta")
    return t


def counts_text(c: RunCounts) -> Text:
    """`LOST 0 · DUPLICATED 0 · AT RISK 0 · LOST WORK 1`: the counts of the audit the completion sentence
    came from; LOST WORK only when the audit read the run's history."""
    t = Text()
    figures = [("LOST", c.lost), ("DUPLICATED", c.duplicated), ("AT RISK", c.at_risk), ("LOST WORK", c.lost_work)]
    for name, n in figures:
        if n is not None:
            t.append(" · " if t else "")
            t.append(f"{name} {n}", style="bold red" if n else "green")
    return t


def _cells(s: StepRow, resumed: bool, truncated: bool = False, pending: PendingActivity | None = None) -> tuple:
    duration = f"{s.duration_s:.2f}s" if s.duration_s is not None else ""
    mark = Text()
    if resumed:
        mark.append("⚑ resumed here", style="bold magenta")
    if truncated:
        mark.append((" " if resumed else "") + "✂ truncated", style="bold yellow")
    note = heartbeat_text(pending) if pending is not None else None
    if note is not None and note.plain:
        mark.append(" " if mark else "")
        mark.append_text(note)
    return (
        str(s.step),
        Text(s.status, style=STATUS_STYLE.get(s.status, "")),
        str(s.attempt) if s.attempt > 1 else "1",
        s.worker_label,
        heartbeat_age(pending) if pending is not None else duration,
        mark if mark else "",
        Text(cut(s.provider or "", NAME_CELLS)),
        str(s.tokens or ""),
        f"{s.cost_usd:.4f}" if s.cost_usd else "0",
    )


def heartbeat_age(p: PendingActivity) -> Text:
    """The running step's `dur` cell: how long since Temporal last heard from its activity (`♥1.2s`),
    red once that is longer than a live worker ever leaves it; `⧗` while a retry waits for a worker."""
    if p.state == "SCHEDULED" or p.age_s is None:
        return Text("⧗", style="bold yellow")
    age = f"{p.age_s:.1f}" if p.age_s < 10 else f"{p.age_s:.0f}"
    return Text(f"♥{age}s", style="bold red" if p.silent else "grey62")


def heartbeat_text(p: PendingActivity) -> Text:
    """The mark beside a silent worker's age: `silent · llm attempt 1 on w-964d45 · no heartbeat for 2.3 s`
    (`in 2.3 s` when the attempt never beat); for a retry waiting for a worker, `llm attempt 2 waiting
    for a worker`; nothing while the worker heartbeats."""
    worker, activity = cut((p.worker or "?").split("@", 1)[0], NOTE_NAME_CELLS), cut(p.activity, NOTE_NAME_CELLS)
    if p.state == "SCHEDULED":
        return Text(f"{activity} attempt {p.attempt} waiting for a worker", style="bold yellow")
    if p.state != "STARTED" or p.age_s is None:
        return Text(f"{activity} attempt {p.attempt} {p.state.lower().replace('_', ' ')}", style="yellow")
    if p.silent:
        quiet = f"no heartbeat for {p.age_s:.1f} s" if p.since_heartbeat else f"no heartbeat in {p.age_s:.1f} s"
        return Text(f"silent · {activity} attempt {p.attempt} on {worker} · {quiet}", style="bold red")
    return Text()
