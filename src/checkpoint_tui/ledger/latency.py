"""Resume latencies computed from durable timestamps only (worker_events + activity_log)."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.queries import latest_running_run
from checkpoint_tui.settings import HOST


@dataclass(frozen=True)
class Latency:
    restart_s: float | None  # kill -> first activity of the killed step on another pid
    next_step_s: float | None  # kill -> the following step's first activity


def measure(conn: Ledger, run_id: str, killed_at: float, dead_pid: int, step: int | None) -> Latency:
    """`step` is the step in flight at the kill (None if the kill landed between steps)."""
    if step is None:
        row = conn.execute(
            "SELECT MIN(started_at) AS t FROM activity_log WHERE run_id = ? AND started_at > ? "
            "AND NOT (worker_pid = ? AND host = ?)",
            (run_id, killed_at, dead_pid, HOST),
        ).fetchone()
        first = row["t"] if row else None
        value = None if first is None else first - killed_at
        return Latency(value, value)
    restart = conn.execute(
        "SELECT MIN(started_at) AS t FROM activity_log WHERE run_id = ? AND step = ? AND started_at > ? "
        "AND NOT (worker_pid = ? AND host = ?)",
        (run_id, step, killed_at, dead_pid, HOST),
    ).fetchone()["t"]
    if restart is None:  # the step's remaining activities may all have finished before the kill
        restart = conn.execute(
            "SELECT MIN(started_at) AS t FROM activity_log WHERE run_id = ? AND step > ? AND started_at > ?",
            (run_id, step, killed_at),
        ).fetchone()["t"]
    nxt = conn.execute(
        "SELECT MIN(started_at) AS t FROM activity_log WHERE run_id = ? AND step > ? AND started_at > ?",
        (run_id, step, killed_at),
    ).fetchone()["t"]
    return Latency(
        None if restart is None else restart - killed_at,
        None if nxt is None else nxt - killed_at,
    )


def in_flight_step(conn: Ledger, pid: int, host: str | None = None) -> tuple[str, int] | None:
    """The (run, step) a worker (pid on host, default this one) was working on: a running step it touched last."""
    row = conn.execute(
        "SELECT s.run_id, s.step FROM steps s JOIN runs r ON r.run_id = s.run_id "
        "WHERE s.status = 'running' AND s.worker_pid = ? AND s.worker_host = ? AND r.status = 'running' "
        "ORDER BY s.started_at DESC LIMIT 1",
        (pid, host or HOST),
    ).fetchone()
    return (row["run_id"], row["step"]) if row else None


def in_flight(conn: Ledger, pid: int) -> tuple[str | None, int | None]:
    """(run, step) a local worker was working on; (the latest running run, None) between steps."""
    flight = in_flight_step(conn, pid)
    return flight if flight else (latest_running_run(conn), None)
