"""Chaos across every process, and the naive loop beside the durable one."""

from __future__ import annotations

import json
from dataclasses import asdict

from bundle_checks import assert_bundle, assert_junit_matches
from checkpoint_tui.app.comparison import read_comparison
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.proof.chaos.schedule import REQUIRED, make_schedule
from checkpoint_tui.proof.chaos.windows import window_cases
from checkpoint_tui.proof.measure.compare import compare_command
from checkpoint_tui.settings import Settings
from conftest import run_cli


def test_schedule_is_reproducible_and_covers_every_process():
    a = make_schedule(42, 30, 10)
    assert a == make_schedule(42, 30, 10)
    assert a != make_schedule(43, 30, 10)
    kinds = {e.kind for e in a}
    assert set(REQUIRED) <= kinds and len(a) == 10
    assert all(2 <= e.step < 30 for e in a) and len({e.step for e in a}) == 10


def test_short_chaos_schedule_loses_and_duplicates_nothing(session_root):
    home = Settings(home=session_root / "chaos-home")  # its own dev server: chaos kills it
    try:
        junit, bundle = home.home / "chaos.xml", home.home / "proof"
        out = run_cli("chaos", "--seed", "3", "--steps", "12", "--kills", "6", "--junit", str(junit),
                      "--proof", str(bundle), home=home, timeout=240)  # fmt: skip
        report = json.loads((home.run_dir / "chaos-seed3.json").read_text())
    finally:
        run_cli("stop", home=home)
    # the JUnit file and the bundle count what the JSON report counts; its histories (SIGKILLs inside
    # activities, in the claim window, of the dev server) replay with no server running
    assert [c["ok"] for c in report["checks"]] == [True] * 4
    cases = report["checks"] + [asdict(c) for c in window_cases(report)]  # and one case per kill window
    assert report["windows"] and sum(report["windows"].values()) == len(report["kill_windows"]) >= 1
    assert_junit_matches(junit, cases)
    assert assert_bundle(bundle, report["checks"], cases) == [report["audit"]["run_id"]]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED"
    assert (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (0, 0, [])
    kinds = {k["kind"] for k in report["kills"]}
    assert {"supervisor", "temporal-server"} <= kinds and len(report["kills"]) >= 5
    assert audit["interrupted"] >= 1 and audit["recovered"] >= 1  # the claim-window crash was finished
    assert "seed=3" in out.stdout and "LOST 0 · DUPLICATED 0" in out.stdout


async def test_naive_sends_twice_durable_once(home):
    code = await compare_command(home, steps=5, kill_step=3, pace=0.1)
    c = read_comparison(home)
    assert c is not None
    assert c.naive.repeated >= 1 and c.naive.emails > 5  # the restart re-sent emails 1..3
    assert c.durable.emails == 5 and c.durable.repeated == 0 and c.durable.ledger_duplicates == 0
    assert code == 0
    run_cli("stop", home=home)


def test_chaos_over_four_concurrent_runs_keeps_each_exactly_once(session_root):
    """#29's line: `chaos --seed 9 --steps 12 --kills 5 --runs 4`. Four runs on the same workers under one
    schedule (the first places the events, so each kill interrupts whatever of the four the worker
    held); every run COMPLETED, nothing lost or duplicated in any, no effect id twice in the ledger."""
    home = Settings(home=session_root / "chaos-runs")  # its own dev server: chaos kills it
    report_path = home.home / "r.json"
    try:
        out = run_cli("chaos", "--seed", "9", "--steps", "12", "--kills", "5", "--runs", "4",
                      "--json", str(report_path), home=home, timeout=300)  # fmt: skip
        report = json.loads(report_path.read_text())
        conn = connect(home.ledger)
        dup = conn.execute("SELECT COUNT(*) - COUNT(DISTINCT id) FROM effects").fetchone()[0]
        per_run = dict(conn.execute("SELECT run_id, COUNT(*) FROM effects GROUP BY run_id").fetchall())
    finally:
        run_cli("stop", home=home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    runs = report["runs"]
    assert len(runs) == 4 and runs[0]["run_id"] == report["run_id"] and len({r["run_id"] for r in runs}) == 4
    for r in runs:
        a = r["audit"]
        assert a["workflow_status"] == "COMPLETED" and (a["lost"], a["duplicated"], a["step_gaps"]) == (0, 0, [])
        assert per_run[r["run_id"]] == 36  # 12 steps x 3 effects, each id once
    assert dup == 0
    t = report["totals"]
    assert (t["runs"], t["runs_completed"], t["lost"], t["duplicated"]) == (4, 4, 0, 0)
    assert len(report["checks"]) == 16 and all(c["ok"] for c in report["checks"])
    assert len(report["kills"]) >= 4 and "4/4 runs COMPLETED" in out.stdout and "verdict: PASS" in out.stdout
    # a window classification per run: each worker death placed in each run, from that run's history
    deaths = {(k["pid"], k["at"]) for k in report["kill_windows"]}
    assert deaths and len(report["kill_windows"]) == 4 * len(deaths)
    for r in runs:
        assert {(k["pid"], k["at"]) for k in report["kill_windows"] if k["run_id"] == r["run_id"]} == deaths
        assert f"    {r['run_id']}: " in out.stdout
    assert "worker deaths, each placed in 4 runs)" in out.stdout


async def test_an_event_with_nothing_to_hit_is_reported_not_fired(tmp_path):
    """Between a worker's death and its replacement there may be no worker to kill, pause or hang (a
    fresh-clone run on a loaded machine fired 5 of 6 kills and reported 5 + 0): the event is listed in
    `not_fired` with why, never dropped."""
    from checkpoint_tui.proof.chaos.engine import Chaos
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.workloads import AgentLoopWorkload

    target = AgentLoopWorkload(6, 0.3).chaos_target(1)
    chaos = Chaos(Settings(home=tmp_path / "empty"), 1, 6, [], target)  # nothing of this home runs
    events = [ChaosEvent(2, "worker-in-activity", 0), ChaosEvent(3, "pause", 0, duration_s=0.5),
              ChaosEvent(4, "hang", 0), ChaosEvent(5, "temporal-server", 0)]  # fmt: skip
    for ev in events:
        await chaos.fire(ev, "run-20261202-120000-abcd")
    assert [(e.event["at_step"], e.why) for e in chaos.not_fired] == [
        (2, "no live worker at that moment"), (3, "no live worker at that moment"),
        (4, "no live worker at that moment"), (5, "no dev server of this home was running"),
    ]  # fmt: skip
    assert chaos.kills == chaos.pauses == []
