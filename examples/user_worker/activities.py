"""The activities: each sends one line to the workflow's output file. `send_line` goes through
`checkpoint_tui.effects.exactly_once` (default key), `send_line_keyed` too with a business key, and
`send_line_unguarded` is the same body without it; `send_line_idempotent` is exactly-once by its own means
(a line is appended only if the file lacks it), with no library."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from checkpoint_tui.effects import exactly_once

from shared import LineInput, decode, line_text, output_path, parse_line_input

_OPEN = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
HEARTBEAT_EVERY_S = 0.5  # the unguarded body beats itself; the library beats for the guarded one


def append_line(path: Path, line: str, only_if_absent: bool) -> bool:
    """Append `line` with one O_APPEND write, then fsync. With `only_if_absent`, look for it first
    under an exclusive lock and append only if no line equals it: a redone (recovered) send, or an
    earlier attempt that is somehow still running, never adds it twice. True if it appended."""
    data = line.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, _OPEN, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if only_if_absent:
            with os.fdopen(os.dup(fd), "rb") as fh:
                if any(existing == data for existing in fh):
                    return False
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock
    if created:
        _fsync_dir(path.parent)
    return True


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LineActivities:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    async def _send(self, inp: LineInput, text: str, only_if_absent: bool) -> None:
        """The physical send, paced so that a kill lands before or after the append, both mid-write."""
        path = output_path(self.out_dir, inp.workflow_id)
        await asyncio.sleep(inp.pace / 2)
        await asyncio.to_thread(append_line, path, text, only_if_absent)
        await asyncio.sleep(inp.pace / 2)

    # The input is a LineInput as JSON, taken undecoded (RawValue, exactly: see workflows.py) and
    # checked by `_check`, so that no input fails the activity with a retryable error.

    @activity.defn(name="send_line")
    async def send_line(self, raw: RawValue = None) -> str:  # type: ignore[assignment]
        inp = _check(raw)

        async def send(text: str) -> None:
            await self._send(inp, text, True)

        return await exactly_once(kind="line", payload=line_text(inp.workflow_id, inp.index), write=send)

    @activity.defn(name="send_line_keyed")
    async def send_line_keyed(self, raw: RawValue = None) -> str:  # type: ignore[assignment]
        """`send_line` with a business key (the workflow id and the line's index) instead of the default
        key: a new run id (a reset, a retry of the workflow) keeps it, so a re-run send is `skipped`."""
        inp = _check(raw)

        async def send(text: str) -> None:
            await self._send(inp, text, True)

        line = line_text(inp.workflow_id, inp.index)
        return await exactly_once(kind="line", payload=line, write=send, key=f"{inp.workflow_id}:line:{inp.index}")

    @activity.defn(name="send_line_idempotent")
    async def send_line_idempotent(self, raw: RawValue = None) -> str:  # type: ignore[assignment]
        """Exactly-once by its own means, without the library: the line is its own key, appended only if the
        file does not hold it yet (under a lock). The lab proves it by reading the file (--effects)."""
        inp = _check(raw)
        async with _heartbeating():
            await self._send(inp, line_text(inp.workflow_id, inp.index), True)
        return "idempotent"

    @activity.defn(name="send_line_unguarded")
    async def send_line_unguarded(self, raw: RawValue = None) -> str:  # type: ignore[assignment]
        inp = _check(raw)
        async with _heartbeating():
            await self._send(inp, line_text(inp.workflow_id, inp.index), False)
        return "unguarded"


def _check(raw: RawValue | None) -> LineInput:
    """Activity input is written by whoever can reach the task queue: refuse what cannot be right,
    whatever it holds, with a non-retryable `BadInput`."""
    try:
        value = None if raw is None else decode(lambda: activity.payload_converter().from_payload(raw.payload))
        inp = parse_line_input(value)
        if not inp.workflow_id.isprintable() or inp.workflow_id != activity.info().workflow_id:
            raise ValueError("workflow_id must be this activity's own (printable) workflow id")
    except ValueError as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None
    return inp


@contextlib.asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_EVERY_S)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
