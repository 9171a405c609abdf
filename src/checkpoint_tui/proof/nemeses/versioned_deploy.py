"""The deploy nemesis with Worker Versioning (--deployment): blue-green, as Temporal's docs deploy a
versioned worker, not a rolling replacement (which they call incompatible with it).

Version 2's workers start beside version 1's (the supervisor fills their slots once the queue is marked
deployed, ops/fleet.py); once they poll, version 2 ramps (`ramp_percent` of new and auto-upgrade
workflows for `ramp_s`), then becomes current. A rollback (`rollback_after_s`) makes version 1 current
again; version 2's workers keep running, as the runbook keeps a version until its pinned workflows
drain. Where a workflow goes is the worker's declared behavior: a pinned one stays on the version that
started it; an auto-upgrade one moves to the current (or ramping) version at its next workflow task,
where code that is not replay-safe fails it (the audit names the version: core/lost_work.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from temporalio.client import Client

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops import deployments, fleet
from checkpoint_tui.ops.user_polling import wait_polling, wait_recorded
from checkpoint_tui.proof.nemeses.records import Hit, Miss
from checkpoint_tui.settings import Settings

REGISTER_WAIT_S = 60.0  # version 2's workers start cold and poll within this


async def versioned_deploy(
    settings: Settings,
    queue: str,
    ramp: tuple[float, float] | None,
    rollback_after_s: float | None,
    client: Client | None,
) -> Hit | Miss:
    """Version 2 up beside version 1, ramped (`ramp`: percent, seconds) then current; rolled back after
    `rollback_after_s` by making version 1 current."""
    if client is None:
        return Miss("no connection to Temporal to route the deployment")
    old, new = deployments.old_and_new(settings)
    at = time.time()
    fleet.set_deployed(settings, queue, True)  # the supervisor starts version 2's slots
    try:  # this start's workers polling, not a version Temporal remembers from an earlier experiment
        workers = [await wait_recorded(settings, slot, REGISTER_WAIT_S) for slot in _new_slots(settings, new)]
        polled = max([await wait_polling(client, settings, w, REGISTER_WAIT_S) for w in workers], default=0.0)
        await deployments.registered(client, settings, new, REGISTER_WAIT_S)
    except Unavailable as err:
        fleet.set_deployed(settings, queue, False)
        return Miss(str(err)[:300])
    detail: dict = {"queue": queue, "deployment": settings.deployment, "from": old, "to": new}
    detail.update(workers=[w.pid for w in workers], polled_after_s=round(polled, 3))
    try:
        await _route(client, settings, (old, new), ramp, rollback_after_s, detail)
    except Unavailable as err:  # Temporal refused a routing change: version 1 back, said in the report
        detail["routing_failed"] = str(err)[:300]
        with contextlib.suppress(Unavailable):
            await deployments.settle(settings, client, force=True)
            detail["restored_at"] = time.time()
    return Hit(at, None, detail=detail)


async def _route(
    client: Client,
    settings: Settings,
    builds: tuple[str, str],
    ramp: tuple[float, float] | None,
    rollback_after_s: float | None,
    detail: dict,
) -> None:
    """Ramp version 2, make it current, and roll back to version 1, as asked; each step's time in `detail`."""
    old, new = builds
    if ramp is not None and ramp[0] > 0:
        await deployments.set_ramping(client, settings, new, ramp[0])
        detail.update(ramp_percent=ramp[0], ramping_at=time.time())
        await asyncio.sleep(ramp[1])  # this share of new and auto-upgrade workflows meets version 2 first
    await deployments.set_current(client, settings, new)
    detail["deployed_at"] = time.time()
    if rollback_after_s is not None:
        await asyncio.sleep(rollback_after_s)  # version 2 current this long: its length is the point
        # the server may route by version 1 before its answer comes back (seconds under load): a task
        # that completes in between is the rollback's, so the ask's time is kept beside the answer's
        detail["rolling_back_at"] = time.time()
        await deployments.set_current(client, settings, old)
        detail["rolled_back_at"] = detail["held_until"] = time.time()


def _new_slots(settings: Settings, build_id: str) -> list[int]:
    """Version 2's slots."""
    slots = range(fleet.slot_count(settings))
    return [s for s in slots if (m := fleet.member_of(settings, s)) is not None and m.build_id == build_id]
