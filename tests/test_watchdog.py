"""The hung-worker watchdog against real processes: a SIGSTOPped worker is killed, reaped and replaced."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
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


async def test_a_silent_beat_is_a_hang_but_not_a_missing_an_older_or_an_excused_one(home):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        await wait_until(lambda: watchdog.proc_state(sleeper.pid) in ("S", "R"), 5, what="the sleeper running")
        ident = ProcIdentity.of(sleeper.pid)
        assert ident is not None
        dog = watchdog.Watchdog(home, beat_stale_s=0.5)
        beat = home.beat_file(sleeper.pid)
        assert dog.check([(sleeper.pid, ident)]) == []  # no beat yet: still starting
        beat.touch()
        os.utime(beat, (ident.create_time - 5, ident.create_time - 5))  # a previous process's, same pid
        assert dog.check([(sleeper.pid, ident)]) == []
        last = ident.create_time + 0.01  # its own last beat, then silence
        os.utime(beat, (last, last))
        await wait_until(lambda: dog.check([(sleeper.pid, ident)]), 5, what="the beat to go stale")
        os.utime(beat, (last, last))
        (hang,) = dog.check([(sleeper.pid, ident)])
        assert hang.pid == sleeper.pid and hang.reason.startswith("hung: no liveness beat for ")
        assert 0.5 <= hang.stopped_s < 10
        watchdog.hold(home, ident, 30)  # a deliberate pause holds off the beat check too
        assert dog.check([(sleeper.pid, ident)]) == []
        watchdog.release(home, ident)
        os.utime(beat)  # beating again
        assert dog.check([(sleeper.pid, ident)]) == []
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_a_worker_frozen_in_an_activity_is_killed_for_its_silent_beat(home, client, supervisor):
    """A `freeze` fault blocks the worker's event loop inside step 2's model call (alive, state S,
    no polls, no heartbeats): the watchdog finds its liveness beat silent, kills it, the spare takes over."""
    from checkpoint_tui.ledger.faults import FaultSpec
    from checkpoint_tui.ops.watchdog import BEAT_STALE_S

    run_id = await start_run(home, client, steps=4, pace=0.1, fault_plan=[FaultSpec("freeze", 2)])
    conn = connect(home.db_path)
    assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    kill = conn.execute("SELECT * FROM worker_events WHERE event = 'kill' ORDER BY at").fetchone()
    assert kill is not None, "the frozen worker was not killed"
    detail = json.loads(kill["detail"])
    assert detail["reason"].startswith("hung: no liveness beat for ") and detail["confirmed"], detail
    frozen_at = conn.execute(
        "SELECT MIN(started_at) AS t FROM activity_log WHERE run_id = ? AND step = 2 AND activity = 'llm'", (run_id,)
    ).fetchone()["t"]
    took = kill["at"] - frozen_at
    assert BEAT_STALE_S - 0.5 <= took <= BEAT_STALE_S + 2.0, f"killed {took:.2f} s in"
    snap = build_snapshot(conn, home, run_id)
    assert snap.duplicates == 0 and snap.outbox_lines == 4 and snap.completed_steps == 4
    assert not home.beat_file(kill["pid"]).exists() or kill["pid"] != supervisor.primary.pid
