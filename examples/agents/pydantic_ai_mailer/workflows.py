"""The two workflows: `PydanticMailer` (tool appends directly) and `PydanticMailerGuarded` (tool goes
through the effects library). Deterministic: the agent's I/O runs in pydantic-ai's activities."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow

    from agent import MAILER, MAILER_GUARDED, MailerDeps
    from mailroom import MailInput, decode, parse_input, prompt


def _input(raw: RawValue | None) -> MailInput:
    """The input arrives undecoded (RawValue) and is checked here: a bad one fails the workflow with a
    non-retryable `BadInput` (decoded by the SDK, it would fail the workflow *task*, retried forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def _run(agent: Agent[MailerDeps, str], raw: RawValue | None) -> str:
    inp = _input(raw)
    result = await agent.run(prompt(inp), deps=MailerDeps(pace=inp.pace))
    return result.output


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="PydanticMailer")
class PydanticMailer(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [MAILER]

    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run(MAILER, inp)


@workflow.defn(name="PydanticMailerGuarded")
class PydanticMailerGuarded(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [MAILER_GUARDED]

    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run(MAILER_GUARDED, inp)
