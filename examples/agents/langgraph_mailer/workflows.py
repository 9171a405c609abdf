"""The two workflows: `LangGraphMailer` (graph `mailer`: the tool appends directly) and
`LangGraphMailerGuarded` (graph `mailer_guarded`: through the effects library). Deterministic: the
graph's loop and its async router run in the workflow, its nodes in activities."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from langchain_core.messages import HumanMessage
    from temporalio.langgraph import graph

    from mailroom import MailInput, decode, parse_input, prompt


def _input(raw: RawValue | None) -> MailInput:
    """The input arrives undecoded (RawValue) and is checked here: a bad one fails the workflow with a
    non-retryable `BadInput` (decoded by the SDK, it would fail the workflow *task*, retried forever)."""
    try:
        value = None if raw is None else decode(lambda: workflow.payload_converter().from_payload(raw.payload))
        return parse_input(value)
    except (ValueError, TypeError) as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None


async def _run(name: str, raw: RawValue | None) -> str:
    inp = _input(raw)
    question = HumanMessage(content=prompt(inp), id=str(workflow.uuid4()))  # a replay gives it the same id
    # LangGraph stops after 25 supersteps by default; this run makes 2 * turns + 1 (agent, tools, ...).
    state = await graph(name).compile().ainvoke({"messages": [question]}, {"recursion_limit": 2 * inp.turns + 4})
    last = state["messages"][-1]
    return str(getattr(last, "content", last))


# The parameter's type must be exactly RawValue (no Optional) for the SDK to hand it over undecoded.


@workflow.defn(name="LangGraphMailer")
class LangGraphMailer:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run("mailer", inp)


@workflow.defn(name="LangGraphMailerGuarded")
class LangGraphMailerGuarded:
    @workflow.run
    async def run(self, inp: RawValue = None) -> str:  # type: ignore[assignment]
        return await _run("mailer_guarded", inp)
