"""The SDK's Replayer, run in a child process of `replay` (`python -m checkpoint_tui.proof.replay.replayer`):
the SDK's core panics on some malformed histories and then never answers, and a hung replay cannot be
cancelled in-process (the event loop itself never finishes), so each history is replayed where a
deadline can end it (replay_box.py, the parent side).

The protocol, one JSON document per line: the parent writes `{"workflow": "module:qualname",
"sys_path": [...], "parent": pid}`, the child answers `{"ready": true}`; then per history the parent
writes `{"workflow_id", "history"}` (the history's protobuf, base64: no second JSON tree of it on
either side) and the child answers `{"error", "divergence": [id, event] | null,
"seconds"}`. The child's stdout carries nothing else (fd 1 is pointed at stderr)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from temporalio.api.history.v1 import History
from temporalio.client import WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Replayer

from checkpoint_tui.core.history import to_history_event
from checkpoint_tui.ops.procs import bind_to_parent
from checkpoint_tui.proof.replay.histories import MIN_EVENTS

# Core's message quoted inside the SDK's "Workflow activation completion failed: Failure { ... }"
_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
_EVENT_ID = re.compile(r"HistoryEvent\(id: (\d+)")
MESSAGE_LIMIT = 600


@dataclass(frozen=True)
class Divergence:
    event_id: int
    event: str  # its type and short attributes, e.g. "ACTIVITY_TASK_SCHEDULED mark_step_running activity_id=1"


def describe_event(history: WorkflowHistory, event_id: int) -> Divergence | None:
    event = next((e for e in history.events if e.event_id == event_id), None)
    if event is None:
        return None
    shown = to_history_event(event)
    return Divergence(event_id, f"{shown.name} {shown.attrs}".strip())


class Replay:
    """One Replayer (its worker thread pool is made once) for a given workflow class."""

    def __init__(self, workflow: type) -> None:
        self.replayer = Replayer(workflows=[workflow], runtime=_quiet_runtime())

    async def failure(self, history: WorkflowHistory) -> Exception | None:
        try:
            result = await self.replayer.replay_workflow(history, raise_on_replay_failure=False)
        except Exception as err:  # a history the SDK cannot even start replaying
            return err
        return result.replay_failure

    async def answer(self, history: WorkflowHistory) -> dict:
        """The child's answer for one history."""
        started = time.perf_counter()
        with _quiet_sdk_logs():
            failure = await self.failure(history)
            took = time.perf_counter() - started
            if failure is None:
                return {"error": None, "divergence": None, "seconds": took}
            message = sdk_message(failure)
            divergence = await self.divergence(history, message)
        where = [divergence.event_id, divergence.event] if divergence else None
        return {"error": message, "divergence": where, "seconds": took}

    async def divergence(self, history: WorkflowHistory, message: str) -> Divergence | None:
        """The event the SDK names ("HistoryEvent(id: N, ...)"), else the end of the shortest prefix of
        the history that fails to replay (a bisection: ~log2(events) replays of ~15 ms)."""
        events = list(history.events)
        named = _EVENT_ID.search(message)
        if named:
            return describe_event(history, int(named[1]))
        lo, hi = MIN_EVENTS, len(events)  # events[:hi] fails (the whole history does); shorter cannot replay
        while lo < hi:
            mid = (lo + hi) // 2
            if await self.failure(WorkflowHistory(history.workflow_id, events[:mid])) is not None:
                hi = mid
            else:
                lo = mid + 1
        return describe_event(history, events[lo - 1].event_id) if events else None


def sdk_message(err: Exception) -> str:
    text = str(err)
    inner = _CORE_MESSAGE.search(text)
    message = inner[1].replace('\\"', '"') if inner else (text.splitlines()[0] if text else "")
    return f"{type(err).__name__}: {message}"[:MESSAGE_LIMIT]


@cache
def _quiet_runtime() -> Runtime:
    """Core logs every failed workflow task as a WARN line; a replay failure is reported by us instead."""
    return Runtime(telemetry=TelemetryConfig(logging=None))


@contextlib.contextmanager
def _quiet_sdk_logs() -> Iterator[None]:
    logger = logging.getLogger("temporalio.worker")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # "Failed activation on workflow ..." with a traceback, per attempt
    try:
        yield
    finally:
        logger.setLevel(level)


def workflow_ref(workflow: type) -> str:
    """How the child finds the workflow class: `module:qualname`."""
    return f"{workflow.__module__}:{workflow.__qualname__}"


def load_workflow(ref: str) -> type:
    module, _, qualname = ref.partition(":")
    found: object = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found  # type: ignore[return-value]


async def _serve(replies) -> None:
    header = json.loads(sys.stdin.readline())
    bind_to_parent(int(header["parent"]))  # a killed `replay` must not leave a hung replay behind
    sys.path[:0] = [p for p in header["sys_path"] if p not in sys.path]
    replay = Replay(load_workflow(header["workflow"]))
    _send(replies, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        _send(replies, await replay.answer(decode_history(request["workflow_id"], request["history"])))


def encode_history(history: WorkflowHistory) -> str:
    """The history as the protocol carries it: its protobuf, base64."""
    return base64.b64encode(History(events=history.events).SerializeToString()).decode("ascii")


def decode_history(workflow_id: str, text: str) -> WorkflowHistory:
    return WorkflowHistory(workflow_id, list(History.FromString(base64.b64decode(text)).events))


def _send(replies, doc: dict) -> None:
    replies.write(json.dumps(doc) + "\n")
    replies.flush()


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")  # the protocol's own descriptor
    os.dup2(2, 1)  # anything else printed goes to stderr, never into the protocol
    asyncio.run(_serve(replies))


if __name__ == "__main__":
    main()
