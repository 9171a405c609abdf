"""Scale-out on real parts: two pools (two homes standing in for two hosts) share one Temporal dev
server, one PostgreSQL ledger and one artifacts root; a local pool of N workers loses one of them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.ledger.store import connect, with_shared_queue
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.procs import identity_after_exec, send_signal_if_ours, stop_process, wait_gone
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.settings import LEDGER_URL_ENV, Settings
from conftest import supervised
from pg_server import PgServer, pg_bindir, running_server

STEPS = 20


class Pool:
    """`checkpoint-tui worker --workers 2` as its own process group, as on another host."""

    def __init__(self, home: Settings, name: str) -> None:
        self.home, self.name = home, name
        argv = [
            sys.executable,
            "-m",
            "checkpoint_tui",
            "--home",
            str(home.home),
            "--temporal-address",
            str(home.temporal_address),
            "--artifacts",
            str(home.artifacts_dir),
            "--workers",
            "2",
            "worker",
        ]
        env = {**os.environ, "CHECKPOINT_HOST": name, LEDGER_URL_ENV: str(home.ledger_url)}
        self.log = home.home / "pool.log"
        home.ensure_dirs()
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        # Not ProcIdentity.of(pid) at once: Popen returns when exec has begun, and for a moment after
        # /proc/PID/cmdline is still empty; an identity taken then never matches, so the SIGKILL in
        # kill_all was refused and proc.wait(10) timed out (the loaded-machine flake).
        self.ident = identity_after_exec(self.proc.pid, argv)

    def wait_ready(self, timeout: float = 60) -> list[worker_proc.WorkerProc]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            if "pool on" in self.log.read_text():
                found = worker_proc.load_all(self.home)
                if len(found) == 3 and all(w.ready(self.home) for w in found):  # 2 active + the spare
                    return found
            time.sleep(0.05)
        raise AssertionError(f"pool {self.name} not ready: {self.log.read_text()}")

    def kill_all(self) -> list[int]:
        """SIGKILL the pool's supervisor first (so nothing respawns), then every worker of it."""
        killed = []
        members = worker_proc.load_all(self.home)
        assert self.ident is not None and send_signal_if_ours(self.ident, signal.SIGKILL), "the kill was refused"
        killed.append(self.proc.pid)
        self.proc.wait(10)
        for w in members:
            if send_signal_if_ours(w.ident, signal.SIGKILL):
                killed.append(w.pid)
        return killed

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the pool stops its own workers
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        for w in worker_proc.load_all(self.home):
            stop_process(w.ident, grace=2.0)


@pytest.fixture
def pools(session_root: Path, temporal_address: str, pg_url: str) -> Iterator[tuple[Pool, Pool]]:
    shared = session_root / f"shared-artifacts-{os.getpid()}-{time.monotonic_ns()}"
    homes = [  # as the CLI builds them: the shared queue named after the ledger's own id
        with_shared_queue(
            Settings(
                home=session_root / f"host-{name}-{time.monotonic_ns()}",
                temporal_address=temporal_address,
                ledger_url=pg_url,
                artifacts_root=shared,
            )
        )
        for name in ("a", "b")
    ]
    started: list[Pool] = []
    try:
        for home, name in zip(homes, ("pool-a", "pool-b"), strict=True):
            started.append(Pool(home, name))
        yield started[0], started[1]
    finally:
        for pool in started:
            pool.stop()


def _hosts_done(conn, run_id: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT worker_host, COUNT(*) AS n FROM steps WHERE run_id = ? AND status = 'completed' GROUP BY worker_host",
        (run_id,),
    ).fetchall()
    return {r["worker_host"]: r["n"] for r in rows}


async def test_two_pools_one_killed_entirely(pools, temporal_address):
    """The pool running the run dies whole (supervisor, workers, spare); the other pool finishes it.
    One run's steps stay on the worker holding its sticky workflow (activities are dispatched eagerly
    to it), so the pool to kill is the one doing the work."""
    ready = {pool.home.home: pool.wait_ready() for pool in pools}
    assert pools[0].home.task_queue == pools[1].home.task_queue  # one shared ledger -> one shared queue

    client = await connect_client(pools[0].home, temporal_address)
    run_id = await start_run(pools[0].home, client, steps=STEPS, pace=0.3)
    conn = connect(pools[0].home.ledger)
    deadline = time.monotonic() + 120
    while sum((done := _hosts_done(conn, run_id)).values()) < 6:
        assert time.monotonic() < deadline, done
        await asyncio.sleep(0.05)
    busy = max(done, key=lambda h: done[h])
    victim, survivor = pools if busy == pools[0].name else pools[::-1]

    killed_at = time.time()
    killed = victim.kill_all()
    members = ready[victim.home.home]
    assert set(killed) >= {victim.proc.pid, *(w.pid for w in members)}
    assert all(wait_gone(w.ident, timeout=5) for w in members)

    assert await wait_for_run(survivor.home, client, run_id, timeout=240) == "COMPLETED"
    snap = build_snapshot(conn, survivor.home, run_id, "COMPLETED")
    assert snap.completed_steps == STEPS and snap.missing_steps == []
    assert snap.duplicates == 0 and snap.unstamped == 0
    assert (snap.outbox_lines, snap.outbox_duplicates) == (STEPS, 0)
    assert (snap.notes_rows, snap.notes_duplicates) == (STEPS, 0)
    assert snap.artifact_files == STEPS
    hosts = _hosts_done(conn, run_id)
    assert set(hosts) == {"pool-a", "pool-b"}, hosts
    labels = set(snap.workers)
    assert any(label.startswith("pool-a/") for label in labels) and any(label.startswith("pool-b/") for label in labels)
    resumed = conn.execute(
        "SELECT MIN(started_at) FROM activity_log WHERE run_id = ? AND host = ? AND started_at > ?",
        (run_id, survivor.name, killed_at),
    ).fetchone()[0]
    print(
        f"\ntwo pools: {victim.name} killed whole at step {sum(done.values())}; {survivor.name} resumed "
        f"the run {resumed - killed_at:.2f} s later (no assist: timeouts only)"
    )
    # the survivor saw no worker die (the victim's supervisor died first): it failed nobody's activities
    assert conn.execute("SELECT COUNT(*) FROM worker_events WHERE event = 'assist'").fetchone()[0] == 0


async def test_local_pool_loses_one_worker_and_keeps_polling(home: Settings, temporal_address: str):
    """--workers 3: SIGKILL one; the other two keep their pids and the slot is refilled."""
    settings = replace(home, pool_size=3)
    async with supervised(settings, temporal_address) as (sup, client):
        pool = sup.pool_workers()
        assert len({w.pid for w in pool}) == 3 and [w.slot for w in pool] == [0, 1, 2]
        run_id = await start_run(settings, client, steps=8, pace=0.2)
        victim = pool[1]
        report = await sup.kill(worker=victim)
        assert report.confirmed and report.pid == victim.pid
        assert [w.pid for w in sup.pool_workers() if w.slot != 1] == [pool[0].pid, pool[2].pid]
        assert sup.pool[1].pid != victim.pid and sup.pool[1].alive()
        assert all(w.alive() for w in sup.pool_workers())
        assert await wait_for_run(settings, client, run_id, timeout=120) == "COMPLETED"
        snap = build_snapshot(connect(settings.ledger), settings, run_id, "COMPLETED")
        assert snap.completed_steps == 8 and snap.duplicates == 0 and snap.outbox_lines == 8
        assert victim.pid not in {w.pid for w in sup.pool_workers()}


@pytest.fixture
def own_pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this test's own, since the test crashes it."""
    bindir = pg_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL binaries not found (the session's pg_server fixture reports why)")
    with running_server(bindir, prefix="ckpt-pg-crash-") as server:
        yield server


async def test_ledger_server_crash_mid_run(home: Settings, temporal_address: str, own_pg_server: PgServer):
    """PostgreSQL dies mid-run (immediate shutdown, crash recovery) and restarts: the activities that
    met the dead connection fail and are retried on a new one; nothing is lost or done twice."""
    settings = replace(home, ledger_url=own_pg_server.new_database())
    async with supervised(settings, temporal_address) as (_, client):
        run_id = await start_run(settings, client, steps=16, pace=0.3)
        conn = connect(settings.ledger)
        done_sql = "SELECT COUNT(*) FROM steps WHERE run_id = ? AND status = 'completed'"
        deadline = time.monotonic() + 60
        while conn.execute(done_sql, (run_id,)).fetchone()[0] < 4:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        before = own_pg_server.postmaster_pid()
        await asyncio.to_thread(own_pg_server.crash_restart)
        restarted_at = time.time()
        assert own_pg_server.postmaster_pid() != before  # it really died and came back
        assert await wait_for_run(settings, client, run_id, timeout=180) == "COMPLETED"
        conn = connect(settings.ledger)
        after = conn.execute(done_sql + " AND ended_at > ?", (run_id, restarted_at)).fetchone()[0]
        assert after >= 1  # the run went on after the restart, on new connections
        retried = conn.execute("SELECT COUNT(*) FROM activity_log WHERE run_id = ? AND attempt > 1", (run_id,))
        print(f"\nledger crash: {after} steps after the restart, {retried.fetchone()[0]} retried activity attempts")
        snap = build_snapshot(conn, settings, run_id, "COMPLETED")
        assert snap.completed_steps == 16 and snap.missing_steps == []
        assert snap.duplicates == 0 and snap.unstamped == 0
        assert (snap.outbox_lines, snap.outbox_duplicates, snap.notes_rows, snap.notes_duplicates) == (16, 0, 16, 0)


async def test_a_zombie_writer_stopped_in_the_claim_window_writes_nothing_twice(home: Settings, temporal_address: str):
    """--workers 2: the worker writing step 3's email is stopped right after its claim (held off from
    the watchdog, as a pause nemesis is). Temporal times its heartbeat out and gives the activity to the
    other worker, which recovers the effect and the run completes. Then the stopped one is continued:
    the zombie finishes its stale write. Outbox, notes and ledger must still hold every effect once."""
    from checkpoint_tui.ledger.faults import FaultSpec
    from checkpoint_tui.ops import watchdog

    settings = replace(home, pool_size=2)
    async with supervised(settings, temporal_address) as (sup, client):
        pool = sup.pool_workers()
        for w in pool:
            watchdog.hold(settings, w.ident, 120)  # this pause is deliberate: the test continues it
        stall = FaultSpec("stop_after_claim", 3, effect_kind="email")
        run_id = await start_run(settings, client, steps=5, pace=0.1, fault_plan=[stall])
        conn = connect(settings.ledger)
        deadline = time.monotonic() + 60
        stopped = []
        while not stopped:
            assert time.monotonic() < deadline, "no worker stopped in the claim window"
            stopped = [w for w in pool if watchdog.proc_state(w.pid) == "T"]
            await asyncio.sleep(0.05)
        zombie = stopped[0]
        try:
            assert await wait_for_run(settings, client, run_id, timeout=90) == "COMPLETED"
            assert watchdog.proc_state(zombie.pid) == "T"  # the run finished without it
            assert send_signal_if_ours(zombie.ident, signal.SIGCONT)
            email = f"{run_id}:3:email"
            deadline = time.monotonic() + 30  # the zombie's stale write and stamp (or its give-up) land
            while (
                conn.execute(
                    "SELECT COUNT(*) FROM effect_outcomes WHERE effect_id = ? AND outcome IS NOT NULL "
                    "AND worker_pid = ?",
                    (email, zombie.pid),
                ).fetchone()[0]
                == 0
            ):
                assert time.monotonic() < deadline, "the continued zombie never finished its write"
                await asyncio.sleep(0.05)
        finally:
            send_signal_if_ours(zombie.ident, signal.SIGCONT)
        snap = build_snapshot(conn, settings, run_id, "COMPLETED")
        assert snap.duplicates == 0 and snap.outbox_lines == 5 and snap.outbox_duplicates == 0
        assert snap.notes_rows == 5 and snap.completed_steps == 5
        attempts = conn.execute(
            "SELECT worker_pid, outcome FROM effect_outcomes WHERE effect_id = ? ORDER BY seq", (email,)
        ).fetchall()
        assert len({a["worker_pid"] for a in attempts}) == 2, [tuple(a) for a in attempts]  # two writers
        assert "recovered" in {a["outcome"] for a in attempts}  # the other worker finished it
