"""`beating()`: heartbeat now and every HEARTBEAT_EVERY_S while the body runs.

A heartbeat announces the attempt at once (a never-beaten activity cannot be declared dead early)
and is also how a cancellation reaches the activity.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

from checkpoint_tui.engine.shared import HEARTBEAT_EVERY_S


@asynccontextmanager
async def beating(every: float = HEARTBEAT_EVERY_S) -> AsyncIterator[None]:
    activity.heartbeat()

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
