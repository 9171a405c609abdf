"""One way to wait for a condition: poll it with a deadline, never a bare sleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


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
