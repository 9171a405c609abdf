"""A small stand-in for an OpenAI-compatible model server, on a free loopback port (tests only).

Besides well-formed answers it can be hostile: a `Raw` reply is sent byte for byte (any status,
body, headers, with or without Content-Length, optionally one byte at a time)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE = {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
_DEFAULT = object()


@dataclass(frozen=True)
class Raw:
    """A reply sent as is."""

    body: bytes
    status: int = 200
    every_s: float = 0.0  # > 0: a trickle, one byte every `every_s` seconds
    length: bool = True  # False: no Content-Length, the body ends when the connection closes
    headers: tuple[tuple[str, str], ...] = ()


def completion(content: object, finish: object = "stop", usage: object = _DEFAULT, **choice: object) -> dict:
    """A chat completion body whose fields may be anything (`usage=None` leaves usage out)."""
    body: dict = {
        "id": "x",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish, **choice}
        ],
    }
    if usage is _DEFAULT:
        body["usage"] = USAGE
    elif usage is not None:
        body["usage"] = usage
    return body


def as_json(obj: object, **raw: object) -> Raw:
    """`obj` as JSON (ASCII: a lone surrogate travels as an escape, as a real server would send it)."""
    return Raw(json.dumps(obj).encode(), **raw)  # type: ignore[arg-type]


class StandIn:
    def __init__(self) -> None:
        self.models: list[dict] = [{"id": "stand-in-model", "owned_by": "test"}]
        self.models_status = 200
        self.models_replies: list[Raw] = []  # sent (in order) before the normal /v1/models answer
        self.chat_status = 200
        # (content, finish_reason) or a Raw, consumed in order; the last one repeats
        self.replies: list[tuple[str, str] | Raw] = []
        self.hang_s = 0.0
        self.reject_constraints = False
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply(self, *contents: str | Raw, finish: str = "stop") -> None:
        with self._lock:
            self.replies = [c if isinstance(c, Raw) else (c, finish) for c in contents]

    def chats(self) -> list[dict]:
        return [r for r in self.requests if r["path"] == "/v1/chat/completions"]

    def _next_reply(self) -> tuple[str, str] | Raw:
        with self._lock:
            if len(self.replies) > 1:
                return self.replies.pop(0)
            if self.replies:
                return self.replies[0]
        return ('{"action":"note","args":{"text":"hi"},"thought":"t"}', "stop")

    def _next_models_reply(self) -> Raw | None:
        with self._lock:
            return self.models_replies.pop(0) if self.models_replies else None

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                self._send_raw(Raw(json.dumps(body).encode(), status))

            def _send_raw(self, raw: Raw) -> None:
                try:
                    self.send_response(raw.status)
                    self.send_header("Content-Type", "application/json")
                    if raw.length:
                        self.send_header("Content-Length", str(len(raw.body)))
                    for name, value in raw.headers:
                        self.send_header(name, value)
                    self.end_headers()
                    if raw.every_s <= 0:
                        self.wfile.write(raw.body)
                        return
                    for i in range(len(raw.body)):
                        self.wfile.write(raw.body[i : i + 1])
                        time.sleep(raw.every_s)
                except OSError:
                    pass  # the client gave up on us (for a hostile reply, that is the point)

            def do_GET(self) -> None:
                standin.requests.append({"path": self.path, "auth": self.headers.get("Authorization")})
                if self.path != "/v1/models":
                    return self._send(404, {"error": "not found"})
                if standin.hang_s:
                    time.sleep(standin.hang_s)
                scripted = standin._next_models_reply()
                if scripted is not None:
                    return self._send_raw(scripted)
                if standin.models_status != 200:
                    return self._send(standin.models_status, {"error": "refused"})
                self._send(200, {"object": "list", "data": standin.models})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                standin.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if standin.models_status in (401, 403):  # a refused key is refused everywhere
                    return self._send(standin.models_status, {"error": "refused"})
                if standin.chat_status != 200:
                    return self._send(standin.chat_status, {"error": "nope"})
                if standin.reject_constraints and ("response_format" in body or "grammar" in body):
                    return self._send(400, {"error": "response_format not supported"})
                answer = standin._next_reply()
                if isinstance(answer, Raw):
                    return self._send_raw(answer)
                content, finish = answer
                self._send(200, {**completion(content, finish), "model": body.get("model")})

        return Handler
