"""The activities: bookkeeping, the model call, the tool and the effects. They run in the worker
process and write the ledger; each records which pid and attempt touched the step."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from temporalio import activity
from temporalio.exceptions import ApplicationError

from checkpoint_tui.ledger import faults
from checkpoint_tui.ledger.effects import (
    KINDS,
    EffectSpec,
    apply_effect_once_async,
    claim_effect,
    physical_for,
    stamp_effect,
)
from checkpoint_tui.ledger.store import finish_run as finish_run_row
from checkpoint_tui.ledger.store import now, touch_step, upsert_step
from checkpoint_tui.loop_worker.activity_ledger import ActivityLedger
from checkpoint_tui.loop_worker.heartbeat import beating
from checkpoint_tui.loop_worker.input_guard import InputGuard, refuse
from checkpoint_tui.loop_worker.payloads import PAYLOAD_BUILDERS
from checkpoint_tui.loop_worker.shared import (
    GUARDRAIL_ERROR,
    EffectInput,
    FinishInput,
    LlmInput,
    LlmOutput,
    StepInput,
    ToolInput,
    think_ms,
)
from checkpoint_tui.loop_worker.tools import run_tool
from checkpoint_tui.model.answer import Answer, GuardrailFailure, ProviderUnavailable
from checkpoint_tui.model.decision import scrub
from checkpoint_tui.model.offline import PROVIDER as OFFLINE
from checkpoint_tui.model.offline import offline_decision
from checkpoint_tui.settings import HOST, ModelOptions, Settings
from checkpoint_tui.waiting import to_the_end

RAW_OUTPUT_LIMIT = 500
FALLBACK_REASON_LIMIT = 300  # of a model-layer reason in a provider label or a guardrail error
ERROR_LIMIT = 2000
PAYLOAD_LIMIT = 16_384  # an effect's text; a step's decision is a few hundred characters
RUN_END_STATES = ("completed", "failed", "cancelled")
FREEZE_S = 60.0  # a `freeze` fault blocks the worker this long unless the watchdog ends it first
GARBLED = "I think the next step is probably to compute something, but let me explain at length first..."


class AgentActivities:
    def __init__(self, settings: Settings) -> None:
        self.db = ActivityLedger(settings.ledger)  # see loop_worker/activity_ledger.py
        self.artifacts_dir = settings.artifacts_dir
        self.models = settings.models
        self.durable = settings.fsync_effects
        self.pid = os.getpid()
        self.guard = InputGuard()

    async def _touch(
        self, run_id: str, step: int, name: str, status: str = "running", *, hooked: bool = False, **fields: object
    ) -> tuple[int, faults.Planned]:
        """Check the input is a run of ours, log this attempt and stamp the step with our pid (plus
        `fields`); returns the attempt number and, for an activity with fault hooks (`hooked`), the
        (kind, effect kind) of the faults planned at this step, read in the same round trip."""
        await self.guard.check(self.db, run_id, step)
        attempt = activity.info().attempt
        touch = faults.touch_step_planned if hooked else touch_step
        planned = await self.db.run(touch, run_id, step, name, attempt, self.pid, status, **fields)
        return attempt, planned or set()

    @activity.defn(name="mark_step_running")
    async def mark_step_running(self, inp: StepInput) -> None:
        await self._touch(
            inp.run_id, inp.step, "mark_step_running", started_pid=self.pid, started_host=HOST, started_at=now()
        )

    @activity.defn(name="llm")
    async def llm(self, inp: LlmInput) -> LlmOutput:
        attempt, planned_here = await self._touch(inp.run_id, inp.step, "llm", hooked=True)
        planned = {kind for kind, _ in planned_here}
        consume = partial(self.db.run, faults.consume, inp.run_id, inp.step)
        async with beating():
            if "transient" in planned and await consume("transient"):
                raise ApplicationError(f"injected transient model failure (attempt {attempt})", type="TransientFault")
            if "freeze" in planned and await consume("freeze"):
                # A hung worker: the event loop blocks (no heartbeat, no liveness beat, no polls) until
                # the supervisor's watchdog kills it; bounded so that nothing waits forever without one.
                time.sleep(FREEZE_S)
            if "garble" in planned and await consume("garble"):
                self._guardrail(inp, GARBLED, "garble fault: the model returned non-JSON (repair bypassed)")
            answer = await self._decide(inp)
        await self.db.run(
            upsert_step,
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
            from checkpoint_tui.model.openai_compat import ask_model  # httpx: only where a server is asked

            try:
                return await ask_model(self._model_options(inp), inp.step, inp.total_steps, inp.previous_note)
            except ProviderUnavailable as err:
                fallback = f" (fallback: {scrub(str(err), FALLBACK_REASON_LIMIT)})"
            except GuardrailFailure as err:
                self._guardrail(inp, err.raw, str(err))
            except Exception as err:  # a model-layer bug must not turn one hostile answer into 8 retries
                activity.logger.exception("model call failed unexpectedly; falling back to offline")
                fallback = f" (fallback: unexpected {type(err).__name__})"
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
        raw = scrub(raw, RAW_OUTPUT_LIMIT)  # model output: NUL or a lone surrogate would break the write
        error = f"Guardrail: step {inp.step} returned no valid decision ({scrub(reason, FALLBACK_REASON_LIMIT)})"
        upsert_step(  # blocking: a guardrail failure is rare, and raises straight after
            self.db.conn,
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
        attempt, planned = await self._touch(inp.run_id, inp.step, "tool", hooked=True)
        crash = any(kind == "crash_in_tool" for kind, _ in planned)
        if crash and await self.db.run(faults.consume_from, inp.run_id, inp.step, "crash_in_tool"):
            os.kill(os.getpid(), signal.SIGKILL)  # the fault plan's death inside a tool call
        async with beating():
            result = await run_tool(inp.expression)  # `error: ...` is the agent's to see, not a step failure
        await self.db.run(upsert_step, inp.run_id, inp.step, "running", attempt=attempt, tool_result=result)
        return result

    @activity.defn(name="effect")
    async def effect(self, inp: EffectInput) -> dict[str, str]:
        await self.guard.check(self.db, inp.run_id, inp.step, inp.workflow_id)  # it names the effect ids
        payloads = {kind: _payload(kind, inp) for kind in KINDS}  # before anything is claimed
        attempt, planned = await self._touch(inp.run_id, inp.step, "effect", hooked=True)  # the hooks below
        consume = partial(self.db.run, faults.consume, inp.run_id, inp.step)
        if ("crash_before_claim", None) in planned and await consume("crash_before_claim"):
            os.kill(os.getpid(), signal.SIGKILL)  # in the effect activity, nothing claimed yet
        async with beating():
            # Once the first claim is sent, a cancellation (a pause, a reset) waits for all three
            # effects: it lands after them, never between a claim and its write.
            outcomes = await to_the_end(self._effects(inp, attempt, payloads, planned))
            if ("crash_after_stamp", None) in planned and await consume("crash_after_stamp"):
                os.kill(os.getpid(), signal.SIGKILL)  # every effect stamped, the activity not completed
        return outcomes

    async def _effects(self, inp: EffectInput, attempt: int, payloads: dict[str, str], planned: set) -> dict[str, str]:
        outcomes: dict[str, str] = {}
        for kind in KINDS:
            spec = EffectSpec(
                run_id=inp.run_id,
                step=inp.step,
                kind=kind,
                payload=payloads[kind],
                attempt=attempt,
                worker_pid=self.pid,
                workflow_id=inp.workflow_id,
            )
            outcomes[kind] = await apply_effect_once_async(
                partial(self.db.run, claim_effect),
                partial(self.db.run, stamp_effect),
                spec,
                physical_for(kind, None, self.artifacts_dir, durable=self.durable, call=self.db.run),
                after_claim=self._hook(inp, kind, planned, "crash_after_claim", "stop_after_claim"),
                after_write=self._hook(inp, kind, planned, "crash_after_write"),
            )
        return outcomes

    def _hook(self, inp: EffectInput, kind: str, planned: set, *names: str) -> Callable[[], None] | None:
        """The fault hook for one window of one effect, if the plan names it there."""
        wanted = [n for n in names if (n, kind) in planned]
        return (lambda: self._maybe_crash(inp, kind, wanted)) if wanted else None

    def _maybe_crash(self, inp: EffectInput, kind: str, names: list[str]) -> None:
        conn = self.db.conn  # blocking: the hook runs between two steps of the protocol, and dies
        for name in names:
            if not faults.consume(conn, inp.run_id, inp.step, name, kind):
                continue
            if name == "stop_after_claim":
                # A zombie writer: stopped between claim and write until someone sends SIGCONT; by then
                # Temporal may have given the activity to another worker, which recovers the effect.
                os.kill(os.getpid(), signal.SIGSTOP)
            else:  # after the claim: the write never happens; after the write: the stamp never does
                os.kill(os.getpid(), signal.SIGKILL)

    @activity.defn(name="mark_step_completed")
    async def mark_step_completed(self, inp: StepInput) -> None:
        await self._touch(inp.run_id, inp.step, "mark_step_completed", "completed", ended_at=now())

    @activity.defn(name="finish_run")
    async def finish_run(self, inp: FinishInput) -> None:
        await self.guard.check(self.db, inp.run_id)
        if inp.status not in RUN_END_STATES:
            raise refuse(f"run status {str(inp.status)[:40]!r}")
        await self.db.run(finish_run_row, inp.run_id, inp.status, (inp.error or "")[:ERROR_LIMIT] or None)

    def all(self) -> list:
        return [
            self.mark_step_running,
            self.llm,
            self.tool,
            self.effect,
            self.mark_step_completed,
            self.finish_run,
        ]


def _payload(kind: str, inp: EffectInput) -> str:
    """The effect's bytes, refused if they could not be written faithfully (a decision in workflow input
    is not necessarily one our llm activity validated)."""
    try:
        payload = PAYLOAD_BUILDERS[kind](inp)
        payload.encode("utf-8")
    except (KeyError, TypeError, AttributeError, UnicodeEncodeError) as err:
        raise refuse(f"the {kind} payload cannot be built: {type(err).__name__}") from None
    if len(payload) > PAYLOAD_LIMIT or "\x00" in payload:
        raise refuse(f"the {kind} payload is over {PAYLOAD_LIMIT} characters or holds a NUL")
    return payload
