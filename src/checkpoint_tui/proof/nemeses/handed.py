"""Which worker holds which activity attempt, as chaos's hop (hop.py) sees each task handed out and each
answer sent back, and assisted failover from it: when a worker of the lab dies, every attempt it was
handed and had not answered is failed at once by its task token (Temporal retries it now, not at its
heartbeat timeout); a task handed out afterwards to a poll it sent before it died, or to a call whose
worker was gone by the answer, is failed as it passes.

It learns of a death at once from chaos's own kills (`died`) and, for any other (a hook crash, the
watchdog's kill of a hung worker, a crash), from the deaths the supervisor records in the ledger,
read every WATCH_S. With a hop, chaos's supervisor fails no attempt itself (`--attempts-by-hop`): its
failover by id fails whatever attempt is current, and the hop's failure would already have made that
a retry on a live worker. It still resets the runs' sticky queues. What the hop never saw handed to
the dead worker (Temporal started it as the worker's poll was being cancelled; a poll that outlived
its worker past a proxy in front of Temporal that does not pass the cancel on, such as nginx's
grpc_pass; a worker that reaches Temporal around the hop) is failed by id in a late pass, LATE_S after
the death and once the failures by token have landed: the describe of every running run, failing
only a started attempt of the dead identity that the hop never saw handed to it (one it saw, it
failed by token: the current attempt is then its retry).

Why the hop: at 256 runs on 2 cores the supervisor's pass of describes over every running run takes
1.1-2.4 s, and an attempt handed out but not begun has no claim in the ledger to ask its run first;
the hop saw it handed. A task token names one attempt: a failure by token never reaches its retry."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from grpc import StatusCode
from grpc.aio import AioRpcError
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import PollActivityTaskQueueResponse
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.activity_audit import SEEN_BY_HOP
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.inspect_queries import last_event_id
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.ops import fleet
from checkpoint_tui.ops.failover import NOT_RUNNING, RETRY_AT_ONCE
from checkpoint_tui.settings import HOST, Settings

log = logging.getLogger(__name__)
FAILED_BY = SEEN_BY_HOP  # the message's tail: the audit reads it as a worker's death, not the activity's failure
MAX_HELD = 100_000  # attempts remembered (one never answered, its worker's death unseen, is forgotten oldest first)
MAX_DEAD = 1_000  # identities of dead workers, oldest forgotten
FAIL_S = 2.0  # each failure's bound: with the dev server down too, Temporal's timeout covers what is skipped
AT_ONCE = 64  # failures in flight at once
LISTED = 1_000  # attempts named in a death's assist event (its count is whole)
MAX_NAME = 128
NOT_FOUND = StatusCode.NOT_FOUND  # Temporal has no such attempt: answered, failed or timed out already
WATCH_S = 0.05  # how often the ledger is read for deaths chaos did not cause itself
AWAY_S, AWAY_EVERY_S = 10.0, 0.2  # a failure Temporal could not take (away, restarting) is tried again so long
_AWAY = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.RESOURCE_EXHAUSTED)
LATE_S = 1.0  # the late pass, once the dead worker's last calls are surely over at Temporal
# Past a proxy that does not pass a cancel on, a dead worker's polls live at Temporal until their long poll
# ends, each taking a task: a late pass that failed one is followed by another, LATE_ROUNDS in all at most.
LATE_ROUNDS = 5
LATE_AT_ONCE = 32  # the late pass's describes at once

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
    attempt: int = 1
    execution: str = ""  # Temporal's run id of the workflow's execution (activity ids repeat across a chain)

    def key(self) -> tuple[str, str, str, int]:
        return (self.identity, self.execution, self.activity_id, self.attempt)

    def name(self) -> str:
        """As the supervisor's assist events name an attempt: run:type#id, cut, on one line."""
        return _one_line(f"{self.workflow_id}:{self.activity_type[:MAX_NAME]}#{self.activity_id[:MAX_NAME]}", 400)


class Handed:
    """The hop's record of attempts in flight by worker, and their failure when one dies."""

    def __init__(self, settings: Settings, fail: Fail, client_of: Callable[[], Client] | None = None) -> None:
        """`client_of`: the client of the late pass by id (None: no late pass)."""
        self.settings, self._fail, self._client_of = settings, fail, client_of
        self.held: dict[bytes, Held] = {}  # task token -> whose it is (insertion order: oldest first)
        self._answering: dict[bytes, Held] = {}  # an answer on its way to Temporal
        self._given: dict[tuple[str, str, str, int], None] = {}  # Held.key() of every attempt the hop saw handed
        self._back: dict[str, float] = {}  # identity -> when a worker polled under it again after its death
        self._late_gate = asyncio.Semaphore(LATE_AT_ONCE)  # the late pass's own: failures by token never wait on it
        self._closing = False
        self._late_due: dict[str, int] = {}  # identity -> pid: dead, its late pass to come
        self._late_passing = False
        self.dead: dict[str, tuple[int, float]] = {}  # identity -> (pid, when) of a worker that died
        self._gate = asyncio.Semaphore(AT_ONCE)
        self._passes: set[asyncio.Task] = set()
        self._failing: set[asyncio.Task] = set()  # of them, the failures by token
        self._watch: asyncio.Task | None = None

    def handed(self, tasks: Sequence[PollActivityTaskQueueResponse], identity: str, at: float, gone: bool) -> None:
        """Activity tasks Temporal handed out in reply to a call of `identity`'s sent at `at`; `gone`: its
        caller had gone by the reply."""
        for task in tasks:
            run = task.workflow_execution.workflow_id
            held = Held(
                identity, run, task.activity_type.name, task.activity_id, task.attempt, task.workflow_execution.run_id
            )
            if gone:
                self.orphan(task.task_token, held)
            else:
                self.hand(task.task_token, held, at)

    def hand(self, token: bytes, held: Held, asked_at: float) -> None:
        """A task handed to a worker in answer to a call it sent at `asked_at`: one sent before its worker
        died is failed as it passes (a worker started since under the same identity is alive)."""
        if (death := self.dead.get(held.identity)) is not None:
            if asked_at <= death[1]:
                self._gave(held)
                self._start(death[0], {token: held}, late=True)
                return
            del self.dead[held.identity]
            self._back[held.identity] = asked_at  # a record of that death read later is not this worker's
        if len(self.held) >= MAX_HELD:
            self.held.pop(next(iter(self.held)))
        self.held[token] = held
        self._gave(held)

    def _gave(self, held: Held) -> None:
        if len(self._given) >= MAX_HELD:
            self._given.pop(next(iter(self._given)))
        self._given[held.key()] = None

    def orphan(self, token: bytes, held: Held) -> None:
        """A task handed out in answer to a call whose worker was gone by then: nobody will run it."""
        death = self.dead.get(held.identity)
        self._gave(held)
        self._start(death[0] if death else None, {token: held}, late=True)

    def answer(self, token: bytes) -> None:
        """Its worker sent its answer (completed, failed or cancelled): not the lab's to fail while it is on its way."""
        if (held := self.held.pop(token, None)) is not None:
            self._answering[token] = held

    def settle(self, token: bytes, done: asyncio.Future) -> None:
        """The answer's call ended: Temporal took it (or has no such attempt any more: answered, failed or
        timed out), or it did not, and the attempt is its worker's again: failed now if that worker died."""
        err = None if done.cancelled() else done.exception()
        landed = not done.cancelled() and (err is None or isinstance(err, AioRpcError) and err.code() == NOT_FOUND)
        if (held := self._answering.pop(token, None)) is None or landed:
            return
        if (death := self.dead.get(held.identity)) is not None:
            self._start(death[0], {token: held}, late=True)
        else:
            self.held[token] = held

    def died(self, identity: str, pid: int, at: float) -> None:
        """The worker of `identity` died at `at`: fail every attempt it held, in the background."""
        if identity in self.dead or at <= self._back.get(identity, 0.0):
            return  # seen already (chaos's kill, then the supervisor's record of it), or a new worker polls under it
        if len(self.dead) >= MAX_DEAD:
            self.dead.pop(next(iter(self.dead)))
        self.dead[identity] = (pid, at)
        mine = {t: h for t, h in self.held.items() if h.identity == identity}
        for token in mine:
            del self.held[token]
        if mine:
            self._start(pid, mine, late=False)
        if self._client_of is not None:
            self._late_due[identity] = pid
            if not self._late_passing:  # one late pass at a time, for every death since the last began
                self._late_passing = True
                self._track(self._late_passes())

    @property
    def late_passing(self) -> bool:
        """A late pass is to come or under way."""
        return self._late_passing

    def watch(self) -> None:
        """Read the ledger for the deaths chaos did not cause itself, from now on."""
        self._watch = asyncio.get_running_loop().create_task(self._watching())

    async def close(self) -> None:
        """Stop watching and the late passes to come; let the failures in flight end (each is bounded), so their
        assist events are written."""
        self._closing = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        while self._passes:
            await asyncio.gather(*self._passes, return_exceptions=True)

    async def _watching(self) -> None:
        """Every WATCH_S, the deaths the supervisor recorded since (off the loop: a PostgreSQL ledger's round
        trip must not hold the hop's calls). One of a slot a fleet-down holds is left alone, as the
        supervisor leaves it: its queue is down on purpose."""
        seen: int | None = None
        while True:
            try:
                if seen is None:
                    seen = await asyncio.to_thread(lambda: last_event_id(connect(self.settings.ledger)))
                    continue
                deaths = await asyncio.to_thread(self._deaths, seen)
                for event_id, at, pid, identity, queue in deaths:
                    seen = event_id
                    if fleet.held_until(self.settings, queue or self.settings.task_queue) is None:
                        self.died(identity, pid, at)
            except Exception as err:  # the ledger busy or away for a moment: read again
                log.info("hop: the ledger's deaths not read: %s", err)
            await asyncio.sleep(WATCH_S)

    def _deaths(self, after: int) -> list[tuple[int, float, int, str, str | None]]:
        return queries.deaths_after(connect(self.settings.ledger), after, HOST)

    def _running(self) -> list[str]:
        return queries.running_runs(connect(self.settings.ledger), self.settings.task_queue)

    async def _late_passes(self) -> None:
        rounds: dict[str, int] = {}
        try:
            while self._late_due and not self._closing:
                await asyncio.sleep(LATE_S)
                # the failures by token first: an attempt one of them is failing is current until it lands
                await asyncio.gather(*self._failing, return_exceptions=True)
                due, self._late_due = self._late_due, {}
                try:
                    found = await self._late_pass(due)
                except Exception:  # the ledger or the client away: the deaths' own timeouts remain
                    log.exception("hop: a late pass failed")
                    continue
                for who in found:  # its polls may still take tasks: asked again, LATE_ROUNDS in all at most
                    rounds[who] = rounds.get(who, 1) + 1
                    if rounds[who] <= LATE_ROUNDS and who in self.dead:
                        self._late_due.setdefault(who, due[who])
        finally:
            self._late_passing = False

    async def _late_pass(self, dead: dict[str, int]) -> set[str]:
        """Fail by id what the dead workers started and the hop never saw handed to them: every running run
        described once for all of them (a burst of deaths, the replacements of a killed dev server's lab:
        one pass, not one each)."""
        assert self._client_of is not None
        client, began = self._client_of(), time.monotonic()
        failed: dict[str, list[str]] = {who: [] for who in dead}
        runs = await asyncio.to_thread(self._running)

        async def one(run_id: str) -> None:
            async with self._late_gate:
                with contextlib.suppress(Exception):  # completed meanwhile, or the server away: its timeout remains
                    async with asyncio.timeout(FAIL_S):
                        desc = await client.get_workflow_handle(run_id).describe()
                    for pa in desc.raw_description.pending_activities:
                        await fail(run_id, desc.run_id, pa)

        async def fail(run_id: str, execution: str, pa: PendingActivityInfo) -> None:
            who, key = pa.last_worker_identity, (pa.last_worker_identity, execution, pa.activity_id, pa.attempt)
            if who not in dead or who not in self.dead or pa.state in NOT_RUNNING or key in self._given:
                return  # not a dead worker's (any more), or one it saw handed out: failed by token
            act = client.get_async_activity_handle(workflow_id=run_id, run_id=execution, activity_id=pa.activity_id)
            died = ApplicationError(
                f"worker {dead[who]} {FAILED_BY}", type="WorkerDied", next_retry_delay=RETRY_AT_ONCE
            )
            try:
                async with asyncio.timeout(FAIL_S):
                    await act.fail(died)
                failed[who].append(Held(who, run_id, pa.activity_type.name, pa.activity_id).name())
            except Exception as err:  # answered meanwhile: nothing to fail
                log.info("hop late pass for %s: %s", run_id, err)

        await asyncio.gather(*(one(r) for r in runs))
        for who, names in failed.items():
            if names:
                await self._record(dead[who], who, names, {"asked": len(runs), "by_id": True}, began, late=True)
        return {who for who, names in failed.items() if names}

    def _start(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        task = self._track(self._failover(pid, attempts, late))
        self._failing.add(task)
        task.add_done_callback(self._failing.discard)

    def _track(self, work: Coroutine[Any, Any, None]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(work)
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)
        return task

    async def _failover(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        """Fail the attempts; one assist event says which (none for a late one that found nothing to fail)."""
        identity = next(iter(attempts.values())).identity
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
                            if away:  # not landed: the late pass may fail it by id
                                self._given.pop(held.key(), None)
                            return
                    except Exception as err:  # its timeout covers it
                        log.info("hop failover for %s: %s", held.name(), err)
                        return
                await asyncio.sleep(AWAY_EVERY_S)  # the dev server restarting (chaos kills it too)

        await asyncio.gather(*(one(t, h) for t, h in attempts.items()))
        if late and not failed:
            return  # a late task answered meanwhile: nothing happened
        await self._record(pid, identity, failed, {"asked": len(attempts)}, began, late)

    async def _record(
        self, pid: int | None, identity: str, failed: list[str], said: dict, began: float, late: bool
    ) -> None:
        """The pass's assist event (the worker events pane, and the record of what the lab failed)."""
        said = {
            "failed_activities": failed[:LISTED],
            "failed_activities_count": len(failed),
            "sticky_reset": [],
            "sticky_reset_count": 0,
            **said,
            "pass_s": round(time.monotonic() - began, 3),
            "by": "hop",
            **({"late": True} if late else {}),
        }
        name = _one_line(identity, 200)
        try:
            await asyncio.to_thread(
                lambda: record_worker_event(connect(self.settings.ledger), "assist", pid, name, detail=json.dumps(said))
            )
        except Exception:  # the ledger away: the failures stand in Temporal's history, which is the proof
            log.exception("hop failover: its assist event was not recorded")
