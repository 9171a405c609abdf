"""What the history pane marks, each delivered once: the viewed run's kills and deaths (core/kill_marker.py)
and the lab's fleet events (core/fleet_marks.py). All of them when a run is first
shown, then only new ones; read on the session's ledger thread, no query on a poll without a commit."""

from __future__ import annotations

from checkpoint_tui.ledger import inspect_queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.inspect_queries import FleetEvent, KillEvent

REREAD = 20  # fleet events read again before the newest seen: ids may commit out of order (PostgreSQL)
PAGES = 20  # reads of FLEET_MARKS_LIMIT events at most per poll (a long game day's churn: thousands)


class MarkFeed:
    def __init__(self) -> None:
        self._kills_sent: set[int] = set()  # kill/died events of the viewed run already in a View
        self._death_cursor = 0  # the last worker event id looked at for new deaths (any run's)
        self._marks_sent: set[int] = set()
        self._mark_cursor = 0  # the newest fleet event of the viewed run delivered

    def new(self, conn: Ledger, run_id: str | None, reset: bool) -> tuple[list[KillEvent], list[FleetEvent]]:
        if reset:
            self._kills_sent.clear()
            self._marks_sent.clear()
            self._mark_cursor = 0
        if run_id is None:
            return [], []
        return self._kills(conn, run_id, reset), self._marks(conn, run_id)

    def _kills(self, conn: Ledger, run_id: str, reset: bool) -> list[KillEvent]:
        """All the run's kills when it is first shown, then only new ones (one query per kill, none on a
        poll without one)."""
        # served: a death filed under another run (start --runs N, one kill) marks this one too if the
        # dead worker held this run's step; such events are not among the snapshot's (they name the
        # viewed run or none), so new deaths are looked up after the last one seen, of any run
        if reset:
            self._death_cursor = inspect_queries.last_event_id(conn)
            kills = inspect_queries.kill_events(conn, run_id, served=True)
        else:
            ids = inspect_queries.deaths_after(conn, self._death_cursor)
            self._death_cursor = max(ids, default=self._death_cursor)
            ids = [i for i in ids if i not in self._kills_sent]
            kills = inspect_queries.kill_events(conn, run_id, ids, served=True) if ids else []
        self._kills_sent.update(k.id for k in kills)
        return kills

    def _marks(self, conn: Ledger, run_id: str) -> list[FleetEvent]:
        """The run's fleet events after the newest delivered (and a few before it, in case one committed
        late), each once: one query per poll that saw a commit (a page more while a read comes back full)."""
        marks: list[FleetEvent] = []  # asked for our own worker too: a dev server's death reaches every run
        after = max(0, self._mark_cursor - REREAD)  # the first read of a poll only: then page on
        for _ in range(PAGES):
            found, after, full = inspect_queries.fleet_page(conn, run_id, after)
            new = [m for m in found if m.id not in self._marks_sent]
            self._marks_sent.update(m.id for m in new)
            self._mark_cursor = max(after, self._mark_cursor)
            marks += new
            if not full:
                break
        return marks
