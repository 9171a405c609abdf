"""Which worker holds which activity attempt, as chaos's hop (hop.py) sees each task handed out and each
answer sent back, and assisted failover from it: when a worker of the lab dies, every attempt it was
handed and had not answered is failed at once by its task token (Temporal retries it now, not at its
heartbeat timeout); a task handed out afterwards to a poll it sent before it died, or to a call whose
worker was gone by the answer, is failed as it passes.

It learns of a death at once from chaos's own kills (`died`) and, for any other (a hook crash, the
watchdog's kill of a hung worker, a crash), from the deaths the supervisor records in the ledger,
read every WATCH_S. With a hop, chaos's supervisor fails no attempt itself (`--attempts-by-hop`): its
failover by id fails whatever attempt is current, and the hop's failure would already have made that
a retry on a live worker. It still resets the runs' sticky queues.

Why the hop: at 256 runs on 2 cores the supervisor's pass of describes over every running run takes
1.1-2.4 s, and an attempt handed out but not begun has no claim in the ledger to ask its run first;
the hop saw it handed. A task token names one attempt: a failure by token never reaches its retry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from temporalio.api.workflowservice.v1 import PollActivityTaskQueueResponse
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.activity_audit import SEEN_BY_HOP
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.inspect_queries import last_event_id
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.ops.failover import RETRY_AT_ONCE
from checkpoint_tui.settings import Settings

log = logging.getLogger(__name__)
FAILED_BY = SEEN_BY_HOP  # the message's tail: the audit reads it as a worker's death, not the activity's failure
MAX_HELD = 100_000  # attempts remembered (one never answered, its worker's death unseen, is forgotten oldest first)
MAX_DEAD = 1_000  # identities of dead workers, oldest forgotten
FAIL_S = 2.0  # each failure's bound: with the dev server down too, Temporal's timeout covers what is skipped
AT_ONCE = 64  # failures in flight at once
LISTED = 1_000  # attempts named in a death's assist event (its count is whole)
MAX_NAME = 128
WATCH_S = 0.05  # how often the ledger is read for deaths chaos did not cause itself
AWAY_S, AWAY_EVERY_S = 10.0, 0.2  # a failure Temporal could not take (away, restarting) is tried again so long
_AWAY = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)

Fail = Callable[[bytes, str], Awaitable[None]]  # (task token, the failure's message)


def by_token(client_of: Callable[[], Client]) -> Fail:
    """Fail an attempt by its task token, retried at once, as the supervisor's failover fails one by id."""

    async def fail(token: bytes, message: str) -> None:
        error = ApplicationError(message, type="WorkerDied", next_retry_delay=RETRY_AT_ONCE)
        await client_of().get_async_activity_handle(task_token=token).fail(error)

    return fail


def _one_line(text: str, limit: int) -> str:
    return " ".join(scrub(text, limit).split())


@dataclass(frozen=True)
class Held:
    identity: str  # the worker's, as its call named it (a user's worker: any text)
    workflow_id: str
    activity_type: str
    activity_id: str

    def name(self) -> str:
        """As the supervisor's assist events name an attempt: run:type#id, cut, on one line."""
        return _one_line(f"{self.workflow_id}:{self.activity_type[:MAX_NAME]}#{self.activity_id[:MAX_NAME]}", 400)


class Handed:
    """The hop's record of attempts in flight by worker, and their failure when one dies."""

    def __init__(self, settings: Settings, fail: Fail) -> None:
        self.settings, self._fail = settings, fail
        self.held: dict[bytes, Held] = {}  # task token -> whose it is (insertion order: oldest first)
        self.dead: dict[str, tuple[int, float]] = {}  # identity -> (pid, when) of a worker that died
        self._gate = asyncio.Semaphore(AT_ONCE)
        self._passes: set[asyncio.Task] = set()
        self._watch: asyncio.Task | None = None

    def handed(self, tasks: Sequence[PollActivityTaskQueueResponse], identity: str, at: float, gone: bool) -> None:
        """Activity tasks Temporal handed out in reply to a call of `identity`'s sent at `at`; `gone`: its
        caller had gone by the reply."""
        for task in tasks:
            run = task.workflow_execution.workflow_id
            held = Held(identity, run, task.activity_type.name, task.activity_id)
            if gone:
                self.orphan(task.task_token, held)
            else:
                self.hand(task.task_token, held, at)

    def hand(self, token: bytes, held: Held, asked_at: float) -> None:
        """A task handed to a worker in answer to a call it sent at `asked_at`: one sent before its worker
        died is failed as it passes (a worker started since under the same identity is alive)."""
        if (death := self.dead.get(held.identity)) is not None:
            if asked_at <= death[1]:
                self._start(death[0], {token: held}, late=True)
                return
            del self.dead[held.identity]
        if len(self.held) >= MAX_HELD:
            self.held.pop(next(iter(self.held)))
        self.held[token] = held

    def orphan(self, token: bytes, held: Held) -> None:
        """A task handed out in answer to a call whose worker was gone by then: nobody will run it."""
        death = self.dead.get(held.identity)
        self._start(death[0] if death else None, {token: held}, late=True)

    def answer(self, token: bytes) -> None:
        """Its worker answered it (completed, failed or cancelled), whatever Temporal says: not the lab's to fail."""
        self.held.pop(token, None)

    def died(self, identity: str, pid: int, at: float) -> None:
        """The worker of `identity` died at `at`: fail every attempt it held, in the background."""
        if identity in self.dead:
            return  # seen already (chaos's kill, then the supervisor's record of it)
        if len(self.dead) >= MAX_DEAD:
            self.dead.pop(next(iter(self.dead)))
        self.dead[identity] = (pid, at)
        mine = {t: h for t, h in self.held.items() if h.identity == identity}
        for token in mine:
            del self.held[token]
        if mine:
            self._start(pid, mine, late=False)

    def watch(self) -> None:
        """Read the ledger for the deaths chaos did not cause itself, from now on."""
        self._watch = asyncio.get_running_loop().create_task(self._watching())

    async def close(self) -> None:
        """Stop watching; let the failures in flight end (each is bounded), so their assist events are written."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        while self._passes:
            await asyncio.gather(*self._passes, return_exceptions=True)

    async def _watching(self) -> None:
        conn = connect(self.settings.ledger)
        seen = last_event_id(conn)
        while True:
            await asyncio.sleep(WATCH_S)
            try:
                deaths = queries.deaths_after(conn, seen)
            except Exception as err:  # the ledger busy or away for a moment: read again
                log.info("hop: the ledger's deaths not read: %s", err)
                continue
            for event_id, at, pid, identity in deaths:
                seen = event_id
                self.died(identity, pid, at)

    def _start(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._failover(pid, attempts, late))
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)

    async def _failover(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        """Fail the attempts; one assist event says which (none for a late one that found nothing to fail)."""
        identity = _one_line(next(iter(attempts.values())).identity, 200)
        worker = pid if pid is not None else _one_line(identity, 80)
        began, message, failed = time.monotonic(), f"worker {worker} {FAILED_BY}", []

        async def one(token: bytes, held: Held) -> None:
            until = time.monotonic() + AWAY_S
            while True:
                async with self._gate:
                    try:
                        async with asyncio.timeout(FAIL_S):
                            await self._fail(token, message)
                        failed.append(held.name())
                        return
                    except (TimeoutError, RPCError) as err:  # not found: answered meanwhile
                        away = isinstance(err, TimeoutError) or err.status in _AWAY
                        if not away or time.monotonic() > until:
                            log.info("hop failover for %s: %s", held.name(), err)
                            return
                    except Exception as err:  # its timeout covers it
                        log.info("hop failover for %s: %s", held.name(), err)
                        return
                await asyncio.sleep(AWAY_EVERY_S)  # the dev server restarting (chaos kills it too)

        await asyncio.gather(*(one(t, h) for t, h in attempts.items()))
        if late and not failed:
            return  # a late task answered meanwhile: nothing happened
        said = {
            "failed_activities": failed[:LISTED],
            "failed_activities_count": len(failed),
            "sticky_reset": [],
            "sticky_reset_count": 0,
            "asked": len(attempts),
            "pass_s": round(time.monotonic() - began, 3),
            "by": "hop",
        }
        try:
            detail = json.dumps({**said, "late": True} if late else said)
            record_worker_event(connect(self.settings.ledger), "assist", pid, identity, detail=detail)
        except Exception:  # the ledger away: the failures stand in Temporal's history, which is the proof
            log.exception("hop failover: its assist event was not recorded")
