"""What a model provider does on a bad day, as the model proxy (model_proxy.py) plays it: the fault
kinds, the `--model-endpoint NAME=URL` spec, and the two things read or rewritten in an answer's
body: the tokens the server says it used, and a tool call's arguments made into something that is
not JSON. Pure: no I/O.

The answers are those of OpenAI-compatible servers: Chat Completions (`choices[].message.tool_calls`,
streamed as `choices[].delta.tool_calls`) and Responses (`output[]` items of type `function_call`,
streamed as `response.function_call_arguments.delta` events), with usage as `prompt_tokens` /
`completion_tokens` or `input_tokens` / `output_tokens`; and Anthropic's Messages API (`content[]`
blocks of type `tool_use`, whose `input` is an object: garbled, it becomes a string that is not JSON;
streamed as `input_json_delta` pieces, the first one garbled), its streamed usage split between
`message_start` (the prompt's) and `message_delta` (the answer's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from checkpoint_tui.proof.nemeses.dependency import NAME, check_name

RATE_LIMIT, ERROR, TIMEOUT, SLOW, CUT, GARBAGE = (
    "model-rate-limit",
    "model-error",
    "model-timeout",
    "model-slow",
    "model-cut",
    "model-garbage",
)
FAULTS = (RATE_LIMIT, ERROR, TIMEOUT, SLOW, CUT, GARBAGE)
MAX_URL = 2048
# Prefixed to a tool call's arguments: no JSON text starts with a closing brace, whatever follows.
NOT_JSON = "}{"
MAX_JSON_BYTES = 8 << 20  # an answer larger than this is passed on as it is: neither read nor rewritten


@dataclass(frozen=True)
class Fault:
    """One fault in force: for `requests` requests, or until the proxy is told it ended."""

    kind: str
    status: int = 503  # model-error's: 500 or 503
    retry_after_s: int = 1  # model-rate-limit's Retry-After
    piece_delay_ms: int = 200  # model-slow's, before each piece of the answer

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"model fault {self.kind[:40]!r} is not one of {', '.join(FAULTS)}")
        if self.status not in (500, 503):
            raise ValueError("model-error answers 500 or 503")
        if not 0 <= self.retry_after_s <= 3600 or not 0 <= self.piece_delay_ms <= 60_000:
            raise ValueError("Retry-After is 0..3600 s and a delay 0..60000 ms")


def parse_endpoint(text: str) -> tuple[str, str]:
    """`--model-endpoint NAME=URL` as (NAME, URL): NAME the variable the workers read their model's base
    URL from (OPENAI_BASE_URL, ...), URL where it points now (http or https, a host, no credentials);
    ValueError with a one-line reason that does not repeat a URL holding credentials."""
    # No message repeats the text: a URL may hold a key (in its user part, its query, a path parameter).
    name, sep, url = text.partition("=")
    if not sep or not NAME.fullmatch(name):
        raise ValueError("--model-endpoint takes NAME=URL, NAME an environment variable name ([A-Z_][A-Z0-9_]*)")
    try:
        check_name(name)
    except ValueError:
        raise ValueError(
            f"--model-endpoint {name}: a name the lab or the worker's runtime uses itself; pick another"
        ) from None
    if len(url) > MAX_URL:
        raise ValueError(f"--model-endpoint {name}: the URL is over {MAX_URL} characters")
    if any(ord(c) < 33 for c in url):
        raise ValueError(f"--model-endpoint {name}: the URL holds a space or a control character")
    if any(c in "\\@;" for c in url):
        raise ValueError(
            f"--model-endpoint {name}: the URL holds an @, a ; or a backslash: credentials go in the "
            "workers' environment, not the URL"
        )
    try:
        parts = urlsplit(url)
        port = parts.port  # a port that is not 0..65535 raises here
    except ValueError:
        raise ValueError(f"--model-endpoint {name}: the URL cannot be parsed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--model-endpoint {name}: the URL is not http:// or https:// with a host")
    if parts.query or parts.fragment or port == 0:
        raise ValueError(f"--model-endpoint {name}: a base URL has no query, fragment or port 0")
    return name, url.rstrip("/")


def tokens(usage: object) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a `usage` object of either API; None if it says neither."""
    if not isinstance(usage, dict):
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    if _count(prompt) and _count(completion):
        return prompt, completion
    return None


def _count(n: object) -> TypeGuard[int]:
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10**9


def usage_of_body(body: bytes) -> tuple[int, int] | None:
    """The tokens a whole (not streamed) answer reports."""
    doc = _load(body)
    if not isinstance(doc, dict):
        return None
    response = doc.get("response")  # Responses' response.completed event
    return tokens(doc.get("usage")) or (tokens(response.get("usage")) if isinstance(response, dict) else None)


def usage_of_event(data: bytes, before: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The tokens a stream has reported once this event is read (`before`: up to the event before): the
    last chunk of a stream asked for usage, Responses' `response.completed`, or Anthropic's
    `message_start` (the prompt's, and a first count of the answer's) then `message_delta` (the answer's)."""
    if b"usage" not in data:
        return before
    doc = _load(data)
    if isinstance(doc, dict) and doc.get("type") in ("message_start", "message_delta"):
        message = doc.get("message")
        usage = message.get("usage") if isinstance(message, dict) else doc.get("usage")
        if not isinstance(usage, dict):
            return before
        prompt = usage.get("input_tokens", before[0] if before else None)
        completion = usage.get("output_tokens", before[1] if before else None)
        return (prompt, completion) if _count(prompt) and _count(completion) else before
    return usage_of_body(data) or before


def garble_body(body: bytes) -> tuple[bytes, int]:
    """A whole answer with each tool call's arguments made not JSON; (body, calls garbled)."""
    doc = _load(body)
    if not isinstance(doc, dict):
        return body, 0
    n = _garble_whole(doc)
    return (json.dumps(doc).encode(), n) if n else (body, 0)


def _garble_whole(doc: dict[str, Any]) -> int:
    n = 0
    for choice in _items(doc, "choices"):
        for call in _items(choice.get("message"), "tool_calls"):
            n += _garble_call(call.get("function"))
    for item in _items(doc, "output"):
        if item.get("type") == "function_call":
            n += _garble_call(item)
    for block in _items(doc, "content") if doc.get("type") == "message" else []:
        if block.get("type") == "tool_use" and "input" in block:  # an object: a string not JSON instead
            block["input"] = NOT_JSON + json.dumps(block["input"])
            n += 1
    return n


def garble_event(data: bytes, done: set[str]) -> tuple[bytes, int]:
    """One streamed event's JSON with the first piece of each tool call's arguments made not JSON
    (`done`: the calls already garbled in this stream); (data, calls garbled)."""
    if b"argument" not in data and b"delta" not in data:
        return data, 0
    doc = _load(data)
    if not isinstance(doc, dict):
        return data, 0
    n = 0
    kind = doc.get("type")
    delta = doc.get("delta")
    if kind == "content_block_delta" and isinstance(delta, dict) and delta.get("type") == "input_json_delta":
        key = f"a:{doc.get('index')}"  # Anthropic: a tool_use block's input, in pieces
        if key not in done and isinstance(delta.get("partial_json"), str):
            done.add(key)
            delta["partial_json"] = NOT_JSON + delta["partial_json"]
            return json.dumps(doc).encode(), 1
        return data, 0
    if kind == "response.function_call_arguments.delta" and isinstance(doc.get("delta"), str):
        key = f"r:{doc.get('item_id')}"
        if key not in done:
            done.add(key)
            doc["delta"] = NOT_JSON + doc["delta"]
            n += 1
    # Responses also sends each call's arguments whole once they are done: garbled there too (SDKs read
    # them), counted once a call
    found = doc.get("item")
    item: dict[str, Any] = found if isinstance(found, dict) else {}
    calls: list[tuple[dict[str, Any], str]] = []  # (where the arguments are, the call's key)
    if kind == "response.function_call_arguments.done":
        calls.append((doc, f"r:{doc.get('item_id')}"))
    elif kind == "response.output_item.done" and item.get("type") == "function_call":
        calls.append((item, f"r:{item.get('id')}"))
    elif kind in ("response.completed", "response.done"):
        out = _items(doc.get("response"), "output")
        calls += [(i, f"r:{i.get('id')}") for i in out if i.get("type") == "function_call"]
    changed = bool(n)
    for holder, key in calls:
        if _garble_call(holder):
            changed = True
            n += 0 if key in done else 1  # a call counts once, however many events repeat its arguments
            done.add(key)
    for choice in _items(doc, "choices"):
        for call in _items(choice.get("delta"), "tool_calls"):
            key = f"c:{choice.get('index')}:{call.get('index')}"
            if key not in done and _garble_call(call.get("function")):
                done.add(key)
                changed, n = True, n + 1
    return (json.dumps(doc).encode(), n) if changed else (data, 0)


def _items(holder: object, key: str) -> list[dict[str, Any]]:
    """The dicts in holder[key], where holder is a dict and that is a list (anything else: none)."""
    found = holder.get(key) if isinstance(holder, dict) else None
    return [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []


def _garble_call(holder: Any) -> int:
    if isinstance(holder, dict) and isinstance(holder.get("arguments"), str):
        holder["arguments"] = NOT_JSON + holder["arguments"]
        return 1
    return 0


def _load(data: bytes) -> object:
    if len(data) > MAX_JSON_BYTES:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        return None
