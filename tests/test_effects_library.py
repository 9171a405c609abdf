"""The effects library (`checkpoint_tui.effects`) on both ledger backends: its outcomes, business keys,
sync and async writes, refusals, the probe log, and its use inside real activities on the real dev
server (default keys from `activity.info()`, retries, heartbeats during a long write)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from checkpoint_tui import effects
from checkpoint_tui.effects import EffectRefused, EffectsConfigError, exactly_once, exactly_once_sync, read_probe_log
from checkpoint_tui.effects.probe import ProbeLogError, ProbeRecord, probe_line, read_probe_records
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.store import connect


@dataclass(frozen=True)
class Lab:
    target: str
    probe: Path

    @property
    def conn(self) -> Ledger:
        return connect(self.target)

    def row(self, key: str):
        return self.conn.execute("SELECT * FROM effects WHERE id = ?", (key,)).fetchone()

    def outcomes(self, key: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT COALESCE(outcome, 'interrupted') FROM effect_outcomes WHERE effect_id = ? ORDER BY seq", (key,)
        )
        return [r[0] for r in rows]


@pytest.fixture
def lab(ledger_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """The environment the lab gives a worker: CHECKPOINT_HOME, plus CHECKPOINT_LEDGER_URL on PostgreSQL
    (the SQLite target of `ledger_target` is this home's run/checkpoint.db)."""
    monkeypatch.setenv("CHECKPOINT_HOME", str(tmp_path))
    monkeypatch.delenv("CHECKPOINT_PROBE_LOG", raising=False)
    if ledger_target.startswith("postgresql://"):
        monkeypatch.setenv("CHECKPOINT_LEDGER_URL", ledger_target)
    else:
        monkeypatch.delenv("CHECKPOINT_LEDGER_URL", raising=False)
    assert str(effects.ledger_target()) == ledger_target
    yield Lab(ledger_target, tmp_path / "run" / "effects-probe.jsonl")
    effects.close()


async def call(api: str, **kwargs) -> str:
    """The async API, or its sync twin run on a thread of its own (as in a sync activity)."""
    if api == "async":
        return await exactly_once(**kwargs)
    return await asyncio.to_thread(exactly_once_sync, **kwargs)


IMPORTS = """
import sys
import checkpoint_tui.effects
lab = ("textual", "checkpoint_tui.app", "checkpoint_tui.ops", "checkpoint_tui.proof", "checkpoint_tui.tui",
       "checkpoint_tui.cli", "checkpoint_tui.engine", "checkpoint_tui.model")
print(sorted(m for m in sys.modules if m.split(".")[0] == "textual" or m.startswith(lab)))
"""


def test_a_users_worker_imports_no_lab_code() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- outside an activity: business keys ------------------------------------------------------------


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_applied_then_skipped(lab: Lab, api: str) -> None:
    sent: list[str] = []
    assert await call(api, kind="email", payload="hello", write=sent.append, key="invoice-42") == "applied"
    assert await call(api, kind="email", payload="hello", write=sent.append, key="invoice-42") == "skipped"
    assert sent == ["hello"]
    row = lab.row("invoice-42")
    assert row["applied_at"] is not None and row["kind"] == "email" and row["payload"] == "hello"
    assert (row["run_id"], row["step"], row["attempt"]) == ("", 0, 1)
    assert lab.outcomes("invoice-42") == ["applied", "skipped"]
    assert read_probe_log(lab.probe) == {"invoice-42": 1}


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_write_that_raises_leaves_a_claim_the_next_call_recovers(lab: Lab, api: str) -> None:
    calls: list[str] = []

    def flaky(payload: str) -> None:
        calls.append(payload)
        if len(calls) == 1:
            raise ConnectionError("smtp went away")

    with pytest.raises(ConnectionError):
        await call(api, kind="email", payload="p", write=flaky, key="k-1")
    assert lab.row("k-1")["applied_at"] is None  # claimed, never stamped
    assert await call(api, kind="email", payload="p", write=flaky, key="k-1") == "recovered"
    assert await call(api, kind="email", payload="p", write=flaky, key="k-1") == "skipped"
    assert calls == ["p", "p"]
    assert lab.outcomes("k-1") == ["interrupted", "recovered", "skipped"]
    assert read_probe_log(lab.probe) == {"k-1": 2}


CHILD = """
import os, signal, sys
from checkpoint_tui.effects import exactly_once_sync
exactly_once_sync(kind="email", payload="bye", write=lambda p: os.kill(os.getpid(), signal.SIGKILL), key="k-kill")
raise SystemExit("not killed")
"""


async def test_a_writer_killed_mid_write_is_recovered(lab: Lab) -> None:
    """A real process claims, logs its probe line, and is SIGKILLed inside its write."""
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, env=os.environ)
    assert child.returncode == -9, child.stderr
    assert lab.row("k-kill")["applied_at"] is None and lab.outcomes("k-kill") == ["interrupted"]
    sent: list[str] = []
    assert await exactly_once(kind="email", payload="bye", write=sent.append, key="k-kill") == "recovered"
    assert sent == ["bye"] and lab.row("k-kill")["applied_at"] is not None
    assert read_probe_log(lab.probe) == {"k-kill": 2}  # the killed attempt counts: its line came first
    assert queries.effect_totals(lab.conn, "").duplicates == 0


async def test_sync_and_async_writes(lab: Lab) -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    def sync_write(payload: str) -> None:
        seen[payload] = threading.get_ident()

    async def async_write(payload: str) -> None:
        await asyncio.sleep(0)
        seen[payload] = threading.get_ident()

    assert await exactly_once(kind="a", payload="sync", write=sync_write, key="w-1") == "applied"
    assert await exactly_once(kind="a", payload="async", write=async_write, key="w-2") == "applied"
    twin = await asyncio.to_thread(exactly_once_sync, kind="a", payload="twin", write=sync_write, key="w-3")
    assert twin == "applied"
    assert seen["sync"] != loop_thread  # a sync write never blocks the event loop (heartbeats go on)
    assert seen["async"] == loop_thread  # an async one is awaited on it
    with pytest.raises(EffectRefused, match="sync write"):
        exactly_once_sync(kind="a", payload="x", write=async_write, key="w-4")
    assert lab.row("w-4") is None  # refused before anything was claimed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"payload": "x" * (effects.PAYLOAD_LIMIT + 1)}, "65537 bytes"),
        ({"payload": "\u00e9" * (effects.PAYLOAD_LIMIT // 2 + 1)}, "the ledger keeps at most 65536"),
        ({"payload": "a\x00b"}, "NUL"),
        ({"payload": b"bytes"}, "must be str"),
        ({"payload": "\ud800"}, "surrogate"),
        ({"kind": "e mail"}, "kind must be"),
        ({"kind": ""}, "kind must be"),
        ({"key": "k" * (effects.KEY_LIMIT + 1)}, "key must be"),
        ({"key": "line\nbreak"}, "key must be"),
        ({"key": None}, "pass key="),
    ],
)
async def test_refusals_claim_nothing(lab: Lab, kwargs: dict, message: str) -> None:
    args = {"kind": "email", "payload": "ok", "key": "k-refused", "write": lambda p: None, **kwargs}
    with pytest.raises(EffectRefused, match=message) as err:
        await exactly_once(**args)
    assert isinstance(err.value, ApplicationError) and err.value.non_retryable  # no endless retries
    assert lab.conn.execute("SELECT COUNT(*) FROM effect_outcomes").fetchone()[0] == 0
    assert not lab.probe.exists()


async def test_the_largest_payload_is_stored_whole(lab: Lab) -> None:
    payload = "x" * effects.PAYLOAD_LIMIT
    assert await exactly_once(kind="blob", payload=payload, write=lambda p: None, key="big") == "applied"
    assert lab.row("big")["payload"] == payload


def test_no_ledger_location_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHECKPOINT_HOME", "CHECKPOINT_LEDGER_URL", "CHECKPOINT_PROBE_LOG"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EffectsConfigError, match="set CHECKPOINT_LEDGER_URL .* or CHECKPOINT_HOME"):
        exactly_once_sync(kind="email", payload="x", write=print, key="k")
    monkeypatch.setenv("CHECKPOINT_LEDGER_URL", "mysql://db/x")
    with pytest.raises(EffectsConfigError, match="postgresql://"):
        effects.ledger_target()


# --- the probe log ---------------------------------------------------------------------------------


def record(key: str, **fields) -> ProbeRecord:
    base = {"kind": "k", "workflow_id": "wf", "run_id": "r", "activity_id": "1", "attempt": 1, "pid": 1, "t": 0.0}
    return ProbeRecord(key=key, **{**base, **fields})


def test_probe_reader_tolerates_a_torn_last_line_and_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "probe.jsonl"
    assert read_probe_log(path) == {}  # no file: no writes
    good = probe_line(record("a")) + probe_line(record("b")) + probe_line(record("a"))
    foreign = b"not json\n[1, 2]\n{\"kind\": \"no key\"}\n" + b"[" * 100_000 + b"\n"
    torn = probe_line(record("b"))[:-1]  # a complete record whose newline never made it: torn
    path.write_bytes(good + foreign + probe_line(record("c", attempt=float("nan"))) + torn)
    assert read_probe_log(path) == {"a": 2, "b": 1, "c": 1}
    assert [r.attempt for r in read_probe_records(path)] == [1, 1, 1, 0]


def test_probe_reader_refuses_a_file_over_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "probe.jsonl"
    path.write_bytes(probe_line(record("a")) * 10)
    assert read_probe_log(path, limit=path.stat().st_size) == {"a": 10}
    with pytest.raises(ProbeLogError, match="over"):
        read_probe_log(path, limit=path.stat().st_size - 1)


def test_probe_lines_stay_under_4_kib_whatever_the_ids() -> None:
    from checkpoint_tui.effects.identity import Identity, effect_key

    hostile = Identity("\u2603\n\"\\" * 1000, "r" * 300, "9" * 300, 3)
    key = effect_key("email", hostile)
    assert key.startswith("sha256:") and key.endswith(":email") and len(key) < 100
    longest_key = "\U0001f600\\" * (effects.KEY_LIMIT // 2)
    line = probe_line(record(longest_key, workflow_id=hostile.workflow_id, run_id="\ud800" * 300))
    assert len(line) < 4000 and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["key"] == longest_key
    assert effect_key("email", Identity("wf", "run", "7", 1)) == "wf:run:7:email"
    assert effect_key("email", Identity("wf", "run", "7", 1), key="inv-1") == "inv-1"


async def test_probe_log_location_can_be_set(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere" / "probe.jsonl"
    monkeypatch.setenv("CHECKPOINT_PROBE_LOG", str(elsewhere))
    await exactly_once(kind="email", payload="x", write=lambda p: None, key="k-probe")
    assert read_probe_log(elsewhere) == {"k-probe": 1} and not lab.probe.exists()
    assert elsewhere.stat().st_mode & 0o777 == 0o600


async def test_threads_share_one_ledger_thread(lab: Lab) -> None:
    """Many sync callers at once (a sync activity pool): each key applied once, then skipped by all.
    (Callers racing on one key while its first write is still running would each find it unstamped
    and recover: the protocol serialises claims, not writes; the write's own check makes it once.)"""
    sent: list[str] = []
    lock = threading.Lock()

    def write(payload: str) -> None:
        with lock:
            sent.append(payload)

    def send(key: str) -> str:
        return exactly_once_sync(kind="email", payload=key, write=write, key=key)

    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(8) as pool:
        first = await asyncio.gather(*(loop.run_in_executor(pool, send, f"k-{i}") for i in range(8)))
        again = await asyncio.gather(*(loop.run_in_executor(pool, send, f"k-{i % 2}") for i in range(8)))
    assert first == ["applied"] * 8 and again == ["skipped"] * 8
    assert sorted(sent) == [f"k-{i}" for i in range(8)]
    assert read_probe_log(lab.probe) == {f"k-{i}": 1 for i in range(8)}
    assert [t.name for t in threading.enumerate()].count("checkpoint-effects-ledger") == 1


# --- inside real activities on the real dev server -------------------------------------------------


@dataclass
class ProbeInput:
    name: str
    sleep_s: float = 0.0


@activity.defn(name="lib_async")
async def lib_async(inp: ProbeInput) -> dict:
    async def send(payload: str) -> None:
        await asyncio.sleep(inp.sleep_s)  # longer than the heartbeat timeout: only heartbeats keep it alive
        if inp.name == "raise-in-write" and activity.info().attempt == 1:  # the write sees its activity
            raise ConnectionError("first attempt dies inside its write")

    outcome = await exactly_once(kind="mail", payload=f"to {inp.name}", write=send)
    if inp.name == "fail-after" and activity.info().attempt == 1:
        raise ApplicationError("the activity fails after its effect was stamped")
    return {"outcome": outcome, "key": effects.default_key("mail"), "attempt": activity.info().attempt}


@activity.defn(name="lib_sync")
def lib_sync(inp: ProbeInput) -> dict:
    outcome = exactly_once_sync(kind="mail", payload=f"to {inp.name}", write=lambda p: time.sleep(inp.sleep_s))
    return {"outcome": outcome, "key": effects.default_key("mail"), "attempt": activity.info().attempt}


@workflow.defn(name="LibraryProbe", sandboxed=False)
class LibraryProbe:
    @workflow.run
    async def run(self, inputs: list[ProbeInput]) -> list[dict]:
        results = []
        for inp in inputs:
            results.append(
                await workflow.execute_activity(
                    lib_sync if inp.name.startswith("sync") else lib_async,
                    inp,
                    start_to_close_timeout=timedelta(seconds=30),
                    heartbeat_timeout=timedelta(seconds=1),
                    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5),
                )
            )
        return results


async def test_in_real_activities_keys_retries_and_heartbeats(lab: Lab, temporal_address: str) -> None:
    client = await Client.connect(temporal_address)
    queue = f"lib-{uuid.uuid4().hex[:8]}"
    inputs = [ProbeInput("slow", 2.5), ProbeInput("sync-slow", 2.5), ProbeInput("fail-after"),
              ProbeInput("raise-in-write")]  # fmt: skip
    with ThreadPoolExecutor(4) as pool:
        async with Worker(client, task_queue=queue, workflows=[LibraryProbe], activities=[lib_async, lib_sync],
                          activity_executor=pool):  # fmt: skip
            wf = f"lib-{uuid.uuid4().hex}"
            handle = await client.start_workflow(LibraryProbe.run, inputs, id=wf, task_queue=queue)
            results = await asyncio.wait_for(handle.result(), 90)
    run = handle.result_run_id
    assert [r["outcome"] for r in results] == ["applied", "applied", "skipped", "recovered"]
    assert [r["attempt"] for r in results] == [1, 1, 2, 2]  # the 2.5 s writes outlived a 1 s heartbeat timeout
    assert [r["key"] for r in results] == [f"{wf}:{run}:{i}:mail" for i in (1, 2, 3, 4)]
    rows = queries.effects(lab.conn, wf)  # run_id = the workflow id: the lab's panes find them
    assert [(e.id, e.step, e.kind, e.payload) for e in rows] == [
        (f"{wf}:{run}:{i}:mail", i, "mail", f"to {name}")
        for i, name in enumerate(("slow", "sync-slow", "fail-after", "raise-in-write"), 1)
    ]
    assert all(e.applied_at is not None for e in rows)
    assert [e.outcomes for e in rows] == ["applied", "applied", "applied,skipped", "interrupted,recovered"]
    assert queries.effect_totals(lab.conn, wf).duplicates == 0
    counts = read_probe_log(lab.probe)
    assert [counts[e.id] for e in rows] == [1, 1, 1, 2]
    attempts = {r.activity_id: r for r in read_probe_records(lab.probe) if r.workflow_id == wf}
    assert attempts["4"].attempt == 2 and attempts["4"].run_id == run and attempts["4"].pid == os.getpid()
