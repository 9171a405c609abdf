"""Starting chaos's runs (`--runs N`): the lead first, whose activities place the events, then the others
while the events are placed, START_AT_ONCE at a time (or one by one at --rate). Started one after another
before any event, 256 runs took 8 s to start and were done before the first event came: at load the
events must meet runs in flight."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

START_AT_ONCE = 16  # runs started at once: each is a ledger row and a StartWorkflowExecution


class RunStarts:
    def __init__(self, run_ids: list[str], runs: int, rate: float | None, start: Callable[[], Awaitable[str]]) -> None:
        """`run_ids`: the list each started run is appended to; `start()`: start one, its run id."""
        self.run_ids, self.runs, self.rate, self.start = run_ids, runs, rate, start
        self._others: asyncio.Task | None = None

    async def lead(self) -> str:
        self.run_ids.append(await self.start())
        return self.run_ids[0]

    def start_others(self) -> None:
        """The runs after the lead, in the background (finish() waits for them)."""
        if self.runs > 1:
            self._others = asyncio.ensure_future(self._start_others())

    async def finish(self, ok: bool) -> None:
        """Every run started (`ok`), or, when the run is failing, the starting stopped."""
        if self._others is None:
            return
        if not ok:
            self._others.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._others
            return
        await self._others

    async def _start_others(self) -> None:
        began, rest = time.monotonic(), self.runs - 1
        if self.rate:  # load: at a rate, not all at once
            for _ in range(rest):
                await asyncio.sleep(1 / self.rate)
                self.run_ids.append(await self.start())
        else:
            gate = asyncio.Semaphore(START_AT_ONCE)

            async def one() -> None:
                async with gate:
                    self.run_ids.append(await self.start())

            await asyncio.gather(*(one() for _ in range(rest)))
        ids = " ".join(self.run_ids[1:])
        print(f"and {rest} more run(s), started in {time.monotonic() - began:.1f} s: {ids}", flush=True)
