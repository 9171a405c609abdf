"""The scripted mailer model over HTTP: an OpenAI-compatible Chat Completions endpoint (`POST
/v1/chat/completions`, whole or streamed as server-sent events; `GET /v1/models`) and Anthropic's
Messages API (`POST /v1/messages`, whole or streamed) on 127.0.0.1, for an example agent whose model
is a real HTTP client (`OPENAI_BASE_URL`, or `ANTHROPIC_BASE_URL` at the server's root) rather than an
in-process function, so that a model fault can be put between them (`--model-endpoint`,
docs/model-faults.md).

    python examples/agents/scripted_model.py [--port 0]     # prints: listening http://127.0.0.1:PORT/v1

It decides from the request alone, as a stateless model would, with mailroom.next_step: the plan is
the first user message (JSON: turns, to, pace, think), the emails sent so far are the tool results in
the conversation that say "sent to" (a framework's retry prompt after arguments it could not parse is
not one); while fewer than `turns` it answers one call of the send tool offered (the first whose name
says "email", else the first: `send_email`, with `pace` if the tool takes it) with a fresh call id,
then the text "sent N emails to ADDRESS". It thinks `think` seconds first and reports usage (a
quarter of the characters, as tokens). Streamed (`"stream": true`), a tool call's arguments come in
two pieces, as a real model's come in many, and the usage in a last chunk when
`stream_options.include_usage` asks for it. Bounded: a body of 1 MiB,
500 messages; anything else is a 4xx."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

sys.path.insert(1, str(Path(__file__).resolve().parent))

from mailroom import Step, next_step  # noqa: E402

MAX_BODY = 1 << 20
MAX_MESSAGES = 500
MODEL = "scripted-mailer"


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _send_tool(tools: object, name_of: Callable[[dict], object]) -> dict:
    """The mailer's send tool among those the request offers: the first whose name says "email" (an
    agent framework may offer its own tools first: Deep Agents' todo list and files), else the first."""
    offered = [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    mail = [t for t in offered if "email" in str(name_of(t)).lower()]
    return (mail or offered or [{}])[0]


def _tool(request: dict) -> tuple[str, set[str]]:
    """The send tool the request offers (its name, its parameters' names), however the framework names
    it and whether it takes the send's `pace`; else `send_email`."""
    first = _send_tool(request.get("tools"), lambda t: (t.get("function") or {}).get("name"))
    function = first.get("function") if isinstance(first.get("function"), dict) else {}
    name = function.get("name") if isinstance(function.get("name"), str) else "send_email"
    props = (
        (function.get("parameters") or {}).get("properties") if isinstance(function.get("parameters"), dict) else None
    )
    return name[:64], set(props) if isinstance(props, dict) else set()


def answer(request: object) -> tuple[int, dict]:
    """(status, body) for one chat request: the whole completion, or the error."""
    decided = _decide(request)
    if not isinstance(decided, Decision):
        return decided
    message, finish, usage = decided
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return 200, {**_head("chat.completion"), "choices": [choice], "usage": usage}


def chunks(request: dict) -> tuple[int, dict] | list[dict]:
    """The streamed form of the same answer: the chunks of `chat.completion.chunk` in order (then the
    caller's `[DONE]`), or (status, error body)."""
    decided = _decide(request)
    if not isinstance(decided, Decision):
        return decided
    message, finish, usage = decided
    head = _head("chat.completion.chunk")

    def chunk(delta: dict, finish_reason: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        args = call["function"]["arguments"]
        first = {"index": 0, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"]}}
        out.append(chunk({"tool_calls": [{**first, "function": {**first["function"], "arguments": ""}}]}))
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    else:
        out.append(chunk({"content": message["content"]}))
    out.append(chunk({}, finish))
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        out.append({**head, "choices": [], "usage": usage})
    return out


def _head(kind: str) -> dict:
    return {"id": f"chatcmpl-{secrets.token_hex(6)}", "object": kind, "model": MODEL, "created": int(time.time())}


class Decision(NamedTuple):
    message: dict
    finish: str
    usage: dict


def _decide(request: object) -> tuple[int, dict] | Decision:
    """(message, finish reason, usage) for one chat request, or (status, error body)."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not 0 < len(messages) <= MAX_MESSAGES:
        return 400, {"error": {"message": f"messages: a list of 1..{MAX_MESSAGES}", "type": "invalid_request_error"}}
    plan = next((_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    sent = sum(
        1
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool" and _text(m.get("content")).startswith("sent to")
    )
    try:
        step = next_step(plan, sent)
    except ValueError as err:
        return 400, {"error": {"message": str(err)[:200], "type": "invalid_request_error"}}
    time.sleep(step.think)  # a model takes a while to answer (each request on a thread of its own)
    if step.text is not None:
        message: dict = {"role": "assistant", "content": step.text}
        finish = "stop"
    else:
        name, params = _tool(request)
        call = {"id": f"call_{secrets.token_hex(8)}", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(_arguments(step, params))}
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    prompt_tokens = sum(len(_text(m.get("content"))) for m in messages if isinstance(m, dict)) // 4
    completion_tokens = max(1, len(json.dumps(message)) // 4)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    usage["total_tokens"] = prompt_tokens + completion_tokens
    return Decision(message, finish, usage)


def _arguments(step: Step, params: set[str]) -> dict:
    return {"to": step.to, "body": step.body, **({"pace": step.pace} if "pace" in params else {})}


# Anthropic's Messages API (`POST /v1/messages`): the same script, in its shapes. The plan is the first
# user message's text, the emails sent the `tool_result` blocks that say "sent to".
def messages_answer(request: object) -> tuple[int, dict]:
    """(status, body) for one Messages request: the whole message, or the error."""
    decided = _decide_message(request)
    if not isinstance(decided, dict):
        return decided
    return 200, decided


def message_events(request: dict) -> tuple[int, dict] | list[tuple[str, dict]]:
    """The streamed form of the same message: (event name, data) in order, or (status, error body)."""
    message = _decide_message(request)
    if not isinstance(message, dict):
        return message
    (block,), usage = message["content"], message["usage"]
    events = [("message_start", {"message": {**message, "content": [], "usage": {**usage, "output_tokens": 1}}})]
    if block["type"] == "text":
        events.append(("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
        events.append(("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": block["text"]}}))
    else:
        events.append(("content_block_start", {"index": 0, "content_block": {**block, "input": {}}}))
        args = json.dumps(block["input"])
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            events.append(
                ("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}})
            )
    events.append(("content_block_stop", {"index": 0}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [("message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}})]
    return [(name, {"type": name, **data}) for name, data in [*events, ("message_stop", {})]]


def _decide_message(request: object) -> tuple[int, dict] | dict:
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list) or not 0 < len(messages) <= MAX_MESSAGES:
        return 400, _refusal(f"messages: a list of 1..{MAX_MESSAGES}")
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    blocks = [b for c in users if isinstance(c, list) for b in c if isinstance(b, dict)]
    sent = sum(b.get("type") == "tool_result" and _text(b.get("content")).startswith("sent to") for b in blocks)
    plan = next((t for c in users if (t := _text(c))), None)  # text blocks only: a tool_result has none
    try:
        step = next_step(plan, sent)
    except ValueError as err:
        return 400, _refusal(str(err)[:200])
    time.sleep(step.think)
    if step.text is not None:
        block: dict = {"type": "text", "text": step.text}
    else:
        first = _send_tool(request.get("tools") if isinstance(request, dict) else None, lambda t: t.get("name"))
        name = first.get("name") if isinstance(first.get("name"), str) else "send_email"
        schema = first.get("input_schema") if isinstance(first.get("input_schema"), dict) else {}
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        block = {"type": "tool_use", "id": f"toolu_{secrets.token_hex(12)}", "name": name[:64]}
        block["input"] = _arguments(step, set(props))
    prompt = len(json.dumps(messages)) // 4
    usage = {"input_tokens": prompt, "output_tokens": max(1, len(json.dumps(block)) // 4)}
    stop = "end_turn" if block["type"] == "text" else "tool_use"
    head = {"id": f"msg_{secrets.token_hex(12)}", "type": "message", "role": "assistant", "model": MODEL}
    return {**head, "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}


def _refusal(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, {"error": {"message": "not found", "type": "not_found"}})
        self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "checkpoint-tui"}]})

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length", "")
        if not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            return self._send(
                413, {"error": {"message": "a body of at most 1 MiB, with its length", "type": "too_large"}}
            )
        body = self.rfile.read(int(length))
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/v1/messages"):
            return self._send(404, {"error": {"message": "not found", "type": "not_found"}})
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return self._send(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
        streamed = isinstance(request, dict) and request.get("stream") is True
        if path == "/v1/messages":
            if not streamed:
                return self._send(*messages_answer(request))
            events = message_events(request)
            if not isinstance(events, list):
                return self._send(*events)
            return self._stream([f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events])
        if not streamed:
            return self._send(*answer(request))
        pieces = chunks(request)
        if not isinstance(pieces, list):
            return self._send(*pieces)
        self._stream([f"data: {json.dumps(c)}\n\n" for c in pieces] + ["data: [DONE]\n\n"])

    def _stream(self, events: list[str]) -> None:
        """Server-sent events, one HTTP chunk each, flushed as they go (as a model's tokens come)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


class ScriptedModel:
    """The endpoint on a free loopback port (or `port`), served on a thread until close()."""

    def __init__(self, port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), daemon=True)

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (Anthropic's clients take the root: `root`)."""
        return f"{self.root}/v1"

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ScriptedModel:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="the port (default: one the OS picks)")
    model = ScriptedModel(p.parse_args().port).start()
    print(f"listening {model.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        model.close()


if __name__ == "__main__":
    main()
