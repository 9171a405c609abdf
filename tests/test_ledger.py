"""The ledger in-process, on both backends (SQLite and a real PostgreSQL): the three branches of
apply_effect_once, concurrent claims, the merge rules, fault plans, versioned schema creation."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.backend import Ledger, open_ledger, redact_url
from checkpoint_tui.ledger.effects import (
    EffectSpec,
    append_outbox,
    apply_effect_once,
    claim_effect,
    outbox_path,
    physical_for,
    step_file,
)
from checkpoint_tui.ledger.schema import MIGRATIONS, SCHEMA_VERSION, ensure_schema
from checkpoint_tui.ledger.store import close_all, connect, upsert_step
from checkpoint_tui.ops.procs import free_port


@pytest.fixture
def conn(ledger_target: str) -> Ledger:
    return connect(ledger_target)


def spec(kind: str = "file", attempt: int = 1, payload: str = "hello\n") -> EffectSpec:
    return EffectSpec("run-x", 3, kind, payload, attempt, 111, "run-x")


def outcomes(conn: Ledger) -> list[str]:
    return [r[0] for r in conn.execute("SELECT COALESCE(outcome, 'interrupted') FROM effect_outcomes ORDER BY seq")]


def test_applied_then_skipped(conn, tmp_path):
    writes = []
    assert apply_effect_once(conn, spec(), lambda s, rec: writes.append(rec)) == "applied"
    assert apply_effect_once(conn, spec(attempt=2), lambda s, rec: writes.append(rec)) == "skipped"
    assert writes == [False]
    row = conn.execute("SELECT COUNT(*) AS n, MIN(applied_at) AS a FROM effects").fetchone()
    assert row["n"] == 1 and row["a"] is not None
    assert outcomes(conn) == ["applied", "skipped"]


def test_unstamped_claim_is_recovered(conn):
    conn.execute(
        "INSERT INTO effects(id, run_id, step, kind, payload, attempt, claimed_at) VALUES(?,?,?,?,?,?,?)",
        ("run-x:3:file", "run-x", 3, "file", "hello\n", 1, 1.0),
    )
    writes = []
    assert apply_effect_once(conn, spec(attempt=2), lambda s, rec: writes.append(rec)) == "recovered"
    assert writes == [True]
    assert conn.execute("SELECT applied_at FROM effects").fetchone()[0] is not None
    assert conn.execute("SELECT COUNT(*) - COUNT(DISTINCT id) FROM effects").fetchone()[0] == 0


def test_outbox_recovery_does_not_append_twice(tmp_path):
    s = spec("email", payload="to=x\tsubject=y")
    append_outbox(tmp_path, s, check=False)
    append_outbox(tmp_path, s, check=True)  # the first writer appended, then died before the stamp
    lines = outbox_path(tmp_path, "run-x").read_text().splitlines()
    assert lines == ["run-x:3:email\tto=x\tsubject=y"]


def test_note_recovery_does_not_insert_twice(conn, tmp_path):
    write = physical_for("db", conn, tmp_path)
    write(spec("db", payload="note"), False)
    write(spec("db", payload="note"), True)
    assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1


def test_file_effect_writes_payload(conn, tmp_path):
    apply_effect_once(conn, spec("file", payload="# step\n"), physical_for("file", conn, tmp_path))
    assert step_file(tmp_path, "run-x", 3).read_bytes() == b"# step\n"


def test_step_merge_rules(conn):
    upsert_step(conn, "r", 1, "running", attempt=1, worker_pid=10, started_pid=10, started_at=100.0)
    upsert_step(conn, "r", 1, "running", attempt=3, worker_pid=20)  # llm retried on another worker
    upsert_step(conn, "r", 1, "running", attempt=1, worker_pid=20, started_pid=20, started_at=200.0)
    upsert_step(conn, "r", 1, "completed", attempt=1, worker_pid=20, ended_at=300.0)
    upsert_step(conn, "r", 1, "running", attempt=2, worker_pid=30)  # a stale late writer
    row = conn.execute("SELECT * FROM steps WHERE run_id = 'r'").fetchone()
    assert row["attempt"] == 3  # MAX
    assert row["started_at"] == 100.0 and row["started_pid"] == 10  # first writer
    assert row["status"] == "completed" and row["worker_pid"] == 20  # completion wins, pid of the completer
    assert row["ended_at"] == 300.0


def test_unknown_step_column_rejected(conn):
    with pytest.raises(ValueError):
        upsert_step(conn, "r", 1, "running", bogus=1)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("transient:3:2", faults.FaultSpec("transient", 3, count=2)),
        ("transient:3", faults.FaultSpec("transient", 3, count=1)),
        ("garble:4", faults.FaultSpec("garble", 4)),
        ("crash_after_claim:5:email", faults.FaultSpec("crash_after_claim", 5, effect_kind="email")),
        ("crash-after-claim:5", faults.FaultSpec("crash_after_claim", 5, effect_kind="file")),
        ("kill_at:6", faults.FaultSpec("kill_at", 6)),
    ],
)
def test_parse_fault(text, expected):
    assert faults.parse_fault(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "boom:1",
        "transient",
        "transient:x",
        "garble:0",
        "crash_after_claim:2:fax",
        "kill_at:1:2",
        "crash_after_write:3:file:extra",
        "transient:3:2:9",
        "kill_at: 3",
        "kill_at:+3",
        "kill_at:1_0",
        "kill_at:\u0663",
        "transient:3:\u0662",
        "crash_after_write::file",
        "crash_after_write:3:",
    ],
)
def test_parse_fault_rejects(text):
    with pytest.raises(ValueError):
        faults.parse_fault(text)


def test_a_bad_fault_is_echoed_bounded():
    with pytest.raises(ValueError) as err:
        faults.parse_fault("kill_at:" + "9" * 100_000)
    assert len(str(err.value)) < 200 and "..." in str(err.value) and "between 1 and 100000" in str(err.value)


def test_faults_fire_exactly_count_times(conn):
    faults.add_fault(conn, "r", faults.FaultSpec("transient", 2, count=2))
    fired = [faults.consume(conn, "r", 2, "transient") for _ in range(4)]
    assert fired == [True, True, False, False]
    assert not faults.consume(conn, "r", 3, "transient")


def _in_threads(n: int, fn) -> list:
    """Run fn(i) in n threads released at once, each with its own ledger connection."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


@pytest.mark.parametrize("kind", ["file", "db", "email"])
def test_concurrent_writers_apply_once(ledger_target, tmp_path, kind):
    """Eight writers (as if on several hosts) race for one effect: one claim, one row, one line."""
    art = tmp_path / "shared-artifacts"

    def write(i: int) -> str:
        conn = connect(ledger_target)
        return apply_effect_once(conn, spec(kind, attempt=i + 1, payload="p"), physical_for(kind, conn, art))

    outcomes_seen = _in_threads(8, write)
    assert outcomes_seen.count("applied") == 1
    assert set(outcomes_seen) <= {"applied", "skipped", "recovered"}
    conn = connect(ledger_target)
    assert conn.execute("SELECT COUNT(*) FROM effects").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM effects WHERE applied_at IS NULL").fetchone()[0] == 0
    if kind == "db":
        assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1
    if kind == "email":
        assert len(outbox_path(art, "run-x").read_text().splitlines()) == 1


def test_schema_created_once_when_hosts_start_together(ledger_target):
    versions = _in_threads(6, lambda i: ensure_schema(open_ledger(ledger_target)))
    assert versions == [SCHEMA_VERSION] * 6
    rows = connect(ledger_target).execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == [v for v, _, _ in MIGRATIONS]


def test_legacy_sqlite_ledger_is_migrated(tmp_path):
    """A ledger made before versioned migrations: tables without the later columns, no version table."""
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.executescript(
        "CREATE TABLE steps (run_id TEXT NOT NULL, step INTEGER NOT NULL, status TEXT NOT NULL, "
        "attempt INTEGER NOT NULL DEFAULT 1, worker_pid INTEGER, PRIMARY KEY (run_id, step));"
        "INSERT INTO steps(run_id, step, status) VALUES('old', 1, 'completed');"
    )
    raw.close()
    conn = connect(path)
    assert {"touched_at", "answer_note", "worker_host"} <= conn.columns("steps")
    assert conn.execute("SELECT status FROM steps WHERE run_id = 'old'").fetchone()[0] == "completed"
    assert conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] == SCHEMA_VERSION


def test_unreachable_postgres_is_a_clear_error_without_the_password():
    url = f"postgresql://ck:s3cret@127.0.0.1:{free_port()}/ledger?connect_timeout=2"
    with pytest.raises(Unavailable) as info:
        connect(url)
    assert "cannot open the PostgreSQL ledger" in str(info.value)
    assert "s3cret" not in str(info.value)
    assert redact_url(url).startswith("postgresql://ck:***@127.0.0.1:")


def test_concurrent_fault_consumers_fire_exactly_count_times(ledger_target):
    faults.add_fault(connect(ledger_target), "r", faults.FaultSpec("transient", 2, count=3))
    fired = _in_threads(8, lambda i: faults.consume(connect(ledger_target), "r", 2, "transient"))
    assert fired.count(True) == 3


def test_postgres_connection_dropped_by_the_server_is_reopened(pg_url):
    """A server restart or failover drops the connection: that statement fails (its activity is
    retried by Temporal) and the next one runs on a new connection instead of the dead one."""
    import psycopg

    conn = connect(pg_url)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(Unavailable, match="dropped the connection"):  # one line, no password
        conn.execute("SELECT 1").fetchone()
    assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
    assert apply_effect_once(conn, spec("db"), physical_for("db", conn, Path("."))) == "applied"


def test_one_note_per_durable_effect_even_without_the_check(conn):
    """The unique index (migration 3): an unchecked second insert of a durable run's note adds no row;
    the naive loop's runs keep their repeated notes (that is the lesson they show)."""
    from checkpoint_tui.ledger.effects import insert_note

    durable = EffectSpec("run-20260101-000000-beef", 1, "db", "note", 1, 1, "run-20260101-000000-beef")
    naive = EffectSpec("naive-20260101-000000-beef", 1, "db", "note", 1, 1, "naive-20260101-000000-beef")
    for s in (durable, durable, naive, naive):
        insert_note(conn, s, check=False)
    counts = dict(conn.execute("SELECT run_id, COUNT(*) FROM notes GROUP BY run_id").fetchall())
    assert counts == {durable.run_id: 1, naive.run_id: 2}


def test_the_ledger_has_an_id_of_its_own(conn, ledger_target):
    from checkpoint_tui.ledger.queries import ledger_id

    first = ledger_id(conn)
    assert len(first) == 32 and ensure_schema(conn) == SCHEMA_VERSION and ledger_id(conn) == first


@pytest.mark.parametrize("run_id", ["run-20260101-000000-beef", "naive-20260101-000000-beef"])
def test_a_stuck_postgres_lock_fails_fast_instead_of_stalling(pg_url, run_id):
    """A stuck writer holds what the note's check-then-write waits on: for a durable run, the same
    note inserted in a transaction that never ends (the unique index makes the insert wait on it); for
    the naive loop's notes, which no index covers, the effect's advisory lock. The write gives up after
    the session's lock_timeout (1.5 s) with one clear error, so the activity is retried instead of
    blocking the worker's event loop and its heartbeats."""
    import time

    import psycopg

    from checkpoint_tui.ledger.effects import insert_note

    conn = connect(pg_url)
    stuck = EffectSpec(run_id, 1, "db", "note", 1, 1, run_id)
    with psycopg.connect(pg_url) as holder:  # not autocommit: its transaction stays open
        if run_id.startswith("naive-"):
            holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (stuck.id,))
        else:
            holder.execute(
                "INSERT INTO notes(effect_id, run_id, step, text) VALUES(%s, %s, 1, 'other')", (stuck.id, run_id)
            )
        t = time.monotonic()
        with pytest.raises(Unavailable, match="lock"):
            insert_note(conn, stuck, check=True)
        waited = time.monotonic() - t
        holder.rollback()
    assert 1.0 <= waited < 5.0, waited
    assert insert_note(conn, stuck, check=True) is False  # the stuck writer gone: the same write goes through
    assert insert_note(conn, stuck, check=True) is True  # and a second finds it there
    assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] == 1


@pytest.mark.parametrize("before", ["nothing", "an unstamped claim"])
def test_a_stamp_committed_while_our_claim_waits_is_read_after_the_wait(pg_url, before):
    """On PostgreSQL the claim is one statement, whose reads see the table as it began. Another
    attempt, holding the effect's row in an open transaction when ours starts (inserting its claim
    stamped in one go, or stamping a claim that was already there), commits while ours waits on the
    conflict: ours must read the row again and come back 'skipped', not 'recovered' (which would
    redo a write that is done) and never 'applied'."""
    import time

    import psycopg

    conn = connect(pg_url)
    spec = EffectSpec("run-20260101-000000-beef", 1, "file", "p", 2, 1, "run-20260101-000000-beef")
    claim = "INSERT INTO effects(id, run_id, step, kind, payload, attempt, claimed_at, applied_at) "
    if before == "an unstamped claim":
        conn.execute(claim + "VALUES(?, ?, 1, 'file', 'p', 1, 0, NULL)", (spec.id, spec.run_id))
    result: dict = {}
    with psycopg.connect(pg_url) as other:  # not autocommit: its write stays uncommitted until commit()
        if before == "nothing":
            other.execute(claim + "VALUES(%s, %s, 1, 'file', 'p', 1, 0, 1)", (spec.id, spec.run_id))
        else:
            other.execute("UPDATE effects SET applied_at = 1 WHERE id = %s", (spec.id,))

        def claim_it() -> None:
            try:
                result["claim"] = claim_effect(connect(pg_url), spec)
            finally:
                close_all()  # this thread's own connection

        waiter = threading.Thread(target=claim_it)
        waiter.start()
        deadline = time.monotonic() + 10
        while not conn.execute(  # ours is waiting on the other's row
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO effects%'"
        ).fetchone():
            assert time.monotonic() < deadline, "the claim never waited on the other attempt's"
            time.sleep(0.02)
        other.commit()
        waiter.join(10)
    assert result["claim"].outcome == "skipped"
    assert conn.execute("SELECT COUNT(*) FROM effect_outcomes WHERE effect_id = ?", (spec.id,)).fetchone()[0] == 1
