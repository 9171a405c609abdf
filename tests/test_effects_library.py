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
from dataclasses import dataclass, replace
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
        """The row of a business key (stored as `key:<key>`)."""
        return self.conn.execute("SELECT * FROM effects WHERE id = ?", (f"key:{key}",)).fetchone()

    def outcomes(self, key: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT COALESCE(outcome, 'interrupted') FROM effect_outcomes WHERE effect_id = ? ORDER BY seq",
            (f"key:{key}",),
        )
        return [r[0] for r in rows]

    def writes(self) -> dict[str, int]:
        """The probe log's physical writes per business key."""
        return {k.removeprefix("key:"): n for k, n in read_probe_log(self.probe).items()}


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
lab = ("textual", "checkpoint_tui.core", "checkpoint_tui.ops", "checkpoint_tui.proof", "checkpoint_tui.tui",
       "checkpoint_tui.cli", "checkpoint_tui.loop_worker", "checkpoint_tui.model")
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
    assert lab.writes() == {"invoice-42": 1}


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
    assert lab.writes() == {"k-1": 2}


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
    assert lab.writes() == {"k-kill": 2}  # the killed attempt counts: its line came first
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


@pytest.mark.parametrize("api", ["async", "sync"])
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
        ({"key": 10**5000}, "key must be a str"),  # str() of it raises ValueError: not what to say
        ({"kind": 10**5000}, "kind must be a str"),
        ({"write": None}, "write must be callable"),
    ],
)
async def test_refusals_claim_nothing(lab: Lab, kwargs: dict, message: str, api: str) -> None:
    args = {"kind": "email", "payload": "ok", "key": "k-refused", "write": lambda p: None, **kwargs}
    with pytest.raises(EffectRefused, match=message) as err:
        await call(api, **args)
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
    foreign = b'not json\n[1, 2]\n{"kind": "no key"}\n' + b"[" * 100_000 + b"\n"
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


@pytest.mark.parametrize("kind", ["fifo", "link", "directory"])
def test_probe_reader_refuses_what_is_not_a_plain_file(tmp_path: Path, kind: str) -> None:
    """The lab reads the probe log a user's worker writes: a FIFO there would block the audit for good,
    a link would be read through (the library never writes through one)."""
    path = tmp_path / "probe.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        (tmp_path / "elsewhere").write_bytes(probe_line(record("a")))
        path.symlink_to(tmp_path / "elsewhere")
    else:
        path.mkdir()
    with pytest.raises(ProbeLogError, match="probe log"):
        read_probe_records(path)


def test_probe_lines_stay_under_4_kib_whatever_the_ids() -> None:
    """The worst case: the longest key of 4-byte characters, and ids of control characters (6 bytes
    each as JSON escapes) and lone surrogates, at the largest attempt a PostgreSQL step can count."""
    from checkpoint_tui.effects.identity import Identity, effect_key

    hostile = Identity('\u2603\n"\\' * 1000, "r" * 300, "9" * 300, 3)
    key = effect_key("email", hostile)
    assert key.startswith("act:sha256:") and key.endswith(":email") and len(key) < 100
    worst_key = effect_key("k" * 64, Identity("", "", "", 1), key="\U0001f600" * effects.KEY_LIMIT)
    for ids in ("\x01", "\ud800", "\U0001f600", '"'):
        line = probe_line(
            record(
                worst_key,
                kind="k" * 64,
                workflow_id=ids * 1000,
                run_id=ids * 1000,
                activity_id=ids * 1000,
                attempt=2**31 - 1,
                pid=2**22,
                t=time.time(),
            )
        )
        assert len(line) < 4000 and line.startswith(b"\n") and line.endswith(b"\n") and line.count(b"\n") == 2
        assert json.loads(line)["key"] == worst_key
        assert json.loads(line)["workflow_id"].startswith(ids * 10)  # cut, but informative
    assert effect_key("email", Identity("wf", "run", "7", 1)) == "act:wf:run:7:email"
    assert effect_key("email", Identity("wf", "run", "7", 1), key="inv-1") == "key:inv-1"


def test_a_torn_line_does_not_swallow_the_next_record(tmp_path: Path) -> None:
    """A short write (a full disk) leaves part of a record without its newline; the next writer's
    record starts with a newline of its own, so it is still a line of its own."""
    path = tmp_path / "probe.jsonl"
    torn = probe_line(record("torn"))[:40]
    path.write_bytes(probe_line(record("a")) + torn + probe_line(record("b")) + torn)
    assert read_probe_log(path) == {"a": 1, "b": 1}
    old_format = b"".join(probe_line(record(k)).lstrip(b"\n") for k in "ab")  # lines without the leading newline
    path.write_bytes(old_format)
    assert read_probe_log(path) == {"a": 1, "b": 1}


def test_keys_are_namespaced_by_source() -> None:
    """Business keys, default keys and the lab's own effect ids (`<workflow id>:<step>:<kind>`) never
    meet, whatever ':' the ids hold."""
    from checkpoint_tui.effects.identity import Identity, effect_key
    from checkpoint_tui.ledger.effects import effect_id

    ids = [("a:b", "c", "1"), ("a", "b:c", "1"), ("a", "b", "c:1"), ("a:b:c", "1", "email"), ("a", "b", "c")]
    defaults = {effect_key("email", Identity(w, r, a, 1)) for w, r, a in ids}
    assert len(defaults) == 5 and all(k.startswith("act:") for k in defaults)
    lab_id = effect_id("run-20240101-000000-abcd", 3, "email")
    business = {effect_key("email", Identity("", "", "", 1), key=k) for k in [lab_id, *defaults]}
    assert len(business) == 6 and all(k.startswith("key:") for k in business)
    assert not business & defaults and lab_id not in business | defaults


async def test_a_business_key_equal_to_a_lab_effect_id_is_its_own_effect(lab: Lab) -> None:
    """The lab's own effect `run-…:3:email` is stamped in the same ledger; a user's business key of the
    same text is another effect, not `skipped` because of it."""
    from checkpoint_tui.ledger.effects import EffectSpec, apply_effect_once

    spec = EffectSpec(
        run_id="run-x", step=3, kind="email", payload="lab", attempt=1, worker_pid=os.getpid(), workflow_id="run-x"
    )
    assert apply_effect_once(lab.conn, spec, lambda s, r: None) == "applied"
    sent: list[str] = []
    assert await exactly_once(kind="email", payload="user", write=sent.append, key=spec.id) == "applied"
    assert sent == ["user"] and lab.row(spec.id)["payload"] == "user"
    assert lab.conn.execute("SELECT payload FROM effects WHERE id = ?", (spec.id,)).fetchone()[0] == "lab"


# --- concurrency, cancellation, threads and forks --------------------------------------------------


@pytest.mark.parametrize("apis", [("async", "async"), ("async", "sync"), ("sync", "sync")])
async def test_concurrent_callers_on_one_key_in_one_process_write_once(lab: Lab, apis: tuple[str, str]) -> None:
    """Two live calls on one business key at once (two workflows using one invoice id): the second
    waits for the first and is `skipped`, instead of finding the claim unstamped and writing again."""
    sent: list[str] = []

    def slow(payload: str) -> None:
        time.sleep(0.3)
        sent.append(payload)

    calls = (call(api, kind="email", payload="p", write=slow, key="invoice-42") for api in apis)
    outcomes = await asyncio.gather(*calls)
    assert sorted(outcomes) == ["applied", "skipped"] and sent == ["p"]
    assert lab.writes() == {"invoice-42": 1} and lab.outcomes("invoice-42") == ["applied", "skipped"]


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_call_on_the_same_key_from_inside_its_own_write_is_refused(lab: Lab, api: str) -> None:
    """It would wait for its own turn forever (heartbeating all the while): refused, not deadlocked."""
    inner: list[str] = []

    def write(payload: str) -> None:
        try:
            exactly_once_sync(kind="email", payload="inner", write=print, key="k-nested")
        except EffectRefused as err:
            inner.append(str(err))
        assert exactly_once_sync(kind="email", payload="inner", write=print, key="k-other") == "applied"

    assert await call(api, kind="email", payload="p", write=write, key="k-nested") == "applied"
    assert len(inner) == 1 and "its own write" in inner[0]
    assert lab.outcomes("k-nested") == ["applied"] and lab.outcomes("k-other") == ["applied"]


async def test_a_cancelled_waiter_passes_its_turn_on(lab: Lab) -> None:
    from checkpoint_tui.effects.gate import GATE

    started, release = asyncio.Event(), asyncio.Event()

    async def held(payload: str) -> None:
        started.set()
        await release.wait()

    first = asyncio.create_task(exactly_once(kind="email", payload="p", write=held, key="k-turn"))
    await started.wait()
    waiter = asyncio.create_task(exactly_once(kind="email", payload="p", write=held, key="k-turn"))
    await asyncio.sleep(0.1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    assert await first == "applied"
    assert await asyncio.wait_for(exactly_once(kind="email", payload="p", write=held, key="k-turn"), 10) == "skipped"
    assert lab.outcomes("k-turn") == ["applied", "skipped"] and not GATE._turns  # nothing left held


async def test_a_call_cancelled_after_its_write_still_stamps(lab: Lab) -> None:
    """A cancellation (Temporal delivers one with a heartbeat) that arrives after the write returned,
    while the stamp waits for the ledger thread: the stamp is made, then the cancellation is raised,
    so a retry finds the effect stamped and does not send it again."""
    from checkpoint_tui.effects.location import LEDGER

    written, release = threading.Event(), threading.Event()

    def write(payload: str) -> None:
        LEDGER.submit(release.wait, 10)  # the ledger thread is busy: the stamp queues behind this
        written.set()

    task = asyncio.create_task(exactly_once(kind="email", payload="p", write=write, key="k-stamp"))
    assert await asyncio.to_thread(written.wait, 10)
    await asyncio.sleep(0.1)
    task.cancel()
    await asyncio.sleep(0.1)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lab.row("k-stamp")["applied_at"] is not None and lab.outcomes("k-stamp") == ["applied"]
    assert await exactly_once(kind="email", payload="p", write=write, key="k-stamp") == "skipped"
    assert lab.writes() == {"k-stamp": 1}


def test_writes_never_wait_for_the_loops_default_executor(lab: Lab) -> None:
    """The event loop's default executor is the worker's (few threads, maybe all busy or hung): a sync
    write and the probe append run on the library's own threads."""
    from concurrent.futures import ThreadPoolExecutor

    hung = threading.Event()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(1))
        blocker = loop.run_in_executor(None, hung.wait)  # its one thread is taken
        try:
            return await asyncio.wait_for(exactly_once(kind="email", payload="p", write=print, key="k-exec"), 10)
        finally:
            hung.set()
            await blocker

    result: list[object] = []
    runner = threading.Thread(target=lambda: result.append(_outcome_or_error(main)))
    runner.start()
    runner.join(30)
    assert result == ["applied"]


def _outcome_or_error(main) -> object:
    try:
        return asyncio.run(main())
    except BaseException as exc:
        return exc


FORK = """
import contextlib, os, signal, threading
from checkpoint_tui.effects import exactly_once_sync
from checkpoint_tui.effects.location import LEDGER
try:
    from checkpoint_tui.effects.gate import GATE
    gate_mutex = GATE._mutex
except ImportError:
    gate_mutex = contextlib.nullcontext()
held, release = threading.Event(), threading.Event()
def hold():
    with LEDGER._lock, gate_mutex:  # another thread holds the library's locks at the fork
        held.set()
        release.wait()
threading.Thread(target=hold, daemon=True).start()
held.wait()
pid = os.fork()
if pid == 0:
    signal.alarm(10)  # a child deadlocked on a lock copied while held dies of SIGALRM
    out = exactly_once_sync(kind="email", payload="child", write=lambda p: None, key="k-fork")
    os._exit(0 if out == "applied" else 3)
release.set()
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_can_call_the_library(lab: Lab) -> None:
    out = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, timeout=20, env=os.environ)
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr[-2000:]
    assert lab.outcomes("k-fork") == ["applied"]


async def test_probe_log_location_can_be_set(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere" / "probe.jsonl"
    monkeypatch.setenv("CHECKPOINT_PROBE_LOG", str(elsewhere))
    await exactly_once(kind="email", payload="x", write=lambda p: None, key="k-probe")
    assert read_probe_log(elsewhere) == {"key:k-probe": 1} and not lab.probe.exists()
    assert elsewhere.stat().st_mode & 0o777 == 0o600


async def test_threads_share_one_ledger_thread(lab: Lab) -> None:
    """Many sync callers at once (a sync activity pool): each key applied once, then skipped by all.
    (Callers racing on one key take turns in this process: see the concurrent-callers test below.)"""
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
    assert lab.writes() == {f"k-{i}": 1 for i in range(8)}
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
    inputs = [
        ProbeInput("slow", 2.5),
        ProbeInput("sync-slow", 2.5),
        ProbeInput("fail-after"),
        ProbeInput("raise-in-write"),
    ]
    with ThreadPoolExecutor(4) as pool:
        async with Worker(
            client, task_queue=queue, workflows=[LibraryProbe], activities=[lib_async, lib_sync], activity_executor=pool
        ):
            wf = f"lib-{uuid.uuid4().hex}"
            handle = await client.start_workflow(LibraryProbe.run, inputs, id=wf, task_queue=queue)
            results = await asyncio.wait_for(handle.result(), 90)
    run = handle.result_run_id
    assert [r["outcome"] for r in results] == ["applied", "applied", "skipped", "recovered"]
    assert [r["attempt"] for r in results] == [1, 1, 2, 2]  # the 2.5 s writes outlived a 1 s heartbeat timeout
    assert [r["key"] for r in results] == [f"act:{wf}:{run}:{i}:mail" for i in (1, 2, 3, 4)]
    rows = queries.effects(lab.conn, wf)  # run_id = the workflow id: the lab's panes find them
    assert [(e.id, e.step, e.kind, e.payload) for e in rows] == [
        (f"act:{wf}:{run}:{i}:mail", i, "mail", f"to {name}")
        for i, name in enumerate(("slow", "sync-slow", "fail-after", "raise-in-write"), 1)
    ]
    assert all(e.applied_at is not None for e in rows)
    assert [e.outcomes for e in rows] == ["applied", "applied", "applied,skipped", "interrupted,recovered"]
    assert queries.effect_totals(lab.conn, wf).duplicates == 0
    counts = read_probe_log(lab.probe)
    assert [counts[e.id] for e in rows] == [1, 1, 1, 2]
    attempts = {r.activity_id: r for r in read_probe_records(lab.probe) if r.workflow_id == wf}
    assert attempts["4"].attempt == 2 and attempts["4"].run_id == run and attempts["4"].pid == os.getpid()


WORST_KEY = "\U0001f600" * effects.KEY_LIMIT  # 2 KiB of UTF-8
CONTROL = "\x01"  # 6 bytes as a JSON escape


@activity.defn(name="lib_hostile_ids")
async def lib_hostile_ids(kind: str) -> str:
    return await exactly_once(kind=kind, payload="p", write=lambda p: None, key=WORST_KEY)


@workflow.defn(name="HostileIds", sandboxed=False)
class HostileIds:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            lib_hostile_ids,
            "k" * 64,
            activity_id=CONTROL * 1000,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=2),
        )


async def test_the_longest_key_with_hostile_ids_in_a_real_activity(lab: Lab, temporal_address: str) -> None:
    """Ids of control characters and the longest key of 4-byte characters: the probe line is cut to
    fit (and checked before anything is claimed), so the write runs and is stamped on attempt 1."""
    client = await Client.connect(temporal_address)
    queue = f"lib-{uuid.uuid4().hex[:8]}"
    wf = "w" + CONTROL * 900
    async with Worker(client, task_queue=queue, workflows=[HostileIds], activities=[lib_hostile_ids]):
        handle = await client.start_workflow(HostileIds.run, id=wf, task_queue=queue)
        assert await asyncio.wait_for(handle.result(), 60) == "applied"
    assert lab.row(WORST_KEY)["applied_at"] is not None and lab.outcomes(WORST_KEY) == ["applied"]
    (probe,) = read_probe_records(lab.probe)
    assert probe.key == f"key:{WORST_KEY}" and probe.workflow_id.startswith("w" + CONTROL * 10)


def test_a_retraction_drops_the_one_call_it_names_and_nothing_else(tmp_path: Path) -> None:
    """A write that returned instead of running is retracted (#51 item 10): the reader drops the latest
    call of the same key, pid and attempt, and the retraction itself; one with no such call, or whose
    `unrun` is not true, retracts nothing."""
    path = tmp_path / "probe.jsonl"
    one = ProbeRecord("k", "email", "wf", "run", "1", 1, 10, 1.0)
    lines = [
        probe_line(one),
        probe_line(replace(one, attempt=2)),
        probe_line(replace(one, unrun=True)),  # retracts attempt 1's call
        probe_line(replace(one, pid=11, unrun=True)),  # no call of pid 11: nothing
        b'\n{"key": "k", "pid": 10, "attempt": 2, "unrun": "yes"}\n',  # not a retraction: a call
    ]
    path.write_bytes(b"".join(lines))
    assert [(r.attempt, r.pid) for r in read_probe_records(path)] == [(2, 10), (2, 10)]
    assert read_probe_log(path) == {"k": 2}
    assert b'"unrun"' not in probe_line(one)  # a call's record says nothing of it
