"""A user's worker for the doctor tests: one activity scheduled four ways.

    python tests/doctor_worker.py   (TEMPORAL_ADDRESS, CHECKPOINT_TASK_QUEUE as the lab sets them)

- NoHeartbeat: start-to-close 30 s, no heartbeat timeout (a kill costs 30 s: a finding);
- Heartbeat2s: the same with a 2 s heartbeat timeout, the activity heartbeating (no finding);
- SingleAttempt: a 2 s heartbeat but maximum_attempts=1 (a kill fails the workflow: a finding);
- LocalOnly: a local activity (a kill costs a workflow task timeout: a finding)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from plain_worker import serve


@activity.defn
async def send_note(n: int) -> str:
    for _ in range(5):  # about 0.5 s, long enough for `doctor --measure` to land a kill inside it
        activity.heartbeat()
        await asyncio.sleep(0.1)
    return f"note {n}"


@workflow.defn
class NoHeartbeat:
    @workflow.run
    async def run(self, n: int = 2) -> list[str]:
        return [
            await workflow.execute_activity(send_note, i, start_to_close_timeout=timedelta(seconds=30))
            for i in range(n)
        ]


@workflow.defn
class Heartbeat2s:
    @workflow.run
    async def run(self, n: int = 2) -> list[str]:
        return [
            await workflow.execute_activity(
                send_note, i, start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=timedelta(seconds=2)
            )
            for i in range(n)
        ]


@workflow.defn
class SingleAttempt:
    @workflow.run
    async def run(self, n: int = 1) -> list[str]:
        return [
            await workflow.execute_activity(
                send_note,
                i,
                start_to_close_timeout=timedelta(seconds=5),
                heartbeat_timeout=timedelta(seconds=2),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
            for i in range(n)
        ]


@workflow.defn
class LocalOnly:
    @workflow.run
    async def run(self, n: int = 1) -> list[str]:
        return [
            await workflow.execute_local_activity(send_note, i, start_to_close_timeout=timedelta(seconds=5))
            for i in range(n)
        ]


if __name__ == "__main__":
    serve(
        [NoHeartbeat, Heartbeat2s, SingleAttempt, LocalOnly],
        [send_note],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )
