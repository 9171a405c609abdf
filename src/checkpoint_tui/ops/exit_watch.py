"""Know the moment a process exits without polling: a pidfd (Linux 5.3+) turns readable when its
process terminates, child of ours or adopted, so the event loop wakes exactly then."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable


class ExitWatch:
    def __init__(self, wake: asyncio.Event) -> None:
        self.wake = wake  # set when a watched process exits (or cannot be watched: look at once)
        self._fds: dict[int, int] = {}  # pid -> its pidfd
        self.exited: set[int] = set()  # pids seen to exit (the caller clears what it handled)

    def watch(self, pids: Iterable[int]) -> None:
        """Watch exactly these pids from now on (adds readers for new ones, drops the rest)."""
        loop = asyncio.get_running_loop()
        live = set(pids)
        for pid in set(self._fds) - live:
            self._drop(pid)
        for pid in live - set(self._fds):
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # already gone
                self.exited.add(pid)
                self.wake.set()
                continue
            self._fds[pid] = fd
            loop.add_reader(fd, self._exited, pid)

    def _exited(self, pid: int) -> None:
        self._drop(pid)  # a pidfd stays readable: one wake-up per exit
        self.exited.add(pid)
        self.wake.set()

    def _drop(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def close(self) -> None:
        for pid in list(self._fds):
            self._drop(pid)
