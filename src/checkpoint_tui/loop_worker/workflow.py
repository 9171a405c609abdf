"""The agent loop as a Temporal workflow. Deterministic: no clock, randomness, I/O or env reads;
the pause between steps is derived from the step index."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from checkpoint_tui.loop_worker.activities import AgentActivities
    from checkpoint_tui.loop_worker.shared import (
        ALLOW_STEPS_SIGNAL,
        GUARDRAIL_ERROR,
        MAX_STEPS,
        RETRY_BACKOFF,
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


GATE_IDLE = timedelta(hours=1)  # a step-through run nobody advances ends (its app may have died)


def activity_options(inp: AgentInput) -> dict:
    retry = RetryPolicy(
        initial_interval=timedelta(seconds=inp.retry_initial_s),
        backoff_coefficient=RETRY_BACKOFF,
        maximum_interval=max(RETRY_MAX_INTERVAL, timedelta(seconds=inp.retry_initial_s)),
        maximum_attempts=RETRY_MAX_ATTEMPTS,
        non_retryable_error_types=[GUARDRAIL_ERROR],
    )
    return dict(
        start_to_close_timeout=START_TO_CLOSE,
        heartbeat_timeout=timedelta(seconds=inp.heartbeat_timeout_s),
        retry_policy=retry,
    )


@workflow.defn(name=WORKFLOW_NAME)
class AgentLoop:
    def __init__(self) -> None:
        self._step = 0
        self._allowed = 0  # the highest step an allow_steps signal let run (a step-through run only)

    @workflow.query
    def current_step(self) -> int:
        return self._step

    @workflow.signal(name=ALLOW_STEPS_SIGNAL)
    def allow_steps(self, *args: Any) -> None:
        """Let a step-through run go on up to step `args[0]`; a run started without a gate ignores it.
        Anyone who reaches the task queue can send this with any payloads: a handler that raises fails
        the workflow task on every replay (the signal stays in history), so a fixed signature (the SDK
        calls it with whatever number of payloads arrived) would let one bad signal wedge any run."""
        upto = args[0] if len(args) == 1 else None
        if isinstance(upto, int) and not isinstance(upto, bool):
            self._allowed = max(self._allowed, min(upto, MAX_STEPS))

    def _gate(self, inp: AgentInput) -> int | None:
        """How far a step-through run may go (None: it is not one). Workflow input is untrusted."""
        start = inp.allowed_steps
        if not isinstance(start, int) or isinstance(start, bool):
            return None
        return max(start, self._allowed)

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        self._options = activity_options(inp)
        try:
            await self._loop(inp)
        except ActivityError as err:
            if is_cancelled_exception(err):  # a cancel that met an activity in flight, not a failure
                await self._finish(inp, "cancelled", "cancelled by the user")
                raise
            cause = err.cause
            message = str(cause) if cause is not None else str(err)
            await self._finish(inp, "failed", message)
            error_type = cause.type if isinstance(cause, ApplicationError) else "ActivityFailed"
            raise ApplicationError(message, type=error_type, non_retryable=True) from err
        except asyncio.CancelledError:
            await self._finish(inp, "cancelled", "cancelled by the user")
            raise
        except TimeoutError:  # only a step-through run waits on a timeout (its gate)
            message = f"a step-through run left waiting at its gate for {GATE_IDLE}"
            await self._finish(inp, "cancelled", message)
            raise ApplicationError(message, type="StepThroughIdle", non_retryable=True) from None
        await self._finish(inp, "completed", None)
        return AgentResult(run_id=inp.run_id, completed_steps=inp.total_steps)

    async def _loop(self, inp: AgentInput) -> None:
        workflow_id = workflow.info().workflow_id
        previous_note = inp.previous_note
        for step in range(inp.start_step, inp.total_steps + 1):
            self._step = step
            if self._gate(inp) is not None:  # a step-through run waits here for its next "Next step"
                await workflow.wait_condition(lambda: (self._gate(inp) or 0) >= self._step, timeout=GATE_IDLE)
            step_input = StepInput(inp.run_id, step, inp.total_steps)
            await self._bookkeeping(inp, AgentActivities.mark_step_running, step_input)
            out = await workflow.execute_activity_method(
                AgentActivities.llm,
                LlmInput(inp.run_id, step, inp.total_steps, inp.pace, previous_note, inp.model),
                **self._options,
            )
            decision = out.decision
            tool_result = None
            if decision.action == "compute":
                tool_result = await workflow.execute_activity_method(
                    AgentActivities.tool, ToolInput(inp.run_id, step, decision.args["expression"]), **self._options
                )
            await workflow.execute_activity_method(
                AgentActivities.effect,
                EffectInput(inp.run_id, workflow_id, step, inp.total_steps, decision, tool_result),
                **self._options,
            )
            await self._bookkeeping(inp, AgentActivities.mark_step_completed, step_input)
            previous_note = decision.args.get("text") or f"{decision.args.get('expression')} = {tool_result}"
            pause = timer_ms(step, inp.pace)
            if pause > 0 and step < inp.total_steps:
                await workflow.sleep(timedelta(milliseconds=pause))
            if step < inp.total_steps and step - inp.start_step + 1 >= max(1, inp.steps_per_run):
                carried = replace(inp, start_step=step + 1, previous_note=previous_note, allowed_steps=self._gate(inp))
                workflow.continue_as_new(carried)

    async def _bookkeeping(self, inp: AgentInput, method, step_input: StepInput) -> None:
        if inp.local_bookkeeping:
            await workflow.execute_local_activity_method(
                method, step_input, start_to_close_timeout=START_TO_CLOSE, retry_policy=self._options["retry_policy"]
            )
        else:
            await workflow.execute_activity_method(method, step_input, **self._options)

    async def _finish(self, inp: AgentInput, status: str, error: str | None) -> None:
        await workflow.execute_activity_method(
            AgentActivities.finish_run, FinishInput(inp.run_id, status, error), **self._options
        )
