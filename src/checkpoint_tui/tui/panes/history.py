"""The raw Temporal event history of the viewed run, appended as it arrives.

One line per event, keyed by (execution, event id): a KeyedTable without header, cursor or stripes,
so each new line is rendered once and nothing else is (a DataTable re-rendered its visible rows after
every append; a RichLog resized itself with a layout pass of the whole screen on every write)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from checkpoint_tui.core.fleet_marks import marker_text, place_mark
from checkpoint_tui.core.kill_marker import place_kill
from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.core.windows import classify
from checkpoint_tui.ledger.inspect_queries import FleetEvent, KillEvent
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo


@dataclass(frozen=True)
class Marker:
    """A kill's marker line as placed: the kill, the line's text, the window it landed in."""

    kill: KillEvent
    text: str
    window: str  # from history alone (core/windows.classify without claim attempts)
    before: tuple[HistoryEvent, ...] = ()  # the events up to the kill: the inspector refines the window


MAX_ROWS = 2000  # the newest events; a 1,000-step run has ~28k
FLUSH_EVERY_S = 1.0
# A fleet event's marker line: a graceful stop is the point of a rollout, a fleet-down kills every worker
MARK_STYLE = {
    "sigterm": "bold yellow",
    "exit": "yellow",
    "chaos:fleet-down": "bold red",
    "chaos:deploy": "bold cyan",
    "chaos:dependency": "bold magenta",
}


class HistoryPane(KeyedTable):
    TITLE = "temporal history"
    DEFAULT_CSS = """
    HistoryPane { height: 1fr; }
    """
    # Below 110 columns `m` leaves the focus here: Enter goes on to the inspector.
    BINDINGS = [Binding("enter", "inspect", "Inspect", id="inspect-marker", tooltip="The step the kill on screen hit")]

    class Inspect(Message):
        """Enter: the step of the kill marker on screen (None: no marker in view, the timeline's row)."""

        def __init__(self, step: int | None) -> None:
            super().__init__()
            self.step = step

    def __init__(self, flush_every_s: float = FLUSH_EVERY_S) -> None:
        super().__init__(
            [("event", "")], header=False, pad=0, max_rows=MAX_ROWS, cursor=False, zebra=False, id="history"
        )
        self.info = PaneInfo(id="history-info")
        self.seen = 0  # events delivered for the viewed run
        self.names: list[str] = []  # event type names of the shown lines (tests and search)
        self.flush_every_s = flush_every_s
        self._pending: list[HistoryEvent] = []
        self._flushed = 0.0
        self.events: list[HistoryEvent] = []  # the shown events, oldest first (markers and the inspector)
        self._kills: dict[int, KillEvent] = {}  # kills waiting for the first event after them
        self.markers: dict[str, Marker] = {}  # placed marker lines by row key
        self._marks: dict[int, FleetEvent] = {}  # fleet events waiting for the first event after them
        self.fleet_markers: dict[str, str] = {}  # placed fleet marker lines by row key: their text
        self._marker_key: str | None = None  # the marker `m` / `M` last brought on screen

    def apply(
        self, events: list[HistoryEvent], kills: Iterable[KillEvent] = (), marks: Iterable[FleetEvent] = ()
    ) -> None:
        """Events arrive every refresh; they are shown at most once a `flush_every_s` (a live run writes
        dozens a second, and each batch scrolls the pane). A kill or a fleet event gets its marker line
        once an event after it is shown."""
        self._pending.extend(events)
        waiting = len(self._kills) + len(self._marks)
        self._kills.update((kill.id, kill) for kill in kills)
        self._marks.update((mark.id, mark) for mark in marks)
        new_kills = len(self._kills) + len(self._marks) > waiting
        now = time.monotonic()
        if not self._pending or now - self._flushed < self.flush_every_s:
            if new_kills and self.events:
                self._place_kills()
            return
        self._flushed = now
        events, self._pending = self._pending, []
        self.seen += len(events)
        new = events[-MAX_ROWS:]
        self.sync(((f"{ev.segment}/{ev.event_id}", (_line(ev),)) for ev in new), follow=True)
        self.names.extend(ev.name for ev in new)
        del self.names[: len(self.names) - self.row_count]  # the names of the lines still shown
        self.events.extend(new)
        if len(self.events) > MAX_ROWS * 1.2:
            del self.events[: len(self.events) - MAX_ROWS]
        if self._kills or self._marks:
            self._place_kills()
        shown = self.row_count
        total = f"last {shown} of {self.seen}" if shown < self.seen else str(self.seen)
        segments = f" · {events[-1].segment + 1} executions (continue-as-new)" if events[-1].segment else ""
        self.info.show(f"{total} events{segments}")

    def _place_kills(self) -> None:
        """Insert a marker line for each waiting kill and fleet event that has an event after it."""
        self._place_marks()
        for kill_id, kill in list(self._kills.items()):
            placed = place_kill(kill, self.events)
            if placed is None:
                continue
            del self._kills[kill_id]
            i, text = placed
            if i == 0 and (self.seen > len(self.events) or self.events[0].event_id != 1):
                continue  # the kill predates the oldest event still shown
            ev = self.events[i]
            key = f"kill/{kill_id}"
            row = self.insert_before(f"{ev.segment}/{ev.event_id}", key, (Text(text, style="bold red"),))
            if row is not None:
                self.names.insert(row, "KILL")
                before = tuple(self.events[:i])
                self.markers[key] = Marker(kill, text, classify(kill, before, None), before)

    def _place_marks(self) -> None:
        for mark_id, mark in sorted(self._marks.items(), key=lambda item: item[1].at):
            i = place_mark(mark, self.events)
            if i is None:
                continue
            del self._marks[mark_id]
            if i == 0 and (self.seen > len(self.events) or self.events[0].event_id != 1):
                continue  # it predates the oldest event still shown
            ev, key, text = self.events[i], f"mark/{mark_id}", marker_text(mark)
            line = Text(text, style=MARK_STYLE.get(mark.event, "bold"))  # ledger text: a Text, never markup
            row = self.insert_before(f"{ev.segment}/{ev.event_id}", key, (line,))
            if row is not None:
                self.names.insert(row, "MARK")
                self.fleet_markers[key] = text

    def scroll_to_marker(self, direction: int) -> str | None:
        """Scroll to the next (`direction` 1) or previous (-1) marker line (a kill's or a fleet event's)
        after the last one shown this way (the first press: the oldest, or with -1 the newest), wrapping
        round; the pane stops following new events until End. Returns the marker's text and its place,
        None if no marker line is shown."""
        keys = self.row_keys()
        shown = {key: i for i, key in enumerate(keys) if key in self.markers or key in self.fleet_markers}
        rows = list(shown.values())
        if not rows:
            return None
        last = shown.get(self._marker_key) if self._marker_key is not None else None
        if last is None:
            row = rows[0] if direction > 0 else rows[-1]
        elif direction > 0:
            row = next((r for r in rows if r > last), rows[0])
        else:
            row = next((r for r in reversed(rows) if r < last), rows[-1])
        self._marker_key = keys[row]
        self.cursor_row = row  # off the last row: new events no longer scroll the pane (see sync)
        self.scroll_to(y=max(0, row - 3), animate=False, immediate=True)
        place = f"{rows.index(row) + 1} of {len(rows)}"
        marker = self.markers.get(keys[row])
        if marker is None:
            return f"marker {place}: {self.fleet_markers[keys[row]]}"
        return f"kill marker {place} ({marker.window} window): {marker.text}"

    def action_inspect(self) -> None:
        self.post_message(self.Inspect(self.marker_step()))

    def marker_step(self) -> int | None:
        """The step the kill of the marker `m` / `M` last brought on screen interrupted, while its line
        is still in view."""
        key = self._marker_key
        row = self._index.get(key) if key is not None else None
        if key not in self.markers or row is None:
            return None  # no marker brought on screen, or a fleet event's (it interrupted no step)
        if not 0 <= row - self.scroll_offset.y < self.scrollable_content_region.height:
            return None
        kill = self.markers[key].kill
        return kill.activity_step or kill.step

    def markers_for_step(self, step: int) -> list[Marker]:
        """The placed marker lines of the kills that interrupted `step` (for the step inspector)."""
        return [m for m in self.markers.values() if (m.kill.activity_step or m.kill.step) == step]

    def events_between(self, start: float, end: float) -> list[HistoryEvent]:
        """The shown events in a time window (a step's, for the step inspector)."""
        return [ev for ev in self.events if start <= ev.time <= end]

    def reset(self) -> None:
        """A different run: forget the lines and the count."""
        super().reset()
        self.names.clear()
        self.events.clear()
        self._kills.clear()
        self.markers.clear()
        self._marks.clear()
        self.fleet_markers.clear()
        self._marker_key = None
        self._pending.clear()
        self._flushed = 0.0
        self.seen = 0


def _line(ev: HistoryEvent) -> str | Text:
    """One event's line; a plain string unless the event name is coloured (most are not, and a Text
    per event was most of the cost of taking in ~100 events a second)."""
    style = "bold red" if "FAILED" in ev.name or "TIMED_OUT" in ev.name else ""
    if ev.name.startswith("WORKFLOW_EXECUTION_COMPLETED"):
        style = "bold green"
    ident = str(ev.event_id) if ev.segment == 0 else f"{ev.segment}/{ev.event_id}"
    head = f"{ident:>6}  {_clock(ev.time)}  "
    if not style:
        return f"{head}{ev.name:<27} {ev.attrs}"  # untrusted text: shown as a plain cell, never markup
    line = Text(head)
    line.append(f"{ev.name:<27}", style=style)
    line.append(" ")
    line.append(ev.attrs)  # untrusted text: a Text, never markup
    return line


def _clock(t: float) -> str:
    return f"{_hms(int(t))}.{int((t % 1) * 1000):03d}"


@lru_cache(maxsize=8)
def _hms(second: int) -> str:
    """A second formatted once: events come dozens to a second."""
    return time.strftime("%H:%M:%S", time.localtime(second))
