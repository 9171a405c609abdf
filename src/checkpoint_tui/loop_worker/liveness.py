"""The worker's liveness beat: its event loop touches run/beat-<pid> (Settings.beat_file) every BEAT_EVERY_S.

Temporal sees a hung worker only through overdue activity heartbeats, and only for an activity that
has started; the supervisor needs to know sooner and without asking the server every tick. The loop
that runs our activities (and the SDK's polls) is the thing that freezes when a worker hangs (a
blocking call, a runaway computation holding the GIL, SIGSTOP), so the beat is written by a task on
that loop: a beat file older than the watchdog's limit means the worker cannot make progress."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from checkpoint_tui.settings import BEAT_EVERY_S


async def beat_forever(path: Path, every_s: float = BEAT_EVERY_S) -> None:
    """Touch `path` every `every_s` until cancelled (the worker's shutdown removes it)."""
    path.touch(mode=0o600)
    try:
        while True:
            os.utime(path)
            await asyncio.sleep(every_s)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
