"""The after-action report's drain checks and checklist read the chaos report as it is (#40): a backlog
that never formed passes, one slower than --max-drain-s fails naming its figure, and a lost unit shows
in the experiment's section and its checklist item."""

from __future__ import annotations

from pathlib import Path

from checkpoint_tui.proof.gameday.report import after_action, scenario_checks
from checkpoint_tui.proof.gameday.run import Experiment
from checkpoint_tui.proof.gameday.scenarios import plan
from checkpoint_tui.settings import FleetMember, Settings


def _report(events: list[dict], lost: list[str] = (), task_failures: list[str] = ()) -> dict:
    """A chaos report's JSON: `lost` activity timeouts, `task_failures` workflow tasks still failing."""
    units = [*lost, *task_failures]
    failing = [{"name": "chaos: no lost work (...)", "ok": not units, "observed": "; ".join(units)}]
    work = {
        "units": units,
        "timeouts": [{"lost": True, "line": u} for u in lost],
        "task_failures": [{"lost": True, "line": u} for u in task_failures],
    }
    return {
        "checks": failing,
        "fleet": {"backlog": {"samples": 10, "peak": 5, "events": events}},
        "audit": {"run_id": "run-1", "lost_work": work},
    }


def test_drain_checks_pass_with_no_backlog_and_fail_past_the_bound():
    checks = scenario_checks(
        _report(
            [
                {"name": "fleet-down", "peak": 0, "drain_s": None},
                {"name": "fleet-down", "peak": 5, "drain_s": 3.2},
                {"name": "deploy", "peak": 4, "drain_s": 90.0},
                {"name": "churn", "peak": 2, "drain_s": None},
            ]
        ),
        60.0,
    )
    drains = [c for c in checks if c.name.startswith("gameday: backlog drains")]
    assert [c.ok for c in drains] == [True, True, False, False]
    assert "no backlog" in drains[0].observed and "drained 90.0 s" in drains[2].observed
    assert "never drained" in drains[3].observed


def test_the_after_action_report_names_what_was_lost(tmp_path: Path):
    settings = Settings(
        home=tmp_path,
        task_queue_name="wf",
        worker_cmd=("python", "wf.py"),
        fleet=(FleetMember("acts", ("python", "acts.py")),),
    )
    scenarios = {s.name: s for s in plan(settings, [], 2, 5.0, 5.0)}
    assert scenarios["deploy"].skipped and scenarios["dependency"].skipped  # no --deploy, no --dependency
    held = Experiment(scenarios["kill-all"], 1.0, 20.0, _report([{"name": "fleet-down", "peak": 3, "drain_s": 1.5}]))
    held.checks = scenario_checks(held.report, 60.0)
    unit = "send_receipt #2 timed out for good: its START_TO_CLOSE timeout (2.0 s) after a churn restart"
    lost = Experiment(scenarios["churn"], 20.0, 30.0, _report([], [unit]))
    lost.checks = scenario_checks(lost.report, 60.0)
    md, doc = after_action([held, lost, Experiment(scenarios["deploy"])], "FleetMailer", settings, 60.0)
    assert doc["verdict"] == "FAIL" and [e["held"] for e in doc["experiments"]] == [True, False, True]
    assert f"- lost: run-1: {unit}" in md and "| churn |" in md and "skipped: no --deploy" in md
    assert "after fleet-down: peak 3, drained in 1.5 s" in md
    # #51 item 2: a lost activity timeout is an activity retry that did not behave, not a workflow task failure
    checklist = md.split("## Recovery checklist", 1)[1].split("\n## ", 1)[0]
    assert "- No permanent Workflow Task failures (no workflow task still failing at the end): held" in checklist
    assert "- Activity retries behave as expected (" in checklist and "): **not held** in churn" in checklist
    assert "graceful" in md.split("## What to change", 1)[1]  # the advice for a rollout that lost tasks
    stuck = Experiment(scenarios["kill-all"], 1.0, 20.0, _report([], task_failures=["workflow task failing: NDE"]))
    stuck.checks = scenario_checks(stuck.report, 60.0)
    md, _ = after_action([stuck], "FleetMailer", settings, 60.0)
    assert (
        "- No permanent Workflow Task failures (no workflow task still failing at the end): **not held** in kill-all"
        in md
    )
    assert (
        "- Activity retries behave as expected (no task lost to a graceful stop, no duplicate, nothing at risk): held"
        in md
    )


def test_the_parsers_scenario_names_are_the_plans():
    """--help lists the scenarios from cli/gameday.py's copy (the parser imports no proof/ module):
    the same names, in the same order, as the plan runs them."""
    from checkpoint_tui.cli.gameday import SCENARIOS
    from checkpoint_tui.proof.gameday.scenarios import NAMES

    assert SCENARIOS == NAMES
