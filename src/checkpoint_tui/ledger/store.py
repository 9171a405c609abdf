"""Ledger connections and the merge rules for columns written by more than one activity."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger import plans, queries
from checkpoint_tui.ledger.backend import Ledger, open_ledger
from checkpoint_tui.ledger.rows import AGENT_LOOP
from checkpoint_tui.ledger.schema import ensure_schema
from checkpoint_tui.settings import HOST, Settings, is_postgres_url, postgres_label

_local = threading.local()  # connections are per thread: neither sqlite3 nor psycopg share one safely


def connect(target: str | Path) -> Ledger:
    """One connection per (thread, ledger): a SQLite file path or a postgresql:// URL."""
    key = str(target)
    cache: dict[str, Ledger] = getattr(_local, "conns", None) or {}
    _local.conns = cache
    ledger = cache.get(key)
    if ledger is None:
        ledger = _open_checked(target)
        cache[key] = ledger
    return ledger


def _open_checked(target: str | Path) -> Ledger:
    """Open and migrate; a damaged file or another program's database is one clear line, not a traceback."""
    try:
        ledger = open_ledger(target)
        ensure_schema(ledger)
    except Unavailable:
        raise
    except Exception as err:  # sqlite3.DatabaseError, psycopg.Error: their first line says what is wrong
        label = postgres_label(str(target)) if is_postgres_url(target) else str(target)
        reason = (str(err).splitlines() or [type(err).__name__])[0][:200]
        raise Unavailable(
            f"the ledger at {label} is damaged or not a checkpoint-tui ledger ({reason}); move it aside"
        ) from None
    return ledger


def close_all() -> None:
    for ledger in (getattr(_local, "conns", None) or {}).values():
        ledger.close()
    _local.conns = {}


def now() -> float:
    return time.time()


# Merge rules, in one place: how a write to `steps` combines with the row already there.
# attempt: MAX (the highest attempt any activity saw); started_at / started_pid: first writer;
# status / ended_at / error: last completion, and a completed step never goes back to running;
# worker_pid: the latest toucher until the step completes, then the pid that completed it.
_STEP_MERGE: dict[str, str] = {
    "attempt": "CASE WHEN excluded.attempt > steps.attempt THEN excluded.attempt ELSE steps.attempt END",
    "started_at": "COALESCE(steps.started_at, excluded.started_at)",
    "started_pid": "COALESCE(steps.started_pid, excluded.started_pid)",
    "started_host": "COALESCE(steps.started_host, excluded.started_host)",
    "status": "CASE WHEN steps.status = 'completed' THEN steps.status ELSE excluded.status END",
    "worker_pid": "CASE WHEN steps.status = 'completed' THEN steps.worker_pid "
    "ELSE COALESCE(excluded.worker_pid, steps.worker_pid) END",
    "worker_host": "CASE WHEN steps.status = 'completed' THEN steps.worker_host "
    "ELSE COALESCE(excluded.worker_host, steps.worker_host) END",
    "ended_at": "COALESCE(excluded.ended_at, steps.ended_at)",
    "touched_at": "excluded.touched_at",  # every write: lets a poller fetch only changed rows
}
_STEP_COLUMNS = (
    "status",
    "attempt",
    "worker_pid",
    "started_pid",
    "worker_host",
    "started_host",
    "provider",
    "action",
    "thought",
    "tool_result",
    "tokens",
    "cost_usd",
    "started_at",
    "ended_at",
    "error",
    "raw_output",
    "answer_note",
)


def upsert_step_plan(run_id: str, step: int, status: str, **fields: Any) -> plans.Plan[None]:
    yield plans.stmt(*_step_upsert(run_id, step, status, **fields))


@plans.runs(upsert_step_plan)
def upsert_step(conn: Ledger, run_id: str, step: int, status: str, **fields: Any) -> None:
    """Write some columns of a step row; columns not given keep their value."""
    plans.run(conn, upsert_step_plan(run_id, step, status, **fields))


def _step_upsert(run_id: str, step: int, status: str, **fields: Any) -> tuple[str, tuple[Any, ...]]:
    unknown = set(fields) - set(_STEP_COLUMNS)
    if unknown:
        raise ValueError(f"unknown step columns: {sorted(unknown)}")
    fields = {"status": status, "attempt": fields.pop("attempt", 1), **fields, "touched_at": now()}
    cols = list(fields)
    updates = [f"{c} = {_STEP_MERGE.get(c, f'COALESCE(excluded.{c}, steps.{c})')}" for c in cols]
    sql = (
        f"INSERT INTO steps(run_id, step, {', '.join(cols)}) "
        f"VALUES(?, ?, {', '.join('?' for _ in cols)}) "
        f"ON CONFLICT(run_id, step) DO UPDATE SET {', '.join(updates)}"
    )
    return sql, (run_id, step, *fields.values())


LOG_ACTIVITY = (
    "INSERT INTO activity_log(run_id, step, activity, attempt, worker_pid, host, started_at) VALUES(?,?,?,?,?,?,?)"
)


def touch_step_plan(
    run_id: str, step: int, activity: str, attempt: int, pid: int, status: str, **fields: Any
) -> plans.Plan[None]:
    """touch_step where writes may sit in WITH (PostgreSQL): one statement, atomic on its own."""
    log, (upsert, params) = touch_parts(run_id, step, activity, attempt, pid, status, **fields)
    yield plans.stmt(f"WITH logged AS ({LOG_ACTIVITY}) {upsert}", (*log, *params))


def touch_parts(
    run_id: str, step: int, activity: str, attempt: int, pid: int, status: str, **fields: Any
) -> tuple[tuple[Any, ...], tuple[str, tuple[Any, ...]]]:
    """The touch's two writes: the activity log row's values and the step upsert (SQL, values)."""
    log = (run_id, step, activity, attempt, pid, HOST, now())
    return log, _step_upsert(run_id, step, status, attempt=attempt, worker_pid=pid, worker_host=HOST, **fields)


@plans.runs(touch_step_plan)
def touch_step(
    conn: Ledger, run_id: str, step: int, activity: str, attempt: int, pid: int, status: str, **fields: Any
) -> None:
    """What every activity writes first: its attempt in the activity log, its pid on the step row;
    both commit together (one statement where the backend allows writes in WITH, else a transaction)."""
    if conn.writes_in_with:
        plans.run(conn, touch_step_plan(run_id, step, activity, attempt, pid, status, **fields))
        return
    log, (upsert, params) = touch_parts(run_id, step, activity, attempt, pid, status, **fields)
    with transaction(conn):
        conn.execute(LOG_ACTIVITY, log)
        conn.execute(upsert, params)


def create_run(
    conn: Ledger,
    run_id: str,
    total_steps: int,
    pace: float,
    provider: str | None,
    task_queue: str,
    kind: str = AGENT_LOOP,
    workflow_type: str | None = None,
) -> bool:
    """Insert the run's row; False if the id is taken (the insert is the lock: a host that drew the same
    id a moment earlier keeps it, and this caller draws another)."""
    cur = conn.execute(
        "INSERT INTO runs(run_id, total_steps, pace, status, provider, task_queue, created_at, kind, workflow_type) "
        "VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT(run_id) DO NOTHING",
        (run_id, total_steps, pace, "running", provider, task_queue, now(), kind, workflow_type),
    )
    return cur.rowcount == 1


def finish_run_plan(run_id: str, status: str, error: str | None = None) -> plans.Plan[None]:
    yield plans.stmt(
        "UPDATE runs SET status = ?, error = COALESCE(?, error), ended_at = ? WHERE run_id = ?",
        (status, error, now(), run_id),
    )


@plans.runs(finish_run_plan)
def finish_run(conn: Ledger, run_id: str, status: str, error: str | None = None) -> None:
    plans.run(conn, finish_run_plan(run_id, status, error))


def record_worker_event(
    conn: Ledger,
    event: str,
    pid: int | None,
    identity: str | None = None,
    run_id: str | None = None,
    step: int | None = None,
    detail: str | None = None,
    at: float | None = None,
    host: str | None = None,
) -> int:
    row = conn.execute(
        "INSERT INTO worker_events(at, event, pid, host, identity, run_id, step, detail) VALUES(?,?,?,?,?,?,?,?) "
        "RETURNING id",
        (at or now(), event, pid, host or HOST, identity, run_id, step, detail),
    ).fetchone()
    return int(row[0])


def set_first_execution(conn: Ledger, run_id: str, execution: str) -> None:
    """The first execution of the run's continue-as-new chain: where a history reader starts."""
    conn.execute("UPDATE runs SET first_execution = ? WHERE run_id = ?", (execution, run_id))


def set_event_latency(conn: Ledger, event_id: int, restart_s: float | None, next_step_s: float | None) -> None:
    conn.execute(
        "UPDATE worker_events SET restart_s = ?, next_step_s = ? WHERE id = ?", (restart_s, next_step_s, event_id)
    )


def record_comparison(conn: Ledger, naive_run: str, durable_run: str, steps: int, kill_step: int) -> None:
    conn.execute(
        "INSERT INTO comparisons(naive_run, durable_run, steps, kill_step, created_at) VALUES(?,?,?,?,?)",
        (naive_run, durable_run, steps, kill_step, now()),
    )


@contextmanager
def transaction(conn: Ledger, key: str | None = None) -> Iterator[Ledger]:
    """A write transaction. A check-then-write block names a key: SQLite serialises every write
    transaction anyway; PostgreSQL serialises those with the same key (an advisory lock)."""
    with conn.transaction(key):
        yield conn


def with_shared_queue(settings: Settings) -> Settings:
    """Hosts sharing a PostgreSQL ledger serve one task queue, named after the ledger's own random id
    (written by its first migration): the same database reached by any spelling of its URL gives one
    queue, and two databases that merely look alike (same host name, port and name on two machines)
    never share one. A --task-queue given by the user wins; a SQLite home keeps its own queue."""
    if not settings.ledger_url or settings.task_queue_name:
        return settings
    ledger_id = queries.ledger_id(connect(settings.ledger))
    return replace(settings, task_queue_name=f"checkpoint-pg-{ledger_id[:12]}")
