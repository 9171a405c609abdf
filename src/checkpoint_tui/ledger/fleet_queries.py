"""Reads of the worker events a game day's report counts per worker command (proof/chaos/fleet_lab.py),
and of the Worker Deployment Version each worker ran (core/lost_work.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import detail_of

MAX_EVENTS = 100_000  # a long game day's worker events; more are not counted
MAX_IDENTITIES = 256  # workers looked up at once (a run's failed workflow tasks name a few)


@dataclass(frozen=True)
class LifeEvent:
    at: float
    event: str
    pid: int | None
    identity: str | None
    detail: str | None


def worker_events_between(conn: Ledger, since: float, until: float | None = None) -> list[LifeEvent]:
    """Every worker event from `since` (to `until`), oldest first."""
    rows = conn.execute(
        "SELECT at, event, pid, identity, detail FROM worker_events WHERE at >= ? AND at <= ? ORDER BY id LIMIT ?",
        (since, until if until is not None else 1e18, MAX_EVENTS),
    ).fetchall()
    return [LifeEvent(r["at"], r["event"], r["pid"], r["identity"], r["detail"]) for r in rows]


def worker_versions(conn: Ledger, identities: Iterable[str], before: float) -> dict[str, str]:
    """The build id each of these workers ran at `before`, from its `version` worker event (ops/
    worker_proc.py); a death or exit of that identity since ends it (a pid used again later, on a
    shared ledger too, is another worker). Absent: unversioned, or unknown."""
    names = sorted(set(identities))[:MAX_IDENTITIES]
    if not names:
        return {}
    marks = ",".join("?" * len(names))
    rows = conn.execute(
        "SELECT identity, event, detail FROM worker_events WHERE event IN ('version', 'died', 'exit') "
        f"AND identity IN ({marks}) AND at <= ? ORDER BY id LIMIT ?",
        (*names, before, MAX_EVENTS),
    ).fetchall()
    found: dict[str, str] = {}
    for r in rows:
        if r["event"] != "version":
            found.pop(r["identity"], None)
        elif (build := detail_text(r["detail"], "build_id")) is not None:
            found[r["identity"]] = build[:255]
    return found


def detail_text(detail: str | None, name: str) -> str | None:
    """A text field of a worker event's JSON detail (a row is untrusted: bounded, any failure is None)."""
    value = detail_of(detail).get(name)
    return value if isinstance(value, str) else None
