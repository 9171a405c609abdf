"""The scripted mailer model over HTTP: an OpenAI-compatible Chat Completions endpoint (`POST
/v1/chat/completions`, whole or streamed as server-sent events; `GET /v1/models`) on 127.0.0.1, for
an example agent whose model is a real HTTP client (`OPENAI_BASE_URL`) rather than an in-process
function, so that a model fault can be put between them (`--model-endpoint`, docs/model-faults.md).

    python examples/agents/scripted_model.py [--port 0]     # prints: listening http://127.0.0.1:PORT/v1

It decides from the request alone, as a stateless model would, with mailroom.next_step: the plan is
the first user message (JSON: turns, to, pace, think), the emails sent so far are the tool results in
the conversation that say "sent to" (a framework's retry prompt after arguments it could not parse is
not one); while fewer than `turns` it answers one call of the first tool offered (`send_email`, with
`pace` if the tool takes it) with a fresh call id, then the text "sent N emails to ADDRESS". It
thinks `think` seconds first and reports usage (a quarter of the characters, as tokens). Streamed
(`"stream": true`), a tool call's arguments come in two pieces, as a real model's come in many, and
the usage in a last chunk when `stream_options.include_usage` asks for it. Bounded: a body of 1 MiB,
500 messages; anything else is a 4xx."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

sys.path.insert(1, str(Path(__file__).resolve().parent))

from mailroom import next_step  # noqa: E402

MAX_BODY = 1 << 20
MAX_MESSAGES = 500
MODEL = "scripted-mailer"


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _tool(request: dict) -> tuple[str, set[str]]:
    """The first tool the request offers (its name, its parameters' names): the mailer's send tool,
    however the framework names it and whether it takes the send's `pace`; else `send_email`."""
    tools = request.get("tools")
    first = tools[0] if isinstance(tools, list) and tools and isinstance(tools[0], dict) else {}
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
        args = {"to": step.to, "body": step.body, **({"pace": step.pace} if "pace" in params else {})}
        call = {
            "id": f"call_{secrets.token_hex(8)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    prompt_tokens = sum(len(_text(m.get("content"))) for m in messages if isinstance(m, dict)) // 4
    completion_tokens = max(1, len(json.dumps(message)) // 4)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    usage["total_tokens"] = prompt_tokens + completion_tokens
    return Decision(message, finish, usage)


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
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": {"message": "not found", "type": "not_found"}})
        try:
            request = json.loads(body)
        except (ValueError, RecursionError):
            return self._send(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
        if not (isinstance(request, dict) and request.get("stream") is True):
            return self._send(*answer(request))
        streamed = chunks(request)
        if not isinstance(streamed, list):
            return self._send(*streamed)
        self._stream([f"data: {json.dumps(c)}\n\n" for c in streamed] + ["data: [DONE]\n\n"])

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
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

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
