"""The Deep Agents mailer (examples/agents/deepagents_mailer), unmodified, under the lab through the CLI:
chaos on the guarded agent, kills in model requests included, sends each email once and passes; on the
blind agent it names the `send_email` tool and its call id at risk and fails; `--verify --workflow`
passes on the guarded agent. Real dev servers, real worker processes, Deep Agents with its offline model."""

from __future__ import annotations

import json
import shlex
import sys
from collections import Counter
from itertools import count
from pathlib import Path

from conftest import run_cli
from test_user_workflow_lab import stop_lab

WORKER = Path(__file__).resolve().parents[1] / "examples" / "agents" / "deepagents_mailer" / "worker.py"
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls; a seed's 4 events land on activity starts 2-5
_homes = count()


def lab(home: Path, *more: str) -> list[str]:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(WORKER))}"
    return ["--home", str(home), *more, "--worker-cmd", cmd, "--task-queue", f"da-{home.name}"]


def chaos(home: Path, workflow: str, aim: str, seed: int) -> tuple:
    """`chaos` on its own home (it kills the dev server too), stopped and proven gone even on failure."""
    report_path = home / "chaos.json"
    try:
        out = run_cli(*lab(home), "chaos", "--workflow", workflow, "--input",
                      json.dumps({"turns": TURNS, "pace": 0.3, "think": 0.2}), "--aim", aim, "--seed", str(seed),
                      "--kills", "4", "--json", str(report_path), timeout=120)  # fmt: skip
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    finally:
        stop_lab(home)
    assert report is not None, out.stdout[-3000:] + out.stderr[-2000:]
    return out, report


def sent(home: Path, run_id: str) -> Counter:
    return Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())


def test_chaos_on_the_guarded_agent_sends_each_email_once_and_passes(session_root):
    home = session_root / f"da-guarded-{next(_homes)}"
    out, report = chaos(home, "DeepAgentsMailerGuarded", "any", 1)  # seed 1: kills inside model requests too
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert Counter(sent(home, run_id).values()) == Counter({1: TURNS})  # every email once
    assert audit["framework"] == "deepagents" and audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert "model" in {k["class"] for k in report["kills"]}  # events aimed at model requests too
    assert all(
        r["class"] == "tool" and r["tool"] == "send_email" and r["call_id"] for r in audit["guarded_re_executed"]
    )
    assert all(r["class"] == "model" and r["label"] == "model · scripted-mailer" for r in audit["model_reruns"])
    assert "verdict: PASS" in out.stdout


def test_chaos_on_the_blind_agent_names_the_tool_and_its_call_at_risk(session_root):
    home = session_root / f"da-blind-{next(_homes)}"
    out, report = chaos(home, "DeepAgentsMailer", "tool", 3)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0 and audit["framework"] == "deepagents"
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"] and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK: #" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # each email sent twice was named at risk (tool k is activity 2k: model, tool, model, tool, ...)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = {line.rsplit(" ", 1)[1] for line, n in lines.items() if n > 1}
    assert twice <= {str(r["seq"] // 2) for r in audit["at_risk"]}, (twice, audit["at_risk"])


def test_verify_passes_on_the_guarded_agent(session_root, temporal_address):
    home = session_root / f"da-verify-{next(_homes)}"
    report_path = home / "verify.json"
    try:
        out = run_cli(*lab(home, "--temporal-address", temporal_address), "--verify", "--workflow",
                      "DeepAgentsMailerGuarded", "--input", json.dumps({"turns": 2, "pace": 0.3, "think": 0.2}),
                      "--json", str(report_path), timeout=120)  # fmt: skip
    finally:
        stop_lab(home / "run" / "verify")  # nothing of the verify home is left running
        stop_lab(home)
    assert out.returncode == 0 and "ALL CHECKS PASS" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert report["passed"] == report["total"] and report["total"] >= 12
    audits = [c for c in report["checks"] if "COMPLETED, nothing lost" in c["name"]]
    assert len(audits) == 3 and all("at_risk=0" in c["observed"] for c in audits)
