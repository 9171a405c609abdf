"""The scripted offline model behind `OpenAIAgentsPlugin(model_provider=...)`: an `agents.Model` that
sends one email per turn through the agent's one tool, then answers. It runs in the plugin's
`invoke_model_activity` and decides from its input alone (the plan in the first user message, the
tool outputs seen so far), so a request re-run on a fresh worker answers the same; its call ids are
fresh (random, as a real model's), and history keeps the ones the workflow saw."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Model, ModelProvider, ModelResponse, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from mailroom import next_step

MODEL_NAME = "scripted-mailer"
INSTRUCTIONS = "Send one email per turn with the tool, then say how many you sent."


def _field(item: object, name: str) -> object:
    """Input items arrive as dicts (decoded from the activity's input) or as SDK objects."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class ScriptedMailer(Model):
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        plan = next((_field(i, "content") for i in items if _field(i, "role") == "user"), None)
        sent = sum(_field(i, "type") == "function_call_output" for i in items)
        step = next_step(plan, sent)
        await asyncio.sleep(step.think)  # a model takes a while to answer
        usage_in = max(1, len(json.dumps(items, default=str)) // 4)  # a rough count, as pydantic-ai's estimate
        if step.text is not None:
            output: Any = ResponseOutputMessage(
                id=f"msg_{uuid.uuid4().hex[:24]}",
                role="assistant",
                status="completed",
                type="message",
                content=[ResponseOutputText(text=step.text, annotations=[], type="output_text")],
            )
            usage_out = max(1, len(step.text) // 4)
        else:
            arguments = json.dumps({"to": step.to, "body": step.body, "pace": step.pace})
            output = ResponseFunctionToolCall(
                arguments=arguments,
                call_id=f"call_{uuid.uuid4().hex[:24]}",
                name=tools[0].name,
                type="function_call",
                id=f"fc_{uuid.uuid4().hex[:24]}",
                status="completed",
            )
            usage_out = max(1, len(arguments) // 4)
        usage = Usage(requests=1, input_tokens=usage_in, output_tokens=usage_out, total_tokens=usage_in + usage_out)
        return ModelResponse(output=[output], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted mailer does not stream")


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedMailer()
