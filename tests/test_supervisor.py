"""The supervisor against real processes: identity checks, external kill -9, adoption."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

from temporalio.api.enums.v1 import PendingActivityState

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.procs import ProcIdentity, send_signal_if_ours, write_json
from checkpoint_tui.ops.supervisor import Supervisor
from conftest import run_cli


def test_foreign_pid_is_never_signalled(home, temporal_address):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        real = ProcIdentity.of(sleeper.pid)
        assert real is not None
        forged_time = ProcIdentity(real.pid, real.create_time - 100, real.cmdline)
        forged_cmd = ProcIdentity(real.pid, real.create_time, ("python", "-m", "checkpoint_tui.worker"))
        assert not send_signal_if_ours(forged_time, signal.SIGKILL)
        assert not send_signal_if_ours(forged_cmd, signal.SIGKILL)

        # A worker record naming the sleeper (as after pid reuse) is not adopted, and not signalled.
        write_json(home.run_dir / "worker.json", {"identity": forged_cmd.to_dict(), "name": "w-x", "role": "active"})
        (home.run_dir / "worker.pid").write_text(f"{sleeper.pid}\n")
        assert worker_proc.load(home, "active") is None
        sup = Supervisor(home, temporal_address, spare=False)
        try:
            worker = sup.ensure_worker()
            assert worker.pid != sleeper.pid
        finally:
            worker_proc.stop(home, worker)
        assert sleeper.poll() is None, "the foreign process was signalled"
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_external_kill_is_noticed_within_200ms(home, client, supervisor):
    run_id = await start_run(home, client, steps=6, pace=0.3)
    conn = connect(home.db_path)
    await _until(
        lambda: conn.execute("SELECT COUNT(*) FROM activity_log WHERE run_id=? AND step=2", (run_id,)).fetchone()[0]
    )
    victim = supervisor.primary
    assert victim is not None
    killed_at = time.time()
    os.kill(victim.pid, signal.SIGKILL)  # "kill -9 from another terminal"
    assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    died = conn.execute("SELECT * FROM worker_events WHERE event = 'died' AND pid = ?", (victim.pid,)).fetchone()
    assert died is not None
    assert died["at"] - killed_at <= 0.2, f"noticed after {died['at'] - killed_at:.3f}s"
    replacement = conn.execute(
        "SELECT * FROM worker_events WHERE event IN ('promote','respawn') AND id > ?", (died["id"],)
    ).fetchone()
    assert replacement is not None and replacement["pid"] != victim.pid
    snap = build_snapshot(conn, home, run_id)
    assert snap.duplicates == 0 and snap.outbox_lines == 6 and snap.completed_steps == 6


def test_start_wait_survives_outside_kill(home):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "checkpoint_tui",
            "--home",
            str(home.home),
            "--temporal-address",
            home.temporal_address,
            "start",
            "--steps",
            "6",
            "--pace",
            "0.3",
            "--wait",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        run_id = proc.stdout.readline().strip()
        conn = connect(home.db_path)
        deadline = time.monotonic() + 30
        while not conn.execute("SELECT COUNT(*) FROM activity_log WHERE run_id=? AND step=2", (run_id,)).fetchone()[0]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        pid = int((home.run_dir / "worker.pid").read_text())
        os.kill(pid, signal.SIGKILL)  # kill -9 $(cat run/worker.pid)
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    status = json.loads(run_cli("status", run_id, "--json", home=home).stdout)
    assert status["workflow_status"] == "COMPLETED" and status["duplicates"] == 0 and status["outbox_lines"] == 6
    assert pid in status["worker_pids"] and len(status["worker_pids"]) >= 2
    events = [
        r["event"] for r in connect(home.db_path).execute("SELECT event FROM worker_events WHERE pid = ?", (pid,))
    ]
    assert "died" in events
    run_cli("stop", home=home)


async def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_a_stop_right_after_the_start_is_not_lost(home, temporal_address):
    """stop() may come before the supervisor's thread has made its stop Event (or while it connects to
    Temporal): the request must still end the thread at once, not after the 10 s join timeout with the
    thread left watching (and respawning) behind it."""
    for _ in range(5):
        sup = Supervisor(home, temporal_address, spare=False)
        sup.start()
        t = time.monotonic()
        await sup.stop()
        assert time.monotonic() - t < 3.0 and not sup._thread.alive


async def test_a_worker_that_died_between_supervisors_has_its_attempt_failed_over_by_the_next(
    home, client, temporal_address
):
    """A chaos run's supervisor is killed and, before its successor takes over, so is the worker (on a
    loaded machine: a model request then waited out its 60 s timeout). The successor finds it dead, says
    so, and fails its pending attempt at once, as it would for a death it saw."""
    first = Supervisor(home, temporal_address)
    assert first.acquire()
    worker = first.ensure_worker()
    first.release()  # the supervisor is gone; its worker runs on, unwatched
    # steps of 3 s under a 30 s heartbeat timeout: the killed step is still pending when the successor
    # connects, and only its failover (not Temporal's timeout) lets the run finish within 20 s
    run_id = await start_run(home, client, steps=4, pace=3.0, heartbeat_timeout_s=30.0)
    conn = connect(home.db_path)
    await _until(
        lambda: conn.execute("SELECT COUNT(*) FROM activity_log WHERE run_id=? AND step=2", (run_id,)).fetchone()[0]
    )
    handle = client.get_workflow_handle(run_id)
    started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    for _ in range(600):  # killed while it holds one of its activities (not in a timer, nor before a poll took it)
        if any(p.state == started for p in (await handle.describe()).raw_description.pending_activities):
            break
        await asyncio.sleep(0.02)
    os.kill(worker.pid, signal.SIGKILL)
    await _until(lambda: not worker.alive())
    second = Supervisor(home, temporal_address)
    assert second.acquire()
    try:
        second.ensure_worker()
        async with second.running(stop_workers=True):
            assert await wait_for_run(home, client, run_id, timeout=20) == "COMPLETED"
    finally:
        await second.stop(stop_workers=True)
    died = conn.execute("SELECT * FROM worker_events WHERE event = 'died' AND pid = ?", (worker.pid,)).fetchone()
    assert died is not None and died["detail"] == "found dead by the supervisor that took over"
    # the first pass, or the late one 1.5 s after it (an attempt handed to the dead worker's last poll)
    assists = conn.execute("SELECT * FROM worker_events WHERE event = 'assist' AND pid = ?", (worker.pid,)).fetchall()
    failed = [name for a in assists for name in json.loads(a["detail"])["failed_activities"]]
    assert any(name.startswith(f"{run_id}:") for name in failed), [dict(a) for a in assists]
    assert build_snapshot(conn, home, run_id).duplicates == 0
