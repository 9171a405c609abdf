"""Helpers for tests of the agent examples (examples/agents): their worker processes, and the
activities of a history as the frameworks' classifiers take them (`ActivitySeen`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowHistory

from checkpoint_tui.app.frameworks import ActivitySeen

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "agents"
PYDANTIC_WORKER = EXAMPLES / "pydantic_ai_mailer" / "worker.py"
OPENAI_WORKER = EXAMPLES / "openai_agents_mailer" / "worker.py"
PAYLOAD_LIMIT = 2 * 1024 * 1024  # bytes decoded per payload, as Temporal's own blob limit


class Workers:
    """The example worker processes of a test module; every one is stopped when it ends."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.procs = env, logs, []

    def start(self, script: Path, task_queue: str) -> subprocess.Popen:
        log_path = self.logs / f"{script.parent.name}-{len(self.procs)}.log"
        with open(log_path, "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, str(script)],
                env={**self.env, "CHECKPOINT_TASK_QUEUE": task_queue},
                cwd=self.logs,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # no terminal signal reaches it; only we stop it, by pid
            )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def polling(self) -> bool:
        """Every worker started logs that it polls (and none died)."""
        logs = [p.read_text(errors="replace") for p in sorted(self.logs.glob("*.log"))]
        if any(proc.poll() is not None for proc in self.procs):
            raise AssertionError(f"a worker died:\n{self.output()}")
        return len(logs) == len(self.procs) and all(" polling " in text for text in logs)

    def output(self) -> str:
        logs = sorted(self.logs.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


def decoded(payload: Payload) -> object:
    """A JSON payload's value; None if it is not JSON, too big, or does not decode."""
    if payload.metadata.get("encoding") != b"json/plain" or len(payload.data) > PAYLOAD_LIMIT:
        return None
    try:
        return json.loads(payload.data)
    except (ValueError, RecursionError):
        return None


def activities_seen(history: WorkflowHistory | list[HistoryEvent]) -> list[ActivitySeen]:
    """Each scheduled activity in order: its decoded input payloads, its completion's first payload,
    its user-metadata summary (what the production reader gives the classifiers)."""
    events = history.events if isinstance(history, WorkflowHistory) else history
    order: list[int] = []
    scheduled: dict[int, HistoryEvent] = {}
    results: dict[int, object] = {}
    for event in events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            order.append(event.event_id)
            scheduled[event.event_id] = event
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            payloads = done.result.payloads
            results[done.scheduled_event_id] = decoded(payloads[0]) if payloads else None
    seen = []
    for event_id in order:
        event = scheduled[event_id]
        attrs = event.activity_task_scheduled_event_attributes
        summary = decoded(event.user_metadata.summary) if event.user_metadata.HasField("summary") else None
        seen.append(
            ActivitySeen(
                activity_type=attrs.activity_type.name,
                args=[decoded(p) for p in attrs.input.payloads],
                result=results.get(event_id),
                summary=summary if isinstance(summary, str) else None,
            )
        )
    return seen


def first_model_done_task(history: WorkflowHistory, model_type: str) -> int:
    """The event id of the workflow task completed right after the first model request completed:
    a reset point between that request and the tool call it asked for."""
    model_events = {
        e.event_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == model_type
    }
    done_at = next(
        e.event_id
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
        and e.activity_task_completed_event_attributes.scheduled_event_id in model_events
    )
    return next(
        e.event_id
        for e in history.events
        if e.event_id > done_at and e.HasField("workflow_task_completed_event_attributes")
    )
