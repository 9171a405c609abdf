"""Agents, unmodified, under the lab: the pydantic-ai and OpenAI Agents SDK mailers of examples/agents
run as a user's worker command, chaos kills them on activity starts picked by --aim (no --steps), and
the audit names the tool, its call id and what was guarded or at risk, with model requests reported
apart. Real dev servers, real worker processes, the real frameworks with their offline models."""

from __future__ import annotations

import json
import sys
from collections import Counter
from itertools import count
from pathlib import Path

import pytest

from conftest import run_cli, worker_flags
from test_user_workflow_lab import stop_lab

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "agents"
WORKERS = {
    "pydantic-ai": EXAMPLES / "pydantic_ai_mailer" / "worker.py",
    "openai-agents": EXAMPLES / "openai_agents_mailer" / "worker.py",
}
WORKFLOWS = {"pydantic-ai": "PydanticMailer", "openai-agents": "OpenAIMailer"}
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls; the 4 events land on tool starts 2-5
_homes = count()


def lab(framework: str, home: Path, ledger: str | None = None, address: str | None = None) -> list[str]:
    """A home running the framework's example as its worker command; `address`: a server it did not start."""
    return worker_flags(home, WORKERS[framework], "agents", address=address, ledger=ledger)


def chaos(
    framework: str,
    home: Path,
    workflow: str,
    *extra: str,
    address: str,
    ledger: str | None = None,
    think: float = 0.2,
) -> tuple:
    """`chaos --kills 4` on the session's server (not this home's: its seeded schedule kills no server)."""
    report_path = home / "chaos.json"
    try:
        out = run_cli(
            *lab(framework, home, ledger, address),
            "chaos",
            "--workflow",
            workflow,
            "--input",
            json.dumps({"turns": TURNS, "pace": 0.3, "think": think}),
            "--seed",
            "3",
            "--kills",
            "4",
            "--json",
            str(report_path),
            *extra,
            timeout=240,
        )
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    finally:
        stop_lab(home)
    assert report is not None, out.stdout[-3000:] + out.stderr[-2000:]
    return out, report


def sent(home: Path, run_id: str) -> Counter:
    return Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())


@pytest.mark.parametrize(("framework", "backend"), [("pydantic-ai", "sqlite"), ("openai-agents", "postgresql")])
def test_a_guarded_agent_survives_chaos_aimed_at_its_tools_with_each_email_once(
    framework, backend, session_root, temporal_address, request
):
    home = session_root / f"agents-guarded-{next(_homes)}"
    ledger = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    out, report = chaos(
        framework, home, WORKFLOWS[framework] + "Guarded", "--aim", "tool", address=temporal_address, ledger=ledger
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert Counter(sent(home, run_id).values()) == Counter({1: TURNS})  # every email once
    assert audit["framework"] == framework and audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["at_risk"] == [], audit["re_executed"]
    assert all(
        r["class"] == "tool" and r["tool"].startswith("send_email") and r["call_id"]
        for r in audit["guarded_re_executed"]
    )
    # the seeded claim-window kill is the hop's crash point after the tool's effect (proof/nemeses/hop.py); a
    # timed in-activity kill is placed over the tool's usual duration
    worker_kills = [k for k in report["kills"] if k["kind"] in ("worker-in-activity", "worker-after-effect")]
    assert worker_kills and all(k["label"].startswith("tool · send_email") for k in worker_kills)
    assert any(k["kind"] == "worker-after-effect" and k["window"].startswith("after its effect") for k in worker_kills)
    assert all(
        k.get("into_s") is not None and k.get("usual_s") for k in worker_kills if k["kind"] == "worker-in-activity"
    )
    # a kill that landed inside a tool call and made it run again re-ran it guarded (one that came as
    # it completed, or after it closed, re-ran nothing or hit the next activity)
    guarded = {r["seq"] for r in audit["guarded_re_executed"]}
    assert {k["step"] for k in worker_kills if k["landed"] == "inside"} <= guarded, (worker_kills, guarded)
    # a death inside the guarded tool is placed inside the effects library's protocol (its claims and
    # the probe log), not as `activity <type>`
    if any(k["landed"] == "inside" for k in worker_kills):
        inside = {"effect before its claim", "claim → write", "write → stamp", "stamped, activity not completed"}
        assert inside & set(report["windows"]), report["windows"]
    assert "verdict: PASS" in out.stdout and f"model requests {len(audit['model_reruns'])}" in out.stdout


@pytest.mark.parametrize("framework", ["pydantic-ai", "openai-agents"])
def test_an_unguarded_agent_tool_is_named_at_risk_and_its_duplicates_match(framework, session_root, temporal_address):
    home = session_root / f"agents-blind-{next(_homes)}"
    out, report = chaos(framework, home, WORKFLOWS[framework], "--aim", "tool", address=temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"] and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # the mail file: each email sent twice was predicted at risk (a kill before the send re-runs it too)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = {line.rsplit(" ", 1)[1] for line, n in lines.items() if n > 1}
    at_risk_turns = {str(turn) for turn in _turns_of(audit["at_risk"], audit)}
    assert twice <= at_risk_turns, (twice, at_risk_turns)


def _turns_of(entries: list[dict], audit: dict) -> list[int]:
    """The turn a tool call served: its rank among the run's tool calls (one per turn, in order)."""
    tools = sorted(r["seq"] for r in entries)
    return [(seq + 1) // 2 for seq in tools]  # model, tool, model, tool, ...: tool k is activity 2k


def test_model_requests_re_run_are_reported_apart_and_fail_only_when_strict(session_root, temporal_address):
    home = session_root / f"agents-model-{next(_homes)}"
    # the model thinks 1 s: a kill placed at 0.1-0.95 of a request's usual duration lands inside it (at
    # 0.5 s, beside two other labs on two cores, the one kill of a run came after its request had ended)
    out, report = chaos(
        "pydantic-ai", home, "PydanticMailerGuarded", "--aim", "model", address=temporal_address, think=1.0
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["model_reruns"] and audit["at_risk"] == [], audit["re_executed"]
    assert all(r["class"] == "model" for r in audit["model_reruns"])
    inside = [k for k in report["kills"] if k["kind"] == "worker-in-activity" and k["landed"] == "inside"]
    assert inside and all(k["class"] == "model" for k in inside)
    assert audit["tokens_paid_again"] > 0  # the re-run requests' usage, from their results in history
    assert f"model requests re-run {len(audit['model_reruns'])}" in out.stdout
    strict = [c for c in report["checks"] if c["name"].startswith("chaos: model requests")]
    assert strict and strict[0]["ok"]  # reported, not failing: --strict-models makes it fail (see below)


def test_strict_models_fails_the_verdict_from_the_same_audit():
    from checkpoint_tui.core.activity_audit import ActivityAudit

    rerun = {"seq": 3, "type": "agent__m__model_request", "attempt": 2, "class": "model", "label": "model · m"}
    lenient = ActivityAudit("r", "W", "COMPLETED", 3, 3, model_reruns=[rerun], re_executed=[rerun])
    strict = ActivityAudit("r", "W", "COMPLETED", 3, 3, strict_models=True, model_reruns=[rerun], re_executed=[rerun])
    assert lenient.ok and not strict.ok
    assert "nothing at risk" in (lenient.sentence() or "") and "--strict-models" in (strict.sentence() or "")


def test_an_activity_whose_arguments_never_decoded_never_ran_and_is_not_at_risk(tmp_path):
    from checkpoint_tui.core.activity_audit import audit_activities
    from checkpoint_tui.core.activity_history import ActivityExec
    from checkpoint_tui.ledger.store import connect

    broken = ActivityExec(
        1, 0, "e", "1", "takes_tool_context", 0.0, attempt=7, status="running", last_failure="Failed decoding arguments"
    )
    ok = ActivityExec(2, 0, "e", "2", "send_email", 0.0, attempt=1, status="completed")
    conn = connect(tmp_path / "ledger.db")
    a = audit_activities(conn, "r", "W", "FAILED", [broken, ok], None)
    assert [r["type"] for r in a.never_ran] == ["takes_tool_context"] and a.at_risk == []
    assert not a.ok and "never ran" in (a.sentence() or "")


async def test_the_app_names_the_agents_tool_and_marks_where_a_kill_resumed(session_root, temporal_address):
    """The app on the pydantic-ai mailer: model and tool rows by what they are, the worker pid and the
    resumed marker beside them, tokens from the model's usage, the inspector on a tool call."""
    from checkpoint_tui.core.session import LabSession
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.tui.app import CheckpointApp
    from checkpoint_tui.workloads import UserWorkflow
    from test_tui_live import cell_text, wait_for

    worker = WORKERS["pydantic-ai"]
    home = Settings(
        home=session_root / f"agents-app-{next(_homes)}",
        temporal_address=temporal_address,
        task_queue_name=f"agents-app-{next(_homes)}",
        worker_cmd=(sys.executable, str(worker)),
        worker_cwd=worker.parent,
    )
    home.ensure_dirs()
    workload = UserWorkflow("PydanticMailerGuarded", {"turns": 4, "pace": 0.6})
    session = LabSession(home, workload)
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None and session.client is not None, what="boot")
            await wait_for(pilot, lambda: session.supervisor.primary is not None, what="the worker", timeout=30)
            first = session.supervisor.primary
            await pilot.press("n")  # starts the workload the app was opened with: no step-count dialog
            await wait_for(pilot, lambda: session.run_id is not None, what="the run started")
            run_id = session.run_id
            assert "PydanticMailerGuarded" in app.query_one("#status").message
            timeline = app.query_one("#timeline")
            tool_running = lambda: timeline.row_count >= 2 and cell_text(timeline, "2", "status") == "running"  # noqa: E731
            await wait_for(pilot, tool_running, what="the first tool call running", timeout=60)
            await pilot.press("k")
            replaced = lambda: session.supervisor.primary is not None and session.supervisor.primary.pid != first.pid  # noqa: E731
            await wait_for(pilot, replaced, what="a replacement", timeout=30)
            done = lambda: timeline.row_count == 9 and cell_text(timeline, "9", "status") == "completed"  # noqa: E731
            await wait_for(pilot, done, what="every activity shown", timeout=90)
            assert cell_text(timeline, "1", "provider").startswith("model · ")
            assert cell_text(timeline, "2", "provider").startswith("tool · send_email · call ")
            assert cell_text(timeline, "1", "tokens").isdigit()  # the model's usage, from its result
            marks = [k for k in timeline.row_keys() if "resumed" in cell_text(timeline, k, "mark")]
            assert marks and all(cell_text(timeline, k, "pid") not in ("", str(first.pid)) for k in marks)
            info = app.query_one("#timeline-info")  # counts repaint at most once a second
            await wait_for(pilot, lambda: "9/9 activities completed" in info.plain, what="the count", timeout=10)
            status = app.query_one("#status")
            completion = lambda: "nothing at risk, lost or duplicated" in (status.completion or "")  # noqa: E731
            await wait_for(pilot, completion, what="the audit's completion sentence", timeout=30)
            detail = await session.step_detail(run_id, 2)
            assert detail is not None and "send_email" in (detail.answer_note or "") and detail.claims
    finally:
        await session.shutdown(stop_everything=True)


ALL_WORKERS = {
    **WORKERS,
    "langgraph": EXAMPLES / "langgraph_mailer" / "worker.py",
    "strands": EXAMPLES / "strands_mailer" / "worker.py",
}
GUARDED = {
    "pydantic-ai": "PydanticMailerGuarded",
    "openai-agents": "OpenAIMailerGuarded",
    "langgraph": "LangGraphMailerGuarded",
    "strands": "StrandsMailerGuarded",
}


@pytest.mark.parametrize("framework", sorted(ALL_WORKERS))
async def test_the_app_at_200x50_names_the_tool_for_every_framework(framework, session_root, temporal_address):
    """#38's line: the timeline names the tool call (and the model request) for each framework the lab
    knows, recognised from history with no --framework given."""
    from checkpoint_tui.core.session import LabSession
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.tui.app import CheckpointApp
    from checkpoint_tui.workloads import UserWorkflow
    from test_tui_live import cell_text, wait_for

    worker = ALL_WORKERS[framework]
    home = Settings(
        home=session_root / f"agents-tui-{framework}",
        temporal_address=temporal_address,
        task_queue_name=f"agents-tui-{framework}",
        worker_cmd=(sys.executable, str(worker)),
        worker_cwd=worker.parent,
    )
    home.ensure_dirs()
    session = LabSession(home, UserWorkflow(GUARDED[framework], {"turns": 2, "pace": 0}))
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None and session.client is not None, what="boot")
            await pilot.press("n")
            timeline = app.query_one("#timeline")
            done = lambda: timeline.row_count == 5 and cell_text(timeline, "5", "status") == "completed"  # noqa: E731
            await wait_for(pilot, done, what="2 turns: 3 model requests, 2 tool calls", timeout=60)
            assert cell_text(timeline, "1", "provider").startswith("model")
            assert cell_text(timeline, "2", "provider").startswith("tool · send_email")
            assert cell_text(timeline, "4", "provider").startswith("tool · send_email")
    finally:
        await session.shutdown(stop_everything=True)
