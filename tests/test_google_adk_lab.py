"""The Google ADK mailer of examples/agents (ADK on `temporalio.google_adk`, an offline scripted
`BaseLlm`), for real: run on the session's dev server, its histories classified (model requests, tool
calls with their function call ids, tokens), the guarded workflow keyed by workflow id + function call
id; then under the lab as a user's worker command (recognised from its payloads: Strands names its
model activity `invoke_model` too): chaos kills it on any activity start, model
requests included, and the guarded agent sends each email once; the blind one's tool is named at risk
with its call id (`--verify --workflow` on the guarded one passes by hand; it stays out of the suite,
a minute beside other labs). Every process is stopped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from agent_examples import (
    EXAMPLES,
    ExampleWorker,
    UnderTheLab,
    example_worker,
    expected_lines,
    sent,
    turns_sent_twice,
)
from checkpoint_tui.frameworks import ActivitySeen, classify

WORKER = EXAMPLES / "google_adk_mailer" / "worker.py"
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls
_homes = count()


@pytest.fixture(scope="module")
def example(session_root: Path, temporal_address: str) -> Iterator[ExampleWorker]:
    """The example's worker, started once for the module on its own task queue; stopped at the end."""
    yield from example_worker(session_root, temporal_address, WORKER, "google-adk")


def made_ids(seen: list[ActivitySeen]) -> list[str]:
    """The function call ids the model requests made, read straight from their results."""
    return [
        p["function_call"]["id"]
        for s in seen
        if s.activity_type == "invoke_model"
        for r in s.result
        for p in r["content"]["parts"]
        if "function_call" in p
    ]


async def test_ten_turns_are_21_activities_classified_as_models_and_tool_calls(example: ExampleWorker) -> None:
    handle, result, seen = await example.run("GoogleAdkMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
    assert result == "sent 10 emails to ops@example.com"
    units = classify("google-adk", seen)
    assert [u.cls for u in units] == ["model", "tool"] * 10 + ["model"]
    models, tools = units[::2], units[1::2]
    assert {u.label for u in models} == {"model · scripted-mailer"} and {u.summary for u in models} == {"mailer"}
    assert all(isinstance(u.tokens, int) and u.tokens > 0 for u in models)  # the responses' usage_metadata
    assert {u.name for u in tools} == {"send_email"} and [u.call_id for u in tools] == made_ids(seen)
    assert len({u.call_id for u in tools}) == len({u.args_digest for u in tools} - {None}) == 10
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 10)


async def test_guarded_run_keys_each_send_by_its_function_call_id(example: ExampleWorker) -> None:
    handle, _, seen = await example.run("GoogleAdkMailerGuarded", {"turns": 3, "pace": 0.02, "think": 0.01})
    tools = [u for u in classify("google-adk", seen) if u.cls == "tool"]
    call_ids = made_ids(seen)
    assert [u.call_id for u in tools] == call_ids and {u.name for u in tools} == {"send_email_guarded"}
    snapshots = [s.args[-1] for s in seen if s.activity_type == "send_email_guarded"]
    assert snapshots == [{"state": {}, "function_call_id": c} for c in call_ids]  # ADK's ToolContextSnapshot
    assert example.effects(handle.id) == {f"key:google-adk:{handle.id}:{c}": "applied" for c in call_ids}
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 3)


# --- under the lab -----------------------------------------------------------------------------------


LAB = UnderTheLab(WORKER, "adk")


def chaos(home: Path, workflow: str, seed: int, aim: str, *, address: str) -> tuple:
    """`chaos` on the session's server, stopped and proven gone even on failure."""
    inp = {"turns": TURNS, "pace": 0.3, "think": 0.2}
    return LAB.chaos(home, workflow, inp, "--aim", aim, "--seed", str(seed), address=address)


def test_the_guarded_agent_survives_chaos_aimed_anywhere_with_each_email_once(session_root, temporal_address):
    home = session_root / f"adk-guarded-{next(_homes)}"
    out, report = chaos(home, "GoogleAdkMailerGuarded", 1, "any", address=temporal_address)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert Counter(sent(home, report["run_id"]).values()) == Counter({1: TURNS})  # every email once
    assert audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["framework"] == "google-adk"  # recognised from its payloads, not taken for Strands'
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert all(
        r["tool"] == "send_email_guarded" and r["call_id"].startswith("call_") for r in audit["guarded_re_executed"]
    )
    assert all(r["label"] == "model · scripted-mailer" for r in audit["model_reruns"])
    assert [k for k in report["kills"] if k["kind"] == "worker-in-activity"]
    assert "verdict: PASS" in out.stdout


def test_the_blind_agents_tool_is_named_at_risk_with_its_call(session_root, temporal_address):
    home = session_root / f"adk-blind-{next(_homes)}"
    out, report = chaos(home, "GoogleAdkMailer", 3, "tool", address=temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"].startswith("call_") and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    twice = turns_sent_twice(sent(home, report["run_id"]))
    assert twice <= {str(r["seq"] // 2) for r in audit["at_risk"]}  # model, tool, ...: tool k is activity 2k
