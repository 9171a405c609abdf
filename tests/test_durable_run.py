"""Integration: real dev server, real worker process, the real ledger."""

from __future__ import annotations

import subprocess
import sys

from checkpoint_tui.headless import wait_for_run
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.runs import start_run
from checkpoint_tui.snapshot import build_snapshot


async def test_twelve_steps_exactly_once(home, client, supervisor, temporal_address):
    run_id = await start_run(home, client, steps=12, pace=0)
    assert await wait_for_run(home, client, run_id, timeout=120) == "COMPLETED"

    conn = connect(home.db_path)
    snap = build_snapshot(conn, home, run_id)
    assert snap.ledger_rows == 36
    assert snap.duplicates == 0
    assert snap.outbox_lines == 12 and snap.outbox_duplicates == 0
    assert snap.artifact_files == 12
    assert snap.notes_rows == 12
    assert [s.step for s in snap.steps] == list(range(1, 13))
    assert all(s.status == "completed" and s.worker_pid for s in snap.steps)
    assert snap.outcome_counts["applied"] == 36

    # The recorded history replays against the current workflow code without nondeterminism.
    replay = subprocess.run(
        [sys.executable, "-m", "checkpoint_tui.engine.replay", "--address", temporal_address, run_id],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "no nondeterminism" in replay.stdout
