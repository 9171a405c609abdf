"""The ledger in-process: the three branches of apply_effect_once, the merge rules, fault plans."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.effects import (
    EffectSpec,
    append_outbox,
    apply_effect_once,
    outbox_path,
    physical_for,
    step_file,
)
from checkpoint_tui.ledger.store import connect, upsert_step


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    return connect(tmp_path / "run" / "checkpoint.db")


def spec(kind: str = "file", attempt: int = 1, payload: str = "hello\n") -> EffectSpec:
    return EffectSpec("run-x", 3, kind, payload, attempt, 111, "run-x")


def outcomes(conn: sqlite3.Connection) -> list[str]:
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
    append_outbox(tmp_path, s, recovering=False)
    append_outbox(tmp_path, s, recovering=True)  # the first writer appended, then died before the stamp
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
    "text", ["boom:1", "transient", "transient:x", "garble:0", "crash_after_claim:2:fax", "kill_at:1:2"]
)
def test_parse_fault_rejects(text):
    with pytest.raises(ValueError):
        faults.parse_fault(text)


def test_faults_fire_exactly_count_times(conn):
    faults.add_fault(conn, "r", faults.FaultSpec("transient", 2, count=2))
    fired = [faults.consume(conn, "r", 2, "transient") for _ in range(4)]
    assert fired == [True, True, False, False]
    assert not faults.consume(conn, "r", 3, "transient")
