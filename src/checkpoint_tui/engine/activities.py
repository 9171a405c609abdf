"""The activities: bookkeeping, the model call, the tool and the effects. They run in the worker
process and write the ledger; each records which pid and attempt touched the step."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace

from temporalio import activity
from temporalio.exceptions import ApplicationError

from checkpoint_tui.engine.heartbeat import beating
from checkpoint_tui.engine.payloads import PAYLOAD_BUILDERS
from checkpoint_tui.engine.shared import (
    GUARDRAIL_ERROR,
    EffectInput,
    FinishInput,
    LlmInput,
    LlmOutput,
    StepInput,
    ToolInput,
    think_ms,
)
from checkpoint_tui.engine.tools import evaluate_arithmetic
from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.effects import KINDS, EffectSpec, apply_effect_once, physical_for
from checkpoint_tui.ledger.store import connect, now, touch_step, upsert_step
from checkpoint_tui.ledger.store import finish_run as finish_run_row
from checkpoint_tui.model.offline import PROVIDER as OFFLINE
from checkpoint_tui.model.offline import offline_decision
from checkpoint_tui.model.openai_compat import Answer, GuardrailFailure, ProviderUnavailable, ask_model
from checkpoint_tui.settings import HOST, ModelOptions, Settings

RAW_OUTPUT_LIMIT = 500
GARBLED = "I think the next step is probably to compute something, but let me explain at length first..."


class AgentActivities:
    def __init__(self, settings: Settings) -> None:
        self.ledger = settings.ledger  # a SQLite path or a postgresql:// URL
        self.artifacts_dir = settings.artifacts_dir
        self.models = settings.models
        self.pid = os.getpid()

    def _touch(self, run_id: str, step: int, name: str, status: str = "running", **fields: object) -> int:
        """Log this attempt and stamp the step with our pid (plus `fields`); returns the attempt number."""
        attempt = activity.info().attempt
        touch_step(connect(self.ledger), run_id, step, name, attempt, self.pid, status, **fields)
        return attempt

    @activity.defn(name="mark_step_running")
    async def mark_step_running(self, inp: StepInput) -> None:
        self._touch(
            inp.run_id, inp.step, "mark_step_running", started_pid=self.pid, started_host=HOST, started_at=now()
        )

    @activity.defn(name="llm")
    async def llm(self, inp: LlmInput) -> LlmOutput:
        attempt = self._touch(inp.run_id, inp.step, "llm")
        conn = connect(self.ledger)
        async with beating():
            if faults.consume(conn, inp.run_id, inp.step, "transient"):
                raise ApplicationError(f"injected transient model failure (attempt {attempt})", type="TransientFault")
            if faults.consume(conn, inp.run_id, inp.step, "garble"):
                self._guardrail(inp, GARBLED, "garble fault: the model returned non-JSON (repair bypassed)")
            answer = await self._decide(inp)
        upsert_step(
            conn,
            inp.run_id,
            inp.step,
            "running",
            attempt=attempt,
            provider=answer.provider,
            tokens=answer.tokens,
            cost_usd=answer.cost_usd,
            action=answer.decision.action,
            thought=answer.decision.thought,
            answer_note=answer.note,
        )
        return LlmOutput(
            decision=answer.decision, provider=answer.provider, tokens=answer.tokens, cost_usd=answer.cost_usd
        )

    async def _decide(self, inp: LlmInput) -> Answer:
        """The configured model if it answers; otherwise the offline provider, saying why."""
        fallback = ""
        if inp.model.url:
            try:
                return await ask_model(self._model_options(inp), inp.step, inp.total_steps, inp.previous_note)
            except ProviderUnavailable as err:
                fallback = f" (fallback: {err})"
            except GuardrailFailure as err:
                self._guardrail(inp, err.raw, str(err))
        decision, tokens, _raw = offline_decision(inp.run_id, inp.step, inp.total_steps, inp.previous_note)
        await asyncio.sleep(think_ms(inp.step, inp.pace) / 1000)
        return Answer(decision, OFFLINE + fallback, tokens, 0.0, "offline")

    def _model_options(self, inp: LlmInput) -> ModelOptions:
        """The URL comes from workflow input, which anyone who can reach the queue writes: the worker's
        key goes only to the URL the worker itself was configured with."""
        own = self.models
        key = own.api_key if inp.model.url == own.url else None
        return replace(own, url=inp.model.url, model=inp.model.model, api_key=key)

    def _guardrail(self, inp: LlmInput, raw: str, reason: str) -> None:
        error = f"Guardrail: step {inp.step} returned no valid decision ({reason})"
        upsert_step(
            connect(self.ledger),
            inp.run_id,
            inp.step,
            "failed",
            attempt=activity.info().attempt,
            error=error,
            raw_output=raw[:RAW_OUTPUT_LIMIT],
            ended_at=now(),
        )
        raise ApplicationError(error, raw[:RAW_OUTPUT_LIMIT], type=GUARDRAIL_ERROR, non_retryable=True)

    @activity.defn(name="tool")
    async def tool(self, inp: ToolInput) -> str:
        attempt = self._touch(inp.run_id, inp.step, "tool")
        try:
            result = evaluate_arithmetic(inp.expression)
        except ValueError as err:
            result = f"error: {err}"  # the agent sees the tool's error; it is not a step failure
        upsert_step(connect(self.ledger), inp.run_id, inp.step, "running", attempt=attempt, tool_result=result)
        return result

    @activity.defn(name="effect")
    async def effect(self, inp: EffectInput) -> dict[str, str]:
        attempt = self._touch(inp.run_id, inp.step, "effect")
        conn = connect(self.ledger)
        outcomes: dict[str, str] = {}
        async with beating():
            for kind in KINDS:
                spec = EffectSpec(
                    run_id=inp.run_id,
                    step=inp.step,
                    kind=kind,
                    payload=PAYLOAD_BUILDERS[kind](inp),
                    attempt=attempt,
                    worker_pid=self.pid,
                    workflow_id=inp.workflow_id,
                )
                outcomes[kind] = apply_effect_once(
                    conn,
                    spec,
                    physical_for(kind, conn, self.artifacts_dir),
                    after_claim=lambda k=kind: self._maybe_crash(inp, k),
                )
        return outcomes

    def _maybe_crash(self, inp: EffectInput, kind: str) -> None:
        if faults.consume(connect(self.ledger), inp.run_id, inp.step, "crash_after_claim", kind):
            os.kill(os.getpid(), signal.SIGKILL)  # the claim is committed, the write never happens

    @activity.defn(name="mark_step_completed")
    async def mark_step_completed(self, inp: StepInput) -> None:
        self._touch(inp.run_id, inp.step, "mark_step_completed", "completed", ended_at=now())

    @activity.defn(name="finish_run")
    async def finish_run(self, inp: FinishInput) -> None:
        finish_run_row(connect(self.ledger), inp.run_id, inp.status, inp.error)

    def all(self) -> list:
        return [
            self.mark_step_running,
            self.llm,
            self.tool,
            self.effect,
            self.mark_step_completed,
            self.finish_run,
        ]
