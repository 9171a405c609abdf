"""chaos --runs N starts the lead, then the others beside the events (proof/chaos/run_starts.py): started
one after another before any event, 256 short runs were all done before the first event came (#52)."""

from __future__ import annotations

import asyncio
import itertools
import time
from types import SimpleNamespace

import pytest

from checkpoint_tui.proof.chaos.run_starts import START_AT_ONCE, RunStarts
from checkpoint_tui.settings import Settings

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


class _Restarting:
    """A client whose server is down for its first `down` starts (tcp connect error), and whose first
    attempt, as a server dying mid-request can, had started the workflow after all."""

    def __init__(self, down: int, started_before: bool, said_run_id: str | None = "first-run") -> None:
        self.down, self.started_before, self.calls, self.said_run_id = down, started_before, 0, said_run_id

    async def start_workflow(self, *args, **kwargs):
        from temporalio.exceptions import WorkflowAlreadyStartedError
        from temporalio.service import RPCError, RPCStatusCode

        self.calls += 1
        if self.calls <= self.down:
            raise RPCError("tcp connect error", RPCStatusCode.UNAVAILABLE, b"")
        if self.started_before:
            raise WorkflowAlreadyStartedError(kwargs["id"], "W", run_id=self.said_run_id)
        return SimpleNamespace(result_run_id="first-run")

    def get_workflow_handle(self, workflow_id, run_id=None):
        async def describe():
            return SimpleNamespace(run_id="first-run")

        return SimpleNamespace(describe=describe, run_id=run_id)


@pytest.mark.parametrize("started_before", [False, True])
async def test_a_start_that_meets_the_server_restarting_is_tried_again_and_a_start_that_landed_is_kept(
    tmp_path, monkeypatch, started_before
):
    """#52, seed 2 at 256 runs: the dev-server kill came while the other runs were being started, and one
    start's tcp connect error ended the chaos command in a traceback. A start that cannot reach Temporal
    is tried again while the lab restarts it; one the server took before it went away is that run's."""
    from checkpoint_tui.core import runs

    monkeypatch.setattr(runs, "START_RETRY_EVERY_S", 0.01)
    said = []

    async def call(fn, *args):
        said.append((fn.__name__, args[1:]))

    client = _Restarting(down=3, started_before=started_before)
    await runs.launch(Settings(home=tmp_path), client, "run-1", "W", [], ledger_call=call)
    assert client.calls == 4 and said == [("_mark_started", ("run-1", "first-run"))]
    # an error that does not say the run id: Temporal's description of the workflow does
    await runs.launch(Settings(home=tmp_path), _Restarting(1, True, None), "run-3", "W", [], ledger_call=call)
    assert said[-1] == ("_mark_started", ("run-3", "first-run"))
    # a workflow id that was taken before any failure is someone else's: not this run's
    with pytest.raises(Exception, match="already"):
        await runs.launch(Settings(home=tmp_path), _Restarting(0, True), "run-2", "W", [], ledger_call=call)
    assert said[-1][0] == "_mark_not_started"
