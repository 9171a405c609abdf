"""The session's backlog read (core/fleet_view.py `BacklogRead`) made with proof's task-queue sampler, one
describe per queue and task type: the session (core/) may not import proof/, the TUI may, so `run_app`
hands this in."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from checkpoint_tui.core.fleet_view import backlog_of
from checkpoint_tui.core.view import Backlog
from checkpoint_tui.proof.measure.backlog import BacklogSampler

NO_FILE = Path("/dev/null")  # sample_once() writes nothing; only start() would open the sampler's file


async def read_backlog(client: Client, namespace: str, queues: list[str]) -> Backlog | None:
    """The backlog of every queue; None if any describe failed or had no stats (unknown, not a smaller
    count: the sampler skips such an answer rather than read it as zero)."""
    sampler = BacklogSampler(client, namespace, queues, NO_FILE)
    samples = await sampler.sample_once()
    if sampler.skipped:
        return None
    return backlog_of((s.queue, s.backlog) for s in samples)
