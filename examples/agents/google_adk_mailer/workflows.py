"""The two workflows: `GoogleAdkMailer` (the tool, `activity_as_tool(send_email)`, appends directly)
and `GoogleAdkMailerGuarded` (`activity_as_tool(send_email_guarded)`, through the effects library,
keyed by the function call id its `tool_context` brings). Deterministic: the model runs in the
plugin's `invoke_model` activity, the tool in its activity; ADK's ids and clocks come from the
workflow (the plugin installs them)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from temporalio.google_adk import TemporalModel
    from temporalio.google_adk.workflow import activity_as_tool

    from mailer_agent import INSTRUCTIONS, MODEL_NAME
    from mailroom import MAX_TURNS, MailInput, decode, parse_input, prompt
    from tools import send_email, send_email_guarded

# The model keeps the integration's default (60 s start-to-close, no heartbeat, the default retry
# policy); the tool gets the 10 s the SDK samples give a tool activity (activity_as_tool sets none,
# and Temporal needs one).
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
    agent = LlmAgent(name=name, model=TemporalModel(MODEL_NAME), instruction=INSTRUCTIONS, tools=[tool])
    runner = InMemoryRunner(agent=agent, app_name=name)
    session = await runner.session_service.create_session(app_name=name, user_id="mailroom")
    message = types.Content(role="user", parts=[types.Part(text=prompt(inp))])
    answer = ""
    async for event in runner.run_async(
        user_id="mailroom",
        session_id=session.id,
        new_message=message,
        run_config=RunConfig(max_llm_calls=MAX_TURNS + 1),
    ):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(p.text or "" for p in event.content.parts)
    return answer.strip()


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="GoogleAdkMailer")
class GoogleAdkMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run("mailer", activity_as_tool(send_email, start_to_close_timeout=TOOL_TIMEOUT), inp)


@workflow.defn(name="GoogleAdkMailerGuarded")
class GoogleAdkMailerGuarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        tool = activity_as_tool(send_email_guarded, start_to_close_timeout=TOOL_TIMEOUT)
        return await _run("mailer_guarded", tool, inp)
