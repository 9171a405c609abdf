"""The lab's side of a team's codec server (TEMPORAL_CODEC_ENDPOINT): a PayloadCodec on the lab's Temporal
client that POSTs payloads to `/encode` and `/decode`, as Temporal's Web UI and CLI do (JSON
`{"payloads": [{"metadata": {name: base64}, "data": base64}]}`, the namespace in `X-Namespace`, the
auth in `Authorization`). The payload converter stays Temporal's default (JSON): a codec server holds
the team's codec only.

What it cannot decode (an error answer, a malformed one) is kept and marked `binary/undecodable` with
the reason, as ops/remote_codec.py does; an encode that fails is one line."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request
from collections.abc import Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops.remote_codec import RemoteCodec, mark_undecodable
from checkpoint_tui.settings.codec import CodecServer

TIMEOUT_S = 30.0
BATCH = 256
MAX_ANSWER = 64 * 1024 * 1024


class HttpCodec(PayloadCodec):
    def __init__(self, server: CodecServer, namespace: str) -> None:
        self.server, self.namespace = server, namespace
        self.undecodable = 0
        self.first_error: str | None = None

    def describe(self) -> str:
        return f"the codec server {self.server.label}"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for i in range(0, len(payloads), BATCH):
            answer, error = await asyncio.to_thread(self._post, "encode", payloads[i : i + BATCH])
            if answer is None:
                raise Unavailable(f"codec server {self.server.label}: cannot encode the input: {error}")
            out += answer
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out: list[Payload] = []
        for i in range(0, len(payloads), BATCH):
            batch = payloads[i : i + BATCH]
            answer, error = await asyncio.to_thread(self._post, "decode", batch)
            if answer is None:
                self.undecodable += len(batch)
                self.first_error = self.first_error or error
                answer = [mark_undecodable(p, error or "no answer") for p in batch]
            out += answer
        return out

    def _post(self, op: str, batch: Sequence[Payload]) -> tuple[list[Payload] | None, str | None]:
        """The server's payloads for the batch, or None and why (one line, no secret in it)."""
        body = json.dumps({"payloads": [_to_json(p) for p in batch]}).encode()
        headers = {"Content-Type": "application/json", "X-Namespace": self.namespace}
        if self.server.auth:
            headers["Authorization"] = self.server.auth
        request = urllib.request.Request(f"{self.server.url}/{op}", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310 (http(s) checked)
                raw = answer.read(MAX_ANSWER + 1)
        except urllib.error.HTTPError as err:
            return None, f"HTTP {err.code} from /{op}"
        except (OSError, ValueError) as err:
            return None, f"/{op}: {type(err).__name__}: {' '.join(str(err).split())[:160]}"
        try:
            doc = json.loads(raw) if len(raw) <= MAX_ANSWER else None
            found = [_from_json(p) for p in doc["payloads"]] if isinstance(doc, dict) else None
        except (ValueError, RecursionError, KeyError, TypeError):
            found = None
        if found is None or len(found) != len(batch):
            return None, f"/{op} answered something that is not one payload per payload sent"
        return found, None


def _to_json(payload: Payload) -> dict:
    metadata = {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()}
    return {"metadata": metadata, "data": base64.b64encode(payload.data).decode()}


def _from_json(doc: object) -> Payload:
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata", {}), dict):
        raise ValueError("not a payload")
    metadata = {str(k): base64.b64decode(str(v), validate=True) for k, v in doc.get("metadata", {}).items()}
    return Payload(metadata=metadata, data=base64.b64decode(str(doc.get("data", "")), validate=True))


def said(client: object) -> tuple[str | None, int, str | None]:
    """What a client's team codec is (--data-converter's or a codec server's), the payloads it could not
    read and the first one's error; (None, 0, None) for a client without one."""
    codec = getattr(getattr(client, "data_converter", None), "payload_codec", None)
    if not isinstance(codec, RemoteCodec | HttpCodec):
        return None, 0, None
    return codec.describe(), codec.undecodable, codec.first_error
