"""The embedded supervisor: keeps a pool of N workers (of each command of a user's fleet, ops/fleet.py)
polling, plus a warm spare; SIGKILLs one on request, notices any death within one tick, promotes or
respawns into the dead worker's slot (not while a fleet-down holds it), helps Temporal notice faster
(ops/failover.py; not for a graceful stop). It watches on a thread of its own (`async with
supervisor.running():`), with its own event loop and Temporal client, so the app's loop never waits
on psutil, SQL or a spawn. Only one supervisor per home respawns (an flock on run/supervisor.lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import asdict

from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger.latency import in_flight, in_flight_step
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import devserver_watch, fleet, kill_faults, pool_slots, worker_proc
from checkpoint_tui.ops.exit_watch import ExitWatch
from checkpoint_tui.ops.failover import Failover, failover_client, record_latency
from checkpoint_tui.ops.loop_thread import Background, LoopThread
from checkpoint_tui.ops.pool_slots import where
from checkpoint_tui.ops.preload import Preloads
from checkpoint_tui.ops.procs import open_lock
from checkpoint_tui.ops.state import KillReport, SupervisorState, SupervisorStatus
from checkpoint_tui.ops.watchdog import Watchdog
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.ops.wrappers import follow
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

log = logging.getLogger(__name__)
TICK_S = 0.25  # housekeeping: the dev server, the spare (deaths wake the loop through pidfds)
IDLE_TICK_S = 1.0  # the same while no run is running
FAST_TICK_S = 0.05  # while a kill_at fault is armed
DEVSERVER_EVERY_S = 5.0  # a look at the dev server's record besides its pidfd (a record rewritten by hand)
KILL_WAIT_S, STOP_WAIT_S = 5.0, 10.0


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        address: str,
        *,
        spare: bool = True,
        assist: bool | str = True,  # failover.py: True, STICKY_ONLY, or False (none)
        respawn: bool = True,
        worker_args: tuple[str, ...] = (),
    ) -> None:
        self.settings = settings
        self.address = address
        spare = spare and settings.spare  # --no-spare: every replacement starts cold
        self.use_spare = spare and not settings.user_worker  # a user's worker command has no standby protocol,
        self.preloads = Preloads(settings, address) if spare and settings.user_worker else None  # but a preloader
        self.assist, self.respawn = assist, respawn
        self.worker_args = worker_args  # extra worker flags, e.g. ("--sticky-timeout", "10")
        self.pool_size = fleet.slot_count(settings)  # every command of a user's fleet has --workers N slots
        self.pool: dict[int, WorkerProc] = {}  # slot -> active worker
        self.spare: WorkerProc | None = None
        self.state = SupervisorState.STARTING
        self.status = SupervisorStatus()
        self.temporal_restarts = 0
        self._lock_fd: int | None = None
        self._killed_pids: set[int] = set()
        self._followed: set[int] = set()  # workers whose polling identity is known (ops/wrappers.py)
        self._held: set[int] = set()  # slots a fleet-down keeps empty until its hold ends (ops/fleet.py)
        self._tasks = Background()
        self._thread = LoopThread(name="supervisor")
        self._stop: asyncio.Event | None = None
        self._stop_requested = False  # stop() may come before _watch has made its Event (e.g. mid-connect)
        self._failover: Failover | None = None
        self.takeover = pool_slots.Takeover()  # the workers found dead at start: failed over once connected
        self._wake = asyncio.Event()
        self._armed = False  # a kill_at fault is armed: tick fast
        self._live = True  # a run is running (else housekeeping ticks slowly: a wake-up is not free)
        self.watchdog = Watchdog(settings)  # a stopped (hung) worker is killed and replaced
        self._exits = ExitWatch(self._wake)
        self._devserver_pid: int | None = None
        self._devserver_checked = 0.0

    # --- ownership -------------------------------------------------------------------------------

    def acquire(self, held: int | None = None) -> bool:
        """Become the home's respawning supervisor; False if another live one holds it. `held`: the lock's
        descriptor, locked already (a standby's: cli/commands.py)."""
        self.settings.ensure_dirs()
        fd = open_lock(self.settings.run_dir / "supervisor.lock") if held is None else held
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        self._publish()
        return True

    def poke(self) -> None:
        """A run was started, or the ledger changed: look now if no run was running (the tick is slow)."""
        if not self._live:
            self._thread.call_soon(self._wake.set)

    def release(self) -> None:
        if self._lock_fd is not None:  # closing the descriptor releases the flock
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def owns_home(self) -> bool:
        return self._lock_fd is not None

    # --- the pool --------------------------------------------------------------------------------

    @property
    def primary(self) -> WorkerProc | None:
        """Slot 0's worker (the pool's only one unless --workers N)."""
        return self.pool.get(min(self.pool)) if self.pool else None

    def pool_workers(self) -> list[WorkerProc]:
        return [self.pool[slot] for slot in sorted(self.pool)]

    def ensure_worker(self) -> WorkerProc:
        """Adopt the home's live workers, or start them (and a spare, if configured); returns slot 0's.
        Blocking (a spawn waits for exec, a fork for its preloader's imports): call it off any UI loop."""
        conn = connect(self.settings.ledger)
        live_slots = [s for s in worker_proc.recorded_slots(self.settings) if s >= self.pool_size]
        start = self.takeover
        if self.owns_home and self.preloads is not None:
            self.preloads.ensure(conn)  # first: the slots' first workers are its forks
            start.fork = self.preloads.first
        for slot in [*range(self.pool_size), *live_slots]:
            needed = slot < self.pool_size and not (standby := fleet.standby(self.settings, slot))
            worker = pool_slots.adopt_or_start(self.settings, self.address, self.worker_args, conn, slot, needed, start)
            if worker is not None:
                self.pool[slot] = worker
            elif slot < self.pool_size and standby:
                self._held.add(slot)  # a new version's slot: it starts once deployed (Worker Versioning)
        if self.owns_home:
            self._ensure_spare()
        self.state = SupervisorState.RUNNING
        self._publish()
        return self.pool[0]

    def _ensure_spare(self) -> None:
        conn = connect(self.settings.ledger)
        if self.preloads is not None:
            self.preloads.ensure(conn)
        if not self.use_spare or (self.spare is not None and self.spare.alive()):
            return
        existing = worker_proc.adoptable(self.settings, "spare")
        if existing is not None:
            self.spare = existing
            record_worker_event(conn, "adopt", existing.pid, existing.name, detail="spare adopted")
            return
        self.spare = worker_proc.spawn(self.settings, self.address, "spare", self.worker_args)
        record_worker_event(conn, "spawn", self.spare.pid, self.spare.name, detail="warm spare (standby)")

    def _publish(self) -> None:
        """Swap in a fresh status (one reference assignment: readers on other threads see old or new)."""
        primary, spare = self.primary, self.spare
        pool = [w.pid for w in self.pool_workers()]
        primary_pid, spare_pid = primary.pid if primary else None, spare.pid if spare else None
        self.status = SupervisorStatus(self.state, primary_pid, spare_pid, pool, self.owns_home)

    # --- running on its own thread ---------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self, stop_workers: bool = False) -> AsyncIterator[Supervisor]:
        """Watch on the supervisor's thread for the block; then stop (with stop_workers, the workers too)."""
        self.start()
        try:
            yield self
        finally:
            await self.stop(stop_workers=stop_workers)

    def start(self) -> None:
        """Start watching on the supervisor's thread (until stop()); `running()` pairs the two."""
        self._stop_requested = False
        self._thread.start(self._watch)

    async def _watch(self) -> None:
        self._stop = asyncio.Event()
        if self._stop_requested:  # stop() came first
            self._stop.set()
        if self.assist:
            client = await failover_client(self.settings, self.address)
            self._failover = None if client is None else Failover(self.settings, client, self._tasks, self.assist)
        await self.run()
        await self._tasks.drain(5.0)  # let latency measurements and late failover passes in flight land
        self._failover = None  # its loop is ending: a death seen after (a kill() off the thread) starts nothing

    def _request_stop(self) -> None:
        self._stop_requested = True
        if self._stop is not None:
            self._stop.set()
            self._wake.set()

    async def _on_thread(self, coro):
        """Run `coro` on the supervisor's thread when it is watching from there (else right here)."""
        if self._thread.alive and not self._thread.on_thread():
            return await self._thread.run(coro)
        return await coro

    async def stop(self, stop_workers: bool = False) -> None:
        """Stop watching. With stop_workers, also SIGTERM the pool and the spare (by identity)."""
        if self._thread.alive:
            self._thread.call_soon(self._request_stop)
        else:  # not started, or run() was awaited on the caller's own loop
            self._request_stop()
        if not await self._thread.join(STOP_WAIT_S):
            log.warning("supervisor thread did not stop within %.0f s", STOP_WAIT_S)
        if stop_workers:
            for w in [*self.pool_workers(), self.spare, *(self.preloads.stopped() if self.preloads else [])]:
                if w is not None:
                    await asyncio.to_thread(worker_proc.stop, self.settings, w)
                    worker_proc.forget(self.settings, w.role, w.slot)
            self.pool, self.spare = {}, None
            self.state = SupervisorState.STOPPED
        self.release()
        self._publish()

    async def run(self) -> None:
        """Watch until stopped. A worker's death wakes the loop at once (its pidfd turns readable), so
        the loop itself ticks only for housekeeping (4 Hz), or at 20 Hz while a kill_at fault is armed
        (the kill must land inside a model call of a few hundred ms)."""
        if self._stop is None:
            self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        self._wake = asyncio.Event()
        exits = self._exits = ExitWatch(self._wake)
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    await self.tick()
                except Exception:  # a supervisor that crashes helps nobody; report and go on
                    log.exception("supervisor tick failed")
                self._publish()
                pids = [w.pid for w in [*self.pool_workers(), self.spare] if w is not None]
                exits.watch([*pids, *([self._devserver_pid] if self._devserver_pid else [])])
                fast = self._armed or self.watchdog.watching_stop
                every = FAST_TICK_S if fast else TICK_S if self._live else IDLE_TICK_S
                with contextlib.suppress(asyncio.TimeoutError):  # a task: the loop runs others meanwhile
                    await asyncio.wait_for(self._wake.wait(), every)
        finally:
            exits.close()

    async def tick(self) -> None:
        now = time.monotonic()
        died = self._devserver_pid is not None and self._devserver_pid in self._exits.exited
        if self.settings.embedded and self.owns_home and (died or now - self._devserver_checked >= DEVSERVER_EVERY_S):
            self._devserver_checked = now
            self._exits.exited.discard(self._devserver_pid or 0)
            await self._watch_devserver()
        for worker in self.pool_workers():
            if not worker.alive() and worker.pid not in self._killed_pids:  # else kill() is handling it
                await self._on_unexpected_death(worker)
            elif worker.pid not in self._followed and follow(self.settings, worker):  # `npm run …`: who polls
                self._followed.add(worker.pid)
        while self._failover is not None and self.takeover.found_dead:  # their attempts: at once, not by timeouts
            self._failover.dead(self.takeover.found_dead.pop())
        self._bring_back()
        for worker, hang in self.watchdog.hung(self.pool_workers() if self.owns_home else []):
            await self._kill(hang.reason, worker)  # SIGKILL ends a stopped process too; _kill reaps it
        if await self._fire_kill_faults():
            return
        if self.owns_home and (self.preloads is not None or (self.spare is not None and not self.spare.alive())):
            self._ensure_spare()

    # --- kill ------------------------------------------------------------------------------------

    def kill_target(self) -> WorkerProc | None:
        """The worker running the live step if one of ours is, else slot 0's."""
        conn = connect(self.settings.ledger)
        for worker in self.pool_workers():
            if in_flight_step(conn, worker.pid) is not None:
                return worker
        return self.primary

    async def kill(
        self, reason: str = "user", worker: WorkerProc | None = None, aimed: dict | None = None
    ) -> KillReport:
        """A real SIGKILL of one worker (default: kill_target()), after checking it is still ours; waits for the
        exit; `aimed` (the activity's id) goes in its record: the audit's cause of that activity's timeout."""
        return await self._on_thread(self._kill(reason, worker, aimed))

    async def _kill(self, reason: str, worker: WorkerProc | None, aimed: dict | None = None) -> KillReport:
        worker = worker or self.kill_target()
        if worker is None:
            raise Failed("no worker to kill")
        conn = connect(self.settings.ledger)
        run_id, step = in_flight(conn, worker.pid)
        at = time.time()
        if not worker.send(signal.SIGKILL):  # identity-checked (a user's worker command with its process group)
            raise Failed(f"worker pid {worker.pid} is no longer ours; not signalled")
        self._killed_pids.add(worker.pid)
        with contextlib.suppress(TimeoutError):
            await wait_until(lambda: not worker.alive(), KILL_WAIT_S, every=0.002, what="the killed worker's exit")
        confirmed = not worker.alive()
        sig, code = worker.exit_status()
        report = KillReport(worker.pid, sig or "SIGKILL", code, confirmed, run_id, step, at, observed=sig is not None)
        detail = json.dumps({**asdict(report), "reason": reason, **(aimed or {})})
        event_id = record_worker_event(conn, "kill", worker.pid, worker.name, run_id, step, detail, at)
        await self._on_death(worker, event_id, at, run_id, step)
        return report

    async def _on_unexpected_death(self, worker: WorkerProc) -> None:
        at = time.time()
        conn = connect(self.settings.ledger)
        run_id, step = in_flight(conn, worker.pid)
        sig, code = worker.exit_status()
        detail = {"signal": sig, "exit_code": code, "observed": sig is not None or code is not None}
        detail["queue"] = worker.queue
        # A worker stopped by a rollout's SIGTERM (a fleet nemesis) exits: that is the point, not a crash
        if graceful := self.owns_home and fleet.graceful(self.settings, worker.pid):
            detail["graceful"] = True
        kind = "exit" if graceful else "died"
        event_id = record_worker_event(conn, kind, worker.pid, worker.name, run_id, step, json.dumps(detail), at)
        await self._on_death(worker, event_id, at, run_id, step, assist=not graceful)

    def _bring_back(self) -> None:
        """Slots a fleet-down held empty come back once its hold ends (a fresh worker each)."""
        if self.respawn and self.owns_home:
            self._held = pool_slots.bring_back(self.settings, self.address, self.worker_args, self._held, self.pool)

    async def _fire_kill_faults(self) -> bool:
        self._armed, self._live, due = kill_faults.due(self.settings, self.pool_workers())
        if due is not None:
            await self._kill(f"kill_at fault at step {due[1]}", due[0])
        return due is not None

    # --- deaths ----------------------------------------------------------------------------------

    async def _watch_devserver(self) -> None:
        """The home's dev server is ours: started again if it died (ops/devserver_watch.py)."""
        previous = self.state

        def down() -> None:
            self.state = SupervisorState.TEMPORAL_DOWN
            self._publish()

        self._devserver_pid, restarted = await devserver_watch.revive(self.settings, down)  # its exit wakes the loop
        if restarted:
            self.temporal_restarts += 1
            self.state = previous if previous != SupervisorState.TEMPORAL_DOWN else SupervisorState.RUNNING

    async def _on_death(
        self, dead: WorkerProc, event_id: int, at: float, run_id: str | None, step: int | None, assist: bool = True
    ) -> None:
        self.state = SupervisorState.WORKER_DEAD
        (self.settings.run_dir / f"ready-{dead.name}").unlink(missing_ok=True)
        if self.pool.get(dead.slot) is dead:
            del self.pool[dead.slot]
        self._publish()
        if not (self.respawn and self.owns_home):
            return
        if fleet.held_until(self.settings, dead.queue or self.settings.task_queue) is not None or fleet.standby(
            self.settings, dead.slot
        ):
            self._held.add(dead.slot)  # all of its queue's workers are down on purpose: no help, no respawn yet
            self.state = SupervisorState.RUNNING
            return
        self.state = SupervisorState.RESPAWNING
        self._replace(dead, run_id, step)
        self.state = SupervisorState.RUNNING
        self._publish()
        if assist and self.assist and self._failover is not None:
            self._failover.dead(dead)  # beside the loop (failover.py)
        if self.use_spare:
            self._ensure_spare()
        if run_id is not None and not dead.user_cmd:  # latency from our step rows; chaos --workflow reads history
            self._tasks.start(record_latency(self.settings, event_id, run_id, at, dead.pid, step))

    def _replace(self, dead: WorkerProc, run_id: str | None, step: int | None) -> None:
        """Into the dead worker's slot: a ready spare (a user's command: its preloader's fork), else a cold spawn."""
        conn = connect(self.settings.ledger)
        spare, slot = self.spare, dead.slot
        if self.preloads is not None and (new := self.preloads.fork(slot, dead.pid, run_id, step)) is not None:
            self.pool[slot] = new
            return
        ready = spare is not None and spare.alive() and spare.ready(self.settings)
        if spare is not None and ready and worker_proc.promote(self.settings, spare, slot):
            self.pool[slot], self.spare = spare, None
            record_worker_event(conn, "promote", spare.pid, spare.name, run_id, step, f"replaces {dead.pid}")
            return
        if spare is not None and spare.alive():
            worker_proc.stop(self.settings, spare)  # not ready yet: a fresh active is as quick
        self.spare = None
        new = worker_proc.spawn(self.settings, self.address, "active", self.worker_args, slot)
        self.pool[slot] = new
        record_worker_event(conn, "respawn", new.pid, new.name, run_id, step, f"replaces {dead.pid} ({where(new)})")
