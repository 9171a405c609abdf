"""#18 acceptance 2: the effects library in a plain Temporal worker started by hand (no lab supervisor).

`examples/user_worker/worker.py` runs as an ordinary subprocess; it is SIGKILLed while one activity is
inside its write (its probe line is logged, its ledger claim not yet stamped), started again, and the
workflow completes with each line in the output file exactly once, that effect `recovered` once, no
duplicate ledger rows, and the probe log showing the killed write was entered twice. On SQLite (the
library's kill-mid-write recovery on PostgreSQL is tests/test_effects_library.py's)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, RetryState
from temporalio.worker import Worker

from checkpoint_tui.effects import read_probe_log, read_probe_records
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from labs import start_script

WORKER = Path(__file__).resolve().parent.parent / "examples" / "user_worker" / "worker.py"
COUNT, PACE = 6, 1.0  # a write takes ~1 s (half before its append, half after): room to land a kill in it
KILL_TRIES = 3  # a kill that lost the race (the stamp landed first) is retried on a later activity


class Workers:
    """The example's worker processes of one test; every one is stopped when the test ends."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.procs = env, logs, []

    def start(self) -> subprocess.Popen:
        proc = start_script(
            [sys.executable, str(WORKER)], self.env, self.logs, self.logs / f"worker-{len(self.procs)}.log"
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

    def output(self) -> str:
        logs = sorted(self.logs.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


@pytest.fixture
def workers(ledger_target: str, tmp_path: Path, temporal_address: str) -> Iterator[Workers]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(
        TEMPORAL_ADDRESS=temporal_address,
        TEMPORAL_NAMESPACE="default",
        CHECKPOINT_HOME=str(tmp_path),
        CHECKPOINT_TASK_QUEUE=f"uw-{uuid.uuid4().hex[:8]}",
    )
    if ledger_target.startswith("postgresql://"):
        env["CHECKPOINT_LEDGER_URL"] = ledger_target
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Workers(env, logs)
    try:
        yield pool
    finally:
        pool.stop_all()
    assert all(p.poll() is not None for p in pool.procs)


def killable_key(target: str, probe: Path, workflow_id: str, skip: set[str]) -> str | None:
    """A key whose write has been entered (its probe line is there) but whose claim is not stamped."""
    entered = [r.key for r in read_probe_records(probe) if r.workflow_id == workflow_id and r.key not in skip]
    if not entered:
        return None
    rows = queries.effects_by_id(connect(target), workflow_id)
    return next((k for k in reversed(entered) if k in rows and rows[k].applied_at is None), None)


async def poll(condition, timeout: float, what: str, every: float = 0.01):
    deadline = time.monotonic() + timeout
    while (value := condition()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not seen within {timeout:g} s")
        await asyncio.sleep(every)
    return value


async def kill_mid_write(workers: Workers, proc: subprocess.Popen, target: str, probe: Path, wf: str) -> tuple:
    """SIGKILL the worker while an activity is inside its write; returns (key, the live worker)."""
    lost: set[str] = set()
    for _ in range(KILL_TRIES):
        key = await poll(lambda: killable_key(target, probe, wf, lost), 60, "an activity inside its write")
        proc.kill()  # SIGKILL, by the pid we started
        proc.wait(timeout=10)
        if queries.effects_by_id(connect(target), wf)[key].applied_at is None:
            return key, workers.start()
        lost.add(key)  # the stamp won the race: try the next activity
        proc = workers.start()
    raise AssertionError(f"no kill landed inside a write in {KILL_TRIES} tries")


@pytest.mark.parametrize("ledger_target", ["sqlite"], indirect=True)  # PostgreSQL: test_effects_library.py
async def test_plain_worker_killed_mid_write_recovers_exactly_once(
    workers: Workers, ledger_target: str, tmp_path: Path, temporal_address: str
) -> None:
    probe = tmp_path / "run" / "effects-probe.jsonl"
    wf = f"uw-plain-{uuid.uuid4().hex[:8]}"
    proc = workers.start()
    client = await Client.connect(temporal_address)
    handle = await client.start_workflow(
        "SendLines", {"count": COUNT, "pace": PACE}, id=wf, task_queue=workers.env["CHECKPOINT_TASK_QUEUE"]
    )
    try:
        key, proc = await kill_mid_write(workers, proc, ledger_target, probe, wf)
        result = await asyncio.wait_for(handle.result(), 90)
        assert proc.poll() is None  # the replacement finished the run
        check_exactly_once(ledger_target, tmp_path, probe, wf, key, result)
    except BaseException:
        print(workers.output())  # shown by pytest with the failure
        raise


def check_exactly_once(target: str, home: Path, probe: Path, wf: str, key: str, result: dict) -> None:
    lines = (home / "example-out" / f"{wf}.txt").read_text().splitlines(keepends=True)
    assert Counter(lines) == Counter(f"{wf} line {i}\n" for i in range(1, COUNT + 1)), lines
    conn = connect(target)
    totals = queries.effect_totals(conn, wf)
    assert (totals.rows, totals.duplicates, totals.unstamped) == (COUNT, 0, 0)
    outcomes = queries.effects_by_id(conn, wf)[key].outcomes.split(",")
    assert outcomes.count("recovered") == 1 and outcomes[0] == "interrupted", outcomes
    assert sum(result.values()) == COUNT and result.get("recovered", 0) >= 1, result
    assert read_probe_log(probe)[key] >= 2  # the killed write and its redo were both entered


# --- hostile input: the workflow (or the activity) fails at once, never its task or a retry loop --------


def raw(data: bytes, encoding: bytes = b"json/plain") -> RawValue:
    """A payload as anyone who can reach the task queue may send it, not as Python's JSON encoder makes."""
    return RawValue(Payload(metadata={"encoding": encoding}, data=data))


HOSTILE = [
    raw(b'{"count": 1' + b"0" * 5000 + b"}"),  # more digits than Python's int parser takes (4300)
    raw(b"[" * 100_000 + b"]" * 100_000),  # nested deeper than the JSON decoder recurses
    raw(b'{"count": ' + b"[" * 900 + b"]" * 900 + b"}"),  # decodes; its repr would nearly recurse too far
    raw(b"{not json"),
    raw(b"\x00\xff", b"binary/plain"),
]
HOSTILE_WORKFLOW = [{"pace": 10**400}, {"count": 10**400}, {"count": 1, "pace": -(10**400)}, *HOSTILE]


def hostile_activity(workflow_id: str) -> list[object]:
    return [
        {"workflow_id": workflow_id, "index": 1, "pace": 10**400},
        {"workflow_id": workflow_id, "index": 10**400, "pace": 0.1},
        {"workflow_id": workflow_id, "index": "1", "pace": 0.1},
        {"workflow_id": workflow_id, "index": 1},
        *HOSTILE,
    ]


@workflow.defn(name="HostileActivityInput", sandboxed=False)
class HostileActivityInput:
    """Schedules the example's `send_line` on its task queue with input no `SendLines` would send."""

    @workflow.run
    async def run(self, queue: str) -> list[str]:
        results = []
        for arg in hostile_activity(workflow.info().workflow_id):
            try:
                await workflow.execute_activity(
                    "send_line",
                    arg,
                    task_queue=queue,
                    start_to_close_timeout=timedelta(seconds=10),
                    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=0.1), maximum_attempts=3),
                )
                results.append("completed")
            except ActivityError as err:
                cause = err.cause
                kind = cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
                results.append(f"{kind} {RetryState(err.retry_state).name}")
        return results


async def bad_input_failure(handle) -> str:
    try:
        await asyncio.wait_for(handle.result(), 20)
    except WorkflowFailureError as err:
        cause = err.cause
        return cause.type if isinstance(cause, ApplicationError) else type(cause).__name__
    except TimeoutError:
        return "still running (its workflow task fails and is retried)"
    return "completed"


@pytest.mark.parametrize("ledger_target", ["sqlite"], indirect=True)
async def test_hostile_input_fails_at_once(workers: Workers, temporal_address: str) -> None:
    """Huge integers, integers Python will not parse, nesting the JSON decoder will not follow, not
    JSON at all: the workflow fails with `BadInput` (never its task, which Temporal would retry
    forever), and so does an activity given such input, without a retry."""
    workers.start()
    client = await Client.connect(temporal_address)
    queue = workers.env["CHECKPOINT_TASK_QUEUE"]
    handles = [
        await client.start_workflow("SendLines", arg, id=f"uw-hostile-{uuid.uuid4().hex[:8]}", task_queue=queue)
        for arg in HOSTILE_WORKFLOW
    ]
    try:
        failures = await asyncio.gather(*(bad_input_failure(h) for h in handles))
        own_queue = f"hostile-{uuid.uuid4().hex[:8]}"
        async with Worker(client, task_queue=own_queue, workflows=[HostileActivityInput]):
            results = await client.execute_workflow(
                HostileActivityInput.run,
                queue,
                id=f"uw-act-{uuid.uuid4().hex[:8]}",
                task_queue=own_queue,
                execution_timeout=timedelta(seconds=60),
            )
    except BaseException:
        print(workers.output())
        raise
    finally:
        for handle in handles:  # a workflow whose task kept failing must not outlive the test
            with contextlib.suppress(Exception):  # it is over already
                await handle.terminate()
    assert failures == ["BadInput"] * len(HOSTILE_WORKFLOW), failures
    assert results == ["BadInput NON_RETRYABLE_FAILURE"] * len(hostile_activity(""))


def test_output_names_never_collide() -> None:
    """A hashed name (an id that is not a plain file name) is never the plain name of another id."""
    spec = importlib.util.spec_from_file_location("user_worker_shared", WORKER.parent / "shared.py")
    assert spec is not None and spec.loader is not None
    shared = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = shared  # its dataclasses look their module up there
    spec.loader.exec_module(shared)
    ids = ["a", "a.txt", ".a", "a:b", "a_b", "a/b", "..", "a" * 120, "a" * 121, "\u00e9", "\ud800", ""]
    ids += [shared.output_name(i).removesuffix(".txt") for i in ids]  # ids that spell another id's name
    names = {i: shared.output_name(i) for i in ids}
    assert len(set(names.values())) == len(set(ids)), names
    assert all("/" not in n and not n.startswith(".") for n in names.values())
