"""`beating()`: heartbeat every HEARTBEAT_EVERY_S while the body runs, the first after one interval.

A heartbeat keeps a long attempt alive past the heartbeat timeout and is how a cancellation (a pause,
a reset) reaches it. Most attempts end within milliseconds and send none: each heartbeat is a request
the server records, and one at the start of every llm, tool and effect activity cost the dev server
~5 ms of CPU a step at 16 runs at once (see docs/numbers.md). An attempt that has sent none is timed
from its start, so the first beat, well inside the 2 s timeout, keeps it as alive as one at once; a
cancellation requested in its first interval arrives with that beat, sooner than it would behind the
SDK's throttle (80 % of the timeout after a beat at the start).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

from checkpoint_tui.loop_worker.shared import HEARTBEAT_EVERY_S


@asynccontextmanager
async def beating(every: float = HEARTBEAT_EVERY_S) -> AsyncIterator[None]:
    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
