"""The scripted offline model behind `TemporalModel("scripted-mailer")`: an ADK `BaseLlm` registered
with ADK's `LLMRegistry` in the worker, where the plugin's `invoke_model` activity builds it by name
(`LLMRegistry.new_llm`). It sends one email per turn through the agent's one tool, then answers, and
decides from the request alone (the plan in the first user message, the function responses seen so
far), so a request re-run on a fresh worker answers the same. Its function call ids are fresh (random,
as a real model's) and history keeps the ones the workflow saw."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models import BaseLlm, LLMRegistry
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from mailroom import next_step

MODEL_NAME = "scripted-mailer"
INSTRUCTIONS = "Send one email per turn with the tool, then say how many you sent."


def _parts(contents: Any, role: str) -> list[types.Part]:
    return [p for c in contents or [] if c.role == role for p in c.parts or []]


def _tool_name(llm_request: LlmRequest) -> str:
    """The agent's one tool, as the request declares it to the model (`tools_dict` stays in the workflow)."""
    for tool in llm_request.config.tools or [] if llm_request.config else []:
        for declaration in getattr(tool, "function_declarations", None) or []:
            if declaration.name:
                return declaration.name
    return "send_email"


class ScriptedMailer(BaseLlm):
    model: str = MODEL_NAME

    @classmethod
    def supported_models(cls) -> list[str]:
        return [MODEL_NAME]  # regular expressions, matched against TemporalModel's model name

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        user = _parts(llm_request.contents, "user")
        plan = next((p.text for p in user if p.text), None)
        step = next_step(plan, sum(p.function_response is not None for p in user))
        await asyncio.sleep(step.think)  # a model takes a while to answer
        usage_in = max(1, len(llm_request.model_dump_json(exclude_none=True)) // 4)  # a rough count
        if step.text is not None:
            part = types.Part(text=step.text)
            usage_out = max(1, len(step.text) // 4)
        else:
            name = _tool_name(llm_request)
            args = {"to": step.to, "body": step.body, "pace": step.pace}
            # A fresh id per call, as a real model's (without ADK's own `adk-` prefix, which ADK strips
            # from the requests it sends a model).
            part = types.Part(
                function_call=types.FunctionCall(id=f"call_{uuid.uuid4().hex[:24]}", name=name, args=args)
            )
            usage_out = max(1, len(str(args)) // 4)
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=usage_in, candidates_token_count=usage_out, total_token_count=usage_in + usage_out
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[part]), usage_metadata=usage, model_version=MODEL_NAME
        )


def register() -> None:
    """Make `scripted-mailer` a model name ADK can build (in the worker process, before it serves): the
    script in this process; with ANTHROPIC_BASE_URL set, ADK's own Claude client (AnthropicLlm, the
    anthropic SDK) at that server (../scripted_model.py plays the same script at its root), where a
    model fault can be put in between (`--model-endpoint ANTHROPIC_BASE_URL=...`)."""
    if not os.environ.get("ANTHROPIC_BASE_URL"):
        LLMRegistry.register(ScriptedMailer)
        return
    from google.adk.models.anthropic_llm import AnthropicLlm

    # The SDK reads its key from the environment and refuses to start without one; the scripted model
    # takes any (a real endpoint's key is set by whoever runs the worker, never here).
    os.environ.setdefault("ANTHROPIC_API_KEY", "unused-by-the-scripted-model")

    class ScriptedOverHttp(AnthropicLlm):
        model: str = MODEL_NAME
        max_tokens: int = 1024

        @classmethod
        def supported_models(cls) -> list[str]:
            return [MODEL_NAME]

    LLMRegistry.register(ScriptedOverHttp)
