"""Reads of the worker events a game day's report counts per worker command (proof/chaos/fleet_lab.py),
and of the Worker Deployment Version each worker ran (core/lost_work.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from checkpoint_tui.ledger.backend import Ledger

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


def worker_versions(conn: Ledger, identities: Iterable[str]) -> dict[str, str]:
    """The build id each of these workers ran, from its `version` worker event (ops/worker_proc.py);
    a worker with none (unversioned, or another lab's) is absent."""
    names = sorted(set(identities))[:MAX_IDENTITIES]
    if not names:
        return {}
    marks = ",".join("?" * len(names))
    rows = conn.execute(
        f"SELECT identity, detail FROM worker_events WHERE event = 'version' AND identity IN ({marks}) ORDER BY id",
        tuple(names),
    ).fetchall()
    found = {}
    for r in rows:
        try:
            build = json.loads(r["detail"] or "{}").get("build_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(build, str):
            found[r["identity"]] = build[:255]
    return found
