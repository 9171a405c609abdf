"""Chaos across every process, on both workloads (our loop and a user's workflow: the `lab` fixture)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict

import pytest

from bundle_checks import assert_bundle, assert_junit_matches
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.proof.chaos.kill_windows import window_cases
from checkpoint_tui.proof.chaos.schedule import REQUIRED
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from checkpoint_tui.workloads import AgentLoopWorkload, Counts, UserWorkflow
from conftest import alive, run_cli


def test_schedule_is_reproducible_and_covers_every_process(lab):
    """The same seed, the same schedule, on either workload's units; each hits the supervisor and the dev
    server, and our loop's the claim window too (a user's workflow has no hook: a kill in an activity)."""
    workload = AgentLoopWorkload(30) if lab.kind == "agent-loop" else UserWorkflow("SendLines")
    a, units = workload.chaos_schedule(42, Counts(kills=10))
    assert (a, units) == workload.chaos_schedule(42, Counts(kills=10))
    assert a != workload.chaos_schedule(43, Counts(kills=10))[0]
    kinds = {e.kind for e in a}
    assert {"supervisor", "temporal-server"} <= kinds and len(a) == 10
    assert set(REQUIRED) <= kinds or lab.kind == "workflow"
    assert all(2 <= e.step < units for e in a) and len({e.step for e in a}) == 10


# A user's workflow on SQLite only: its PostgreSQL path is the same store (a user's workflow runs chaos
# on PostgreSQL in test_user_workflow_chaos.py and test_agents_lab.py), and each of these is most of a
# minute of the suite's twelve.
@pytest.mark.parametrize(
    ("lab", "ledger_target"),
    [("agent-loop", "sqlite"), ("agent-loop", "postgresql"), ("workflow", "sqlite")],
    indirect=True,
)
def test_short_chaos_schedule_loses_and_duplicates_nothing(lab, ledger_target, session_root):
    """A seeded schedule of six SIGKILLs (inside units of work, between them, the supervisor, the dev
    server), on each workload and each ledger: the run completes with nothing lost or duplicated, the
    JUnit file counts what the report counts, and `status` reads the same run back."""
    home = lab.home(session_root, "chaos")  # its own dev server: chaos kills it
    pg = ledger_target if ledger_target.startswith("postgres") else None
    junit, bundle, path = home / "chaos.xml", home / "proof", home / "chaos.json"
    proof = ["--proof", str(bundle)] if lab.bundles else []
    try:
        out = run_cli(
            *lab.flags(home, pg),
            "chaos",
            *lab.run_flags(12),
            "--seed",
            "3",
            "--kills",
            "6",
            "--junit",
            str(junit),
            "--json",
            str(path),
            *proof,
            timeout=240,
        )
        report = json.loads(path.read_text())
        status = run_cli(*lab.flags(home, pg), "status", report["run_id"], "--json")
        text = run_cli(*lab.flags(home, pg), "status", report["run_id"])
    finally:
        lab.stop(home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    # what it left running is said, each process by pid, and `stop` ended every one of them
    left = [line for line in out.stdout.splitlines() if line.startswith("left running for the next chaos")]
    assert len(left) == 1 and f"--home {home} stop" in left[0], out.stdout[-2000:]
    kept = {int(pid): role for role, pid in re.findall(r"(dev server|active|spare) (\d+)", left[0])}
    assert "dev server" in kept.values() and ("active" in kept.values()) == (lab.kind == "agent-loop"), left
    assert wait_until_sync(lambda: not any(alive(pid) for pid in kept), 10), left
    assert (report["workload"], report["unit"]) == (lab.kind, lab.unit)
    audit, checks = report["audit"], report["checks"]
    assert audit["ok"] and audit["workflow_status"] == "COMPLETED" and (audit["lost"], audit["duplicated"]) == (0, 0)
    assert checks and all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]
    kinds = {k["kind"] for k in report["kills"]}
    assert {"supervisor", "temporal-server"} <= kinds and len(report["kills"]) + len(report["not_fired"]) >= 5
    # one JUnit case per check and one per kill window, each window counted from the run's history
    cases = checks + [asdict(c) for c in window_cases(report)]
    assert report["windows"] and sum(report["windows"].values()) == len(report["kill_windows"]) >= 1
    assert_junit_matches(junit, cases)
    assert "seed=3" in out.stdout and "LOST 0 · DUPLICATED 0" in out.stdout and "verdict: PASS" in out.stdout
    lab.each_effect_once(home, report["run_id"], 12)
    # status reads the run back as its own workload, from the ledger and Temporal
    assert status.returncode == text.returncode == 0, status.stderr + text.stderr
    doc = json.loads(status.stdout)
    assert (doc["run_id"], doc["workflow_status"], doc["duplicates"]) == (report["run_id"], "COMPLETED", 0)
    assert doc["ledger_rows"] >= 12 and "COMPLETED" in text.stdout and "run completed" in text.stdout
    if lab.bundles:  # its histories (SIGKILLs inside activities, in the claim window, of the dev server) replay
        assert assert_bundle(bundle, checks, cases) == [report["run_id"]]
        assert audit["interrupted"] >= 1 and audit["recovered"] >= 1  # the claim-window crash was finished
    if pg:  # the workers wrote to PostgreSQL, not to a SQLite file
        assert not (home / "run" / "checkpoint.db").exists()


def test_chaos_over_four_concurrent_runs_keeps_each_exactly_once(lab, session_root):
    """#29's line, `chaos --seed 9 --steps 12 --kills 5 --runs 4`, on each workload. Four runs on the same
    workers under one schedule (the first places the events, so each kill interrupts whatever of the four
    the worker held); every run COMPLETED, nothing lost or duplicated in any, no effect id twice."""
    home = lab.home(session_root, "chaos-runs")  # its own dev server: chaos kills it
    report_path = home / "r.json"
    try:
        out = run_cli(
            *lab.flags(home),
            "chaos",
            *lab.run_flags(12),
            "--seed",
            "9",
            "--kills",
            "5",
            "--runs",
            "4",
            "--json",
            str(report_path),
            timeout=300,
        )
        report = json.loads(report_path.read_text())
        conn = connect(Settings(home=home).ledger)
        dup = conn.execute("SELECT COUNT(*) - COUNT(DISTINCT id) FROM effects").fetchone()[0]
    finally:
        lab.stop(home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    runs = report["runs"]
    assert len(runs) == 4 and runs[0]["run_id"] == report["run_id"] and len({r["run_id"] for r in runs}) == 4
    for r in runs:
        a = r["audit"]
        assert a["ok"] and a["workflow_status"] == "COMPLETED" and (a["lost"], a["duplicated"]) == (0, 0)
        lab.each_effect_once(home, r["run_id"], 12)
    assert dup == 0
    t = report["totals"]
    assert (t["runs"], t["runs_completed"], t["lost"], t["duplicated"]) == (4, 4, 0, 0)
    assert len(report["checks"]) == sum(len(r["checks"]) for r in runs) and all(c["ok"] for c in report["checks"])
    assert len(report["kills"]) >= 3 and "4/4 runs COMPLETED" in out.stdout and "verdict: PASS" in out.stdout
    # a window classification per run: each worker death placed in each run, from that run's history
    deaths = {(k["pid"], k["at"]) for k in report["kill_windows"]}
    assert deaths and len(report["kill_windows"]) == 4 * len(deaths)
    for r in runs:
        assert {(k["pid"], k["at"]) for k in report["kill_windows"] if k["run_id"] == r["run_id"]} == deaths
        assert f"    {r['run_id']}: " in out.stdout
    assert "worker deaths, each placed in 4 runs)" in out.stdout


async def test_an_event_with_nothing_to_hit_is_reported_not_fired(lab, tmp_path):
    """Between a worker's death and its replacement there may be no worker to kill, pause or hang (a
    fresh-clone run on a loaded machine fired 5 of 6 kills and reported 5 + 0): on either workload the
    event is listed in `not_fired` with why, never dropped."""
    from checkpoint_tui.proof.chaos.engine import Chaos
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent
    from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow

    workload = AgentLoopWorkload(6, 0.3) if lab.kind == "agent-loop" else UserWorkflow("SendLines")
    chaos = Chaos(Settings(home=tmp_path / "empty"), 1, 6, [], workload.chaos_target(1))  # nothing of this home runs
    events = [
        ChaosEvent(2, "worker-in-activity", 0),
        ChaosEvent(3, "pause", 0, duration_s=0.5),
        ChaosEvent(4, "hang", 0),
        ChaosEvent(5, "temporal-server", 0),
    ]
    for ev in events:
        await chaos.fire(ev, "run-20261202-120000-abcd")
    assert [(e.event["at_step"], e.why) for e in chaos.not_fired] == [
        (2, "no live worker at that moment"),
        (3, "no live worker at that moment"),
        (4, "no live worker at that moment"),
        (5, "no dev server of this home was running"),
    ]
    assert chaos.kills == chaos.pauses == []
