"""What a `--dependency` proxy forwarded, as effects (`--effects http:NAME:FIELD`): each HTTP/1.1 request
the dependency answered 2xx, identified by the request's header FIELD (case-insensitive) or, without one,
by FIELD of its JSON body, is one line of `run/dependency-NAME.log` (`{"id": ..., "status": 201}`).

The proxy stays a plain pipe: its bytes are also fed, in order, to two h11 parsers mirroring each other
(the requests as a server reads them, the answers as a client does). Whatever they cannot read (not
HTTP/1.1, a protocol error, an upgrade) ends the watching of that connection, never its forwarding.
Bounded: a request body is kept up to 64 KiB for its JSON field, an id to 1,000 characters, the log
to 64 MiB."""

from __future__ import annotations

import contextlib
import json
import os
from collections import deque
from pathlib import Path

import h11

MAX_BODY = 64 * 1024
MAX_ID = 1000
MAX_LOG = 64 * 1024 * 1024
_OPEN = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def log_path(run_dir: Path, name: str) -> Path:
    """Where the proxy of dependency `name` (an environment variable's name: a plain file name) logs."""
    return run_dir / f"dependency-{name}.log"


class HttpLog:
    """The log of one dependency's 2xx answers, shared by its connections."""

    def __init__(self, path: Path, field: str) -> None:
        self.path, self.field = path, field.lower()
        self.logged = 0

    def exchange(self) -> Exchange:
        return Exchange(self)

    def answered(self, headers: list[tuple[bytes, bytes]], body: bytes, status: int) -> None:
        if not 200 <= status < 300 or (key := self._id(headers, body)) is None:
            return
        line = (json.dumps({"id": key[:MAX_ID], "status": status}) + "\n").encode()
        with contextlib.suppress(OSError):  # a log that cannot be written proves nothing: the reading says so
            if self.path.exists() and self.path.stat().st_size + len(line) > MAX_LOG:
                return
            fd = os.open(self.path, _OPEN, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            self.logged += 1

    def _id(self, headers: list[tuple[bytes, bytes]], body: bytes) -> str | None:
        for name, value in headers:
            if name.decode("latin-1").lower() == self.field:
                return value.decode("utf-8", "replace")
        try:
            doc = json.loads(body) if body else None
        except (ValueError, RecursionError):
            return None
        if isinstance(doc, dict):
            for k, v in doc.items():
                if k.lower() == self.field and isinstance(v, str | int | float) and not isinstance(v, bool):
                    return str(v)
        return None


class Exchange:
    """One connection watched: requests in order, each matched with its answer."""

    def __init__(self, log: HttpLog) -> None:
        self.log = log
        self.requests = h11.Connection(h11.SERVER)  # reads what the caller sends
        self.answers = h11.Connection(h11.CLIENT)  # reads what the dependency sends back
        self.pending: deque[tuple[list, bytes]] = deque()  # requests read, not answered yet
        self._head: list | None = None
        self._body = b""
        self._status: int | None = None
        self.broken = False

    def up(self, data: bytes) -> None:
        self._feed(self._up, data)

    def down(self, data: bytes) -> None:
        self._feed(self._down, data)

    def _feed(self, step, data: bytes) -> None:
        if self.broken:
            return
        try:
            step(data)
        except (h11.ProtocolError, ValueError, TypeError, RuntimeError):
            self.broken = True  # not HTTP/1.1 as h11 reads it: forwarded, no longer watched

    def _up(self, data: bytes) -> None:
        self.requests.receive_data(data)
        self._read_requests()

    def _read_requests(self) -> None:
        while (ev := self.requests.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
            if isinstance(ev, h11.Request):
                self._head, self._body = list(ev.headers), b""
                # mirrored to the answers' parser (no body: only the answer's framing matters there)
                self.answers.send(h11.Request(method=ev.method, target=ev.target, headers=[(b"host", b"dependency")]))
                self.answers.send(h11.EndOfMessage())
            elif isinstance(ev, h11.Data) and len(self._body) < MAX_BODY:
                self._body += bytes(ev.data)[: MAX_BODY - len(self._body)]
            elif isinstance(ev, h11.EndOfMessage):
                self.pending.append((self._head or [], self._body))
            elif isinstance(ev, h11.ConnectionClosed):
                return

    def _down(self, data: bytes) -> None:
        self.answers.receive_data(data)
        while (ev := self.answers.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
            if isinstance(ev, h11.Response):
                self._status = ev.status_code
            elif isinstance(ev, h11.EndOfMessage):
                head, body = self.pending.popleft() if self.pending else ([], b"")
                self.log.answered(head, body, self._status or 0)
                self._next_cycle()
            elif isinstance(ev, h11.ConnectionClosed):
                return

    def _next_cycle(self) -> None:
        """Both parsers on to the next request of a kept-alive connection (an answer mirrored back to the
        requests' parser), then any request the caller pipelined meanwhile."""
        self.requests.send(h11.Response(status_code=200, headers=[(b"content-length", b"0")]))
        self.requests.send(h11.EndOfMessage())
        self.requests.start_next_cycle()
        self.answers.start_next_cycle()
        self._read_requests()
