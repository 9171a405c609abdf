"""The agent loop as a Temporal workflow. Deterministic: no clock, randomness, I/O or env reads;
the pause between steps is derived from the step index."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from checkpoint_tui.engine.activities import AgentActivities
    from checkpoint_tui.engine.shared import (
        GUARDRAIL_ERROR,
        HEARTBEAT_TIMEOUT,
        RETRY_BACKOFF,
        RETRY_INITIAL,
        RETRY_MAX_ATTEMPTS,
        RETRY_MAX_INTERVAL,
        START_TO_CLOSE,
        WORKFLOW_NAME,
        AgentInput,
        AgentResult,
        EffectInput,
        FinishInput,
        LlmInput,
        StepInput,
        ToolInput,
        timer_ms,
    )

RETRY = RetryPolicy(
    initial_interval=RETRY_INITIAL,
    backoff_coefficient=RETRY_BACKOFF,
    maximum_interval=RETRY_MAX_INTERVAL,
    maximum_attempts=RETRY_MAX_ATTEMPTS,
    non_retryable_error_types=[GUARDRAIL_ERROR],
)
OPTIONS = dict(start_to_close_timeout=START_TO_CLOSE, heartbeat_timeout=HEARTBEAT_TIMEOUT, retry_policy=RETRY)


@workflow.defn(name=WORKFLOW_NAME)
class AgentLoop:
    def __init__(self) -> None:
        self._step = 0

    @workflow.query
    def current_step(self) -> int:
        return self._step

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        try:
            await self._loop(inp)
        except ActivityError as err:
            cause = err.cause
            message = str(cause) if cause is not None else str(err)
            await self._finish(inp, "failed", message)
            error_type = cause.type if isinstance(cause, ApplicationError) else "ActivityFailed"
            raise ApplicationError(message, type=error_type, non_retryable=True) from err
        except asyncio.CancelledError:
            await self._finish(inp, "cancelled", "cancelled by the user")
            raise
        await self._finish(inp, "completed", None)
        return AgentResult(run_id=inp.run_id, completed_steps=inp.total_steps)

    async def _loop(self, inp: AgentInput) -> None:
        workflow_id = workflow.info().workflow_id
        previous_note: str | None = None
        for step in range(1, inp.total_steps + 1):
            self._step = step
            step_input = StepInput(inp.run_id, step, inp.total_steps)
            await workflow.execute_activity_method(AgentActivities.mark_step_running, step_input, **OPTIONS)
            out = await workflow.execute_activity_method(
                AgentActivities.llm,
                LlmInput(inp.run_id, step, inp.total_steps, inp.pace, previous_note, inp.model),
                **OPTIONS,
            )
            decision = out.decision
            tool_result = None
            if decision.action == "compute":
                tool_result = await workflow.execute_activity_method(
                    AgentActivities.tool, ToolInput(inp.run_id, step, decision.args["expression"]), **OPTIONS
                )
            await workflow.execute_activity_method(
                AgentActivities.effect,
                EffectInput(inp.run_id, workflow_id, step, inp.total_steps, decision, tool_result),
                **OPTIONS,
            )
            await workflow.execute_activity_method(AgentActivities.mark_step_completed, step_input, **OPTIONS)
            previous_note = decision.args.get("text") or f"{decision.args.get('expression')} = {tool_result}"
            pause = timer_ms(step, inp.pace)
            if pause > 0 and step < inp.total_steps:
                await workflow.sleep(timedelta(milliseconds=pause))

    async def _finish(self, inp: AgentInput, status: str, error: str | None) -> None:
        await workflow.execute_activity_method(
            AgentActivities.finish_run, FinishInput(inp.run_id, status, error), **OPTIONS
        )
