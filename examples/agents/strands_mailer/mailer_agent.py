"""The scripted offline model behind `StrandsPlugin(models={"scripted-mailer": model})`: a
`strands.models.Model` that sends one email per turn through the agent's one tool, then answers. It
runs in the plugin's `invoke_model` activity and decides from the conversation alone (the plan in the
first user message, the tool results seen so far), so a request re-run on a fresh worker answers the
same; its tool-use ids are fresh (random, as a real model's), and history keeps the ones the workflow
saw."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from strands.models import Model

from mailroom import next_step

MODEL_NAME = "scripted-mailer"
INSTRUCTIONS = "Send one email per turn with the tool, then say how many you sent."


def _blocks(messages: object, role: str) -> list[dict]:
    """The content blocks of the messages of one role, in order. The activity hands the messages over
    as decoded JSON: lists of dicts."""
    found: list[dict] = []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("role") == role and isinstance(message.get("content"), list):
            found += [b for b in message["content"] if isinstance(b, dict)]
    return found


class ScriptedMailer(Model):
    def update_config(self, **model_config: Any) -> None:
        return None

    def get_config(self) -> dict[str, Any]:
        return {"model_id": MODEL_NAME}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted mailer gives no structured output")

    async def stream(
        self, messages: Any, tool_specs: list[Any] | None = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        started = time.monotonic()
        user = _blocks(messages, "user")
        plan = next((b["text"] for b in user if isinstance(b.get("text"), str)), None)
        step = next_step(plan, sum("toolResult" in b for b in user))
        await asyncio.sleep(step.think)  # a model takes a while to answer
        usage_in = max(1, len(json.dumps(messages, default=str)) // 4)  # a rough count, as the other examples'
        yield {"messageStart": {"role": "assistant"}}
        if step.text is not None:
            yield {"contentBlockDelta": {"delta": {"text": step.text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            usage_out = max(1, len(step.text) // 4)
        else:
            arguments = json.dumps({"to": step.to, "body": step.body, "pace": step.pace})
            name = (tool_specs or [{}])[0].get("name", "send_email")
            # Bedrock's shape of id (Strands' default provider): a new one per call, as a real model's
            tool_use = {"toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": name}
            yield {"contentBlockStart": {"start": {"toolUse": tool_use}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            usage_out = max(1, len(arguments) // 4)
        usage = {"inputTokens": usage_in, "outputTokens": usage_out, "totalTokens": usage_in + usage_out}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": int((time.monotonic() - started) * 1000)}}}


def model() -> Model:
    """The plugin's factory for MODEL_NAME: the scripted model in this process; with OPENAI_BASE_URL set,
    any OpenAI-compatible server over HTTP through Strands' own OpenAIModel (streamed, as it asks;
    ../scripted_model.py plays the same script), where a model fault can be put in between
    (`--model-endpoint OPENAI_BASE_URL=...`). The OpenAI client's own retries are left as users have them."""
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        return ScriptedMailer()
    from strands.models.openai import OpenAIModel

    key = os.environ.get("OPENAI_API_KEY") or "unused-by-the-scripted-model"
    return OpenAIModel(client_args={"base_url": base, "api_key": key}, model_id=MODEL_NAME)
