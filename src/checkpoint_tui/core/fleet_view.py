"""What the app shows of a user's fleet (ops/fleet.py) and its task queues, as plain data for the View:
per worker command its queue, its live workers, whether it runs its --deploy command or is held down by
a fleet-down; and the queues' backlog as Temporal counts it. The poller takes the latest of each and
never waits for one: each is read in the background at most once every FLEET_EVERY_S."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from temporalio.client import Client

from checkpoint_tui.core.tick_stats import TickStats
from checkpoint_tui.core.view import Backlog, FleetCommand
from checkpoint_tui.ops import fleet, worker_proc
from checkpoint_tui.settings import Settings

log = logging.getLogger(__name__)
FLEET_EVERY_S = 2.0  # the fleet's records (a few small files), read at most this often
# The backlog costs two describes per queue: every 4 s keeps a live run's Temporal requests per
# second within tests/test_tick_cost.py's bound (2.5/s: 2.54/s was measured with a 2 s read).
BACKLOG_EVERY_S = 4.0
T = TypeVar("T")


# (client, namespace, queues) -> the backlog; None when any describe failed (unknown, not a smaller count)
BacklogRead = Callable[[Client, str, list[str]], Awaitable[Backlog | None]]


def is_fleet(settings: Settings) -> bool:
    """Several worker commands, or one with a --deploy version: their state is worth a line. Our own
    worker and a single command keep the one `worker PID` of the status bar."""
    return len(settings.members) > 1 or bool(settings.deploys)


def read_fleet(settings: Settings) -> list[FleetCommand]:
    """Each command's state from the home's worker records and fleet files (blocking: a few small files
    and a process check per slot)."""
    deployed = set(fleet.deployed(settings))
    out = []
    # with --deployment, each version its own line (its build id beside its queue), both running once deployed
    for i, member in enumerate([*settings.members, *settings.versions]):
        slots = fleet.member_slots(settings, i)
        live = sum(worker_proc.load(settings, "active", slot) is not None for slot in slots)
        label = f"{member.queue} {member.build_id}" if member.build_id else member.queue
        rolled = member.queue in deployed and member.build_id is None
        out.append(FleetCommand(label, live, len(slots), rolled, fleet.held_until(settings, member.queue)))
    return out


def backlog_of(counts: Iterable[tuple[str, int]]) -> Backlog:
    """Per (queue, count) series (a queue's workflow and activity tasks are two), the sum per queue."""
    per: dict[str, int] = {}
    for queue, n in counts:
        per[queue] = per.get(queue, 0) + n
    return Backlog(sum(per.values()), tuple(per.items()))


class Periodic(Generic[T]):
    """A read started at most every `every_s` seconds, one at a time, in the background: `latest()`
    returns at once with the last result. A read that fails leaves nothing (shown as nothing, once)."""

    def __init__(self, every_s: float = FLEET_EVERY_S) -> None:
        self.every_s = every_s
        self.value: T | None = None
        self._task: asyncio.Future[T | None] | None = None
        self._started = -float("inf")

    def latest(self, read: Callable[[], Awaitable[T | None]]) -> tuple[T | None, bool]:
        """(the last result, whether a read was started now)."""
        task = self._task
        if task is not None and task.done():
            self._task = None
            failed = task.cancelled() or task.exception() is not None
            if failed and not task.cancelled():
                log.debug("a background read failed: %s", task.exception())
            self.value = None if failed else task.result()
        now = time.monotonic()
        if self._task is not None or now - self._started < self.every_s:
            return self.value, False
        self._started = now
        self._task = asyncio.ensure_future(read())
        return self.value, True

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class FleetWatch:
    """The fleet's state (a fleet only) and its queues' backlog (a user's workers, given a reader)."""

    def __init__(self, settings: Settings, backlog: BacklogRead | None = None) -> None:
        self.settings = settings
        self._reader = backlog if settings.members else None
        self._queues = fleet.queues(settings)
        self._fleet: Periodic[list[FleetCommand]] | None = Periodic() if is_fleet(settings) else None
        self._backlog: Periodic[Backlog] | None = Periodic(BACKLOG_EVERY_S) if self._reader is not None else None

    def latest(self, client: Client | None, stats: TickStats) -> tuple[list[FleetCommand] | None, Backlog | None]:
        commands = backlog = None
        if self._fleet is not None:
            commands, _ = self._fleet.latest(lambda: asyncio.to_thread(read_fleet, self.settings))
        reader = self._reader
        if self._backlog is not None and reader is not None and client is not None:
            backlog, started = self._backlog.latest(lambda: reader(client, self.settings.namespace, self._queues))
            stats.temporal += 2 * len(self._queues) if started else 0  # a describe per queue and task type
        return commands, backlog

    async def stop(self) -> None:
        for periodic in (self._fleet, self._backlog):
            if periodic is not None:
                await periodic.stop()
