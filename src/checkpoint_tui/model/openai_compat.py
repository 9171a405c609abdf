"""Any OpenAI-compatible server over httpx (llama.cpp's server, Ollama's /v1, vLLM, hosted APIs).

Asks /v1/models before trusting a model id; constrains the answer where the server supports it (a
GBNF grammar for llama.cpp, a JSON schema response format elsewhere, plain prompting when the server
rejects either); extracts the decision tolerantly; re-prompts once; then gives up as a guardrail.
Transport failures (unreachable, 401/403, timeouts, 5xx, oversized or malformed answers) raise
ProviderUnavailable so the caller can fall back to the offline provider and record why.

The server is not trusted: each request has one deadline and a size cap (transport.py), any
response shape but the documented one is ProviderUnavailable, model ids are checked before they are
shown or stored, and the answer text is parsed in a thread with bounded work (extract.py), so a
hostile server can neither stall the worker's event loop nor raise anything but these two errors.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import httpx

from checkpoint_tui.model.answer import Answer, GuardrailFailure, ProviderUnavailable
from checkpoint_tui.model.decision import FORBIDDEN, scrub
from checkpoint_tui.model.extract import MAX_SCAN_CHARS, Extracted, ExtractError, extract_decision
from checkpoint_tui.model.prices import cost_usd
from checkpoint_tui.model.prompt import CORRECTIVE, DECISION_SCHEMA, GBNF, MAX_TOKENS, SYSTEM, user_prompt
from checkpoint_tui.model.transport import BadRequest, request_json, timeouts
from checkpoint_tui.settings import ModelOptions

CHAT = "/v1/chat/completions"
MODELS_CACHE_S = 60.0
MAX_MODEL_ID_CHARS = 200
MAX_REPORTED_TOKENS = 10_000_000  # a `usage` count above this (or not an int) is ignored and estimated
RAW_KEPT_CHARS = 2_000  # of a rejected answer, for the guardrail's evidence

__all__ = ["Answer", "GuardrailFailure", "ProviderUnavailable", "ask_model"]


@dataclass(frozen=True)
class ServerInfo:
    models: tuple[str, ...]
    llamacpp: bool


_models_cache: dict[str, tuple[float, ServerInfo]] = {}
_plain_only: set[str] = set()  # servers that rejected our constraint once: do not try again


def base_url(url: str) -> str:
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def ask_model(options: ModelOptions, step: int, total: int, previous_note: str | None) -> Answer:
    """Ask `options.url`; the key in `options` is the worker's own, for the URL it was configured with.
    Raises ProviderUnavailable or GuardrailFailure, nothing else, whatever the server does."""
    base = base_url(options.url or "")
    try:
        host = scrub(urlsplit(base).netloc or base, MAX_MODEL_ID_CHARS)
        client = httpx.AsyncClient(base_url=base, headers=_auth(options), timeout=timeouts(options.timeout_s))
    except (httpx.InvalidURL, ValueError, TypeError) as err:
        raise ProviderUnavailable(f"the model URL is not usable ({type(err).__name__})") from None
    async with client:
        info = await _server_info(client, base, options.timeout_s)
        wanted = options.model
        chosen = wanted if wanted in info.models else info.models[0]
        notes = []
        if wanted is not None and chosen != wanted:
            notes.append(f"{scrub(str(wanted), MAX_MODEL_ID_CHARS)} not served, used {chosen}")
        server = _Server(client, base, options.timeout_s, chosen, info.llamacpp)
        found, finish, tokens, reprompted = await _converse(server, user_prompt(step, total, previous_note))
    if reprompted:
        notes.append("reprompted")
    if finish == "length":
        notes.append("truncated")
    notes.append(found.method)
    return Answer(
        decision=found.decision,
        provider=f"{host}/{chosen}",
        tokens=tokens[0] + tokens[1],
        cost_usd=cost_usd(host, chosen, *tokens, overrides=options.price_table),
        note="; ".join(notes),
    )


def _auth(options: ModelOptions) -> dict[str, str]:
    return {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}


@dataclass(frozen=True)
class _Server:
    client: httpx.AsyncClient
    base: str
    deadline_s: float  # per request, connect to last byte
    model: str
    llamacpp: bool


async def _converse(server: _Server, prompt: str) -> tuple[Extracted, str | None, tuple[int, int], bool]:
    """One question, and one corrective re-prompt if the answer holds no valid decision."""
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    content, finish, tokens = await _chat(server, messages)
    try:
        return await _extract(content, finish), finish, tokens, False
    except ExtractError:
        pass
    echo = scrub(content, MAX_SCAN_CHARS)  # what the server sent, made safe to send back
    messages += [{"role": "assistant", "content": echo}, {"role": "user", "content": CORRECTIVE}]
    content, finish, more = await _chat(server, messages)
    tokens = (tokens[0] + more[0], tokens[1] + more[1])
    try:
        return await _extract(content, finish), finish, tokens, True
    except ExtractError as err:
        reason = f"no valid decision after one corrective re-prompt ({err})"
        raise GuardrailFailure(reason, scrub(content, RAW_KEPT_CHARS)) from None


async def _extract(content: str, finish: str | None) -> Extracted:
    """In a thread: parsing a hostile answer must not hold the event loop (heartbeats run there)."""
    return await asyncio.to_thread(extract_decision, content, finish == "length")


async def _server_info(client: httpx.AsyncClient, base: str, deadline_s: float) -> ServerInfo:
    cached = _models_cache.get(base)
    if cached and time.monotonic() - cached[0] < MODELS_CACHE_S:
        return cached[1]
    data = await request_json(client, "GET", "/v1/models", deadline_s)
    items = data.get("data")
    listed = [m for m in items if isinstance(m, dict)] if isinstance(items, list) else []
    models = tuple(m["id"] for m in listed if _usable_id(m.get("id")))
    if not models:
        raise ProviderUnavailable(f"{base}/v1/models lists no models")
    llamacpp = any(m.get("owned_by") == "llamacpp" for m in listed)
    info = ServerInfo(models, llamacpp)
    _models_cache[base] = (time.monotonic(), info)
    return info


def _usable_id(value: Any) -> bool:
    """A model id goes into the provider label (ledger, panes): short, printable, UTF-8 encodable."""
    return isinstance(value, str) and 0 < len(value) <= MAX_MODEL_ID_CHARS and not FORBIDDEN.search(value)


async def _chat(server: _Server, messages: list[dict]) -> tuple[str, str | None, tuple[int, int]]:
    body: dict = {"model": server.model, "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    if server.base not in _plain_only:
        if server.llamacpp:
            body["grammar"] = GBNF
        else:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "decision", "schema": DECISION_SCHEMA},
            }
    try:
        data = await request_json(server.client, "POST", CHAT, server.deadline_s, body)
    except BadRequest:
        if "grammar" not in body and "response_format" not in body:
            raise ProviderUnavailable("chat completions rejected a plain request (400)") from None
        _plain_only.add(server.base)  # the server rejects the constraint: plain prompting + the extractor
        body.pop("grammar", None)
        body.pop("response_format", None)
        data = await request_json(server.client, "POST", CHAT, server.deadline_s, body)
    content, finish = _choice(data)
    return content, finish, _tokens(data, messages, content)


def _choice(data: dict[str, Any]) -> tuple[str, str | None]:
    """choices[0].message.content (a string; null counts as empty) and finish_reason, or ProviderUnavailable."""
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or not isinstance(message, dict):
        raise ProviderUnavailable("chat completions answered without choices[0].message")
    content = message.get("content")
    if content is None:  # a refusal or a tool call: no text, which the extractor treats as garbage
        content = ""
    if not isinstance(content, str):
        raise ProviderUnavailable("chat completions answered a message content that is not a string")
    finish = choice.get("finish_reason")
    return content, finish if isinstance(finish, str) else None


def _tokens(data: dict[str, Any], messages: list[dict], content: str) -> tuple[int, int]:
    """(prompt, completion) from `usage`; without a usable one, the documented ~4 characters a token."""
    usage = data.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if _token_count(prompt) and _token_count(completion):
            return prompt, completion
    return sum(len(m["content"]) for m in messages) // 4, len(content) // 4


def _token_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_REPORTED_TOKENS
