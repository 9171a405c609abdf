"""The two workflows: `StrandsMailer` (the tool, `activity_as_tool(send_email)`, appends directly) and
`StrandsMailerGuarded` (`guarded_activity_as_tool(send_email_guarded)`, through the effects library).
Deterministic: the model runs in the plugin's `invoke_model` activity, the tool in its activity."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.strands_agents import TemporalAgent
    from temporalio.strands_agents.workflow import activity_as_tool

    from checkpoint_tui.frameworks.strands import guarded_activity_as_tool

    from mailer_agent import INSTRUCTIONS, MODEL_NAME
    from mailroom import MailInput, decode, parse_input, prompt
    from tools import send_email, send_email_guarded

# Strands sets no activity timeout and Temporal needs one: the model gets the 60 s start-to-close the
# other two integrations default to, the tool the 10 s the SDK samples give a tool activity. No
# heartbeat timeout (the model activity would heartbeat at half of one: TemporalAgent(heartbeat_timeout=))
# and the default retry policy, as the integration ships them.
MODEL_TIMEOUT = timedelta(seconds=60)
TOOL_TIMEOUT = timedelta(seconds=10)


def _input(raw: RawValue | None) -> MailInput:
    """The input arrives undecoded (RawValue) and is checked here: a bad one fails the workflow with a
    non-retryable `BadInput` (decoded by the SDK, it would fail the workflow *task*, retried forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def _run(name: str, tool: object, raw: RawValue | None) -> str:
    inp = _input(raw)
    # callback_handler=None: Strands' default handler prints the model's text to the worker's stdout.
    agent = TemporalAgent(
        model=MODEL_NAME,
        name=name,
        system_prompt=INSTRUCTIONS,
        tools=[tool],
        callback_handler=None,
        start_to_close_timeout=MODEL_TIMEOUT,
    )
    result = await agent.invoke_async(prompt(inp))
    return str(result).strip()


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="StrandsMailer")
class StrandsMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run("mailer", activity_as_tool(send_email, start_to_close_timeout=TOOL_TIMEOUT), inp)


@workflow.defn(name="StrandsMailerGuarded")
class StrandsMailerGuarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        tool = guarded_activity_as_tool(send_email_guarded, start_to_close_timeout=TOOL_TIMEOUT)
        return await _run("mailer_guarded", tool, inp)
