"""What the tests' own plain worker scripts share (stuck_worker.py, doctor_worker.py, model_worker.py):
a Temporal worker on CHECKPOINT_TASK_QUEUE at TEMPORAL_ADDRESS, as the lab sets them, until SIGTERM or
SIGINT. The workflows live in each script's __main__: nothing to sandbox-import."""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker


async def _serve(workflows: list[type], activities: list[Any], options: dict[str, Any]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "127.0.0.1:7233"))
    worker = Worker(
        client,
        task_queue=os.environ["CHECKPOINT_TASK_QUEUE"],
        workflows=workflows,
        activities=activities,
        workflow_runner=UnsandboxedWorkflowRunner(),
        graceful_shutdown_timeout=timedelta(seconds=1),
        **options,
    )
    async with worker:
        await stop.wait()


def serve(workflows: list[type], activities: list[Any], **options: Any) -> None:
    """Run the worker (`options`: more of Worker's keyword arguments) until it is told to stop."""
    asyncio.run(_serve(workflows, activities, options))
