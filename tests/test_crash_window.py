"""A real process dies inside the claim -> stamp window; the next attempt finishes the effect
(`recovered`) with byte-identical content and no duplicate. On both ledger backends."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_tui.ledger.effects import EffectSpec, apply_effect_once, outbox_path, physical_for, step_file
from checkpoint_tui.ledger.store import connect

CHILD = Path(__file__).with_name("crash_child.py")
PAYLOAD = "# Step 007\n\nbytes that must not change: \u00e9\u2603\n"


def run_child(target: str, tmp_path: Path, kind: str, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHILD), target, str(tmp_path / "art"), kind, mode, PAYLOAD],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("kind", ["file", "db", "email"])
@pytest.mark.parametrize("mode", ["after_claim", "after_write"])
def test_killed_writer_is_recovered(ledger_target: str, tmp_path: Path, kind: str, mode: str) -> None:
    child = run_child(ledger_target, tmp_path, kind, mode)
    assert child.returncode == -signal.SIGKILL, child.stderr

    conn = connect(ledger_target)
    row = conn.execute("SELECT applied_at FROM effects WHERE id = 'run-c:7:' || ?", (kind,)).fetchone()
    assert row is not None and row["applied_at"] is None  # the claim is there, the stamp is not

    art = tmp_path / "art"
    first_file = step_file(art, "run-c", 7).read_bytes() if kind == "file" and mode == "after_write" else None
    spec = EffectSpec("run-c", 7, kind, PAYLOAD, 2, 999, "run-c")
    assert apply_effect_once(conn, spec, physical_for(kind, conn, art)) == "recovered"
    assert apply_effect_once(conn, spec, physical_for(kind, conn, art)) == "skipped"

    assert conn.execute("SELECT COUNT(*) - COUNT(DISTINCT id) FROM effects").fetchone()[0] == 0
    outcomes = [r[0] for r in conn.execute("SELECT COALESCE(outcome,'interrupted') FROM effect_outcomes ORDER BY seq")]
    assert outcomes == ["interrupted", "recovered", "skipped"]
    if kind == "file":
        data = step_file(art, "run-c", 7).read_bytes()
        assert data == PAYLOAD.encode()
        if first_file is not None:
            assert data == first_file
    elif kind == "db":
        assert [r["text"] for r in conn.execute("SELECT text FROM notes")] == [PAYLOAD]
    else:
        lines = outbox_path(art, "run-c").read_text().splitlines()
        assert len([line for line in lines if line.startswith("run-c:7:email\t")]) == 1
