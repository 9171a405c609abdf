"""The two agents: a scripted offline model (`FunctionModel`) and one tool, `send_email`, made durable
by pydantic-ai's `TemporalDurability` capability. `mailer` appends the line directly; `mailer_guarded`
appends it inside `checkpoint_tui.effects.exactly_once`, keyed by the tool call. Built at import,
outside the workflow sandbox (the workflows import this module through `imports_passed_through`)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from checkpoint_tui.effects import exactly_once
from checkpoint_tui.frameworks.pydantic_ai import tool_call_key

from mailroom import check_email, email_line, next_step, out_dir, output_path, send_paced

OUT_DIR = out_dir(dict(os.environ))  # read once, by the worker process that imports this module
INSTRUCTIONS = "Send one email per turn with send_email, then say how many you sent."


@dataclass
class MailerDeps:
    """The run's dependencies: pydantic-ai serializes them into every tool activity's input."""

    pace: float


async def scripted_mailer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The offline model: its plan is the first user prompt, its progress the tool returns in the
    conversation. The tool call ids are pydantic-ai's own (random, made in the model request's
    activity and then kept by history), as a real model's are."""
    requests = [m for m in messages if isinstance(m, ModelRequest)]
    plan = next((p.content for m in requests for p in m.parts if p.part_kind == "user-prompt"), None)
    sent = sum(isinstance(p, ToolReturnPart) for m in requests for p in m.parts)
    step = next_step(plan, sent)
    await asyncio.sleep(step.think)  # a model takes a while to answer
    if step.text is not None:
        return ModelResponse(parts=[TextPart(step.text)])
    return ModelResponse(parts=[ToolCallPart("send_email", {"to": step.to, "body": step.body})])


def _line(to: str, body: str) -> str:
    """The email as one line, from the tool's arguments, refused (non-retryable) if they cannot be one."""
    workflow_id = activity.info().workflow_id if activity.in_activity() else "local"
    try:
        return email_line(workflow_id, *check_email(workflow_id, to, body))
    except ValueError as err:
        raise ApplicationError(str(err), type="BadToolArgs", non_retryable=True) from None


def _mail_file() -> os.PathLike[str]:
    return output_path(OUT_DIR, activity.info().workflow_id if activity.in_activity() else "local")


def _model() -> Model:
    """The scripted model in this process; with OPENAI_BASE_URL set, any OpenAI-compatible server over
    HTTP (../scripted_model.py plays the same script), where a model fault can be put in between
    (`--model-endpoint OPENAI_BASE_URL=...`). The OpenAI client's own retries (2, honouring
    Retry-After) are left as users have them."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        return FunctionModel(scripted_mailer, model_name="scripted-mailer")
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    key = os.environ.get("OPENAI_API_KEY") or "unused-by-the-scripted-model"
    return OpenAIChatModel("scripted-mailer", provider=OpenAIProvider(base_url=base, api_key=key))


def _agent(name: str) -> Agent[MailerDeps, str]:
    return Agent(
        _model(),
        name=name,
        deps_type=MailerDeps,
        instructions=INSTRUCTIONS,
        capabilities=[TemporalDurability()],  # the shipped activity defaults, as users run them
    )


MAILER = _agent("mailer")
MAILER_GUARDED = _agent("mailer_guarded")


@MAILER.tool
async def send_email(ctx: RunContext[MailerDeps], to: str, body: str) -> str:
    """Send one email (append one line to the workflow's mail file)."""
    await send_paced(_mail_file(), _line(to, body), ctx.deps.pace, only_if_absent=False)
    return f"sent to {to}"


@MAILER_GUARDED.tool(name="send_email")
async def send_email_guarded(ctx: RunContext[MailerDeps], to: str, body: str) -> str:
    """Send one email, once per tool call: the effects library decides whether to write; the write
    appends only a line not already in the file (a `recovered` call redoes a write that may be done)."""
    line, path = _line(to, body), _mail_file()

    async def write(payload: str) -> None:
        await send_paced(path, payload, ctx.deps.pace, only_if_absent=True)

    outcome = await exactly_once(kind="email", payload=line, write=write, key=tool_call_key(ctx))
    return f"sent to {to} ({outcome})"
