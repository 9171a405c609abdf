"""One HTTP exchange with a model server we do not trust: a total deadline, a size cap, JSON objects only.

Every way the exchange can go wrong ends in ProviderUnavailable (the caller falls back to the offline
provider and records the reason) — never in another exception type. The reasons are our own words:
nothing the server sent is echoed into them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from checkpoint_tui.model.answer import ProviderUnavailable

CONNECT_TIMEOUT_S = 2.0
MAX_BODY_BYTES = 1_000_000  # an answer is a few kB; a server sending more is not answering


class BadRequest(ProviderUnavailable):
    """The server answered 400: for a constrained chat request the caller retries without the constraint."""


def timeouts(deadline_s: float) -> httpx.Timeout:
    """httpx's per-phase timeouts; request_json's deadline bounds the whole exchange on top of them."""
    return httpx.Timeout(
        connect=min(CONNECT_TIMEOUT_S, deadline_s),
        read=deadline_s,
        write=deadline_s,
        pool=min(CONNECT_TIMEOUT_S, deadline_s),
    )


def encode(body: dict) -> bytes:
    """ASCII JSON: a lone surrogate in text we send back (the model's own answer) is escaped, not fatal."""
    return json.dumps(body, ensure_ascii=True, allow_nan=False).encode()


async def request_json(
    client: httpx.AsyncClient, method: str, path: str, deadline_s: float, body: dict | None = None
) -> dict[str, Any]:
    """`method path` answered within `deadline_s` from connect to last byte (a server trickling one
    byte at a time never resets it), at most MAX_BODY_BYTES, as a JSON object."""
    headers = {"Accept-Encoding": "identity"}  # no decompression bombs: the cap counts what we hold
    content = None
    if body is not None:
        content = encode(body)
        headers["Content-Type"] = "application/json"
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(method, path, content=content, headers=headers) as resp:
                _check_status(resp, path)
                raw = await _read_capped(resp, path)
    except TimeoutError:
        raise ProviderUnavailable(f"{path} timed out (no complete answer within {deadline_s:g} s)") from None
    except httpx.TimeoutException as err:
        raise ProviderUnavailable(f"{path} timed out ({type(err).__name__})") from None
    except httpx.ConnectError as err:
        raise ProviderUnavailable(f"{path} unreachable ({type(err).__name__})") from None
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError, ValueError) as err:
        raise ProviderUnavailable(f"{path} failed ({type(err).__name__})") from None
    return await asyncio.to_thread(_parse, raw, path)


def _check_status(resp: httpx.Response, path: str) -> None:
    status = resp.status_code
    if status in (401, 403):
        raise ProviderUnavailable(f"{path} refused the key ({status})")
    if status == 400:
        raise BadRequest(f"{path} answered 400")
    if not 200 <= status < 300:  # redirects are not followed: the key goes to the configured URL only
        raise ProviderUnavailable(f"{path} answered {status}")
    if resp.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        raise ProviderUnavailable(f"{path} answered a compressed body (we ask for identity)")


async def _read_capped(resp: httpx.Response, path: str) -> bytes:
    too_big = ProviderUnavailable(f"{path} answered more than {MAX_BODY_BYTES} bytes")
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise too_big
    body = bytearray()
    async for chunk in resp.aiter_raw():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise too_big
    return bytes(body)


def _parse(raw: bytes, path: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # bad UTF-8, bad JSON, huge integers, deep nesting
        raise ProviderUnavailable(f"{path} answered non-JSON") from None
    if not isinstance(data, dict):
        raise ProviderUnavailable(f"{path} answered JSON that is not an object")
    return data
