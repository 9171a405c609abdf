"""The Google ADK mailer of examples/agents (ADK on `temporalio.google_adk`, an offline scripted
`BaseLlm`), for real: run on the session's dev server, its histories classified (model requests, tool
calls with their function call ids, tokens), the guarded workflow keyed by workflow id + function call
id; then under the lab as a user's worker command (recognised from its payloads: Strands names its
model activity `invoke_model` too): chaos kills it on any activity start, model
requests included, and the guarded agent sends each email once; the blind one's tool is named at risk
with its call id; `--verify --workflow` passes on the guarded one. Every process is stopped."""

from __future__ import annotations

import asyncio
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
from temporalio.client import Client, WorkflowHandle

from agent_examples import Workers, activities_seen
from checkpoint_tui.app.frameworks import ActivitySeen, classify
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli
from test_user_workflow_lab import stop_lab

WORKER = Path(__file__).resolve().parents[1] / "examples" / "agents" / "google_adk_mailer" / "worker.py"
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls
INPUT = json.dumps({"turns": TURNS, "pace": 0.3, "think": 0.2})
_homes = count()


@dataclass(frozen=True)
class Example:
    home: Path
    queue: str
    address: str

    def lines(self, workflow_id: str) -> list[str]:
        return (self.home / "example-out" / f"{workflow_id}.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def example(session_root: Path, temporal_address: str) -> Iterator[Example]:
    """The example's worker, started once for the module on its own task queue; stopped at the end."""
    home = session_root / "google-adk-home"
    Settings(home=home).ensure_dirs()
    logs = home / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(home))
    queue = f"google-adk-{uuid.uuid4().hex[:6]}"
    workers = Workers(env, logs)
    try:
        workers.start(WORKER, queue)
        assert wait_until_sync(workers.polling, 60, every=0.1), workers.output()
        yield Example(home, queue, temporal_address)
    finally:
        workers.stop_all()
        close_all()
    assert all(p.poll() is not None for p in workers.procs)


async def run(example: Example, workflow_type: str, inp: object) -> tuple[WorkflowHandle, str, list[ActivitySeen]]:
    client = await Client.connect(example.address)
    handle = await client.start_workflow(workflow_type, inp, id=f"{workflow_type}-{uuid.uuid4().hex[:8]}",
                                         task_queue=example.queue)  # fmt: skip
    result = await asyncio.wait_for(handle.result(), 30)
    return handle, result, activities_seen(await handle.fetch_history())


def made_ids(seen: list[ActivitySeen]) -> list[str]:
    """The function call ids the model requests made, read straight from their results."""
    return [p["function_call"]["id"] for s in seen if s.activity_type == "invoke_model" for r in s.result
            for p in r["content"]["parts"] if "function_call" in p]  # fmt: skip


def expected_lines(workflow_id: str, turns: int) -> Counter:
    return Counter(f"{workflow_id} ops@example.com hello, this is turn {i}" for i in range(1, turns + 1))


async def test_ten_turns_are_21_activities_classified_as_models_and_tool_calls(example: Example) -> None:
    handle, result, seen = await run(example, "GoogleAdkMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
    assert result == "sent 10 emails to ops@example.com"
    units = classify("google-adk", seen)
    assert [u.cls for u in units] == ["model", "tool"] * 10 + ["model"]
    models, tools = units[::2], units[1::2]
    assert {u.label for u in models} == {"model · scripted-mailer"} and {u.summary for u in models} == {"mailer"}
    assert all(isinstance(u.tokens, int) and u.tokens > 0 for u in models)  # the responses' usage_metadata
    assert {u.name for u in tools} == {"send_email"} and [u.call_id for u in tools] == made_ids(seen)
    assert len({u.call_id for u in tools}) == len({u.args_digest for u in tools} - {None}) == 10
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 10)


async def test_guarded_run_keys_each_send_by_its_function_call_id(example: Example) -> None:
    handle, _, seen = await run(example, "GoogleAdkMailerGuarded", {"turns": 3, "pace": 0.02, "think": 0.01})
    tools = [u for u in classify("google-adk", seen) if u.cls == "tool"]
    call_ids = made_ids(seen)
    assert [u.call_id for u in tools] == call_ids and {u.name for u in tools} == {"send_email_guarded"}
    snapshots = [s.args[-1] for s in seen if s.activity_type == "send_email_guarded"]
    assert snapshots == [{"state": {}, "function_call_id": c} for c in call_ids]  # ADK's ToolContextSnapshot
    rows = queries.effects_by_id(connect(Settings(home=example.home).db_path), handle.id)
    assert {k: r.outcomes for k, r in rows.items()} == {f"key:google-adk:{handle.id}:{c}": "applied" for c in call_ids}
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 3)


# --- under the lab -----------------------------------------------------------------------------------


def lab(home: Path) -> list[str]:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(WORKER))}"
    return ["--home", str(home), "--worker-cmd", cmd, "--task-queue", f"adk-{home.name}"]


def chaos(home: Path, workflow: str, seed: int, aim: str) -> tuple:
    report_path = home / "chaos.json"
    try:
        out = run_cli(*lab(home), "chaos", "--workflow", workflow, "--input", INPUT, "--aim", aim,
                      "--seed", str(seed), "--kills", "4", "--json", str(report_path), timeout=240)  # fmt: skip
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    finally:
        stop_lab(home)
    assert report is not None, out.stdout[-3000:] + out.stderr[-2000:]
    return out, report


def sent(home: Path, run_id: str) -> Counter:
    return Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())


def test_the_guarded_agent_survives_chaos_aimed_anywhere_with_each_email_once(session_root):
    home = session_root / f"adk-guarded-{next(_homes)}"
    out, report = chaos(home, "GoogleAdkMailerGuarded", 1, "any")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert Counter(sent(home, report["run_id"]).values()) == Counter({1: TURNS})  # every email once
    assert audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["framework"] == "google-adk"  # recognised from its payloads, not taken for Strands'
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert all(r["tool"] == "send_email_guarded" and r["call_id"].startswith("call_")
               for r in audit["guarded_re_executed"])  # fmt: skip
    assert all(r["label"] == "model · scripted-mailer" for r in audit["model_reruns"])
    assert [k for k in report["kills"] if k["kind"] == "worker-in-activity"]
    assert "verdict: PASS" in out.stdout


def test_the_blind_agents_tool_is_named_at_risk_with_its_call(session_root):
    home = session_root / f"adk-blind-{next(_homes)}"
    out, report = chaos(home, "GoogleAdkMailer", 3, "tool")
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"].startswith("call_") and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    twice = {line.rsplit(" ", 1)[1] for line, n in sent(home, report["run_id"]).items() if n > 1}
    assert twice <= {str(r["seq"] // 2) for r in audit["at_risk"]}  # model, tool, ...: tool k is activity 2k


def test_verify_passes_on_the_guarded_agent(session_root):
    home = session_root / f"adk-verify-{next(_homes)}"
    report_path = home / "verify.json"
    try:
        inp = json.dumps({"turns": 3, "pace": 0.2, "think": 0.2})
        out = run_cli(*lab(home), "--verify", "--workflow", "GoogleAdkMailerGuarded", "--input", inp,
                      "--json", str(report_path), timeout=180)  # fmt: skip
    finally:
        stop_lab(home)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert report["passed"] == report["total"] and "ALL CHECKS PASS" in out.stdout
