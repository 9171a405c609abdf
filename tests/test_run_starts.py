"""chaos --runs N starts the lead, then the others beside the events (proof/chaos/run_starts.py): started
one after another before any event, 256 short runs were all done before the first event came (#52)."""

from __future__ import annotations

import asyncio
import itertools
import time

from checkpoint_tui.proof.chaos.run_starts import START_AT_ONCE, RunStarts

START_S = 0.05  # one start: a ledger row and a StartWorkflowExecution


def _starter() -> tuple[list[str], RunStarts]:
    ids = itertools.count()

    async def start() -> str:
        await asyncio.sleep(START_S)
        return f"run-{next(ids)}"

    run_ids: list[str] = []
    return run_ids, RunStarts(run_ids, 64, None, start)


def test_the_lead_comes_first_and_the_others_start_in_the_background_many_at_once(capsys):
    async def scenario() -> tuple[float, int, float]:
        run_ids, starts = _starter()
        assert await starts.lead() == "run-0" and run_ids == ["run-0"]
        began = time.monotonic()
        starts.start_others()
        started_meanwhile = len(run_ids)  # the events are placed from here on, while the others start
        await starts.finish(ok=True)
        return time.monotonic() - began, started_meanwhile, len(run_ids)

    took, meanwhile, total = asyncio.run(scenario())
    assert meanwhile == 1 and total == 64
    assert took < 63 * START_S / 2, took  # START_AT_ONCE at a time, not one after another (3.15 s)
    assert took >= (63 // START_AT_ONCE) * START_S
    assert "and 63 more run(s), started in" in capsys.readouterr().out


def test_a_failing_run_stops_the_starting():
    async def scenario() -> int:
        run_ids, starts = _starter()
        await starts.lead()
        starts.start_others()
        await asyncio.sleep(START_S / 2)
        await starts.finish(ok=False)  # the run failed while the others were starting: no more start
        n = len(run_ids)
        await asyncio.sleep(START_S * 3)
        assert len(run_ids) == n
        return n

    assert asyncio.run(scenario()) < 64
