"""The team's codec as a codec server (Temporal's remote codec protocol, what the Web UI and `temporal`
CLI call with `--codec-endpoint`): POST /encode and /decode, JSON `{"payloads": [...]}` each way, on
127.0.0.1. `python codec_server.py --port 0` prints `listening 127.0.0.1:PORT`. With
`CODEC_SERVER_AUTH` set, a request must carry it as its Authorization header (else 401). The key is
codec.py's, under `CHECKPOINT_HOME`."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hmac
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from temporalio.api.common.v1 import Payload

from codec import EncryptionCodec

CODEC = EncryptionCodec()
MAX_BODY = 64 * 1024 * 1024


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        op = self.path.rstrip("/").rsplit("/", 1)[-1]
        wanted = os.environ.get("CODEC_SERVER_AUTH")
        if wanted and not hmac.compare_digest(self.headers.get("Authorization", "").encode(), wanted.encode()):
            return self._answer(401, {"error": "unauthorized"})
        length = int(self.headers.get("Content-Length") or 0)
        if op not in ("encode", "decode") or not 0 < length <= MAX_BODY:
            return self._answer(404 if op not in ("encode", "decode") else 400, {"error": "bad request"})
        try:
            doc = json.loads(self.rfile.read(length))
            payloads = [_payload(p) for p in doc["payloads"]]
            done = asyncio.run(CODEC.encode(payloads) if op == "encode" else CODEC.decode(payloads))
        except Exception as err:  # a payload it cannot read: the whole answer is an error, as such servers do
            return self._answer(400, {"error": type(err).__name__})
        self._answer(200, {"payloads": [_json(p) for p in done]})

    def _answer(self, status: int, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:  # quiet: the lab's tests read stdout
        return


def _payload(doc: dict) -> Payload:
    metadata = {k: base64.b64decode(v) for k, v in doc.get("metadata", {}).items()}
    return Payload(metadata=metadata, data=base64.b64decode(doc.get("data", "")))


def _json(p: Payload) -> dict:
    return {
        "metadata": {k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
        "data": base64.b64encode(p.data).decode(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8081)
    server = ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), Handler)
    print(f"listening 127.0.0.1:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
