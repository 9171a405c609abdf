"""The LangGraph mailer (examples/agents/langgraph_mailer), unmodified, under the lab through the CLI:
chaos on the guarded graph, kills in model nodes included, sends each email once and passes; on the
blind graph it names the `send_email` tool and its call id at risk and fails. Real dev servers, real
worker processes, LangGraph with its offline model. `--verify --workflow` on the guarded graph (and on
every other framework's guarded mailer) passes by hand and stays out of the suite: a minute each of
its twelve; test_verify.py runs the same harness on the example project's workflow."""

from __future__ import annotations

from collections import Counter
from itertools import count
from pathlib import Path

import pytest

from agent_examples import EXAMPLES, UnderTheLab, sent, turns_sent_twice

LAB = UnderTheLab(EXAMPLES / "langgraph_mailer" / "worker.py", "lg")
TURNS = 5  # 11 activities: 6 model nodes, 5 tools nodes; a seed's 4 events land on activity starts 2-5
_homes = count()


def chaos(home: Path, workflow: str, aim: str, seed: int, *, address: str) -> tuple:
    """`chaos` on the session's server, stopped and proven gone even on failure."""
    inp = {"turns": TURNS, "pace": 0.3, "think": 0.2}
    return LAB.chaos(home, workflow, inp, "--aim", aim, "--seed", str(seed), timeout=120, address=address)


@pytest.mark.parametrize("seed", [1, 3])  # 1: a kill inside a model node; 3: kills inside tools nodes
def test_chaos_on_the_guarded_graph_sends_each_email_once_and_passes(seed, session_root, temporal_address):
    home = session_root / f"lg-guarded-{next(_homes)}"
    out, report = chaos(home, "LangGraphMailerGuarded", "any", seed, address=temporal_address)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert Counter(sent(home, run_id).values()) == Counter({1: TURNS})  # every email once
    assert audit["framework"] == "langgraph" and audit["tool_calls"] == TURNS and audit["model_requests"] == TURNS + 1
    assert audit["at_risk"] == [] and audit["never_ran"] == [], audit["re_executed"]
    assert "model" in {k["class"] for k in report["kills"]}  # events aimed at model nodes too
    assert all(
        r["class"] == "tool" and r["tool"] == "send_email" and r["call_id"].startswith("call_")
        for r in audit["guarded_re_executed"]
    )
    assert all(r["class"] == "model" and r["label"] == "model · mailer_guarded.agent" for r in audit["model_reruns"])
    # a worker killed inside an activity re-ran it: a model node apart, a tools node guarded
    inside = [k for k in report["kills"] if k["kind"] == "worker-in-activity" and k["landed"] == "inside"]
    reran = {r["seq"]: r["class"] for r in audit["re_executed"]}
    assert all(reran.get(k["step"]) == k["class"] for k in inside), (inside, reran)
    assert "verdict: PASS" in out.stdout


def test_chaos_on_the_blind_graph_names_the_tool_and_its_call_at_risk(session_root, temporal_address):
    home = session_root / f"lg-blind-{next(_homes)}"
    out, report = chaos(home, "LangGraphMailer", "tool", 3, address=temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0 and audit["framework"] == "langgraph"
    assert audit["at_risk"] and {r["tool"] for r in audit["at_risk"]} == {"send_email"}
    assert all(r["call_id"].startswith("call_") and r["attempt"] >= 2 for r in audit["at_risk"])
    assert "AT RISK: #" in out.stdout and "tool · send_email · call " in out.stdout and "verdict: FAIL" in out.stdout
    # each email sent twice was named at risk (tool k is activity 2k: model, tool, model, tool, ...)
    lines = sent(home, run_id)
    assert len(lines) == TURNS
    twice = turns_sent_twice(lines)
    assert twice <= {str(r["seq"] // 2) for r in audit["at_risk"]}, (twice, audit["at_risk"])
