"""The game-day nemeses on the workers (Temporal's pre-production testing guide), each a real signal to
a real pid, identity-checked (a user's worker command with its process group):

- **graceful-restart**: what every Kubernetes rollout does: SIGTERM one worker, give it `grace_s` to
  finish (the SDK's graceful shutdown), SIGKILL it if it has not; the supervisor starts a new one. It
  gets no assisted failover (ops/failover.py): whatever a rollout loses, Temporal's timeouts find.
- **fleet-down**: SIGKILL every worker of a queue (or all), keep them down `duration_s` (the supervisor
  holds their slots, ops/fleet.py), then they come back: backlog growth and drain time.
- **churn**: graceful-restart a fraction of each queue's workers every `interval_s` for `duration_s`.
- **deploy**: a rolling update of a queue's workers to its --deploy command (the new version), one
  at a time; with `rollback_after_s`, the old command rolled back the same way after that long. With
  --deployment, blue-green with Worker Versioning instead (proof/nemeses/versioned_deploy.py).

Like a kubelet's rollout, each waits for readiness: a worker is stopped once Temporal lists it as a
poller (a restart that came too soon would stop a worker that never polled, and the run would make no
progress between restarts), and a rolling update takes its next step once the replacement polls.

Each graceful stop is a worker event `sigterm` (its identity, the nemesis, the grace) recorded before
the signal, so the audit (core/lost_work.py) can name the rollout behind any task that then sat out
its timeout, and the supervisor records the exit as `exit`, not a death.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import time

from temporalio.client import Client

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import fleet, worker_proc
from checkpoint_tui.ops.user_polling import wait_polling
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.proof.nemeses.records import NO_WORKER, Hit, Miss
from checkpoint_tui.proof.nemeses.versioned_deploy import versioned_deploy
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

GRACEFUL = "graceful-restart"
FLEET_DOWN = "fleet-down"
CHURN = "churn"
DEPLOY = "deploy"
READY_WAIT_S = 30.0  # a worker not polling by then is stopped all the same
REPLACED_WAIT_S = 60.0  # a rolling update waits this long for each replacement (a cold start of the command)


def workers(settings: Settings, queue: str | None) -> list[WorkerProc]:
    """The live workers polling `queue` (None: the whole fleet), by slot."""
    found = [worker_proc.load(settings, "active", slot) for slot in fleet.slots_of(settings, queue)]
    return [w for w in found if w is not None]


async def ready(client: Client | None, settings: Settings, worker: WorkerProc) -> float | None:
    """Seconds until Temporal listed the worker as a poller; None with no client, or when it did not
    within READY_WAIT_S (then it is stopped all the same, as a kubelet ends a pod that never got ready)."""
    if client is None:
        return None
    try:
        return round(await wait_polling(client, settings, worker, READY_WAIT_S), 3)
    except Unavailable:
        return None


async def stop_gracefully(
    settings: Settings, worker: WorkerProc, grace_s: float, nemesis: str, client: Client | None = None
) -> dict | None:
    """Once it polls (see ready()), SIGTERM, then SIGKILL after `grace_s` if it is still running; None if
    it was no longer ours."""
    polled_after_s = await ready(client, settings, worker)
    fleet.mark_graceful(settings, worker.pid)
    detail = {"nemesis": nemesis, "graceful": True, "grace_s": grace_s, "queue": worker.queue}
    at = time.time()
    record_worker_event(connect(settings.ledger), "sigterm", worker.pid, worker.name, detail=json.dumps(detail), at=at)
    if not worker.send(signal.SIGTERM):
        return None
    try:
        await wait_until(lambda: not worker.alive(), grace_s, every=0.02, what="a graceful exit")
        killed = False
    except TimeoutError:
        killed = worker.send(signal.SIGKILL)  # the grace is over, as the kubelet does
    return {
        "pid": worker.pid,
        "identity": worker.name,
        "queue": worker.queue,
        "exited_s": round(time.time() - at, 3),
        "killed_after_grace": killed,
        "polled_after_s": polled_after_s,
    }


async def _replaced(settings: Settings, slot: int, old_pid: int) -> int | None:
    """The pid the supervisor put in the slot after `old_pid`, once it is recorded."""

    def new() -> bool:
        w = worker_proc.load(settings, "active", slot)
        return w is not None and w.pid != old_pid

    try:
        await wait_until(new, REPLACED_WAIT_S, every=0.05, what="the replacement worker")
    except TimeoutError:
        return None
    w = worker_proc.load(settings, "active", slot)
    return w.pid if w is not None else None


async def graceful_restart(
    settings: Settings, queue: str | None, grace_s: float, client: Client | None = None
) -> Hit | Miss:
    victims = workers(settings, queue or settings.task_queue)
    if not victims:
        return Miss(NO_WORKER)
    stopped = await stop_gracefully(settings, victims[0], grace_s, GRACEFUL, client)
    if stopped is None:
        return Miss(NO_WORKER)
    return Hit(time.time() - stopped["exited_s"], stopped["pid"], stopped["identity"], stopped)


async def fleet_down(settings: Settings, queue: str | None, duration_s: float) -> Hit | Miss:
    """Every worker of the queue (None: of the fleet) SIGKILLed at once and held down `duration_s`."""
    at = time.time()
    until = at + duration_s
    fleet.hold_down(settings, queue, until)  # before the kills: the supervisor must not respawn them
    killed = [w.pid for w in workers(settings, queue) if w.send(signal.SIGKILL)]
    if not killed:
        return Miss(NO_WORKER)
    return Hit(
        at, None, detail={"queue": queue or "all", "workers": killed, "duration_s": duration_s, "held_until": until}
    )


async def churn(
    settings: Settings,
    queue: str | None,
    duration_s: float,
    interval_s: float,
    fraction: float,
    grace_s: float,
    client: Client | None = None,
) -> Hit | Miss:
    """Every `interval_s`, a graceful restart of `fraction` of each queue's workers (at least one), in
    turn, for `duration_s`."""
    at, rounds, stopped = time.time(), 0, []
    queues = [queue] if queue else fleet.queues(settings)
    while time.time() < at + duration_s:
        began = time.monotonic()
        for q in queues:
            pool = workers(settings, q)
            if not pool:
                continue  # between a stop and its replacement: this round leaves the queue alone
            n = max(1, math.ceil(fraction * len(pool)))
            picked = [pool[(rounds * n + i) % len(pool)] for i in range(min(n, len(pool)))]
            done = await asyncio.gather(*(stop_gracefully(settings, w, grace_s, CHURN, client) for w in picked))
            stopped += [d for d in done if d is not None]
        rounds += 1
        await asyncio.sleep(max(0.0, min(interval_s - (time.monotonic() - began), at + duration_s - time.time())))
    if not stopped:
        return Miss(NO_WORKER)
    return Hit(
        at,
        None,
        detail={
            "queue": queue or "all",
            "rounds": rounds,
            "restarts": len(stopped),
            "killed_after_grace": sum(d["killed_after_grace"] for d in stopped),
            "duration_s": duration_s,
            "held_until": time.time(),
        },
    )


async def _roll(settings: Settings, queue: str, grace_s: float, to_new: bool, client: Client | None) -> list[dict]:
    """A rolling update of the queue's workers to its --deploy command (or back), one at a time, each
    next step once the last replacement polls."""
    fleet.set_deployed(settings, queue, to_new)
    rolled = []
    for worker in workers(settings, queue):
        stopped = await stop_gracefully(settings, worker, grace_s, DEPLOY, client)
        if stopped is not None:
            stopped["replaced_by"] = await _replaced(settings, worker.slot, worker.pid)
            new = worker_proc.load(settings, "active", worker.slot)
            stopped["replacement_polled_after_s"] = await ready(client, settings, new) if new is not None else None
            rolled.append(stopped)
    return rolled


async def deploy(
    settings: Settings,
    queue: str | None,
    grace_s: float,
    rollback_after_s: float | None,
    client: Client | None = None,
    ramp: tuple[float, float] | None = None,
) -> Hit | Miss:
    """A rolling update; with --deployment, a versioned one (proof/nemeses/versioned_deploy.py, `ramp`)."""
    queue = queue or settings.task_queue
    if any(v.queue == queue for v in settings.versions):
        return await versioned_deploy(settings, queue, ramp, rollback_after_s, client)
    at = time.time()
    rolled = await _roll(settings, queue, grace_s, True, client)
    if not rolled:
        fleet.set_deployed(settings, queue, False)
        return Miss(NO_WORKER)
    detail: dict = {"queue": queue, "deployed": [r["replaced_by"] for r in rolled], "deployed_at": time.time()}
    if rollback_after_s is not None:
        await asyncio.sleep(rollback_after_s)  # the new version runs this long: its length is the point
        back = await _roll(settings, queue, grace_s, False, client)
        detail.update(rolled_back_at=time.time(), rolled_back=[r["replaced_by"] for r in back])
        detail["held_until"] = detail["rolled_back_at"]
    return Hit(at, None, detail=detail)
