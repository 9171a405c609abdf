"""A bare Temporal loop for bench/step_overhead.py: the same number and kind of activities per step as
AgentLoop (and its one at the end of a run), with no-op bodies. Run as its own worker process:

    python bench/bare_loop.py --address A --task-queue Q"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

OPTS = dict(start_to_close_timeout=timedelta(minutes=3), heartbeat_timeout=timedelta(seconds=2))


@dataclass
class BareInput:
    steps: int
    with_tool: list[bool]  # which steps call the tool, as AgentLoop's offline decisions do


@activity.defn(name="bare_noop")
async def bare_noop(step: int) -> int:
    return step


@workflow.defn(name="BareLoop")
class BareLoop:
    @workflow.run
    async def run(self, inp: BareInput) -> int:
        for step in range(1, inp.steps + 1):
            calls = 5 if inp.with_tool[step - 1] else 4  # running, llm, [tool], effect, completed
            for _ in range(calls):
                await workflow.execute_activity(bare_noop, step, **OPTS)
        await workflow.execute_activity(bare_noop, 0, **OPTS)  # AgentLoop's finish_run, one a run
        return inp.steps


async def serve(address: str, task_queue: str, sticky_timeout: float) -> None:
    client = await Client.connect(address)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    # the worker settings our own worker runs with (loop_worker/worker.py), so only the loop's bodies differ
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[BareLoop],
        activities=[bare_noop],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout),
        graceful_shutdown_timeout=timedelta(seconds=1),
    ):
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--address", required=True)
    p.add_argument("--task-queue", required=True)
    p.add_argument("--sticky-timeout", type=float, default=1.0)
    a = p.parse_args()
    asyncio.run(serve(a.address, a.task_queue, a.sticky_timeout))
    sys.stdout.flush()
    os._exit(0)
