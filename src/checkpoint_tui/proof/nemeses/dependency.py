"""A dependency nemesis: a loopback TCP proxy in front of something the workflows call (an HTTP API,
a database), named with `--dependency NAME=HOST:PORT`; the workers get `NAME=127.0.0.1:<proxy port>`.

Game day breaks the things workflows call as well as the workers. For a while the proxy adds latency
to every chunk, resets every connection (`errors`: the caller sees a reset or EOF, and retries), or
swallows everything (`blackhole`: the caller waits on its own timeout); then it is a plain pipe
again. A blackholed connection is closed when the fault ends, since bytes were dropped mid-stream.
Loopback only, at both ends: it listens on 127.0.0.1 and connects only to a loopback address,
resolved once at start and pinned (a name re-resolved per connection could be pointed elsewhere).
Same shape as net_proxy.NetProxy (the link to Temporal), which it does not share code with: that one
delays bytes in a partition, this one drops or resets them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
import struct
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field

from checkpoint_tui.proof.nemeses.http_log import HttpLog

FAULTS = ("latency", "errors", "blackhole")
CHUNK = 64 * 1024
CONNECT_TIMEOUT_S = 5.0  # to a loopback upstream: longer means it is not listening properly
NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
# Names the lab sets for its workers (the SDK's TEMPORAL_* configuration, the effects library's
# CHECKPOINT_*), and names a shell, the dynamic loader or Python read themselves on start.
_RESERVED_PREFIXES = ("TEMPORAL_", "CHECKPOINT_", "LD_", "PYTHON")
_RESERVED = frozenset({"PATH", "HOME", "BASH_ENV", "ENV", "IFS", "SHELL", "TMPDIR"})
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST, not FIN


def _show(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "...")


def check_name(name: str) -> str:
    """`name` if it is an environment variable name the lab may hand a worker; ValueError otherwise."""
    if not NAME.fullmatch(name):
        raise ValueError(
            f"dependency name {_show(name)} is not an environment variable name ([A-Z_][A-Z0-9_]*, "
            "at most 64 characters)"
        )
    if name in _RESERVED or name.startswith(_RESERVED_PREFIXES):
        raise ValueError(f"dependency name {name} is one the lab or the worker's runtime uses itself; pick another")
    return name


def split_host_port(address: str) -> tuple[str, int]:
    """HOST:PORT or [IPv6]:PORT, the port 1..65535; ValueError otherwise."""
    host, sep, port_text = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"address {_show(address)}: write an IPv6 address in brackets, [::1]:PORT")
    if not sep or not host:
        raise ValueError(f"address {_show(address)} is not HOST:PORT")
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"address {_show(address)}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def loopback_only(host: str, addresses: list[str]) -> list[str]:
    """`addresses` (what `host` resolved to) if every one is loopback; ValueError otherwise."""
    if not addresses:
        raise ValueError(f"dependency host {_show(host)} resolves to no address")
    for address in addresses:
        if not ipaddress.ip_address(address.split("%", 1)[0]).is_loopback:
            raise ValueError(
                f"dependency host {_show(host)} is {address}, not loopback: the lab never proxies beyond this machine"
            )
    return addresses


def resolve_loopback(host: str, port: int) -> list[str]:
    """Blocking: for the command line, before anything runs."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        raise ValueError(f"dependency host {_show(host)} does not resolve: {err}") from None
    return loopback_only(host, [str(info[4][0]) for info in infos])


def parse_dependency(text: str) -> tuple[str, str, int]:
    """`--dependency NAME=HOST:PORT` as (NAME, HOST, PORT); ValueError with a one-line reason."""
    name, sep, address = text.partition("=")
    if not sep:
        raise ValueError(f"--dependency {_show(text)} is not NAME=HOST:PORT")
    check_name(name)  # before the host: a bad name costs no lookup
    host, port = split_host_port(address)
    resolve_loopback(host, port)
    return name, host, port


@dataclass(eq=False)
class _Link:
    """One accepted connection and, unless it was blackholed from the start, its upstream twin."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    held: bool = False  # open during a blackhole: bytes were dropped, so it is closed when it ends
    tasks: list[asyncio.Task] = field(default_factory=list)


class DependencyProxy:
    def __init__(self, name: str, upstream: str, log: HttpLog | None = None) -> None:
        """`log`: what the dependency answered 2xx is logged there (--effects http:NAME:FIELD; http_log.py)."""
        self.name, self.log = name, log
        self.upstream = split_host_port(upstream)
        self.address: str | None = None
        self.fault_kind: str | None = None  # the fault now in force
        self.latency_s = 0.0
        self.counts = {
            "connections": 0,
            "during_faults": 0,
            "closed_by_fault": 0,
            "upstream_refused": 0,
            "bytes_up": 0,
            "bytes_down": 0,
            "bytes_dropped": 0,
        }
        self.faults = dict.fromkeys(FAULTS, 0)
        self._target: tuple[str, int] | None = None
        self._server: asyncio.base_events.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        """Check the upstream is loopback and pin its address; listen on a free loopback port and
        return its HOST:PORT (what the workers get as NAME)."""
        host, port = self.upstream
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as err:
            raise ValueError(f"dependency host {_show(host)} does not resolve: {err}") from None
        self._target = (loopback_only(host, [str(i[4][0]) for i in infos])[0], port)
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.address = f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self.address

    async def fault(self, kind: str, duration_s: float, latency_ms: int = 500) -> None:
        """Apply `kind` for `duration_s` seconds, then return to a plain pipe (also if cancelled)."""
        if kind not in FAULTS:
            raise ValueError(f"fault {_show(kind)} is not one of {', '.join(FAULTS)}")
        if duration_s < 0 or latency_ms < 0:
            raise ValueError("a fault's duration and latency cannot be negative")
        if self.fault_kind is not None:  # overlapping faults would end each other early
            raise RuntimeError(f"dependency {self.name} is already under a {self.fault_kind} fault")
        self.faults[kind] += 1
        self.fault_kind = kind
        if kind == "latency":
            self.latency_s = latency_ms / 1000
        elif kind == "errors":
            for link in list(self._links):
                self._close(link, reset=True, by_fault=True)
        else:
            for link in self._links:
                link.held = True
        try:
            await asyncio.sleep(duration_s)  # the fault's length is the point, not a condition
        finally:
            self.fault_kind, self.latency_s = None, 0.0
            for link in [link for link in self._links if link.held]:
                self._close(link, by_fault=True)

    def stats(self) -> dict[str, object]:
        return {
            "name": self.name,
            "upstream": f"{self.upstream[0]}:{self.upstream[1]}",
            "address": self.address,
            "faults": dict(self.faults),
            "open": len(self._links),
            **self.counts,
        }

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._close(link)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()  # asyncio's task for this connection: close() ends it too
        if handler is not None:
            self._tasks.add(handler)
            handler.add_done_callback(self._tasks.discard)
        self.counts["connections"] += 1
        link = _Link(writer)
        self._links.add(link)
        try:
            if self.fault_kind is not None:
                self.counts["during_faults"] += 1
            if self.fault_kind == "errors":
                self._close(link, reset=True, by_fault=True)
            elif self.fault_kind == "blackhole":
                link.held = True
                await self._run(link, [self._pipe(reader, None, link, "bytes_up")])
            else:
                await self._forward(reader, link)
        finally:
            self._close(link)  # again if a fault closed it: an upstream opened meanwhile is closed too

    async def _forward(self, reader: asyncio.StreamReader, link: _Link) -> None:
        assert self._target is not None
        try:
            up_reader, link.upstream = await asyncio.wait_for(asyncio.open_connection(*self._target), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            self.counts["upstream_refused"] += 1  # the caller sees its connection closed, as it would
            return
        if link.client.is_closing():  # a fault closed it while we connected
            return
        watch = self.log.exchange() if self.log is not None else None
        up, down = (watch.up, watch.down) if watch is not None else (None, None)
        await self._run(
            link,
            [
                self._pipe(reader, link.upstream, link, "bytes_up", up),
                self._pipe(up_reader, link.client, link, "bytes_down", down),
            ],
        )

    async def _run(self, link: _Link, pipes: list[Coroutine[object, object, None]]) -> None:
        link.tasks = [self._spawn(p) for p in pipes]
        await asyncio.wait(link.tasks, return_when=asyncio.FIRST_COMPLETED)

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pipe(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | None,
        link: _Link,
        counter: str,
        seen: Callable[[bytes], None] | None = None,
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(CHUNK):
                if writer is None or self.fault_kind == "blackhole" or link.held:
                    self.counts["bytes_dropped"] += len(data)  # into the hole: the stream is broken now
                    continue
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                if writer.is_closing():
                    return
                if seen is not None:  # read before it goes on: a request is parsed before its answer can come
                    seen(data)
                writer.write(data)
                await writer.drain()
                self.counts[counter] += len(data)

    def _close(self, link: _Link, *, reset: bool = False, by_fault: bool = False) -> None:
        """End a link: both sockets, and its pipes (they see EOF or a reset and return); safe to repeat.
        `reset` sends the caller an RST, as a crashed or overloaded dependency would."""
        if link in self._links:
            self._links.discard(link)
            self.counts["closed_by_fault"] += by_fault
        for writer in (link.client, link.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            if reset and writer is link.client and sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
                writer.transport.abort()
            else:
                writer.close()
        for task in link.tasks:
            task.cancel()
