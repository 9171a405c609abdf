"""Any OpenAI-compatible server over httpx (llama.cpp's server, Ollama's /v1, vLLM, hosted APIs).

Asks /v1/models before trusting a model id; constrains the answer where the server supports it (a
GBNF grammar for llama.cpp, a JSON schema response format elsewhere, plain prompting when the server
rejects either); extracts the decision tolerantly; re-prompts once; then gives up as a guardrail.
Transport failures (unreachable, 401/403, timeouts, 5xx) raise ProviderUnavailable so the caller can
fall back to the offline provider and record why."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from checkpoint_tui.model.decision import Decision
from checkpoint_tui.model.extract import ExtractError, extract_decision
from checkpoint_tui.model.prices import cost_usd
from checkpoint_tui.model.prompt import CORRECTIVE, DECISION_SCHEMA, GBNF, MAX_TOKENS, SYSTEM, user_prompt
from checkpoint_tui.settings import ModelOptions

CONNECT_TIMEOUT_S = 2.0
MODELS_CACHE_S = 60.0


class ProviderUnavailable(Exception):
    """The server did not answer usefully; str() is the reason recorded on the step."""


class GuardrailFailure(Exception):
    def __init__(self, reason: str, raw: str) -> None:
        super().__init__(reason)
        self.raw = raw


@dataclass(frozen=True)
class Answer:
    decision: Decision
    provider: str  # host/model
    tokens: int
    cost_usd: float
    note: str  # how the answer was obtained: "json", "fenced", "reprompted; scan", "truncated; repaired", …


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
    """Ask `options.url`; the key in `options` is the worker's own, for the URL it was configured with."""
    url, model = options.url or "", options.model
    base = base_url(url)
    host = urlsplit(base).netloc or base
    headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
    timeout = httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=options.timeout_s, write=5.0, pool=CONNECT_TIMEOUT_S)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout) as client:
        info = await _server_info(client, base)
        chosen = model if model in info.models else info.models[0]
        notes = [] if chosen == model or model is None else [f"{model} not served, used {chosen}"]
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": user_prompt(step, total, previous_note)},
        ]
        content, finish, tokens = await _chat(client, base, chosen, messages, info.llamacpp)
        try:
            found = extract_decision(content, truncated=finish == "length")
        except ExtractError:
            messages += [{"role": "assistant", "content": content}, {"role": "user", "content": CORRECTIVE}]
            content2, finish, tokens2 = await _chat(client, base, chosen, messages, info.llamacpp)
            tokens = (tokens[0] + tokens2[0], tokens[1] + tokens2[1])
            try:
                found = extract_decision(content2, truncated=finish == "length")
            except ExtractError as err:
                raise GuardrailFailure(f"no valid decision after one corrective re-prompt ({err})", content2) from None
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


async def _server_info(client: httpx.AsyncClient, base: str) -> ServerInfo:
    cached = _models_cache.get(base)
    if cached and time.monotonic() - cached[0] < MODELS_CACHE_S:
        return cached[1]
    data = await _request(client, "GET", "/v1/models")
    items = data.get("data") if isinstance(data, dict) else None
    models = tuple(m["id"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("id"), str))
    if not models:
        raise ProviderUnavailable(f"{base}/v1/models lists no models")
    llamacpp = any(isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in items or [])
    info = ServerInfo(models, llamacpp)
    _models_cache[base] = (time.monotonic(), info)
    return info


async def _chat(
    client: httpx.AsyncClient, base: str, model: str, messages: list[dict], llamacpp: bool
) -> tuple[str, str | None, tuple[int, int]]:
    body: dict = {"model": model, "messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    if base not in _plain_only:
        if llamacpp:
            body["grammar"] = GBNF
        else:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "decision", "schema": DECISION_SCHEMA},
            }
    try:
        data = await _request(client, "POST", "/v1/chat/completions", body)
    except _BadRequest:
        if "grammar" not in body and "response_format" not in body:
            raise ProviderUnavailable("chat completions rejected a plain request (400)") from None
        _plain_only.add(base)  # the server rejects the constraint: plain prompting + the extractor
        body.pop("grammar", None)
        body.pop("response_format", None)
        data = await _request(client, "POST", "/v1/chat/completions", body)
    try:
        choice = data["choices"][0]
        content = choice["message"].get("content") or ""
        finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ProviderUnavailable("chat completions answered without choices[0].message") from None
    usage = data.get("usage") or {}
    prompt_t = int(usage.get("prompt_tokens") or 0)
    completion_t = int(usage.get("completion_tokens") or 0)
    if not usage:  # documented estimate: ~4 characters per token
        prompt_t = sum(len(m["content"]) for m in messages) // 4
        completion_t = len(content) // 4
    return content, finish, (prompt_t, completion_t)


class _BadRequest(Exception):
    pass


async def _request(client: httpx.AsyncClient, method: str, path: str, body: dict | None = None) -> dict:
    try:
        resp = await client.request(method, path, json=body)
    except httpx.TimeoutException as err:
        raise ProviderUnavailable(f"{path} timed out ({type(err).__name__})") from None
    except httpx.HTTPError as err:
        raise ProviderUnavailable(f"{path} unreachable ({type(err).__name__})") from None
    if resp.status_code in (401, 403):
        raise ProviderUnavailable(f"{path} refused the key ({resp.status_code})")
    if resp.status_code == 400:
        raise _BadRequest(resp.text[:200])
    if resp.status_code >= 300:
        raise ProviderUnavailable(f"{path} answered {resp.status_code}")
    try:
        return resp.json()
    except ValueError:
        raise ProviderUnavailable(f"{path} answered non-JSON") from None
