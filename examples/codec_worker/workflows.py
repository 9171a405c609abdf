"""`CodecMailer`: a hand-rolled agent, `turns` turns of a model request (`ask_model`) naming one email,
then the tool call (`send_email`) that sends it through the effects library. Its input and every
activity's input and result travel through the team's converter and codec (codec.py)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

OPTIONS = {
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(maximum_interval=timedelta(seconds=2)),
}


@workflow.defn
class CodecMailer:
    @workflow.run
    async def run(self, inp: dict) -> int:
        turns = inp.get("turns", 3) if isinstance(inp, dict) else 3
        if not isinstance(turns, int) or not 1 <= turns <= 100:
            raise workflow.ApplicationError("turns: 1..100", non_retryable=True)
        for turn in range(1, turns + 1):
            call = await workflow.execute_activity("ask_model", turn, **OPTIONS)
            await workflow.execute_activity("send_email", call, **OPTIONS)
            await workflow.sleep(float(inp.get("pace", 0.2)))
        return turns
