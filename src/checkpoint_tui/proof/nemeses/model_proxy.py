"""The model-fault nemesis: an HTTP proxy on loopback in front of an agent's model endpoint, named with
`--model-endpoint NAME=URL`; the workers get NAME pointing at the proxy (the URL's path kept).

Between faults it passes every request on as it came and every answer back as it comes (a stream
piece by piece). While a fault is in force (model_faults.py), for a number of requests or a while,
each request that comes meets it: 429 with Retry-After, 500 or 503, no answer until the fault ends
(then the connection closes), each piece of the answer delayed, the answer closed midway, or its tool
calls' arguments made not JSON. Every request is recorded (`Exchange`): when, the fault it met, the
status, whether the answer broke off, how long it took, the tokens the endpoint reported. Bodies are
not kept (they hold the user's prompts), nor headers (the API key travels in one), nor the query.

Bounds: 256 connections at once; a request's head 64 KiB, its body 8 MiB (else 413), 300 s for the
next request on an idle connection; the endpoint is given 10 s to connect and 300 s between two
pieces of an answer; an answer over 8 MiB that a fault would rewrite whole is passed on as it is; the
record keeps the last 50,000 requests (counts are kept whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

import h11
import httpx

from checkpoint_tui.proof.nemeses.model_faults import CUT, ERROR, RATE_LIMIT, SLOW, TIMEOUT, Fault
from checkpoint_tui.proof.nemeses.model_relay import MAX_BODY, Relay, pieces

MAX_HEAD = 64 << 10
MAX_CONNECTIONS = 256
IDLE_S = 300.0
CHUNK = 64 << 10
KEPT = 50_000
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


def mark(kind: str) -> str:
    """How the proxy's own error messages name their fault (an audit reads it back: model_outcome.py)."""
    return f"(checkpoint-tui {kind})"


MARKED = re.compile(r"\(checkpoint-tui (model-[a-z-]+)\)")  # mark()'s, read back
_ERRORS = {
    RATE_LIMIT: (429, "rate_limit_exceeded", f"Rate limit reached {mark(RATE_LIMIT)}"),
    ERROR: (503, "server_error", f"The server is overloaded {mark(ERROR)}"),
}


@dataclass(frozen=True)
class Exchange:
    """One request as the proxy answered it."""

    at: float  # wall time it came
    path: str  # without its query
    fault: str | None  # the fault it met; None: passed on
    status: int | None  # the status the agent got; None: no answer at all (held, or the endpoint never answered)
    seconds: float
    prompt_tokens: int | None = None  # as the endpoint reported them (None: it did not, or never answered)
    completion_tokens: int | None = None
    garbled: int = 0  # tool calls whose arguments were made not JSON
    broken: bool = False  # the answer broke off (cut by the fault, or the endpoint failed midway)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @property
    def usable(self) -> bool:
        """An answer the agent could use: passed on whole, 2xx."""
        return self.fault is None and not self.broken and 200 <= (self.status or 0) < 300


@dataclass(frozen=True)
class Spell:
    """What fault() reports of a fault once it is over."""

    met: int  # requests that met it
    stopped: float  # wall time it stopped meeting requests (its last request, or the end of its time)


class ModelProxy:
    def __init__(self, name: str, upstream: str) -> None:
        """`upstream`: the endpoint's base URL, checked by model_faults.parse_endpoint."""
        self.name = name
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path.rstrip("/")
        self.url: str | None = None  # what the workers get as NAME
        self.exchanges: list[Exchange] = []  # the last KEPT, in the order they were answered
        self.total = 0  # requests answered, ever
        self.faults: dict[str, int] = {}  # fault kind -> times it was put in force
        self.met: dict[str, int] = {}  # fault kind -> requests that met it, ever
        self._fault: Fault | None = None
        self._busy = False  # a fault() is running (its fault may already have met its last request)
        self._left: int | None = None  # requests the fault in force still meets (None: until it ends)
        self._spell_met = 0
        self._stopped: float | None = None
        self._all_met = asyncio.Event()
        self._released = asyncio.Event()  # a fault ended: requests it held (model-timeout) close now
        self._holding = 0
        self._server: asyncio.base_events.Server | None = None
        self._client: httpx.AsyncClient | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        timeout = httpx.Timeout(connect=10.0, read=300.0, write=60.0, pool=60.0)
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False)
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}{self.base_path}"
        return self.url

    async def fault(self, fault: Fault, requests: int | None = None, duration_s: float | None = None) -> Spell:
        """Put `fault` in force for its next `requests` requests (within `duration_s` if given too), or
        for `duration_s` seconds; then pass requests on again (also if cancelled). A request model-timeout
        holds is held until its agent gives up, the duration ends, or HOLD_MAX_S."""
        if requests is None and duration_s is None:
            raise ValueError("a model fault lasts a number of requests or a duration")
        if (requests is not None and requests < 1) or (duration_s is not None and duration_s < 0):
            raise ValueError("a model fault's requests are 1 or more and its duration not negative")
        if self._busy:
            raise RuntimeError(f"model endpoint {self.name} is already under a model fault")
        self._busy = True
        self.faults[fault.kind] = self.faults.get(fault.kind, 0) + 1
        self._fault, self._left, self._spell_met, self._stopped = fault, requests, 0, None
        self._all_met.clear()
        self._released.clear()
        deadline = time.monotonic() + duration_s if duration_s is not None else None
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_met.wait(), duration_s)
            stopped = self._stopped or time.time()
            self._fault = None
            while self._holding and (deadline is None or time.monotonic() < deadline):
                await asyncio.sleep(0.05)  # a handful of held requests, each ended by its agent or HOLD_MAX_S
            return Spell(self._spell_met, stopped)
        finally:
            self._fault, self._left, self._busy = None, None, False
            self._released.set()

    def stats(self) -> dict[str, object]:
        return {
            "name": self.name,
            "url": self.url,
            "requests": self.total,
            "faults": dict(self.faults),
            "met": dict(self.met),
        }

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):  # each connection's reader sees it end: its task returns
            with contextlib.suppress(Exception):
                writer.transport.abort()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5.0)
        for task in list(self._tasks):
            task.cancel()
        if self._client is not None:
            await self._client.aclose()

    def _take(self) -> Fault | None:
        """The fault the request now coming meets (counted against its requests)."""
        fault = self._fault
        if fault is None:
            return None
        self._spell_met += 1
        self.met[fault.kind] = self.met.get(fault.kind, 0) + 1
        if self._left is not None:
            self._left -= 1
            if self._left <= 0:
                self._fault, self._stopped = None, time.time()  # the next request passes
                self._all_met.set()
        return fault

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if len(self._writers) >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self._writers.add(writer)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while (got := await self._request(conn, reader, writer)) is not None:
                if not await self._answer(conn, reader, writer, *got) or conn.our_state is h11.MUST_CLOSE:
                    break
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, OSError, TimeoutError, asyncio.CancelledError):
            pass  # the agent went away or spoke no HTTP, or the proxy is closing: this connection ends
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()

    async def _request(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[h11.Request, bytes] | None:
        request, body = None, bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await asyncio.wait_for(reader.read(CHUNK), IDLE_S))
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY:
                    await self._send(conn, writer, 413, _error("request_too_large", "request body over 8 MiB"))
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
        target = req.target.decode("ascii", "replace")
        if not target.startswith("/"):  # refused before any fault counts it
            await self._send(conn, writer, 400, _error("bad_request", "only origin-form request targets"))
            return False
        path = target.split("?", 1)[0][:200]
        fault = self._take()
        kind = fault.kind if fault is not None else None
        if fault is not None and fault.kind in _ERRORS:
            status, code, message = _ERRORS[fault.kind]
            status = fault.status if fault.kind == ERROR else status
            extra = [(b"retry-after", str(fault.retry_after_s).encode())] if fault.kind == RATE_LIMIT else []
            await self._send(conn, writer, status, _error(code, message, path), extra)
            self._note(Exchange(at, path, kind, status, time.monotonic() - began))
            return True
        if fault is not None and fault.kind == TIMEOUT:
            await self._hold(reader)
            self._note(Exchange(at, path, kind, None, time.monotonic() - began))
            return False
        return await self._forward(conn, writer, req, body, fault, target, _Timing(at, began, path))

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """No answer: until the agent gives up (closes its connection), the fault ends, or HOLD_MAX_S."""
        self._holding += 1
        gave_up = asyncio.ensure_future(reader.read(1))  # b"" (or an error) once the agent closes
        released = asyncio.ensure_future(self._released.wait())
        try:
            await asyncio.wait([gave_up, released], timeout=HOLD_MAX_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._holding -= 1
            for waiter in (gave_up, released):
                waiter.cancel()
                with contextlib.suppress(BaseException):
                    await waiter  # its exception (a reset connection) retrieved, not logged

    async def _forward(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        req: h11.Request,
        body: bytes,
        fault: Fault | None,
        target: str,
        timing: _Timing,
    ) -> bool:
        assert self._client is not None
        kind = fault.kind if fault is not None else None
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers if k.lower() not in _HOP_BYTES]
        headers.append(("accept-encoding", "identity"))
        try:
            outgoing = self._client.build_request(
                req.method.decode(), self.origin + target, headers=headers, content=body
            )
            resp = await self._client.send(outgoing, stream=True)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError):
            await self._send(conn, writer, 502, _error("bad_gateway", f"model endpoint {self.name} did not answer"))
            self._note(timing.exchange(kind, 502))
            return True
        relay = Relay(fault, resp.headers.get("content-type", "").startswith("text/event-stream"))
        broken = True
        try:
            head = [(k.encode(), v.encode()) for k, v in resp.headers.multi_items() if k.lower() not in HOP_BY_HOP]
            writer.write(conn.send(h11.Response(status_code=resp.status_code, headers=head)))
            async for piece in pieces(resp, relay):
                out = relay.rewrite(piece)
                if kind == SLOW:
                    assert fault is not None
                    await asyncio.sleep(fault.piece_delay_ms / 1000)
                if kind == CUT:  # half of the answer's first piece (a whole answer: half of it); then it drops
                    relay.flush()  # a whole answer's usage: it was billed
                    writer.write(conn.send(h11.Data(data=out[: max(1, len(out) // 2)])))
                    await writer.drain()
                    return False
                if out:
                    writer.write(conn.send(h11.Data(data=out)))
                    await writer.drain()
            if rest := relay.flush():
                writer.write(conn.send(h11.Data(data=rest)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            broken = False
            return True
        except httpx.HTTPError:  # the endpoint failed midway (reset, timeout): the agent's answer breaks off
            return False
        finally:
            await resp.aclose()
            self._note(timing.exchange(kind, resp.status_code, relay, broken))

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, status: int, body: bytes, extra: list | None = None
    ) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
        writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()

    def _note(self, exchange: Exchange) -> None:
        self.total += 1
        self.exchanges.append(exchange)
        if len(self.exchanges) > KEPT + KEPT // 10:  # trimmed now and then, not on every request
            del self.exchanges[:-KEPT]


@dataclass(frozen=True)
class _Timing:
    at: float
    began: float
    path: str

    def exchange(
        self, fault: str | None, status: int | None, relay: Relay | None = None, broken: bool = False
    ) -> Exchange:
        prompt, completion = relay.usage if relay is not None and relay.usage else (None, None)
        garbled = relay.garbled if relay is not None else 0
        return Exchange(
            self.at, self.path, fault, status, time.monotonic() - self.began, prompt, completion, garbled, broken
        )


def _error(code: str, message: str, path: str = "") -> bytes:
    """An error body as the endpoint's API sends one: Anthropic's for its Messages API, else OpenAI's."""
    if path.endswith("/messages"):
        kind = "rate_limit_error" if code == "rate_limit_exceeded" else "api_error"
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    return json.dumps({"error": {"message": message, "type": code, "code": code}}).encode()
