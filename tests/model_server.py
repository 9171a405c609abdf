"""A small stand-in for an OpenAI-compatible model server, on a free loopback port (tests only)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    def __init__(self) -> None:
        self.models: list[dict] = [{"id": "stand-in-model", "owned_by": "test"}]
        self.models_status = 200
        self.chat_status = 200
        self.replies: list[tuple[str, str]] = []  # (content, finish_reason), consumed in order; last repeats
        self.hang_s = 0.0
        self.reject_constraints = False
        self.requests: list[dict] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply(self, *contents: str, finish: str = "stop") -> None:
        self.replies = [(c, finish) for c in contents]

    def _next_reply(self) -> tuple[str, str]:
        if len(self.replies) > 1:
            return self.replies.pop(0)
        return self.replies[0] if self.replies else ('{"action":"note","args":{"text":"hi"},"thought":"t"}', "stop")

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                standin.requests.append({"path": self.path, "auth": self.headers.get("Authorization")})
                if self.path != "/v1/models":
                    return self._send(404, {"error": "not found"})
                if standin.hang_s:
                    time.sleep(standin.hang_s)
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
                content, finish = standin._next_reply()
                self._send(
                    200,
                    {
                        "id": "x",
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
                        ],
                        "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
                    },
                )

        return Handler
