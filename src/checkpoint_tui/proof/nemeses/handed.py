"""Which worker holds which activity attempt, as chaos's hop (hop.py) sees each task handed out and each
answered, and assisted failover from it for a worker the lab killed: every attempt handed to that worker
and not answered is failed at once by its task token (Temporal retries it now, not at its heartbeat
timeout), and a task handed to it afterwards (a long poll that outlived it) as it passes.

Why beside the supervisor's failover (ops/failover.py), which describes every running run to find a
dead worker's attempts: at 256 runs on 2 cores a pass of describes takes 1.1-1.6 s, and an attempt
handed out but not begun has no claim in the ledger to ask its run first; the hop saw it handed. The
supervisor's pass still runs: whichever reaches an attempt first fails it, the other finds it gone (a
task token names one attempt: a failure by token never reaches the retry)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from checkpoint_tui.core.activity_audit import SEEN_BY_HOP
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.ops.failover import RETRY_AT_ONCE
from checkpoint_tui.settings import Settings

log = logging.getLogger(__name__)
FAILED_BY = SEEN_BY_HOP  # the message's tail: the audit reads it as a worker's death, not the activity's failure
MAX_HELD = 100_000  # attempts remembered (one never answered, its worker dead unseen, is forgotten oldest first)
MAX_DEAD = 1_000  # identities of workers the lab killed, oldest forgotten
FAIL_S = 2.0  # each failure's bound: with the dev server down too, Temporal's timeout covers what is skipped
AT_ONCE = 64  # failures in flight at once
LISTED = 1_000  # attempts named in a death's assist event (its count is whole)
MAX_NAME = 128

Fail = Callable[[bytes, str], Awaitable[None]]  # (task token, the failure's message)


def by_token(client_of: Callable[[], Client]) -> Fail:
    """Fail an attempt by its task token, retried at once, as the supervisor's failover fails one by id."""

    async def fail(token: bytes, message: str) -> None:
        error = ApplicationError(message, type="WorkerDied", next_retry_delay=RETRY_AT_ONCE)
        await client_of().get_async_activity_handle(task_token=token).fail(error)

    return fail


@dataclass(frozen=True)
class Held:
    identity: str  # the worker's, as its poll named it
    workflow_id: str
    activity_type: str
    activity_id: str

    def name(self) -> str:
        """As the supervisor's assist events name an attempt: run:type#id, cut, on one line."""
        said = f"{self.workflow_id}:{self.activity_type[:MAX_NAME]}#{self.activity_id[:MAX_NAME]}"
        return " ".join(scrub(said, 400).split())


class Handed:
    """The hop's record of attempts in flight by worker, and their failure when the lab kills one."""

    def __init__(self, settings: Settings, fail: Fail) -> None:
        self.settings, self._fail = settings, fail
        self.held: dict[bytes, Held] = {}  # task token -> whose it is (insertion order: oldest first)
        self.dead: dict[str, int] = {}  # identity -> pid of a worker the lab killed
        self._gate = asyncio.Semaphore(AT_ONCE)
        self._passes: set[asyncio.Task] = set()

    def hand(self, token: bytes, held: Held) -> None:
        """A task handed to a worker; one handed to a worker the lab killed is failed as it passes."""
        if (pid := self.dead.get(held.identity)) is not None:
            self._start(pid, {token: held}, late=True)
            return
        if len(self.held) >= MAX_HELD:
            self.held.pop(next(iter(self.held)))
        self.held[token] = held

    def orphan(self, token: bytes, held: Held) -> None:
        """A task handed out in answer to a call whose worker was gone by then: nobody will run it."""
        self._start(self.dead.get(held.identity), {token: held}, late=True)

    def answer(self, token: bytes) -> None:
        """Its worker answered it (completed, failed or cancelled): not the lab's to fail."""
        self.held.pop(token, None)

    def died(self, identity: str, pid: int) -> None:
        """The lab killed the worker of `identity`: fail every attempt it held, in the background."""
        if len(self.dead) >= MAX_DEAD:
            self.dead.pop(next(iter(self.dead)))
        self.dead[identity] = pid
        mine = {t: h for t, h in self.held.items() if h.identity == identity}
        for token in mine:
            del self.held[token]
        self._start(pid, mine, late=False)

    async def close(self) -> None:
        """Let the failures in flight end (each is bounded), so their assist events are written."""
        if self._passes:
            await asyncio.gather(*self._passes, return_exceptions=True)

    def _start(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        task = asyncio.get_running_loop().create_task(self._failover(pid, attempts, late))
        self._passes.add(task)
        task.add_done_callback(self._passes.discard)

    async def _failover(self, pid: int | None, attempts: dict[bytes, Held], late: bool) -> None:
        """Fail the attempts; one assist event says which (none for a late one that found nothing to fail)."""
        identity = next(iter(attempts.values())).identity if attempts else None
        worker = pid if pid is not None else " ".join(scrub(identity or "?", 80).split())  # a user's identity: any text
        began, message = time.monotonic(), f"worker {worker} {FAILED_BY}"
        failed: list[str] = []

        async def one(token: bytes, held: Held) -> None:
            async with self._gate:
                try:
                    async with asyncio.timeout(FAIL_S):
                        await self._fail(token, message)
                    failed.append(held.name())
                except Exception as err:  # answered meanwhile, or the server away: its timeout covers it
                    log.info("hop failover for %s: %s", held.name(), err)

        await asyncio.gather(*(one(t, h) for t, h in attempts.items()))
        if not failed and (late or not attempts):
            return  # nothing to say: a late task already answered, a worker that held nothing
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
