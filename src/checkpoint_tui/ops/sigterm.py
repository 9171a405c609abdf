"""A long command (chaos, --verify, doctor) that a SIGTERM ends cleanly: what `stop` and a CI timeout
send. The signal cancels the work, so its finally blocks stop what it started, and the command ends
with one line and exit 1 instead of dying with its workers left behind."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import TypeVar

from checkpoint_tui.errors import Failed

T = TypeVar("T")


async def until_sigterm(work: Awaitable[T], stopped: str) -> T:
    """Run `work`; on SIGTERM cancel it, let its cleanup run, then raise Failed(`stopped`)."""
    loop, task = asyncio.get_running_loop(), asyncio.ensure_future(work)
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    except asyncio.CancelledError:
        raise Failed(stopped) from None
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
