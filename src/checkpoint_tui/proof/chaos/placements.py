"""After a chaos run: each run's worker deaths placed against its history (kill_windows.py) and the runs
each touched (touched.py), from one history read a run, HISTORY_AT_ONCE runs at once (with --runs 256,
one after another took most of the audit's time)."""

from __future__ import annotations

import asyncio

from checkpoint_tui.ledger import inspect_queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.proof.chaos import kill_windows
from checkpoint_tui.proof.chaos.targets import ChaosRun, ChaosTarget
from checkpoint_tui.proof.chaos.touched import Touch, touches
from checkpoint_tui.proof.report.chaos import Placement

HISTORY_AT_ONCE = 8  # runs whose history is read at once (each a few hundred kB at most, the audit's bound)


async def place_deaths(
    chaos: ChaosRun, target: ChaosTarget, conn: Ledger, probe: list | None, ended: float | None
) -> tuple[list[Placement], list[Touch]]:
    """Every run's placements (in run order) and touches; a death after every run had closed (`ended`)
    is neither (it did not happen to the runs)."""
    gate = asyncio.Semaphore(HISTORY_AT_ONCE)

    async def one(run_id: str) -> tuple[list[Placement], list[Touch]]:
        async with gate:
            deaths = target.deaths(chaos, conn, run_id)
            kills = inspect_queries.kill_events(conn, run_id) if deaths is None else deaths
            kills = [k for k in kills if ended is None or k.at <= ended]
            if not kills:
                return [], []
            named = await target.activity_windows(chaos, run_id)
            events = await kill_windows.history_events(chaos.client, conn, run_id)
            placed = kill_windows.place(conn, run_id, kills, events, named, probe)
            return placed, touches(run_id, [k.at for k in kills], events)

    done = await asyncio.gather(*(one(run_id) for run_id in chaos.run_ids))
    return [p for placed, _ in done for p in placed], [t for _, ts in done for t in ts]
