"""An event loop on a thread of its own, for work that must never run on the caller's loop (the
supervisor's 20 Hz tick: psutil, SQL, a blocking spawn). The caller submits coroutines and awaits
their results; the thread's loop does the work."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `main()` on the thread's loop; the thread ends when it returns."""

        def target() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._ready.set()
            try:
                loop.run_until_complete(main())
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=target, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def on_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        assert self._loop is not None, "LoopThread not started"
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` run on the thread's loop from any other loop."""
        return await asyncio.wrap_future(self.submit(coro))

    def call_soon(self, callback: Callable[[], object]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(callback)

    async def join(self, timeout: float) -> bool:
        """Wait (without blocking the caller's loop) for the thread to end; True if it did."""
        if self._thread is None:
            return True
        await asyncio.to_thread(self._thread.join, timeout)
        return not self._thread.is_alive()


class Background:
    """Work a loop starts and does not wait for (a latency measurement, a late failover pass), each
    given a bounded time to land before the loop ends."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, within_s: float) -> None:
        """Let what is in flight land within `within_s` in all; what is left then is cancelled, so a stop
        is not held longer whatever it had started. What lands may start more (a failover pass its late
        pass): waited for within the same time. A failure of one is logged; the others still land."""
        deadline = time.monotonic() + within_s
        while self._tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                for task in self._tasks:
                    task.cancel()
                return
            done, _ = await asyncio.wait(set(self._tasks), timeout=left)
            for task in done:
                if not task.cancelled() and (err := task.exception()) is not None:
                    log.error("background work failed: %r", err)
