"""The lab's side of a team's codec server (TEMPORAL_CODEC_ENDPOINT): a PayloadCodec on the lab's Temporal
client that POSTs payloads to `/encode` and `/decode`, as Temporal's Web UI and CLI do (JSON
`{"payloads": [{"metadata": {name: base64}, "data": base64}]}`, the namespace in `X-Namespace`, the
auth in `Authorization`). The payload converter stays Temporal's default (JSON): a codec server holds
the team's codec only.

The request goes to the endpoint and nowhere else: no redirect is followed (it would carry the auth
to another host), no proxy from the environment is used, and a whole answer must come within
TIMEOUT_S. What it does not make readable is kept, marked and counted (ops/codec_count.py); an
encode that fails is one line, and a refused credential is said as that (exit 2)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from checkpoint_tui.errors import Unavailable, UsageError
from checkpoint_tui.ops.codec_count import Counted
from checkpoint_tui.ops.remote_codec import RemoteCodec
from checkpoint_tui.settings.codec import CodecServer

TIMEOUT_S = 30.0  # a whole answer, not each read
BATCH = 256
MAX_ANSWER = 64 * 1024 * 1024
CHUNK = 1024 * 1024


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is an answer of its own (an error), never a request to elsewhere with the auth


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


class HttpCodec(Counted, PayloadCodec):
    def __init__(self, server: CodecServer, namespace: str) -> None:
        super().__init__()
        self.server, self.namespace = server, namespace

    def describe(self) -> str:
        return f"the codec server {self.server.label}"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for i in range(0, len(payloads), BATCH):
            answer, error, status = await asyncio.to_thread(self._post, "encode", payloads[i : i + BATCH])
            if answer is None:
                if status in (401, 403):
                    raise UsageError(
                        f"the codec server {self.server.label} refused the lab: {error} (TEMPORAL_CODEC_AUTH)"
                    )
                raise Unavailable(f"the codec server {self.server.label} cannot encode the input: {error}")
            out += answer
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for i in range(0, len(payloads), BATCH):
            batch = payloads[i : i + BATCH]
            answer, error, _ = await asyncio.to_thread(self._post, "decode", batch)
            back: Sequence[Payload | None] = answer if answer is not None else [None] * len(batch)
            out += self.checked(batch, back, [error] * len(batch))
        return out

    def _post(self, op: str, batch: Sequence[Payload]) -> tuple[list[Payload] | None, str | None, int | None]:
        """The server's payloads for the batch, or None, why (one line, no secret, no URL) and the status."""
        body = json.dumps({"payloads": [_to_json(p) for p in batch]}).encode()
        headers = {"Content-Type": "application/json", "X-Namespace": self.namespace}
        if self.server.auth:
            headers["Authorization"] = self.server.auth
        request = urllib.request.Request(f"{self.server.url}/{op}", data=body, headers=headers, method="POST")
        deadline = time.monotonic() + TIMEOUT_S
        try:
            with _OPENER.open(request, timeout=TIMEOUT_S) as answer:  # noqa: S310 (an http(s) URL, checked)
                raw = _read(answer, deadline)
        except urllib.error.HTTPError as err:
            return None, f"HTTP {err.code} from /{op}", err.code
        except Exception as err:  # never its text: a URL (and what it holds) can be in it
            return (
                None,
                f"/{op}: {type(err).__name__}" + (f" (errno {err.errno})" if isinstance(err, OSError) else ""),
                None,
            )
        try:
            doc = json.loads(raw) if raw is not None else None
            found = [_from_json(p) for p in doc["payloads"]] if isinstance(doc, dict) else None
        except (ValueError, RecursionError, KeyError, TypeError):
            found = None
        if found is None or len(found) != len(batch):
            return None, f"/{op} answered something that is not one payload per payload sent", None
        return found, None, None


def _read(answer: object, deadline: float) -> bytes | None:
    """The body, in chunks, by the deadline and within MAX_ANSWER; None past either."""
    chunks, size = [], 0
    while chunk := answer.read(CHUNK):  # type: ignore[attr-defined]
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER or time.monotonic() > deadline:
            return None
    return b"".join(chunks)


def _to_json(payload: Payload) -> dict:
    metadata = {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()}
    return {"metadata": metadata, "data": base64.b64encode(payload.data).decode()}


def _from_json(doc: object) -> Payload:
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata", {}), dict):
        raise ValueError("not a payload")
    metadata = {str(k): base64.b64decode(str(v), validate=True) for k, v in doc.get("metadata", {}).items()}
    return Payload(metadata=metadata, data=base64.b64decode(str(doc.get("data", "")), validate=True))


def said(client: object) -> tuple[str | None, int, str | None]:
    """What a client's team codec is (--data-converter's or a codec server's), the payloads it did not
    make readable and the first one's reason; (None, 0, None) for a client without one."""
    codec = getattr(getattr(client, "data_converter", None), "payload_codec", None)
    if not isinstance(codec, RemoteCodec | HttpCodec):
        return None, 0, None
    return codec.describe(), codec.undecodable, codec.first_error
