"""Temporal's side of a run: its workflow status, and its history followed event by event across the
continue-as-new chain."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.activity_history import is_reset_event
from checkpoint_tui.core.chain import next_execution
from checkpoint_tui.core.view import HistoryEvent

# An execution's last event: once it is read the execution has nothing more to give. (Temporal still
# hands back a page token after it, the long poll's position, whose request returns an empty page.)
CLOSE_EVENTS = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)


async def workflow_status(client: Client, run_id: str) -> str | None:
    """Temporal's status of the run (None if Temporal does not know it). An unreachable server
    raises RPCError: callers decide whether that is `temporal-down` or something to wait out."""
    try:
        desc = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = desc.status
    return status.name if isinstance(status, WorkflowExecutionStatus) else None


class HistoryFollower:
    """Follows a run's Temporal history with long polls (wait_new_event), so each event is fetched
    once; `drain()` hands over what arrived since the last call. Once caught up it waits `pace_s`
    between polls, so a live run costs at most one request per `pace_s` however fast it writes
    history (a step writes ~28 events in several batches)."""

    PAGE = 1000
    # A page of this many events or more is a full one (the server caps pages below PAGE, whatever is
    # asked: 512 events on the dev server), so more are waiting: ask for the next at once, and a finished
    # chain is read without a pause per page. A live run writes ~28 events a step, far fewer than this
    # in the follower's pace, so it keeps its one request a pace.
    BACKLOG = 500

    def __init__(
        self, client: Client, run_id: str, first_execution: str | None = None, keep: int = 2000, pace_s: float = 1.0
    ) -> None:
        self.client = client
        self.run_id = run_id
        self.execution = first_execution  # the Temporal run being read; None: the latest
        self.segment = 0
        self.last_event_id = 0
        self.pace_s = pace_s
        self.requests = 0  # history requests sent (the TUI bench counts them per tick)
        self._buffer: deque[HistoryEvent] = deque(maxlen=keep)  # a viewer shows the newest `keep` at most
        self._task: asyncio.Task | None = None
        self._after_reset = False  # in an execution a reset made: skip what it copied from the one it replaced
        self.error: str | None = None

    def ensure_following(self) -> None:
        """(Re)start the follower unless it is running or has seen the workflow close."""
        if self._task is None or (self._task.done() and self._task.exception() is not None):
            if self._task is not None:
                self.error = str(self._task.exception())
            self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        """Read each execution of the chain to its end; a continue-as-new event names the next one, and
        an execution a reset terminated is followed by the one the reset made, from its reset on (what
        comes before is a copy of what was shown)."""
        while True:
            nxt = await self._follow_execution()
            if nxt is None:
                break
            self.execution, self.segment, self.last_event_id = nxt, self.segment + 1, 0
        self.error = None

    async def _follow_execution(self) -> str | None:
        """One execution, page by page; returns the execution that comes after it (see `next_execution`)."""
        execution = WorkflowExecution(workflow_id=self.run_id, run_id=self.execution or "")
        token, closed = b"", False
        while True:
            self.requests += 1
            resp = await self.client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=self.client.namespace,
                    execution=execution,
                    maximum_page_size=self.PAGE,
                    next_page_token=token,
                    wait_new_event=True,
                )
            )
            for ev in resp.history.events:
                if ev.event_id <= self.last_event_id:
                    continue
                if self._after_reset and not is_reset_event(ev):
                    self.last_event_id = ev.event_id  # the copy of the execution the reset replaced
                    continue
                self._after_reset = False
                self._buffer.append(to_history_event(ev, self.segment))
                self.last_event_id = ev.event_id
                closed = closed or ev.event_type in CLOSE_EVENTS
            token = resp.next_page_token
            if closed or not token:  # read to its end: a finished chain is read without a pause per execution
                last = resp.history.events[-1] if resp.history.events else None  # its closing event, if closed
                nxt, self._after_reset = await next_execution(self.client, self.run_id, execution.run_id, last)
                return nxt
            if len(resp.history.events) < self.BACKLOG:  # caught up: let events gather before asking again
                await asyncio.sleep(self.pace_s)

    def drain(self) -> list[HistoryEvent]:
        out = list(self._buffer)
        self._buffer.clear()
        return out

    @property
    def caught_up(self) -> bool:
        """The follower has seen the workflow close and everything was drained."""
        return self._task is not None and self._task.done() and not self._buffer

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def to_history_event(ev, segment: int = 0) -> HistoryEvent:
    name = EventType.Name(ev.event_type).removeprefix("EVENT_TYPE_")
    attr_field = ev.WhichOneof("attributes")
    attrs = ""
    if attr_field:
        attrs = _short_attrs(name, getattr(ev, attr_field))
    return HistoryEvent(ev.event_id, ev.event_time.ToSeconds() + ev.event_time.nanos / 1e9, name, attrs, segment)


def _short_attrs(name: str, attrs) -> str:
    parts = []
    for key in ("activity_type", "workflow_type"):
        if attrs.HasField(key) if key in attrs.DESCRIPTOR.fields_by_name else False:
            parts.append(getattr(attrs, key).name)
    for key in ("attempt", "identity", "scheduled_event_id", "started_event_id", "activity_id"):
        if key in attrs.DESCRIPTOR.fields_by_name:
            value = getattr(attrs, key)
            if value:
                parts.append(f"{key}={value}")
    if "failure" in attrs.DESCRIPTOR.fields_by_name and attrs.HasField("failure"):
        parts.append(f"failure={attrs.failure.message[:120]!r}")
    return " ".join(str(p) for p in parts)
