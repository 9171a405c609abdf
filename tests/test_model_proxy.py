"""The model-fault proxy (proof/nemeses/model_proxy.py, #53) between a real HTTP client and a real
OpenAI-compatible server on loopback (tests/model_server.py's stand-in, or a streaming one below):
each fault is what the agent's request meets, for its requests or its time, then requests pass again;
every request is recorded with its fault, status and tokens, and nothing of its bodies or headers."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from checkpoint_tui.proof.nemeses.model_faults import (
    CUT,
    ERROR,
    GARBAGE,
    NOT_JSON,
    RATE_LIMIT,
    SLOW,
    TIMEOUT,
    Fault,
    garble_body,
    garble_event,
    parse_endpoint,
    usage_of_body,
)
from checkpoint_tui.proof.nemeses.model_proxy import ModelProxy
from model_server import USAGE, StandIn, as_json, completion

CHAT = "/chat/completions"
ASK = {"model": "m", "messages": [{"role": "user", "content": "a secret prompt"}]}


def tool_call_answer() -> dict:
    call = {"id": "call_1", "type": "function", "function": {"name": "send_email", "arguments": '{"to": "a@b"}'}}
    return completion(None, "tool_calls", tool_calls=None) | {
        "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [call]}, "finish_reason": "tool_calls"}]
    }


@pytest.fixture
async def lab():
    """(the stand-in, the proxy in front of its /v1, an HTTP client at the proxy's URL with a key)."""
    standin = StandIn().start()
    proxy = ModelProxy("OPENAI_BASE_URL", f"{standin.url}/v1")
    url = await proxy.start()
    client = httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer sk-test-key"}, timeout=5.0)
    yield standin, proxy, client
    await client.aclose()
    await proxy.close()
    standin.stop()


async def test_a_request_passes_to_the_endpoint_and_is_recorded_without_its_body_or_key(lab):
    standin, proxy, client = lab
    assert proxy.url is not None and proxy.url.startswith("http://127.0.0.1:") and proxy.url.endswith("/v1")
    resp = await client.post(CHAT, json=ASK)
    assert resp.status_code == 200 and resp.json()["usage"] == USAGE
    assert standin.chats()[-1]["auth"] == "Bearer sk-test-key" and standin.chats()[-1]["body"] == ASK
    [ex] = proxy.exchanges
    assert (ex.path, ex.fault, ex.status, ex.prompt_tokens, ex.completion_tokens) == ("/v1" + CHAT, None, 200, 50, 20)
    assert "secret" not in json.dumps(ex.to_dict()) and "sk-test" not in json.dumps(ex.to_dict())


async def test_a_rate_limit_meets_its_requests_with_429_and_retry_after_then_lets_them_pass(lab):
    _standin, proxy, client = lab
    storm = asyncio.ensure_future(proxy.fault(Fault(RATE_LIMIT, retry_after_s=2), requests=2))
    await asyncio.sleep(0)
    first, second = await client.post(CHAT, json=ASK), await client.post(CHAT, json=ASK)
    await asyncio.wait_for(storm, 5.0)  # met its two requests: over
    third = await client.post(CHAT, json=ASK)
    assert [r.status_code for r in (first, second, third)] == [429, 429, 200]
    assert first.headers["retry-after"] == "2" and first.json()["error"]["code"] == "rate_limit_exceeded"
    assert [e.fault for e in proxy.exchanges] == [RATE_LIMIT, RATE_LIMIT, None]
    assert proxy.stats()["met"] == {RATE_LIMIT: 2} and proxy.faults == {RATE_LIMIT: 1}


async def test_an_outage_answers_500_for_its_duration_only(lab):
    _standin, proxy, client = lab
    outage = asyncio.ensure_future(proxy.fault(Fault(ERROR, status=500), duration_s=0.5))
    await asyncio.sleep(0)
    during = await client.post(CHAT, json=ASK)
    await asyncio.wait_for(outage, 5.0)
    after = await client.post(CHAT, json=ASK)
    assert (during.status_code, after.status_code) == (500, 200)


async def test_a_timeout_holds_the_request_until_the_agent_gives_up(lab):
    _standin, proxy, client = lab
    silence = asyncio.ensure_future(proxy.fault(Fault(TIMEOUT), requests=1, duration_s=10.0))
    await asyncio.sleep(0)
    began = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        await client.post(CHAT, json=ASK, timeout=0.5)
    await asyncio.wait_for(silence, 5.0)  # the held request ended with its agent: the fault is over
    assert time.monotonic() - began < 5.0
    assert (await client.post(CHAT, json=ASK)).status_code == 200
    assert [(e.fault, e.status) for e in proxy.exchanges] == [(TIMEOUT, None), (None, 200)]


async def test_garbage_makes_a_tool_calls_arguments_not_json(lab):
    standin, proxy, client = lab
    standin.reply(as_json(tool_call_answer()))
    garbage = asyncio.ensure_future(proxy.fault(Fault(GARBAGE), requests=1))
    await asyncio.sleep(0)
    resp = await client.post(CHAT, json=ASK)
    await asyncio.wait_for(garbage, 5.0)
    arguments = resp.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert arguments == NOT_JSON + '{"to": "a@b"}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)
    assert proxy.exchanges[0].garbled == 1
    clean = await client.post(CHAT, json=ASK)  # the next answer is the server's own
    json.loads(clean.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])


def sse(*events: dict) -> list[bytes]:
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


STREAM = sse(
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"to": '}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"a@b"}'}}]}}]},
    {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}},
)


@pytest.fixture
async def streaming():
    """A server that streams STREAM, an event every 50 ms, then closes; with the proxy before it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")), 0
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        for event in STREAM:
            writer.write(event)
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    proxy = ModelProxy("OPENAI_BASE_URL", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1")
    client = httpx.AsyncClient(base_url=await proxy.start(), timeout=5.0)
    yield proxy, client
    await client.aclose()
    await proxy.close()
    server.close()


async def read_stream(client: httpx.AsyncClient) -> bytes:
    body = b""
    async with client.stream("POST", CHAT, json={**ASK, "stream": True}) as resp:
        async for piece in resp.aiter_bytes():
            body += piece
    return body


def arguments(body: bytes) -> str:
    events = [json.loads(line[6:]) for line in body.split(b"\n") if line.startswith(b"data: {")]
    return "".join(c["delta"]["tool_calls"][0]["function"]["arguments"] for e in events for c in e["choices"])


async def test_a_stream_passes_piece_by_piece_and_its_usage_is_read(streaming):
    proxy, client = streaming
    body = await read_stream(client)
    assert json.loads(arguments(body)) == {"to": "a@b"} and body.endswith(b"data: [DONE]\n\n")
    assert (proxy.exchanges[0].prompt_tokens, proxy.exchanges[0].completion_tokens) == (11, 7)


async def test_a_cut_stream_ends_midway_and_the_agent_sees_it_broken(streaming):
    proxy, client = streaming
    cut = asyncio.ensure_future(proxy.fault(Fault(CUT), requests=1))
    await asyncio.sleep(0)
    with pytest.raises(httpx.RemoteProtocolError):
        await read_stream(client)
    await asyncio.wait_for(cut, 5.0)
    assert proxy.exchanges[0].fault == CUT and proxy.exchanges[0].status == 200
    assert json.loads(arguments(await read_stream(client))) == {"to": "a@b"}  # the next one whole


async def test_garbage_in_a_stream_breaks_the_arguments_once_and_slow_delays_each_piece(streaming):
    proxy, client = streaming
    garbage = asyncio.ensure_future(proxy.fault(Fault(GARBAGE), requests=1))
    await asyncio.sleep(0)
    assert arguments(await read_stream(client)) == NOT_JSON + '{"to": "a@b"}'
    await asyncio.wait_for(garbage, 5.0)
    assert proxy.exchanges[0].garbled == 1
    slow = asyncio.ensure_future(proxy.fault(Fault(SLOW, piece_delay_ms=300), requests=1))
    await asyncio.sleep(0)
    began = time.monotonic()
    assert json.loads(arguments(await read_stream(client))) == {"to": "a@b"}
    assert time.monotonic() - began >= 0.3 * 2  # at least two pieces, each 0.3 s late
    await asyncio.wait_for(slow, 5.0)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("OPENAI_BASE_URL", "takes NAME=URL"),
        ("lower=http://127.0.0.1:1/v1", "an environment variable name"),
        ("https://me:sk-SECRET@api.example/v1", "takes NAME=URL"),
        ("https://api.example/v1?key=sk-SECRET", "takes NAME=URL"),
        ("X=http:/me:sk-SECRET@h/v1", "holds an @, a ; or a backslash"),
        ("X=u:sk-SECRET@host", "holds an @, a ; or a backslash"),
        ("X=http://h/v1;key=sk-SECRET", "holds an @, a ; or a backslash"),
        ("TEMPORAL_X=http://127.0.0.1:1/v1", "--model-endpoint TEMPORAL_X: a name the lab or the worker's runtime"),
        ("OPENAI_BASE_URL=ftp://127.0.0.1/v1", "not http:// or https://"),
        ("OPENAI_BASE_URL=http:///v1", "not http:// or https://"),
        ("OPENAI_BASE_URL=http://user:pw@127.0.0.1:1/v1", "holds an @, a ; or a backslash"),
        ("OPENAI_BASE_URL=http://127.0.0.1:99999/v1", "cannot be parsed"),
        ("OPENAI_BASE_URL=http://127.0.0.1:1/v1?key=sk-1", "no query"),
        ("OPENAI_BASE_URL=http://127.0.0.1:1/a b", "holds a space or a control character"),
        ("OPENAI_BASE_URL=http://x/" + "a" * 3000, "over 2048 characters"),
    ],
)
def test_a_bad_endpoint_spec_is_one_line_that_repeats_no_credentials(spec, says):
    with pytest.raises(ValueError) as err:
        parse_endpoint(spec)
    said = str(err.value)
    assert says in said and "\n" not in said and "pw@" not in said and "SECRET" not in said


def test_a_good_endpoint_spec():
    assert parse_endpoint("OPENAI_BASE_URL=https://models.example/v1/") == (
        "OPENAI_BASE_URL",
        "https://models.example/v1",
    )


def test_usage_and_garbling_take_any_json_without_raising():
    for body in (b'{"response": "x"}', b'{"response": 5, "usage": {}}', b"[1]", b"{", b'{"choices": "x"}'):
        assert usage_of_body(body) is None
        assert garble_body(body) == (body, 0)
    assert usage_of_body(b'{"usage": {"input_tokens": 3, "output_tokens": 4}}') == (3, 4)
    assert usage_of_body(b'{"usage": {"prompt_tokens": true, "completion_tokens": 1}}') is None


def test_garbage_reaches_every_place_a_responses_stream_carries_the_arguments():
    done: set[str] = set()
    events = [
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"to": '},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"to": "a"}'},
        {
            "type": "response.output_item.done",
            "item": {"type": "function_call", "id": "fc_1", "arguments": '{"to": "a"}'},
        },
        {
            "type": "response.completed",
            "response": {"output": [{"type": "function_call", "id": "fc_1", "arguments": '{"to": "a"}'}]},
        },
    ]
    out = [garble_event(json.dumps(e).encode(), done) for e in events]
    assert [n for _, n in out] == [1, 0, 0, 0]  # one call, counted once
    texts = [json.loads(data) for data, _ in out]
    assert texts[1]["arguments"].startswith(NOT_JSON) and texts[2]["item"]["arguments"].startswith(NOT_JSON)
    assert texts[3]["response"]["output"][0]["arguments"].startswith(NOT_JSON)


async def test_a_long_request_target_reaches_the_endpoint_whole_and_is_recorded_without_its_query(lab):
    standin, proxy, client = lab
    long_path = "/deployments/" + "d" * 300 + "/chat/completions"
    await client.post(long_path + "?api-version=2024-10-01", json=ASK)
    assert standin.requests[-1]["path"] == "/v1" + long_path + "?api-version=2024-10-01"
    assert proxy.exchanges[-1].path == ("/v1" + long_path)[:200] and "api-version" not in proxy.exchanges[-1].path


async def test_a_model_fault_that_meets_no_request_is_not_fired_so_no_verdict_leans_on_it(tmp_path):
    """The schedule's model fault is a Hit (recorded, counted as exercised) only if some request met it."""
    from checkpoint_tui.proof.chaos.model_lab import ModelLab
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent
    from checkpoint_tui.proof.nemeses.records import Hit, Miss
    from checkpoint_tui.settings import Settings

    standin = StandIn().start()
    models = ModelLab()
    try:
        settings = await models.start(
            Settings(home=tmp_path / "h", model_endpoints=(("OPENAI_BASE_URL", f"{standin.url}/v1"),))
        )
        ((_, url),) = settings.model_endpoints
        idle = await models.strike(ChaosEvent(None, ERROR, 0, duration_s=0.2, at_s=1.0))
        assert isinstance(idle, Miss) and "no model request came to OPENAI_BASE_URL" in idle.why
        async with httpx.AsyncClient(base_url=url, timeout=5.0) as client:
            fired = asyncio.ensure_future(models.strike(ChaosEvent(None, ERROR, 0, duration_s=0.5, at_s=1.0)))
            await asyncio.sleep(0)  # one turn of the loop: the strike puts the fault in force before it waits
            assert (await client.post(CHAT, json=ASK)).status_code == 503
            hit = await fired
        assert isinstance(hit, Hit) and hit.detail["met"] == 1
        assert [s["met"] for s in models.figures()["OPENAI_BASE_URL"]["spells"]] == [1]  # the idle one left out
    finally:
        await models.close()
        standin.stop()
