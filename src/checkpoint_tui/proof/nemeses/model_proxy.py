"""The model-fault nemesis: an HTTP proxy on loopback in front of an agent's model endpoint, named with
`--model-endpoint NAME=URL`; the workers get NAME pointing at the proxy (the URL's path kept).

Between faults it passes every request on as it came and every answer back as it comes (a stream
piece by piece). While a fault is in force (model_faults.py), for a number of requests or a while,
each request meets it: 429 with Retry-After, 500 or 503, no answer until the fault ends (then the
connection closes), each piece of the answer delayed, the answer closed midway, or its tool calls'
arguments made not JSON. Every request is recorded (`Exchange`): when, the fault it met, the status,
how long it took, the tokens the server reported. Bodies are not kept (they hold the user's prompts),
nor headers (the API key travels in one), and nothing of either is logged.

Bounds: a request's head 64 KiB and body 8 MiB (else 413 and the connection closes); the upstream is
given 10 s to connect and 300 s between two pieces of an answer; the record keeps the last 10,000.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import h11
import httpx

from checkpoint_tui.proof.nemeses.model_faults import (
    CUT,
    ERROR,
    GARBAGE,
    RATE_LIMIT,
    SLOW,
    TIMEOUT,
    Fault,
    garble_body,
    garble_event,
    usage_of_body,
    usage_of_event,
)

MAX_HEAD = 64 << 10
MAX_BODY = 8 << 20
CHUNK = 64 << 10
KEPT = 10_000
HOLD_MAX_S = 300.0  # model-timeout: a request nobody gives up on is closed after this
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "content-encoding",
        "accept-encoding",
    }
)
_HOP_BYTES = frozenset(h.encode() for h in HOP_BY_HOP)
_ERRORS = {
    RATE_LIMIT: (429, "rate_limit_exceeded", "Rate limit reached (checkpoint-tui model-rate-limit)"),
    ERROR: (503, "server_error", "The server is overloaded (checkpoint-tui model-error)"),
}


@dataclass(frozen=True)
class Exchange:
    """One request as the proxy answered it."""

    at: float  # wall time it came
    path: str
    fault: str | None  # the fault it met; None: passed on
    status: int | None  # the status the agent got; None: no answer (held, or cut before the head)
    seconds: float
    prompt_tokens: int | None = None  # as the server reported them (None: it did not, or never answered)
    completion_tokens: int | None = None
    garbled: int = 0  # tool calls whose arguments were made not JSON

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class ModelProxy:
    def __init__(self, name: str, upstream: str) -> None:
        """`upstream`: the endpoint's base URL, checked by model_faults.parse_endpoint."""
        self.name = name
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path.rstrip("/")
        self.url: str | None = None  # what the workers get as NAME
        self.exchanges: list[Exchange] = []
        self.faults: dict[str, int] = {}  # fault kind -> times it was put in force
        self._fault: Fault | None = None
        self._left: int | None = None  # requests the fault in force still meets (None: until it ends)
        self._met = asyncio.Event()  # the fault met its last request
        self._released = asyncio.Event()  # a fault ended: requests it held (model-timeout) close now
        self._holding = 0
        self._server: asyncio.base_events.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        timeout = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=60.0)
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False)
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}{self.base_path}"
        return self.url

    async def fault(self, fault: Fault, requests: int | None = None, duration_s: float | None = None) -> None:
        """Put `fault` in force for its next `requests` requests (bounded by `duration_s` if given too),
        or for `duration_s` seconds; then pass requests on again (also if cancelled)."""
        if requests is None and duration_s is None:
            raise ValueError("a model fault lasts a number of requests or a duration")
        if (requests is not None and requests < 1) or (duration_s is not None and duration_s < 0):
            raise ValueError("a model fault's requests are 1 or more and its duration not negative")
        if self._fault is not None:
            raise RuntimeError(f"model endpoint {self.name} is already under {self._fault.kind}")
        self.faults[fault.kind] = self.faults.get(fault.kind, 0) + 1
        self._fault, self._left = fault, requests
        self._met.clear()
        self._released.clear()
        deadline = time.monotonic() + duration_s if duration_s is not None else None
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._met.wait(), duration_s)
            # a request held by model-timeout waits for the agent to give up, not for the count to be met
            while self._holding and (deadline is None or time.monotonic() < deadline):
                await asyncio.sleep(0.05)  # a handful of held requests, each ended by its agent or HOLD_MAX_S
        finally:
            self._fault, self._left = None, None
            self._released.set()

    def stats(self) -> dict[str, object]:
        met: dict[str, int] = {}
        for e in self.exchanges:
            if e.fault is not None:
                met[e.fault] = met.get(e.fault, 0) + 1
        return {
            "name": self.name,
            "url": self.url,
            "requests": len(self.exchanges),
            "faults": dict(self.faults),
            "met": met,
        }

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def _take(self) -> Fault | None:
        """The fault the request now coming meets (counted against its requests)."""
        fault = self._fault
        if fault is None:
            return None
        if self._left is not None:
            self._left -= 1
            if self._left <= 0:
                self._fault = None  # the next request passes
                self._met.set()
        return fault

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while (got := await self._request(conn, reader, writer)) is not None:
                if not await self._answer(conn, reader, writer, *got) or conn.our_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.transport.abort()

    async def _request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        request, body = None, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(CHUNK))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    self._send(conn, writer, 413, b'{"error": {"message": "request body over 8 MiB"}}')
                    return None
            elif isinstance(event, h11.EndOfMessage) and request is not None:
                return request, bytes(body)
            else:  # ConnectionClosed, PAUSED
                return None

    async def _answer(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        req: h11.Request,
        body: bytes,
    ) -> bool:
        """Answer one request; False once the connection must close."""
        at, began = time.time(), time.monotonic()
        path = req.target.decode("ascii", "replace")[:200]
        fault = self._take()
        kind = fault.kind if fault is not None else None
        if fault is not None and fault.kind in _ERRORS:
            status, code, message = _ERRORS[fault.kind]
            status = fault.status if fault.kind == ERROR else status
            extra = [(b"retry-after", str(fault.retry_after_s).encode())] if fault.kind == RATE_LIMIT else []
            self._send(conn, writer, status, _error(code, message), extra)
            await writer.drain()
            self._note(Exchange(at, path, kind, status, time.monotonic() - began))
            return True
        if fault is not None and fault.kind == TIMEOUT:
            await self._hold(reader)
            self._note(Exchange(at, path, kind, None, time.monotonic() - began))
            return False
        if not path.startswith("/"):
            self._send(conn, writer, 400, _error("bad_request", "only origin-form request targets"))
            return False
        return await self._forward(conn, writer, req, body, fault, at, began, path)

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """No answer: until the agent gives up (closes its connection), the fault ends, or HOLD_MAX_S."""
        self._holding += 1
        gave_up = asyncio.ensure_future(reader.read(1))  # b"" (or an error) once the agent closes
        released = asyncio.ensure_future(self._released.wait())
        try:
            await asyncio.wait([gave_up, released], timeout=HOLD_MAX_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._holding -= 1
            gave_up.cancel()
            released.cancel()

    async def _forward(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        req: h11.Request,
        body: bytes,
        fault: Fault | None,
        at: float,
        began: float,
        path: str,
    ) -> bool:
        assert self._client is not None
        kind = fault.kind if fault is not None else None
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers if k.lower() not in _HOP_BYTES]
        headers.append(("accept-encoding", "identity"))
        outgoing = self._client.build_request(req.method.decode(), self.origin + path, headers=headers, content=body)
        try:
            resp = await self._client.send(outgoing, stream=True)
        except httpx.HTTPError:
            self._send(conn, writer, 502, _error("bad_gateway", f"model endpoint {self.name} did not answer"))
            self._note(Exchange(at, path, kind, 502, time.monotonic() - began))
            return True
        relay = _Relay(fault, resp.headers.get("content-type", "").startswith("text/event-stream"))
        try:
            head = [(k.encode(), v.encode()) for k, v in resp.headers.multi_items() if k.lower() not in HOP_BY_HOP]
            writer.write(conn.send(h11.Response(status_code=resp.status_code, headers=head)))
            whole = not relay.stream and kind in (GARBAGE, CUT)  # rewritten or cut as one body
            pieces = [await _read_all(resp)] if whole else resp.aiter_bytes()
            async for piece in _iterate(pieces):
                out = relay.rewrite(piece)
                if kind == SLOW:
                    assert fault is not None
                    await asyncio.sleep(fault.delay_ms / 1000)
                if kind == CUT:  # half of a whole answer, or a stream's first piece: then the connection drops
                    writer.write(conn.send(h11.Data(data=out[: max(1, len(out) // 2)] if whole else out)))
                    await writer.drain()
                    raise _Cut
                if out:
                    writer.write(conn.send(h11.Data(data=out)))
                    await writer.drain()
            if rest := relay.flush():
                writer.write(conn.send(h11.Data(data=rest)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            return True
        except _Cut:
            return False
        finally:
            await resp.aclose()
            prompt, completion = relay.usage or (None, None)
            status = resp.status_code
            self._note(Exchange(at, path, kind, status, time.monotonic() - began, prompt, completion, relay.garbled))

    def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, body: bytes, extra: list | None = None
    ) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))

    def _note(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)
        del self.exchanges[:-KEPT]


class _Cut(Exception):
    """model-cut: the answer stops here and the connection drops."""


class _Relay:
    """An answer on its way back: its tool calls garbled (model-garbage), its usage read. A stream is
    rewritten line by line (an event's `data:` line may come split over pieces)."""

    def __init__(self, fault: Fault | None, stream: bool) -> None:
        self.garble = fault is not None and fault.kind == GARBAGE
        self.stream = stream
        self.usage: tuple[int, int] | None = None
        self.garbled = 0
        self._partial = b""
        self._body = bytearray()  # a whole answer's bytes, for its usage (up to MAX_BODY)
        self._done: set[str] = set()

    def rewrite(self, piece: bytes) -> bytes:
        if not self.stream:
            if len(self._body) <= MAX_BODY:
                self._body += piece
            if self.garble:
                piece, self.garbled = garble_body(piece)
            return piece
        lines = (self._partial + piece).split(b"\n")
        self._partial = lines.pop()  # an unfinished line waits for the next piece
        if len(self._partial) > MAX_BODY:  # a line that never ends is passed on, unread
            lines.append(self._partial)
            self._partial = b""
        out = []
        for line in lines:
            if line.startswith(b"data:"):
                data = line[5:].strip()
                self.usage = usage_of_event(data) or self.usage
                if self.garble:
                    new, n = garble_event(data, self._done)
                    self.garbled += n
                    line = b"data: " + new if n else line
            out.append(line + b"\n")
        return b"".join(out)

    def flush(self) -> bytes:
        """The end of the answer: a whole one's usage read; a stream's last line, if it had no newline."""
        if not self.stream:
            self.usage = usage_of_body(bytes(self._body)) if len(self._body) <= MAX_BODY else None
            return b""
        rest, self._partial = self._partial, b""
        return self.rewrite(rest + b"\n")[:-1] if rest else b""


async def _read_all(resp: httpx.Response) -> bytes:
    body = bytearray()
    async for piece in resp.aiter_bytes():
        body += piece
        if len(body) > MAX_BODY:
            break
    return bytes(body)


async def _iterate(pieces: list[bytes] | AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if isinstance(pieces, list):
        for piece in pieces:
            yield piece
    else:
        async for piece in pieces:
            yield piece


def _error(code: str, message: str) -> bytes:
    """An error body as OpenAI-compatible servers send one."""
    import json

    return json.dumps({"error": {"message": message, "type": code, "code": code}}).encode()
