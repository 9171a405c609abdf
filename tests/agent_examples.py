"""Helpers for tests of the agent examples (examples/agents): their worker processes (on the session's
dev server, or as a lab home's worker command under `chaos` and `--verify`), the activities of a
history as the frameworks' classifiers take them (`ActivitySeen`), and the checks every classifier
and every tool-call key must pass."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.testing import ActivityEnvironment

from checkpoint_tui.frameworks import ActivitySeen, UnitInfo, classify
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli, worker_flags
from labs import start_script
from test_user_workflow_lab import stop_lab

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
        env = {**self.env, "CHECKPOINT_TASK_QUEUE": task_queue}
        proc = start_script([sys.executable, str(script)], env, self.logs, log_path)
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


# --- an example's worker on the session's dev server -----------------------------------------------------

RUN_TIMEOUT_S = 30


@dataclasses.dataclass(frozen=True)
class ExampleWorker:
    """An example's worker on the session's dev server: its home (where it writes), its task queue."""

    home: Path
    queue: str
    address: str

    def lines(self, workflow_id: str) -> list[str]:
        """The lines the run's tool calls wrote (one per email sent)."""
        return (self.home / "example-out" / f"{workflow_id}.txt").read_text().splitlines()

    def effects(self, workflow_id: str) -> dict[str, str]:
        """The run's effects in the home's ledger: key -> outcomes."""
        rows = queries.effects_by_id(connect(Settings(home=self.home).db_path), workflow_id)
        return {k: r.outcomes for k, r in rows.items()}

    async def start(self, workflow_type: str, inp: object) -> WorkflowHandle:
        client = await Client.connect(self.address)
        return await client.start_workflow(
            workflow_type, inp, id=f"{workflow_type}-{uuid.uuid4().hex[:8]}", task_queue=self.queue
        )

    async def run(self, workflow_type: str, inp: object) -> tuple[WorkflowHandle, str, list[ActivitySeen]]:
        """Start a run and wait for it: its handle, its result, its activities."""
        handle = await self.start(workflow_type, inp)
        result, seen = await finished(handle)
        return handle, result, seen

    async def reset_after_first_model(self, handle: WorkflowHandle, model_type: str, reason: str) -> WorkflowHandle:
        """Reset the run to the workflow task completed right after its first model request (of
        activity type `model_type`); the new run's handle."""
        client = await Client.connect(self.address)
        before = await handle.fetch_history()
        reset = await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace="default",
                workflow_execution=WorkflowExecution(workflow_id=handle.id),
                workflow_task_finish_event_id=first_model_done_task(before, model_type),
                request_id=str(uuid.uuid4()),
                reason=reason,
            )
        )
        return client.get_workflow_handle(handle.id, run_id=reset.run_id)


def example_worker(session_root: Path, temporal_address: str, worker: Path, name: str) -> Iterator[ExampleWorker]:
    """For a module fixture (`yield from`): the example's worker started once on its own task queue,
    its home `<name>-home`; stopped at the end, and proved gone, even on failure."""
    home = session_root / f"{name}-home"
    Settings(home=home).ensure_dirs()
    logs = home / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(home))
    queue = f"{name}-{uuid.uuid4().hex[:6]}"
    workers = Workers(env, logs)
    try:
        workers.start(worker, queue)
        assert wait_until_sync(workers.polling, 60, every=0.1), workers.output()
        yield ExampleWorker(home, queue, temporal_address)
    finally:
        workers.stop_all()
        close_all()
    assert all(p.poll() is not None for p in workers.procs)


async def finished(handle: WorkflowHandle) -> tuple[str, list[ActivitySeen]]:
    """The run's result and its activities, with a deadline (a stuck run fails the test, not CI)."""
    result = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
    return result, activities_seen(await handle.fetch_history())


def expected_lines(workflow_id: str, turns: int) -> Counter:
    """The lines a run of the mailer writes, each once."""
    return Counter(f"{workflow_id} ops@example.com hello, this is turn {i}" for i in range(1, turns + 1))


# --- an example under the lab, as a user's worker command --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class UnderTheLab:
    """An example's worker script as the worker command of lab homes, each on its own task queue."""

    worker: Path
    queue_prefix: str

    def flags(self, home: Path, *more: str, ledger: str | None = None, address: str | None = None) -> list[str]:
        """`address`: a server the home did not start (else the home's own dev server)."""
        return [*worker_flags(home, self.worker, self.queue_prefix, address=address, ledger=ledger), *more]

    def chaos(
        self,
        home: Path,
        workflow: str,
        inp: dict,
        *extra: str,
        address: str,
        ledger: str | None = None,
        timeout: float = 240,
    ) -> tuple[subprocess.CompletedProcess, dict]:
        """`chaos --kills 4` on the session's server (its seeded schedule then kills no server) and its
        JSON report; the home stopped and proved gone even on failure."""
        report_path = home / "chaos.json"
        try:
            out = run_cli(
                *self.flags(home, ledger=ledger, address=address),
                "chaos",
                "--workflow",
                workflow,
                "--input",
                json.dumps(inp),
                "--kills",
                "4",
                "--json",
                str(report_path),
                *extra,
                timeout=timeout,
            )
            report = json.loads(report_path.read_text()) if report_path.exists() else None
        finally:
            stop_lab(home)
        assert report is not None, out.stdout[-3000:] + out.stderr[-2000:]
        return out, report

    def verify(
        self, home: Path, workflow: str, inp: dict, *more: str, timeout: float
    ) -> tuple[subprocess.CompletedProcess, dict]:
        """`--verify --workflow` on its own home and its JSON report; nothing of the home, or of the
        verify home inside it, left running even on failure."""
        report_path = home / "verify.json"
        try:
            out = run_cli(
                *self.flags(home, *more),
                "--verify",
                "--workflow",
                workflow,
                "--input",
                json.dumps(inp),
                "--json",
                str(report_path),
                timeout=timeout,
            )
        finally:
            stop_lab(home / "run" / "verify")
            stop_lab(home)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        assert report is not None, out.stdout[-4000:] + out.stderr[-2000:]
        return out, report


def sent(home: Path, run_id: str) -> Counter:
    """How many times each email of the run was sent (the lines the example's tool wrote)."""
    return Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())


def turns_sent_twice(lines: Counter) -> set[str]:
    """The turns whose email went out more than once."""
    return {line.rsplit(" ", 1)[1] for line, n in lines.items() if n > 1}


# --- the classifiers and the keys ---------------------------------------------------------------------------

HUGE = "x" * 20_000_000


def seen(kind: object, args: object = None, result: object = None, summary: object = None) -> ActivitySeen:
    """An activity as history shows it (any value anywhere: the hostile tests pass what no SDK would)."""
    return ActivitySeen(kind, args if args is not None else [], result, summary)  # type: ignore[arg-type]


def nested(levels: int, wrap: Callable[[object], object] = lambda v: {"k": [v]}) -> object:
    """A value nested `levels` deep, each level `wrap` of the one below."""
    value: object = "bottom"
    for _ in range(levels):
        value = wrap(value)
    return value


def classify_in_time(framework: str, batch: list[ActivitySeen], seconds: float = 10) -> list[UnitInfo]:
    """`classify`, asserted to finish within `seconds` (every list sliced, every walk budgeted) with a
    unit for each activity."""
    started = time.monotonic()
    units = classify(framework, batch)
    assert time.monotonic() - started < seconds
    assert len(units) == len(batch)
    return units


def assert_bounded(
    units: Iterable[UnitInfo], classes: tuple[str, ...] = ("model", "tool", "other"), name_max: int = 48
) -> None:
    """Every unit one of `classes`, its texts short and printable, its tokens sane."""
    for u in units:
        assert isinstance(u, UnitInfo) and u.cls in classes
        assert 0 < len(u.label) <= 200 and u.label.isprintable()
        assert u.name is None or (len(u.name) <= name_max and u.name.isprintable())
        assert u.call_id is None or (len(u.call_id) <= 256 and u.call_id.isprintable())
        assert u.tokens is None or 0 <= u.tokens < 2**54


def activity_env(workflow_id: str = "wf-1") -> ActivityEnvironment:
    """An activity environment whose activity belongs to workflow `workflow_id`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=workflow_id)
    return env


def frameworks_imported(module: str, frameworks: tuple[str, ...]) -> str:
    """Which of `frameworks` a fresh interpreter has loaded after importing `module` (printed list)."""
    probe = f"import sys, {module}; print([m for m in {frameworks} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()
