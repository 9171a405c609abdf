"""The ledger's tables and their versioned migrations, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from checkpoint_tui.ledger.backend import Ledger

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
    first_execution TEXT,
    kind TEXT NOT NULL DEFAULT 'agent-loop',
    workflow_type TEXT
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    worker_pid INTEGER,
    started_pid INTEGER,
    worker_host TEXT,
    started_host TEXT,
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
    host TEXT,
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
    host TEXT,
    outcome TEXT,
    started_at REAL NOT NULL,
    finished_at REAL,
    found_written INTEGER
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
    host TEXT,
    identity TEXT,
    run_id TEXT,
    step INTEGER,
    detail TEXT,
    restart_s REAL,
    next_step_s REAL
);
"""

# Columns added after a table was first shipped: a ledger made before migrations were versioned has
# the table without them, and CREATE TABLE IF NOT EXISTS does not add them.
LATER_COLUMNS = (
    ("steps", "touched_at", "REAL"),
    ("steps", "answer_note", "TEXT"),
    ("runs", "first_execution", "TEXT"),
    ("steps", "worker_host", "TEXT"),
    ("steps", "started_host", "TEXT"),
    ("activity_log", "host", "TEXT"),
    ("effect_outcomes", "host", "TEXT"),
    ("worker_events", "host", "TEXT"),
)


def _create_tables(ledger: Ledger) -> None:
    for table, name, decl in LATER_COLUMNS:
        existing = ledger.columns(table)
        if existing and name not in existing:  # before the indexes below, which may name them
            ledger.execute(ledger.ddl(f"ALTER TABLE {table} ADD COLUMN {name} {decl}"))
    for statement in SCHEMA.split(";"):
        if statement.strip():
            ledger.execute(ledger.ddl(statement))


def _ledger_identity(ledger: Ledger) -> None:
    """A random id for this ledger: hosts sharing it derive one task queue from it, and two ledgers that
    merely look alike (same host, port and database name on different machines) never share one."""
    ledger.execute(ledger.ddl("CREATE TABLE IF NOT EXISTS ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"))
    ledger.execute(
        "INSERT INTO ledger_meta(key, value) VALUES('ledger_id', ?) ON CONFLICT(key) DO NOTHING",
        (secrets.token_hex(16),),
    )


def _notes_once(ledger: Ledger) -> None:
    """One note per effect id of a durable run, enforced by the database too (the naive loop's runs
    are left out: their repeated notes are the lesson they exist to show); and the index a poller
    needs to find an effect's claim attempts."""
    ledger.execute(
        "CREATE UNIQUE INDEX IF NOT EXISTS notes_effect_once ON notes(effect_id) WHERE run_id NOT LIKE 'naive-%'"
    )
    ledger.execute("CREATE INDEX IF NOT EXISTS effect_outcomes_effect ON effect_outcomes(effect_id)")


def _found_written(ledger: Ledger) -> None:
    """Whether a claim attempt found its write already done (1) or did it (0): what tells a kill
    between the write and the stamp from one between the claim and the write (proof/chaos/kill_windows.py)."""
    if "found_written" not in ledger.columns("effect_outcomes"):
        ledger.execute(ledger.ddl("ALTER TABLE effect_outcomes ADD COLUMN found_written INTEGER"))


def _run_kinds(ledger: Ledger) -> None:
    """Which workload each run is (`agent-loop`, our loop; `workflow`, a user's workflow, with its type),
    a column of its own. Ledgers written before it marked a user's workflow only in `provider`, as
    `workflow:TYPE` (or `foreign:TYPE`, earlier still): those runs are moved to the columns."""
    existing = ledger.columns("runs")
    for name, decl in (("kind", "TEXT NOT NULL DEFAULT 'agent-loop'"), ("workflow_type", "TEXT")):
        if name not in existing:
            ledger.execute(ledger.ddl(f"ALTER TABLE runs ADD COLUMN {name} {decl}"))
    marked = ledger.execute(
        "SELECT run_id, provider FROM runs WHERE provider LIKE 'workflow:%' OR provider LIKE 'foreign:%'"
    ).fetchall()
    for run_id, provider in marked:
        ledger.execute(
            "UPDATE runs SET kind = 'workflow', workflow_type = ?, provider = NULL WHERE run_id = ?",
            (provider.split(":", 1)[1], run_id),
        )


# Append only: (version, what it does, how). A host applies the ones its ledger lacks, in order.
MIGRATIONS: tuple[tuple[int, str, Callable[[Ledger], None]], ...] = (
    (1, "tables", _create_tables),
    (2, "ledger identity", _ledger_identity),
    (3, "one note per durable effect", _notes_once),
    (4, "which claim attempts found their write done", _found_written),
    (5, "runs name their workload", _run_kinds),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
MIGRATION_WAIT_S = 60.0  # a host may wait this long behind another host's migration


def ensure_schema(ledger: Ledger) -> int:
    """Apply the migrations this ledger lacks, in one locked transaction: two hosts starting at once
    queue on the lock instead of racing to create the same tables. Returns the schema version."""
    if _current_version(ledger) == SCHEMA_VERSION:
        return SCHEMA_VERSION  # the common case: no write lock taken
    with ledger.transaction("checkpoint-schema", wait_s=MIGRATION_WAIT_S):
        ledger.execute(
            ledger.ddl(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
        )
        done = {r[0] for r in ledger.execute("SELECT version FROM schema_migrations")}
        for version, name, apply in MIGRATIONS:
            if version not in done:
                apply(ledger)
                ledger.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES(?,?,?)",
                    (version, name, time.time()),
                )
    return SCHEMA_VERSION


def _current_version(ledger: Ledger) -> int:
    if "version" not in ledger.columns("schema_migrations"):
        return 0
    row = ledger.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)
