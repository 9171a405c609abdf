"""#18 acceptance 2: the effects library in a plain Temporal worker started by hand (no lab supervisor).

`examples/byo_worker/worker.py` runs as an ordinary subprocess; it is SIGKILLed while one activity is
inside its write (its probe line is logged, its ledger claim not yet stamped), started again, and the
workflow completes with each line in the output file exactly once, that effect `recovered` once, no
duplicate ledger rows, and the probe log showing the killed write was entered twice. Both backends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from checkpoint_tui.effects import read_probe_log, read_probe_records
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect

WORKER = Path(__file__).resolve().parent.parent / "examples" / "byo_worker" / "worker.py"
COUNT, PACE = 6, 1.0  # a write takes ~1 s (half before its append, half after): room to land a kill in it
KILL_TRIES = 3  # a kill that lost the race (the stamp landed first) is retried on a later activity


class Workers:
    """The example's worker processes of one test; every one is stopped when the test ends."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs, self.procs = env, logs, []

    def start(self) -> subprocess.Popen:
        with open(self.logs / f"worker-{len(self.procs)}.log", "wb") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                [sys.executable, str(WORKER)],
                env=self.env,
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

    def output(self) -> str:
        logs = sorted(self.logs.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)


@pytest.fixture
def workers(ledger_target: str, tmp_path: Path, temporal_address: str) -> Iterator[Workers]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(tmp_path),
               CHECKPOINT_TASK_QUEUE=f"byo-{uuid.uuid4().hex[:8]}")  # fmt: skip
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


async def test_plain_worker_killed_mid_write_recovers_exactly_once(
    workers: Workers, ledger_target: str, tmp_path: Path, temporal_address: str
) -> None:
    probe = tmp_path / "run" / "effects-probe.jsonl"
    wf = f"byo-plain-{uuid.uuid4().hex[:8]}"
    proc = workers.start()
    client = await Client.connect(temporal_address)
    handle = await client.start_workflow("SendLines", {"count": COUNT, "pace": PACE}, id=wf,
                                         task_queue=workers.env["CHECKPOINT_TASK_QUEUE"])  # fmt: skip
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
