"""Reads of the worker events a game day's report counts per worker command (proof/chaos/fleet_lab.py)."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_tui.ledger.backend import Ledger

MAX_EVENTS = 100_000  # a long game day's worker events; more are not counted


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
