"""A stand-in mail API, the fleet's dependency: `python examples/fleet/mail_api.py --port 8025 --log receipts.jsonl`.

Listens on 127.0.0.1 only (`--port 0`: a free port) and prints `listening 127.0.0.1:PORT` once it
accepts connections; SIGTERM or SIGINT stops it.
- POST /receipts, with an `Idempotency-Key` header (percent-encoded) and a body of at most 64 KiB:
  every request is logged as one JSON line `{"key": ..., "body": ...}` (fsynced before the answer)
  and counted, a repeated key too. A real provider would deliver a repeated key once; this one
  counts it, so that a duplicate send shows. Answers `{"key": ..., "seen": <posts of that key>}`.
- GET /count: `{"<key>": <posts>, ...}`. GET /health: `{"ok": true}`.
Restarted on the same log, it counts on from what the log holds."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

HOST = "127.0.0.1"
BODY_LIMIT = 64 * 1024  # a receipt is a few dozen bytes
KEY_LIMIT = 3 * 1024  # percent-encoded: the effects library's keys are at most ~600 characters
REQUEST_TIMEOUT_S = 5.0  # a client that stops sending mid-request gives its thread back


class Receipts:
    """The log and the counts, one writer at a time."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock, self.counts = path, threading.Lock(), Counter[str]()
        if path.exists():
            with path.open("rb") as fh:
                for line in fh:
                    key = _key_of(line)
                    if isinstance(key, str):
                        self.counts[key] += 1

    def record(self, key: str, body: str) -> int:
        line = (json.dumps({"key": key, "body": body}, sort_keys=True) + "\n").encode("utf-8")
        with self.lock:
            with self.path.open("ab") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            self.counts[key] += 1
            return self.counts[key]

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counts)


def _key_of(line: bytes) -> object:
    try:
        return json.loads(line).get("key")
    except (ValueError, AttributeError):  # a torn last line (killed mid-write) or a foreign one
        return None


class MailServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client never holds the exit

    def __init__(self, port: int, receipts: Receipts, delay_s: float = 0.0) -> None:
        super().__init__((HOST, port), Handler)
        self.receipts, self.delay_s = receipts, delay_s


class Handler(BaseHTTPRequestHandler):
    server: MailServer
    timeout = REQUEST_TIMEOUT_S
    protocol_version = "HTTP/1.0"  # one request per connection: nothing to keep alive

    def do_POST(self) -> None:
        if self.path != "/receipts":
            return self.answer(404, {"error": "POST /receipts"})
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit()):
            return self.answer(411, {"error": "a Content-Length is required"})
        if len(length) > 6 or int(length) > BODY_LIMIT:
            return self.answer(413, {"error": f"a receipt is at most {BODY_LIMIT} bytes"})
        key = self.headers.get("Idempotency-Key", "")
        if not key or len(key) > KEY_LIMIT:
            return self.answer(400, {"error": f"an Idempotency-Key of 1..{KEY_LIMIT} characters is required"})
        body = self.rfile.read(int(length))
        if len(body) != int(length):
            return self.answer(400, {"error": "the body ended early"})
        key = unquote(key)
        time.sleep(self.server.delay_s)  # a slow service: a send takes this long before it is recorded
        seen = self.server.receipts.record(key, body.decode("utf-8", "replace"))
        return self.answer(200, {"key": key, "seen": seen})

    def do_GET(self) -> None:
        if self.path == "/count":
            return self.answer(200, self.server.receipts.snapshot())
        if self.path == "/health":
            return self.answer(200, {"ok": True})
        return self.answer(404, {"error": "GET /count or /health"})

    def answer(self, status: int, doc: object) -> None:
        data = json.dumps(doc).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: every receipt is in the log, and stdout carries only the `listening` line."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8025, help="the port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--log", type=Path, default=Path("mail-api.jsonl"), help="where every POST is logged")
    parser.add_argument("--delay-ms", type=int, default=0, help="answer each POST this much later (0..10000)")
    args = parser.parse_args()
    if not 0 <= args.port < 65536:
        parser.error("--port must be 0..65535")
    if not 0 <= args.delay_ms <= 10_000:
        parser.error("--delay-ms must be 0..10000")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # SystemExit out of serve_forever: a clean close
    try:
        server = MailServer(args.port, Receipts(args.log), args.delay_ms / 1000)
    except OSError as err:
        sys.exit(f"mail_api: cannot listen on {HOST}:{args.port}: {err.strerror or err}")
    with server:
        print(f"listening {HOST}:{server.server_address[1]}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # SIGINT
            server.serve_forever()


if __name__ == "__main__":
    main()
