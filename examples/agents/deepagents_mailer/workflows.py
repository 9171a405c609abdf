"""The two workflows, `DeepAgentsMailer` (the tool appends directly) and `DeepAgentsMailerGuarded`
(through the effects library). Each builds its Deep Agent inside the workflow with
`create_deep_agent(model="scripted-mailer", tools=[SEND_EMAIL])`: the plugin turns the model name
into a `TemporalModel` (each request a `deepagents.invoke_model` activity), the agent's loop and its
built-in tools run in the workflow, `send_email` in a `deepagents.invoke_tool` activity."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from deepagents import create_deep_agent
    from langchain_core.messages import HumanMessage

    from mailer_agent import MODEL_NAME, SYSTEM_PROMPT
    from mailroom import MailInput, decode, parse_input, prompt
    from tools import SEND_EMAIL


def _input(raw: RawValue | None) -> MailInput:
    """The input arrives undecoded (RawValue) and is checked here: a bad one fails the workflow with a
    non-retryable `BadInput` (decoded by the SDK, it would fail the workflow *task*, retried forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def _run(raw: RawValue | None) -> str:
    inp = _input(raw)
    agent = create_deep_agent(model=MODEL_NAME, tools=[SEND_EMAIL], system_prompt=SYSTEM_PROMPT)
    question = HumanMessage(content=prompt(inp), id=str(workflow.uuid4()))  # a replay gives it the same id
    state = await agent.ainvoke({"messages": [question]})
    last = state["messages"][-1]
    return str(getattr(last, "content", last))


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="DeepAgentsMailer")
class DeepAgentsMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run(inp)


@workflow.defn(name="DeepAgentsMailerGuarded")
class DeepAgentsMailerGuarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run(inp)
