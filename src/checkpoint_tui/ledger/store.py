"""SQLite schema, connections and the merge rules for columns written by more than one activity."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    total_steps INTEGER NOT NULL,
    pace REAL NOT NULL,
    status TEXT NOT NULL,
    provider TEXT,
    task_queue TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    ended_at REAL,
    first_execution TEXT
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    worker_pid INTEGER,
    started_pid INTEGER,
    provider TEXT,
    action TEXT,
    thought TEXT,
    tool_result TEXT,
    tokens INTEGER,
    cost_usd REAL,
    started_at REAL,
    ended_at REAL,
    error TEXT,
    raw_output TEXT,
    touched_at REAL,
    answer_note TEXT,
    PRIMARY KEY (run_id, step)
);
CREATE INDEX IF NOT EXISTS steps_touched ON steps(run_id, touched_at);
CREATE TABLE IF NOT EXISTS activity_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    activity TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    worker_pid INTEGER NOT NULL,
    started_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS activity_log_run ON activity_log(run_id, step);
CREATE TABLE IF NOT EXISTS effects (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    claimed_at REAL NOT NULL,
    applied_at REAL
);
CREATE INDEX IF NOT EXISTS effects_run ON effects(run_id, step);
CREATE TABLE IF NOT EXISTS effect_outcomes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    effect_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    worker_pid INTEGER NOT NULL,
    outcome TEXT,
    started_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS effect_outcomes_run ON effect_outcomes(run_id);
CREATE TABLE IF NOT EXISTS notes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    effect_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_run ON notes(run_id, effect_id);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    kind TEXT NOT NULL,
    effect_kind TEXT,
    count INTEGER NOT NULL DEFAULT 1,
    fired INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS faults_run ON faults(run_id, step);
CREATE TABLE IF NOT EXISTS comparisons (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    naive_run TEXT NOT NULL,
    durable_run TEXT NOT NULL,
    steps INTEGER NOT NULL,
    kill_step INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS worker_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    event TEXT NOT NULL,
    pid INTEGER,
    identity TEXT,
    run_id TEXT,
    step INTEGER,
    detail TEXT,
    restart_s REAL,
    next_step_s REAL
);
"""

_local = threading.local()


def connect(db_path: Path | str) -> sqlite3.Connection:
    """One connection per (thread, database file); WAL so readers never block the worker."""
    key = str(db_path)
    cache: dict[str, sqlite3.Connection] = getattr(_local, "conns", None) or {}
    _local.conns = cache
    conn = cache.get(key)
    if conn is None:
        Path(db_path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(key, timeout=10.0, isolation_level=None, check_same_thread=True)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        _migrate(conn)
        conn.executescript(SCHEMA)
        cache[key] = conn
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Columns added after a ledger was first created (CREATE TABLE IF NOT EXISTS does not add them)."""
    for table, name, decl in (
        ("steps", "touched_at", "REAL"),
        ("steps", "answer_note", "TEXT"),
        ("runs", "first_execution", "TEXT"),
    ):
        cols = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if cols and name not in cols:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")


def close_all() -> None:
    for conn in (getattr(_local, "conns", None) or {}).values():
        conn.close()
    _local.conns = {}


def now() -> float:
    return time.time()


# Merge rules, in one place: how a write to `steps` combines with the row already there.
# attempt: MAX (the highest attempt any activity saw); started_at / started_pid: first writer;
# status / ended_at / error: last completion, and a completed step never goes back to running;
# worker_pid: the latest toucher until the step completes, then the pid that completed it.
_STEP_MERGE: dict[str, str] = {
    "attempt": "MAX(steps.attempt, excluded.attempt)",
    "started_at": "COALESCE(steps.started_at, excluded.started_at)",
    "started_pid": "COALESCE(steps.started_pid, excluded.started_pid)",
    "status": "CASE WHEN steps.status = 'completed' THEN steps.status ELSE excluded.status END",
    "worker_pid": "CASE WHEN steps.status = 'completed' THEN steps.worker_pid "
    "ELSE COALESCE(excluded.worker_pid, steps.worker_pid) END",
    "ended_at": "COALESCE(excluded.ended_at, steps.ended_at)",
    "touched_at": "excluded.touched_at",  # every write: lets a poller fetch only changed rows
}
_STEP_COLUMNS = (
    "status",
    "attempt",
    "worker_pid",
    "started_pid",
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


def upsert_step(conn: sqlite3.Connection, run_id: str, step: int, status: str, **fields: Any) -> None:
    """Write some columns of a step row; columns not given keep their value."""
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
    conn.execute(sql, (run_id, step, *fields.values()))


def log_activity(conn: sqlite3.Connection, run_id: str, step: int, activity: str, attempt: int, pid: int) -> None:
    conn.execute(
        "INSERT INTO activity_log(run_id, step, activity, attempt, worker_pid, started_at) VALUES(?,?,?,?,?,?)",
        (run_id, step, activity, attempt, pid, now()),
    )


def create_run(
    conn: sqlite3.Connection, run_id: str, total_steps: int, pace: float, provider: str, task_queue: str
) -> None:
    conn.execute(
        "INSERT INTO runs(run_id, total_steps, pace, status, provider, task_queue, created_at) VALUES(?,?,?,?,?,?,?)",
        (run_id, total_steps, pace, "running", provider, task_queue, now()),
    )


def finish_run(conn: sqlite3.Connection, run_id: str, status: str, error: str | None = None) -> None:
    conn.execute(
        "UPDATE runs SET status = ?, error = COALESCE(?, error), ended_at = ? WHERE run_id = ?",
        (status, error, now(), run_id),
    )


def record_worker_event(
    conn: sqlite3.Connection,
    event: str,
    pid: int | None,
    identity: str | None = None,
    run_id: str | None = None,
    step: int | None = None,
    detail: str | None = None,
    at: float | None = None,
) -> int:
    cur = conn.execute(
        "INSERT INTO worker_events(at, event, pid, identity, run_id, step, detail) VALUES(?,?,?,?,?,?,?)",
        (at or now(), event, pid, identity, run_id, step, detail),
    )
    return int(cur.lastrowid or 0)


def latest_run_id(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT run_id FROM runs ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
    return row["run_id"] if row else None


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT: takes the write lock up front so check-then-write is atomic."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
