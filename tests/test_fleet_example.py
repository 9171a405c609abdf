"""#40: examples/fleet, an application deployed as a fleet: a workflow worker and an activity worker on
their own task queues, and the mail API they send receipts to, each a subprocess started by hand (no
lab). A run completes with each receipt posted once; a run that version 1 started, replayed on
version 2 (a non-replay-safe deploy), fails its workflow task with a non-determinism error, and
completes once version 1 is back (the rollback), still with each receipt posted once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from labs import start_script

FLEET = Path(__file__).resolve().parents[1] / "examples" / "fleet"
STOP_GRACE_S = 8.0  # SIGTERM, then SIGKILL: longer than the activity worker's 5 s graceful shutdown


class Fleet:
    """The example's processes of one test, started from their scripts; every one is stopped when the
    test ends, pass or fail (SIGTERM, then SIGKILL after a grace, by the Popen object)."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.procs = env, logs, []
        self.mail_log = logs / "mail-api.jsonl"

    @property
    def workflow_queue(self) -> str:
        return self.env["CHECKPOINT_TASK_QUEUE"]

    def start(self, script: str, *args: str) -> subprocess.Popen:
        proc = start_script(
            [sys.executable, str(FLEET / script), *args],
            self.env,
            self.logs,
            self.logs / f"{len(self.procs)}-{script}.log",
        )
        self.procs.append(proc)
        return proc

    def start_mail_api(self) -> None:
        """The mail API on a free loopback port; MAIL_API names it for the workers started after."""
        proc = self.start("mail_api.py", "--port", "0", "--log", str(self.mail_log))
        out = self.logs / f"{len(self.procs) - 1}-mail_api.py.log"
        assert wait_until_sync(lambda: "listening" in out.read_text() or proc.poll() is not None, 10)
        line = out.read_text().split("listening ", 1)[-1].split()
        assert proc.poll() is None and line, out.read_text()
        self.env["MAIL_API"] = line[0]

    def stop(self, proc: subprocess.Popen, signalled: bool = False) -> int:
        """Its exit code: 0 for a clean stop (-9: it outlived its grace). One SIGTERM only: a second one
        can land after the process has put its default handler back on its way out, and kill it."""
        if not signalled and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(timeout=10)

    def stop_all(self) -> None:
        running = [proc for proc in self.procs if proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)  # all at once: their graces overlap
        for proc in running:
            self.stop(proc, signalled=True)

    def mail_counts(self) -> Counter[str]:
        """Posts per idempotency key, as the mail API logged them."""
        lines = self.mail_log.read_text().splitlines() if self.mail_log.exists() else []
        return Counter(json.loads(line)["key"] for line in lines)

    def output(self) -> str:
        logs = sorted(self.logs.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


@pytest.fixture
def fleet(home: Settings, temporal_address: str) -> Iterator[Fleet]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_", "FLEET_"))}
    env.pop("MAIL_API", None)
    tag = uuid.uuid4().hex[:8]
    env.update(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_NAMESPACE="default",
        CHECKPOINT_HOME=str(home.home),
        CHECKPOINT_TASK_QUEUE=f"fleet-wf-{tag}",
        FLEET_ACTIVITY_QUEUE=f"fleet-act-{tag}",
    )
    logs = home.home / "fleet-logs"
    logs.mkdir()
    procs = Fleet(env, logs)
    try:
        procs.start_mail_api()
        yield procs
    finally:
        procs.stop_all()
    codes = [p.returncode for p in procs.procs]
    assert codes == [0] * len(codes), f"not every process stopped cleanly: {codes}\n{procs.output()}"


def fleet_input(fleet: Fleet, count: int, pace: float) -> dict:
    return {"count": count, "pace": pace, "activity_queue": fleet.env["FLEET_ACTIVITY_QUEUE"]}


def receipt_keys(fleet: Fleet, workflow_id: str) -> Counter[str]:
    """Posts per key of one run (the effects library's default keys start `act:<workflow id>:`)."""
    return Counter({k: n for k, n in fleet.mail_counts().items() if k.startswith(f"act:{workflow_id}:")})


def check_sent_once(fleet: Fleet, home: Settings, workflow_id: str, count: int) -> None:
    keys = receipt_keys(fleet, workflow_id)
    assert len(keys) == count and set(keys.values()) == {1}, keys
    bodies = [json.loads(line) for line in fleet.mail_log.read_text().splitlines()]
    sent = sorted(json.loads(b["body"])["receipt"] for b in bodies if b["key"] in keys)
    assert sent == list(range(1, count + 1))
    totals = queries.effect_totals(connect(home.ledger), workflow_id)
    assert (totals.rows, totals.duplicates, totals.unstamped) == (count, 0, 0)


async def wait_for_event(handle: WorkflowHandle, match: Callable[[HistoryEvent], bool], timeout: float, what: str):
    """The first event of the run's history that `match`es, polled until `timeout` (an async
    condition: checkpoint_tui.waiting's wait_until takes a sync one)."""
    deadline = time.monotonic() + timeout
    while True:
        async for event in handle.fetch_history_events():
            if match(event):
                return event
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not in the history within {timeout:g} s")
        await asyncio.sleep(0.1)


def non_determinism(event: HistoryEvent) -> bool:
    return (
        event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and event.workflow_task_failed_event_attributes.cause
        == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
    )


async def test_the_fleet_sends_each_receipt_once(fleet: Fleet, client: Client, home: Settings) -> None:
    fleet.start("activity_worker.py")
    fleet.start("workflow_worker.py")
    wf = f"fleet-{uuid.uuid4().hex[:8]}"
    try:
        result = await client.execute_workflow(
            "FleetMailer",
            fleet_input(fleet, 3, 0.05),
            id=wf,
            task_queue=fleet.workflow_queue,
            execution_timeout=timedelta(seconds=15),
        )
        assert result == 3
        check_sent_once(fleet, home, wf, 3)
    except BaseException:
        print(fleet.output())  # shown by pytest with the failure
        raise


async def test_a_non_replay_safe_deploy_fails_in_flight_runs_and_a_rollback_completes_them(
    fleet: Fleet, client: Client, home: Settings
) -> None:
    fleet.start("activity_worker.py")
    v1 = fleet.start("workflow_worker.py")
    wf = f"fleet-deploy-{uuid.uuid4().hex[:8]}"
    try:
        # Receipt 1 is sent, then the run waits on its pace timer while v1 is swapped for v2: the timer's
        # workflow task is replayed on v2, which schedules `check_mail_api` where history has `send_receipt`.
        # The SDK reports only the first failure of a task: the retry v2 takes next is given up only when
        # it times out, so a short task timeout lets the rollback's v1 have the task 2 s later, not 10 s.
        handle = await client.start_workflow(
            "FleetMailer",
            fleet_input(fleet, 3, 2.0),
            id=wf,
            task_queue=fleet.workflow_queue,
            task_timeout=timedelta(seconds=2),
            execution_timeout=timedelta(seconds=30),
        )
        await wait_for_event(
            handle, lambda e: e.event_type == EventType.EVENT_TYPE_TIMER_STARTED, 10, "the pace timer after receipt 1"
        )
        assert fleet.stop(v1) == 0
        v2 = fleet.start("workflow_worker_v2.py")
        failed = await wait_for_event(handle, non_determinism, 10, "a non-determinism workflow task failure")
        assert "check_mail_api" in failed.workflow_task_failed_event_attributes.failure.message

        # A run started while v2 is deployed completes on it (its preflight is in its own history).
        fresh = await client.execute_workflow(
            "FleetMailer",
            fleet_input(fleet, 1, 0),
            id=f"{wf}-v2",
            task_queue=fleet.workflow_queue,
            execution_timeout=timedelta(seconds=10),
        )
        assert fresh == 1

        assert fleet.stop(v2) == 0  # the rollback
        fleet.start("workflow_worker.py")
        assert await asyncio.wait_for(handle.result(), 12) == 3
        check_sent_once(fleet, home, wf, 3)
    except BaseException:
        print(fleet.output())
        raise
