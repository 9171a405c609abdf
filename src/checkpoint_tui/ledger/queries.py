"""Every read the app, the proof tools and the supervisor make of the ledger, as functions that
return plain values or `rows` dataclasses. A figure computed here is computed once: "the completed
steps of a run" has one query, used by the snapshot, `start --wait`, verify and chaos alike."""

from __future__ import annotations

from collections.abc import Sequence

from checkpoint_tui.ledger import plans
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import (
    ComparisonRow,
    EffectRow,
    EffectTotals,
    NoteTotals,
    RunRow,
    RunSummary,
    StepRow,
    WorkerEvent,
    detail_of,
)
from checkpoint_tui.settings import HOST

OUTCOMES = ("applied", "skipped", "recovered", "interrupted")


def ledger_id(conn: Ledger) -> str:
    """The random id the ledger's first migration wrote."""
    return conn.execute("SELECT value FROM ledger_meta WHERE key = 'ledger_id'").fetchone()[0]


# --- runs ----------------------------------------------------------------------------------------


def run_plan(run_id: str) -> plans.Plan[RunRow | None]:
    row = (yield plans.stmt("SELECT * FROM runs WHERE run_id = ?", (run_id,))).fetchone()
    return RunRow.of(row) if row else None


@plans.runs(run_plan)
def run(conn: Ledger, run_id: str) -> RunRow | None:
    return plans.run(conn, run_plan(run_id))


def latest_run_id(conn: Ledger) -> str | None:
    row = conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC, run_id DESC LIMIT 1").fetchone()
    return row["run_id"] if row else None


def latest_running_run(conn: Ledger) -> str | None:
    row = conn.execute("SELECT run_id FROM runs WHERE status = 'running' ORDER BY created_at DESC LIMIT 1").fetchone()
    return row["run_id"] if row else None


# Most likely in an activity first: a claim not yet stamped (a tool call in flight), a run with no
# effect yet (at its first), then the effects that moved last (the next activity follows a stamp soon).
_LAST_MOVE = "(SELECT MAX(COALESCE(e.applied_at, e.claimed_at)) FROM effects e WHERE e.run_id = r.run_id)"
_BUSIEST_FIRST = (
    " ORDER BY EXISTS (SELECT 1 FROM effects e WHERE e.run_id = r.run_id AND e.applied_at IS NULL) DESC,"
    f" CASE WHEN {_LAST_MOVE} IS NULL THEN 1 ELSE 0 END DESC, {_LAST_MOVE} DESC, r.run_id"
)


def running_runs(conn: Ledger, task_queue: str, busiest_first: bool = False) -> list[str]:
    """Runs still running on one task queue (a shared ledger also lists other labs' runs); with
    `busiest_first`, ordered by how likely their effects say an activity of theirs is in flight."""
    sql = "SELECT r.run_id FROM runs r WHERE r.status = 'running' AND r.task_queue = ?"
    rows = conn.execute(sql + (_BUSIEST_FIRST if busiest_first else ""), (task_queue,))
    return [r["run_id"] for r in rows]


def recent_runs(conn: Ledger, limit: int = 200) -> list[RunSummary]:
    rows = conn.execute(
        "SELECT r.run_id, r.status, r.total_steps, r.created_at, r.workflow_type, "
        "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id AND s.status = 'completed') AS done, "
        "(SELECT COUNT(*) FROM effects e WHERE e.run_id = r.run_id) AS effect_rows, "
        "(SELECT COUNT(*) - COUNT(DISTINCT e.id) FROM effects e WHERE e.run_id = r.run_id) AS duplicates "
        "FROM runs r ORDER BY r.created_at DESC LIMIT ?",
        (limit,),
    )
    return [
        RunSummary(
            r["run_id"],
            r["status"],
            r["total_steps"],
            r["created_at"],
            r["done"],
            r["effect_rows"],
            r["duplicates"],
            r["workflow_type"],
        )
        for r in rows
    ]


# --- steps ---------------------------------------------------------------------------------------


def completed_steps(conn: Ledger, run_id: str) -> list[int]:
    rows = conn.execute("SELECT step FROM steps WHERE run_id = ? AND status = 'completed' ORDER BY step", (run_id,))
    return [r[0] for r in rows]


def last_logged_step(conn: Ledger, run_id: str) -> int | None:
    """The step of the run's latest activity: the one a worker is in, or whose timer runs once it
    completed (every attempt logs, a reset's re-run too: a steps row left `running` by a reset does
    not say where the run is); None before its first."""
    row = conn.execute("SELECT step FROM activity_log WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,)).fetchone()
    return None if row is None else row[0]


def count_completed(conn: Ledger, run_id: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM steps WHERE run_id = ? AND status = 'completed'", (run_id,)).fetchone()[0]


def steps(conn: Ledger, run_id: str, since: float | None = None) -> list[StepRow]:
    """The run's step rows; with `since`, only rows written at or after it."""
    if since is None:
        rows = conn.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,))
    else:
        rows = conn.execute("SELECT * FROM steps WHERE run_id = ? AND touched_at >= ? ORDER BY step", (run_id, since))
    return [StepRow.of(r) for r in rows]


def guardrail_step(conn: Ledger, run_id: str) -> StepRow | None:
    row = conn.execute(
        "SELECT * FROM steps WHERE run_id = ? AND status = 'failed' AND raw_output IS NOT NULL LIMIT 1", (run_id,)
    ).fetchone()
    return StepRow.of(row) if row else None


def step_workers(conn: Ledger, run_id: str) -> list[tuple[str | None, int]]:
    """(host, pid) of every worker that started or completed a step, in order of first step."""
    rows = conn.execute(
        "SELECT host, pid FROM (SELECT started_host AS host, started_pid AS pid, step FROM steps WHERE run_id = ? "
        "UNION ALL SELECT worker_host, worker_pid, step FROM steps WHERE run_id = ?) AS u "
        "WHERE pid IS NOT NULL GROUP BY host, pid ORDER BY MIN(step)",
        (run_id, run_id),
    )
    return [(r["host"], r["pid"]) for r in rows]


def resumed_steps(conn: Ledger, run_id: str, from_step: int | None = None) -> list[int]:
    """Steps completed by a different worker than the step before; with `from_step`, only from there
    on (the step before it is read to compare with)."""
    rows = conn.execute(
        "SELECT step FROM (SELECT step, worker_pid, LAG(worker_pid) OVER (ORDER BY step) AS prev, "
        "worker_host, LAG(worker_host) OVER (ORDER BY step) AS prev_host FROM steps "
        "WHERE run_id = ? AND step >= ?) AS w "
        "WHERE step >= ? AND prev IS NOT NULL AND worker_pid IS NOT NULL "
        "AND (worker_pid != prev OR COALESCE(worker_host, '') != COALESCE(prev_host, ''))",
        (run_id, (from_step or 1) - 1, from_step or 1),
    )
    return [r[0] for r in rows]


def last_touched_by(conn: Ledger, run_id: str, pid: int) -> bool:
    """Whether the run's most recently touched step was last touched by this local pid (so that worker
    held its sticky workflow). True if the run has no step yet."""
    row = conn.execute(
        "SELECT worker_pid, worker_host FROM steps WHERE run_id = ? ORDER BY touched_at DESC LIMIT 1", (run_id,)
    ).fetchone()
    return row is None or (row["worker_pid"] == pid and row["worker_host"] in (None, HOST))


# --- activity log --------------------------------------------------------------------------------


def activity_logged(
    conn: Ledger, run_id: str, step: int, activity: str, pid: int | None = None, host: str | None = None
) -> bool:
    """Whether an attempt of this activity started (on this pid@host, when given)."""
    if pid is None:
        row = conn.execute(
            "SELECT 1 FROM activity_log WHERE run_id = ? AND step = ? AND activity = ?", (run_id, step, activity)
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT 1 FROM activity_log WHERE run_id = ? AND step = ? AND activity = ? AND worker_pid = ? AND host = ?",
            (run_id, step, activity, pid, host or HOST),
        ).fetchone()
    return row is not None


def first_activity_after(conn: Ledger, run_id: str, at: float) -> float | None:
    row = conn.execute(
        "SELECT MIN(started_at) FROM activity_log WHERE run_id = ? AND started_at > ?", (run_id, at)
    ).fetchone()
    return row[0] if row else None


# --- effects -------------------------------------------------------------------------------------


def effect_totals(conn: Ledger, run_id: str) -> EffectTotals:
    r = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT id) AS dup, "
        "SUM(CASE WHEN applied_at IS NULL THEN 1 ELSE 0 END) AS unstamped FROM effects WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    return EffectTotals(r["n"], r["dup"], r["unstamped"] or 0)


def outcome_counts(conn: Ledger, run_id: str) -> dict[str, int]:
    """Claim attempts by outcome; one without an outcome is an interrupted attempt."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for r in conn.execute(
        "SELECT COALESCE(outcome, 'interrupted') AS o, COUNT(*) AS n FROM effect_outcomes WHERE run_id = ? GROUP BY o",
        (run_id,),
    ):
        counts[r["o"]] = r["n"]
    return counts


def effects(conn: Ledger, run_id: str, since: float | None = None) -> list[EffectRow]:
    """The run's effects with their claim outcomes; with `since`, only effects with an attempt since."""
    if since is None:
        rows = conn.execute("SELECT * FROM effects WHERE run_id = ? ORDER BY step, claimed_at", (run_id,)).fetchall()
        outcome_rows = conn.execute(
            "SELECT effect_id, COALESCE(outcome, 'interrupted') AS o FROM effect_outcomes WHERE run_id = ? "
            "ORDER BY seq",
            (run_id,),
        ).fetchall()
    else:
        changed = conn.execute(
            "SELECT effect_id FROM effect_outcomes WHERE run_id = ? AND (started_at >= ? OR finished_at >= ?)",
            (run_id, since, since),
        ).fetchall()
        ids = sorted({r[0] for r in changed})
        if not ids:
            return []
        marks = ",".join("?" for _ in ids)
        rows = conn.execute(f"SELECT * FROM effects WHERE id IN ({marks}) ORDER BY step, claimed_at", ids).fetchall()
        outcome_rows = conn.execute(
            f"SELECT effect_id, COALESCE(outcome, 'interrupted') AS o FROM effect_outcomes "
            f"WHERE effect_id IN ({marks}) ORDER BY seq",
            ids,
        ).fetchall()
    outcomes: dict[str, list[str]] = {}
    for r in outcome_rows:
        outcomes.setdefault(r["effect_id"], []).append(r["o"])
    return [
        EffectRow(
            r["id"],
            r["step"],
            r["kind"],
            r["attempt"],
            r["claimed_at"],
            r["applied_at"],
            ",".join(outcomes.get(r["id"], [])),
            r["payload"],
        )
        for r in rows
    ]


def effects_by_id(conn: Ledger, run_id: str) -> dict[str, EffectRow]:
    return {e.id: e for e in effects(conn, run_id)}


# --- notes ---------------------------------------------------------------------------------------


def note_totals(conn: Ledger, run_id: str) -> NoteTotals:
    r = conn.execute(
        "SELECT COUNT(*) AS n, COUNT(*) - COUNT(DISTINCT effect_id) AS dup FROM notes WHERE run_id = ?", (run_id,)
    ).fetchone()
    return NoteTotals(r["n"], r["dup"])


def note_counts_by_effect(conn: Ledger, run_id: str) -> dict[str, int]:
    rows = conn.execute("SELECT effect_id, COUNT(*) AS n FROM notes WHERE run_id = ? GROUP BY effect_id", (run_id,))
    return {r["effect_id"]: r["n"] for r in rows}


# --- worker events -------------------------------------------------------------------------------


def worker_events(conn: Ledger, run_id: str | None, limit: int = 50, after: int | None = None) -> list[WorkerEvent]:
    """The newest `limit` events of a run (and those of no run), oldest first; all runs' if run_id is
    None. With `after`, only events with a higher id (a poller's new ones)."""
    rows = conn.execute(
        "SELECT * FROM worker_events WHERE id > ? AND (run_id IS NULL OR run_id = ? OR CAST(? AS TEXT) IS NULL) "
        "ORDER BY id DESC LIMIT ?",
        (after or 0, run_id, run_id, limit),
    ).fetchall()
    return [WorkerEvent.of(r) for r in reversed(rows)]


def death_events(conn: Ledger, run_id: str, kinds: Sequence[str] = ("kill", "died")) -> list[dict]:
    """Kill/death events of a run with their JSON detail parsed, oldest first."""
    marks = ",".join("?" for _ in kinds)
    rows = conn.execute(
        f"SELECT * FROM worker_events WHERE run_id = ? AND event IN ({marks}) ORDER BY id", (run_id, *kinds)
    ).fetchall()
    return [{k: r[k] for k in r.keys()} | {"detail": detail_of(r["detail"])} for r in rows]  # noqa: SIM118 - a Row iterates values


def deaths_after(conn: Ledger, after: int, host: str) -> list[tuple[int, float, int, str, str | None]]:
    """(id, at, pid, identity, queue) of each worker death on `host` recorded after event `after`, oldest first."""
    sql = "SELECT * FROM worker_events WHERE id > ? AND event IN ('kill', 'died') AND host = ? ORDER BY id LIMIT 1000"
    out = []
    for r in conn.execute(sql, (after, host)).fetchall():
        queue = detail_of(r["detail"]).get("queue")
        out.append((r["id"], r["at"], r["pid"], r["identity"], queue if isinstance(queue, str) else None))
    return [d for d in out if d[2] and d[3]]


# --- comparisons ---------------------------------------------------------------------------------


def latest_comparison(conn: Ledger) -> ComparisonRow | None:
    row = conn.execute("SELECT * FROM comparisons ORDER BY id DESC LIMIT 1").fetchone()
    return ComparisonRow(row["naive_run"], row["durable_run"], row["steps"], row["kill_step"]) if row else None


# --- proof bundles and replay --------------------------------------------------------------------


def run_ids(conn: Ledger, task_queue: str | None = None, since: float | None = None) -> list[str]:
    """Every run id, oldest first; with `task_queue` / `since`, only runs on that queue / created since."""
    rows = conn.execute(
        "SELECT run_id FROM runs WHERE (CAST(? AS TEXT) IS NULL OR task_queue = ?) AND created_at >= ? "
        "ORDER BY created_at, run_id",
        (task_queue, task_queue, since or 0.0),
    )
    return [r["run_id"] for r in rows]


def claim_attempts(conn: Ledger, run_id: str) -> list:
    """Every claim attempt of the run's effects in order; one without an outcome was interrupted."""
    from checkpoint_tui.ledger.rows import ClaimAttempt  # here: this section is appended as a unit

    rows = conn.execute(
        "SELECT seq, effect_id, step, kind, attempt, worker_pid, host, COALESCE(outcome, 'interrupted') AS outcome, "
        "started_at, finished_at, found_written FROM effect_outcomes WHERE run_id = ? ORDER BY seq",
        (run_id,),
    )
    return [ClaimAttempt.of(r) for r in rows]


# --- nemeses -------------------------------------------------------------------------------------


def kill_event_of(conn: Ledger, pid: int, since: float, host: str | None = None) -> WorkerEvent | None:
    """The first kill event of this local pid at or after `since` (e.g. the watchdog's, after a hang)."""
    row = conn.execute(
        "SELECT * FROM worker_events WHERE event = 'kill' AND pid = ? AND host = ? AND at >= ? ORDER BY id LIMIT 1",
        (pid, host or HOST, since),
    ).fetchone()
    return WorkerEvent.of(row) if row is not None else None


def activities_since(conn: Ledger, run_id: str, since: float, first: int, last: int) -> list[dict]:
    """Activity attempts started since `since` for steps first..last, counted per step and activity
    (what a workflow reset ran again)."""
    rows = conn.execute(
        "SELECT step, activity, COUNT(*) AS n FROM activity_log WHERE run_id = ? AND started_at >= ? "
        "AND step BETWEEN ? AND ? GROUP BY step, activity ORDER BY step, activity",
        (run_id, since, first, last),
    )
    return [{"step": r["step"], "activity": r["activity"], "count": r["n"]} for r in rows]


def outcomes_since(conn: Ledger, run_id: str, since: float, first: int, last: int) -> dict[str, int]:
    """Claim attempts started since `since` for steps first..last, by outcome (`unfinished`: none yet)."""
    rows = conn.execute(
        "SELECT outcome, COUNT(*) AS n FROM effect_outcomes WHERE run_id = ? AND started_at >= ? "
        "AND step BETWEEN ? AND ? GROUP BY outcome ORDER BY outcome",
        (run_id, since, first, last),
    )
    return {r["outcome"] or "unfinished": r["n"] for r in rows}


# --- lost work -----------------------------------------------------------------------------------


def lab_events(conn: Ledger, since: float, until: float, limit: int = 10_000) -> list[dict]:
    """The worker events that can stop an attempt (kill, died, sigterm, exit, chaos:*) from `since` to
    `until`, oldest first (at most `limit`), of every run (the run an event is filed under is the
    supervisor's guess: the latest running one, for a user's workflow), each with its JSON detail
    parsed: what the lost-work audit names as a timeout's cause (core/lost_work.py)."""
    rows = conn.execute(
        "SELECT at, event, pid, host, identity, run_id, detail FROM worker_events WHERE at >= ? AND at <= ? "
        "AND (event IN ('kill', 'died', 'sigterm', 'exit') OR event LIKE 'chaos:%') ORDER BY at, id LIMIT ?",
        (since, until, limit),
    ).fetchall()
    return [
        {
            "at": r["at"],
            "event": r["event"],
            "pid": r["pid"],
            "host": r["host"],
            "identity": r["identity"],
            "run_id": r["run_id"],
            "detail": detail_of(r["detail"]),
        }
        for r in rows
    ]
