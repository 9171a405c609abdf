"""The Strands mailer of examples/agents (Strands on `temporalio.strands_agents`, an offline scripted
model), for real: run on the session's dev server, its histories classified (model requests, tool
calls with their toolUseIds, tokens), the guarded workflow keyed by workflow id + toolUseId and a
reset between a model request and its tool call keeping that key; then under the lab as a user's
worker command: chaos kills it on any activity start, model requests included, and the guarded agent
sends each email once; the blind one's tool is named at risk with its toolUseId (`--verify --workflow`
on the guarded one passes by hand and stays out of the suite). Real dev servers (each lab
home its own: chaos kills it), real worker processes; every process is stopped, and proved gone, even
on failure."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agent_examples import (
    EXAMPLES,
    ExampleWorker,
    UnderTheLab,
    example_worker,
    expected_lines,
    finished,
    sent,
    turns_sent_twice,
)
from checkpoint_tui.frameworks import ActivitySeen, classify, detect

WORKER = EXAMPLES / "strands_mailer" / "worker.py"
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls
_homes = count()


@pytest.fixture(scope="module")
def example(session_root: Path, temporal_address: str) -> Iterator[ExampleWorker]:
    """The example's worker, started once for the module on its own task queue; stopped at the end,
    even on failure."""
    yield from example_worker(session_root, temporal_address, WORKER, "strands")


def streamed_ids(seen: list[ActivitySeen]) -> list[str]:
    """The toolUseIds the model requests made, read straight from their stream events (not by the classifier)."""
    return [
        e["contentBlockStart"]["start"]["toolUse"]["toolUseId"]
        for s in seen
        if s.activity_type == "invoke_model"
        for e in s.result
        if "toolUse" in e.get("contentBlockStart", {}).get("start", {})
    ]


# --- the example, for real ---------------------------------------------------------------------------


async def test_ten_turns_are_21_activities_classified_as_models_and_tool_calls(example: ExampleWorker) -> None:
    handle = await example.start("StrandsMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
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


async def test_guarded_run_hands_each_tool_its_call_and_writes_each_line_once(example: ExampleWorker) -> None:
    handle = await example.start("StrandsMailerGuarded", {"turns": 3, "pace": 0.02, "think": 0.01})
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
    assert example.effects(handle.id) == {f"key:strands:{handle.id}:{c}": "applied" for c in call_ids}
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 3)


async def test_a_reset_after_a_model_request_keeps_its_call_and_the_model_makes_new_ones(
    example: ExampleWorker,
) -> None:
    """Measured: a reset to the workflow task after the first model request keeps that request's
    result (its toolUseId: the tool re-runs `skipped`) and re-runs the second request, whose id is new
    (a new key: `applied`; the file still holds one copy, by the write's own check)."""
    handle = await example.start("StrandsMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    _, before = await finished(handle)
    old = [u.call_id for u in classify("strands", before) if u.cls == "tool"]
    reason = "test: reset between a model request and its tool call"
    _, seen = await finished(await example.reset_after_first_model(handle, "invoke_model", reason))
    new = [u.call_id for u in classify("strands", seen) if u.cls == "tool"]
    assert new[0] == old[0] and new[1] != old[1]
    key = f"key:strands:{handle.id}:"
    assert example.effects(handle.id) == {
        key + old[0]: "applied,skipped",
        key + old[1]: "applied",
        key + new[1]: "applied",
    }
    assert Counter(example.lines(handle.id)) == expected_lines(handle.id, 2)


@pytest.mark.parametrize("inp", [{"turns": 0}, {"think": 6}, {"extra": 1}, [1]])
async def test_bad_input_fails_the_workflow_at_once(example: ExampleWorker, inp: object) -> None:
    handle = await example.start("StrandsMailerGuarded", inp)
    with pytest.raises(WorkflowFailureError) as failure:
        await finished(handle)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BadInput" and cause.non_retryable


# --- under the lab -----------------------------------------------------------------------------------


LAB = UnderTheLab(WORKER, "strands")


def chaos(home: Path, workflow: str, seed: int, aim: str, ledger: str | None = None, *, address: str) -> tuple:
    """`chaos` on the session's server, stopped and proven gone even on failure."""
    inp = {"turns": TURNS, "pace": 0.3, "think": 0.2}
    return LAB.chaos(home, workflow, inp, "--aim", aim, "--seed", str(seed), ledger=ledger, address=address)


# Seed 1 aims its two worker kills at model requests (activities 3 and 5), seed 3 at tool calls (2 and
# 4); seeds 1-5 all pass by hand (see the example's README).
@pytest.mark.parametrize(("seed", "backend", "killed"), [(1, "sqlite", "model"), (3, "postgresql", "tool")])
def test_the_guarded_agent_survives_chaos_aimed_anywhere_with_each_email_once(
    seed, backend, killed, session_root, request, temporal_address
):
    home = session_root / f"strands-guarded-{next(_homes)}"
    ledger = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    out, report = chaos(home, "StrandsMailerGuarded", seed, "any", ledger, address=temporal_address)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert Counter(sent(home, run_id).values()) == Counter({1: TURNS})  # every email once
    assert report["framework"] == audit["framework"] == "strands"
    assert audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert all(
        r["class"] == "tool" and r["tool"] == "send_email_guarded" and r["call_id"].startswith("tooluse_")
        for r in audit["guarded_re_executed"]
    )
    assert all(r["class"] == "model" and r["label"] == "model · scripted-mailer" for r in audit["model_reruns"])
    worker_kills = [k for k in report["kills"] if k["kind"] == "worker-in-activity"]
    assert worker_kills and {k["class"] for k in worker_kills} == {killed}
    # a kill that landed inside an activity made it run again: a model request re-run (reported apart)
    # or a tool call re-run through the effects library (guarded)
    again = {r["seq"] for r in audit["model_reruns"] + audit["guarded_re_executed"]}
    assert {k["step"] for k in worker_kills if k["landed"] == "inside"} <= again, (worker_kills, again)
    assert "verdict: PASS" in out.stdout and "strands: 6 model requests, 5 tool calls" in out.stdout


def test_the_blind_agents_tool_is_named_at_risk_with_its_call_and_its_duplicates_match(session_root, temporal_address):
    home = session_root / f"strands-blind-{next(_homes)}"
    out, report = chaos(home, "StrandsMailer", 3, "tool", address=temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0 and audit["framework"] == "strands"
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"].startswith("tooluse_") and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # the mail file: each email sent twice was predicted at risk (a kill before the send re-runs it too)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = turns_sent_twice(lines)
    at_risk_turns = {str(r["seq"] // 2) for r in audit["at_risk"]}  # model, tool, model, ...: tool k is activity 2k
    assert twice <= at_risk_turns, (twice, at_risk_turns)
