"""Chaos's view of a user's run while an event waits for its activity (proof/nemeses/aim.py): a poll
whose history has not grown reads one describe, not the chain, and sees what a full read sees; a
history that grew, or a run that closed, is read whole."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

from checkpoint_tui.proof.nemeses.aim import Progress

RELEASE: dict[str, asyncio.Event] = {}


@activity.defn(name="held")
async def held(key: str) -> str:
    if key in RELEASE:
        await RELEASE[key].wait()
    return key


@workflow.defn(name="TwoHeld", sandboxed=False)
class TwoHeld:
    @workflow.run
    async def run(self, key: str) -> str:
        timeout = timedelta(seconds=60)
        await workflow.execute_activity(held, key, start_to_close_timeout=timeout)
        return await workflow.execute_activity(held, "free", start_to_close_timeout=timeout)


def _seen(progress: Progress) -> list[tuple]:
    return [(a.seq, a.activity_type, a.status, a.identity, a.attempt, a.started_at, a.closed_at) for a in progress.acts]


async def _until(progress: Progress, condition, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, _seen(progress)
        await progress.refresh()
        await asyncio.sleep(0.02)


async def test_an_unchanged_history_is_not_read_again_and_a_grown_one_is(temporal_address: str) -> None:
    client = await Client.connect(temporal_address)
    queue, key = f"aim-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    RELEASE[key] = asyncio.Event()
    identity = f"4242@aim-{key[:8]}"
    async with Worker(client, task_queue=queue, workflows=[TwoHeld], activities=[held], identity=identity):
        handle = await client.start_workflow(TwoHeld.run, key, id=f"aim-{key}", task_queue=queue)
        try:
            progress = Progress(client, handle.id)
            # the first activity in flight on this worker: only a describe says so (history has no start yet)
            await _until(progress, lambda: progress.acts and progress.acts[0].status == "running")
            assert progress.acts[0].identity == identity
            reads, hits = progress.chain_reads, progress.as_read_hits
            for _ in range(5):
                await progress.refresh()
            assert progress.chain_reads == reads, "a history that did not grow was read again"
            assert progress.as_read_hits == hits + 5  # each from one describe
            whole = Progress(client, handle.id)
            await whole.refresh()  # a first refresh always reads the chain
            assert whole.chain_reads == 1 and _seen(progress) == _seen(whole)

            RELEASE[key].set()  # the history grows: read whole again, to the run's end
            await _until(progress, lambda: progress.closed)
            assert progress.chain_reads > reads
            assert [a.status for a in progress.acts] == ["completed", "completed"]
            assert await handle.result() == "free"
        finally:  # a failed assertion leaves no run waiting on the session's dev server
            RELEASE[key].set()
            await asyncio.wait_for(handle.result(), 30)
            RELEASE.pop(key, None)
