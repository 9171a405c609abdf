"""The Strands mailer of examples/agents (Strands on `temporalio.strands_agents`, an offline scripted
model), for real: run on the session's dev server, its histories classified (model requests, tool
calls with their toolUseIds, tokens), the guarded workflow keyed by workflow id + toolUseId and a
reset between a model request and its tool call keeping that key; then under the lab as a user's
worker command: chaos kills it on any activity start, model requests included, and the guarded agent
sends each email once; the blind one's tool is named at risk with its toolUseId; `--verify
--workflow` passes on the guarded one. Real dev servers (each lab home its own: chaos kills it), real
worker processes; every process is stopped, and proved gone, even on failure."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shlex
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from agent_examples import Workers, activities_seen, first_model_done_task
from checkpoint_tui.app.frameworks import ActivitySeen, classify, detect
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli
from test_user_workflow_lab import stop_lab

WORKER = Path(__file__).resolve().parents[1] / "examples" / "agents" / "strands_mailer" / "worker.py"
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls
INPUT = json.dumps({"turns": TURNS, "pace": 0.3, "think": 0.2})
_homes = count()
RUN_TIMEOUT_S = 30


@dataclass(frozen=True)
class Example:
    """The example's worker on the session's dev server: where it writes, its task queue."""

    home: Path
    queue: str
    address: str

    def lines(self, workflow_id: str) -> list[str]:
        return (self.home / "example-out" / f"{workflow_id}.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def example(session_root: Path, temporal_address: str) -> Iterator[Example]:
    """The example's worker, started once for the module on its own task queue; stopped at the end,
    even on failure."""
    home = session_root / "strands-home"
    Settings(home=home).ensure_dirs()
    logs = home / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(home))
    queue = f"strands-{uuid.uuid4().hex[:6]}"
    workers = Workers(env, logs)
    try:
        workers.start(WORKER, queue)
        assert wait_until_sync(workers.polling, 60, every=0.1), workers.output()
        yield Example(home, queue, temporal_address)
    finally:
        workers.stop_all()
        close_all()
    assert all(p.poll() is not None for p in workers.procs)


async def finished(handle: WorkflowHandle) -> tuple[str, list[ActivitySeen]]:
    """The run's result and its activities, with a deadline (a stuck run fails the test, not CI)."""
    result = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
    return result, activities_seen(await handle.fetch_history())


async def start(example: Example, workflow_type: str, inp: object) -> WorkflowHandle:
    client = await Client.connect(example.address)
    return await client.start_workflow(workflow_type, inp, id=f"{workflow_type}-{uuid.uuid4().hex[:8]}",
                                       task_queue=example.queue)  # fmt: skip


def streamed_ids(seen: list[ActivitySeen]) -> list[str]:
    """The toolUseIds the model requests made, read straight from their stream events (not by the classifier)."""
    return [e["contentBlockStart"]["start"]["toolUse"]["toolUseId"] for s in seen if s.activity_type == "invoke_model"
            for e in s.result if "toolUse" in e.get("contentBlockStart", {}).get("start", {})]  # fmt: skip


def expected_lines(workflow_id: str, turns: int) -> Counter:
    return Counter(f"{workflow_id} ops@example.com hello, this is turn {i}" for i in range(1, turns + 1))


# --- the example, for real ---------------------------------------------------------------------------


async def test_ten_turns_are_21_activities_classified_as_models_and_tool_calls(example: Example) -> None:
    handle = await start(example, "StrandsMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
    result, seen = await finished(handle)
    assert result == "sent 10 emails to ops@example.com"
    assert detect(s.activity_type for s in seen) == "strands"
    units = classify("strands", seen)
    assert len(units) == 21 and [u.cls for u in units] == ["model", "tool"] * 10 + ["model"]
    models, tools = units[::2], units[1::2]
    assert {u.name for u in models} == {"scripted-mailer"} and {u.label for u in models} == {"model · scripted-mailer"}
    assert all(isinstance(u.tokens, int) and u.tokens > 0 for u in models)  # the stream's metadata usage
    assert {u.name for u in tools} == {"send_email"}
    call_ids = [u.call_id for u in tools]
    assert call_ids == streamed_ids(seen) and len(set(call_ids)) == 10
    assert all(c.startswith("tooluse_") for c in call_ids)  # type: ignore[union-attr]
    assert len({u.args_digest for u in tools}) == 10 and None not in {u.args_digest for u in tools}
    assert all(u.label == f"tool · send_email · call {u.call_id[8:14]}…" and u.tokens is None for u in tools)  # type: ignore[index]
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 10)  # no faults: each line once


async def test_guarded_run_hands_each_tool_its_call_and_writes_each_line_once(example: Example) -> None:
    handle = await start(example, "StrandsMailerGuarded", {"turns": 3, "pace": 0.02, "think": 0.01})
    _, seen = await finished(handle)
    units = classify("strands", seen)
    tools = [u for u in units if u.cls == "tool"]
    assert Counter(u.cls for u in units) == {"model": 4, "tool": 3}
    assert {u.name for u in tools} == {"send_email_guarded"}
    call_ids = [u.call_id for u in tools]
    assert call_ids == streamed_ids(seen) and len(set(call_ids)) == 3
    handed = [s.args[0] for s in seen if s.activity_type == "send_email_guarded"]
    assert handed == [{"tool_use_id": c, "tool_name": "send_email_guarded"} for c in call_ids]
    first_model = next(s for s in seen if s.activity_type == "invoke_model")
    assert {t["name"] for t in first_model.args[0]["tool_specs"]} == {"send_email_guarded"}
    assert set(first_model.args[0]["tool_specs"][0]["inputSchema"]["json"]["properties"]) == {"to", "body", "pace"}
    # the same arguments as the blind tool's: the model's input, not the call handed in front of it
    blind_like = classify("strands", [first_model, dataclasses.replace(seen[1], args=seen[1].args[1:])])
    assert blind_like[1].args_digest == tools[0].args_digest and blind_like[1].call_id == call_ids[0]
    rows = queries.effects_by_id(connect(Settings(home=example.home).db_path), handle.id)
    assert {k: r.outcomes for k, r in rows.items()} == {f"key:strands:{handle.id}:{c}": "applied" for c in call_ids}
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 3)


async def test_a_reset_after_a_model_request_keeps_its_call_and_the_model_makes_new_ones(example: Example) -> None:
    """Measured: a reset to the workflow task after the first model request keeps that request's
    result (its toolUseId: the tool re-runs `skipped`) and re-runs the second request, whose id is new
    (a new key: `applied`; the file still holds one copy, by the write's own check)."""
    handle = await start(example, "StrandsMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    await finished(handle)
    before = await handle.fetch_history()
    old = [u.call_id for u in classify("strands", activities_seen(before)) if u.cls == "tool"]
    client = await Client.connect(example.address)
    reset = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace="default", workflow_execution=WorkflowExecution(workflow_id=handle.id),
        workflow_task_finish_event_id=first_model_done_task(before, "invoke_model"),
        request_id=str(uuid.uuid4()), reason="test: reset between a model request and its tool call",
    ))  # fmt: skip
    _, seen = await finished(client.get_workflow_handle(handle.id, run_id=reset.run_id))
    new = [u.call_id for u in classify("strands", seen) if u.cls == "tool"]
    assert new[0] == old[0] and new[1] != old[1]
    rows = queries.effects_by_id(connect(Settings(home=example.home).db_path), handle.id)
    key = f"key:strands:{handle.id}:"
    assert {k: r.outcomes for k, r in rows.items()} == {
        key + old[0]: "applied,skipped",
        key + old[1]: "applied",
        key + new[1]: "applied",
    }
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 2)


@pytest.mark.parametrize("inp", [{"turns": 0}, {"think": 6}, {"extra": 1}, [1]])
async def test_bad_input_fails_the_workflow_at_once(example: Example, inp: object) -> None:
    handle = await start(example, "StrandsMailerGuarded", inp)
    with pytest.raises(WorkflowFailureError) as failure:
        await finished(handle)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BadInput" and cause.non_retryable


# --- under the lab -----------------------------------------------------------------------------------


def lab(home: Path, ledger: str | None = None) -> list[str]:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(WORKER))}"
    flags = ["--home", str(home), "--worker-cmd", cmd, "--task-queue", f"strands-{home.name}"]
    return flags + (["--ledger", ledger] if ledger else [])


def chaos(home: Path, workflow: str, seed: int, aim: str, ledger: str | None = None) -> tuple:
    report_path = home / "chaos.json"
    try:
        out = run_cli(*lab(home, ledger), "chaos", "--workflow", workflow, "--input", INPUT, "--aim", aim,
                      "--seed", str(seed), "--kills", "4", "--json", str(report_path), timeout=240)  # fmt: skip
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    finally:
        stop_lab(home)
    assert report is not None, out.stdout[-3000:] + out.stderr[-2000:]
    return out, report


def sent(home: Path, run_id: str) -> Counter:
    return Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())


# Seed 1 aims its two worker kills at model requests (activities 3 and 5), seed 3 at tool calls (2 and
# 4); seeds 1-5 all pass by hand (see the example's README).
@pytest.mark.parametrize(("seed", "backend", "killed"), [(1, "sqlite", "model"), (3, "postgresql", "tool")])
def test_the_guarded_agent_survives_chaos_aimed_anywhere_with_each_email_once(seed, backend, killed, session_root,
                                                                              request):  # fmt: skip
    home = session_root / f"strands-guarded-{next(_homes)}"
    ledger = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    out, report = chaos(home, "StrandsMailerGuarded", seed, "any", ledger)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert Counter(sent(home, run_id).values()) == Counter({1: TURNS})  # every email once
    assert report["framework"] == audit["framework"] == "strands"
    assert audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert all(r["class"] == "tool" and r["tool"] == "send_email_guarded" and r["call_id"].startswith("tooluse_")
               for r in audit["guarded_re_executed"])  # fmt: skip
    assert all(r["class"] == "model" and r["label"] == "model · scripted-mailer" for r in audit["model_reruns"])
    worker_kills = [k for k in report["kills"] if k["kind"] == "worker-in-activity"]
    assert worker_kills and {k["class"] for k in worker_kills} == {killed}
    # a kill that landed inside an activity made it run again: a model request re-run (reported apart)
    # or a tool call re-run through the effects library (guarded)
    again = {r["seq"] for r in audit["model_reruns"] + audit["guarded_re_executed"]}
    assert {k["step"] for k in worker_kills if k["landed"] == "inside"} <= again, (worker_kills, again)
    assert "verdict: PASS" in out.stdout and "strands: 6 model requests, 5 tool calls" in out.stdout


def test_the_blind_agents_tool_is_named_at_risk_with_its_call_and_its_duplicates_match(session_root):
    home = session_root / f"strands-blind-{next(_homes)}"
    out, report = chaos(home, "StrandsMailer", 3, "tool")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0 and audit["framework"] == "strands"
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"].startswith("tooluse_") and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # the mail file: each email sent twice was predicted at risk (a kill before the send re-runs it too)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = {line.rsplit(" ", 1)[1] for line, n in lines.items() if n > 1}
    at_risk_turns = {str(r["seq"] // 2) for r in audit["at_risk"]}  # model, tool, model, ...: tool k is activity 2k
    assert twice <= at_risk_turns, (twice, at_risk_turns)


def test_verify_passes_on_the_guarded_agent(session_root):
    """--verify's worker kills land on activities 2-4, a model request among them: re-run, reported
    apart, and the verdict still passes."""
    home = session_root / f"strands-verify-{next(_homes)}"
    report_path = home / "verify.json"
    try:
        inp = json.dumps({"turns": 3, "pace": 0.2, "think": 0.2})
        out = run_cli(*lab(home), "--verify", "--workflow", "StrandsMailerGuarded", "--input", inp,
                      "--json", str(report_path), timeout=180)  # fmt: skip
    finally:
        stop_lab(home)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert report["passed"] == report["total"] and all(c["ok"] for c in report["checks"])
    assert "ALL CHECKS PASS" in out.stdout
