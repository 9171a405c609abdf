"""The embedded supervisor: keeps a pool of N workers polling (plus a warm spare), SIGKILLs one on
request, notices any death within one tick, promotes or respawns into the dead worker's slot, and
helps Temporal notice faster.

Assisted failover: the moment a worker is seen dead, its pending activity attempts (only those whose
last_worker_identity is the dead worker's) are failed by id so Temporal retries them at once instead
of waiting for the heartbeat timeout, and the run's sticky task queue is reset so the next workflow
task does not wait for the dead worker's sticky queue to time out.

Only one supervisor per home may respawn (an flock on run/supervisor.lock); others observe.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import signal
import time
from dataclasses import asdict, dataclass

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetStickyTaskQueueRequest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from checkpoint_tui.config import Settings
from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.latency import in_flight_step, measure, running_run
from checkpoint_tui.ledger.store import HOST, connect, record_worker_event
from checkpoint_tui.ops import devserver, workers
from checkpoint_tui.ops.procs import send_signal_if_ours
from checkpoint_tui.ops.workers import WorkerProc

log = logging.getLogger(__name__)
TICK_S = 0.05
KILL_WAIT_S = 5.0
LATENCY_WAIT_S = 60.0


@dataclass
class KillReport:
    pid: int
    signal: str | None  # observed for our own child; for an adopted worker, the signal we sent
    exit_code: int | None  # a SIGKILL leaves none: never invented
    confirmed: bool  # the pid is gone from the process table
    run_id: str | None
    step: int | None
    at: float
    observed: bool  # True if `signal` was read from waitpid, False if it is only what we sent


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        address: str,
        client: Client | None = None,
        *,
        spare: bool = True,
        assist: bool = True,
        respawn: bool = True,
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.address = address
        self.client = client
        self.use_spare = spare
        self.assist = assist
        self.respawn = respawn
        self.worker_args = worker_args  # extra worker flags, e.g. ("--sticky-timeout", "10")
        self.size = max(1, settings.workers)
        self.pool: dict[int, WorkerProc] = {}  # slot -> active worker
        self.spare: WorkerProc | None = None
        self.state = "starting"  # running | worker-dead | respawning | stopped
        self._lock_fh = None
        self._killed_pids: set[int] = set()
        self._tasks: set[asyncio.Task] = set()
        self._stop = asyncio.Event()
        self._ticks = 0
        self.temporal_restarts = 0

    # --- ownership -------------------------------------------------------------------------------

    def acquire(self) -> bool:
        """Become the home's respawning supervisor; False if another live one holds it."""
        self.settings.ensure_dirs()
        fh = open(self.settings.run_dir / "supervisor.lock", "a+")  # noqa: SIM115 - held for our lifetime
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return False
        self._lock_fh = fh
        return True

    def release(self) -> None:
        if self._lock_fh is not None:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    @property
    def owner(self) -> bool:
        return self._lock_fh is not None

    # --- start / adopt ---------------------------------------------------------------------------

    @property
    def active(self) -> WorkerProc | None:
        """The first slot's worker (the pool's only one unless --workers N)."""
        return self.pool.get(min(self.pool)) if self.pool else None

    def workers(self) -> list[WorkerProc]:
        return [self.pool[slot] for slot in sorted(self.pool)]

    def ensure_worker(self) -> WorkerProc:
        """Adopt the home's live workers, or start them (and a spare, if configured); returns slot 0's."""
        conn = connect(self.settings.ledger)
        live_slots = [s for s in workers.recorded_slots(self.settings) if s >= self.size]
        for slot in [*range(self.size), *live_slots]:
            worker = self._adopt_or_start(conn, slot, required=slot < self.size)
            if worker is not None:
                self.pool[slot] = worker
        if self.use_spare and self.owner:
            self._ensure_spare()
        self.state = "running"
        return self.pool[0]

    def _adopt_or_start(self, conn, slot: int, required: bool) -> WorkerProc | None:
        adopted = workers.load(self.settings, "active", slot)
        if adopted is not None:
            record_worker_event(conn, "adopt", adopted.pid, adopted.name, detail=f"active worker adopted (slot {slot})")
            return adopted
        if not required:
            return None
        spare = workers.load(self.settings, "spare")
        if spare is not None and spare.ready(self.settings) and workers.promote(self.settings, spare, slot):
            record_worker_event(conn, "promote", spare.pid, spare.name, detail=f"spare promoted at start (slot {slot})")
            return spare
        worker = workers.spawn(self.settings, self.address, "active", self.worker_args, slot)
        record_worker_event(conn, "spawn", worker.pid, worker.name, detail=f"active worker (slot {slot})")
        return worker

    def _ensure_spare(self) -> None:
        if self.spare is not None and self.spare.alive():
            return
        existing = workers.load(self.settings, "spare")
        conn = connect(self.settings.ledger)
        if existing is not None:
            self.spare = existing
            record_worker_event(conn, "adopt", existing.pid, existing.name, detail="spare adopted")
            return
        self.spare = workers.spawn(self.settings, self.address, "spare", self.worker_args)
        record_worker_event(conn, "spawn", self.spare.pid, self.spare.name, detail="warm spare (standby)")

    # --- kill ------------------------------------------------------------------------------------

    def kill_target(self) -> WorkerProc | None:
        """The worker running the live step if one of ours is, else the first slot's."""
        conn = connect(self.settings.ledger)
        for worker in self.workers():
            if in_flight_step(conn, worker.pid) is not None:
                return worker
        return self.active

    async def kill(self, reason: str = "user", worker: WorkerProc | None = None) -> KillReport:
        """A real SIGKILL of one worker (default: kill_target()), after checking it is still ours; waits
        for the exit."""
        worker = worker or self.kill_target()
        if worker is None:
            raise RuntimeError("no worker to kill")
        conn = connect(self.settings.ledger)
        flight = in_flight_step(conn, worker.pid)
        run_id, step = flight if flight else (running_run(conn), None)
        at = time.time()
        sent = send_signal_if_ours(worker.ident, signal.SIGKILL)
        if not sent:
            raise RuntimeError(f"worker pid {worker.pid} is no longer ours; not signalled")
        self._killed_pids.add(worker.pid)
        confirmed = await self._wait_exit(worker)
        sig, code = worker.exit_status()
        report = KillReport(worker.pid, sig or "SIGKILL", code, confirmed, run_id, step, at, observed=sig is not None)
        event_id = record_worker_event(
            conn, "kill", worker.pid, worker.name, run_id, step, json.dumps({**asdict(report), "reason": reason}), at
        )
        await self._on_death(worker, event_id, at, run_id, step)
        return report

    async def _wait_exit(self, worker: WorkerProc) -> bool:
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline:
            if not worker.alive():
                return True
            await asyncio.sleep(0.002)
        return not worker.alive()

    # --- watch loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch until stop(): notice deaths within a tick; fire armed kill_at faults."""
        while not self._stop.is_set():
            try:
                await self.tick()
            except Exception:  # a supervisor that crashes helps nobody; report and go on
                log.exception("supervisor tick failed")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), TICK_S)

    async def tick(self) -> None:
        self._ticks += 1
        if self.settings.embedded and self.owner and self._ticks % 5 == 0:
            await self._watch_devserver()
        for worker in self.workers():
            if not worker.alive() and worker.pid not in self._killed_pids:  # else kill() is handling it
                await self._on_unexpected_death(worker)
        if await self._fire_kill_faults():
            return
        if self.use_spare and self.owner and self.spare is not None and not self.spare.alive():
            self.spare = None
            self._ensure_spare()

    async def _on_unexpected_death(self, worker: WorkerProc) -> None:
        at = time.time()
        conn = connect(self.settings.ledger)
        flight = in_flight_step(conn, worker.pid)
        run_id, step = flight if flight else (running_run(conn), None)
        sig, code = worker.exit_status()
        detail = {"signal": sig, "exit_code": code, "observed": sig is not None or code is not None}
        event_id = record_worker_event(conn, "died", worker.pid, worker.name, run_id, step, json.dumps(detail), at)
        await self._on_death(worker, event_id, at, run_id, step)

    async def _watch_devserver(self) -> None:
        """The home's dev server is ours: if it died, start it again on the same ports and database.
        Workers and clients reconnect by themselves; the run continues from persisted history."""
        ident, rec = devserver.recorded(self.settings)
        if ident is not None or rec is None:
            return
        died_at = time.time()
        previous = self.state
        self.state = "temporal-down"
        conn = connect(self.settings.ledger)
        record_worker_event(conn, "temporal-died", rec["identity"]["pid"], None, detail=rec.get("address"), at=died_at)
        try:
            server = await asyncio.to_thread(devserver.ensure_devserver, self.settings)
        except Exception as err:  # UserFacingError and friends: say so, retry on a later tick
            record_worker_event(conn, "temporal-restart-failed", None, None, detail=str(err))
            return
        self.temporal_restarts += 1
        record_worker_event(
            conn, "temporal-restart", server.pid, None,
            detail=f"{server.address} back after {time.time() - died_at:.2f} s",
        )  # fmt: skip
        self.state = previous if previous != "temporal-down" else "running"

    async def _fire_kill_faults(self) -> bool:
        conn = connect(self.settings.ledger)
        for run_id, step in faults.armed_kill_steps(conn):
            for worker in self.workers():
                # the step's model call is in flight on one of our workers, so the kill lands inside it
                row = conn.execute(
                    "SELECT 1 FROM activity_log WHERE run_id = ? AND step = ? AND activity = 'llm' "
                    "AND worker_pid = ? AND host = ?",
                    (run_id, step, worker.pid, HOST),
                ).fetchone()
                if row and worker.alive() and faults.consume(conn, run_id, step, "kill_at"):
                    await self.kill(reason=f"kill_at fault at step {step}", worker=worker)
                    return True
        return False

    async def _on_death(self, dead: WorkerProc, event_id: int, at: float, run_id: str | None, step: int | None) -> None:
        self.state = "worker-dead"
        conn = connect(self.settings.ledger)
        (self.settings.run_dir / f"ready-{dead.name}").unlink(missing_ok=True)
        slot = dead.slot
        if self.pool.get(slot) is dead:
            del self.pool[slot]
        if not (self.respawn and self.owner):
            return
        self.state = "respawning"
        spare = self.spare
        if (
            spare is not None
            and spare.alive()
            and spare.ready(self.settings)
            and workers.promote(self.settings, spare, slot)
        ):
            self.pool[slot], self.spare = spare, None
            record_worker_event(conn, "promote", spare.pid, spare.name, run_id, step, f"replaces {dead.pid}")
        else:
            if spare is not None and spare.alive():
                workers.stop(self.settings, spare)  # not ready yet: a fresh active is as quick
            self.spare = None
            new = workers.spawn(self.settings, self.address, "active", self.worker_args, slot)
            self.pool[slot] = new
            record_worker_event(conn, "respawn", new.pid, new.name, run_id, step, f"replaces {dead.pid}")
        self.state = "running"
        if self.assist and self.client is not None:
            await self._assist(dead)
        if self.use_spare:
            self._ensure_spare()
        if run_id is not None:
            self._spawn_task(self._record_latency(event_id, run_id, at, dead.pid, step))

    async def _assist(self, dead: WorkerProc) -> None:
        """Fail the dead worker's pending activity attempts by id; reset the sticky queue of the runs it
        was holding. Only runs of our task queue: a shared ledger also lists other labs' runs."""
        assert self.client is not None
        conn = connect(self.settings.ledger)
        failed: list[str] = []
        reset: list[str] = []
        rows = conn.execute(
            "SELECT run_id FROM runs WHERE status = 'running' AND task_queue = ?", (self.settings.task_queue,)
        ).fetchall()
        for row in rows:
            try:
                handle = self.client.get_workflow_handle(row["run_id"])
                desc = await handle.describe()
                for pa in desc.raw_description.pending_activities:
                    if pa.last_worker_identity != dead.name:
                        continue
                    act = self.client.get_async_activity_handle(
                        workflow_id=row["run_id"], run_id=desc.run_id, activity_id=pa.activity_id
                    )
                    err = ApplicationError(f"worker {dead.pid} died (seen by the supervisor)", type="WorkerDied")
                    await act.fail(err)
                    failed.append(f"{row['run_id']}:{pa.activity_type.name}#{pa.activity_id}")
                if not _last_toucher_was(conn, row["run_id"], dead.pid):
                    continue  # its sticky worker is alive: a reset would only cost a full replay
                await self.client.workflow_service.reset_sticky_task_queue(
                    ResetStickyTaskQueueRequest(
                        namespace=self.settings.namespace,
                        execution=WorkflowExecution(workflow_id=row["run_id"], run_id=desc.run_id),
                    )
                )
                reset.append(row["run_id"])
            except Exception as err:  # the activity may have completed meanwhile; that is fine
                log.info("assist for %s: %s", row["run_id"], err)
        detail = json.dumps({"failed_activities": failed, "sticky_reset": reset})
        record_worker_event(conn, "assist", dead.pid, dead.name, detail=detail)

    async def _record_latency(self, event_id: int, run_id: str, at: float, dead_pid: int, step: int | None) -> None:
        conn = connect(self.settings.ledger)
        deadline = time.monotonic() + LATENCY_WAIT_S
        while time.monotonic() < deadline:
            lat = measure(conn, run_id, at, dead_pid, step)
            if lat.next_step_s is not None or self._run_over(conn, run_id):
                conn.execute(
                    "UPDATE worker_events SET restart_s = ?, next_step_s = ? WHERE id = ?",
                    (lat.restart_s, lat.next_step_s, event_id),
                )
                return
            await asyncio.sleep(0.1)

    @staticmethod
    def _run_over(conn, run_id: str) -> bool:
        row = conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row is not None and row["status"] != "running"

    def _spawn_task(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- shutdown --------------------------------------------------------------------------------

    async def stop(self, stop_workers: bool = False) -> None:
        """Stop watching. With stop_workers, also SIGTERM the worker and the spare (by identity)."""
        self._stop.set()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, 5.0)
        if stop_workers:
            for w in [*self.workers(), self.spare]:
                if w is not None:
                    workers.stop(self.settings, w)
                    workers.forget(self.settings, w.role, w.slot)
            self.pool, self.spare = {}, None
            self.state = "stopped"
        self.release()


def _last_toucher_was(conn, run_id: str, pid: int) -> bool:
    """Whether the run's most recently touched step was last touched by this local pid (so the dead
    worker held its sticky workflow; activities go eagerly to that worker). True if no step yet."""
    row = conn.execute(
        "SELECT worker_pid, worker_host FROM steps WHERE run_id = ? ORDER BY touched_at DESC LIMIT 1", (run_id,)
    ).fetchone()
    return row is None or (row["worker_pid"] == pid and row["worker_host"] in (None, HOST))
