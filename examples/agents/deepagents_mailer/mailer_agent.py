"""The scripted offline chat model the plugin's `deepagents.invoke_model` activity runs (built by the
worker's `model_provider` from the model name, `scripted-mailer`), and the agent the workflows build.

The model decides from the conversation alone (the plan in the first human message, the `send_email`
results seen), so a model request re-run on a fresh worker answers the same; its call ids are random,
as a real model's, and history keeps the ones the run saw."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from mailroom import Step, next_step

MODEL_NAME = "scripted-mailer"
SYSTEM_PROMPT = "You send the emails the user's plan asks for, one per turn, with the send_email tool."


class ScriptedMailer(BaseChatModel):
    """Sends one email per turn through `send_email`, then says how many it sent."""

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedMailer:
        return self  # the script knows its one tool; the activity binds the agent's tool schemas

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        step = _decide(messages)
        time.sleep(step.think)  # a model takes a while to answer
        return _answer(messages, step)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        step = _decide(messages)
        await asyncio.sleep(step.think)
        return _answer(messages, step)


def provider(model_name: str) -> BaseChatModel:
    """The plugin's `model_provider`: every model name is the scripted model (no key, no network); with
    ANTHROPIC_BASE_URL set, LangChain's ChatAnthropic at that server (../scripted_model.py plays the
    same script at its root), where a model fault can be put in between (`--model-endpoint
    ANTHROPIC_BASE_URL=...`). The anthropic SDK's own retries are left as users have them."""
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if not base:
        return ScriptedMailer()
    from langchain_anthropic import ChatAnthropic

    key = os.environ.get("ANTHROPIC_API_KEY") or "unused-by-the-scripted-model"
    return ChatAnthropic(model=MODEL_NAME, base_url=base, api_key=key, max_tokens=1024)


def _decide(messages: list[BaseMessage]) -> Step:
    plan = next((m.content for m in messages if isinstance(m, HumanMessage)), None)
    return next_step(plan, sum(isinstance(m, ToolMessage) and m.name == "send_email" for m in messages))


def _answer(messages: list[BaseMessage], step: Step) -> ChatResult:
    usage_in = max(1, len(json.dumps([m.content for m in messages], default=str)) // 4)  # a rough count
    if step.text is not None:
        reply = AIMessage(content=step.text)
    else:
        args = {"to": step.to, "body": step.body, "pace": step.pace}
        call = {"name": "send_email", "args": args, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}
        reply = AIMessage(content="", tool_calls=[call])
    usage_out = max(1, len(str(reply.content) + json.dumps(reply.tool_calls)) // 4)
    reply.usage_metadata = {"input_tokens": usage_in, "output_tokens": usage_out, "total_tokens": usage_in + usage_out}
    reply.response_metadata = {"model_name": MODEL_NAME}
    reply.id = f"msg_{uuid.uuid4().hex[:24]}"
    return ChatResult(generations=[ChatGeneration(message=reply)])
