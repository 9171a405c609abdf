"""A network nemesis: a loopback TCP proxy between workers and the Temporal frontend that can add
latency and partition the link.

A partition stops forwarding in both directions on every connection (and holds new ones) until it
heals; bytes already sent wait, as TCP would retransmit them after a partition shorter than its own
timeouts. So the worker's long polls, heartbeats and completions stall rather than fail: Temporal
times the in-flight activity out (heartbeat timeout 2 s) and retries it, and when the link heals the
old attempt's late completion is rejected while its late writes, if any, meet a claimed effect.
Loopback only: the proxy listens on 127.0.0.1 and connects only to the address it was given.
"""

from __future__ import annotations

import asyncio
import contextlib

CHUNK = 64 * 1024


class NetProxy:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.latency_s = 0.0  # added before each forwarded chunk, in both directions
        self.partitions = 0
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> str:
        """Listen on a free loopback port; returns its HOST:PORT for workers and clients."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def partition(self, seconds: float) -> None:
        """Forward nothing, either way, for `seconds`; then heal."""
        self.partitions += 1
        self._open.clear()
        try:
            await asyncio.sleep(seconds)  # the partition's length is the point, not a condition
        finally:
            self._open.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._open.wait()  # a connection opened during a partition waits for it to heal
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        pipes = [self._spawn(self._pipe(reader, up_writer)), self._spawn(self._pipe(up_reader, writer))]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for w in (writer, up_writer):
            w.close()
            self._writers.discard(w)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(CHUNK):
                await self._open.wait()
                if self.latency_s:
                    await asyncio.sleep(self.latency_s)
                writer.write(data)
                await writer.drain()
