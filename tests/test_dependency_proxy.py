"""The dependency nemesis: a real HTTP server on loopback, reached through the proxy by urllib (in a
thread, as a worker's blocking client would) and by raw asyncio connections; each fault is seen by
the caller the way a broken dependency would show, and the link recovers when it ends."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from checkpoint_tui.proof.nemeses.dependency import FAULTS, DependencyProxy, parse_dependency
from checkpoint_tui.waiting import wait_until

BODY = b"hello from the dependency"


class Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:  # the test's output stays clean
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
async def proxy(http_port: int) -> AsyncIterator[DependencyProxy]:
    proxy = DependencyProxy("PAYMENTS_API", f"127.0.0.1:{http_port}")
    try:
        await proxy.start()
        yield proxy
    finally:
        await proxy.close()


def get(address: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(f"http://{address}/", timeout=timeout) as resp:
        return resp.read()


async def timed_get(address: str, timeout: float = 5.0) -> tuple[bytes, float]:
    began = time.monotonic()
    body = await asyncio.to_thread(get, address, timeout)  # urllib blocks: the proxy's loop must run on
    return body, time.monotonic() - began


async def ended(reader: asyncio.StreamReader) -> bool:
    """The connection ends within 5 s, by EOF or by a reset."""
    try:
        return await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        return True


async def under(proxy: DependencyProxy, kind: str, duration_s: float, **kw: int) -> asyncio.Task:
    """Start a fault in the background; returns once it is in force."""
    task = asyncio.ensure_future(proxy.fault(kind, duration_s, **kw))
    await wait_until(lambda: proxy.fault_kind == kind or task.done(), 5, what=f"{kind} in force")
    return task


async def test_plain_pass_through(proxy: DependencyProxy) -> None:
    assert proxy.address is not None and proxy.address.startswith("127.0.0.1:")
    body, _ = await timed_get(proxy.address)
    assert body == BODY
    stats = proxy.stats()
    assert stats["connections"] == 1 and stats["during_faults"] == 0 and stats["closed_by_fault"] == 0
    assert stats["bytes_up"] > 0 and stats["bytes_down"] > len(BODY)
    assert stats["faults"] == dict.fromkeys(FAULTS, 0)


async def test_latency_delays_each_request_then_goes(proxy: DependencyProxy) -> None:
    assert proxy.address is not None
    fault = await under(proxy, "latency", 3.0, latency_ms=300)
    body, took = await timed_get(proxy.address)
    assert body == BODY and took >= 0.3, f"{took:.3f} s"
    await asyncio.wait_for(fault, 10)
    assert proxy.latency_s == 0 and proxy.fault_kind is None
    body, after = await timed_get(proxy.address)
    assert body == BODY
    assert proxy.stats()["faults"]["latency"] == 1 and proxy.stats()["during_faults"] == 1
    print(f"through 300 ms of latency: {took:.3f} s; after it: {after:.3f} s")


async def test_errors_reset_open_and_new_connections_then_recover(proxy: DependencyProxy) -> None:
    assert proxy.address is not None
    host, port = proxy.address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))  # open before the fault, idle
    try:
        await wait_until(lambda: proxy.stats()["open"] == 1, 5, what="accepted")
        fault = await under(proxy, "errors", 2.0)
        with pytest.raises((OSError, http.client.HTTPException)):  # reset, or EOF before a status line
            await timed_get(proxy.address)
        assert await ended(reader)  # the idle connection was reset too
    finally:
        writer.close()
    await asyncio.wait_for(fault, 10)
    body, _ = await timed_get(proxy.address)
    assert body == BODY
    stats = proxy.stats()
    assert stats["closed_by_fault"] == 2 and stats["during_faults"] == 1 and stats["connections"] == 3


async def test_blackhole_holds_callers_silent_then_closes_them_and_recovers(proxy: DependencyProxy) -> None:
    assert proxy.address is not None
    host, port = proxy.address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))  # open before the fault
    try:
        await wait_until(lambda: proxy.stats()["open"] == 1, 5, what="accepted")
        fault = await under(proxy, "blackhole", 2.0)
        began = time.monotonic()
        with pytest.raises((TimeoutError, OSError)) as caught:  # urllib may wrap the timeout in URLError
            await timed_get(proxy.address, timeout=0.5)
        assert "timed out" in str(caught.value), caught.value
        assert time.monotonic() - began < 1.9  # the client's own timeout, not the end of the fault
        writer.write(b"GET / HTTP/1.0\r\n\r\n")  # the request vanishes: no answer while the fault lasts
        await writer.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.3)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed when the blackhole ends
    finally:
        writer.close()
    await asyncio.wait_for(fault, 10)
    body, _ = await timed_get(proxy.address)
    assert body == BODY
    stats = proxy.stats()
    # closed by the fault: the connection held open; urllib's, opened during it, was closed by urllib
    assert stats["bytes_dropped"] > 0 and stats["closed_by_fault"] == 1 and stats["during_faults"] == 1
    assert stats["faults"]["blackhole"] == 1


async def test_one_fault_at_a_time_and_only_known_ones(proxy: DependencyProxy) -> None:
    with pytest.raises(ValueError, match="not one of latency, errors, blackhole"):
        await proxy.fault("slow", 1.0)
    fault = await under(proxy, "latency", 0.5, latency_ms=10)
    with pytest.raises(RuntimeError, match="already under a latency fault"):
        await proxy.fault("errors", 1.0)
    await asyncio.wait_for(fault, 5)


async def test_close_ends_every_connection_and_the_listener(http_port: int) -> None:
    proxy = DependencyProxy("DB", f"localhost:{http_port}")
    try:
        address = await proxy.start()
        host, port = address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        await wait_until(lambda: proxy.stats()["open"] == 1, 5, what="accepted")
    finally:
        await proxy.close()
    try:
        assert await asyncio.wait_for(reader.read(), 5) == b""
    finally:
        writer.close()
    assert proxy.stats()["open"] == 0 and not proxy._tasks  # every pipe task ended, none left to leak
    with pytest.raises(ConnectionRefusedError), socket.create_connection((host, int(port)), timeout=2):
        pass


async def test_a_non_loopback_upstream_is_refused_before_listening() -> None:
    proxy = DependencyProxy("API", "192.0.2.1:80")  # TEST-NET-1: never routed
    with pytest.raises(ValueError, match="not loopback"):
        await proxy.start()
    assert proxy.address is None
    await proxy.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PAYMENTS_API=127.0.0.1:8080", ("PAYMENTS_API", "127.0.0.1", 8080)),
        ("DB=localhost:5432", ("DB", "localhost", 5432)),
        ("_V6=[::1]:1", ("_V6", "::1", 1)),
        ("X=127.8.9.10:65535", ("X", "127.8.9.10", 65535)),
    ],
)
def test_parse_dependency_accepts_loopback(text: str, expected: tuple[str, str, int]) -> None:
    assert parse_dependency(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("API=192.0.2.1:80", "not loopback"),
        ("API=0.0.0.0:80", "not loopback"),
        ("API=[2001:db8::1]:80", "not loopback"),
        ("API=no-such-host.invalid:80", "does not resolve"),
        ("TEMPORAL_ADDRESS=127.0.0.1:7233", "lab or the worker's runtime"),
        ("CHECKPOINT_HOME=127.0.0.1:1", "lab or the worker's runtime"),
        ("PATH=127.0.0.1:1", "lab or the worker's runtime"),
        ("HOME=127.0.0.1:1", "lab or the worker's runtime"),
        ("LD_PRELOAD=127.0.0.1:1", "lab or the worker's runtime"),
        ("PYTHONPATH=127.0.0.1:1", "lab or the worker's runtime"),
        ("api=127.0.0.1:1", "not an environment variable name"),
        ("1API=127.0.0.1:1", "not an environment variable name"),
        ("A" * 65 + "=127.0.0.1:1", "not an environment variable name"),
        ("API=127.0.0.1:0", "from 1 to 65535"),
        ("API=127.0.0.1:65536", "from 1 to 65535"),
        ("API=127.0.0.1:http", "from 1 to 65535"),
        ("API=127.0.0.1:٣", "from 1 to 65535"),  # a digit, but not an ASCII one
        ("API=127.0.0.1", "not HOST:PORT"),
        ("API=::1:80", "in brackets"),
        ("127.0.0.1:80", "not NAME=HOST:PORT"),
    ],
)
def test_parse_dependency_refuses(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        parse_dependency(text)
    assert "\n" not in str(caught.value)
