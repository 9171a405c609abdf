"""The model proxy (#53) in front of Anthropic's Messages API, as the anthropic SDK (the client
langchain-anthropic and Google ADK's Claude use) speaks it to the scripted model (examples/agents/
scripted_model.py): usage read whole and streamed, a tool_use block's input garbled both ways, and an
error the SDK reads as Anthropic's."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import anthropic
import pytest

from checkpoint_tui.proof.nemeses.model_faults import ERROR, GARBAGE, NOT_JSON, RATE_LIMIT, Fault, usage_of_event
from checkpoint_tui.proof.nemeses.model_proxy import ModelProxy

sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "examples" / "agents"))
from scripted_model import ScriptedModel  # noqa: E402

TOOLS = [{"name": "send_email", "input_schema": {"type": "object", "properties": {"to": {}, "body": {}}}}]
PLAN = json.dumps({"turns": 2, "to": "a@b.example", "think": 0})


@pytest.fixture
async def lab():
    """(the proxy in front of the scripted model's root, an Anthropic client at the proxy, retries off)."""
    model = ScriptedModel().start()
    proxy = ModelProxy("ANTHROPIC_BASE_URL", model.root)
    url = await proxy.start()
    client = anthropic.AsyncAnthropic(base_url=url, api_key="sk-ant-test", max_retries=0, timeout=10.0)
    yield proxy, client
    await client.close()
    await proxy.close()
    model.close()


def ask(client: anthropic.AsyncAnthropic, **more: object):
    return client.messages.create(
        model="scripted-mailer", max_tokens=200, messages=[{"role": "user", "content": PLAN}], tools=TOOLS, **more
    )


async def test_a_message_passes_whole_and_streamed_with_its_usage_read(lab):
    proxy, client = lab
    whole = await ask(client)
    assert whole.content[0].type == "tool_use" and whole.content[0].input["to"] == "a@b.example"
    async with client.messages.stream(
        model="scripted-mailer", max_tokens=200, messages=[{"role": "user", "content": PLAN}], tools=TOOLS
    ) as stream:
        streamed = await stream.get_final_message()
    assert streamed.content[0].input == whole.content[0].input
    first, second = proxy.exchanges
    assert (first.prompt_tokens, first.completion_tokens) == (whole.usage.input_tokens, whole.usage.output_tokens)
    assert (second.prompt_tokens, second.completion_tokens) == (
        streamed.usage.input_tokens,
        streamed.usage.output_tokens,
    )


async def test_garbage_makes_a_tool_use_input_not_json_whole_and_streamed(lab):
    proxy, client = lab
    spell = asyncio.ensure_future(proxy.fault(Fault(GARBAGE), requests=2))
    resp = await client.messages.with_raw_response.create(
        model="scripted-mailer", max_tokens=200, messages=[{"role": "user", "content": PLAN}], tools=TOOLS
    )
    block = json.loads(resp.http_response.content)["content"][0]
    assert isinstance(block["input"], str) and block["input"].startswith(NOT_JSON)  # an object no more
    with pytest.raises(ValueError):  # noqa: PT012 - the SDK's own accumulation of the pieces
        async with client.messages.stream(
            model="scripted-mailer", max_tokens=200, messages=[{"role": "user", "content": PLAN}], tools=TOOLS
        ) as stream:
            await stream.get_final_message()
    assert (await spell).met == 2 and [e.garbled for e in proxy.exchanges] == [1, 1]
    assert all(e.prompt_tokens for e in proxy.exchanges)  # billed, whatever the agent made of it


@pytest.mark.parametrize(
    ("fault", "error"), [(RATE_LIMIT, anthropic.RateLimitError), (ERROR, anthropic.APIStatusError)]
)
async def test_an_error_is_anthropic_s_shape_to_its_sdk(lab, fault, error):
    proxy, client = lab
    spell = asyncio.ensure_future(proxy.fault(Fault(fault), requests=1))
    with pytest.raises(error) as raised:
        await ask(client)
    await spell
    assert raised.value.body["type"] == "error" and "checkpoint-tui" in raised.value.body["error"]["message"]
    assert (await ask(client)).content[0].type == "tool_use"  # then requests pass again


def test_streamed_usage_is_the_prompt_from_message_start_and_the_answer_from_message_delta():
    start = {"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}}
    seen = usage_of_event(json.dumps(start).encode())
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}}
    assert seen == (30, 1) and usage_of_event(json.dumps(delta).encode(), seen) == (30, 12)
    assert usage_of_event(b'{"type": "message_delta", "usage": {"output_tokens": true}}', seen) == seen
    assert usage_of_event(b'{"type": "message_start", "message": "x", "usage": 1}', None) is None
