"""The two workflows: `OpenAIMailer` (the tool, `activity_as_tool(send_email)`, appends directly) and
`OpenAIMailerGuarded` (`guarded_activity_as_tool(send_email_guarded)`, through the effects library).
Deterministic: the model runs in the plugin's `invoke_model_activity`, the tool in its activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner, Tool
    from temporalio.openai_agents.workflow import activity_as_tool

    from checkpoint_tui.frameworks.openai_agents import guarded_activity_as_tool

    from mailer_agent import INSTRUCTIONS, MODEL_NAME
    from mailroom import MailInput, decode, parse_input, prompt
    from tools import send_email, send_email_guarded

# Temporal needs a timeout on every activity: the one the SDK's samples give activity_as_tool. No
# heartbeat timeout and the default retry policy, as the framework ships them.
TOOL_TIMEOUT = timedelta(seconds=10)


def _input(raw: RawValue | None) -> MailInput:
    """The input arrives undecoded (RawValue) and is checked here: a bad one fails the workflow with a
    non-retryable `BadInput` (decoded by the SDK, it would fail the workflow *task*, retried forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def _run(name: str, tool: Tool, raw: RawValue | None) -> str:
    inp = _input(raw)
    agent = Agent(name=name, instructions=INSTRUCTIONS, model=MODEL_NAME, tools=[tool])
    # The SDK stops after 10 model calls by default (max_turns); this run makes turns + 1.
    result = await Runner.run(agent, input=prompt(inp), max_turns=inp.turns + 1)
    return str(result.final_output)


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="OpenAIMailer")
class OpenAIMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run("mailer", activity_as_tool(send_email, start_to_close_timeout=TOOL_TIMEOUT), inp)


@workflow.defn(name="OpenAIMailerGuarded")
class OpenAIMailerGuarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        tool = guarded_activity_as_tool(send_email_guarded, start_to_close_timeout=TOOL_TIMEOUT)
        return await _run("mailer_guarded", tool, inp)
