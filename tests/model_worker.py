"""A user's worker whose activity asks a model over HTTP, for the model-fault tests (#53):

    python tests/model_worker.py   (TEMPORAL_ADDRESS, CHECKPOINT_TASK_QUEUE, OPENAI_BASE_URL as the lab sets them)

AskModel asks `turns` times, `pace` seconds apart: each turn is one activity that POSTs a chat request
to OPENAI_BASE_URL and fails on anything but a 2xx JSON answer (a 429, a 503, no answer within 2 s, a
broken stream), so Temporal's retry policy asks again, 0.2 s later. No framework: the plain shape of
an agent's model call."""

from __future__ import annotations

import os
from datetime import timedelta

import httpx
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from plain_worker import serve

BASE = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


@activity.defn
async def ask(turn: int) -> int:
    async with httpx.AsyncClient(timeout=2.0) as client:
        resp = await client.post(
            f"{BASE}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": f"turn {turn}"}]}
        )
    resp.raise_for_status()
    return int(resp.json()["usage"]["total_tokens"])


@workflow.defn
class AskModel:
    @workflow.run
    async def run(self, args: dict) -> int:
        total = 0
        for turn in range(int(args.get("turns", 4))):
            total += await workflow.execute_activity(
                ask,
                turn,
                start_to_close_timeout=timedelta(seconds=10),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0),
            )
            await workflow.sleep(float(args.get("pace", 0.3)))
        return total


if __name__ == "__main__":
    serve([AskModel], [ask])
