"""One way to wait for a condition: poll it with a deadline, never a bare sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar


async def wait_until(
    condition: Callable[[], object], timeout: float, every: float = 0.05, what: str = "condition"
) -> None:
    """Poll `condition` until it is truthy; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:g} s")
        await asyncio.sleep(every)


def wait_until_sync(condition: Callable[[], object], timeout: float, every: float = 0.005) -> bool:
    """The blocking twin for code with no event loop (process stop/exec waits); True if it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return bool(condition())
        time.sleep(every)
    return True


T = TypeVar("T")


async def to_the_end(job: Awaitable[T]) -> T:
    """Await `job` to its end even if the awaiting task is cancelled meanwhile, then raise that
    cancellation (from the job's exception, if it failed): for work that, stopped half-way, leaves
    something worse than either end (a statement on a connection the next one reuses, a stamp after
    a completed write)."""
    task = asyncio.ensure_future(job)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError as exc:
            if not task.done():
                cancelled = exc
                continue
            if task.cancelled():  # the job itself was cancelled: nothing left to wait for
                raise
            failure = task.exception()  # done at the moment of the cancellation: read, not dropped
            if failure is None:
                raise
            raise exc from failure
        except BaseException as failure:
            if cancelled is not None:
                raise cancelled from failure
            raise
    if cancelled is not None:
        raise cancelled
    return result
