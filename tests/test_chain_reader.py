"""The chain reader (core/chain.py) with a fake Temporal: the snapshot (`read_chain`), `replay`'s
`fetch_chain` and the history pane's follower take the same way through a continue-as-new and a
reset. Real dev servers cover the happy paths (test_replay, test_resets, test_tui_live); this one
pins the shared way, the NOT_FOUND split and the event bound without a server."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import (
    History,
    HistoryEvent,
    WorkflowExecutionCompletedEventAttributes,
    WorkflowExecutionContinuedAsNewEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowExecutionTerminatedEventAttributes,
    WorkflowTaskFailedEventAttributes,
    WorkflowTaskScheduledEventAttributes,
)
from temporalio.api.workflow.v1 import WorkflowExecutionExtendedInfo
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionResponse,
    GetWorkflowExecutionHistoryResponse,
)
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.chain import read_chain
from checkpoint_tui.core.history import HistoryFollower
from checkpoint_tui.proof.replay.histories import NoHistory, fetch_chain

WF = "wf-1"


def _ev(event_id: int, kind: str, **attrs) -> HistoryEvent:
    types = {
        "started": (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
            "workflow_execution_started_event_attributes",
            WorkflowExecutionStartedEventAttributes,
        ),
        "task": (
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            "workflow_task_scheduled_event_attributes",
            WorkflowTaskScheduledEventAttributes,
        ),
        "reset": (
            EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
            "workflow_task_failed_event_attributes",
            WorkflowTaskFailedEventAttributes,
        ),
        "continued": (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
            "workflow_execution_continued_as_new_event_attributes",
            WorkflowExecutionContinuedAsNewEventAttributes,
        ),
        "terminated": (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
            "workflow_execution_terminated_event_attributes",
            WorkflowExecutionTerminatedEventAttributes,
        ),
        "completed": (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
            "workflow_execution_completed_event_attributes",
            WorkflowExecutionCompletedEventAttributes,
        ),
    }
    event_type, field, cls = types[kind]
    return HistoryEvent(event_id=event_id, event_type=event_type, **{field: cls(**attrs)})


def _started(execution: str) -> HistoryEvent:
    return _ev(1, "started", first_execution_run_id="e1", original_execution_run_id=execution)


RESET = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
# e1 continues as new into e2; a reset terminates e2 and makes e2r (a copy of e2's first two events,
# then its own from the reset event on), which continues as new into e3, the latest.
HISTORIES = {
    "e1": [_started("e1"), _ev(2, "task"), _ev(3, "continued", new_execution_run_id="e2")],
    "e2": [_started("e2"), _ev(2, "task"), _ev(3, "task"), _ev(4, "terminated", reason="reset")],
    "e2r": [
        _started("e2r"),
        _ev(2, "task"),
        _ev(3, "reset", cause=RESET),
        _ev(4, "continued", new_execution_run_id="e3"),
    ],
    "e3": [_started("e3"), _ev(2, "task"), _ev(3, "completed")],
}
RESETS = {"e2": "e2r"}


class FakeClient:
    """The calls the readers make: a handle's history and describe, and the raw history request."""

    namespace = "default"

    def __init__(self, histories: dict[str, list], missing: bool = False) -> None:
        self.histories, self.missing = histories, missing
        self.read: list[str] = []  # executions whose history was asked for, in order
        self.workflow_service = SimpleNamespace(get_workflow_execution_history=self._raw_history)

    def _events(self, run_id: str | None) -> list:
        if self.missing:
            raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
        run_id = run_id or list(self.histories)[-1]  # no run id: the latest execution
        self.read.append(run_id)
        return self.histories[run_id]

    def get_workflow_handle(self, workflow_id: str, run_id: str | None = None) -> SimpleNamespace:
        assert workflow_id == WF

        async def fetch_history_events(page_size: int | None = None):
            for ev in self._events(run_id)[:page_size]:
                yield ev

        async def describe() -> SimpleNamespace:
            info = WorkflowExecutionExtendedInfo(reset_run_id=RESETS.get(run_id or "", ""))
            return SimpleNamespace(raw_description=DescribeWorkflowExecutionResponse(workflow_extended_info=info))

        return SimpleNamespace(fetch_history_events=fetch_history_events, describe=describe)

    async def _raw_history(self, req) -> GetWorkflowExecutionHistoryResponse:
        return GetWorkflowExecutionHistoryResponse(history=History(events=self._events(req.execution.run_id)))


async def test_the_snapshot_reads_through_continue_as_new_and_a_reset():
    client = FakeClient(HISTORIES)
    chain = await read_chain(client, WF)  # no first execution: the latest's started event names it
    assert [run for run, _ in chain.executions] == ["e1", "e2r", "e3"]
    assert [run for run, _ in chain.replaced] == ["e2"]
    assert [run for run, _ in chain.as_read] == ["e1", "e2", "e2r", "e3"]
    assert client.read == ["e3", "e1", "e2", "e2r", "e3"]
    assert not chain.missing


async def test_replay_fetches_every_execution_the_snapshot_read():
    recorded = await fetch_chain(FakeClient(HISTORIES), WF, "e1")
    assert [(r.index, r.execution, len(r.history.events)) for r in recorded] == [
        (1, "e1", 3),
        (2, "e2", 4),
        (3, "e2r", 4),
        (4, "e3", 3),
    ]
    assert {r.workflow_id for r in recorded} == {WF}


async def test_the_follower_takes_the_same_way():
    client = FakeClient(HISTORIES)
    follower = HistoryFollower(client, WF, "e1", pace_s=0)
    await follower._follow()
    shown = [(e.segment, e.event_id) for e in follower.drain()]
    assert client.read == ["e1", "e2", "e2r", "e3"]
    # e2r is shown from its reset event on: what came before is e2's, shown already
    assert shown == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 1), (3, 2), (3, 3)]


async def test_an_unknown_workflow_is_an_empty_chain_or_no_history():
    chain = await read_chain(FakeClient(HISTORIES, missing=True), WF)
    assert chain.missing and chain.executions == [] and chain.as_read == []
    with pytest.raises(NoHistory):
        await fetch_chain(FakeClient(HISTORIES, missing=True), WF)


async def test_the_snapshot_stops_at_its_bound_and_replay_has_none():
    chain = await read_chain(FakeClient(HISTORIES), WF, "e1", max_events=3)
    assert [run for run, _ in chain.as_read] == ["e1"]
    assert len(await fetch_chain(FakeClient(HISTORIES), WF, "e1")) == 4
