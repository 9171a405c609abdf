"""The hung-worker watchdog against real processes: a SIGSTOPped worker is killed, reaped and replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from checkpoint_tui.app.runs import start_run, wait_for_run
from checkpoint_tui.app.snapshot import build_snapshot
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import watchdog
from checkpoint_tui.ops.procs import ProcIdentity, send_signal_if_ours
from checkpoint_tui.waiting import wait_until


async def test_stopped_process_is_hung_after_the_grace_unless_held(home):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        # a process just exec'd may still be in D (paging in) for a moment: wait for it to run or sleep
        await wait_until(lambda: watchdog.proc_state(sleeper.pid) in ("S", "R"), 5, what="the sleeper running")
        ident = ProcIdentity.of(sleeper.pid)
        assert ident is not None
        dog = watchdog.Watchdog(home, grace_s=0.2)
        assert dog.check([(sleeper.pid, ident)]) == [] and not dog.watching_stop
        os.kill(sleeper.pid, signal.SIGSTOP)
        await wait_until(lambda: watchdog.proc_state(sleeper.pid) == "T", 5, what="stopped")
        assert dog.check([(sleeper.pid, ident)]) == [] and dog.watching_stop  # inside the grace
        await wait_until(lambda: dog.check([(sleeper.pid, ident)]), 3, what="the grace to pass")
        at_once = watchdog.Watchdog(home, grace_s=0.0)
        watchdog.hold(home, ident, 30)  # a deliberate pause: held off
        assert watchdog.held(home, ident) and at_once.check([(sleeper.pid, ident)]) == []
        watchdog.release(home, ident)
        (hang,) = at_once.check([(sleeper.pid, ident)])
        assert hang.pid == sleeper.pid and hang.reason.startswith("hung: stopped (SIGSTOP) for ")
        os.kill(sleeper.pid, signal.SIGCONT)
        await wait_until(lambda: watchdog.proc_state(sleeper.pid) != "T", 5, what="continued")
        assert dog.check([(sleeper.pid, ident)]) == [] and not dog.watching_stop
    finally:
        sleeper.kill()
        sleeper.wait()
    assert watchdog.proc_state(sleeper.pid) is None


async def test_sigstopped_worker_is_killed_and_replaced(home, client, supervisor):
    run_id = await start_run(home, client, steps=6, pace=0.3)
    conn = connect(home.db_path)
    await wait_until(lambda: queries.activity_logged(conn, run_id, 2, "llm"), 30, what="step 2's model call")
    victim = supervisor.primary
    assert victim is not None
    stopped_at = time.time()
    os.kill(victim.pid, signal.SIGSTOP)  # "kill -STOP from another terminal": alive, but going nowhere
    try:
        assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    finally:
        send_signal_if_ours(victim.ident, signal.SIGKILL)  # never leave a stopped worker behind
    assert not victim.ident.exists(), "the stopped worker was left behind"
    kill = conn.execute("SELECT * FROM worker_events WHERE event = 'kill' AND pid = ?", (victim.pid,)).fetchone()
    assert kill is not None, "no kill event for the stopped worker"
    detail = json.loads(kill["detail"])
    assert detail["reason"].startswith("hung: stopped (SIGSTOP) for ") and detail["confirmed"], detail
    assert 1.0 <= kill["at"] - stopped_at <= 2.5, f"killed {kill['at'] - stopped_at:.2f} s after the stop"
    resumed = queries.first_activity_after(conn, run_id, kill["at"])
    assert resumed is not None and resumed - stopped_at <= 4.0, f"stop -> next activity {resumed - stopped_at:.2f} s"
    snap = build_snapshot(conn, home, run_id)
    assert snap.duplicates == 0 and snap.outbox_lines == 6 and snap.completed_steps == 6
    assert supervisor.primary is not None and supervisor.primary.pid != victim.pid
