"""The Deep Agents mailer (examples/agents/deepagents_mailer), unmodified, under the lab through the CLI:
chaos on the guarded agent, kills in model requests included, sends each email once and passes; on the
blind agent it names the `send_email` tool and its call id at risk and fails (`--verify --workflow` on
the guarded agent, 13/13 by hand, stays out of the suite: it costs about a minute
beside other labs). Real dev servers, real worker processes, Deep Agents with its offline model."""

from __future__ import annotations

from collections import Counter
from itertools import count
from pathlib import Path

from agent_examples import EXAMPLES, UnderTheLab, sent, turns_sent_twice

LAB = UnderTheLab(EXAMPLES / "deepagents_mailer" / "worker.py", "da")
TURNS = 5  # 11 activities: 6 model requests, 5 tool calls; a seed's 4 events land on activity starts 2-5
_homes = count()


def chaos(home: Path, workflow: str, aim: str, seed: int, *, address: str) -> tuple:
    """`chaos` on the session's server, stopped and proven gone even on failure."""
    inp = {"turns": TURNS, "pace": 0.3, "think": 0.2}
    return LAB.chaos(home, workflow, inp, "--aim", aim, "--seed", str(seed), timeout=120, address=address)


def test_chaos_on_the_guarded_agent_sends_each_email_once_and_passes(session_root, temporal_address):
    home = session_root / f"da-guarded-{next(_homes)}"
    out, report = chaos(
        home, "DeepAgentsMailerGuarded", "any", 1, address=temporal_address
    )  # seed 1: kills inside model requests too
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


def test_chaos_on_the_blind_agent_names_the_tool_and_its_call_at_risk(session_root, temporal_address):
    home = session_root / f"da-blind-{next(_homes)}"
    out, report = chaos(home, "DeepAgentsMailer", "tool", 3, address=temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0 and audit["framework"] == "deepagents"
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"] and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK: #" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # each email sent twice was named at risk (tool k is activity 2k: model, tool, model, tool, ...)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = turns_sent_twice(lines)
    assert twice <= {str(r["seq"] // 2) for r in audit["at_risk"]}, (twice, audit["at_risk"])
