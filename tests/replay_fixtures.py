"""Histories built by hand for replay tests that need no server: a workflow that ends at its first
workflow task, and the malformed one that makes the SDK's core panic and never answer (finding 3 of
issue 25: started, workflow task scheduled, then two workflow-task-started events for that task)."""

from __future__ import annotations

from temporalio import workflow

T = "2026-01-01T00:00:00Z"


@workflow.defn(name="AgentLoop", sandboxed=False)
class EndsAtOnce:
    """Registered under AgentLoop's name: completes in its first workflow task, as good_history says."""

    @workflow.run
    async def run(self) -> None:
        return None


def _started(workflow_type: str) -> list[dict]:
    return [
        {
            "eventId": "1",
            "eventTime": T,
            "eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED",
            "workflowExecutionStartedEventAttributes": {
                "workflowType": {"name": workflow_type},
                "taskQueue": {"name": "q"},
                "originalExecutionRunId": "r1",
                "firstExecutionRunId": "r1",
                "workflowTaskTimeout": "10s",
                "attempt": 1,
            },
        },
        {
            "eventId": "2",
            "eventTime": T,
            "eventType": "EVENT_TYPE_WORKFLOW_TASK_SCHEDULED",
            "workflowTaskScheduledEventAttributes": {
                "taskQueue": {"name": "q"},
                "startToCloseTimeout": "10s",
                "attempt": 1,
            },
        },
        {
            "eventId": "3",
            "eventTime": T,
            "eventType": "EVENT_TYPE_WORKFLOW_TASK_STARTED",
            "workflowTaskStartedEventAttributes": {"scheduledEventId": "2", "identity": "x", "requestId": "a"},
        },
    ]


def good_history(workflow_type: str = "AgentLoop") -> dict:
    """A workflow that completed in its first workflow task (EndsAtOnce replays it)."""
    return {
        "events": _started(workflow_type)
        + [
            {
                "eventId": "4",
                "eventTime": T,
                "eventType": "EVENT_TYPE_WORKFLOW_TASK_COMPLETED",
                "workflowTaskCompletedEventAttributes": {
                    "scheduledEventId": "2",
                    "startedEventId": "3",
                    "identity": "x",
                },
            },
            {
                "eventId": "5",
                "eventTime": T,
                "eventType": "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED",
                "workflowExecutionCompletedEventAttributes": {"workflowTaskCompletedEventId": "4"},
            },
        ]
    }


def panic_history(workflow_type: str = "AgentLoop") -> dict:
    """A second WORKFLOW_TASK_STARTED for the same scheduled task: core panics ("Invalid history!")."""
    return {
        "events": _started(workflow_type)
        + [
            {
                "eventId": "4",
                "eventTime": T,
                "eventType": "EVENT_TYPE_WORKFLOW_TASK_STARTED",
                "workflowTaskStartedEventAttributes": {"scheduledEventId": "2", "identity": "x", "requestId": "b"},
            },
        ]
    }
